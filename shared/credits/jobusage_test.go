package credits

import (
	"context"
	"testing"
	"time"
)

// settleRecorder is a Store whose Settle records its entries and
// returns err.
type settleRecorder struct {
	Store
	got []Entry
	err error
}

func (r *settleRecorder) Settle(_ context.Context, e Entry) error {
	r.got = append(r.got, e)
	return r.err
}

// TestApplyLabels checks the entry Apply settles with: the change's job
// type and model when both are usable, else neither (the job is settled
// all the same).
func TestApplyLabels(t *testing.T) {
	base := Change{JobID: "job_sfx_1", Account: "a", JobType: "sfx", Model: "m", OldStatus: "processing", NewStatus: "completed", Price: 7, At: 99}
	with := func(f func(c *Change)) Change { c := base; f(&c); return c }
	tests := []struct {
		name         string
		c            Change
		settles      bool
		kind         string
		amount, hold Amount
		typ, model   string
	}{
		{"completed", base, true, Capture, 7, 0, "sfx", "m"},
		{"failed", with(func(c *Change) { c.NewStatus = "failed" }), true, Release, 7, 0, "sfx", "m"},
		{"no type", with(func(c *Change) { c.JobType = "" }), true, Capture, 7, 0, "", ""},
		{"no model", with(func(c *Change) { c.Model = "" }), true, Capture, 7, 0, "", ""},
		{"NUL in model", with(func(c *Change) { c.Model = "m\x00" }), true, Capture, 7, 0, "", ""},
		{"not final", with(func(c *Change) { c.NewStatus = "processing"; c.OldStatus = "queued" }), false, "", 0, 0, "", ""},
		{"unpriced", with(func(c *Change) { c.Price = 0 }), false, "", 0, 0, "", ""},
		// Served by a cheaper fallback: its price charged, the hold
		// cleared, counted under the model in the change (the served one).
		{"served for less than the hold", with(func(c *Change) { c.Hold = 30 }), true, Capture, 7, 30, "sfx", "m"},
		{"failed with a hold", with(func(c *Change) { c.NewStatus, c.Hold = "failed", 30 }), true, Release, 30, 0, "sfx", "m"},
		{"charged above the hold", with(func(c *Change) { c.Price, c.Hold = 40, 30 }), true, Capture, 30, 0, "sfx", "m"},
		{"charged nothing", with(func(c *Change) { c.Price, c.Hold = 0, 30 }), true, Capture, 0, 30, "sfx", "m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &settleRecorder{}
			if err := Apply(context.Background(), r, tt.c); err != nil {
				t.Fatalf("Apply(%+v) = %v", tt.c, err)
			}
			if !tt.settles {
				if len(r.got) != 0 {
					t.Errorf("Apply(%+v) settled %+v; want nothing", tt.c, r.got)
				}
				return
			}
			want := Entry{ID: "job:job_sfx_1", Account: "a", Kind: tt.kind, Amount: tt.amount, Hold: tt.hold, JobID: "job_sfx_1", JobType: tt.typ, Model: tt.model, At: 99}
			if len(r.got) != 1 || r.got[0] != want {
				t.Errorf("Apply(%+v) settled %+v; want [%+v]", tt.c, r.got, want)
			}
		})
	}
}

func TestJobUsageOf(t *testing.T) {
	at := time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC).Unix()
	capture := Entry{ID: "job:j", Account: "a", Kind: Capture, Amount: 12, JobID: "j", JobType: "video", Model: "veo", At: at}
	with := func(f func(e *Entry)) Entry { e := capture; f(&e); return e }
	tests := []struct {
		name string
		e    Entry
		want JobUsage
		ok   bool
	}{
		{"capture", capture, JobUsage{Account: "a", Day: "2025-03-01", JobType: "video", Model: "veo", Jobs: 1, Credits: 12}, true},
		{"a second later is the next UTC day", with(func(e *Entry) { e.At++ }), JobUsage{Account: "a", Day: "2025-03-02", JobType: "video", Model: "veo", Jobs: 1, Credits: 12}, true},
		{"a capture below its hold counts the charge", with(func(e *Entry) { e.Hold = 50 }), JobUsage{Account: "a", Day: "2025-03-01", JobType: "video", Model: "veo", Jobs: 1, Credits: 12}, true},
		{"release", with(func(e *Entry) { e.Kind = Release }), JobUsage{}, false},
		{"unlabelled capture", with(func(e *Entry) { e.JobType, e.Model = "", "" }), JobUsage{}, false},
		{"grant", Entry{ID: "grant:x", Account: "a", Kind: Grant, Amount: 5}, JobUsage{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := JobUsageOf(tt.e)
			if got != tt.want || ok != tt.ok {
				t.Errorf("JobUsageOf(%+v) = %+v, %v; want %+v, %v", tt.e, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestCheckSettlement(t *testing.T) {
	ok := Entry{ID: "job:j", Account: "a", Kind: Capture, Amount: 3, JobID: "j", JobType: "sfx", Model: "m", At: 1}
	with := func(f func(e *Entry)) Entry { e := ok; f(&e); return e }
	tests := []struct {
		name    string
		e       Entry
		wantErr bool
	}{
		{"labelled capture", ok, false},
		{"unlabelled release", with(func(e *Entry) { e.Kind, e.JobType, e.Model = Release, "", "" }), false},
		{"zero amount", with(func(e *Entry) { e.Amount = 0 }), false},
		{"no id", with(func(e *Entry) { e.ID = "" }), true},
		{"no account", with(func(e *Entry) { e.Account = "" }), true},
		{"grant", with(func(e *Entry) { e.Kind = Grant }), true},
		{"negative", with(func(e *Entry) { e.Amount = -1 }), true},
		{"type without model", with(func(e *Entry) { e.Model = "" }), true},
		{"model without type", with(func(e *Entry) { e.JobType = "" }), true},
		{"NUL in model", with(func(e *Entry) { e.Model = "m\x00" }), true},
		{"charge below the hold", with(func(e *Entry) { e.Hold = 10 }), false},
		{"charge equal to the hold", with(func(e *Entry) { e.Hold = 3 }), false},
		{"charge above the hold", with(func(e *Entry) { e.Hold = 2 }), true},
		{"negative hold", with(func(e *Entry) { e.Hold = -1 }), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := CheckSettlement(tt.e); (err != nil) != tt.wantErr {
				t.Errorf("CheckSettlement(%+v) = %v; want error %v", tt.e, err, tt.wantErr)
			}
		})
	}
}
