package credits

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Chat is the ledger kind of priced chat usage: balance -= amount and
// available -= amount (nothing was held). Its entry ID is ChatEntryID of the
// AddUsage id, "chat:<id>".
const Chat = "chat"

// DayLayout is the time layout of a usage day: YYYY-MM-DD, in UTC.
const DayLayout = "2006-01-02"

// Usage is what an account used of one chat model on one UTC day: the sums
// of every completion recorded for that (account, day, model). Given to
// UsageStore.AddUsage, it is the increment: Requests completions with these
// token and credit sums.
type Usage struct {
	Account          string `json:"account"`
	Day              string `json:"day"` // YYYY-MM-DD, UTC
	Model            string `json:"model"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	Credits          Amount `json:"credits"`
	// Key, given to AddUsage, is the API key that made the completions
	// ("" for none): its spend is charged the credits too. It is not part
	// of the usage row (Usage returns rows without it).
	Key string `json:"key,omitempty"`
}

// JobUsage is what an account spent on jobs of one type and model on one
// UTC day: its completed jobs settled under that day (Store.Settle counts
// each Capture once) and the credits they were charged. Failed jobs cost
// nothing and are not counted. The day is that of the job's end (the
// settlement's At: the job's final transition), so a job the reconciler
// settles days later still counts on the day it completed.
type JobUsage struct {
	Account string `json:"account"`
	Day     string `json:"day"` // YYYY-MM-DD, UTC
	JobType string `json:"type"`
	Model   string `json:"model"`
	Jobs    int64  `json:"jobs"`
	Credits Amount `json:"credits"`
}

// JobUsageOf returns the job usage increment that settling e adds (one
// job, e.Amount credits, on the UTC day of e.At), and whether it adds
// any: only a Capture with a JobType and a Model does.
func JobUsageOf(e Entry) (JobUsage, bool) {
	if e.Kind != Capture || e.JobType == "" || e.Model == "" {
		return JobUsage{}, false
	}
	return JobUsage{Account: e.Account, Day: Day(time.Unix(e.At, 0)), JobType: e.JobType, Model: e.Model, Jobs: 1, Credits: e.Amount}, true
}

// UsageStore records chat usage per account, day and model, and charges
// priced completions; it reads the job usage that Store.Settle counts.
// Implementations are safe for concurrent use.
type UsageStore interface {
	// AddUsage adds u.Requests (>= 1) requests and u's tokens and credits
	// to the (u.Account, u.Day, u.Model) usage, as atomic increments. If
	// u.Credits > 0 it also debits the account (balance -= credits,
	// available -= credits), adds them to the spend of u.Key if it is set
	// (unconditionally, like the account's debit), and writes a Chat
	// ledger entry with ID ChatEntryID(id), all in the same atomic step; that entry marks id
	// as applied, so a second call with the same id adds nothing, charges
	// nothing and returns nil (whatever its u): a caller that did not
	// learn the outcome of a call (a timeout, a lost answer) retries it
	// with the same id without charging twice. With u.Credits == 0 there
	// is no marker and each call adds again, even with an id used before:
	// such usage is statistics, and a retry after an ambiguous failure may
	// count it twice.
	//
	// The debit is unconditional: the tokens are already spent, so a
	// completion is charged even if it takes available below zero (by at
	// most its own price, if callers refuse new priced completions while
	// available <= 0). With credits > 0 an unknown account is
	// ErrAccountNotFound and nothing is written; with credits == 0 the
	// account is not checked. Arguments CheckUsage refuses are an error
	// wrapping ErrInvalidUsage, and nothing is written; so is a charge
	// that would take the usage's credits, the key's spend or the
	// balance past ±MaxAmount (the error matches ErrAmountRange too).
	AddUsage(ctx context.Context, id string, u Usage) error
	// Usage returns the account's usage from fromDay to toDay inclusive
	// ("" for no bound on that side), ordered by day, then model. An
	// unknown account has none.
	Usage(ctx context.Context, account, fromDay, toDay string) ([]Usage, error)
	// JobUsage returns the account's job usage from fromDay to toDay
	// inclusive ("" for no bound on that side), ordered by day, then job
	// type, then model. An unknown account has none.
	JobUsage(ctx context.Context, account, fromDay, toDay string) ([]JobUsage, error)
}

// Day returns the usage day of t: its UTC date as YYYY-MM-DD.
func Day(t time.Time) string { return t.UTC().Format(DayLayout) }

// ErrBadDay is wrapped by CheckUsage and CheckDayRange for a malformed day.
var ErrBadDay = errors.New("a day must be YYYY-MM-DD")

// CheckDay returns an error wrapping ErrBadDay unless day is a YYYY-MM-DD
// date.
func CheckDay(day string) error {
	if len(day) != len(DayLayout) {
		return fmt.Errorf("day %q: %w", day, ErrBadDay)
	}
	if _, err := time.Parse(DayLayout, day); err != nil {
		return fmt.Errorf("day %q: %w", day, ErrBadDay)
	}
	return nil
}

// ErrInvalidUsage is wrapped by CheckUsage (and so by UsageStore.AddUsage)
// for arguments no store accepts: retrying them cannot succeed.
var ErrInvalidUsage = errors.New("invalid usage")

// CheckUsage validates the arguments of UsageStore.AddUsage; stores call it
// first. Account and model must be non-empty and free of NUL bytes, the day
// YYYY-MM-DD, Requests at least 1, the other counts non-negative, and id,
// free of NUL bytes, non-empty when u.Credits > 0 (it is the charge's
// idempotency key). Every error wraps ErrInvalidUsage, and ErrBadDay for a
// malformed day.
func CheckUsage(id string, u Usage) error {
	switch {
	case u.Account == "" || strings.ContainsRune(u.Account, 0):
		return fmt.Errorf("add usage: %w: account %q", ErrInvalidUsage, u.Account)
	case u.Model == "" || strings.ContainsRune(u.Model, 0):
		return fmt.Errorf("add usage: %w: model %q", ErrInvalidUsage, u.Model)
	case u.Requests < 1:
		return fmt.Errorf("add usage: %w: %d requests, want at least 1", ErrInvalidUsage, u.Requests)
	case u.PromptTokens < 0 || u.CompletionTokens < 0 || u.Credits < 0:
		return fmt.Errorf("add usage: %w: negative count (prompt %d, completion %d, credits %s)", ErrInvalidUsage, u.PromptTokens, u.CompletionTokens, u.Credits)
	case strings.ContainsRune(u.Key, 0):
		return fmt.Errorf("add usage: %w: key %q", ErrInvalidUsage, u.Key)
	case strings.ContainsRune(id, 0) || (id == "" && u.Credits > 0):
		return fmt.Errorf("add usage: %w: id %q (charging credits needs a non-empty id)", ErrInvalidUsage, id)
	}
	if err := CheckDay(u.Day); err != nil {
		return fmt.Errorf("add usage: %w: %w", ErrInvalidUsage, err)
	}
	return nil
}

// CheckDayRange validates the bounds of UsageStore.Usage: each is "" or a
// day, and fromDay is not after toDay.
func CheckDayRange(fromDay, toDay string) error {
	for _, d := range []string{fromDay, toDay} {
		if d == "" {
			continue
		}
		if err := CheckDay(d); err != nil {
			return err
		}
	}
	if fromDay != "" && toDay != "" && fromDay > toDay {
		return fmt.Errorf("day range %s to %s is empty: from is after to", fromDay, toDay)
	}
	return nil
}

// NewUsageID returns a fresh id for UsageStore.AddUsage: 24 random hex
// digits.
func NewUsageID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("usage id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// ChatEntryID returns the ID of the Chat ledger entry that AddUsage writes
// for id: "chat:" and id.
func ChatEntryID(id string) string { return Chat + ":" + id }
