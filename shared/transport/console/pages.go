package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// coreRoutes are the pages built on the operator commands: models,
// accounts, keys, the audit log, and sign-out.
func (c *Console) coreRoutes() []Route {
	return []Route{
		{"GET", "/console/models", c.models},
		{"GET", "/console/accounts", c.accounts},
		{"POST", "/console/accounts", c.createAccount},
		{"GET", "/console/accounts/{id}", c.account},
		{"POST", "/console/accounts/{id}/grant", c.grant},
		{"POST", "/console/accounts/{id}/limit", c.setLimit},
		{"GET", "/console/keys", c.keys},
		{"POST", "/console/keys", c.createKey},
		{"POST", "/console/keys/{id}/revoke", c.revokeKey},
		{"GET", "/console/keys/{id}", c.key},
		{"POST", "/console/keys/{id}", c.updateKey},
		{"GET", "/console/audit", c.audit},
		{"POST", "/console/signout", c.signout},
	}
}

// modelRow is a model as the models page lists it.
type modelRow struct {
	*catalog.Model
	Configured bool
	// Price says what the model costs in credits, a line per set of
	// prices; List its vendor's list price in US dollars, the same way,
	// with the Source (a link when it is a URL) and the date it was read.
	Price, List []string
	SourceURL   bool
	Durations   string
	Routing     *route.TargetState // nil without a router, or for an alias
	// Weights are an alias's targets and their weights, in words.
	Weights string
}

func (c *Console) models(p *Page, w http.ResponseWriter, r *http.Request) error {
	all := c.cfg.Catalog.List("", nil)
	rows := make([]modelRow, len(all))
	for i := range all {
		m := &all[i]
		rows[i] = modelRow{Model: m, Configured: c.cfg.Catalog.Serves(m, c.configed), Price: price(m), List: listPrice(m), Durations: durations(m), Weights: weights(m)}
		if m.Price != nil {
			rows[i].SourceURL = strings.HasPrefix(m.Price.Source, "https://") || strings.HasPrefix(m.Price.Source, "http://")
		}
		if c.cfg.Router != nil && !m.Alias() { // an alias is routed as its targets
			st := c.cfg.Router.State(m.ID)
			rows[i].Routing = &st
		}
	}
	p.Section, p.Title = "models", "Models"
	p.Data = struct {
		Rows    []modelRow
		Pricing string
	}{rows, c.cfg.Catalog.Pricing().String()}
	return p.Render(w, r, "models")
}

// weights says an alias's targets and their weights ("a/m ×3, b/m ×1");
// "" for another model.
func weights(m *catalog.Model) string {
	s := make([]string, len(m.Targets))
	for i, t := range m.Targets {
		s[i] = t.Model + " ×" + strconv.Itoa(t.Weight)
	}
	return strings.Join(s, ", ")
}

// price says what a model costs in credits, in words: a line per set of
// prices (a chat model's own, each service tier, long context; every
// token class resolved), or "free".
func price(m *catalog.Model) []string {
	pr := m.Price
	switch {
	case m.Alias():
		return []string{"the answering target's"}
	case m.Type == catalog.TypeChat && !pr.ChargesTokens():
		return []string{"free"}
	case pr == nil:
		return []string{"free"}
	case m.Type == catalog.TypeChat:
		out := []string{tokenRates(pr.TokenPrices.Rates()) + " credits / 1M tokens"}
		for _, tier := range sortedTiers(pr.ServiceTiers) {
			out = append(out, tier+": "+tokenRates(pr.ServiceTiers[tier].Rates()))
		}
		if lc := pr.LongContext; lc != nil {
			out = append(out, "prompts over "+strconv.Itoa(lc.AbovePromptTokens)+" tokens: "+tokenRates(lc.Rates()))
		}
		return out
	}
	var parts []string
	if pr.CreditsPerSecond > 0 {
		parts = append(parts, pr.CreditsPerSecond.String()+" credits/s")
	}
	if pr.CreditsPerJob > 0 {
		parts = append(parts, pr.CreditsPerJob.String()+" credits/job")
	}
	if pr.CreditsPerImage > 0 {
		parts = append(parts, pr.CreditsPerImage.String()+" credits/image")
	}
	for _, q := range sortedTiers(pr.CreditsPerImageByQuality) {
		parts = append(parts, q+" "+pr.CreditsPerImageByQuality[q].String())
	}
	if pr.CreditsPer1KChars > 0 {
		parts = append(parts, pr.CreditsPer1KChars.String()+" credits / 1,000 characters")
	}
	if len(parts) == 0 {
		return []string{"free"}
	}
	return []string{strings.Join(parts, ", ")}
}

