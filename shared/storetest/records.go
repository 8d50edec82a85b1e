package storetest

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// RecordsBackend is a store of records that also settles reservations
// with their records.
type RecordsBackend interface {
	ReserveBackend
	SettleRecord(ctx context.Context, e credits.Entry, r credits.Record) error
}

// RunRecords runs the contract of the records of requests
// (credits.RecordStore and Reservations.SettleRecord): a record reads
// back whole, with its expiry; an expired one is gone for readers; the
// listing is newest first over pages, every filter applied; a
// reservation's settlement and its record are written together, once;
// and, over a mix of chat requests (priced, free, failed, held), images
// and speech, the sum of the records' costs equals the ledger's chat,
// image and speech charges over the whole period and over every
// sub-period.
func RunRecords(t *testing.T, newBackend func(t *testing.T) RecordsBackend) {
	runAll(t, newBackend, []subtest[RecordsBackend]{
		{"Get", testRecordGet},
		{"Expired", testRecordExpired},
		{"ListOrder", testRecordListOrder},
		{"ListFilters", testRecordListFilters},
		{"ListBadQuery", testRecordListBadQuery},
		{"SettleRecord", testSettleRecord},
		{"SumEqualsLedger", testRecordSumEqualsLedger},
	})
}

// listRecords reads every page of q (pages of size) and returns the ids,
// in order.
func listRecords(t *testing.T, b RecordsBackend, q credits.RecordQuery, size int) []string {
	t.Helper()
	var ids []string
	q.Limit = size
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("Records(%+v): more than 100 pages", q)
		}
		rs, next, err := b.Records(context.Background(), q)
		if err != nil {
			t.Fatalf("Records(%+v) = %v", q, err)
		}
		if len(rs) > size {
			t.Fatalf("Records(%+v) = %d records; want at most %d", q, len(rs), size)
		}
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		if next == "" {
			return ids
		}
		q.Cursor = next
	}
}

func testRecordGet(t *testing.T, b RecordsBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10)
	r := credits.Record{ID: newRecordID(t), Kind: credits.KindResponses, Account: acct, Key: "key-test-" + randomSuffix(t),
		ModelAsked: "alias", Model: "priced-chat", Provider: "openai", Attempts: "priced-chat=503, priced-chat=200", ServiceTier: "flex",
		Tokens: credits.Tokens{Prompt: 1000, Cached: 300, CacheWrite: 100, CacheWrite1h: 50, Completion: 200, Reasoning: 80},
		Rates:  credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 187_500, CacheWrite1h: 300_000, Output: 600_000},
		Status: credits.StatusClientClosed, FinishReason: "stop", Partial: true, Estimated: true, Stream: true,
		LatencyMS: 1234, FirstTokenMS: 56, At: time.Now().UnixMilli()}
	add(t, b, r)
	got, err := b.Record(ctx, r.ID)
	if err != nil {
		t.Fatalf("Record(%q) = %v", r.ID, err)
	}
	if got.Expires <= r.At/1000 {
		t.Errorf("Record(%q).Expires = %d; want the retention after %d", r.ID, got.Expires, r.At/1000)
	}
	want := r
	want.Expires = got.Expires
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Record(%q) = %+v; want %+v", r.ID, got, want)
	}
	if _, err := b.Record(ctx, "chatcmpl-test-nothing-"+randomSuffix(t)); !errors.Is(err, credits.ErrRecordNotFound) {
		t.Errorf("Record(unknown) = %v; want ErrRecordNotFound", err)
	}
	img := credits.Record{ID: "img_test_" + randomSuffix(t), Kind: credits.KindImage, Account: acct, ModelAsked: "img", Model: "img",
		Units: 2, UnitPrice: 1_500_000, Status: credits.StatusCompleted, At: r.At, Expires: time.Now().Unix() + 60}
	add(t, b, img)
	if got, err := b.Record(ctx, img.ID); err != nil || !reflect.DeepEqual(got, img) {
		t.Errorf("Record(%q) = %+v, %v; want %+v (its own expiry kept)", img.ID, got, err, img)
	}
}

