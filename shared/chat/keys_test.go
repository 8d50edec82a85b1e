package chat_test

import (
	"context"
	"errors"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
)

// TestRunModelScope: a key's model patterns apply to the model and to
// every id of the request's models list (403 model_not_allowed naming
// the field), before any upstream call.
func TestRunModelScope(t *testing.T) {
	gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}})
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{Account: "acct", KeyID: "key_1", Models: []string{"synthetic/echo", "synthetic/z*"}})
	tests := []struct {
		name  string
		p     chat.Params
		param string // "" for no error
	}{
		{"allowed", chat.Params{Model: "synthetic/echo"}, ""},
		{"model not allowed", chat.Params{Model: "synthetic/priced"}, "model"},
		{"models[1] not allowed", chat.Params{Model: "synthetic/echo", Models: []string{"synthetic/zero", "synthetic/priced"}}, "models[1]"},
		{"lead from models not allowed", chat.Params{Models: []string{"synthetic/priced"}}, "models[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.p
			p.Messages = []chat.ParamsMessage{{Role: chat.RoleUser, Content: []byte(`"hi"`)}}
			err := gw.Run(ctx, "acct", &p, &sink{})
			if tt.param == "" {
				if errors.Is(err, auth.ErrModelNotAllowed) {
					t.Errorf("Run = %v; want no scope refusal", err)
				}
				return
			}
			if e := apierr.As(err); !errors.Is(err, auth.ErrModelNotAllowed) || e == nil || e.Param != tt.param || e.Kind != apierr.PermissionDenied {
				t.Errorf("Run = %#v; want 403 model_not_allowed for %s", err, tt.param)
			}
		})
	}
}
