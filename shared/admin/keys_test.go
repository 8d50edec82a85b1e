package admin_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
)

// TestKeyControls makes a key with every control and changes them, with
// the Service and with the Client over the admin API: the record, the
// listing and the audit log say the same, and bad controls are 400s.
func TestKeyControls(t *testing.T) {
	_, ops := operators(t)
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			lim := int64(10)
			c := auth.Controls{Name: "intern", Models: []string{"synthetic/*"}, ExpiresAt: 1_800_000_000, CreditLimit: &lim}
			_, rec, err := op.CreateKey(ctx, "acme-"+name, 5, c)
			if err != nil || !reflect.DeepEqual(rec.Controls, c) {
				t.Fatalf("CreateKey(%+v) = %+v, %v; want those controls", c, rec, err)
			}
			keys, err := op.Keys(ctx, "acme-"+name)
			if err != nil || len(keys) != 1 || !reflect.DeepEqual(keys[0].Controls, c) || keys[0].Spent != 0 {
				t.Fatalf("Keys = %+v, %v; want the key with its controls, nothing spent", keys, err)
			}
			none, renamed := int64(-1), "renamed"
			got, err := op.UpdateKey(ctx, rec.Prefix, auth.Change{Name: &renamed, CreditLimit: &none})
			if err != nil || got.Name != "renamed" || got.CreditLimit != nil || len(got.Models) != 1 || got.ExpiresAt != c.ExpiresAt || got.ID != rec.ID {
				t.Errorf("UpdateKey(name, no limit) = %+v, %v; want renamed, no limit, the rest kept", got, err)
			}
			entries, err := op.Audit(ctx, "", 10)
			if err != nil {
				t.Fatal(err)
			}
			var create, update string
			for _, e := range entries {
				if strings.Contains(e.Target, rec.Prefix) {
					switch e.Action {
					case "keys.create":
						create = e.Detail
					case "keys.update":
						update = e.Detail
					}
				}
			}
			if !strings.Contains(create, `name="intern"`) || !strings.Contains(create, "credit_limit=10") || !strings.Contains(create, "models=synthetic/*") {
				t.Errorf("keys.create audit detail = %q; want the controls", create)
			}
			if !strings.Contains(update, "credit_limit=10") || !strings.Contains(update, `-> name="renamed"`) {
				t.Errorf("keys.update audit detail = %q; want the controls before and after", update)
			}
			bad := []struct {
				what string
				err  error
			}{
				{"empty change", func() error { _, err := op.UpdateKey(ctx, rec.ID, auth.Change{}); return err }()},
				{"bad pattern", func() error { _, err := op.UpdateKey(ctx, rec.ID, auth.Change{Models: &[]string{"a b"}}); return err }()},
				{"past expiry", func() error { _, _, err := op.CreateKey(ctx, "acme-"+name, 0, auth.Controls{ExpiresAt: 1}); return err }()},
				{"negative limit", func() error {
					n := int64(-2)
					_, _, err := op.CreateKey(ctx, "acme-"+name, 0, auth.Controls{CreditLimit: &n})
					return err
				}()},
			}
			for _, b := range bad {
				if e := apierr.As(b.err); e == nil || e.Kind != apierr.Invalid {
					t.Errorf("%s = %v; want a 400", b.what, b.err)
				}
			}
			if _, err := op.UpdateKey(ctx, "key_0000ffff", auth.Change{Name: &renamed}); err == nil || (!errors.Is(err, auth.ErrKeyNotFound) && !strings.Contains(err.Error(), "No key")) {
				t.Errorf("UpdateKey(unknown) = %v; want not found", err)
			}
		})
	}
}
