package jobs

import (
	"testing"

	"github.com/genway/genway/shared/catalog"
)

// TestMediaType: each kind of output takes its own types, by any of their
// names, parameters dropped and case folded; nothing else, and no type for
// an unknown kind. ServedType serves a type some kind takes, and anything
// else as a download.
func TestMediaType(t *testing.T) {
	tests := []struct {
		kind, contentType string
		want              string
		ok                bool
	}{
		{TypeMusic, "audio/mpeg", "audio/mpeg", true},
		{TypeMusic, "audio/mp3", "audio/mpeg", true},
		{TypeSFX, "Audio/X-WAV; rate=44100", "audio/wav", true},
		{TypeSFX, "audio/wave", "audio/wav", true},
		{TypeSFX, "audio/vnd.wave", "audio/wav", true},
		{TypeMusic, "audio/x-flac", "audio/flac", true},
		{TypeMusic, "audio/ogg", "audio/ogg", true},
		{TypeMusic, "audio/x-m4a", "audio/mp4", true},
		{TypeSFX, "audio/aac", "audio/aac", true},
		{TypeVideo, "video/mp4", "video/mp4", true},
		{TypeVideo, "video/webm", "video/webm", true},
		{TypeVideo, "video/quicktime", "video/quicktime", true},
		{catalog.TypeImage, "image/png", "image/png", true},
		{catalog.TypeImage, "image/jpg", "image/jpeg", true},
		{catalog.TypeImage, "image/webp", "image/webp", true},
		{TypeVideo, "audio/mpeg", "audio/mpeg", false},
		{TypeMusic, "video/mp4", "video/mp4", false},
		{catalog.TypeImage, "image/svg+xml", "image/svg+xml", false},
		{TypeMusic, "text/html", "text/html", false},
		{"speech", "audio/mpeg", "audio/mpeg", false},
		{TypeMusic, "not a type", "", false},
	}
	for _, tt := range tests {
		if got, ok := MediaType(tt.kind, tt.contentType); got != tt.want || ok != tt.ok {
			t.Errorf("MediaType(%q, %q) = %q, %v; want %q, %v", tt.kind, tt.contentType, got, ok, tt.want, tt.ok)
		}
	}
	for _, tt := range []struct{ contentType, want string }{
		{"audio/x-wav", "audio/wav"}, {"video/webm", "video/webm"}, {"image/jpg", "image/jpeg"},
		{"text/html", "application/octet-stream"}, {"", "application/octet-stream"},
	} {
		if got := ServedType(tt.contentType); got != tt.want {
			t.Errorf("ServedType(%q) = %q; want %q", tt.contentType, got, tt.want)
		}
	}
}
