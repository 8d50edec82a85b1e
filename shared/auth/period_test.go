package auth

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

func TestPeriod(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		reset, at   string
		period      string
		start, next string // RFC 3339
	}{
		{ResetDaily, "2026-11-28T23:59:59Z", "2026-11-28", "2026-11-28T00:00:00Z", "2026-11-29T00:00:00Z"},
		{ResetDaily, "2026-11-28T23:30:00-02:00", "2026-11-29", "2026-11-29T00:00:00Z", "2026-11-30T00:00:00Z"}, // UTC
		{ResetWeekly, "2026-11-28T12:00:00Z", "2026-W48", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},       // a Saturday
		{ResetWeekly, "2026-11-30T00:00:00Z", "2026-W49", "2026-11-30T00:00:00Z", "2026-12-07T00:00:00Z"},       // a Monday
		{ResetWeekly, "2026-11-29T23:59:59Z", "2026-W48", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"},       // a Sunday
		{ResetWeekly, "2027-01-01T00:00:00Z", "2026-W53", "2026-12-28T00:00:00Z", "2027-01-04T00:00:00Z"},       // ISO year 2026
		{ResetWeekly, "2025-12-29T08:00:00Z", "2026-W01", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z"},       // ISO year 2026
		{ResetMonthly, "2026-11-28T12:00:00Z", "2026-11", "2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z"},
		{ResetMonthly, "2026-12-31T23:59:59Z", "2026-12", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		now := at(tt.at)
		p := Period(tt.reset, now)
		start, ok := PeriodStart(p)
		if p != tt.period || !ok || !start.Equal(at(tt.start)) {
			t.Errorf("Period(%s, %s) = %q starting %v, %v; want %q starting %s", tt.reset, tt.at, p, start, ok, tt.period, tt.start)
		}
		if next := NextReset(tt.reset, now); !next.Equal(at(tt.next)) || Period(tt.reset, next) == p || Period(tt.reset, next.Add(-time.Nanosecond)) != p {
			t.Errorf("NextReset(%s, %s) = %v; want %s, the first instant of the next period", tt.reset, tt.at, next, tt.next)
		}
	}
	if p := Period(ResetNever, time.Now()); p != "" {
		t.Errorf("Period(never) = %q; want \"\"", p)
	}
	if n := NextReset(ResetNever, time.Now()); !n.IsZero() {
		t.Errorf("NextReset(never) = %v; want zero", n)
	}
	for _, bad := range []string{"", "2026", "2026-13", "2026-1", "2026-11-31", "2026-W00", "2026-W54", "2025-W53", "2026-w48", "2026-W4", "+026-W48", "2026-W+8", "2026-W 8", "x2026-11", "2026-11-28T00:00:00Z"} {
		if _, ok := PeriodStart(bad); ok {
			t.Errorf("PeriodStart(%q) ok; want not a period", bad)
		}
	}
}

func TestNewerPeriod(t *testing.T) {
	tests := []struct {
		stored, period string
		want           bool
	}{
		{"", "2026-11", true},
		{"junk", "2026-11", true},
		{"2026-10", "2026-11", true},
		{"2026-11", "2026-11", false},
		{"2026-12", "2026-11", false},
		{"2026-11", "2026-11-28", true},  // monthly to daily: rolls now
		{"2026-11-28", "2026-11", false}, // daily to monthly: at the next month
		{"2026-11-28", "2026-12", true},
		{"2026-W48", "2026-11", false},
		{"2026-11", "2026-W48", true},
		{"2026-11-01", "2026-11", false}, // same start: nothing new
		{"2026-11", "junk", false},
		{"", "", false},
	}
	for _, tt := range tests {
		if got := NewerPeriod(tt.stored, tt.period); got != tt.want {
			t.Errorf("NewerPeriod(%q, %q) = %v; want %v", tt.stored, tt.period, got, tt.want)
		}
	}
}

func TestInPeriod(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	lim := 10 * credits.Credit
	tests := []struct {
		name string
		rec  Record
		want Record
	}{
		{"no reset", Record{Controls: Controls{CreditLimit: &lim}, Spent: 7, Held: 1, Period: "2026-11"},
			Record{Controls: Controls{CreditLimit: &lim}, Spent: 7, Held: 1, Period: "2026-11"}},
		{"current", Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: 7, Held: 1, Period: "2026-12"},
			Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: 7, Held: 1, Period: "2026-12"}},
		{"old", Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: 7, Held: 1, Period: "2026-11"},
			Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: 0, Held: 1, Period: "2026-12"}},
		{"never rolled", Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}, Spent: 7},
			Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}, Spent: 0, Period: "2026-12-02"}},
	}
	for _, tt := range tests {
		if got := tt.rec.InPeriod(now); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: InPeriod = %+v; want %+v", tt.name, got, tt.want)
		}
	}
}

