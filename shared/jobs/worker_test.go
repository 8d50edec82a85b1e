package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/catalog"
)

// memStore is a hand-written in-memory Store for worker and service tests.
type memStore struct {
	mu          sync.Mutex
	jobs        map[string]Job
	completions int // transitions into Completed
}

func newMemStore(js ...Job) *memStore {
	s := &memStore{jobs: map[string]Job{}}
	for _, j := range js {
		s.jobs[j.ID] = j
	}
	return s
}

func (s *memStore) Create(ctx context.Context, j *Job, idem *Idempotency) (*Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	nj := *j
	nj.History = []StatusChange{{Status: nj.Status, At: nj.Created}}
	s.jobs[j.ID] = nj
	c := nj
	return &c, nil
}

func (s *memStore) Get(ctx context.Context, id string) (*Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	return &j, nil
}

func (s *memStore) Transition(ctx context.Context, id string, from, to Status, p Patch) (*Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[id]
	if !ok {
		return nil, ErrNotFound
	}
	if j.Status != from || !CanTransition(from, to) {
		return nil, fmt.Errorf("transition %s %s->%s (is %s): %w", id, from, to, j.Status, ErrConflict)
	}
	if p.IfRuns != nil {
		if j.Runs != *p.IfRuns {
			return nil, fmt.Errorf("transition %s: runs %d, not %d: %w", id, j.Runs, *p.IfRuns, ErrConflict)
		}
		j.Runs++
	}
	if p.Started != 0 {
		j.Started = p.Started
	}
	if p.Handle != nil {
		j.Handle = p.Handle
	}
	if p.NextRun != 0 {
		j.NextRun = p.NextRun
	}
	if p.Candidate != nil {
		j.Candidate, j.AttemptsBefore = *p.Candidate, p.AttemptsBefore
	}
	if p.Price != nil {
		j.Price = *p.Price
	}
	if from != to {
		j.History = append(j.History[:len(j.History):len(j.History)], HistoryEntry(to, p, time.Now().Unix()))
	}
	j.Status = to
	if to == Completed {
		s.completions++
	}
	if p.Output != nil {
		j.Output = p.Output
	}
	if p.Error != nil {
		j.Error = p.Error
	}
	if p.IncAttempts {
		j.Attempts++
	}
	if p.Updated != 0 {
		j.Updated = p.Updated
	}
	s.jobs[id] = j
	return &j, nil
}

type memMedia struct {
	mu   sync.Mutex
	puts map[string]int
}

func (m *memMedia) Put(ctx context.Context, key, ct string, r io.Reader, size int64) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("put: %w", err)
	}
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("short put: %d bytes, want %d", len(b), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.puts == nil {
		m.puts = map[string]int{}
	}
	m.puts[key]++
	return nil
}

func (m *memMedia) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return "http://127.0.0.1/" + key, nil
}

func (m *memMedia) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.puts, key)
	return nil
}

// providerFunc adapts a function to a synchronous Provider.
type providerFunc func(ctx context.Context, j *Job) (*Result, error)

func (f providerFunc) Start(ctx context.Context, _ *catalog.Model, j *Job) (*Step, error) {
	res, err := f(ctx, j)
	if err != nil {
		return nil, err
	}
	return &Step{Result: res}, nil
}

// media returns a Result of the bytes b.
func media(b string, duration int) *Result {
	return &Result{Body: io.NopCloser(strings.NewReader(b)), Size: int64(len(b)), ContentType: "audio/mpeg", Ext: "mp3", Duration: duration}
}

