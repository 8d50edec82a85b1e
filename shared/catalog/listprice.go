package catalog

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/genway/genway/shared/credits"
)

// USD is an exact amount of US dollars, counted in nano-dollars (10^-9
// USD): a vendor's list price per unit as a catalog states it (the usd_
// fields of a price). Its JSON is a decimal number of dollars ("0.0028"),
// read exactly, with no float; more than 9 decimal places, a negative
// amount or one beyond MaxUSD is a load error naming the model and field.
type USD int64

// NanoUSD is the smallest amount of USD; a dollar is 1e9 of them.
const NanoUSD USD = 1

// usdPlaces is the number of decimal places of dollars a USD has.
const usdPlaces = 9

// MaxUSD is the largest list price a catalog may state: a billion dollars
// per unit.
const MaxUSD USD = 1_000_000_000 * 1_000_000_000

// ErrUSD is matched by the errors of ParseUSD.
var ErrUSD = errors.New("invalid USD amount")

// decimalNumber is a JSON number (optional minus, digits, fraction and
// exponent), the only text ParseUSD and ParsePricing read.
var decimalNumber = regexp.MustCompile(`^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`)

// ParseUSD reads a decimal number of US dollars exactly ("0.15", "2.5e-3").
// A number with more than 9 decimal places, a negative one or one beyond
// MaxUSD is an error saying so; every error matches ErrUSD.
func ParseUSD(s string) (USD, error) {
	r, err := parseDecimal(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a decimal number of dollars", ErrUSD, shortText(s))
	}
	if r.Sign() < 0 {
		return 0, fmt.Errorf("%w: %s is negative", ErrUSD, shortText(s))
	}
	r.Mul(r, big.NewRat(int64(usdPerDollar), 1))
	if !r.IsInt() {
		return 0, fmt.Errorf("%w: %s dollars has more than %d decimal places", ErrUSD, shortText(s), usdPlaces)
	}
	if n := r.Num(); !n.IsInt64() || n.Int64() > int64(MaxUSD) {
		return 0, fmt.Errorf("%w: %s dollars is beyond %s, the largest list price", ErrUSD, shortText(s), MaxUSD)
	}
	return USD(r.Num().Int64()), nil
}

// usdPerDollar is the number of USD units in a dollar.
const usdPerDollar = 1_000_000_000

// parseDecimal reads a JSON number exactly.
func parseDecimal(s string) (*big.Rat, error) {
	if len(s) > 100 || !decimalNumber.MatchString(s) {
		return nil, errors.New("not a decimal number")
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		return nil, errors.New("not a decimal number")
	}
	return r, nil
}

