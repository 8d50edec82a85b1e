package auth

import (
	"fmt"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
)

// Credit limit resets (Controls.CreditLimitReset): UTC calendar periods
// after which a key's Spent counts from 0 again.
const (
	ResetNever   = ""        // Spent counts from the key's creation
	ResetDaily   = "daily"   // periods "2026-11-28"
	ResetWeekly  = "weekly"  // ISO weeks from Monday, periods "2026-W48"
	ResetMonthly = "monthly" // periods "2026-11"
)

// ParseReset reads a reset as an operator writes it: "", "none" or
// "never" (ResetNever), "daily", "weekly" or "monthly" (any case). Other
// values are a 400 naming credit_limit_reset.
func ParseReset(s string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "", "none", "never":
		return ResetNever, nil
	case ResetDaily, ResetWeekly, ResetMonthly:
		return v, nil
	}
	return "", apierr.Invalidf("credit_limit_reset", "invalid_value", "credit_limit_reset %q: give daily, weekly, monthly or none", s)
}

// Period returns the period of reset that t falls in (UTC): "2026-11-28"
// (daily), "2026-W48" (weekly: the ISO week, from Monday), "2026-11"
// (monthly); "" for ResetNever or an unknown reset.
func Period(reset string, t time.Time) string {
	t = t.UTC()
	switch reset {
	case ResetDaily:
		return t.Format(time.DateOnly)
	case ResetWeekly:
		y, w := t.ISOWeek()
		return fmt.Sprintf("%04d-W%02d", y, w)
	case ResetMonthly:
		return t.Format("2006-01")
	}
	return ""
}

// PeriodStart returns when period (as Period makes it, any reset)
// begins, midnight UTC; false if it is not a period.
func PeriodStart(period string) (time.Time, bool) {
	if y, w, ok := strings.Cut(period, "-W"); ok {
		year, okY := digits(y, 4)
		week, okW := digits(w, 2)
		if !okY || !okW || week < 1 || week > 53 {
			return time.Time{}, false
		}
		// ISO week 1 holds January 4th; its Monday starts the year's weeks.
		jan4 := time.Date(year, 1, 4, 0, 0, 0, 0, time.UTC)
		start := jan4.AddDate(0, 0, -((int(jan4.Weekday())+6)%7)+7*(week-1))
		if yy, ww := start.ISOWeek(); yy != year || ww != week {
			return time.Time{}, false // week 53 of a year of 52
		}
		return start, true
	}
	for _, layout := range []string{time.DateOnly, "2006-01"} {
		if t, err := time.Parse(layout, period); err == nil && len(period) == len(layout) {
			return t, true
		}
	}
	return time.Time{}, false
}

// digits reads s as a number of exactly n decimal digits.
func digits(s string, n int) (int, bool) {
	if len(s) != n {
		return 0, false
	}
	v := 0
	for _, c := range []byte(s) {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// NextReset returns when the period of reset that t falls in ends (the
// next one starts), or the zero time for ResetNever.
func NextReset(reset string, t time.Time) time.Time {
	t = t.UTC()
	day := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	switch reset {
	case ResetDaily:
		return day.AddDate(0, 0, 1)
	case ResetWeekly:
		return day.AddDate(0, 0, 7-(int(t.Weekday())+6)%7)
	case ResetMonthly:
		return time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
	}
	return time.Time{}
}

// NewerPeriod reports whether period starts after stored does, so that
// a key whose Spent belongs to stored may start period (Store.RollKeyPeriod):
// true when stored is "" (a key never rolled) or not a period, false when
// period is not one. Periods of different resets compare by their start:
// a key going from monthly to daily rolls the next time it is used, one
// going from daily to monthly at the next month.
func NewerPeriod(stored, period string) bool {
	p, ok := PeriodStart(period)
	if !ok {
		return false
	}
	s, ok := PeriodStart(stored)
	return !ok || s.Before(p)
}

// ErrBadPeriod is returned by Store.RollKeyPeriod for a period that
// Period does not make.
var ErrBadPeriod = apierr.Invalidf("period", "invalid_value", "not a credit limit period (2026-11-28, 2026-W48 or 2026-11)")

// InPeriod returns r as it stands at now: when r has a reset and its
// Spent belongs to an older period than now's (the key was not used
// since that period ended, so not rolled yet), Spent is 0 and Period
// now's, as the next request will make them. Held stays. Lists and
// balances show this; the stores are not written.
func (r Record) InPeriod(now time.Time) Record {
	if r.CreditLimitReset == ResetNever {
		return r
	}
	if p := Period(r.CreditLimitReset, now); NewerPeriod(r.Period, p) {
		r.Spent, r.Period = 0, p
	}
	return r
}

// ResetAt returns when r's Spent next starts from 0: the end of its
// Period under its reset (the end of now's period when it has none yet),
// or the zero time without a reset. r is as InPeriod made it.
func (r Record) ResetAt(now time.Time) time.Time {
	if r.CreditLimitReset == ResetNever {
		return time.Time{}
	}
	start, ok := PeriodStart(r.Period)
	if !ok {
		start = now
	}
	return NextReset(r.CreditLimitReset, start)
}

// DescribeSpend says what r has spent of its limit, for lists: "3/10",
// "3/-" without a limit, "3/10 monthly, 2026-11" with a reset, "(+2
// held)" after it when requests in progress hold credits. r is as
// InPeriod made it.
func (r Record) DescribeSpend() string {
	s := fmt.Sprintf("%s/-", r.Spent)
	if r.CreditLimit != nil {
		s = fmt.Sprintf("%s/%s", r.Spent, *r.CreditLimit)
	}
	if r.CreditLimitReset != ResetNever {
		s += " " + r.CreditLimitReset
		if r.Period != "" {
			s += ", " + r.Period
		}
	}
	if r.Held != 0 {
		s += fmt.Sprintf(" (+%s held)", r.Held)
	}
	return s
}