func TestWorkerProcess(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	ok := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
		return media("ID3data", j.Input.Duration), nil
	})
	permanent := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
		return nil, &ProviderError{Code: CodeContentPolicy, Message: "refused"}
	})
	transient := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
		return nil, errors.New("connection reset")
	})
	base := Job{ID: "job_sfx_aaaaaaaaaaaaaaaaaaaa", Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: Queued, Input: Input{Prompt: "p", Duration: 2, Format: "mp3"}}
	with := func(st Status, attempts int) Job { j := base; j.Status, j.Attempts = st, attempts; return j }
	withUpdated := func(st Status, attempts int, updated int64) Job {
		j := with(st, attempts)
		j.Updated = updated
		return j
	}
	tests := []struct {
		name         string
		job          *Job // nil: the store has no job
		provider     Provider
		wantErr      bool
		wantStatus   Status
		wantAttempts int
		wantCode     string
		wantPuts     int
	}{
		{"queued completes", ptr(with(Queued, 0)), ok, false, Completed, 1, "", 1},
		{"redelivered while processing completes", ptr(with(Processing, 1)), ok, false, Completed, 2, "", 1},
		{"duplicate after completion does nothing", ptr(with(Completed, 1)), ok, false, Completed, 1, "", 0},
		{"duplicate after failure does nothing", ptr(with(Failed, 1)), ok, false, Failed, 1, "", 0},
		{"permanent provider error fails", ptr(with(Queued, 0)), permanent, false, Failed, 1, CodeContentPolicy, 0},
		{"transient error is retried later", ptr(with(Queued, 0)), transient, false, Processing, 1, "", 0},
		{"attempts exhausted fails", ptr(with(Processing, DefaultMaxAttempts)), ok, false, Failed, DefaultMaxAttempts, CodeInternal, 0},
		{"unknown job is dropped", nil, ok, false, "", 0, "", 0},
		{"processing job within its lease is left alone", ptr(withUpdated(Processing, 1, 990)), ok, true, Processing, 1, "", 0},
		{"processing job past its lease is taken over", ptr(withUpdated(Processing, 1, 800)), ok, false, Completed, 2, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore()
			if tt.job != nil {
				st = newMemStore(*tt.job)
			}
			m := &memMedia{}
			q := &memQueue{}
			w := &Worker{Store: st, Queue: q, Media: m, Catalog: cat, Providers: map[string]Provider{"synthetic": tt.provider},
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Lease: 2 * time.Minute, Now: func() time.Time { return time.Unix(1000, 0) }}
			err := w.Process(context.Background(), base.ID)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Process = %v; want error %v", err, tt.wantErr)
			}
			if tt.job == nil {
				return
			}
			j, _ := st.Get(context.Background(), base.ID)
			if j.Status != tt.wantStatus || j.Attempts != tt.wantAttempts {
				t.Errorf("job = %s after %d attempts; want %s after %d", j.Status, j.Attempts, tt.wantStatus, tt.wantAttempts)
			}
			if tt.wantCode != "" && (j.Error == nil || j.Error.Code != tt.wantCode) {
				t.Errorf("job error = %+v; want code %s", j.Error, tt.wantCode)
			}
			if tt.wantStatus == Completed && tt.wantPuts > 0 && (j.Output == nil || j.Output.Bytes != 7 || j.Output.Key == "") {
				t.Errorf("output = %+v; want 7 bytes under a key", j.Output)
			}
			if got := len(m.puts); got != tt.wantPuts {
				t.Errorf("media puts = %d; want %d", got, tt.wantPuts)
			}
			// Only a job waiting for a retry has a new message.
			wantMsgs := 0
			if tt.wantStatus == Processing && !tt.wantErr {
				wantMsgs = 1
			}
			if got := len(q.sent()); got != wantMsgs {
				t.Errorf("messages sent = %d; want %d", got, wantMsgs)
			}
		})
	}
}