// shortText returns s cut to 40 bytes for an error message.
func shortText(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// String returns u as decimal dollars in the shortest exact form: "0.15",
// "3", "0.0028".
func (u USD) String() string { return decimalString(big.NewRat(int64(u), usdPerDollar), usdPlaces) }

// decimalString writes r (whose denominator divides 10^places) in the
// shortest exact decimal form.
func decimalString(r *big.Rat, places int) string {
	s := r.FloatString(places)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// MarshalJSON writes u as a JSON number of dollars.
func (u USD) MarshalJSON() ([]byte, error) { return []byte(u.String()), nil }

// UnmarshalJSON reads a JSON number of dollars exactly (see ParseUSD);
// null leaves u as it is. Anything else is a *json.UnmarshalTypeError
// (Value "string", "number 1e-10", ...), completed by encoding/json with
// the field's name: see usdFieldError.
func (u *USD) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if s == "" || !(s[0] == '-' || '0' <= s[0] && s[0] <= '9') {
		kind := map[byte]string{'"': "string", 't': "bool", 'f': "bool", '{': "object", '[': "array"}
		return &json.UnmarshalTypeError{Value: kind[s[0]], Type: reflect.TypeFor[USD]()}
	}
	v, err := ParseUSD(s)
	if err != nil {
		return &json.UnmarshalTypeError{Value: "number " + s, Type: reflect.TypeFor[USD]()}
	}
	*u = v
	return nil
}

// usdFieldError reports whether err is encoding/json's refusal of a value
// for a USD field, and if so returns the field's path and what is wrong.
func usdFieldError(err error) (field, reason string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type != reflect.TypeFor[USD]() {
		return "", "", false
	}
	if n, isNum := strings.CutPrefix(te.Value, "number "); isNum {
		if _, perr := ParseUSD(n); perr != nil {
			return te.Field, strings.TrimPrefix(perr.Error(), ErrUSD.Error()+": "), true
		}
	}
	return te.Field, "must be a number of US dollars, not " + te.Value, true
}

// Pricing says what a credit is worth, for turning the list prices a
// catalog states in US dollars into credits: one deployment setting
// (GENWAY_CREDIT_USD and GENWAY_PRICE_MARKUP, read by the commands and
// functions, never by this package). Its zero value is DefaultPricing's
// meaning: 1 credit = US$0.01, no markup. Exact: no float anywhere.
type Pricing struct {
	// CreditUSD is what one credit is worth in US dollars (> 0); nil:
	// DefaultCreditUSD.
	CreditUSD *big.Rat
	// MarkupPercent is added to every list price stated in USD, in
	// percent of it (12.5: a $1.00 list price sells for $1.125 of
	// credits); nil: none. Prices stated in credits are used as written.
	MarkupPercent *big.Rat
}

// DefaultCreditUSD is what a credit is worth when the deployment does not
// say: one US cent, the scale of the catalog's media prices.
const DefaultCreditUSD = "0.01"

// ParsePricing reads a credit value in US dollars and a markup in percent,
// each a plain decimal number ("0.003", "12.5"); an empty string is the
// default (DefaultCreditUSD, no markup). A credit value must be above 0;
// a markup at least 0 and at most 10000 (percent).
func ParsePricing(creditUSD, markupPercent string) (Pricing, error) {
	var p Pricing
	if creditUSD != "" {
		r, err := parseDecimal(creditUSD)
		if err != nil || r.Sign() <= 0 {
			return Pricing{}, fmt.Errorf("the credit value must be a decimal number of US dollars above 0, such as 0.01; got %q", shortText(creditUSD))
		}
		p.CreditUSD = r
	}
	if markupPercent != "" {
		r, err := parseDecimal(markupPercent)
		if err != nil || r.Sign() < 0 || r.Cmp(big.NewRat(10000, 1)) > 0 {
			return Pricing{}, fmt.Errorf("the markup must be a decimal number of percent from 0 to 10000, such as 12.5; got %q", shortText(markupPercent))
		}
		p.MarkupPercent = r
	}
	return p, nil
}

// creditUSD returns what a credit is worth in dollars.
func (p Pricing) creditUSD() *big.Rat {
	if p.CreditUSD != nil && p.CreditUSD.Sign() > 0 {
		return p.CreditUSD
	}
	r, _ := new(big.Rat).SetString(DefaultCreditUSD)
	return r
}

// markup returns the markup in percent.
func (p Pricing) markup() *big.Rat {
	if p.MarkupPercent != nil {
		return p.MarkupPercent
	}
	return new(big.Rat)
}

// String says what p is, for logs and the console: "1 credit = US$0.01,
// markup 0%".
func (p Pricing) String() string {
	return "1 credit = US$" + p.CreditUSDText() + ", markup " + p.MarkupText() + "%"
}

// ratText writes a decimal rational in the shortest exact form, or as a
// fraction if it has none (a markup never does: ParsePricing reads
// decimals).
func ratText(r *big.Rat) string {
	d := new(big.Int).Set(r.Denom())
	places := 0
	for _, f := range []int64{2, 5} {
		for new(big.Int).Mod(d, big.NewInt(f)).Sign() == 0 {
			d.Div(d, big.NewInt(f))
		}
	}
	if d.Cmp(big.NewInt(1)) != 0 {
		return r.RatString()
	}
	for p10 := big.NewInt(1); new(big.Int).Mod(p10, r.Denom()).Sign() != 0; p10.Mul(p10, big.NewInt(10)) {
		places++
	}
	return decimalString(r, places)
}

// CreditUSDText returns what a credit is worth in US dollars, as a
// decimal ("0.01").
func (p Pricing) CreditUSDText() string { return ratText(p.creditUSD()) }

// MarkupText returns the markup in percent, as a decimal ("12.5", "0").
func (p Pricing) MarkupText() string { return ratText(p.markup()) }

// Credits returns what a list price of u dollars per unit sells for, in
// credits per unit: u, plus the markup, divided by the credit value,
// rounded up to the micro-credit. With 1 credit = $0.003 and a 12.5 %
// markup, $0.10 is 37.5 credits, and $0.001 is 0.375 credits; $1 is
// 375 credits. An error if the result passes credits.MaxAmount.
func (p Pricing) Credits(u USD) (credits.Amount, error) {
	// u/1e9 dollars x (100+m)/100 / creditUSD x 1e6 micro-credits.
	r := big.NewRat(int64(u), usdPerDollar)
	r.Mul(r, new(big.Rat).Add(big.NewRat(100, 1), p.markup()))
	r.Quo(r, big.NewRat(100, 1))
	r.Quo(r, p.creditUSD())
	r.Mul(r, big.NewRat(int64(credits.Credit), 1))
	q, m := new(big.Int).QuoRem(r.Num(), r.Denom(), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() || q.Int64() > int64(credits.MaxAmount) {
		return 0, fmt.Errorf("$%s is beyond %s credits at %s", u, credits.MaxAmount, p)
	}
	return credits.Amount(q.Int64()), nil
}

// The service tiers OpenAI has two names for: "priority" was renamed
// "fast" (2026-07-30), and service_tier takes either. A price that states
// one of them has the other too, with the same prices (see convert).
const (
	TierPriority = "priority"
	TierFast     = "fast"
)

// convert turns p's list prices (the usd_ fields) into its credits fields
// with pr, and checks what belongs to a list price: a source and the date
// it was read (as_of, YYYY-MM-DD) when any price is in USD, and a free
// marker with no price. It then gives the "priority" and "fast" tiers each
// other's prices where only one is stated. Errors name the field.
func (p *Price) convert(pr Pricing) error {
	if p == nil {
		return nil
	}
	list := false
	one := func(field string, u *USD, out *credits.Amount) error {
		if u == nil {
			return nil
		}
		list = true
		a, err := pr.Credits(*u)
		if err != nil {
			return fmt.Errorf("price.%s: %w", field, err)
		}
		*out = a
		return nil
	}
	for _, f := range []struct {
		name string
		u    *USD
		out  *credits.Amount
	}{
		{"usd_per_second", p.USDPerSecond, &p.CreditsPerSecond}, {"usd_per_job", p.USDPerJob, &p.CreditsPerJob},
		{"usd_per_image", p.USDPerImage, &p.CreditsPerImage}, {"usd_per_1k_chars", p.USDPer1KChars, &p.CreditsPer1KChars},
	} {
		if err := one(f.name, f.u, f.out); err != nil {
			return err
		}
	}
	if len(p.USDPerImageByQuality) > 0 {
		list = true
		if p.CreditsPerImageByQuality == nil {
			p.CreditsPerImageByQuality = make(map[string]credits.Amount, len(p.USDPerImageByQuality))
		}
		for q, u := range p.USDPerImageByQuality {
			a := credits.Amount(0)
			if err := one("usd_per_image_by_quality."+q, &u, &a); err != nil {
				return err
			}
			p.CreditsPerImageByQuality[q] = a
		}
	}
	tokens := func(prefix string, tp *TokenPrices) error {
		for _, f := range []struct {
			name string
			u    *USD
			out  *credits.Amount
		}{
			{"usd_per_million_input_tokens", tp.USDPerMillionInput, &tp.CreditsPerMillionInput},
			{"usd_per_million_output_tokens", tp.USDPerMillionOutput, &tp.CreditsPerMillionOutput},
		} {
			if err := one(prefix+f.name, f.u, f.out); err != nil {
				return err
			}
		}
		for _, f := range []struct {
			name string
			u    *USD
			out  **credits.Amount
		}{
			{"usd_per_million_cached_input_tokens", tp.USDPerMillionCachedInput, &tp.CreditsPerMillionCachedInput},
			{"usd_per_million_cache_write_tokens", tp.USDPerMillionCacheWrite, &tp.CreditsPerMillionCacheWrite},
			{"usd_per_million_cache_write_1h_tokens", tp.USDPerMillionCacheWrite1h, &tp.CreditsPerMillionCacheWrite1h},
		} {
			if f.u == nil {
				continue
			}
			a := new(credits.Amount)
			if err := one(prefix+f.name, f.u, a); err != nil {
				return err
			}
			*f.out = a
		}
		return nil
	}
	if err := tokens("", &p.TokenPrices); err != nil {
		return err
	}
	for _, tier := range sortedKeys(p.ServiceTiers) {
		tp := p.ServiceTiers[tier]
		if err := tokens("service_tiers."+tier+".", &tp); err != nil {
			return err
		}
		p.ServiceTiers[tier] = tp
	}
	if p.LongContext != nil {
		if err := tokens("long_context.", &p.LongContext.TokenPrices); err != nil {
			return err
		}
	}
	if list && (p.Source == "" || p.AsOf == "") {
		return fmt.Errorf(`price: a list price in USD needs its "source" (where it was read) and "as_of" (the date it was read, YYYY-MM-DD)`)
	}
	if p.AsOf != "" {
		if _, err := time.Parse(time.DateOnly, p.AsOf); err != nil {
			return fmt.Errorf("price.as_of: %q is not a date YYYY-MM-DD", p.AsOf)
		}
	}
	for _, pair := range [][2]string{{TierPriority, TierFast}, {TierFast, TierPriority}} {
		if tp, ok := p.ServiceTiers[pair[0]]; ok {
			if _, has := p.ServiceTiers[pair[1]]; !has {
				p.ServiceTiers[pair[1]] = tp
			}
		}
	}
	return nil
}

// sortedKeys returns m's keys in order, so that errors are the same on
// every load.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// checkPriceFields refuses a price object (price, the raw JSON of a
// model's "price") that states one class both ways: a usd_ field and the
// credits_ field it converts into, at its top level, in a service tier,
// in long_context, or one quality in usd_per_image_by_quality and
// credits_per_image_by_quality. The error names both fields. It also
// refuses a free marker with any price, zero or not (only source, as_of
// and note may go with it).
func checkPriceFields(price json.RawMessage) error {
	if len(price) == 0 || string(price) == "null" {
		return nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(price, &fields); err != nil {
		return nil // not an object: the typed decoding says so
	}
	if string(fields["free"]) == "true" {
		for _, k := range sortedKeys(fields) {
			switch k {
			case "free", "source", "as_of", "note":
			default:
				return fmt.Errorf(`price.free: a model marked free has no price; remove "free" or the price (%s)`, k)
			}
		}
	}
	var check func(prefix string, fields map[string]json.RawMessage) error
	check = func(prefix string, fields map[string]json.RawMessage) error {
		for _, k := range sortedKeys(fields) {
			rest, ok := strings.CutPrefix(k, "usd_per_")
			if !ok {
				continue
			}
			if _, both := fields["credits_per_"+rest]; both && k != "usd_per_image_by_quality" {
				return fmt.Errorf("price.%s%s and price.%scredits_per_%s: a price states each class once, in US dollars (a list price, converted with the credit value) or in credits (used as written)", prefix, k, prefix, rest)
			}
		}
		if u, c := fields["usd_per_image_by_quality"], fields["credits_per_image_by_quality"]; u != nil && c != nil {
			var uq, cq map[string]json.RawMessage
			_ = json.Unmarshal(u, &uq)
			_ = json.Unmarshal(c, &cq)
			for _, q := range sortedKeys(uq) {
				if _, both := cq[q]; both {
					return fmt.Errorf("price.%susd_per_image_by_quality.%s and price.%scredits_per_image_by_quality.%s: a price states each class once, in US dollars or in credits", prefix, q, prefix, q)
				}
			}
		}
		var tiers map[string]map[string]json.RawMessage
		if json.Unmarshal(fields["service_tiers"], &tiers) == nil {
			for _, tier := range sortedKeys(tiers) {
				if err := check(prefix+"service_tiers."+tier+".", tiers[tier]); err != nil {
					return err
				}
			}
		}
		var lc map[string]json.RawMessage
		if json.Unmarshal(fields["long_context"], &lc) == nil && lc != nil {
			return check(prefix+"long_context.", lc)
		}
		return nil
	}
	return check("", fields)
}

// MarshalJSON writes p as a catalog states it: each class the way it was
// stated, as a list price in US dollars or in credits (a class converted
// from USD is written in USD only), so that a catalog written back parses
// to the same prices. GET /v1/models shows prices its own way (credits
// only).
func (p Price) MarshalJSON() ([]byte, error) {
	type plain Price // without this method
	q := plain(p)
	q.TokenPrices = p.TokenPrices.stated()
	for _, f := range []struct {
		u   *USD
		out *credits.Amount
	}{
		{p.USDPerSecond, &q.CreditsPerSecond}, {p.USDPerJob, &q.CreditsPerJob},
		{p.USDPerImage, &q.CreditsPerImage}, {p.USDPer1KChars, &q.CreditsPer1KChars},
	} {
		if f.u != nil {
			*f.out = 0
		}
	}
	if len(p.USDPerImageByQuality) > 0 {
		q.CreditsPerImageByQuality = nil
		for k, a := range p.CreditsPerImageByQuality {
			if _, inUSD := p.USDPerImageByQuality[k]; !inUSD {
				if q.CreditsPerImageByQuality == nil {
					q.CreditsPerImageByQuality = map[string]credits.Amount{}
				}
				q.CreditsPerImageByQuality[k] = a
			}
		}
	}
	if len(p.ServiceTiers) > 0 {
		q.ServiceTiers = make(map[string]TokenPrices, len(p.ServiceTiers))
		for tier, tp := range p.ServiceTiers {
			q.ServiceTiers[tier] = tp.stated()
		}
	}
	if p.LongContext != nil {
		lc := *p.LongContext
		lc.TokenPrices = lc.TokenPrices.stated()
		q.LongContext = &lc
	}
	return json.Marshal(q)
}

// stated returns tp without the credits of the classes it states in USD.
func (tp TokenPrices) stated() TokenPrices {
	if tp.USDPerMillionInput != nil {
		tp.CreditsPerMillionInput = 0
	}
	if tp.USDPerMillionOutput != nil {
		tp.CreditsPerMillionOutput = 0
	}
	if tp.USDPerMillionCachedInput != nil {
		tp.CreditsPerMillionCachedInput = nil
	}
	if tp.USDPerMillionCacheWrite != nil {
		tp.CreditsPerMillionCacheWrite = nil
	}
	if tp.USDPerMillionCacheWrite1h != nil {
		tp.CreditsPerMillionCacheWrite1h = nil
	}
	return tp
}
