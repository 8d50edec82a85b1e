package localstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// gateStore opens a store with account "acct" granted balance and a key of
// it limited to limit (0: no limit), whose id it returns.
func gateStore(t *testing.T, path string, balance, limit credits.Amount) (*Store, string) {
	t.Helper()
	s := openAt(t, path)
	return s, gateAccount(t, s, balance, limit)
}

// gateAccount grants account "acct" of s balance and makes it a key,
// limited to limit (0: no limit); it returns the key's id.
func gateAccount(t *testing.T, s *Store, balance, limit credits.Amount) string {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Grant(ctx, "acct", balance, time.Now().Unix()); err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	r := auth.NewRecord(k, "acct", time.Now())
	if limit > 0 {
		r.CreditLimit = &limit
	}
	if err := s.PutKey(ctx, r); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

var gateIDs atomic.Int64

// memHold is a chat completion's reservation of amount on key.
func memHold(key string, amount credits.Amount) credits.Entry {
	id := fmt.Sprintf("chat_gate%d", gateIDs.Add(1))
	return credits.Entry{ID: credits.ReservationID(id), Account: "acct", Kind: credits.Reservation, Amount: amount,
		JobID: id, JobType: "chat", Model: "m", Key: key, At: time.Now().Unix()}
}

// releaseOf is the release of reservation r.
func releaseOf(r credits.Entry) credits.Entry {
	return credits.Entry{ID: credits.SettlementID(r.JobID), Account: r.Account, Kind: credits.Release, Amount: r.Amount,
		JobID: r.JobID, JobType: r.JobType, Model: r.Model, At: r.At}
}

// chatRecord is a completed chat record of key costing cost.
func chatRecord(key string, cost credits.Amount) credits.Record {
	return credits.Record{ID: fmt.Sprintf("chatcmpl-gate%d", gateIDs.Add(1)), Kind: credits.KindChat, Account: "acct", Key: key,
		Status: credits.StatusCompleted, Model: "m", At: time.Now().UnixMilli(), Cost: cost}
}

// creditPos is the key's spent and held and the account's balance, held
// and available, as the store shows them.
type creditPos struct{ spent, keyHeld, balance, held, available credits.Amount }

func positionOf(t *testing.T, s *Store, key string) creditPos {
	t.Helper()
	ctx := context.Background()
	r, err := s.KeyByID(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Account(ctx, "acct")
	if err != nil {
		t.Fatal(err)
	}
	return creditPos{r.Spent, r.Held, a.Balance, a.Held, a.Available}
}

// TestMemoryHolds: holds in memory and charges written behind count in
// every check and every read of positions, at once, as the file's own
// holds and charges do: in MemoryHolds' reservations, in the store's
// reservations and job holds, in the key's and the account's positions.
func TestMemoryHolds(t *testing.T) {
	const cr = credits.Credit
	ctx := context.Background()
	s, key := gateStore(t, filepath.Join(t.TempDir(), "genway.db"), 100*cr, 10*cr)
	h := s.MemoryHolds()
	want := func(step string, p creditPos) {
		t.Helper()
		if got := positionOf(t, s, key); got != p {
			t.Fatalf("%s: position %+v; want %+v", step, got, p)
		}
	}
	wantLimit := func(step string, err error, left string) {
		t.Helper()
		if !errors.Is(err, credits.ErrKeyLimit) || !strings.Contains(err.Error(), left+" left of 10 ") {
			t.Fatalf("%s = %v; want the key's limit, %s left of 10", step, err, left)
		}
	}

	six := memHold(key, 6*cr)
	if err := h.Reserve(ctx, six); err != nil {
		t.Fatal(err)
	}
	want("a hold of 6 in memory", creditPos{0, 6 * cr, 100 * cr, 6 * cr, 94 * cr})
	if open, err := s.OpenReservations(ctx, time.Now().Unix()+1, 10); err != nil || len(open) != 1 || open[0].ID != six.ID {
		t.Errorf("OpenReservations = %v, %v; want the hold in memory", open, err)
	}
	if err := h.Reserve(ctx, six); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("Reserve(the same id again) = %v; want ErrAlreadySettled", err)
	}
	wantLimit("Store.Reserve(5) past a hold of 6 in memory", s.Reserve(ctx, memHold(key, 5*cr)), "4")
	j := &jobs.Job{ID: "job_gate", Account: "acct", Key: key, Type: jobs.TypeMusic, Model: "m", Price: 5 * cr, Created: time.Now().Unix()}
	if _, err := s.Create(ctx, j, nil); !errors.Is(err, credits.ErrKeyLimit) {
		t.Fatalf("Create(a job of 5) past a hold of 6 in memory = %v; want the key's limit", err)
	}

	rec := chatRecord(key, 3*cr)
	if errs := h.AddRecords(ctx, []credits.Record{rec}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	want("and a charge of 3 written behind", creditPos{3 * cr, 6 * cr, 97 * cr, 6 * cr, 91 * cr})
	wantLimit("Reserve(2) with 3 charged and 6 held", h.Reserve(ctx, memHold(key, 2*cr)), "1")
	if got, err := s.Record(ctx, rec.ID); err != nil || got.Cost != 3*cr {
		t.Fatalf("Record(written behind) = %+v, %v; want it, costing 3", got, err)
	}
	if l, err := s.Ledger(ctx, "acct"); err != nil || l[len(l)-1].ID != credits.ChatEntryID(rec.ID) {
		t.Fatalf("Ledger = %v, %v; want the charge last", l, err)
	}
	want("after the write", creditPos{3 * cr, 6 * cr, 97 * cr, 6 * cr, 91 * cr})

	if err := h.Settle(ctx, releaseOf(six)); err != nil {
		t.Fatal(err)
	}
	want("after the release", creditPos{3 * cr, 0, 97 * cr, 0, 97 * cr})
	if err := h.Settle(ctx, releaseOf(six)); !errors.Is(err, credits.ErrNoReservation) {
		t.Errorf("Settle(released before) = %v; want ErrNoReservation", err)
	}
	capture := releaseOf(six)
	capture.Kind, capture.Hold = credits.Capture, six.Amount
	if err := h.Settle(ctx, capture); err == nil {
		t.Errorf("Settle(a capture) = nil; want an error: a hold's charge is its record")
	}

	// The file's holds count in memory holds' checks.
	if err := s.Reserve(ctx, memHold(key, 5*cr)); err != nil {
		t.Fatal(err)
	}
	wantLimit("Reserve(3) with 3 charged and 5 held in the file", h.Reserve(ctx, memHold(key, 3*cr)), "2")
	// The account's available credits bound holds without a key.
	if err := h.Reserve(ctx, memHold("", 93*cr)); !errors.Is(err, credits.ErrInsufficient) {
		t.Errorf("Reserve(93 with 97 less 5 held available) = %v; want ErrInsufficient", err)
	}
	big := memHold("", 90*cr)
	if err := h.Reserve(ctx, big); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, &jobs.Job{ID: "job_gate2", Account: "acct", Type: jobs.TypeMusic, Model: "m", Price: 3 * cr, Created: time.Now().Unix()}, nil); !errors.Is(err, jobs.ErrInsufficientCredits) {
		t.Errorf("Create(a job of 3 with 2 available) = %v; want ErrInsufficientCredits", err)
	}
	capBig := releaseOf(big)
	capBig.Kind, capBig.Amount, capBig.Hold = credits.Capture, cr, big.Amount
	if err := s.Settle(ctx, capBig); err == nil || !strings.Contains(err.Error(), "only by its release") {
		t.Errorf("Store.Settle(a capture of a hold in memory) = %v; want refused: its charge is its record", err)
	}
	// The reconciler releases a hold in memory as one in the file.
	if ok, err := credits.ReleaseReservation(ctx, s, big, time.Now().Unix()); !ok || err != nil {
		t.Fatalf("ReleaseReservation(a hold in memory) = %v, %v; want it released", ok, err)
	}
	if err := h.Reserve(ctx, memHold(key, 1*cr)); err != nil {
		t.Errorf("Reserve(1 of the 2 left) = %v", err)
	}
	if err := h.Reserve(ctx, memHold("nobody", 1*cr)); !errors.Is(err, credits.ErrAccountNotFound) && !strings.Contains(fmt.Sprint(err), "nobody") {
		t.Errorf("Reserve(of an unknown account) = %v; want ErrAccountNotFound", err)
	}
}

// TestGateExact: memory holds, charges written behind and the file's own
// reservations and captures, in parallel on one key, never take it past
// its limit, and every read of the key's spend in the meantime shows each
// charge exactly once: the spend never goes down (a charge counted twice,
// then once, or missed, then counted, would). After Close and a reopen,
// the file has every charge and no hold.
func TestGateExact(t *testing.T) {
	const (
		cr      = credits.Credit
		limit   = 1500 * cr
		workers = 8
		rounds  = 150
	)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "genway.db")
	s, key := gateStore(t, path, 1_000_000*cr, limit)
	h := s.MemoryHolds()
	var charged atomic.Int64 // credits.Amount of every charge made
	var records atomic.Int64
	// A completion's charge counts from its record on, its hold until its
	// release, after: in between, the key's spent and held count both
	// (never too little). And a capture of the file's reservation frees
	// the part of its hold it does not charge for a reservation that the
	// same batched transaction makes after it: until that transaction
	// commits, a read of an older snapshot counts the freed hold and the
	// new one (pending in the gate) both. windowIn and windowOut add up
	// those amounts as they enter and leave their windows, so that a read
	// may pass the limit by what is in them (too much, never too little).
	var windowIn, windowOut atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan error, 1)
	go func() {
		var last credits.Amount
		n := 0
		defer func() { sampled <- nil }()
		for {
			select {
			case <-stop:
				t.Logf("%d reads of the key", n)
				return
			default:
			}
			out := credits.Amount(windowOut.Load())
			r, err := s.KeyByID(ctx, key)
			slack := credits.Amount(windowIn.Load()) - out
			if err != nil {
				sampled <- err
				return
			}
			if r.Spent < last || r.Spent > limit || r.Spent+r.Held > limit+slack {
				sampled <- fmt.Errorf("read %d: spent %s held %s after spent %s; want spent never less, and within %s with held, but for %s charged before their holds' release", n, r.Spent, r.Held, last, limit, slack)
				return
			}
			last = r.Spent
			n++
		}
	}()
	var wg sync.WaitGroup
	var refused atomic.Int64
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for range rounds {
				amount := credits.Amount(1+rng.IntN(5)) * cr
				cost := amount - credits.Amount(rng.IntN(int(amount/cr)))*cr
				inFile := w%4 == 3 // the file's own: a reservation, then its capture
				reserve := h.Reserve
				if inFile {
					reserve = s.Reserve
				}
				e := memHold(key, amount)
				err := reserve(ctx, e)
				if errors.Is(err, credits.ErrKeyLimit) {
					refused.Add(1)
					continue
				}
				if err != nil {
					t.Error(err)
					return
				}
				if inFile {
					c := releaseOf(e)
					c.Kind, c.Amount, c.Hold = credits.Capture, cost, amount
					windowIn.Add(int64(amount - cost))
					if err := s.Settle(ctx, c); err != nil {
						t.Error(err)
						return
					}
					windowOut.Add(int64(amount - cost))
					charged.Add(int64(cost))
					continue
				}
				windowIn.Add(int64(cost))
				if errs := h.AddRecords(ctx, []credits.Record{chatRecord(key, cost)}); errs[0] != nil {
					t.Error(errs[0])
					return
				}
				charged.Add(int64(cost))
				records.Add(1)
				if err := h.Settle(ctx, releaseOf(e)); err != nil {
					t.Error(err)
					return
				}
				windowOut.Add(int64(cost))
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-sampled; err != nil {
		t.Fatal(err)
	}
	total := credits.Amount(charged.Load())
	t.Logf("%d charges written behind, %d refusals, %s charged of %s", records.Load(), refused.Load(), total, limit)
	if refused.Load() == 0 || total > limit {
		t.Errorf("%s charged, %d refusals; want the limit reached, and not passed", total, refused.Load())
	}
	if got := positionOf(t, s, key); got != (creditPos{total, 0, 1_000_000*cr - total, 0, 1_000_000*cr - total}) {
		t.Errorf("position %+v; want %s spent and charged, nothing held", got, total)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path)
	if got := positionOf(t, s, key); got != (creditPos{total, 0, 1_000_000*cr - total, 0, 1_000_000*cr - total}) {
		t.Errorf("after a reopen: position %+v; want %s spent and charged, nothing held", got, total)
	}
	if n := s.countRecords(t); n != int(records.Load()) {
		t.Errorf("after a reopen: %d records; want %d", n, records.Load())
	}
	if s.gate.lastSeq == 0 {
		t.Error("after a reopen: the writes behind count from 0; want from the file's last")
	}
}