// testRecordExpired: a record past its expiry is gone for Record and
// Records, whether or not the store has deleted it yet.
func testRecordExpired(t *testing.T, b RecordsBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 10)
	now := time.Now()
	old := record{"m", credits.Day(now), 1, 1, 0}.of(t, acct)
	old.At, old.Expires = now.Add(-time.Hour).UnixMilli(), now.Unix()-1
	live := record{"m", credits.Day(now), 1, 1, 0}.of(t, acct)
	live.At = now.UnixMilli()
	add(t, b, old, live)
	if _, err := b.Record(ctx, old.ID); !errors.Is(err, credits.ErrRecordNotFound) {
		t.Errorf("Record(expired) = %v; want ErrRecordNotFound", err)
	}
	if got := listRecords(t, b, credits.RecordQuery{Account: acct}, 10); !slices.Equal(got, []string{live.ID}) {
		t.Errorf("Records(%q) = %v; want only the live record %q", acct, got, live.ID)
	}
}

// recordsAt writes n unpriced records of acct and key, the i-th of model
// models[i%len(models)], at base + i/2 ms (pairs share a millisecond),
// statuses alternating completed and failed every third, and returns
// them newest first.
func recordsAt(t *testing.T, b RecordsBackend, acct, key string, base int64, n int, models ...string) []credits.Record {
	t.Helper()
	var rs []credits.Record
	for i := range n {
		r := record{models[i%len(models)], credits.Day(time.UnixMilli(base)), int64(i), 1, 0}.of(t, acct)
		r.At, r.Key = base+int64(i/2), key
		if i%3 == 2 {
			r.Status, r.Model, r.ModelAsked = credits.StatusFailed, "", models[i%len(models)]
		}
		if i%4 == 3 {
			r.Kind = credits.KindResponses
		}
		rs = append(rs, r)
	}
	add(t, b, rs[:n/2]...)
	for _, r := range rs[n/2:] {
		add(t, b, r)
	}
	slices.SortFunc(rs, func(x, y credits.Record) int {
		if x.At != y.At {
			return int(y.At - x.At)
		}
		if x.ID > y.ID {
			return -1
		}
		return 1
	})
	return rs
}

