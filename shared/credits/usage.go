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

// Chat is the ledger kind of a priced chat completion: balance -= amount
// and available -= amount (nothing was held). Its entry ID is "chat:<random>".
const Chat = "chat"

// DayLayout is the time layout of a usage day: YYYY-MM-DD, in UTC.
const DayLayout = "2006-01-02"

// Usage is what an account used of one chat model on one UTC day: the sums
// of every completion recorded for that (account, day, model).
type Usage struct {
	Account          string `json:"account"`
	Day              string `json:"day"` // YYYY-MM-DD, UTC
	Model            string `json:"model"`
	Requests         int64  `json:"requests"`
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	Credits          int64  `json:"credits"`
}

// UsageStore records chat usage per account, day and model, and charges
// priced completions. Implementations are safe for concurrent use.
type UsageStore interface {
	// AddUsage adds one request with its tokens and credits to the
	// (account, day, model) usage, as atomic increments. If credits > 0
	// it also debits the account (balance -= credits, available -=
	// credits) and writes a Chat ledger entry, in the same atomic step.
	// The debit is unconditional: the tokens are already spent, so a
	// completion is charged even if it takes available below zero (by at
	// most its own price, if callers refuse new priced completions while
	// available <= 0). With credits > 0 an unknown account is
	// ErrAccountNotFound and nothing is written; with credits == 0 the
	// account is not checked. A day that is not YYYY-MM-DD, an empty
	// account or model, or a negative count is an error.
	AddUsage(ctx context.Context, account, model, day string, promptTokens, completionTokens int, credits int64) error
	// Usage returns the account's usage from fromDay to toDay inclusive
	// ("" for no bound on that side), ordered by day, then model. An
	// unknown account has none.
	Usage(ctx context.Context, account, fromDay, toDay string) ([]Usage, error)
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

// CheckUsage validates the arguments of UsageStore.AddUsage; stores call it
// first. Account and model must be non-empty and free of NUL bytes.
func CheckUsage(account, model, day string, promptTokens, completionTokens int, credits int64) error {
	switch {
	case account == "" || strings.ContainsRune(account, 0):
		return fmt.Errorf("add usage: invalid account %q", account)
	case model == "" || strings.ContainsRune(model, 0):
		return fmt.Errorf("add usage: invalid model %q", model)
	case promptTokens < 0 || completionTokens < 0 || credits < 0:
		return fmt.Errorf("add usage: negative count (prompt %d, completion %d, credits %d)", promptTokens, completionTokens, credits)
	}
	if err := CheckDay(day); err != nil {
		return fmt.Errorf("add usage: %w", err)
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

// NewChatEntryID returns a fresh ledger entry id for a Chat entry:
// "chat:" and 24 random hex digits.
func NewChatEntryID() (string, error) {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("chat entry id: %w", err)
	}
	return "chat:" + hex.EncodeToString(b[:]), nil
}
