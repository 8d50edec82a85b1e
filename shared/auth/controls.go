package auth

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// Controls are what an operator sets on a key besides its account: a
// label, the models it may use, when it stops working and how many
// credits it may spend. The zero value is a key with no controls (every
// model, no expiry, no limit beyond the account's credits).
type Controls struct {
	// Name is a label for lists (at most MaxNameLen characters).
	Name string `json:"name,omitempty"`
	// Models are patterns over model ids ("synthetic/*",
	// "openai/gpt-4o-mini", "elevenlabs-*"): '*' stands for any run of
	// characters, '/' included. Empty: every model.
	Models []string `json:"models,omitempty"`
	// ExpiresAt is the Unix second from which the key is refused like an
	// unknown one; 0: never. (Not "expires": that attribute is the
	// DynamoDB table's TTL, which would delete the record.)
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// CreditLimit is the most credits the key may spend in total (held
	// and spent together: see Record.Spent); nil: no limit of its own.
	CreditLimit *credits.Amount `json:"credit_limit,omitempty"`
	// CreditLimitReset is how often the credit limit starts over:
	// ResetNever (""), ResetDaily, ResetWeekly or ResetMonthly (UTC
	// calendar periods). With a reset, Record.Spent counts the current
	// period only. It needs a CreditLimit.
	CreditLimitReset string `json:"credit_limit_reset,omitempty"`
	// Jobs is which of the account's jobs the key sees and manages:
	// JobsAccount ("", every job of the account, as every key did before
	// this control) or JobsOwn (only the jobs it created: get, list,
	// cancel, delete and /v1/videos answer 404 for the others).
	Jobs string `json:"jobs,omitempty"`
}

// Values of Controls.Jobs.
const (
	JobsAccount = ""
	JobsOwn     = "own"
)

// ParseJobs reads a jobs control as an operator writes it: "" or
// "account" (JobsAccount), "own" (JobsOwn).
func ParseJobs(s string) (string, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "account":
		return JobsAccount, nil
	case "own":
		return JobsOwn, nil
	}
	return s, fmt.Errorf("jobs %q: give account or own", s)
}

// Limits for Controls.
const (
	MaxNameLen  = 100
	MaxPatterns = 50
	maxPattern  = 200
)

// Check validates c: a name of printable characters, at most MaxPatterns
// model patterns of printable, non-space characters, a non-negative
// expiry, a credit limit from 0 to credits.MaxAmount, a reset (ParseReset's canonical values) only
// with a credit limit. Its errors are *apierr.Error naming the field.
func (c Controls) Check() error {
	if len(c.Name) > MaxNameLen || strings.ContainsFunc(c.Name, func(r rune) bool { return r < ' ' || r == 0x7f }) {
		return apierr.Invalidf("name", "invalid_value", "name must be at most %d printable characters", MaxNameLen)
	}
	if len(c.Models) > MaxPatterns {
		return apierr.Invalidf("models", "invalid_value", "at most %d model patterns", MaxPatterns)
	}
	for _, p := range c.Models {
		if p == "" || len(p) > maxPattern || strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == ',' || r == 0x7f }) {
			return apierr.Invalidf("models", "invalid_value", "model pattern %q: need 1-%d characters, no spaces or commas ('*' matches any run of characters)", p, maxPattern)
		}
	}
	if c.ExpiresAt < 0 {
		return apierr.Invalidf("expires_at", "invalid_value", "expires_at must be a Unix time, or 0 for never")
	}
	if c.CreditLimit != nil && (*c.CreditLimit < 0 || *c.CreditLimit > credits.MaxAmount) {
		return apierr.Invalidf("credit_limit", "invalid_value", "credit_limit must be from 0 to %s credits", credits.MaxAmount)
	}
	if r, err := ParseReset(c.CreditLimitReset); err != nil || r != c.CreditLimitReset {
		return apierr.Invalidf("credit_limit_reset", "invalid_value", "credit_limit_reset %q: give daily, weekly, monthly, or omit it for never", c.CreditLimitReset)
	}
	if c.CreditLimitReset != ResetNever && c.CreditLimit == nil {
		return apierr.Invalidf("credit_limit_reset", "invalid_value", "credit_limit_reset %s needs a credit_limit", c.CreditLimitReset)
	}
	if j, err := ParseJobs(c.Jobs); err != nil || j != c.Jobs {
		return apierr.Invalidf("jobs", "invalid_value", "jobs %q: give account (every job of the account) or own (only the jobs the key created)", c.Jobs)
	}
	return nil
}

