package credits

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/apierr"
)

func TestCheckReservation(t *testing.T) {
	good := Entry{ID: ReservationID("img_1"), Account: "a", Kind: Reservation, Amount: 5, JobType: "image", Model: "m", At: 99}
	with := func(f func(e *Entry)) Entry { e := good; f(&e); return e }
	tests := []struct {
		name string
		e    Entry
		ok   bool
	}{
		{"good", good, true},
		{"speech", with(func(e *Entry) { e.JobType = "speech" }), true},
		{"kind release", with(func(e *Entry) { e.Kind = Release }), false},
		{"job id", with(func(e *Entry) { e.ID = "job:img_1" }), false},
		{"settlement id", with(func(e *Entry) { e.ID = SettlementID("img_1") }), false},
		{"empty id", with(func(e *Entry) { e.ID = ReservationID("") }), false},
		{"no account", with(func(e *Entry) { e.Account = "" }), false},
		{"NUL in account", with(func(e *Entry) { e.Account = "a\x00" }), false},
		{"NUL in id", with(func(e *Entry) { e.ID = ReservationID("x\x00") }), false},
		{"zero", with(func(e *Entry) { e.Amount = 0 }), false},
		{"negative", with(func(e *Entry) { e.Amount = -1 }), false},
		{"hold", with(func(e *Entry) { e.Hold = 5 }), false},
		{"no type", with(func(e *Entry) { e.JobType = "" }), false},
		{"no model", with(func(e *Entry) { e.Model = "" }), false},
		{"NUL in type", with(func(e *Entry) { e.JobType = "image\x00" }), false},
		{"no time", with(func(e *Entry) { e.At = 0 }), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckReservation(tt.e); (err == nil) != tt.ok {
				t.Errorf("CheckReservation(%+v) = %v; want ok %v", tt.e, err, tt.ok)
			}
		})
	}
}

func TestReservationOf(t *testing.T) {
	tests := []struct {
		id, want string
		ok       bool
	}{
		{SettlementID("img_1"), ReservationID("img_1"), true},
		{SettlementID(""), "", false},
		{ReservationID("img_1"), "", false},
		{"job:job_sfx_1", "", false},
		{"reserved", "", false},
	}
	for _, tt := range tests {
		if got, ok := ReservationOf(tt.id); got != tt.want || ok != tt.ok {
			t.Errorf("ReservationOf(%q) = %q, %v; want %q, %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
}

// TestCheckSettlementIDs: a reservation's settlement is a settlement (with
// the labels of images and speech); its hold entry's id is not.
func TestCheckSettlementIDs(t *testing.T) {
	tests := []struct {
		e  Entry
		ok bool
	}{
		{Entry{ID: SettlementID("img_1"), Account: "a", Kind: Capture, Amount: 3, Hold: 5, JobType: "image", Model: "m"}, true},
		{Entry{ID: SettlementID("sp_1"), Account: "a", Kind: Release, Amount: 5, JobType: "speech", Model: "m"}, true},
		{Entry{ID: SettlementID(""), Account: "a", Kind: Release, Amount: 5}, false},
		{Entry{ID: ReservationID("img_1"), Account: "a", Kind: Release, Amount: 5}, false},
		{Entry{ID: "job:job_sfx_1", Account: "a", Kind: Capture, Amount: 5}, true},
	}
	for _, tt := range tests {
		if err := CheckSettlement(tt.e); (err == nil) != tt.ok {
			t.Errorf("CheckSettlement(%+v) = %v; want ok %v", tt.e, err, tt.ok)
		}
	}
}

// TestReleaseReservation checks the settlement the reconciler writes for
// an open reservation, and that losing to another settlement is no error.
func TestReleaseReservation(t *testing.T) {
	r := Entry{ID: ReservationID("img_1"), Account: "a", Kind: Reservation, Amount: 30, JobType: "image", Model: "m", At: 10}
	want := Entry{ID: SettlementID("img_1"), Account: "a", Kind: Release, Amount: 30, JobType: "image", Model: "m", At: 2000}
	tests := []struct {
		name     string
		err      error
		released bool
		fails    bool
	}{
		{"released", nil, true, false},
		{"settled first", ErrAlreadySettled, false, false},
		{"store error", errors.New("throttled"), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &settleRecorder{err: tt.err}
			released, err := ReleaseReservation(context.Background(), s, r, 2000)
			if released != tt.released || (err != nil) != tt.fails {
				t.Errorf("ReleaseReservation = %v, %v; want %v, error %v", released, err, tt.released, tt.fails)
			}
			if len(s.got) != 1 || s.got[0] != want {
				t.Errorf("ReleaseReservation settled %+v; want %+v", s.got, want)
			}
			if tt.fails && !strings.Contains(err.Error(), "img_1") {
				t.Errorf("ReleaseReservation = %v; want the reservation named", err)
			}
		})
	}
	if _, err := ReleaseReservation(context.Background(), &settleRecorder{}, Entry{ID: "job:x", Kind: Capture}, 1); err == nil {
		t.Error("ReleaseReservation(not a reservation) = nil; want an error")
	}
}

// refusingStore is a Reservations whose Reserve returns err and whose
// account has 3.5 available.
type refusingStore struct{ err error }

func (r refusingStore) Reserve(context.Context, Entry) error { return r.err }
func (r refusingStore) OpenReservations(context.Context, int64, int) ([]Entry, error) {
	return nil, nil
}
func (r refusingStore) Settle(context.Context, Entry) error               { return nil }
func (r refusingStore) SettleRecord(context.Context, Entry, Record) error { return nil }
func (r refusingStore) Account(_ context.Context, id string) (Account, error) {
	return Account{ID: id, Balance: 5 * Credit, Held: 1_500_000, Available: 3_500_000}, nil
}

// TestReserveFor: a refusal becomes the client's 402 (the key's as the
// store words it, the account's saying the price and what it has), any
// other error is wrapped, and nil stays nil.
func TestReserveFor(t *testing.T) {
	store := errors.New("store down")
	key := KeyLimit("key_1", 7*Credit, 10*Credit, 7_999_999)
	tests := []struct {
		name    string
		err     error
		is      error  // nil: no error wanted
		message string // a part of the message
	}{
		{"reserved", nil, nil, ""},
		{"key limit", key, ErrKeyLimit, "needs 7 credits, more than this API key has left of its credit limit: 2.000001 left of 10 (7.999999 spent"},
		{"insufficient", ErrInsufficient, ErrInsufficient, "This speech costs up to 7.25 credits"},
		{"unknown account", ErrAccountNotFound, ErrAccountNotFound, "the account has 3.5 available (balance 5, 1.5 held"},
		{"store error", store, store, "reserve 7.25 credits for reserve:sp_1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := Entry{ID: ReservationID("sp_1"), Account: "a", Kind: Reservation, Amount: 7_250_000, JobType: "speech", Model: "m", At: 1}
			err := ReserveFor(context.Background(), refusingStore{tt.err}, e, "This speech", true)
			if tt.is == nil {
				if err != nil {
					t.Fatalf("ReserveFor = %v; want nil", err)
				}
				return
			}
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error()+errMessage(err), tt.message) {
				t.Errorf("ReserveFor = %v; want an error matching %v that says %q", err, tt.is, tt.message)
			}
		})
	}
}

