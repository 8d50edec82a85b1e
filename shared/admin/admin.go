// Package admin is the operator's side of the service: making and revoking
// API keys, granting credits and reading balances, the ledger and the
// usage (chat tokens and job credits). The genway CLI uses a Service directly on a store it can open, or,
// when `genway serve` holds the embedded store, a Client that talks to the
// server's Handler over a unix socket in the data directory — so an
// operator can add a key without stopping the service.
package admin

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Store is what the operator commands need from a backend.
type Store interface {
	auth.Store
	credits.Store
	credits.UsageStore
	credits.Reserver
	AuditStore
	SessionStore
	// SetRateLimit sets the account's requests per minute per key (0: the
	// default, negative: unlimited).
	SetRateLimit(ctx context.Context, account string, rpm int) error
	// Accounts returns every account, by id.
	Accounts(ctx context.Context) ([]credits.Account, error)
	// LedgerEntry reports whether account's ledger has the entry id.
	LedgerEntry(ctx context.Context, account, id string) (bool, error)
}

// SessionStore keeps the operator console's live sessions, so that a
// session ends on the server when its operator signs out (a cookie alone,
// however well signed, is no session). Ids are opaque strings (the
// console stores a hash of each session's id, never the id itself). Safe
// for concurrent use.
type SessionStore interface {
	// AddSession records the session id, live until expires (Unix
	// seconds). Adding an id again replaces it.
	AddSession(ctx context.Context, id string, expires int64) error
	// SessionLive reports whether id was added, has not ended, and
	// expires after now (Unix seconds).
	SessionLive(ctx context.Context, id string, now int64) (bool, error)
	// EndSession ends id: SessionLive reports false for it from then on.
	// Ending an unknown or ended session is no error.
	EndSession(ctx context.Context, id string) error
}

// AccountInfo is an account as the operator lists it: its credits and
// rate limit, and how many live keys it has (neither revoked nor
// expired).
type AccountInfo struct {
	credits.Account
	Keys int `json:"keys"`
}

// KindChat is the Kind of chat usage in a DayUsage; job usage has the
// job's type (music, sfx, video), or that of the synchronous generation
// (image, speech).
const KindChat = "chat"

// DayUsage is what one account used of one model on one UTC day: chat
// completions (Kind "chat": requests, tokens and the credits of priced
// chat models), completed jobs of one type (Kind music, sfx or video:
// jobs and their credits), or image or speech generations (Kind image or
// speech: Jobs is the requests that succeeded, Credits their charges,
// an image request of n images n times the price). Credits are the
// common unit of all; a failed job or generation costs nothing and is not
// counted.
type DayUsage struct {
	Account          string `json:"account"`
	Day              string `json:"day"` // YYYY-MM-DD, UTC
	Kind             string `json:"kind"`
	Model            string `json:"model"`
	Requests         int64  `json:"requests"`          // chat completions
	PromptTokens     int64  `json:"prompt_tokens"`     // chat
	CompletionTokens int64  `json:"completion_tokens"` // chat
	// The parts of the chat tokens counted apart (of PromptTokens: read
	// from and written to the providers' prompt caches; of
	// CompletionTokens: reasoning).
	CachedTokens       int64          `json:"cached_tokens,omitempty"`
	CacheWriteTokens   int64          `json:"cache_write_tokens,omitempty"`
	CacheWrite1hTokens int64          `json:"cache_write_1h_tokens,omitempty"`
	ReasoningTokens    int64          `json:"reasoning_tokens,omitempty"`
	Jobs               int64          `json:"jobs"` // completed jobs, or image and speech requests
	Credits            credits.Amount `json:"credits"`
}

// Tokens returns the usage's prompt and completion tokens.
func (u DayUsage) Tokens() int64 { return u.PromptTokens + u.CompletionTokens }

// chatDay is chat usage as a DayUsage.
func chatDay(u credits.Usage) DayUsage {
	return DayUsage{Account: u.Account, Day: u.Day, Kind: KindChat, Model: u.Model, Requests: u.Requests,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, CachedTokens: u.CachedTokens,
		CacheWriteTokens: u.CacheWriteTokens, CacheWrite1hTokens: u.CacheWrite1hTokens, ReasoningTokens: u.ReasoningTokens,
		Credits: u.Credits}
}

// jobDay is job usage as a DayUsage.
func jobDay(u credits.JobUsage) DayUsage {
	return DayUsage{Account: u.Account, Day: u.Day, Kind: u.JobType, Model: u.Model, Jobs: u.Jobs, Credits: u.Credits}
}

