package jobs

import (
	"os"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
)

func TestCanTransition(t *testing.T) {
	all := []Status{Queued, Processing, Completed, Failed}
	allowed := map[[2]Status]bool{
		{Queued, Processing}:     true,
		{Queued, Failed}:         true,
		{Processing, Processing}: true,
		{Processing, Completed}:  true,
		{Processing, Failed}:     true,
	}
	for _, from := range all {
		for _, to := range all {
			want := allowed[[2]Status{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v; want %v", from, to, got, want)
			}
		}
	}
	for _, s := range all {
		if got, want := s.Final(), s == Completed || s == Failed; got != want {
			t.Errorf("%s.Final() = %v; want %v", s, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestValidate(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("a", MaxPromptChars+1)
	tests := []struct {
		name      string
		req       CreateRequest
		wantParam string
		wantCode  string
		wantKind  apierr.Kind
		want      Input
	}{
		{name: "music defaults", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "calm piano"},
			want: Input{Prompt: "calm piano", Duration: 30, Format: "mp3", Mode: "DESCRIPTION"}},
		{name: "sfx defaults", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "door"},
			want: Input{Prompt: "door", Duration: 5, Format: "mp3"}},
		{name: "video defaults", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "ball"},
			want: Input{Prompt: "ball", Duration: 5, Format: "mp4", Size: "640x360"}},
		{name: "video resolution", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "b", Resolution: ptr("720p")},
			want: Input{Prompt: "b", Duration: 5, Format: "mp4", Size: "1280x720", Resolution: "720p"}},
		{name: "video size and matching resolution", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "b", Size: ptr("320x240"), Resolution: ptr("240p")},
			want: Input{Prompt: "b", Duration: 5, Format: "mp4", Size: "320x240", Resolution: "240p"}},
		{name: "lyrics", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Mode: ptr("LYRICS"), Lyrics: ptr("la la"), Format: ptr("wav"), Duration: ptr(10)},
			want: Input{Prompt: "p", Duration: 10, Format: "wav", Mode: "LYRICS", Lyrics: "la la"}},
		{name: "mp4 on synthetic video", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "b", Format: ptr("mp4")},
			want: Input{Prompt: "b", Duration: 5, Format: "mp4", Size: "640x360"}},
		{name: "mp4 on veo", req: CreateRequest{Type: "video", Model: "veo-3.1", Prompt: "b", Format: ptr("mp4")},
			want: Input{Prompt: "b", Duration: 8, Format: "mp4", Size: "1280x720"}},
		{name: "veo defaults", req: CreateRequest{Type: "video", Model: "veo-3.1-fast", Prompt: "b"},
			want: Input{Prompt: "b", Duration: 8, Format: "mp4", Size: "1280x720"}},
		{name: "mp4 on kling", req: CreateRequest{Type: "video", Model: "kling-2.5-turbo", Prompt: "b", Format: ptr("mp4"), Duration: ptr(10)},
			want: Input{Prompt: "b", Duration: 10, Format: "mp4", Size: "1920x1080"}},
		{name: "sfx category", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Category: ptr("impact")},
			want: Input{Prompt: "p", Duration: 5, Format: "mp3", Category: "impact"}},

		{name: "missing type", req: CreateRequest{Model: "synthetic-music", Prompt: "p"}, wantParam: "type", wantCode: "missing_field"},
		{name: "bad type", req: CreateRequest{Type: "image", Model: "synthetic-music", Prompt: "p"}, wantParam: "type", wantCode: "invalid_value"},
		{name: "missing model", req: CreateRequest{Type: "music", Prompt: "p"}, wantParam: "model", wantCode: "missing_field"},
		{name: "unknown model", req: CreateRequest{Type: "music", Model: "nope", Prompt: "p"}, wantParam: "model", wantCode: "model_not_found", wantKind: apierr.NotFound},
		{name: "model of other type", req: CreateRequest{Type: "music", Model: "synthetic-sfx", Prompt: "p"}, wantParam: "model", wantCode: "model_type_mismatch"},
		{name: "chat model", req: CreateRequest{Type: "music", Model: "synthetic/echo", Prompt: "p"}, wantParam: "model", wantCode: "model_type_mismatch"},
		{name: "empty prompt", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "  "}, wantParam: "prompt", wantCode: "missing_field"},
		{name: "long prompt", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: long}, wantParam: "prompt", wantCode: "invalid_value"},
		{name: "zero duration", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Duration: ptr(0)}, wantParam: "duration", wantCode: "invalid_value"},
		{name: "negative duration", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Duration: ptr(-3)}, wantParam: "duration", wantCode: "invalid_value"},
		{name: "duration over max", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Duration: ptr(31)}, wantParam: "duration", wantCode: "invalid_value"},
		{name: "bad format", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Format: ptr("ogg")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "wav on music", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Format: ptr("wav")},
			want: Input{Prompt: "p", Duration: 30, Format: "wav", Mode: "DESCRIPTION"}},
		{name: "mp4 on audio", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Format: ptr("mp4")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "empty format on audio", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Format: ptr("")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "webm on video", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Format: ptr("webm")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "mp3 on video", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Format: ptr("mp3")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "upper-case MP4 on video", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Format: ptr("MP4")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "empty format on video", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Format: ptr("")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "mov on kling", req: CreateRequest{Type: "video", Model: "kling-2.5-turbo", Prompt: "p", Format: ptr("mov")}, wantParam: "format", wantCode: "invalid_value"},
		{name: "mode lowercase", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Mode: ptr("lyrics"), Lyrics: ptr("x")}, wantParam: "mode", wantCode: "invalid_value"},
		{name: "lyrics mode without lyrics", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Mode: ptr("LYRICS")}, wantParam: "lyrics", wantCode: "missing_field"},
		{name: "lyrics with description mode", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Lyrics: ptr("x")}, wantParam: "lyrics", wantCode: "invalid_value"},
		{name: "mode on sfx", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Mode: ptr("DESCRIPTION")}, wantParam: "mode", wantCode: "invalid_value"},
		{name: "category on music", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Category: ptr("x")}, wantParam: "category", wantCode: "invalid_value"},
		{name: "empty category", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Category: ptr(" ")}, wantParam: "category", wantCode: "invalid_value"},
		{name: "size on music", req: CreateRequest{Type: "music", Model: "synthetic-music", Prompt: "p", Size: ptr("10x10")}, wantParam: "size", wantCode: "invalid_value"},
		{name: "resolution on sfx", req: CreateRequest{Type: "sfx", Model: "synthetic-sfx", Prompt: "p", Resolution: ptr("720p")}, wantParam: "resolution", wantCode: "invalid_value"},
		{name: "bad size", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Size: ptr("640*360")}, wantParam: "size", wantCode: "invalid_value"},
		{name: "size leading zero", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Size: ptr("0640x360")}, wantParam: "size", wantCode: "invalid_value"},
		{name: "size too big", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Size: ptr("99999x360")}, wantParam: "size", wantCode: "invalid_value"},
		{name: "bad resolution", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Resolution: ptr("720")}, wantParam: "resolution", wantCode: "invalid_value"},
		{name: "video too large", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Size: ptr("4096x4096")}, wantParam: "size", wantCode: "invalid_value"},
		{name: "resolution too large", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Resolution: ptr("2160p")}, wantParam: "resolution", wantCode: "invalid_value"},
		{name: "resolution disagrees", req: CreateRequest{Type: "video", Model: "synthetic-video", Prompt: "p", Size: ptr("640x360"), Resolution: ptr("720p")}, wantParam: "resolution", wantCode: "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := Validate(cat, &tt.req)
			if tt.wantCode == "" {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v; want no error", tt.req, err)
				}
				if got != tt.want {
					t.Errorf("Validate(%+v) = %+v; want %+v", tt.req, got, tt.want)
				}
				return
			}
			e := apierr.As(err)
			if e == nil {
				t.Fatalf("Validate(%+v) = %v; want *apierr.Error %s", tt.req, err, tt.wantCode)
			}
			wantKind := tt.wantKind
			if wantKind == 0 {
				wantKind = apierr.Invalid
			}
			if e.Param != tt.wantParam || e.Code != tt.wantCode || e.Kind != wantKind {
				t.Errorf("Validate(%+v) error = {param %q code %q kind %d}; want {%q %q %d}", tt.req, e.Param, e.Code, e.Kind, tt.wantParam, tt.wantCode, wantKind)
			}
		})
	}
}