// errMessage is the apierr message of err, if it has one.
func errMessage(err error) string {
	if e := apierr.As(err); e != nil {
		return e.Message
	}
	return ""
}

// settleStore is a Settle that fails with errs in turn (nil once they
// are used up), counting its calls and whether each came with a deadline;
// inMemory makes it an InMemorySettler.
type settleStore struct {
	errs      []error
	calls     int
	deadlines int
	inMemory  bool
}

func (s *settleStore) Settle(ctx context.Context, e Entry) error {
	s.calls++
	if _, ok := ctx.Deadline(); ok {
		s.deadlines++
	}
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

// memorySettleStore is a settleStore that settles in memory.
type memorySettleStore struct{ settleStore }

func (*memorySettleStore) SettlesInMemory() bool { return true }

func TestSettleDetached(t *testing.T) {
	transient := errors.New("throttled")
	tests := []struct {
		name          string
		inMemory      bool
		errs          []error
		want          error
		calls, timers int
	}{
		{"written", false, nil, nil, 1, 1},
		{"retried after a fault", false, []error{transient}, nil, 2, 2},
		{"settled before", false, []error{ErrAlreadySettled}, nil, 1, 1},
		{"no such account: not retried", false, []error{ErrAccountNotFound}, ErrAccountNotFound, 1, 1},
		{"in memory: once, as it is", true, nil, nil, 1, 0},
		{"in memory: settled before", true, []error{ErrAlreadySettled}, nil, 1, 0},
		{"in memory: its error, not retried", true, []error{ErrNoReservation}, ErrNoReservation, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel() // the client has gone: the settlement is written all the same
			st := &settleStore{errs: tt.errs}
			var s interface {
				Settle(context.Context, Entry) error
			} = st
			if tt.inMemory {
				m := &memorySettleStore{settleStore{errs: tt.errs}}
				st, s = &m.settleStore, m
			}
			err := SettleDetached(ctx, s, Entry{ID: SettlementID("chat_1"), Account: "a", Kind: Release, Amount: 5})
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("SettleDetached = %v, want %v", err, tt.want)
			}
			if st.calls != tt.calls || st.deadlines != tt.timers {
				t.Errorf("Settle called %d times, %d with a deadline; want %d and %d", st.calls, st.deadlines, tt.calls, tt.timers)
			}
		})
	}
}