// Operator is the set of operator commands; Service and Client implement it.
type Operator interface {
	// CreateKey makes a key for account with controls c, adding amount
	// to the account.
	CreateKey(ctx context.Context, account string, amount credits.Amount, c auth.Controls) (auth.Key, auth.Record, error)
	// UpdateKey changes the controls of the key an id or prefix names
	// (auth.Resolve), without re-issuing it; its spend stays.
	UpdateKey(ctx context.Context, idOrPrefix string, ch auth.Change) (auth.Record, error)
	ImportKey(ctx context.Context, account string, key auth.Key) (auth.Record, error)
	Keys(ctx context.Context, account string) ([]auth.Record, error)
	RevokeKey(ctx context.Context, idOrPrefix string) (auth.Record, error)
	// Grant adds amount credits to an existing account; note says why
	// (the audit log keeps it).
	Grant(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error)
	// CreateAccount makes a new account with amount credits (0 or more);
	// an account that exists is a 409.
	CreateAccount(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error)
	Account(ctx context.Context, account string) (credits.Account, error)
	Accounts(ctx context.Context) ([]AccountInfo, error)
	Ledger(ctx context.Context, account string) ([]credits.Entry, error)
	// SetRateLimit sets the account's requests per minute per key: 0 for
	// the default, Unlimited (-1) for none; another negative rpm is a 400
	// naming rpm.
	SetRateLimit(ctx context.Context, account string, rpm int) (credits.Account, error)
	// Usage returns chat and job usage per day, kind and model from day
	// from to day to (YYYY-MM-DD, inclusive; "" for no bound) of account,
	// or of every account when account is "", ordered by account, day,
	// kind and model.
	Usage(ctx context.Context, account, from, to string) ([]DayUsage, error)
	// Audit returns up to limit audit entries older than before ("" for
	// the newest), newest first.
	Audit(ctx context.Context, before string, limit int) ([]AuditEntry, error)
	// Reconcile settles the final jobs of the last days days whose hold
	// the change stream never settled, and releases the reservations
	// older than credits.ReservationTTL still open (see jobs.Reconcile).
	Reconcile(ctx context.Context, days int) (jobs.ReconcileResult, error)
	// Requests returns a page of the records of requests q selects, of
	// every account, newest first, and the cursor of the next page ("" if
	// none); a malformed q is a 400 naming its parameter
	// (credits.RecordQuery.Normalize).
	Requests(ctx context.Context, q credits.RecordQuery) ([]credits.Record, string, error)
	// Request returns the record id of any account, or a 404
	// record_not_found (ErrRecordNotFound) for an unknown or expired one.
	Request(ctx context.Context, id string) (credits.Record, error)
	ReservationLister
}

// ErrRecordNotFound is the operator's 404 of a record that does not
// exist or has expired; it matches credits.ErrRecordNotFound.
var ErrRecordNotFound = &apierr.Error{Kind: apierr.NotFound, Code: "record_not_found",
	Message: "No record with this id: unknown, or expired (records are kept GENWAY_RECORD_DAYS days).", Err: credits.ErrRecordNotFound}

// Requests implements Operator.
func (s *Service) Requests(ctx context.Context, q credits.RecordQuery) ([]credits.Record, string, error) {
	return s.Store.Records(ctx, q)
}

// Request implements Operator.
func (s *Service) Request(ctx context.Context, id string) (credits.Record, error) {
	r, err := s.Store.Record(ctx, id)
	if errors.Is(err, credits.ErrRecordNotFound) {
		return credits.Record{}, ErrRecordNotFound
	}
	return r, err
}

// ReservationLister lists the open reservations: the credits held by
// images and speech being generated, each settled when its request ends
// (or released by the reconciler once older than
// credits.ReservationTTL). It is part of Operator.
type ReservationLister interface {
	// Reservations returns the open reservations of account ("" for
	// every account's), oldest first: of the MaxReservations oldest open
	// reservations of all accounts, those of account.
	Reservations(ctx context.Context, account string) ([]credits.Entry, error)
}

// MaxReservations bounds the open reservations read at once. A
// reservation is open for the seconds its request runs, so a longer list
// means requests that died and a reconciler that does not run.
const MaxReservations = 1000

var _ ReservationLister = (*Service)(nil)