// TestWriteBehindClose: records written behind just before Close are in
// the file after it; one the store refuses (an unknown account) is
// dropped, and its charge no longer counts.
// TestWriteBehindPace: under load the writes behind wait for their pace
// (Options.WriteBehind), and a read of what they write has them written
// at once instead of waiting for it.
func TestWriteBehindPace(t *testing.T) {
	ctx := context.Background()
	s, err := OpenWith(filepath.Join(t.TempDir(), "genway.db"), Options{WriteBehind: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := gateAccount(t, s, 100*credits.Credit, 0)
	h := s.MemoryHolds()
	written := func() bool {
		s.gate.mu.Lock()
		defer s.gate.mu.Unlock()
		return s.gate.out == s.gate.in
	}
	first, second := chatRecord(key, credits.Credit), chatRecord(key, credits.Credit)
	if errs := h.AddRecords(ctx, []credits.Record{first}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	for i := 0; !written(); i++ { // an idle writer writes the first at once
		if i == 500 {
			t.Fatal("the first record written behind was not written within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if errs := h.AddRecords(ctx, []credits.Record{second}); errs[0] != nil {
		t.Fatal(errs[0])
	}
	time.Sleep(50 * time.Millisecond)
	if written() {
		t.Fatal("the second record was written before the writer's pace (an hour) was up")
	}
	if r, err := s.Record(ctx, second.ID); err != nil || r.ID != second.ID {
		t.Fatalf("Record(%s) = %+v, %v; want it written for the read, at once", second.ID, r, err)
	}
	if a, err := s.Account(ctx, "acct"); err != nil || a.Balance != 98*credits.Credit {
		t.Fatalf("Account = %+v, %v; want balance 98 credits", a, err)
	}
}

func TestWriteBehindClose(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "genway.db")
	s, key := gateStore(t, path, 1000*credits.Credit, 0)
	h := s.MemoryHolds()
	var rs []credits.Record
	for range 500 {
		rs = append(rs, chatRecord(key, 2*credits.Credit))
	}
	stray := chatRecord("", credits.Credit)
	stray.Account = "nobody"
	for _, errs := range [][]error{h.AddRecords(ctx, rs), h.AddRecords(ctx, []credits.Record{stray})} {
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(s.gate.accounts) != 0 || len(s.gate.keys) != 0 || len(s.gate.queue) != 0 {
		t.Errorf("the gate owes %v and %v, %d records queued, after Close; want nothing", s.gate.accounts, s.gate.keys, len(s.gate.queue))
	}
	s = openAt(t, path)
	if n := s.countRecords(t); n != len(rs) {
		t.Errorf("%d records after Close; want %d", n, len(rs))
	}
	if a, err := s.Account(ctx, "acct"); err != nil || a.Balance != 0 {
		t.Errorf("Account = %+v, %v; want balance 0 (1000 less 500 charges of 2)", a, err)
	}
}

// BenchmarkMemoryHolds: what a held completion of a limited key costs the
// embedded store, per completion: its hold in memory, its record written
// behind (the writes' commits included, in the background) and its
// release, from 32 goroutines as the chat benchmark's connections.
//
//	go test ./shared/local/localstore -run '^$' -bench MemoryHolds -benchmem
func BenchmarkMemoryHolds(b *testing.B) {
	const cr = credits.Credit
	s := openTemp(b)
	ctx := context.Background()
	if _, err := s.Grant(ctx, "acct", 1_000_000_000*cr, time.Now().Unix()); err != nil {
		b.Fatal(err)
	}
	k, err := auth.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	r := auth.NewRecord(k, "acct", time.Now())
	limit := credits.Amount(1_000_000_000 * cr)
	r.CreditLimit = &limit
	if err := s.PutKey(ctx, r); err != nil {
		b.Fatal(err)
	}
	h := s.MemoryHolds()
	b.SetParallelism(16) // 32 goroutines on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e := memHold(r.ID, 2*cr)
			if err := h.Reserve(ctx, e); err != nil {
				b.Error(err)
				return
			}
			if errs := h.AddRecords(ctx, []credits.Record{chatRecord(r.ID, cr)}); errs[0] != nil {
				b.Error(errs[0])
				return
			}
			if err := h.Settle(ctx, releaseOf(e)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	s.awaitWrites(ctx)
}