func TestNewIDAndValidID(t *testing.T) {
	seen := map[string]bool{}
	for _, typ := range []string{TypeMusic, TypeSFX, TypeVideo} {
		for i := 0; i < 100; i++ {
			id, err := NewID(typ)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(id, "job_"+typ+"_") || !ValidID(id) || seen[id] {
				t.Fatalf("NewID(%q) = %q; want a fresh valid id", typ, id)
			}
			seen[id] = true
		}
	}
	for _, id := range []string{"", "job_", "job_music_", "job_image_abcdefghijklmnopqrst", "job_music_ABCDEFGHIJKLMNOPQRST", "job_music_abc", "xjob_music_abcdefghijklmnopqrst", "job_music_abcdefghijklmnopqrs/"} {
		if ValidID(id) {
			t.Errorf("ValidID(%q) = true; want false", id)
		}
	}
}

// TestValidateVendorLimits: what a vendor cannot do (Veo: 4, 6 or 8 s;
// 16:9 or 9:16 at 720p or 1080p; 1080p only at 8 s) is a 400 at create.
func TestValidateVendorLimits(t *testing.T) {
	b, err := os.ReadFile("testdata/vendor_catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := catalog.Parse(b, catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	req := func(mod func(*CreateRequest)) CreateRequest {
		r := CreateRequest{Type: "video", Model: "veo-like", Prompt: "p"}
		mod(&r)
		return r
	}
	tests := []struct {
		name      string
		req       CreateRequest
		wantParam string
		want      Input
	}{
		{"defaults", req(func(r *CreateRequest) {}), "", Input{Prompt: "p", Format: "mp4", Duration: 8, Size: "1280x720"}},
		{"allowed duration", req(func(r *CreateRequest) { r.Duration = ptr(4) }), "", Input{Prompt: "p", Format: "mp4", Duration: 4, Size: "1280x720"}},
		{"portrait", req(func(r *CreateRequest) { r.Size = ptr("720x1280") }), "", Input{Prompt: "p", Format: "mp4", Duration: 8, Size: "720x1280"}},
		{"portrait with its resolution", req(func(r *CreateRequest) { r.Size = ptr("720x1280"); r.Resolution = ptr("720p") }), "",
			Input{Prompt: "p", Format: "mp4", Duration: 8, Size: "720x1280", Resolution: "720p"}},
		{"resolution picks the landscape size", req(func(r *CreateRequest) { r.Resolution = ptr("1080p") }), "",
			Input{Prompt: "p", Format: "mp4", Duration: 8, Size: "1920x1080", Resolution: "1080p"}},
		{"duration not offered", req(func(r *CreateRequest) { r.Duration = ptr(5) }), "duration", Input{}},
		{"size not offered", req(func(r *CreateRequest) { r.Size = ptr("640x360") }), "size", Input{}},
		{"resolution not offered", req(func(r *CreateRequest) { r.Resolution = ptr("480p") }), "resolution", Input{}},
		{"1080p at 4 s", req(func(r *CreateRequest) { r.Resolution = ptr("1080p"); r.Duration = ptr(4) }), "duration", Input{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, got, err := Validate(cat, &tt.req)
			if tt.wantParam == "" {
				if err != nil || got != tt.want {
					t.Fatalf("Validate = %+v, %v; want %+v", got, err, tt.want)
				}
				return
			}
			if e := apierr.As(err); e == nil || e.Param != tt.wantParam || e.Kind != apierr.Invalid {
				t.Fatalf("Validate = %v; want a 400 naming %q", err, tt.wantParam)
			}
		})
	}
}

// TestJobCharged: a final job shows what its settlement captures (its
// price, never more than it held; a failed one 0), a running one nothing.
func TestJobCharged(t *testing.T) {
	tests := []struct {
		status      Status
		price, hold credits.Amount
		want        credits.Amount
		final       bool
	}{
		{Queued, 5, 5, 0, false},
		{Processing, 5, 5, 0, false},
		{Completed, 3, 5, 3, true},
		{Completed, 7, 5, 5, true},
		{Completed, 4, 0, 4, true}, // stored before holds: the price was the hold
		{Failed, 5, 5, 0, true},
	}
	for _, tt := range tests {
		j := &Job{ID: "job_sfx_1", Status: tt.status, Price: tt.price, Hold: tt.hold}
		if got, ok := j.Charged(); got != tt.want || ok != tt.final {
			t.Errorf("Charged(%s, price %s, hold %s) = %s, %v; want %s, %v", tt.status, tt.price, tt.hold, got, ok, tt.want, tt.final)
		}
	}
}
