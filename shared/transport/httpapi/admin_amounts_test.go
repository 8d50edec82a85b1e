package httpapi

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// TestAdminAmounts: the admin API takes and shows credits as exact
// decimal numbers (to 6 places); an amount with more, past the maximum,
// or that would take a balance past it, and a rate limit below -1 (the
// one spelling of unlimited), are 400s naming the field, and change
// nothing.
func TestAdminAmounts(t *testing.T) {
	e := adminServer(t)
	type account struct{ Balance, Held, Available credits.Amount }
	var a account
	if status, body := e.call(t, bearer, "POST", "/admin/v1/accounts", `{"id":"frac","credits":0.25}`, &a); status != 200 || a.Balance != 250_000 {
		t.Fatalf("POST /admin/v1/accounts 0.25 = %d %s; want balance 0.25", status, body)
	}
	if status, body := e.call(t, bearer, "POST", "/admin/v1/accounts/frac/grants", `{"amount":1E-6}`, &a); status != 200 || a.Balance != 250_001 {
		t.Fatalf("grant 1E-6 = %d %s; want balance 0.250001", status, body)
	}
	if _, body := e.call(t, bearer, "GET", "/admin/v1/accounts/frac", "", nil); !json.Valid([]byte(body)) || !strings.Contains(body, `"balance":0.250001`) {
		t.Errorf("GET /admin/v1/accounts/frac = %s; want the balance as the number 0.250001", body)
	}
	var key struct {
		CreditLimit credits.Amount `json:"credit_limit"`
		Left        credits.Amount `json:"left"`
	}
	if status, body := e.call(t, bearer, "POST", "/admin/v1/keys", `{"account":"frac","credit_limit":1.5}`, &key); status != 200 || key.CreditLimit != 1_500_000 || key.Left != 1_500_000 {
		t.Fatalf("POST /admin/v1/keys credit_limit 1.5 = %d %s; want the limit and 1.5 left", status, body)
	}
	refused := []struct {
		name, method, path, body, param string
	}{
		{"7 decimal places", "POST", "/admin/v1/accounts/frac/grants", `{"amount":0.0000001}`, "amount"},
		{"an amount as a string", "POST", "/admin/v1/accounts/frac/grants", `{"amount":"1"}`, "amount"},
		{"a grant past the maximum", "POST", "/admin/v1/accounts/frac/grants", `{"amount":1000000000000}`, "amount"},
		{"an amount past the maximum", "POST", "/admin/v1/accounts/frac/grants", `{"amount":1e13}`, "amount"},
		{"an account past the maximum", "POST", "/admin/v1/accounts", `{"id":"huge","credits":1000000000000.000001}`, "credits"},
		{"a key's credits of 7 places", "POST", "/admin/v1/keys", `{"account":"frac","credits":0.1234567}`, "credits"},
		{"a key's credits past the account's maximum", "POST", "/admin/v1/keys", `{"account":"frac","credits":1000000000000}`, "credits"},
		{"a limit past the maximum", "POST", "/admin/v1/keys", `{"account":"frac","credit_limit":1e13}`, "credit_limit"},
		{"a limit of 7 places", "POST", "/admin/v1/keys", `{"account":"frac","credit_limit":0.1234567}`, "credit_limit"},
		{"a rate limit below -1", "POST", "/admin/v1/accounts/frac/rate_limit", `{"rpm":-1000}`, "rpm"},
	}
	for _, tt := range refused {
		status, body := e.call(t, bearer, tt.method, tt.path, tt.body, nil)
		var env struct {
			Error struct {
				Param *string `json:"param"`
				Type  string  `json:"type"`
			} `json:"error"`
		}
		json.Unmarshal([]byte(body), &env)
		if status != 400 || env.Error.Param == nil || *env.Error.Param != tt.param || env.Error.Type != "invalid_request_error" {
			t.Errorf("%s: %s %s %s = %d %s; want a 400 naming %s", tt.name, tt.method, tt.path, tt.body, status, body, tt.param)
		}
	}
	if _, body := e.call(t, bearer, "GET", "/admin/v1/accounts/frac", "", nil); !strings.Contains(body, `"balance":0.250001`) || strings.Contains(body, `"rate_limit"`) {
		t.Errorf("GET /admin/v1/accounts/frac after the refusals = %s; want it unchanged", body)
	}
	if _, body := e.call(t, bearer, "GET", "/admin/v1/accounts/huge", "", nil); !strings.Contains(body, "account_not_found") {
		t.Errorf("GET /admin/v1/accounts/huge = %s; want no such account", body)
	}
	var keys struct{ Data []json.RawMessage }
	if e.call(t, bearer, "GET", "/admin/v1/keys?account=frac", "", &keys); len(keys.Data) != 1 {
		t.Errorf("keys of frac after the refusals = %d; want the one made before", len(keys.Data))
	}
	var limited struct {
		RateLimit int `json:"rate_limit"`
	}
	if status, body := e.call(t, bearer, "POST", "/admin/v1/accounts/frac/rate_limit", `{"rpm":-1}`, &limited); status != 200 || limited.RateLimit != -1 {
		t.Errorf("rate_limit -1 = %d %s; want unlimited (-1)", status, body)
	}
}
