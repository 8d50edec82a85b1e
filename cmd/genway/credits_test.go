package main

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestCreditsStress creates jobs, images and speeches (in turn: an
// image's and a speech's credits are a reservation, a job's a hold) from
// many goroutines against a balance that covers only some of them, lets
// some fail on purpose (a job's vendor, an image's refused prompt, a
// speech cut short after its first audio), and checks the promises of
// the credits design: no overdraft (exactly as many as the balance
// covers), each completed job, image request and speech heard to its end
// captured once, each failed one released, nothing left held.
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
	refused, other, imaged, imageRefused, heard, speechCut := 0, 0, 0, 0, 0, 0
	var wg sync.WaitGroup
	for g := 0; g < clients; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perClient; i++ {
				fail := (g+i)%6 < 3 // every other job, image, speech
				if (g+i)%3 == 2 {   // a speech of 2,000 characters: price credits
					input := strings.Repeat("tick ", 400)
					if fail {
						input = "fail: on purpose " + input
					}
					resp, _, _, err := c.speak(t, map[string]any{"model": "synthetic-speech", "input": input, "response_format": "pcm", "speed": 4})
					mu.Lock()
					switch {
					case resp.StatusCode == 200 && err == nil && !fail:
						heard++
					case resp.StatusCode == 200 && err != nil && fail:
						speechCut++
					case resp.StatusCode == 402:
						refused++
					default:
						other++
					}
					mu.Unlock()
					continue
				}
				if (g+i)%3 == 1 { // an image request: price credits for price images
					prompt := "tick"
					if fail {
						prompt = "fail:policy on purpose"
					}
					code, _, err := doRequest(c, "POST", "/v1/images/generations", map[string]any{"model": "synthetic-image", "prompt": prompt, "n": price, "size": "256x256"}, nil, nil)
					mu.Lock()
					switch {
					case err == nil && code == 200:
						imaged++
					case err == nil && code == 400 && fail:
						imageRefused++
					case err == nil && code == 402:
						refused++
					default:
						other++
					}
					mu.Unlock()
					continue
				}
				prompt := "tick"
				if fail {
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
		t.Fatalf("%d requests answered neither 200, 402, a refused prompt's 400 nor a speech cut short", other)
	}
	// While jobs and images are outstanding, holds plus captures can never
	// exceed the balance; failed ones release their credits, so later
	// requests may succeed: the number admitted is at least balance/price.
	if n := len(created) + imaged + imageRefused + heard + speechCut; n < balance/price {
		t.Fatalf("admitted %d jobs, images and speeches; the balance covers %d", n, balance/price)
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
	doubles := captures + releases - len(created) - imaged - imageRefused - heard - speechCut
	overdraft := cr.Balance < 0 || cr.Available < 0
	t.Logf("attempts %d: created %d jobs (completed %d, failed %d), %d image requests (refused prompts %d), %d speeches heard (%d cut short), refused 402: %d; "+
		"ledger captures %d, releases %d; double charges %d; final balance %d",
		clients*perClient, len(created), completed, failed, imaged, imageRefused, heard, speechCut, refused, captures, releases, doubles, cr.Balance)
	if cr.Held != 0 || overdraft {
		t.Errorf("credits = %+v; want nothing held and no negative balance", cr)
	}
	if captures != completed+imaged+heard || releases != failed+imageRefused+speechCut || doubles != 0 {
		t.Errorf("ledger has %d captures and %d releases for %d completed and %d failed jobs, %d images made and %d refused, %d speeches heard and %d cut short",
			captures, releases, completed, failed, imaged, imageRefused, heard, speechCut)
	}
	if want := int64(balance - price*(completed+imaged+heard)); cr.Balance != want {
		t.Errorf("balance = %d; want %d (%d completed jobs, %d image requests and %d speeches at %d)", cr.Balance, want, completed, imaged, heard, price)
	}
}
