package credits_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/genway/genway/shared/credits"
)

// TestRecordJSON: Record.AppendJSON writes exactly what encoding/json
// writes (by reflection) for records with every field set, with none, and
// with strings that need escaping; and it reads back as the same record.
func TestRecordJSON(t *testing.T) {
	full := chatRecord()
	full.Provider, full.Attempts, full.ServiceTier, full.FinishReason = "openai", "m=503, m=200", "flex", "stop"
	full.Tokens.CacheWrite1h = 7
	full.Rates = credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 187_500, CacheWrite1h: 300_000, Output: 600_000}
	full.Units, full.UnitPrice, full.Partial, full.Estimated, full.Stream = 3, 1_500_001, true, true, true
	full.LatencyMS, full.FirstTokenMS, full.Expires = 1234, 56, 1_800_000_000
	weird := full
	weird.ID, weird.Account = "a\"b\\c\nd\re\tf\bg\fh\x00i\x1fj", "<script>&amp;</script>"
	weird.Model, weird.FinishReason = "caf\u00e9 \u2028 \u2029 \U0001F600", "bad \xff utf8 \xe2\x82"
	for _, r := range []credits.Record{full, {}, weird, {Cost: -1, Rates: credits.TokenRates{Output: -2_500_000}}, chatRecord()} {
		got := r.AppendJSON([]byte("x"))[1:] // appended, not written over
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendJSON(%+v) =\n%s\nwant (encoding/json)\n%s", r, got, want)
		}
		var back credits.Record
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Unmarshal(%s) = %v", got, err)
		}
		if r.ID == weird.ID {
			continue // invalid UTF-8 reads back as U+FFFD
		}
		if !reflect.DeepEqual(back, r) {
			t.Errorf("Unmarshal(AppendJSON(%+v)) = %+v", r, back)
		}
	}
}

// FuzzRecordJSONStrings: any strings in a record's fields encode as
// encoding/json encodes them.
func FuzzRecordJSONStrings(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\\n", "<>&", "\u2028\u2029", "\xff\xfe", "\x00\x1f\x7f", "日本"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		r := credits.Record{ID: a, Kind: b, Account: a + b, Key: b, ModelAsked: a, Model: b, Attempts: a, FinishReason: b}
		got := r.AppendJSON(nil)
		want, _ := json.Marshal(r)
		if string(got) != string(want) {
			t.Errorf("AppendJSON of %q, %q =\n%s\nwant\n%s", a, b, got, want)
		}
	})
}

func BenchmarkRecordJSON(b *testing.B) {
	r := chatRecord()
	r.Rates = credits.TokenRates{Input: 150_000, CachedInput: 75_000, CacheWrite: 187_500, CacheWrite1h: 300_000, Output: 600_000}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			buf = r.AppendJSON(buf[:0])
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			json.Marshal(r)
		}
	})
}

// FuzzEntryJSON: Entry.AppendJSON writes exactly what encoding/json
// writes for any entry.
//
//	go test ./shared/credits -run '^$' -fuzz FuzzEntryJSON -fuzztime 30s
func FuzzEntryJSON(f *testing.F) {
	f.Add("chat:chatcmpl-x", "acct", credits.Capture, int64(143), int64(0), "", "", "openai/gpt-4o-mini", "key_1", int64(1_800_000_000))
	f.Add("res:job_1", "<a&b>", credits.Release, int64(-5), int64(7_000_001), "job_1", "video", "m\u2028", "", int64(-1))
	f.Add("", "", "", int64(0), int64(0), "", "", "", "", int64(0))
	f.Add("a\"b\\c\n\xff", "caf\u00e9", credits.Capture, int64(1<<62), int64(-1<<62), "j", "t", "m", "k", int64(1))
	f.Fuzz(func(t *testing.T, id, account, kind string, amount, hold int64, jobID, jobType, model, key string, at int64) {
		e := credits.Entry{ID: id, Account: account, Kind: kind, Amount: credits.Amount(amount), Hold: credits.Amount(hold),
			JobID: jobID, JobType: jobType, Model: model, Key: key, At: at}
		want, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		if got := e.AppendJSON([]byte("x"))[1:]; string(got) != string(want) {
			t.Fatalf("AppendJSON(%+v) =\n%s\nwant (encoding/json)\n%s", e, got, want)
		}
	})
}