// Change is an operator's edit of a key's controls: each field set
// replaces that control, the others stay.
type Change struct {
	Name   *string   `json:"name,omitempty"`
	Models *[]string `json:"models,omitempty"` // an empty list: every model
	// ExpiresAt: 0 removes the expiry.
	ExpiresAt *int64 `json:"expires_at,omitempty"`
	// CreditLimit: a negative value removes the limit, and its reset
	// with it.
	CreditLimit *credits.Amount `json:"credit_limit,omitempty"`
	// CreditLimitReset: "daily", "weekly", "monthly"; "none" (or "")
	// removes the reset.
	CreditLimitReset *string `json:"credit_limit_reset,omitempty"`
	// Jobs: "account" (or "") or "own".
	Jobs *string `json:"jobs,omitempty"`
}

// Apply returns c with ch applied.
func (ch Change) Apply(c Controls) Controls {
	if ch.Name != nil {
		c.Name = *ch.Name
	}
	if ch.Models != nil {
		c.Models = append([]string(nil), *ch.Models...)
	}
	if ch.ExpiresAt != nil {
		c.ExpiresAt = *ch.ExpiresAt
	}
	if ch.CreditLimit != nil {
		c.CreditLimit = nil
		if *ch.CreditLimit >= 0 {
			n := *ch.CreditLimit
			c.CreditLimit = &n
		} else {
			c.CreditLimitReset = ResetNever
		}
	}
	if ch.CreditLimitReset != nil {
		// An unknown value is kept as given, for Check to refuse.
		c.CreditLimitReset = *ch.CreditLimitReset
		if r, err := ParseReset(c.CreditLimitReset); err == nil {
			c.CreditLimitReset = r
		}
	}
	if ch.Jobs != nil {
		c.Jobs = *ch.Jobs // kept as given when unknown, for Check to refuse
		if j, err := ParseJobs(c.Jobs); err == nil {
			c.Jobs = j
		}
	}
	return c
}

// Empty reports whether ch changes nothing.
func (ch Change) Empty() bool {
	return ch.Name == nil && ch.Models == nil && ch.ExpiresAt == nil && ch.CreditLimit == nil && ch.CreditLimitReset == nil && ch.Jobs == nil
}

// Describe says what c is, for the audit log and lists: "name=intern
// models=synthetic/* expires=2026-12-01T00:00:00Z credit_limit=10
// reset=monthly jobs=own",
// "no controls" when it has none.
func (c Controls) Describe() string {
	var parts []string
	if c.Name != "" {
		parts = append(parts, "name="+strconv.Quote(c.Name))
	}
	if len(c.Models) > 0 {
		parts = append(parts, "models="+strings.Join(c.Models, ","))
	}
	if c.ExpiresAt != 0 {
		parts = append(parts, "expires="+time.Unix(c.ExpiresAt, 0).UTC().Format(time.RFC3339))
	}
	if c.CreditLimit != nil {
		parts = append(parts, fmt.Sprintf("credit_limit=%s", *c.CreditLimit))
	}
	if c.CreditLimitReset != ResetNever {
		parts = append(parts, "reset="+c.CreditLimitReset)
	}
	if c.Jobs != JobsAccount {
		parts = append(parts, "jobs="+c.Jobs)
	}
	if len(parts) == 0 {
		return "no controls"
	}
	return strings.Join(parts, " ")
}

// ParseModels splits a comma-separated list of model patterns ("" or
// "*": none, every model), trimming spaces around each.
func ParseModels(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if len(out) == 1 && out[0] == "*" {
		return nil
	}
	return out
}