func TestResetControls(t *testing.T) {
	lim := 10 * credits.Credit
	for _, tt := range []struct {
		c     Controls
		param string // "" for valid
	}{
		{Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, ""},
		{Controls{CreditLimit: &lim, CreditLimitReset: ResetWeekly}, ""},
		{Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}, ""},
		{Controls{CreditLimitReset: ResetMonthly}, "credit_limit_reset"}, // no limit
		{Controls{CreditLimit: &lim, CreditLimitReset: "yearly"}, "credit_limit_reset"},
		{Controls{CreditLimit: &lim, CreditLimitReset: "Monthly"}, "credit_limit_reset"},
		{Controls{CreditLimit: &lim, CreditLimitReset: "none"}, "credit_limit_reset"},
	} {
		err := tt.c.Check()
		if e := apierr.As(err); tt.param == "" && err != nil || tt.param != "" && (e == nil || e.Param != tt.param) {
			t.Errorf("Check(%+v) = %v; want param %q", tt.c, err, tt.param)
		}
	}
	for _, tt := range []struct {
		in   string
		want string
		ok   bool
	}{{"", "", true}, {"none", "", true}, {"Never", "", true}, {" Monthly ", "monthly", true}, {"weekly", "weekly", true}, {"daily", "daily", true}, {"hourly", "", false}} {
		got, err := ParseReset(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseReset(%q) = %q, %v; want %q, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	monthly, none, bad, neg := "monthly", "none", "yearly", -credits.Credit
	base := Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}
	for _, tt := range []struct {
		ch   Change
		want string
	}{
		{Change{CreditLimitReset: &monthly}, ResetMonthly},
		{Change{CreditLimitReset: &none}, ResetNever},
		{Change{CreditLimitReset: &bad}, "yearly"},                            // for Check to refuse
		{Change{CreditLimit: &neg}, ResetNever},                               // no limit, no reset
		{Change{Name: &monthly}, ResetDaily},                                  // kept
		{Change{CreditLimit: &neg, CreditLimitReset: &monthly}, ResetMonthly}, // for Check to refuse
	} {
		if got := tt.ch.Apply(base).CreditLimitReset; got != tt.want {
			t.Errorf("Apply(%+v).CreditLimitReset = %q; want %q", tt.ch, got, tt.want)
		}
	}
	if (Change{CreditLimitReset: &none}).Empty() {
		t.Error("Change{CreditLimitReset}.Empty() = true")
	}
	if d := base.Describe(); d != "credit_limit=10 reset=daily" {
		t.Errorf("Describe = %q", d)
	}
}

// TestAuthenticateRolls: a key with a reset is rolled to the current
// period on its first request in that period, once per process however
// many requests follow (the cache keeps the old record for its TTL), and
// never without a reset or on a period already current.
func TestAuthenticateRolls(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lim := 10 * credits.Credit
	store := &memKeys{recs: map[string]Record{}}
	monthly, _ := NewKey()
	plain, _ := NewKey()
	mrec := NewRecord(monthly, "acme", now)
	mrec.Controls = Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}
	mrec.Spent, mrec.Held, mrec.Period = 9, 1, "2026-11"
	store.PutKey(ctx, mrec)
	prec := NewRecord(plain, "acme", now)
	prec.Controls = Controls{CreditLimit: &lim}
	prec.Spent = 9
	store.PutKey(ctx, prec)
	for _, ttl := range []time.Duration{0, time.Hour} {
		store.rolls = nil
		r := mrec
		r.Spent, r.Period = 9, "2026-11"
		store.PutKey(ctx, r)
		at := now
		a := NewAuthenticator(store, ttl)
		a.SetClock(func() time.Time { return at })
		use := func(n int) {
			t.Helper()
			for range n {
				for _, k := range []Key{monthly, plain} {
					if _, err := a.Authenticate(ctx, "Bearer "+string(k)); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		for _, step := range []struct {
			at    time.Time
			n     int
			rolls []string
			spent credits.Amount
		}{
			{now, 20, nil, 9}, // the current period: no write
			{time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), 20, []string{mrec.ID + " 2026-12"}, 0},
			{time.Date(2026, 12, 31, 23, 59, 0, 0, time.UTC), 5, []string{mrec.ID + " 2026-12"}, 0},
			{time.Date(2027, 1, 1, 0, 0, 1, 0, time.UTC), 5, []string{mrec.ID + " 2026-12", mrec.ID + " 2027-01"}, 0},
		} {
			at = step.at
			use(step.n)
			if !reflect.DeepEqual(store.rolls, step.rolls) {
				t.Fatalf("ttl %v, at %v: rolls %q; want %q", ttl, at, store.rolls, step.rolls)
			}
			got, _ := store.KeyByID(ctx, mrec.ID)
			if got.Spent != step.spent || got.Held != 1 {
				t.Errorf("ttl %v, at %v: spent %d held %d; want %d 1", ttl, at, got.Spent, got.Held, step.spent)
			}
		}
		if got, _ := store.KeyByID(ctx, prec.ID); got.Spent != 9 {
			t.Errorf("key without reset: spent %d; want 9 (never rolled)", got.Spent)
		}
	}
}

// failRolls is memKeys whose RollKeyPeriod fails while fail is set.
type failRolls struct {
	memKeys
	fail bool
}

func (m *failRolls) RollKeyPeriod(ctx context.Context, id, period string) (bool, error) {
	if m.fail {
		m.mu.Lock()
		m.rolls = append(m.rolls, "failed")
		m.mu.Unlock()
		return false, errors.New("store down")
	}
	return m.memKeys.RollKeyPeriod(ctx, id, period)
}

// TestAuthenticateRollFails: a failed roll does not fail the request and
// is tried again by the next one.
func TestAuthenticateRollFails(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	lim := 10 * credits.Credit
	store := &failRolls{memKeys: memKeys{recs: map[string]Record{}}, fail: true}
	k, _ := NewKey()
	rec := NewRecord(k, "acme", now)
	rec.Controls = Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}
	rec.Spent = 10
	store.PutKey(ctx, rec)
	a := NewAuthenticator(store, time.Hour)
	a.SetClock(func() time.Time { return now })
	for range 2 {
		if _, err := a.Authenticate(ctx, "Bearer "+string(k)); err != nil {
			t.Fatalf("Authenticate with a failing roll = %v; want the principal", err)
		}
	}
	store.fail = false
	for range 3 {
		if _, err := a.Authenticate(ctx, "Bearer "+string(k)); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"failed", "failed", rec.ID + " 2026-11-28"}
	if !reflect.DeepEqual(store.rolls, want) {
		t.Errorf("rolls %q; want %q", store.rolls, want)
	}
}

