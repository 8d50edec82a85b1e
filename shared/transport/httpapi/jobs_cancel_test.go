package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
)

// jtVendor is a long-running provider: Cancel answers err.
type jtVendor struct {
	err   error
	calls int
}

func (v *jtVendor) Start(context.Context, *catalog.Model, *jobs.Job) (*jobs.Step, error) {
	return nil, errors.New("unused")
}

func (v *jtVendor) Cancel(context.Context, *catalog.Model, *jobs.Job) error {
	v.calls++
	return v.err
}

// jtSync is a synchronous provider: it cannot cancel.
type jtSync struct{}

func (jtSync) Start(context.Context, *catalog.Model, *jobs.Job) (*jobs.Step, error) {
	return nil, errors.New("unused")
}

// jtErr is the OpenAI error envelope.
type jtErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func TestCancelJob(t *testing.T) {
	// setup makes a video job of account "a" in some state and returns
	// its id.
	type setup func(t *testing.T, e *jtEnv) string
	queued := func(t *testing.T, e *jtEnv) string { return e.create(t, "a", jobs.TypeVideo) }
	processing := func(handle bool) setup {
		return func(t *testing.T, e *jtEnv) string {
			id := e.create(t, "a", jobs.TypeVideo)
			p := jobs.Patch{IncAttempts: true}
			if handle {
				p.Handle = &jobs.Handle{ID: "op-1"}
			}
			if _, err := e.store.Transition(context.Background(), id, jobs.Queued, jobs.Processing, p); err != nil {
				t.Fatal(err)
			}
			return id
		}
	}
	completed := func(t *testing.T, e *jtEnv) string {
		id := e.create(t, "a", jobs.TypeVideo)
		e.complete(t, id)
		return id
	}
	tests := []struct {
		name     string
		setup    setup
		provider jobs.Provider // "synthetic"'s; nil: none
		account  string        // the caller; "" is "a"
		path     string        // "" is /v1/jobs/<id>/cancel
		status   int
		code     string // the error code, or "" for the cancelled job
		message  string // in the error message
		after    jobs.Status
	}{
		{name: "queued", setup: queued, status: 200, after: jobs.Failed},
		{name: "processing at a vendor that cancels", setup: processing(true), provider: &jtVendor{}, status: 200, after: jobs.Failed},
		{name: "processing at a vendor that cannot cancel", setup: processing(true), provider: jtSync{}, status: 409,
			code: "job_not_cancellable", message: "cannot cancel a running job", after: jobs.Processing},
		{name: "processing, not yet at its vendor", setup: processing(false), provider: &jtVendor{}, status: 409,
			code: "job_not_cancellable", message: "try again", after: jobs.Processing},
		{name: "vendor refuses", setup: processing(true), provider: &jtVendor{err: &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "ALREADY_COMPLETED"}},
			status: 409, code: "job_not_cancellable", message: "ALREADY_COMPLETED", after: jobs.Processing},
		{name: "vendor unreachable", setup: processing(true), provider: &jtVendor{err: errors.New("connection refused")},
			status: 502, code: "upstream_error", message: "still running", after: jobs.Processing},
		{name: "completed", setup: completed, status: 409, code: "job_final", message: "already completed", after: jobs.Completed},
		{name: "another account's", setup: queued, account: "b", status: 404, code: "job_not_found", after: jobs.Queued},
		{name: "unknown id", setup: queued, path: "/v1/jobs/job_video_zzzzzzzzzzzzzzzzzzzz/cancel", status: 404, code: "job_not_found", after: jobs.Queued},
		{name: "malformed id", setup: queued, path: "/v1/jobs/nope/cancel", status: 404, code: "job_not_found", after: jobs.Queued},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := jtServer(t)
			if tt.provider != nil {
				e.svc.Providers = map[string]jobs.Provider{"synthetic": tt.provider}
			}
			id := tt.setup(t, e)
			account, path := "a", "/v1/jobs/"+id+"/cancel"
			if tt.account != "" {
				account = tt.account
			}
			if tt.path != "" {
				path = tt.path
			}
			code, b := e.do(t, account, "POST", path, "")
			if code != tt.status {
				t.Fatalf("POST %s = %d %s; want %d", path, code, b, tt.status)
			}
			if tt.code == "" {
				var v struct {
					ID     string         `json:"id"`
					Object string         `json:"object"`
					Status jobs.Status    `json:"status"`
					Error  *jobs.JobError `json:"error"`
					Output any            `json:"output"`
				}
				if err := json.Unmarshal(b, &v); err != nil || v.ID != id || v.Object != "job" || v.Status != jobs.Failed ||
					v.Error == nil || v.Error.Code != "cancelled" || v.Error.Message != jobs.CancelMessage || v.Output != nil {
					t.Errorf("POST %s = %s; want the job, failed with error cancelled", path, b)
				}
			} else {
				var env jtErr
				if err := json.Unmarshal(b, &env); err != nil || env.Error.Code == nil || *env.Error.Code != tt.code ||
					!strings.Contains(env.Error.Message, tt.message) || env.Error.Param != nil {
					t.Errorf("POST %s = %s; want error %s saying %q", path, b, tt.code, tt.message)
				}
				if tt.status == 404 && env.Error.Type != "not_found_error" || tt.status == 409 && env.Error.Type != "invalid_request_error" {
					t.Errorf("POST %s: error type %q for %d", path, env.Error.Type, tt.status)
				}
			}
			// GET agrees (as the job's owner).
			code, b = e.do(t, "a", "GET", "/v1/jobs/"+id, "")
			var v struct{ Status jobs.Status }
			if json.Unmarshal(b, &v); code != 200 || v.Status != tt.after {
				t.Errorf("GET after the cancel = %d %s; want status %s", code, b, tt.after)
			}
		})
	}

	t.Run("twice", func(t *testing.T) {
		e := jtServer(t)
		id := e.create(t, "a", jobs.TypeSFX)
		if code, b := e.do(t, "a", "POST", "/v1/jobs/"+id+"/cancel", `{"ignored":true}`); code != 200 {
			t.Fatalf("first cancel = %d %s", code, b)
		}
		code, b := e.do(t, "a", "POST", "/v1/jobs/"+id+"/cancel", "")
		if code != 409 || !strings.Contains(string(b), `"code":"job_final"`) || !strings.Contains(string(b), "already failed") {
			t.Errorf("second cancel = %d %s; want 409 job_final", code, b)
		}
	})
	t.Run("wrong method", func(t *testing.T) {
		e := jtServer(t)
		id := e.create(t, "a", jobs.TypeSFX)
		req := "/v1/jobs/" + id + "/cancel"
		code, b := e.do(t, "a", "GET", req, "")
		if code != 405 || !strings.Contains(string(b), "method_not_allowed") {
			t.Errorf("GET %s = %d %s; want 405", req, code, b)
		}
	})
}
