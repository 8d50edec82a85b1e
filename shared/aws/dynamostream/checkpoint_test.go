package dynamostream

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestFileCheckpoints(t *testing.T) {
	ctx := context.Background()
	f := FileCheckpoints{Path: filepath.Join(t.TempDir(), "stream.json")}
	if got, err := f.Load(ctx, "arn:a"); err != nil || got != nil {
		t.Fatalf("Load with no file = %v, %v; want nothing, no error", got, err)
	}
	want := map[string]Position{
		"shard-1": {At: "100", Skip: []string{"e1", "e2"}},
		"shard-2": {After: "205"},
		"shard-0": {Done: true},
	}
	if err := f.Save(ctx, "arn:a", want); err != nil {
		t.Fatal(err)
	}
	if got, err := f.Load(ctx, "arn:a"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Load after Save = %v, %v; want %v", got, err, want)
	}
	if got, err := f.Load(ctx, "arn:b"); err != nil || got != nil {
		t.Errorf("Load of another stream = %v, %v; want nothing", got, err)
	}
	if fi, err := os.Stat(f.Path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("checkpoint file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	if err := os.WriteFile(f.Path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Load(ctx, "arn:a"); err == nil {
		t.Error("Load of a corrupt file = nil error; want one (Poll then catches up from the oldest record)")
	}
	entries, _ := os.ReadDir(filepath.Dir(f.Path))
	if len(entries) != 1 {
		t.Errorf("files beside the checkpoint: %v; want no temporary file left", entries)
	}
}

func TestSeqBefore(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"1", "2", true},
		{"2", "1", false},
		{"9", "10", true},
		{"1100000000017454423009", "1100000000017454423010", true},
		{"000000000000000000012345", "12346", true},
		{"12345", "12345", false},
		{"100000000000000000001", "99999999999999999999", false},
	}
	for _, tt := range tests {
		if got := seqBefore(tt.a, tt.b); got != tt.want {
			t.Errorf("seqBefore(%q, %q) = %v; want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestShardPosition(t *testing.T) {
	tests := []struct {
		name string
		s    shardState
		want Position
		ok   bool
	}{
		{"not read", shardState{}, Position{}, false},
		{"read, nothing handled since the refresh", shardState{lastSeq: "7"}, Position{After: "7"}, true},
		{"records handled since the refresh", shardState{lastSeq: "9", firstSeq: "8", handled: map[string]bool{"b": true, "a": true}},
			Position{At: "8", Skip: []string{"a", "b"}}, true},
		{"refreshed, not re-opened yet", shardState{lastSeq: "9", from: "8", skip: map[string]bool{"a": true}},
			Position{At: "8", Skip: []string{"a"}}, true},
	}
	for _, tt := range tests {
		got, ok := tt.s.position()
		if ok != tt.ok || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: position() = %+v, %v; want %+v, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		// What a resumed reader re-opens at is the same position.
		if ok {
			if back, _ := resume("", got).position(); !reflect.DeepEqual(back, got) {
				t.Errorf("%s: resume(%+v).position() = %+v; want it back", tt.name, got, back)
			}
		}
	}
}