// TestWorkerConcurrentDuplicates delivers the same job to many workers at
// once: it completes exactly once.
func TestWorkerConcurrentDuplicates(t *testing.T) {
	cat, _ := catalog.Default()
	st := newMemStore(Job{ID: "job_sfx_bbbbbbbbbbbbbbbbbbbb", Account: "a", Type: TypeSFX, Model: "synthetic-sfx", Status: Queued, Input: Input{Prompt: "p", Duration: 1, Format: "mp3"}})
	p := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
		return media("x", 1), nil
	})
	// Lease 0 lets every delivery take the job over (a claim each), so
	// MaxAttempts must exceed the 8 deliveries: with the default 4, a
	// fifth claim could find the attempts spent and fail the job before
	// the first run completes it (a flake of about 1 run in 500).
	w := &Worker{Store: st, Media: &memMedia{}, Catalog: cat, Providers: map[string]Provider{"synthetic": p}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		MaxAttempts: 9}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Process(context.Background(), "job_sfx_bbbbbbbbbbbbbbbbbbbb")
		}()
	}
	wg.Wait()
	j, _ := st.Get(context.Background(), "job_sfx_bbbbbbbbbbbbbbbbbbbb")
	if j.Status != Completed || j.Output == nil {
		t.Fatalf("job = %+v; want completed with output", j)
	}
	if st.completions != 1 {
		t.Errorf("job completed %d times; want once", st.completions)
	}
}

// TestWorkerMediaTypes: the worker stores only the media types of the
// job's type (MediaType), under the allowed name; a vendor's HTML, SVG,
// untyped or mistyped file fails the job (upstream_error, naming the type,
// no charge) and nothing is stored.
func TestWorkerMediaTypes(t *testing.T) {
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		typ, model, contentType string
		wantType                string // "": the job fails
	}{
		{TypeSFX, "synthetic-sfx", "audio/mpeg", "audio/mpeg"},
		{TypeMusic, "synthetic-music", "audio/x-wav", "audio/wav"},
		{TypeMusic, "synthetic-music", "Audio/MPEG; charset=binary", "audio/mpeg"},
		{TypeVideo, "synthetic-video", "video/mp4", "video/mp4"},
		{TypeSFX, "synthetic-sfx", "text/html; charset=utf-8", ""},
		{TypeVideo, "synthetic-video", "image/svg+xml", ""},
		{TypeVideo, "synthetic-video", "audio/mpeg", ""},
		{TypeMusic, "synthetic-music", "application/octet-stream", ""},
		{TypeMusic, "synthetic-music", "", ""},
		{TypeMusic, "synthetic-music", "application/xhtml+xml", ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ+" "+tt.contentType, func(t *testing.T) {
			j := Job{ID: "job_x", Account: "a", Type: tt.typ, Model: tt.model, Status: Queued, Input: Input{Prompt: "p", Duration: 2}}
			st, m := newMemStore(j), &memMedia{}
			p := providerFunc(func(ctx context.Context, j *Job) (*Result, error) {
				return &Result{Body: io.NopCloser(strings.NewReader("<script>alert(1)</script>")), Size: 25, ContentType: tt.contentType, Ext: "bin"}, nil
			})
			w := &Worker{Store: st, Queue: &memQueue{}, Media: m, Catalog: cat, Providers: map[string]Provider{"synthetic": p},
				Log: slog.New(slog.DiscardHandler)}
			if err := w.Process(context.Background(), j.ID); err != nil {
				t.Fatalf("Process = %v", err)
			}
			got, _ := st.Get(context.Background(), j.ID)
			if tt.wantType != "" {
				if got.Status != Completed || got.Output.ContentType != tt.wantType || len(m.puts) != 1 {
					t.Errorf("job with a %q file = %s, output %+v, %d puts; want completed as %s, stored", tt.contentType, got.Status, got.Output, len(m.puts), tt.wantType)
				}
				return
			}
			if got.Status != Failed || got.Error == nil || got.Error.Code != CodeUpstream || !strings.Contains(got.Error.Message, "no credits were charged") ||
				strings.Contains(got.Error.Message, "charset") || len(m.puts) != 0 {
				t.Errorf("job with a %q file = %s, %+v, %d puts; want failed upstream_error, nothing stored", tt.contentType, got.Status, got.Error, len(m.puts))
			}
		})
	}
}