// ParseExpiry reads an expiry as an operator writes it: "" or "never"
// (0: no expiry), a duration from now ("30d", "12h", "90m", "1h30m"; d
// is 24 hours), or an RFC 3339 time ("2026-12-31T23:59:59Z") or date
// ("2026-12-31", midnight UTC). It returns the Unix second.
func ParseExpiry(s string, now time.Time) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "never" {
		return 0, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.Unix(), nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.Unix(), nil
	}
	d, err := parseDuration(s)
	if err != nil || d <= 0 {
		return 0, apierr.Invalidf("expires", "invalid_value", "expires %q: give a duration from now (30d, 12h, 90m) or a time (2026-12-31T23:59:59Z, 2026-12-31), or never", s)
	}
	return now.Add(d).Unix(), nil
}

// parseDuration is time.ParseDuration with a leading count of days
// ("30d", "1d12h").
func parseDuration(s string) (time.Duration, error) {
	days, rest, ok := strings.Cut(s, "d")
	if !ok {
		return time.ParseDuration(s)
	}
	n, err := strconv.Atoi(days)
	if err != nil || n < 0 || n > 36600 {
		return 0, fmt.Errorf("bad day count %q", days)
	}
	d := time.Duration(n) * 24 * time.Hour
	if rest == "" {
		return d, nil
	}
	r, err := time.ParseDuration(rest)
	return d + r, err
}

// Match reports whether model matches pattern: '*' matches any run of
// characters (none included), everything else itself.
func Match(pattern, model string) bool {
	// Iterative glob with one backtrack point: linear in practice.
	p, m := 0, 0
	star, mark := -1, 0
	for m < len(model) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, m
			p++
		case p < len(pattern) && pattern[p] == model[m]:
			p++
			m++
		case star >= 0:
			p, mark = star+1, mark+1
			m = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// allows reports whether a key with these model patterns may use model:
// any model when there are none.
func allows(patterns []string, model string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if Match(p, model) {
			return true
		}
	}
	return false
}

// ErrModelNotAllowed is the error for a request naming a model its key may
// not use: 403 permission_error, code model_not_allowed. CheckModel
// returns copies naming the model; errors.Is matches them.
var ErrModelNotAllowed = &apierr.Error{Kind: apierr.PermissionDenied, Code: "model_not_allowed",
	Message: "This API key may not use that model."}

// Allows reports whether p may use model: its key has no model patterns,
// or one matches.
func (p Principal) Allows(model string) bool { return allows(p.Models, model) }

// Allowed reports whether the caller in ctx may use model; true without
// a principal (an internal caller, the console, a test).
func Allowed(ctx context.Context, model string) bool {
	p, ok := FromContext(ctx)
	return !ok || p.Allows(model)
}

// CheckModel returns nil if the caller in ctx may use model, else a copy
// of ErrModelNotAllowed naming it (param is the request field that names
// it: "model", "models[1]").
func CheckModel(ctx context.Context, param, model string) error {
	if Allowed(ctx, model) {
		return nil
	}
	return &apierr.Error{Kind: ErrModelNotAllowed.Kind, Code: ErrModelNotAllowed.Code, Param: param,
		Message: fmt.Sprintf("This API key may not use the model %q; GET /v1/models lists the models it may use.", model)}
}

// CanSeeJob reports whether the caller in ctx may see and manage a job of
// its account that the key with id keyID created ("" for none: the
// console's): any job, unless its key is limited to its own jobs
// (Controls.Jobs JobsOwn). True without a principal (an internal caller,
// the console, the operator).
func CanSeeJob(ctx context.Context, keyID string) bool {
	p, ok := FromContext(ctx)
	return !ok || !p.OwnJobs || keyID == p.KeyID
}

// OwnJobsKey returns the id of the caller's key when it is limited to its
// own jobs (a listing then shows only those), "" otherwise.
func OwnJobsKey(ctx context.Context) string {
	if p, ok := FromContext(ctx); ok && p.OwnJobs {
		return p.KeyID
	}
	return ""
}

// KeyID returns the id of the key that authenticated the caller in ctx,
// "" for none (an internal caller): the key whose spend a charge counts
// against.
func KeyID(ctx context.Context) string {
	p, _ := FromContext(ctx)
	return p.KeyID
}