// tokenRates says a set of token prices: "0.15 in · 0.075 cached ·
// 0.1875 write · 0.3 write 1h · 0.6 out".
func tokenRates(r credits.TokenRates) string {
	return r.Input.String() + " in · " + r.CachedInput.String() + " cached · " + r.CacheWrite.String() + " write · " +
		r.CacheWrite1h.String() + " write 1h · " + r.Output.String() + " out"
}

// listPrice says a model's list price in US dollars as the catalog
// states it, in words (the classes it states; none for a price in
// credits).
func listPrice(m *catalog.Model) []string {
	pr := m.Price
	if pr == nil || m.Alias() {
		return nil
	}
	var out []string
	if s := listTokens(pr.TokenPrices); s != "" {
		out = append(out, "$"+s+" / 1M tokens")
	}
	for _, tier := range sortedTiers(pr.ServiceTiers) {
		if s := listTokens(pr.ServiceTiers[tier]); s != "" {
			out = append(out, tier+": $"+s)
		}
	}
	if lc := pr.LongContext; lc != nil {
		if s := listTokens(lc.TokenPrices); s != "" {
			out = append(out, "prompts over "+strconv.Itoa(lc.AbovePromptTokens)+" tokens: $"+s)
		}
	}
	var parts []string
	for _, f := range []struct {
		u    *catalog.USD
		unit string
	}{{pr.USDPerSecond, "/s"}, {pr.USDPerJob, "/job"}, {pr.USDPerImage, "/image"}, {pr.USDPer1KChars, " / 1,000 characters"}} {
		if f.u != nil {
			parts = append(parts, "$"+f.u.String()+f.unit)
		}
	}
	for _, q := range sortedTiers(pr.USDPerImageByQuality) {
		parts = append(parts, q+" $"+pr.USDPerImageByQuality[q].String())
	}
	if len(parts) > 0 {
		out = append(out, strings.Join(parts, ", "))
	}
	return out
}

// listTokens says the token classes tp states in US dollars ("0.15 in ·
// 0.6 out"), "" for none.
func listTokens(tp catalog.TokenPrices) string {
	var parts []string
	for _, f := range []struct {
		u    *catalog.USD
		name string
	}{{tp.USDPerMillionInput, "in"}, {tp.USDPerMillionCachedInput, "cached"}, {tp.USDPerMillionCacheWrite, "write"},
		{tp.USDPerMillionCacheWrite1h, "write 1h"}, {tp.USDPerMillionOutput, "out"}} {
		if f.u != nil {
			parts = append(parts, f.u.String()+" "+f.name)
		}
	}
	return strings.Join(parts, " · ")
}

// sortedTiers returns m's keys in order.
func sortedTiers[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// durations says a job model's durations.
func durations(m *catalog.Model) string {
	if m.Type == catalog.TypeChat {
		return ""
	}
	if len(m.Durations) > 0 {
		s := make([]string, len(m.Durations))
		for i, d := range m.Durations {
			s[i] = strconv.Itoa(d)
		}
		return strings.Join(s, ", ") + " s"
	}
	lo := max(m.MinDuration, 1)
	return strconv.Itoa(lo) + "-" + strconv.Itoa(m.MaxDuration) + " s"
}

func (c *Console) accounts(p *Page, w http.ResponseWriter, r *http.Request) error {
	accts, err := c.cfg.Operator.Accounts(r.Context())
	if err != nil {
		return err
	}
	p.Section, p.Title, p.Data = "accounts", "Accounts", accts
	p.Flash = r.URL.Query().Get("done")
	return p.Render(w, r, "accounts")
}

// intField parses a form field as an integer, naming it when it is not.
func intField(r *http.Request, name string) (int64, error) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, apierr.Invalidf(name, "invalid_value", "%s must be a whole number", name)
	}
	return n, nil
}

// amountField parses the form field name as credits (a decimal, to 6
// places: 0.25); empty is 0. A malformed value is a 400 naming it.
func amountField(r *http.Request, name string) (credits.Amount, error) {
	v := strings.TrimSpace(r.PostFormValue(name))
	if v == "" {
		return 0, nil
	}
	a, err := credits.ParseAmount(v)
	if err != nil {
		return 0, apierr.Invalidf(name, "invalid_value", "%s: %v", name, err)
	}
	return a, nil
}

