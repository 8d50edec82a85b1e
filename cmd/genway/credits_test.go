package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCreditsStress creates jobs from many goroutines against a balance that
// covers only some of them, lets some fail on purpose, and checks the
// promises of the credits design: no overdraft (exactly as many jobs as the
// balance covers), each completed job captured once, each failed job
// released, nothing left held.
func TestCreditsStress(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, map[string]string{"GENWAY_DEV_CREDITS": "0", "GENWAY_WORKERS": "4"})
	var out bytes.Buffer
	const balance, price, clients, perClient = 60, 2, 16, 5 // 80 attempts, 30 affordable
	if err := run(t.Context(), []string{"keys", "create", "--account", "stress", "--credits", "60"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c := &server{base: s.base, key: lines[len(lines)-1]}

	var mu sync.Mutex
	var created []string
	refused, other := 0, 0
	var wg sync.WaitGroup
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				prompt := "tick"
				if (g+i)%4 == 0 {
					prompt = "fail: on purpose"
				}
				var j jobResp
				code, _, err := doRequest(c, "POST", "/v1/jobs", map[string]any{"type": "sfx", "model": "synthetic-sfx", "prompt": prompt, "duration": price}, nil, &j)
				mu.Lock()
				switch {
				case err == nil && code == 200:
					created = append(created, j.ID)
				case err == nil && code == 402:
					refused++
				default:
					other++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if other != 0 {
		t.Fatalf("%d creates answered neither 200 nor 402", other)
	}
	// While jobs are outstanding, holds plus captures can never exceed the
	// balance; failed jobs release their hold, so later creates may succeed:
	// the number created is at least balance/price.
	if len(created) < balance/price {
		t.Fatalf("created %d jobs; the balance covers %d", len(created), balance/price)
	}
	completed, failed := 0, 0
	for _, id := range created {
		j, _ := c.waitJob(t, id, 60*time.Second)
		if j.Status == "completed" {
			completed++
		} else {
			failed++
		}
	}
	var cr struct{ Balance, Held, Available int64 }
	deadline := time.Now().Add(20 * time.Second)
	for {
		c.do(t, "GET", "/v1/credits", nil, nil, &cr)
		if cr.Held == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	out.Reset()
	if err := run(t.Context(), []string{"credits", "ledger", "--account", "stress"}, testEnv(dir, nil), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	captures, releases := strings.Count(out.String(), " capture "), strings.Count(out.String(), " release ")
	doubles := captures + releases - len(created)
	overdraft := cr.Balance < 0 || cr.Available < 0
	t.Logf("attempts %d: created %d (completed %d, failed %d), refused 402: %d; ledger captures %d, releases %d; double charges %d; final balance %d",
		clients*perClient, len(created), completed, failed, refused, captures, releases, doubles, cr.Balance)
	if cr.Held != 0 || overdraft {
		t.Errorf("credits = %+v; want nothing held and no negative balance", cr)
	}
	if captures != completed || releases != failed || doubles != 0 {
		t.Errorf("ledger has %d captures and %d releases for %d completed and %d failed jobs", captures, releases, completed, failed)
	}
	if want := int64(balance - price*completed); cr.Balance != want {
		t.Errorf("balance = %d; want %d (%d completed jobs at %d)", cr.Balance, want, completed, price)
	}
}
