package wire

import (
	"strings"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// TestCatalogPricing: the catalog is loaded with the stack's credit value
// and markup; a bad value is an error naming the variables.
func TestCatalogPricing(t *testing.T) {
	tests := []struct {
		env     map[string]string
		want    credits.Amount // gpt-4o-mini's input price per million tokens ($0.15)
		wantErr string
	}{
		{nil, 15 * credits.Credit, ""},
		{map[string]string{"GENWAY_CREDIT_USD": "0.003", "GENWAY_PRICE_MARKUP": "12.5"}, 56_250_000, ""},
		{map[string]string{"GENWAY_PRICE_MARKUP": "100"}, 30 * credits.Credit, ""},
		{map[string]string{"GENWAY_CREDIT_USD": "0"}, 0, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the credit value"},
		{map[string]string{"GENWAY_PRICE_MARKUP": "-1"}, 0, "GENWAY_CREDIT_USD / GENWAY_PRICE_MARKUP: the markup"},
	}
	for _, tt := range tests {
		cat, err := Catalog(func(k string) string { return tt.env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Catalog(%v) = %v; want an error containing %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("Catalog(%v) = %v", tt.env, err)
		}
		m, _ := cat.Model("openai/gpt-4o-mini")
		if got := m.Price.CreditsPerMillionInput; got != tt.want {
			t.Errorf("Catalog(%v): gpt-4o-mini input = %s credits per million; want %s", tt.env, got, tt.want)
		}
	}
}