// Reservations lists the open reservations of account ("" for all).
// An unknown account is credits.ErrAccountNotFound.
func (s *Service) Reservations(ctx context.Context, account string) ([]credits.Entry, error) {
	if account != "" {
		if _, err := s.Store.Account(ctx, account); err != nil {
			return nil, err
		}
	}
	// Every reservation written so far: a day ahead of this clock covers
	// the clocks of the other processes writing them.
	all, err := s.Store.OpenReservations(ctx, s.now().Add(24*time.Hour).Unix(), MaxReservations)
	if err != nil {
		return nil, fmt.Errorf("open reservations: %w", err)
	}
	if account == "" {
		return all, nil
	}
	return slices.DeleteFunc(all, func(e credits.Entry) bool { return e.Account != account }), nil
}

var accountRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}$`)

// ErrBadAccount is returned for an account name that is not 1-64 of
// letters, digits and _.@- (starting with a letter or digit).
var ErrBadAccount = apierr.Invalidf("account", "invalid_value", "account must be 1-64 letters, digits or _.@- and start with a letter or digit")

// Service runs operator commands on a Store, and writes an audit entry
// for each one that changes something.
type Service struct {
	Store Store
	Jobs  jobs.Store       // for Reconcile; nil: Reconcile is refused
	Now   func() time.Time // nil: time.Now
	Log   *slog.Logger     // audit write failures; nil: not logged
}

// ReconcileGrace is how long a final job is left to the change stream
// before Reconcile settles it itself.
const ReconcileGrace = 10 * time.Minute

// Reconcile settles the final jobs created in the last days days (1 to
// 366) whose settlement is missing, releases the stale open reservations,
// and audits what it did.
func (s *Service) Reconcile(ctx context.Context, days int) (jobs.ReconcileResult, error) {
	if days < 1 || days > 366 {
		return jobs.ReconcileResult{}, apierr.Invalidf("days", "invalid_value", "days must be from 1 to 366")
	}
	if s.Jobs == nil {
		return jobs.ReconcileResult{}, errors.New("reconcile: no jobs store")
	}
	now := s.now()
	res, err := jobs.Reconcile(ctx, s.Jobs, s.Store, now.AddDate(0, 0, -days), ReconcileGrace, now)
	if err == nil && res.Settled > 0 {
		s.audit(ctx, "credits.reconcile", "jobs", fmt.Sprintf("checked %d final jobs of %d days, settled %d", res.Checked, days, res.Settled))
	}
	if err == nil && res.Released > 0 {
		s.audit(ctx, "credits.reconcile", "reservations", fmt.Sprintf("found %d stale open reservations, released %d", res.Reservations, res.Released))
	}
	return res, err
}

var _ Operator = (*Service)(nil)

func (s *Service) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// CreateKey makes a new key for account with controls c (name, model
// patterns, expiry, credit limit), creating the account (with credits
// added, if > 0). The plaintext key is returned once and never stored.
// The audit entry names the controls. Credits that would take the
// account's balance past credits.MaxAmount are a 400 naming credits, and
// nothing is made.
func (s *Service) CreateKey(ctx context.Context, account string, amount credits.Amount, c auth.Controls) (auth.Key, auth.Record, error) {
	if !accountRE.MatchString(account) {
		return "", auth.Record{}, ErrBadAccount
	}
	if amount < 0 {
		return "", auth.Record{}, apierr.Invalidf("credits", "invalid_value", "credits must not be negative")
	}
	if err := c.Check(); err != nil {
		return "", auth.Record{}, err
	}
	if err := s.checkGrant(ctx, account, amount, "credits"); err != nil {
		return "", auth.Record{}, err
	}
	if c.ExpiresAt != 0 && c.ExpiresAt <= s.now().Unix() {
		return "", auth.Record{}, apierr.Invalidf("expires_at", "invalid_value", "expires_at is in the past: the key would never work")
	}
	key, err := auth.NewKey()
	if err != nil {
		return "", auth.Record{}, err
	}
	rec, err := s.putKey(ctx, account, key, c)
	if err != nil {
		return "", auth.Record{}, err
	}
	if _, err := s.Store.Grant(ctx, account, amount, s.now().Unix()); err != nil {
		return "", auth.Record{}, fmt.Errorf("create key: account %s: %w", account, grantError(err, "credits"))
	}
	detail := c.Describe()
	if amount > 0 {
		detail = fmt.Sprintf("with %s credits; %s", amount, detail)
	}
	s.audit(ctx, "keys.create", rec.Prefix+" ("+account+")", detail)
	return key, rec, nil
}

// UpdateKey applies ch to the controls of the key idOrPrefix names and
// audits the change ("keys.update": the controls before and after). The
// key is not re-issued and keeps its spend; a revoked key can be changed
// too (it stays revoked). An empty change is a 400.
func (s *Service) UpdateKey(ctx context.Context, idOrPrefix string, ch auth.Change) (auth.Record, error) {
	if ch.Empty() {
		return auth.Record{}, apierr.Invalidf("", "missing_field", "nothing to change: give name, models, expires_at, credit_limit, credit_limit_reset or jobs")
	}
	rec, err := auth.Resolve(ctx, s.Store, idOrPrefix)
	if err != nil {
		return auth.Record{}, err
	}
	c := ch.Apply(rec.Controls)
	if err := c.Check(); err != nil {
		return auth.Record{}, err
	}
	out, err := s.Store.SetControls(ctx, rec.ID, c)
	if err != nil {
		return auth.Record{}, err
	}
	s.audit(ctx, "keys.update", rec.Prefix+" ("+rec.Account+")", rec.Controls.Describe()+" -> "+c.Describe())
	return out.InPeriod(s.now()), nil
}

// Recorder writes audit entries for actions outside the operator
// commands (Service does).
type Recorder interface {
	Record(ctx context.Context, action, target, detail string)
}

// AuditingOperator is an Operator that also audits the actions taken
// outside the operator commands (a console sign-in, a job cancelled, a
// webhook changed): what the operator's HTTP edge (the admin API, the
// console) takes, so that what is done there is always audited. Service
// is one; Client is not (the server it calls audits its commands).
type AuditingOperator interface {
	Operator
	Recorder
}

var _ AuditingOperator = (*Service)(nil)

// Record writes an audit entry for an action outside the operator
// commands (a console sign-in or sign-out, a job cancelled).
func (s *Service) Record(ctx context.Context, action, target, detail string) {
	s.audit(ctx, action, target, detail)
}

// audit writes an audit entry for an action that succeeded; a failure to
// write it is returned by nobody (the action happened) but is not
// silent: it is in the entry's absence and the server log of the caller.
func (s *Service) audit(ctx context.Context, action, target, detail string) {
	if err := s.Store.AddAudit(context.WithoutCancel(ctx), NewAuditEntry(s.now(), Actor(ctx), action, target, detail)); err != nil && s.Log != nil {
		s.Log.ErrorContext(ctx, "audit log write failed", "action", action, "target", target, "err", err)
	}
}

// ImportKey stores a key chosen by the caller (GENWAY_DEV_KEY), if it is not
// stored yet, and makes sure the account exists.
func (s *Service) ImportKey(ctx context.Context, account string, key auth.Key) (auth.Record, error) {
	return s.putKey(ctx, account, key, auth.Controls{})
}

// putKey stores key for account with controls c, if it is not stored yet
// (a stored key keeps its controls), and makes sure the account exists.
func (s *Service) putKey(ctx context.Context, account string, key auth.Key, c auth.Controls) (auth.Record, error) {
	if !accountRE.MatchString(account) {
		return auth.Record{}, ErrBadAccount
	}
	if !auth.ValidKey(string(key)) {
		return auth.Record{}, apierr.Invalidf("key", "invalid_value", "a key must be %s followed by at least 32 characters", auth.Prefix)
	}
	if rec, err := s.Store.KeyByHash(ctx, auth.Hash(key)); err == nil {
		if rec.Account != account {
			return auth.Record{}, apierr.Invalidf("key", "invalid_value", "that key belongs to another account")
		}
		return rec, nil
	} else if !errors.Is(err, auth.ErrKeyNotFound) {
		return auth.Record{}, err
	}
	rec := auth.NewRecord(key, account, s.now())
	rec.Controls = c
	rec.Period = auth.Period(c.CreditLimitReset, s.now()) // a new key starts in the current period: no roll
	if err := s.Store.PutKey(ctx, rec); err != nil {
		return auth.Record{}, fmt.Errorf("store key: %w", err)
	}
	if _, err := s.Store.Account(ctx, account); errors.Is(err, credits.ErrAccountNotFound) {
		if _, err := s.Store.Grant(ctx, account, 0, s.now().Unix()); err != nil {
			return auth.Record{}, fmt.Errorf("create account %s: %w", account, err)
		}
	} else if err != nil {
		return auth.Record{}, err
	}
	return rec, nil
}

// Keys lists the keys of account ("" for all), each as it stands now
// (auth.Record.InPeriod: a key with a credit limit reset not used since
// its period ended shows the new period's spend, 0).
func (s *Service) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	recs, err := s.Store.Keys(ctx, account)
	for i := range recs {
		recs[i] = recs[i].InPeriod(s.now())
	}
	return recs, err
}

// RevokeKey revokes the key with the given id or prefix.
func (s *Service) RevokeKey(ctx context.Context, idOrPrefix string) (auth.Record, error) {
	rec, err := auth.Resolve(ctx, s.Store, idOrPrefix)
	if err != nil {
		return auth.Record{}, err
	}
	out, err := s.Store.RevokeKey(ctx, rec.ID, s.now())
	if err == nil {
		s.audit(ctx, "keys.revoke", rec.Prefix+" ("+rec.Account+")", "")
	}
	return out, err
}

// maxNote bounds a grant's note.
const maxNote = 500

// Grant adds amount credits to an existing account. An amount that would
// take its balance past credits.MaxAmount is a 400 naming amount, and
// nothing changes.
func (s *Service) Grant(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error) {
	if !accountRE.MatchString(account) {
		return credits.Account{}, ErrBadAccount
	}
	if amount <= 0 || amount > credits.MaxAmount {
		return credits.Account{}, apierr.Invalidf("amount", "invalid_value", "amount must be a positive number of credits, at most %s", credits.MaxAmount)
	}
	if len(note) > maxNote {
		return credits.Account{}, apierr.Invalidf("note", "invalid_value", "a note is at most %d bytes", maxNote)
	}
	if _, err := s.Store.Account(ctx, account); err != nil {
		return credits.Account{}, err
	}
	a, err := s.Store.Grant(ctx, account, amount, s.now().Unix())
	if err != nil {
		return credits.Account{}, grantError(err, "amount")
	}
	s.audit(ctx, "credits.grant", account, fmt.Sprintf("%s credits; %s", amount, note))
	return a, nil
}

// checkGrant refuses, before anything is written, a grant of amount that
// would take account's balance or available credits past
// credits.MaxAmount (a 400 naming field); the store checks it again in
// the grant's own write. An account that does not exist yet has none.
func (s *Service) checkGrant(ctx context.Context, account string, amount credits.Amount, field string) error {
	if amount > credits.MaxAmount {
		return grantError(credits.ErrAmountRange, field)
	}
	a, err := s.Store.Account(ctx, account)
	if errors.Is(err, credits.ErrAccountNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, err := a.Balance.Add(amount); err != nil {
		return grantError(err, field)
	}
	return nil
}

// grantError is err, or, for a grant the store refused because it would
// pass credits.MaxAmount, the 400 naming field.
func grantError(err error, field string) error {
	if errors.Is(err, credits.ErrAmountRange) {
		return &apierr.Error{Kind: apierr.Invalid, Code: "invalid_value", Param: field, Err: err,
			Message: fmt.Sprintf("%s: the account's balance would pass %s credits, the most an account may hold; nothing was granted.", field, credits.MaxAmount)}
	}
	return err
}

// ErrAccountExists is the 409 for making an account that exists.
var ErrAccountExists = &apierr.Error{Kind: apierr.Conflict, Code: "account_exists", Param: "id", Message: "An account with that id exists."}

// CreateAccount makes account with amount credits (0 to
// credits.MaxAmount; more is a 400 naming credits).
func (s *Service) CreateAccount(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error) {
	if !accountRE.MatchString(account) {
		return credits.Account{}, ErrBadAccount
	}
	if amount < 0 || amount > credits.MaxAmount {
		return credits.Account{}, apierr.Invalidf("credits", "invalid_value", "credits must be from 0 to %s", credits.MaxAmount)
	}
	if len(note) > maxNote {
		return credits.Account{}, apierr.Invalidf("note", "invalid_value", "a note is at most %d bytes", maxNote)
	}
	if _, err := s.Store.Account(ctx, account); err == nil {
		return credits.Account{}, ErrAccountExists
	} else if !errors.Is(err, credits.ErrAccountNotFound) {
		return credits.Account{}, err
	}
	a, err := s.Store.Grant(ctx, account, amount, s.now().Unix())
	if err != nil {
		return credits.Account{}, grantError(err, "credits")
	}
	s.audit(ctx, "accounts.create", account, fmt.Sprintf("%s credits; %s", amount, note))
	return a, nil
}

// Accounts lists every account with its number of live keys.
func (s *Service) Accounts(ctx context.Context) ([]AccountInfo, error) {
	accts, err := s.Store.Accounts(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := s.Store.Keys(ctx, "")
	if err != nil {
		return nil, err
	}
	live := map[string]int{}
	now := s.now()
	for _, k := range keys {
		if k.Revoked == 0 && !k.Expired(now) {
			live[k.Account]++
		}
	}
	out := make([]AccountInfo, len(accts))
	for i, a := range accts {
		out[i] = AccountInfo{Account: a, Keys: live[a.ID]}
	}
	return out, nil
}

// Audit returns the audit log, newest first.
func (s *Service) Audit(ctx context.Context, before string, limit int) ([]AuditEntry, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return s.Store.Audit(ctx, before, limit)
}

// Account returns the account's position.
func (s *Service) Account(ctx context.Context, account string) (credits.Account, error) {
	return s.Store.Account(ctx, account)
}

// Ledger returns the account's ledger, oldest first.
func (s *Service) Ledger(ctx context.Context, account string) ([]credits.Entry, error) {
	return s.Store.Ledger(ctx, account)
}

// Unlimited is the rate limit (requests per minute per key) of an
// account whose keys have none: the one negative SetRateLimit takes.
const Unlimited = -1

// SetRateLimit sets the account's per-key rate limit: rpm requests per
// minute, 0 for the default, Unlimited for none. Another negative rpm is
// a 400 naming rpm, and nothing changes.
func (s *Service) SetRateLimit(ctx context.Context, account string, rpm int) (credits.Account, error) {
	if rpm < Unlimited {
		return credits.Account{}, apierr.Invalidf("rpm", "invalid_value", "rpm must be requests per minute per key: 0 for the default, %d for unlimited, or a positive number; not %d", Unlimited, rpm)
	}
	if _, err := s.Store.Account(ctx, account); err != nil {
		return credits.Account{}, err
	}
	if err := s.Store.SetRateLimit(ctx, account, rpm); err != nil {
		return credits.Account{}, err
	}
	s.audit(ctx, "accounts.rate_limit", account, fmt.Sprintf("%d requests per minute per key", rpm))
	return s.Store.Account(ctx, account)
}

// Usage returns the account's chat and job usage per day, kind and model
// from day from to day to (YYYY-MM-DD, inclusive; "" for no bound), of
// every account when account is "", ordered by account, day, kind and
// model. Malformed days are an *apierr.Error (Invalid); an unknown account
// is credits.ErrAccountNotFound. Each account costs two reads of its own
// (on DynamoDB, two Queries of its partition), never a scan of the usage.
func (s *Service) Usage(ctx context.Context, account, from, to string) ([]DayUsage, error) {
	for _, d := range []struct{ param, day string }{{"from", from}, {"to", to}} {
		if d.day != "" && credits.CheckDay(d.day) != nil {
			return nil, apierr.Invalidf(d.param, "invalid_value", "%s must be a day as YYYY-MM-DD, not %q", d.param, d.day)
		}
	}
	if from != "" && to != "" && from > to {
		return nil, apierr.Invalidf("from", "invalid_value", "from (%s) is after to (%s)", from, to)
	}
	accounts := []string{account}
	if account == "" { // every account's
		accts, err := s.Store.Accounts(ctx)
		if err != nil {
			return nil, err
		}
		accounts = accounts[:0]
		for _, a := range accts {
			accounts = append(accounts, a.ID)
		}
	} else if _, err := s.Store.Account(ctx, account); err != nil {
		return nil, err
	}
	var out []DayUsage
	for _, id := range accounts {
		chat, err := s.Store.Usage(ctx, id, from, to)
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", id, err)
		}
		jobs, err := s.Store.JobUsage(ctx, id, from, to)
		if err != nil {
			return nil, fmt.Errorf("usage of %s: %w", id, err)
		}
		for _, u := range chat {
			out = append(out, chatDay(u))
		}
		for _, u := range jobs {
			out = append(out, jobDay(u))
		}
	}
	slices.SortStableFunc(out, func(a, b DayUsage) int {
		return cmp.Or(cmp.Compare(a.Account, b.Account), cmp.Compare(a.Day, b.Day), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Model, b.Model))
	})
	return out, nil
}
