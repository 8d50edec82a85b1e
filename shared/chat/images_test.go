package chat

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestParseDataURI(t *testing.T) {
	gif := []byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;")
	b64 := base64.StdEncoding.EncodeToString(gif)
	tests := []struct {
		uri        string
		wantType   string
		wantReason string // substring; "" for success
	}{
		{"data:image/gif;base64," + b64, "image/gif", ""},
		{"DATA:IMAGE/GIF;BASE64," + b64, "image/gif", ""},
		{"data:image/png;base64," + b64, "image/gif", ""}, // mislabelled: the bytes win
		{"data:image/gif;base64," + strings.TrimRight(b64, "="), "image/gif", ""},
		{"data:image/gif;charset=x;base64," + b64, "image/gif", ""},
		{"data:image/bmp;base64," + b64, "", "media type"},
		{"data:image/gif," + b64, "", "base64-encoded"},
		{"data:image/gif;base64", "", "no comma"},
		{"data:image/gif;base64,", "", "no data"},
		{"data:image/gif;base64,%%%", "", "not valid base64"},
		{"data:image/gif;base64," + base64.StdEncoding.EncodeToString([]byte("plain text")), "", "not a png"},
		{"data:image/gif;base64," + base64.StdEncoding.EncodeToString(make([]byte, 200)), "", "larger than"},
		{"file:///etc/passwd", "", "http(s) URL or a data URI"},
	}
	for _, tt := range tests {
		t.Run(tt.uri[:min(len(tt.uri), 40)], func(t *testing.T) {
			mt, data, reason := parseDataURI(tt.uri, 100)
			if tt.wantReason != "" {
				if !strings.Contains(reason, tt.wantReason) {
					t.Errorf("parseDataURI(%q) reason = %q; want it to contain %q", tt.uri, reason, tt.wantReason)
				}
				return
			}
			if reason != "" || mt != tt.wantType || string(data) != string(gif) {
				t.Errorf("parseDataURI(%q) = %q, %d bytes, %q; want %q, the gif", tt.uri, mt, len(data), reason, tt.wantType)
			}
		})
	}
}

// FuzzParseDataURI: any input either fails with a reason or yields an
// allowed type and non-empty data within the cap.
func FuzzParseDataURI(f *testing.F) {
	f.Add("data:image/png;base64,iVBORw0KGgo=")
	f.Add("data:image/gif;base64,R0lGODlhAQABAAAAADs=")
	f.Add("data:;base64,")
	f.Add("data:image/webp;base64,UklGRgAAAABXRUJQVlA4IA==")
	f.Fuzz(func(t *testing.T, s string) {
		mt, data, reason := parseDataURI(s, 1024)
		if reason != "" {
			if mt != "" || data != nil {
				t.Errorf("parseDataURI(%q) = %q, %d bytes with reason %q; want nothing", s, mt, len(data), reason)
			}
			return
		}
		if !imageTypes[mt] || len(data) == 0 || len(data) > 1024 {
			t.Errorf("parseDataURI(%q) = %q, %d bytes; want an image type and 1..1024 bytes", s, mt, len(data))
		}
	})
}