func idsOf(rs []credits.Record, keep func(credits.Record) bool) []string {
	var ids []string
	for _, r := range rs {
		if keep == nil || keep(r) {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

// testRecordListOrder lists an account's records, and every account's
// (of one key), in pages of several sizes: newest first, each once.
func testRecordListOrder(t *testing.T, b RecordsBackend) {
	acct := newAccount(t, b, 10)
	key := "key-test-" + randomSuffix(t)
	rs := recordsAt(t, b, acct, key, time.Now().Add(-time.Minute).UnixMilli(), 11, "m")
	want := idsOf(rs, nil)
	for _, size := range []int{1, 2, 5, 11, 50} {
		if got := listRecords(t, b, credits.RecordQuery{Account: acct}, size); !slices.Equal(got, want) {
			t.Errorf("Records(account, pages of %d) = %v; want %v", size, got, want)
		}
		if got := listRecords(t, b, credits.RecordQuery{Key: key}, size); !slices.Equal(got, want) {
			t.Errorf("Records(key, every account, pages of %d) = %v; want %v", size, got, want)
		}
	}
	if got := listRecords(t, b, credits.RecordQuery{Account: "acct-test-nobody-" + randomSuffix(t)}, 10); len(got) != 0 {
		t.Errorf("Records(unknown account) = %v; want none", got)
	}
}

// testRecordListFilters: key, model (asked or answered), status and kind,
// with and without an account, each alone and together.
func testRecordListFilters(t *testing.T, b RecordsBackend) {
	acct := newAccount(t, b, 10)
	other := newAccount(t, b, 10)
	key := "key-test-" + randomSuffix(t)
	base := time.Now().Add(-2 * time.Minute).UnixMilli()
	ma, mb := "model-a-"+randomSuffix(t), "model-b-"+randomSuffix(t)
	rs := recordsAt(t, b, acct, key, base, 12, ma, mb)
	others := recordsAt(t, b, other, key, base, 4, ma)
	tests := []struct {
		name string
		q    credits.RecordQuery
		want []string
	}{
		{"account", credits.RecordQuery{Account: acct}, idsOf(rs, nil)},
		{"account and model", credits.RecordQuery{Account: acct, Model: mb}, idsOf(rs, func(r credits.Record) bool { return r.ModelAsked == mb })},
		{"account and status", credits.RecordQuery{Account: acct, Status: credits.StatusFailed}, idsOf(rs, func(r credits.Record) bool { return r.Status == credits.StatusFailed })},
		{"account and kind", credits.RecordQuery{Account: acct, Kind: credits.KindResponses}, idsOf(rs, func(r credits.Record) bool { return r.Kind == credits.KindResponses })},
		{"account, model and status", credits.RecordQuery{Account: acct, Model: ma, Status: credits.StatusCompleted},
			idsOf(rs, func(r credits.Record) bool { return r.Model == ma && r.Status == credits.StatusCompleted })},
		{"account and another key", credits.RecordQuery{Account: acct, Key: "key-test-none"}, nil},
		{"key, every account", credits.RecordQuery{Key: key}, idsOf(append(slices.Clone(rs), others...), nil)},
		{"key and model, every account", credits.RecordQuery{Key: key, Model: ma},
			idsOf(append(slices.Clone(rs), others...), func(r credits.Record) bool { return r.ModelAsked == ma })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, size := range []int{3, 50} {
				got := listRecords(t, b, tt.q, size)
				want := slices.Clone(tt.want)
				if tt.q.Account == "" { // two accounts' records: by time, then id
					want = sortedNewest(t, b, want)
				}
				if !slices.Equal(got, want) {
					t.Errorf("Records(%+v, pages of %d) = %v; want %v", tt.q, size, got, want)
				}
			}
		})
	}
}

// sortedNewest reads ids' records and returns the ids newest first.
func sortedNewest(t *testing.T, b RecordsBackend, ids []string) []string {
	t.Helper()
	var rs []credits.Record
	for _, id := range ids {
		r, err := b.Record(context.Background(), id)
		if err != nil {
			t.Fatalf("Record(%q) = %v", id, err)
		}
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(x, y credits.Record) int {
		if x.At != y.At {
			return int(y.At - x.At)
		}
		if x.ID > y.ID {
			return -1
		}
		return 1
	})
	return idsOf(rs, nil)
}

func testRecordListBadQuery(t *testing.T, b RecordsBackend) {
	for _, q := range []credits.RecordQuery{{Cursor: "garbage"}, {Status: "done"}, {Limit: credits.MaxRecordLimit + 1}} {
		var ae *apierr.Error
		if _, _, err := b.Records(context.Background(), q); !errors.As(err, &ae) || ae.Kind != apierr.Invalid {
			t.Errorf("Records(%+v) = %v; want a 400", q, err)
		}
	}
}

// reserveFor reserves amount for a synchronous request of kind and
// returns the reservation and its id.
func reserveFor(t *testing.T, b RecordsBackend, acct, kind, model string, amount credits.Amount, at int64) (credits.Entry, string) {
	t.Helper()
	return reserve(t, b, acct, kind, model, amount, at)
}

// mediaRecord is the record of the synchronous request id (an image or a
// speech) of acct, which cost cost for units at unit.
func mediaRecord(id, kind, acct, model string, units int64, unit, cost credits.Amount, at int64) credits.Record {
	return credits.Record{ID: id, Kind: kind, Account: acct, ModelAsked: model, Model: model, Units: units, UnitPrice: unit,
		Cost: cost, Status: credits.StatusCompleted, At: at}
}

// testSettleRecord: a reservation's settlement and its record are written
// together, once; a record that does not match its settlement is
// refused with nothing written.
func testSettleRecord(t *testing.T, b RecordsBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 100)
	now := time.Now()
	r, id := reserveFor(t, b, acct, "image", "img", 30, now.Unix())
	rec := mediaRecord(id, credits.KindImage, acct, "img", 2, 10, 20, now.UnixMilli())
	wrong := rec
	wrong.Cost = 21
	if err := b.SettleRecord(ctx, capture(r, id, 20, now.Unix()), wrong); !errors.Is(err, credits.ErrInvalidRecord) {
		t.Errorf("SettleRecord(a record costing other than the capture) = %v; want ErrInvalidRecord", err)
	}
	wantAccount(t, b, acct, 100, 30)
	if err := b.SettleRecord(ctx, capture(r, id, 20, now.Unix()), rec); err != nil {
		t.Fatalf("SettleRecord = %v", err)
	}
	if err := b.SettleRecord(ctx, capture(r, id, 20, now.Unix()), rec); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("SettleRecord again = %v; want ErrAlreadySettled", err)
	}
	wantAccount(t, b, acct, 80, 0)
	got, err := b.Record(ctx, id)
	if err != nil || got.Cost != 20 || got.Units != 2 || got.Expires == 0 {
		t.Errorf("Record(%q) = %+v, %v; want the image's record, with an expiry", id, got, err)
	}
	// A failed speech: its release and its failed record.
	r2, id2 := reserveFor(t, b, acct, "speech", "tts", 5, now.Unix())
	failed := mediaRecord(id2, credits.KindSpeech, acct, "tts", 100, 0, 0, now.UnixMilli())
	failed.Status, failed.Model = credits.StatusFailed, ""
	if err := b.SettleRecord(ctx, release(r2, id2, now.Unix()), failed); err != nil {
		t.Fatalf("SettleRecord(release) = %v", err)
	}
	wantAccount(t, b, acct, 80, 0)
	if got, err := b.Record(ctx, id2); err != nil || got.Status != credits.StatusFailed {
		t.Errorf("Record(%q) = %+v, %v; want the failed speech", id2, got, err)
	}
	// A record settled by the reconciler first: the request's record is
	// not written.
	r3, id3 := reserveFor(t, b, acct, "image", "img", 7, now.Unix())
	if _, err := credits.ReleaseReservation(ctx, b, r3, now.Unix()); err != nil {
		t.Fatal(err)
	}
	late := mediaRecord(id3, credits.KindImage, acct, "img", 1, 7, 7, now.UnixMilli())
	if err := b.SettleRecord(ctx, capture(r3, id3, 7, now.Unix()), late); !errors.Is(err, credits.ErrAlreadySettled) {
		t.Errorf("SettleRecord after the reconciler = %v; want ErrAlreadySettled", err)
	}
	if _, err := b.Record(ctx, id3); !errors.Is(err, credits.ErrRecordNotFound) {
		t.Errorf("Record(%q) = %v; want none (the reservation was released)", id3, err)
	}
	wantAccount(t, b, acct, 80, 0)
}

