package credits

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Chat is the ledger kind of a chat request's charge (a chat, Responses
// or Messages record whose cost is above 0): balance -= amount and
// available -= amount (nothing was held). Its entry ID is ChatEntryID of
// the record's id, "chat:<id>".
const Chat = "chat"

// DayLayout is the time layout of a usage day: YYYY-MM-DD, in UTC.
const DayLayout = "2006-01-02"

// Usage is what an account used of one chat model on one UTC day: the sums
// over the records of its chat requests that a model answered (UsageOf),
// counted by RecordStore.AddRecords in the same atomic step as each
// record. The token classes are as in Tokens: Cached, CacheWrite and
// CacheWrite1h are parts of PromptTokens, Reasoning of CompletionTokens.
type Usage struct {
	Account            string `json:"account"`
	Day                string `json:"day"` // YYYY-MM-DD, UTC
	Model              string `json:"model"`
	Requests           int64  `json:"requests"`
	PromptTokens       int64  `json:"prompt_tokens"`
	CompletionTokens   int64  `json:"completion_tokens"`
	CachedTokens       int64  `json:"cached_tokens,omitempty"`
	CacheWriteTokens   int64  `json:"cache_write_tokens,omitempty"`
	CacheWrite1hTokens int64  `json:"cache_write_1h_tokens,omitempty"`
	ReasoningTokens    int64  `json:"reasoning_tokens,omitempty"`
	Credits            Amount `json:"credits"`
}

// Add returns u with inc's requests, tokens and credits added (credits
// checked: an error matching ErrAmountRange past ±MaxAmount).
func (u Usage) Add(inc Usage) (Usage, error) {
	c, err := u.Credits.Add(inc.Credits)
	if err != nil {
		return u, err
	}
	u.Requests += inc.Requests
	u.PromptTokens += inc.PromptTokens
	u.CompletionTokens += inc.CompletionTokens
	u.CachedTokens += inc.CachedTokens
	u.CacheWriteTokens += inc.CacheWriteTokens
	u.CacheWrite1hTokens += inc.CacheWrite1hTokens
	u.ReasoningTokens += inc.ReasoningTokens
	u.Credits = c
	return u, nil
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

// UsageStore keeps the records of requests and the chat usage they add
// up to, charges chat requests with their records, and reads the job usage
// that Store.Settle counts. Implementations are safe for concurrent use.
type UsageStore interface {
	RecordStore
	// Usage returns the account's usage from fromDay to toDay inclusive
	// ("" for no bound on that side), ordered by day, then model. An
	// unknown account has none.
	Usage(ctx context.Context, account, fromDay, toDay string) ([]Usage, error)
	// JobUsage returns the account's job usage from fromDay to toDay
	// inclusive ("" for no bound on that side), ordered by day, then job
	// type, then model. An unknown account has none.
	JobUsage(ctx context.Context, account, fromDay, toDay string) ([]JobUsage, error)
}

// Day returns the usage day of t: its UTC date as YYYY-MM-DD. The
// string of the day it made last is kept and returned again for a t in
// that day (the records of a moment share their day), so that one is
// made per day rather than per call.
func Day(t time.Time) string {
	sec := t.Unix()
	if d := lastDay.Load(); d != nil && sec >= d.start && sec < d.start+secondsPerDay {
		return d.s
	}
	d := &dayString{start: sec - (sec%secondsPerDay+secondsPerDay)%secondsPerDay, s: t.UTC().Format(DayLayout)}
	lastDay.Store(d)
	return d.s
}

// secondsPerDay is a UTC day's length in Unix time (which has no leap
// seconds).
const secondsPerDay = 24 * 60 * 60

// dayString is the day string of the Unix seconds [start, start+secondsPerDay).
type dayString struct {
	start int64
	s     string
}

// lastDay is the day Day made last.
var lastDay atomic.Pointer[dayString]

// ErrBadDay is wrapped by CheckDay and CheckDayRange for a malformed day.
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

// ChatEntryID returns the ID of the Chat ledger entry of the chat record
// id: "chat:" and id.
func ChatEntryID(id string) string { return Chat + ":" + id }
