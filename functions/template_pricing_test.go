package functions_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The stack's pricing: one credit value and one markup for the whole
// stack (parameters CreditUSD and PriceMarkup), reaching every function
// that loads the catalog, so that the chat, media, jobs, models and admin
// functions all convert the catalog's list prices alike.

// pricingVars are the variables of the stack's pricing and the parameter
// each must be.
var pricingVars = map[string]string{"GENWAY_CREDIT_USD": "CreditUSD", "GENWAY_PRICE_MARKUP": "PriceMarkup"}

// catalogFunctions returns the functions of tpl whose code (CodeUri under
// root) loads the catalog (wire.Catalog).
func catalogFunctions(t *testing.T, tpl map[string]any, root string) []string {
	t.Helper()
	var out []string
	for _, fn := range resourcesOfType(tpl, "AWS::Serverless::Function") {
		uri, _ := mapAt(tpl, "Resources", fn, "Properties")["CodeUri"].(string)
		b, err := os.ReadFile(filepath.Join(root, uri, "main.go"))
		if err != nil {
			t.Fatalf("%s: CodeUri %q: %v", fn, uri, err)
		}
		if strings.Contains(string(b), "wire.Catalog(") {
			out = append(out, fn)
		}
	}
	return out
}

// checkPricing returns every broken pricing invariant of tpl for the
// functions fns: the two parameters with their defaults (1 credit =
// $0.01, no markup), and each function's environment (its own over
// Globals') giving both variables as !Ref of them.
func checkPricing(tpl map[string]any, fns []string) []string {
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	for param, def := range map[string]string{"CreditUSD": "0.01", "PriceMarkup": "0"} {
		p := mapAt(tpl, "Parameters", param)
		if p["Type"] != "String" || p["Default"] != def {
			bad("Parameters.%s: want a String with Default %q, got %v", param, def, p)
		}
	}
	globals := mapAt(tpl, "Globals", "Function", "Environment", "Variables")
	for _, fn := range fns {
		own := mapAt(tpl, "Resources", fn, "Properties", "Environment", "Variables")
		for v, param := range pricingVars {
			val, ok := own[v]
			if !ok {
				val = globals[v]
			}
			if refName(val) != param {
				bad("%s: %s is %v; want !Ref %s (the stack's one pricing)", fn, v, val, param)
			}
		}
	}
	return problems
}

func TestTemplatePricing(t *testing.T) {
	tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
	fns := catalogFunctions(t, tpl, repoRoot)
	for _, want := range []string{"ChatFunction", "MediaFunction", "JobsCreateFunction", "ModelsFunction", "AdminFunction"} {
		if !strings.Contains(" "+strings.Join(fns, " ")+" ", " "+want+" ") {
			t.Errorf("functions loading the catalog = %v; want %s among them", fns, want)
		}
	}
	if problems := checkPricing(tpl, fns); len(problems) > 0 {
		t.Errorf("template.yaml pricing:\n%s", strings.Join(problems, "\n"))
	}
}

// TestTemplatePricingCheckFails: each broken invariant is caught.
func TestTemplatePricingCheckFails(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(tpl map[string]any)
		want   string
	}{
		{"no credit value parameter", func(tpl map[string]any) {
			delete(mapAt(tpl, "Parameters"), "CreditUSD")
		}, "Parameters.CreditUSD"},
		{"another default markup", func(tpl map[string]any) {
			mapAt(tpl, "Parameters", "PriceMarkup")["Default"] = "10"
		}, `Parameters.PriceMarkup: want a String with Default "0"`},
		{"not in Globals", func(tpl map[string]any) {
			delete(mapAt(tpl, "Globals", "Function", "Environment", "Variables"), "GENWAY_CREDIT_USD")
		}, "ChatFunction: GENWAY_CREDIT_USD"},
		{"one function's own value", func(tpl map[string]any) {
			mapAt(tpl, "Resources", "MediaFunction", "Properties", "Environment", "Variables")["GENWAY_PRICE_MARKUP"] = "5"
		}, "MediaFunction: GENWAY_PRICE_MARKUP is 5; want !Ref PriceMarkup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl := loadTemplate(t, filepath.Join(repoRoot, "template.yaml"))
			fns := catalogFunctions(t, tpl, repoRoot)
			tt.mutate(tpl)
			problems := checkPricing(tpl, fns)
			if !strings.Contains(strings.Join(problems, "\n"), tt.want) {
				t.Errorf("checkPricing(broken) = %q; want a problem containing %q", problems, tt.want)
			}
		})
	}
}
