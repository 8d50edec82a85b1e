package localstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// crashEnv names the store file the helper process works on;
// crashModeEnv, set to "holds", makes it run crashHoldsChild.
const (
	crashEnv     = "GENWAY_LOCALSTORE_CRASH_DB"
	crashModeEnv = "GENWAY_LOCALSTORE_CRASH_MODE"
)

const (
	crashAccount = "acct-crash"
	crashGrant   = 2_000_000 * credits.Credit
	crashJobs    = 20_000 // the child's loop bound; it is killed long before
	crashKillAt  = 300    // jobs created before the SIGKILL
)

// crashProcess is the child's worker: it takes the job and finishes it,
// failing one in four (by the last character of the id).
func crashProcess(s *Store) func(ctx context.Context, id string) error {
	return func(ctx context.Context, id string) error {
		j, err := s.Get(ctx, id)
		if err != nil {
			return err
		}
		if j.Status.Final() {
			return nil
		}
		if j, err = s.Transition(ctx, id, j.Status, jobs.Processing, jobs.Patch{IncAttempts: true}); err != nil {
			return err
		}
		time.Sleep(time.Millisecond) // "generating": leaves jobs in processing for the kill to find
		to, p := jobs.Completed, jobs.Patch{Output: &jobs.Output{Key: "jobs/" + id + ".mp3"}}
		if c := id[len(id)-1]; c >= '0' && c <= '8' { // 9 of 36 id characters
			to, p = jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: jobs.CodeUpstream, Message: "no"}}
		}
		_, err = s.Transition(ctx, id, jobs.Processing, to, p)
		return err
	}
}

