package chat_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// keyBalances is a chat.KeyBalances: an account with plenty of credits
// and one key with limit, spent and held.
type keyBalances struct {
	*fakeBalances
	key   auth.Record
	reads int
}

func (k *keyBalances) KeyByID(ctx context.Context, id string) (auth.Record, error) {
	k.reads++
	if id != k.key.ID {
		return auth.Record{}, auth.ErrKeyNotFound
	}
	return k.key, nil
}

// TestAdmitKeyLimit: a priced completion is refused (402
// key_credit_limit) once the caller's key has spent and holds its
// limit, admitted below it; an unpriced one, a key without a limit and a
// caller without a key read nothing.
func TestAdmitKeyLimit(t *testing.T) {
	lim := int64(10)
	tests := []struct {
		name        string
		model       string
		p           *auth.Principal
		spent, held int64
		noLimit     bool
		wantErr     bool
		wantReads   int
	}{
		{"below the limit", "synthetic/priced", &auth.Principal{Account: "acct", KeyID: "key_1", Limited: true}, 6, 3, false, false, 1},
		{"at the limit", "synthetic/priced", &auth.Principal{Account: "acct", KeyID: "key_1", Limited: true}, 7, 3, false, true, 1},
		{"past the limit", "synthetic/priced", &auth.Principal{Account: "acct", KeyID: "key_1", Limited: true}, 12, 0, false, true, 1},
		{"limit removed since the key was cached", "synthetic/priced", &auth.Principal{Account: "acct", KeyID: "key_1", Limited: true}, 12, 0, true, false, 1},
		{"key without a limit", "synthetic/priced", &auth.Principal{Account: "acct", KeyID: "key_1"}, 12, 0, false, false, 0},
		{"no key", "synthetic/priced", nil, 12, 0, false, false, 0},
		{"unpriced model", "synthetic/echo", &auth.Principal{Account: "acct", KeyID: "key_1", Limited: true}, 12, 0, false, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kb := &keyBalances{fakeBalances: available(1000), key: auth.Record{ID: "key_1", Spent: tt.spent, Held: tt.held}}
			if !tt.noLimit {
				kb.key.CreditLimit = &lim
			}
			gw := chat.NewGateway(chat.Config{Catalog: admitCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}, Balances: kb})
			ctx := context.Background()
			if tt.p != nil {
				ctx = auth.WithPrincipal(ctx, *tt.p)
			}
			err := gw.Admit(ctx, "acct", admitCall(t, gw, tt.model))
			if e := apierr.As(err); tt.wantErr != (err != nil) || (tt.wantErr && (!errors.Is(err, credits.ErrKeyLimit) || e == nil ||
				e.Kind != apierr.InsufficientQuota || !strings.Contains(e.Message, "0 left of 10"))) {
				t.Errorf("Admit = %v; want a key limit refusal saying 0 left of 10: %v", err, tt.wantErr)
			}
			if kb.reads != tt.wantReads {
				t.Errorf("Admit read the key %d times; want %d", kb.reads, tt.wantReads)
			}
		})
	}
}

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