func (c *Console) createAccount(p *Page, w http.ResponseWriter, r *http.Request) error {
	n, err := amountField(r, "credits")
	if err != nil {
		return err
	}
	id := strings.TrimSpace(r.PostFormValue("id"))
	if _, err := c.cfg.Operator.CreateAccount(r.Context(), id, n, r.PostFormValue("note")); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/accounts/"+id+"?done=created", http.StatusSeeOther)
	return nil
}

// accountPage is the account page's data.
type accountPage struct {
	Account credits.Account
	Keys    []auth.Record
	Ledger  []credits.Entry
	Usage   []admin.DayUsage
}

func (c *Console) account(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx, id := r.Context(), r.PathValue("id")
	a, err := c.cfg.Operator.Account(ctx, id)
	if err != nil {
		return err
	}
	keys, err := c.cfg.Operator.Keys(ctx, id)
	if err != nil {
		return err
	}
	ledger, err := c.cfg.Operator.Ledger(ctx, id)
	if err != nil {
		return err
	}
	// Newest first, the last 100.
	slices.Reverse(ledger)
	if len(ledger) > 100 {
		ledger = ledger[:100]
	}
	usage, err := c.cfg.Operator.Usage(ctx, id, "", "")
	if err != nil {
		return err
	}
	p.Section, p.Title = "accounts", "Account "+id
	p.Flash = r.URL.Query().Get("done")
	p.Data = accountPage{Account: a, Keys: keys, Ledger: ledger, Usage: usage}
	return p.Render(w, r, "account")
}

func (c *Console) grant(p *Page, w http.ResponseWriter, r *http.Request) error {
	n, err := amountField(r, "amount")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := c.cfg.Operator.Grant(r.Context(), id, n, r.PostFormValue("note")); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/accounts/"+id+"?done=granted", http.StatusSeeOther)
	return nil
}

func (c *Console) setLimit(p *Page, w http.ResponseWriter, r *http.Request) error {
	n, err := intField(r, "rpm")
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := c.cfg.Operator.SetRateLimit(r.Context(), id, int(n)); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/accounts/"+id+"?done=limit", http.StatusSeeOther)
	return nil
}

// keysPage is the keys page's data; NewKey is set once, right after the
// key was made (it is shown this once, never stored).
type keysPage struct {
	Keys     []auth.Record
	Accounts []admin.AccountInfo
	NewKey   string
	NewFor   string
	Account  string
}

func (c *Console) keys(p *Page, w http.ResponseWriter, r *http.Request) error {
	return c.renderKeys(p, w, r, "", "")
}

func (c *Console) renderKeys(p *Page, w http.ResponseWriter, r *http.Request, newKey, newFor string) error {
	ctx := r.Context()
	account := r.URL.Query().Get("account")
	keys, err := c.cfg.Operator.Keys(ctx, account)
	if err != nil {
		return err
	}
	accts, err := c.cfg.Operator.Accounts(ctx)
	if err != nil {
		return err
	}
	p.Section, p.Title = "keys", "API keys"
	p.Flash = r.URL.Query().Get("done")
	p.Data = keysPage{Keys: keys, Accounts: accts, NewKey: newKey, NewFor: newFor, Account: account}
	return p.Render(w, r, "keys")
}

// createKey makes a key with the form's controls and shows it in the
// answer to this POST, once: it is never in a URL, a redirect or a store.
func (c *Console) createKey(p *Page, w http.ResponseWriter, r *http.Request) error {
	account := strings.TrimSpace(r.PostFormValue("account"))
	ctl, err := c.controlsForm(r)
	if err != nil {
		return err
	}
	key, rec, err := c.cfg.Operator.CreateKey(r.Context(), account, 0, ctl)
	if err != nil {
		return err
	}
	return c.renderKeys(p, w, r, string(key), rec.Account)
}

