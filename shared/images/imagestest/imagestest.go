// Package imagestest has in-memory fakes for the tests of image
// generation: Credits, a credits store with reservations (credits.Reservations),
// strict about how they are settled; and Media, a jobs.Media keeping
// files in memory. They let the images, speech and httpapi tests count
// each reservation and settlement without a store; the stores' own
// reservations are checked by the store contract tests
// (storetest.RunReservations on both stores).
package imagestest

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Credits is an in-memory credits.Reservations. Reserve holds in one step under
// a lock, so parallel requests cannot overdraw an account. As the stores
// do, Reserve checks its entry (credits.CheckReservation) and Settle
// accepts only the settlement of an open reservation, whole: ID
// credits.SettlementID of a reservation, a Release of all of it or a
// Capture whose held amount is all of it (else credits.ErrNoReservation),
// so a test sees a wrong settlement. It is safe for concurrent use.
type Credits struct {
	mu       sync.Mutex
	accounts map[string]*credits.Account
	entries  map[string]credits.Entry
	ledger   []credits.Entry
	usage    map[string]credits.Amount // "<account>/<job type>/<model>" -> credits captured
	records  []credits.Record          // written with their settlements, in order
}

var _ credits.Reservations = (*Credits)(nil)

// NewCredits returns a store holding accounts with the given balances.
func NewCredits(balances map[string]credits.Amount) *Credits {
	c := &Credits{accounts: map[string]*credits.Account{}, entries: map[string]credits.Entry{}, usage: map[string]credits.Amount{}}
	for id, b := range balances {
		c.accounts[id] = &credits.Account{ID: id, Balance: b, Available: b}
	}
	return c
}

// Reserve implements credits.Reserver.
func (c *Credits) Reserve(ctx context.Context, e credits.Entry) error {
	if err := credits.CheckReservation(e); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.accounts[e.Account]
	switch {
	case !ok:
		return credits.ErrAccountNotFound
	case c.entries[e.ID].ID != "":
		return credits.ErrAlreadySettled
	case a.Available < e.Amount:
		return credits.ErrInsufficient
	}
	a.Held += e.Amount
	a.Available = a.Balance - a.Held
	c.entries[e.ID] = e
	c.ledger = append(c.ledger, e)
	return nil
}

// OpenReservations implements credits.Reserver.
func (c *Credits) OpenReservations(ctx context.Context, before int64, limit int) ([]credits.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []credits.Entry
	for _, e := range c.ledger {
		if e.Kind == credits.Reservation && e.At < before && c.entries[credits.SettlementID(strings.TrimPrefix(e.ID, credits.ReservationID("")))].ID == "" {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At < out[j].At })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// Settle implements credits.Store.Settle for reservations.
func (c *Credits) Settle(ctx context.Context, e credits.Entry) error {
	return c.settle(e, nil)
}

// SettleRecord implements credits.Reservations: Settle with r written
// in the same step (Records lists them).
func (c *Credits) SettleRecord(ctx context.Context, e credits.Entry, r credits.Record) error {
	if err := credits.CheckSettledRecord(e, r); err != nil {
		return err
	}
	return c.settle(e, &r)
}

// Records returns the records written with settlements, in order.
func (c *Credits) Records() []credits.Record {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]credits.Record(nil), c.records...)
}

func (c *Credits) settle(e credits.Entry, rec *credits.Record) error {
	if err := credits.CheckSettlement(e); err != nil {
		return err
	}
	rid, ok := credits.ReservationOf(e.ID)
	if !ok {
		return fmt.Errorf("settle %s: not a reservation's settlement", e.ID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries[e.ID].ID != "" {
		return credits.ErrAlreadySettled
	}
	r, ok := c.entries[rid]
	if !ok || r.Account != e.Account || e.HeldAmount() != r.Amount {
		return fmt.Errorf("%w: %s of %s holding %s", credits.ErrNoReservation, rid, e.Account, e.HeldAmount())
	}
	a := c.accounts[e.Account]
	if e.Kind == credits.Capture {
		a.Balance -= e.Amount
		if e.JobType != "" {
			c.usage[e.Account+"/"+e.JobType+"/"+e.Model] += e.Amount
		}
	}
	a.Held -= e.HeldAmount()
	a.Available = a.Balance - a.Held
	c.entries[e.ID] = e
	c.ledger = append(c.ledger, e)
	if rec != nil {
		c.records = append(c.records, *rec)
	}
	return nil
}

// Account implements credits.Reservations.
func (c *Credits) Account(ctx context.Context, id string) (credits.Account, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.accounts[id]
	if !ok {
		return credits.Account{}, credits.ErrAccountNotFound
	}
	return *a, nil
}

// Ledger returns the entries written so far, in order.
func (c *Credits) Ledger() []credits.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]credits.Entry(nil), c.ledger...)
}

// Usage returns the credits captured for account's jobs of jobType made
// by model.
func (c *Credits) Usage(account, jobType, model string) credits.Amount {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.usage[account+"/"+jobType+"/"+model]
}

// Media is an in-memory jobs.Media whose links are
// "https://media.test/<key>?ttl=<seconds>". It is safe for concurrent use.
type Media struct {
	mu    sync.Mutex
	files map[string]File
	// PutErr, if set, fails every Put.
	PutErr error
}

// File is a stored file.
type File struct {
	ContentType string
	Data        []byte
}

var _ jobs.Media = (*Media)(nil)

// Put implements jobs.Media.
func (m *Media) Put(ctx context.Context, key, contentType string, r io.Reader, size int64) error {
	if m.PutErr != nil {
		return m.PutErr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if size >= 0 && int64(len(b)) != size {
		return fmt.Errorf("put %s: %d bytes, %d announced", key, len(b), size)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.files == nil {
		m.files = map[string]File{}
	}
	m.files[key] = File{ContentType: contentType, Data: b}
	return nil
}

// URL implements jobs.Media.
func (m *Media) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	return "https://media.test/" + (&url.URL{Path: key}).EscapedPath() + fmt.Sprintf("?ttl=%d", int(ttl/time.Second)), nil
}

// Delete implements jobs.Media.
func (m *Media) Delete(ctx context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.files, key)
	return nil
}

// Files returns the stored files by key.
func (m *Media) Files() map[string]File {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]File, len(m.files))
	for k, v := range m.files {
		out[k] = v
	}
	return out
}