// testRecordSumEqualsLedger writes a mix of requests over several
// seconds: priced chat (Chat and Responses, some with a key, a partial
// one), free chat, failed chat, a held chat completion (a reservation
// released, its charge a chat record), images and speech (settled with
// their records, one failed), a job (whose capture is not a request's).
// The records' costs, summed by their second, equal the ledger's chat,
// image and speech charges by theirs, over the whole period and every
// sub-period of whole seconds.
func testRecordSumEqualsLedger(t *testing.T, b RecordsBackend) {
	ctx := context.Background()
	acct := newAccount(t, b, 1000*credits.Credit)
	key := newKey(t, b, acct, auth.Controls{})
	start := time.Now().Add(-10 * time.Minute).Truncate(time.Second)
	sec := func(i int) time.Time {
		return start.Add(time.Duration(i)*time.Second + time.Duration(i*37%1000)*time.Millisecond)
	}
	chat := func(i int, kind string, cost credits.Amount) credits.Record {
		r := record{"priced-chat", credits.Day(sec(i)), int64(100 + i), int64(10 + i), cost}.of(t, acct)
		r.Kind, r.At = kind, sec(i).UnixMilli()
		if i%2 == 0 {
			r.Key = key.ID
		}
		return r
	}
	var written []credits.Record
	// Chat, one call each and in a batch.
	batch := []credits.Record{chat(0, credits.KindChat, 1_234), chat(1, credits.KindResponses, 15), chat(1, credits.KindChat, 0)}
	partial := chat(2, credits.KindChat, 99)
	partial.Status, partial.Partial, partial.Estimated = credits.StatusClientClosed, true, true
	failed := chat(3, credits.KindChat, 0)
	failed.Status, failed.Model = credits.StatusFailed, ""
	batch = append(batch, partial, failed)
	add(t, b, batch...)
	written = append(written, batch...)
	for i := 4; i < 7; i++ {
		r := chat(i, credits.KindChat, credits.Amount(i*1_000_001))
		add(t, b, r)
		written = append(written, r)
	}
	// A held chat completion: reserved, charged by its record, released.
	hold, hid := reserveFor(t, b, acct, "chat", "priced-chat", 5*credits.Credit, sec(7).Unix())
	held := chat(7, credits.KindChat, 333_333)
	add(t, b, held)
	settle(t, b, release(hold, hid, sec(7).Unix()))
	written = append(written, held)
	// Images and speech, settled with their records.
	for i, m := range []struct {
		kind  string
		cost  credits.Amount
		fails bool
	}{{credits.KindImage, 2_500_000, false}, {credits.KindSpeech, 1_851, false}, {credits.KindImage, 0, true}, {credits.KindSpeech, 7, false}} {
		at := sec(8 + i)
		r, id := reserveFor(t, b, acct, m.kind, "media", 3*credits.Credit, at.Unix())
		rec := mediaRecord(id, m.kind, acct, "media", 1, m.cost, m.cost, at.UnixMilli())
		e := capture(r, id, m.cost, at.Unix())
		if m.fails {
			rec.Status, rec.Model, rec.Cost = credits.StatusFailed, "", 0
			e = release(r, id, at.Unix())
		}
		if err := b.SettleRecord(ctx, e, rec); err != nil {
			t.Fatalf("SettleRecord(%s) = %v", m.kind, err)
		}
		written = append(written, rec)
	}
	// A job's capture: a charge, but not a request's.
	j := create(t, b, newJob(t, acct, 4*credits.Credit))
	apply(t, b, credits.Change{JobID: j.ID, Account: acct, JobType: "sfx", Model: "test-sfx", OldStatus: "processing", NewStatus: "completed",
		Price: 4 * credits.Credit, At: sec(12).Unix()})

	l, err := b.Ledger(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; from <= 13; from++ {
		for to := from; to <= 13; to++ {
			lo, hi := start.Unix()+int64(from), start.Unix()+int64(to) // [lo, hi)
			var records, ledger credits.Amount
			for _, r := range written {
				if s := r.At / 1000; lo <= s && s < hi {
					records += r.Cost
				}
			}
			for _, e := range l {
				charge := e.Kind == credits.Chat || (e.Kind == credits.Capture && (e.JobType == credits.KindImage || e.JobType == credits.KindSpeech))
				if charge && lo <= e.At && e.At < hi {
					ledger += e.Amount
				}
			}
			if records != ledger {
				t.Errorf("seconds [%d, %d): records cost %s, the ledger's chat, image and speech charges %s; want equal", from, to, records, ledger)
			}
		}
	}
	// And the records read back are those written.
	var total credits.Amount
	for _, r := range written {
		got, err := b.Record(ctx, r.ID)
		if err != nil || got.Cost != r.Cost {
			t.Errorf("Record(%q) = %+v, %v; want cost %s", r.ID, got, err, r.Cost)
		}
		total += r.Cost
	}
	a, err := b.Account(ctx, acct)
	if err != nil {
		t.Fatal(err)
	}
	if want := 1000*credits.Credit - total - 4*credits.Credit; a.Balance != want || a.Held != 0 {
		t.Errorf("Account(%q) = %+v; want balance %s (the grant less the records' costs and the job's), nothing held", acct, a, want)
	}
	wantKey(t, b, key.ID, sumCosts(written, key.ID), 0)
	if n := len(listRecords(t, b, credits.RecordQuery{Account: acct}, 200)); n != len(written) {
		t.Errorf("Records(%q) = %d records; want %d", acct, n, len(written))
	}
}

// sumCosts sums the costs of the chat records of key.
func sumCosts(rs []credits.Record, key string) credits.Amount {
	var sum credits.Amount
	for _, r := range rs {
		if r.Key == key && r.Chat() {
			sum += r.Cost
		}
	}
	return sum
}
