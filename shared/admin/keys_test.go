package admin_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// TestKeyControls makes a key with every control and changes them, with
// the Service and with the Client over the admin API: the record, the
// listing and the audit log say the same, and bad controls are 400s.
func TestKeyControls(t *testing.T) {
	_, ops := operators(t)
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			lim := 10 * credits.Credit
			c := auth.Controls{Name: "intern", Models: []string{"synthetic/*"}, ExpiresAt: 1_800_000_000, CreditLimit: &lim}
			_, rec, err := op.CreateKey(ctx, "acme-"+name, 5, c)
			if err != nil || !reflect.DeepEqual(rec.Controls, c) {
				t.Fatalf("CreateKey(%+v) = %+v, %v; want those controls", c, rec, err)
			}
			keys, err := op.Keys(ctx, "acme-"+name)
			if err != nil || len(keys) != 1 || !reflect.DeepEqual(keys[0].Controls, c) || keys[0].Spent != 0 {
				t.Fatalf("Keys = %+v, %v; want the key with its controls, nothing spent", keys, err)
			}
			none, renamed := -credits.Credit, "renamed"
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
					n := -2 * credits.Credit
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

// TestKeyReset makes a key whose credit limit resets monthly and changes
// its reset, with the Service and with the Client over the admin API: a
// new key starts in the current period (by the Service's clock), the
// audit log names the reset, removing the limit removes the reset, and a
// reset without a limit or of an unknown kind is a 400 naming
// credit_limit_reset.
func TestKeyReset(t *testing.T) {
	_, ops := operators(t) // the Service's clock: 2023-11-14
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			lim := 10 * credits.Credit
			c := auth.Controls{CreditLimit: &lim, CreditLimitReset: auth.ResetMonthly}
			_, rec, err := op.CreateKey(ctx, "reset-"+name, 0, c)
			if err != nil || !reflect.DeepEqual(rec.Controls, c) || rec.Period != "2023-11" {
				t.Fatalf("CreateKey(%+v) = %+v, %v; want those controls, period 2023-11", c, rec, err)
			}
			keys, err := op.Keys(ctx, "reset-"+name)
			if err != nil || len(keys) != 1 || keys[0].CreditLimitReset != auth.ResetMonthly || keys[0].Period != "2023-11" {
				t.Fatalf("Keys = %+v, %v; want the monthly key in period 2023-11", keys, err)
			}
			weekly := "weekly"
			got, err := op.UpdateKey(ctx, rec.Prefix, auth.Change{CreditLimitReset: &weekly})
			if err != nil || got.CreditLimitReset != auth.ResetWeekly || *got.CreditLimit != 10*credits.Credit {
				t.Errorf("UpdateKey(reset weekly) = %+v, %v; want weekly, limit kept", got, err)
			}
			none := -credits.Credit
			got, err = op.UpdateKey(ctx, rec.Prefix, auth.Change{CreditLimit: &none})
			if err != nil || got.CreditLimit != nil || got.CreditLimitReset != auth.ResetNever {
				t.Errorf("UpdateKey(no limit) = %+v, %v; want no limit and no reset", got, err)
			}
			entries, err := op.Audit(ctx, "", 20)
			if err != nil {
				t.Fatal(err)
			}
			var details []string
			for _, e := range entries {
				if strings.Contains(e.Target, rec.Prefix) {
					details = append(details, e.Action+": "+e.Detail)
				}
			}
			all := strings.Join(details, "\n")
			for _, want := range []string{"keys.create: credit_limit=10 reset=monthly", "keys.update: credit_limit=10 reset=monthly -> credit_limit=10 reset=weekly",
				"keys.update: credit_limit=10 reset=weekly -> no controls"} {
				if !strings.Contains(all, want) {
					t.Errorf("audit of the key =\n%s\nwant a line %q", all, want)
				}
			}
			yearly := "yearly"
			for what, err := range map[string]error{
				"create without a limit": func() error {
					_, _, err := op.CreateKey(ctx, "reset-"+name, 0, auth.Controls{CreditLimitReset: auth.ResetDaily})
					return err
				}(),
				"update to a reset without a limit": func() error {
					_, err := op.UpdateKey(ctx, rec.ID, auth.Change{CreditLimitReset: &weekly})
					return err
				}(),
				"unknown reset": func() error {
					_, err := op.UpdateKey(ctx, rec.ID, auth.Change{CreditLimit: &lim, CreditLimitReset: &yearly})
					return err
				}(),
			} {
				if e := apierr.As(err); e == nil || e.Kind != apierr.Invalid || !strings.Contains(e.Param+e.Message, "credit_limit_reset") {
					t.Errorf("%s = %v; want a 400 naming credit_limit_reset", what, err)
				}
			}
		})
	}
}
