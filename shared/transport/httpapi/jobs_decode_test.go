package httpapi

import (
	"testing"

	"github.com/genway/genway/shared/apierr"
)

func TestDecodeCreateJob(t *testing.T) {
	tests := []struct {
		body      string
		wantParam string
		wantCode  string
	}{
		{`{"type":"music","model":"m","prompt":"p","duration":30,"format":"mp3","mode":"LYRICS","lyrics":"l"}`, "", ""},
		{`{"type":"video","model":"m","prompt":"p","size":"64x64","resolution":"720p","duration":5.0}`, "", ""},
		{`{"type":"sfx","model":"m","prompt":"p","category":null,"duration":null}`, "", ""},
		{``, "", "invalid_json"},
		{`null`, "", "invalid_json"},
		{`"str"`, "", "invalid_json"},
		{`[]`, "", "invalid_json"},
		{`{"type":1}`, "type", "invalid_type"},
		{`{"prompt":["a"]}`, "prompt", "invalid_type"},
		{`{"duration":"30"}`, "duration", "invalid_type"},
		{`{"duration":1.5}`, "duration", "invalid_type"},
		{`{"duration":1e12}`, "duration", "invalid_type"},
		{`{"duration":true}`, "duration", "invalid_type"},
		{`{"n":1}`, "n", "unknown_parameter"},
		{`{"webhook_url":1}`, "webhook_url", "invalid_type"},
		{`{"type":"sfx",}`, "", "invalid_json"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			req, err := DecodeCreateJob([]byte(tt.body))
			if tt.wantCode == "" {
				if err != nil || req == nil {
					t.Fatalf("DecodeCreateJob(%q) = %v; want ok", tt.body, err)
				}
				return
			}
			e := apierr.As(err)
			if e == nil || e.Code != tt.wantCode || e.Param != tt.wantParam || e.Kind != apierr.Invalid {
				t.Errorf("DecodeCreateJob(%q) = %v; want 400 %s param %q", tt.body, err, tt.wantCode, tt.wantParam)
			}
		})
	}
	req, _ := DecodeCreateJob([]byte(`{"type":"music","model":"m","prompt":"p","duration":7,"format":"wav","webhook_url":"https://h.example/x"}`))
	if req.Type != "music" || req.Duration == nil || *req.Duration != 7 || req.Format == nil || *req.Format != "wav" || req.Size != nil ||
		req.WebhookURL != "https://h.example/x" {
		t.Errorf("DecodeCreateJob fields = %+v", req)
	}
}

// FuzzDecodeCreateJob checks that any body either decodes or yields a 400
// *apierr.Error, never a panic or another kind of error.
func FuzzDecodeCreateJob(f *testing.F) {
	for _, s := range []string{`{"type":"music","model":"synthetic-music","prompt":"p","duration":30}`, `{"duration":1.0}`, `{}`, `[`, `{"size":"1x1"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeCreateJob(body)
		if err == nil {
			if req == nil {
				t.Fatal("nil request without error")
			}
			return
		}
		if e := apierr.As(err); e == nil || e.Kind != apierr.Invalid {
			t.Fatalf("DecodeCreateJob(%q) = %v; want a 400 *apierr.Error", body, err)
		}
	})
}
