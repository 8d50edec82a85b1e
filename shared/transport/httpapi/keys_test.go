package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
)

// TestModelsOfScopedKey: GET /v1/models with a key limited to patterns
// lists only the models they match, and GET /v1/models/{id} of another
// is a 404; without a principal (no key controls) every model is listed.
func TestModelsOfScopedKey(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	list, one := ListModels(cat, everyProvider, log), GetModel(cat, everyProvider, log)
	mux := http.NewServeMux()
	mux.Handle("GET /v1/models", list)
	mux.Handle("GET /v1/models/{id...}", one)
	tests := []struct {
		name     string
		patterns []string
		allowed  func(id string) bool
	}{
		{"every model", nil, func(string) bool { return true }},
		{"synthetic/* and elevenlabs-*", []string{"synthetic/*", "elevenlabs-*"}, func(id string) bool {
			return strings.HasPrefix(id, "synthetic/") || strings.HasPrefix(id, "elevenlabs-")
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := auth.Principal{Account: "a", KeyID: "key_1", Models: tt.patterns}
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", "/v1/models", nil)
			mux.ServeHTTP(rec, req.WithContext(auth.WithPrincipal(req.Context(), p)))
			var got struct{ Data []struct{ ID string } }
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || rec.Code != 200 {
				t.Fatalf("GET /v1/models = %d %s", rec.Code, rec.Body)
			}
			want := 0
			for _, m := range cat.List("", nil) {
				if tt.allowed(m.ID) {
					want++
				}
			}
			if len(got.Data) != want || want == 0 {
				t.Errorf("GET /v1/models lists %d models; want the %d the key may use", len(got.Data), want)
			}
			for _, m := range got.Data {
				if !tt.allowed(m.ID) {
					t.Errorf("GET /v1/models lists %s, which the key may not use", m.ID)
				}
			}
			rec = httptest.NewRecorder()
			req = httptest.NewRequest("GET", "/v1/models/openai/gpt-4o-mini", nil)
			mux.ServeHTTP(rec, req.WithContext(auth.WithPrincipal(req.Context(), p)))
			if want := map[bool]int{true: 200, false: 404}[tt.allowed("openai/gpt-4o-mini")]; rec.Code != want {
				t.Errorf("GET /v1/models/openai/gpt-4o-mini = %d; want %d", rec.Code, want)
			}
		})
	}
}

// TestPermissionDeniedEnvelope: the key's model refusal is a 403 with
// type permission_error and code model_not_allowed, naming the param.
func TestPermissionDeniedEnvelope(t *testing.T) {
	ctx := auth.WithPrincipal(t.Context(), auth.Principal{Account: "a", Models: []string{"synthetic/*"}})
	rec := httptest.NewRecorder()
	writeError(rec, httptest.NewRequest("POST", "/v1/jobs", nil), slog.New(slog.DiscardHandler), auth.CheckModel(ctx, "model", "openai/gpt-4o"))
	var e struct {
		Error struct{ Type, Code, Param, Message string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || rec.Code != 403 || e.Error.Type != "permission_error" ||
		e.Error.Code != "model_not_allowed" || e.Error.Param != "model" || !strings.Contains(e.Error.Message, "openai/gpt-4o") {
		t.Errorf("model_not_allowed = %d %s; want 403 permission_error model_not_allowed for param model", rec.Code, rec.Body)
	}
}