// TestHelperProcess is the child of TestCrash: it creates jobs, processes
// them and settles credits all at once, printing progress, until killed.
func TestHelperProcess(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestCrash")
	}
	child := crashChild
	if os.Getenv(crashModeEnv) == "holds" {
		child = crashHoldsChild
	}
	if err := child(path); err != nil {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func crashChild(path string) error {
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		return err
	}
	if _, err := s.Grant(ctx, crashAccount, crashGrant, 1); err != nil {
		return err
	}
	go s.Consume(ctx, 4, time.Minute, crashProcess(s))
	go s.Feed(ctx, func(ctx context.Context, c credits.Change) error { return credits.Apply(ctx, s, c) })
	// Creators run concurrently, as HTTP handlers do, so that the kill finds
	// some of them mid-create.
	const creators = 4
	var mu sync.Mutex
	n := 0
	errs := make(chan error, creators)
	for range creators {
		go func() {
			for i := range crashJobs / creators {
				id, err := jobs.NewID(jobs.TypeSFX)
				if err != nil {
					errs <- err
					return
				}
				j := &jobs.Job{ID: id, Account: crashAccount, Type: jobs.TypeSFX, Price: credits.Amount(i%5+1) * 10_500_000, Created: 1, Updated: 1}
				idem := &jobs.Idempotency{Key: crashAccount + "/" + id, BodyHash: "h", Expires: time.Now().Unix() + 3600}
				if _, err := s.Create(ctx, j, idem); err != nil {
					errs <- err
					return
				}
				if err := s.Enqueue(ctx, id, 0); err != nil { // as jobs.Service does
					errs <- err
					return
				}
				mu.Lock()
				n++
				fmt.Printf("created %d\n", n)
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range creators {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// TestCrash SIGKILLs a process in the middle of creating, processing and
// settling jobs, and checks that the file it leaves is consistent and that
// the survivors finish exactly once.
func TestCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	created := killChild(t, path, "", crashKillAt, 3*time.Millisecond)

	s := openAt(t, path)
	ctx := context.Background()
	js, err := s.allJobs()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[jobs.Status]int{}
	for _, j := range js {
		counts[j.Status]++
	}
	t.Logf("after SIGKILL at %d jobs printed: %d stored: %v", created, len(js), counts)
	if len(js) < created {
		t.Errorf("stored jobs = %d; want at least the %d the child reported", len(js), created)
	}
	checkConsistent(t, s, false)
	if t.Failed() {
		return
	}

	// The feed catches up: every final job is settled.
	runUntil(t, s, false, func() bool {
		p, err := s.pendingChanges(1)
		return err == nil && len(p) == 0
	})
	checkConsistent(t, s, true)
	if t.Failed() {
		return
	}

	// Queued and processing jobs finish, and are charged once.
	runUntil(t, s, true, func() bool {
		js, err := s.allJobs()
		if err != nil {
			return false
		}
		for _, j := range js {
			if !j.Status.Final() {
				return false
			}
		}
		p, err := s.pendingChanges(1)
		m, merr := s.messages()
		return err == nil && len(p) == 0 && merr == nil && len(m) == 0
	})
	checkConsistent(t, s, true)
	if a, err := s.Account(ctx, crashAccount); err != nil || a.Held != 0 {
		t.Errorf("Account after recovery = %+v, %v; want nothing held", a, err)
	}
}

// killChild starts TestHelperProcess on the store at path in mode
// (crashModeEnv), reads its "created N" lines until N reaches atLeast,
// SIGKILLs it a random moment within within later (so that the kill lands
// anywhere in an operation), and returns the last N it printed before it
// died.
func killChild(t *testing.T, path, mode string, atLeast int, within time.Duration) int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+path, crashModeEnv+"="+mode)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	n := 0
	for n < atLeast && sc.Scan() {
		fmt.Sscanf(sc.Text(), "created %d", &n)
	}
	time.Sleep(time.Duration(rand.Int64N(int64(within))))
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	for sc.Scan() { // what it printed before it died
		fmt.Sscanf(sc.Text(), "created %d", &n)
	}
	werr := cmd.Wait()
	if n < atLeast {
		t.Fatalf("child stopped after %d (%v): %s", n, werr, stderr.String())
	}
	return n
}

// runUntil runs the feed (and with work, the consumer) until done reports
// true, for at most a minute.
func runUntil(t *testing.T, s *Store, work bool, done func() bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 2)
	go func() {
		stopped <- s.Feed(ctx, func(ctx context.Context, c credits.Change) error { return credits.Apply(ctx, s, c) })
	}()
	n := 1
	if work {
		n = 2
		go func() { stopped <- s.Consume(ctx, 4, time.Minute, crashProcess(s)) }()
	}
	ok := false
	for range 6000 {
		if ok = done(); ok {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	for range n {
		if err := <-stopped; err != nil {
			t.Errorf("background loop: %v", err)
		}
	}
	if !ok {
		t.Fatalf("recovery did not finish within a minute")
	}
}

// checkConsistent checks the invariants a crash must not break: every job
// holds its price until settled; settled jobs are final and settled the
// right way, exactly once; the account adds up; every unfinished job has a
// queue message. With settled, every final job must be settled.
func checkConsistent(t *testing.T, s *Store, settled bool) {
	t.Helper()
	ctx := context.Background()
	js, err := s.allJobs()
	if err != nil {
		t.Fatal(err)
	}
	ledger, err := s.Ledger(ctx, crashAccount)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := s.messages()
	if err != nil {
		t.Fatalf("queue: %v", err)
	}
	entries := make(map[string]credits.Entry)
	var granted credits.Amount
	for _, e := range ledger {
		if e.Kind == credits.Grant {
			granted += e.Amount
			continue
		}
		if _, dup := entries[e.JobID]; dup {
			t.Errorf("job %s settled twice", e.JobID)
		}
		entries[e.JobID] = e
	}
	var held, captured credits.Amount
	for _, j := range js {
		e, ok := entries[j.ID]
		switch {
		case ok:
			want := map[jobs.Status]string{jobs.Completed: credits.Capture, jobs.Failed: credits.Release}[j.Status]
			if e.Kind != want || e.Amount != j.Price {
				t.Errorf("job %s (%s, price %s) settled as %s %s; want %q %s", j.ID, j.Status, j.Price, e.Kind, e.Amount, want, j.Price)
			}
			if e.Kind == credits.Capture {
				captured += e.Amount
			}
		case settled && j.Status.Final():
			t.Errorf("final job %s (%s) not settled after the feed caught up", j.ID, j.Status)
			held += j.Price
		default:
			held += j.Price
		}
		if _, ok := msgs[j.ID]; !ok && !j.Status.Final() {
			t.Errorf("%s job %s has no queue message", j.Status, j.ID)
		}
	}
	if len(entries) > len(js) {
		t.Errorf("%d settlements for %d jobs", len(entries), len(js))
	}
	a, err := s.Account(ctx, crashAccount)
	if err != nil {
		t.Fatal(err)
	}
	if granted != crashGrant || a.Held != held || a.Balance != granted-captured || a.Available != a.Balance-a.Held {
		t.Errorf("Account = %+v; want balance %s (granted %s - captured %s), held %s, available = balance - held", a, granted-captured, granted, captured, held)
	}
	if a.Available < 0 {
		t.Errorf("Account %s overdrawn: %+v", crashAccount, a)
	}
}

// crashHoldsChild makes held completions of a limited key as the chat
// gateway does through MemoryHolds (a hold in memory, the record written
// behind, the release), from 8 goroutines, printing each record given to
// the store, until killed.
func crashHoldsChild(path string) error {
	ctx := context.Background()
	s, key, err := openCrashHolds(path)
	if err != nil {
		return err
	}
	h := s.MemoryHolds()
	var mu sync.Mutex
	n := 0
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for i := range crashJobs / 8 {
				e := memHold(key, 5*credits.Credit)
				if err := h.Reserve(ctx, e); err != nil {
					errs <- err
					return
				}
				r := chatRecord(key, credits.Amount(w*1000+i%997+1))
				if added := h.AddRecords(ctx, []credits.Record{r}); added[0] != nil {
					errs <- fmt.Errorf("add record: %w", added[0])
					return
				}
				if err := h.Settle(ctx, releaseOf(e)); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				n++
				fmt.Printf("created %d\n", n)
				if n == crashHoldsBurst {
					// The burst's records are committed before the kill,
					// which comes among the completions after it.
					s.awaitWrites(ctx)
				}
				mu.Unlock()
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			return err
		}
	}
	return nil
}

// crashHoldsBurst is how many completions crashHoldsChild makes before it
// waits for their records' write.
const crashHoldsBurst = 3000

// openCrashHolds opens the store at path with account "acct" granted
// crashGrant and a key limited to it, made once.
func openCrashHolds(path string) (*Store, string, error) {
	s, err := Open(path)
	if err != nil {
		return nil, "", err
	}
	ctx := context.Background()
	if ks, err := s.Keys(ctx, "acct"); err != nil || len(ks) > 0 {
		if err != nil {
			return nil, "", err
		}
		return s, ks[0].ID, nil
	}
	if _, err := s.Grant(ctx, "acct", crashGrant, 1); err != nil {
		return nil, "", err
	}
	k, err := auth.NewKey()
	if err != nil {
		return nil, "", err
	}
	r := auth.NewRecord(k, "acct", time.Now())
	limit := credits.Amount(crashGrant)
	r.CreditLimit = &limit
	return s, r.ID, s.PutKey(ctx, r)
}

// TestCrashMemoryHolds SIGKILLs a process making held completions through
// MemoryHolds, and checks what it leaves: nothing held (the holds were in
// memory), every record in the file charged once, to the account and to
// the key, and none charged that is not in the file; the records lost are
// at most the last writes' (the child printed each when AddRecords
// returned, before its commit): every record of the burst whose write the
// child waited for is there.
func TestCrashMemoryHolds(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	given := killChild(t, path, "holds", crashHoldsBurst+100, 30*time.Millisecond)

	s, key, err := openCrashHolds(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx := context.Background()
	var recorded credits.Amount
	n := 0
	ids := map[string]bool{}
	for cursor := ""; ; {
		rs, next, err := s.Records(ctx, credits.RecordQuery{Account: "acct", Limit: 200, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			recorded += r.Cost
			ids[credits.ChatEntryID(r.ID)] = true
			n++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	ledger, err := s.Ledger(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	var charged credits.Amount
	for _, e := range ledger {
		switch {
		case e.Kind == credits.Grant:
		case e.Kind == credits.Chat && ids[e.ID]:
			charged += e.Amount
			delete(ids, e.ID)
		default:
			t.Errorf("ledger entry %+v: want a grant or the charge of a record, once", e)
		}
	}
	r, err := s.KeyByID(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killed after %d completions given to the store: %d records in the file (%d lost with the last writes)", given, n, given-n)
	switch {
	case len(ids) > 0:
		t.Errorf("%d records without their charge in the ledger", len(ids))
	case charged != recorded || r.Spent != recorded || r.Held != 0:
		t.Errorf("key spent %s held %s, ledger %s; want the records' %s, nothing held", r.Spent, r.Held, charged, recorded)
	case a.Balance != crashGrant-recorded || a.Held != 0:
		t.Errorf("account %+v; want balance %s less the records' %s, nothing held", a, credits.Amount(crashGrant), recorded)
	case n < crashHoldsBurst || n > given+8:
		t.Errorf("%d records for %d completions printed; want at least the %d whose write the child waited for, at most those printed and 8 in flight", n, given, crashHoldsBurst)
	}
}