func TestResetAtDescribeSpend(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	lim := 10 * credits.Credit
	const three, two, one = 3 * credits.Credit, 2_500_000, credits.Micro
	tests := []struct {
		rec      Record
		resetAt  time.Time
		describe string
	}{
		{Record{Spent: three}, time.Time{}, "3/-"},
		{Record{Controls: Controls{CreditLimit: &lim}, Spent: three, Held: two}, time.Time{}, "3/10 (+2.5 held)"},
		{Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: three, Period: "2026-12"},
			time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "3/10 monthly, 2026-12"},
		// Not rolled since November: shown as December's.
		{Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetWeekly}, Spent: three, Held: one, Period: "2026-W47"},
			time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC), "0/10 weekly, 2026-W49 (+0.000001 held)"},
		// Monthly to daily on the 1st: the month's period ends tomorrow.
		{Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetDaily}, Spent: three, Period: "2026-12"},
			time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC), "3/10 daily, 2026-12"},
		// Daily to monthly: the day's spend counts until the month ends.
		{Record{Controls: Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}, Spent: three, Period: "2026-12-01"},
			time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), "3/10 monthly, 2026-12-01"},
	}
	for _, tt := range tests {
		if got := tt.rec.InPeriod(now).ResetAt(now); !got.Equal(tt.resetAt) {
			t.Errorf("ResetAt(%+v) = %v; want %v", tt.rec, got, tt.resetAt)
		}
		if got := tt.rec.InPeriod(now).DescribeSpend(); got != tt.describe {
			t.Errorf("DescribeSpend(%+v) = %q; want %q", tt.rec, got, tt.describe)
		}
	}
}

// slowRolls is memKeys whose RollKeyPeriod waits for release.
type slowRolls struct {
	memKeys
	entered  chan struct{}
	release  chan struct{}
	released bool // set (under mu) before release is closed
}

func (m *slowRolls) RollKeyPeriod(ctx context.Context, id, period string) (bool, error) {
	m.entered <- struct{}{}
	<-m.release
	return m.memKeys.RollKeyPeriod(ctx, id, period)
}

// TestAuthenticateWaitsForRoll: a request of a key that another request
// is rolling returns only once that roll has (it is not counted against
// the old period), and the key is rolled once.
func TestAuthenticateWaitsForRoll(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	lim := 10 * credits.Credit
	store := &slowRolls{memKeys: memKeys{recs: map[string]Record{}}, entered: make(chan struct{}, 2), release: make(chan struct{})}
	k, _ := NewKey()
	rec := NewRecord(k, "acme", now)
	rec.Controls = Controls{CreditLimit: &lim, CreditLimitReset: ResetMonthly}
	rec.Spent, rec.Period = 10, "2026-11"
	store.PutKey(ctx, rec)
	a := NewAuthenticator(store, time.Hour)
	a.SetClock(func() time.Time { return now })
	waiting := make(chan struct{}, 1)
	a.waiting = func() { waiting <- struct{}{} }
	errs := make(chan error, 2)
	sawReleased := make(chan bool, 1)
	go func() {
		_, err := a.Authenticate(ctx, "Bearer "+string(k))
		errs <- err
	}()
	<-store.entered // the first request is rolling
	go func() {
		_, err := a.Authenticate(ctx, "Bearer "+string(k))
		store.mu.Lock()
		sawReleased <- store.released
		store.mu.Unlock()
		errs <- err
	}()
	<-waiting // the second request waits for the first one's roll
	store.mu.Lock()
	store.released = true
	store.mu.Unlock()
	close(store.release)
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if !<-sawReleased {
		t.Error("the second request returned before the first one's roll")
	}
	if want := []string{rec.ID + " 2026-12"}; !reflect.DeepEqual(store.rolls, want) {
		t.Errorf("rolls %q; want %q", store.rolls, want)
	}
}