// controlsForm reads a key form's controls: name, models (comma-separated
// patterns, empty for every model), expires (empty for never, a duration
// from now such as 30d, or a time such as 2026-12-31T23:59:59Z),
// credit_limit (empty for none), credit_limit_reset (a select: empty
// for never, daily, weekly, monthly) and jobs (a select: account, own).
func (c *Console) controlsForm(r *http.Request) (auth.Controls, error) {
	ctl := auth.Controls{
		Name:   strings.TrimSpace(r.PostFormValue("name")),
		Models: auth.ParseModels(r.PostFormValue("models")),
	}
	exp, err := auth.ParseExpiry(r.PostFormValue("expires"), c.now())
	if err != nil {
		return ctl, err
	}
	ctl.ExpiresAt = exp
	if strings.TrimSpace(r.PostFormValue("credit_limit")) != "" {
		n, err := amountField(r, "credit_limit")
		if err != nil {
			return ctl, err
		}
		ctl.CreditLimit = &n
	}
	if ctl.CreditLimitReset, err = auth.ParseReset(r.PostFormValue("credit_limit_reset")); err != nil {
		return ctl, err
	}
	if ctl.Jobs, err = auth.ParseJobs(r.PostFormValue("jobs")); err != nil {
		return ctl, apierr.Invalidf("jobs", "invalid_value", "jobs must be account or own")
	}
	return ctl, ctl.Check()
}

// keyPage is the data of one key's page: the key and its edit form.
type keyPage struct {
	Key auth.Record
	// Expires is the key's expiry as the form shows it (RFC 3339, UTC).
	Expires string
	Left    credits.Amount
	Limited bool
	// ResetsAt is when the key's credit limit period ends (Unix
	// seconds), 0 without a reset.
	ResetsAt int64
}

// findKey returns the key with id, from the operator's list.
func (c *Console) findKey(r *http.Request, id string) (auth.Record, error) {
	keys, err := c.cfg.Operator.Keys(r.Context(), "")
	if err != nil {
		return auth.Record{}, err
	}
	for _, k := range keys {
		if k.ID == id {
			return k, nil
		}
	}
	return auth.Record{}, auth.ErrKeyNotFound
}

func (c *Console) key(p *Page, w http.ResponseWriter, r *http.Request) error {
	k, err := c.findKey(r, r.PathValue("id"))
	if err != nil {
		return err
	}
	d := keyPage{Key: k}
	if k.ExpiresAt != 0 {
		d.Expires = time.Unix(k.ExpiresAt, 0).UTC().Format(time.RFC3339)
	}
	d.Left, d.Limited = k.Left()
	if at := k.ResetAt(c.now()); !at.IsZero() {
		d.ResetsAt = at.Unix()
	}
	p.Section, p.Title, p.Flash, p.Data = "keys", "Key "+k.Prefix+"…", r.URL.Query().Get("done"), d
	return p.Render(w, r, "key")
}

// updateKey replaces the key's controls with the form's (the key is not
// re-issued and keeps its spend); the change is in the audit log.
func (c *Console) updateKey(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctl, err := c.controlsForm(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	limit := -credits.Credit // negative: no limit
	if ctl.CreditLimit != nil {
		limit = *ctl.CreditLimit
	}
	ch := auth.Change{Name: &ctl.Name, Models: &ctl.Models, ExpiresAt: &ctl.ExpiresAt, CreditLimit: &limit, CreditLimitReset: &ctl.CreditLimitReset,
		Jobs: &ctl.Jobs}
	if _, err := c.cfg.Operator.UpdateKey(r.Context(), id, ch); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/keys/"+id+"?done=updated", http.StatusSeeOther)
	return nil
}

func (c *Console) revokeKey(p *Page, w http.ResponseWriter, r *http.Request) error {
	if _, err := c.cfg.Operator.RevokeKey(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(w, r, "/console/keys?done=revoked", http.StatusSeeOther)
	return nil
}

func (c *Console) audit(p *Page, w http.ResponseWriter, r *http.Request) error {
	entries, err := c.cfg.Operator.Audit(r.Context(), r.URL.Query().Get("before"), 100)
	if err != nil {
		return err
	}
	p.Section, p.Title, p.Data = "audit", "Audit log", entries
	return p.Render(w, r, "audit")
}

// signout ends the session on the server (its cookie, wherever it was
// copied, is refused from then on) and removes the cookie.
func (c *Console) signout(p *Page, w http.ResponseWriter, r *http.Request) error {
	if err := c.sess.end(r.Context(), p.ses); err != nil {
		return fmt.Errorf("end the console session: %w", err)
	}
	c.cfg.Operator.Record(r.Context(), "console.signout", "console", "")
	c.sess.clear(w, secure(r))
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
	return nil
}
