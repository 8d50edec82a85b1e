package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNPMSpeech runs clients/npm/speech.mjs, the official openai npm
// client's audio.speech.create (streamed, wav and mp3), unmodified,
// against genway serve. Without node or the packages it skips, in CI it
// fails.
func TestNPMSpeech(t *testing.T) {
	node, dir := npmClients(t, filepath.Join("openai", "package.json"))
	s := startServer(t, t.TempDir(), nil)
	out := runNode(t, node, dir, []string{"GENWAY_URL=" + s.base, "GENWAY_KEY=" + s.key}, "speech.mjs")
	if n := strings.Count(string(out), "ok "); n != 4 {
		t.Errorf("node speech.mjs reported %d checks; want 4", n)
	}
}
