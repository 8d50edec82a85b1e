package httpapi

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// servedJob stores a job of account "a" whose request named lead-sfx (50
// credits held) and that moved to its fallback cheap-sfx (20.5); done
// completes it there, charged 20.5.
func servedJob(t *testing.T, e *jtEnv, done bool) string {
	t.Helper()
	ctx := context.Background()
	id, err := jobs.NewID(jobs.TypeSFX)
	if err != nil {
		t.Fatal(err)
	}
	now := e.clock.now().Unix()
	j := &jobs.Job{ID: id, Account: "a", Type: jobs.TypeSFX, Model: "lead-sfx", Input: jobs.Input{Prompt: "rain", Duration: 2, Format: "mp3"},
		Price: 50 * credits.Credit, Hold: 50 * credits.Credit, Candidates: []jobs.Candidate{{Model: "lead-sfx", Price: 50 * credits.Credit}, {Model: "cheap-sfx", Price: 20_500_000}}, Created: now, Updated: now}
	if _, err := e.store.Create(ctx, j, nil); err != nil {
		t.Fatal(err)
	}
	zero, one := 0, 1
	if _, err := e.store.Transition(ctx, id, jobs.Queued, jobs.Processing, jobs.Patch{IncAttempts: true, IfRuns: &zero, NextRun: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Transition(ctx, id, jobs.Processing, jobs.Processing, jobs.Patch{Candidate: &one, AttemptsBefore: 1, IfRuns: &one, NextRun: now}); err != nil {
		t.Fatal(err)
	}
	if done {
		charge := credits.Amount(20_500_000)
		out := &jobs.Output{Key: "jobs/a/" + id + ".mp3", ContentType: "audio/mpeg", Bytes: 10, Duration: 2}
		if _, err := e.store.Transition(ctx, id, jobs.Processing, jobs.Completed, jobs.Patch{Output: out, Price: &charge}); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestJobServedBy: a completed job names the model that made its output
// (served_by) in GET /v1/jobs/{id} and the list; a job still running
// names none; the admin view shows the hold, the candidates and the one
// being tried.
func TestJobServedBy(t *testing.T) {
	e := adminServer(t)
	done := servedJob(t, e.jtEnv, true)
	e.clock.add(time.Second)
	running := servedJob(t, e.jtEnv, false)
	type view struct {
		ID       string
		Model    string
		ServedBy *string          `json:"served_by"`
		Charged  *json.RawMessage `json:"charged"`
	}
	for _, tt := range []struct {
		id   string
		want string // "" for no served_by field
	}{{done, "cheap-sfx"}, {running, ""}} {
		code, b := e.do(t, "a", "GET", "/v1/jobs/"+tt.id, "")
		var v view
		if err := json.Unmarshal(b, &v); code != 200 || err != nil {
			t.Fatalf("GET %s = %d %s", tt.id, code, b)
		}
		if got := ""; v.Model != "lead-sfx" || (v.ServedBy == nil) != (tt.want == "") || (v.ServedBy != nil && *v.ServedBy != tt.want) {
			if v.ServedBy != nil {
				got = *v.ServedBy
			}
			t.Errorf("GET %s: model %q, served_by %q; want lead-sfx, %q", tt.id, v.Model, got, tt.want)
		}
		// A final job shows what it was charged (the capture: 20.5 of
		// the 50 held); a running one does not.
		if final := tt.want != ""; (v.Charged != nil) != final || (final && string(*v.Charged) != "20.5") {
			t.Errorf("GET %s: charged %s; want 20.5 once final, absent before", tt.id, b)
		}
	}
	var listed struct{ Data []view }
	_, b := e.do(t, "a", "GET", "/v1/jobs", "")
	json.Unmarshal(b, &listed)
	if len(listed.Data) != 2 || listed.Data[1].ID != done || listed.Data[1].ServedBy == nil || *listed.Data[1].ServedBy != "cheap-sfx" || listed.Data[0].ServedBy != nil {
		t.Errorf("GET /v1/jobs = %s; want the completed job served by cheap-sfx, the running one without served_by", b)
	}

	var adm struct {
		Price, Hold credits.Amount
		ServedBy    string           `json:"served_by"`
		Candidates  []jobs.Candidate `json:"candidates"`
		Trying      string           `json:"trying"`
	}
	e.call(t, bearer, "GET", "/admin/v1/jobs/"+done, "", &adm)
	want := []jobs.Candidate{{Model: "lead-sfx", Price: 50 * credits.Credit}, {Model: "cheap-sfx", Price: 20_500_000}}
	if adm.Price != 20_500_000 || adm.Hold != 50*credits.Credit || adm.ServedBy != "cheap-sfx" || !slices.Equal(adm.Candidates, want) || adm.Trying != "" {
		t.Errorf("admin view of the completed job = %+v; want price 20.5 of a 50 hold, served by cheap-sfx, the candidates", adm)
	}
	adm.Trying = ""
	e.call(t, bearer, "GET", "/admin/v1/jobs/"+running, "", &adm)
	if adm.Price != 50*credits.Credit || adm.Hold != 50*credits.Credit || adm.Trying != "cheap-sfx" {
		t.Errorf("admin view of the running job = %+v; want 50 held, trying cheap-sfx", adm)
	}
}
