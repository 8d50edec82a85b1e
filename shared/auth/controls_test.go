package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, model string
		want           bool
	}{
		{"synthetic/*", "synthetic/chat", true},
		{"synthetic/*", "synthetic/a/b", true},
		{"synthetic/*", "synthetic-music", false},
		{"openai/gpt-4o-mini", "openai/gpt-4o-mini", true},
		{"openai/gpt-4o-mini", "openai/gpt-4o", false},
		{"openai/gpt-4o", "openai/gpt-4o-mini", false},
		{"elevenlabs-*", "elevenlabs-music", true},
		{"elevenlabs-*", "elevenlabs-", true},
		{"*", "anything/at-all", true},
		{"*-music", "synthetic-music", true},
		{"*-music", "synthetic-sfx", false},
		{"a*b*c", "axxbyyc", true},
		{"a*b*c", "axxbyy", false},
		{"a**", "a", true},
		{"", "", true},
		{"", "x", false},
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.model); got != tt.want {
			t.Errorf("Match(%q, %q) = %v; want %v", tt.pattern, tt.model, got, tt.want)
		}
	}
}

func TestParseModels(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"*", nil},
		{" synthetic/* , openai/gpt-4o-mini,,elevenlabs-* ", []string{"synthetic/*", "openai/gpt-4o-mini", "elevenlabs-*"}},
	}
	for _, tt := range tests {
		got := ParseModels(tt.in)
		if len(got) != len(tt.want) {
			t.Errorf("ParseModels(%q) = %q; want %q", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if got[i] != tt.want[i] {
				t.Errorf("ParseModels(%q) = %q; want %q", tt.in, got, tt.want)
			}
		}
	}
}

func TestParseExpiry(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"", 0, false},
		{"never", 0, false},
		{"30d", now.Add(30 * 24 * time.Hour).Unix(), false},
		{"1d12h", now.Add(36 * time.Hour).Unix(), false},
		{"90m", now.Add(90 * time.Minute).Unix(), false},
		{"2027-01-02T03:04:05Z", time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC).Unix(), false},
		{"2027-01-02", time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC).Unix(), false},
		{"-5h", 0, true},
		{"0d", 0, true},
		{"soon", 0, true},
		{"xd", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseExpiry(tt.in, now)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseExpiry(%q) = %d, %v; want %d (error %v)", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && apierr.As(err) == nil {
			t.Errorf("ParseExpiry(%q) error %v is not an *apierr.Error", tt.in, err)
		}
	}
}

func TestControlsCheck(t *testing.T) {
	neg, fraction, most, past := -credits.Micro, credits.Amount(250_000), credits.MaxAmount, credits.MaxAmount+1
	tests := []struct {
		name string
		c    Controls
		ok   bool
	}{
		{"zero", Controls{}, true},
		{"all", Controls{Name: "intern", Models: []string{"synthetic/*"}, ExpiresAt: 1, CreditLimit: new(credits.Amount)}, true},
		{"fractional limit", Controls{CreditLimit: &fraction}, true},
		{"the largest limit", Controls{CreditLimit: &most}, true},
		{"limit past the maximum", Controls{CreditLimit: &past}, false},
		{"control char in name", Controls{Name: "a\nb"}, false},
		{"space in pattern", Controls{Models: []string{"a b"}}, false},
		{"empty pattern", Controls{Models: []string{""}}, false},
		{"negative limit", Controls{CreditLimit: &neg}, false},
		{"negative expiry", Controls{ExpiresAt: -1}, false},
		{"own jobs", Controls{Jobs: JobsOwn}, true},
		{"jobs spelled out", Controls{Jobs: "account"}, false}, // stored as ""
		{"unknown jobs", Controls{Jobs: "mine"}, false},
	}
	for _, tt := range tests {
		if err := tt.c.Check(); (err == nil) != tt.ok {
			t.Errorf("%s: Check() = %v; want ok %v", tt.name, err, tt.ok)
		}
	}
}

func TestChangeApply(t *testing.T) {
	ten, off := 10*credits.Credit, -credits.Credit
	name := "intern"
	c := Change{Name: &name, CreditLimit: &ten}.Apply(Controls{Models: []string{"x"}})
	if c.Name != "intern" || c.CreditLimit == nil || *c.CreditLimit != 10*credits.Credit || len(c.Models) != 1 {
		t.Errorf("Apply(name, limit) = %+v; want name intern, limit 10, models kept", c)
	}
	c = Change{CreditLimit: &off, Models: &[]string{}}.Apply(c)
	if c.CreditLimit != nil || len(c.Models) != 0 || c.Name != "intern" {
		t.Errorf("Apply(no limit, every model) = %+v; want no limit, no models, name kept", c)
	}
	for _, tt := range []struct{ in, want string }{{"own", JobsOwn}, {"OWN", JobsOwn}, {"account", JobsAccount}, {"", JobsAccount}, {"mine", "mine"}} {
		v := tt.in
		if got := (Change{Jobs: &v}).Apply(Controls{Jobs: JobsOwn}).Jobs; got != tt.want {
			t.Errorf("Apply(jobs %q).Jobs = %q; want %q", tt.in, got, tt.want)
		}
	}
	if own := JobsOwn; (Change{Jobs: &own}).Empty() {
		t.Error("Change{Jobs}.Empty() = true; want false")
	}
	if d := (Controls{Jobs: JobsOwn}).Describe(); d != "jobs=own" {
		t.Errorf("Describe(own jobs) = %q; want jobs=own", d)
	}
}

// TestCanSeeJob: a key limited to its own jobs sees only the jobs it
// made; any other caller, every job of its account.
func TestCanSeeJob(t *testing.T) {
	own := WithPrincipal(context.Background(), Principal{Account: "a", KeyID: "key_1", OwnJobs: true})
	shared := WithPrincipal(context.Background(), Principal{Account: "a", KeyID: "key_2"})
	tests := []struct {
		name    string
		ctx     context.Context
		jobKey  string
		want    bool
		listKey string
	}{
		{"own key, its job", own, "key_1", true, "key_1"},
		{"own key, another key's job", own, "key_2", false, "key_1"},
		{"own key, the console's job", own, "", false, "key_1"},
		{"account key, another key's job", shared, "key_1", true, ""},
		{"no principal", context.Background(), "key_1", true, ""},
	}
	for _, tt := range tests {
		if got := CanSeeJob(tt.ctx, tt.jobKey); got != tt.want {
			t.Errorf("%s: CanSeeJob(%q) = %v; want %v", tt.name, tt.jobKey, got, tt.want)
		}
		if got := OwnJobsKey(tt.ctx); got != tt.listKey {
			t.Errorf("%s: OwnJobsKey = %q; want %q", tt.name, got, tt.listKey)
		}
	}
}

// TestAuthenticateExpiry checks that an expired key gets the same
// ErrInvalidKey as an unknown one, at once even while it is cached, and
// that the principal carries the key's model patterns and jobs control.
func TestAuthenticateExpiry(t *testing.T) {
	key, _ := NewKey()
	now := time.Unix(1_700_000_000, 0)
	store := &memKeys{recs: map[string]Record{}}
	rec := NewRecord(key, "acme", now)
	rec.ExpiresAt = now.Add(time.Minute).Unix()
	rec.Models = []string{"synthetic/*"}
	rec.Jobs = JobsOwn
	store.PutKey(context.Background(), rec)
	a := NewAuthenticator(store, time.Hour)
	a.now = func() time.Time { return now }
	h := "Bearer " + string(key)
	p, err := a.Authenticate(context.Background(), h)
	if err != nil || !p.Allows("synthetic/chat") || p.Allows("openai/gpt-4o") || !p.OwnJobs || p.KeyID != rec.ID {
		t.Fatalf("Authenticate(live key) = %+v, %v; want a principal allowed synthetic/* only, limited to its own jobs", p, err)
	}
	now = now.Add(time.Minute)
	if _, err := a.Authenticate(context.Background(), h); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Authenticate(expired, cached) = %v; want ErrInvalidKey", err)
	}
	if store.reads != 1 {
		t.Errorf("store reads = %d; want 1 (the expiry is checked on the cached record)", store.reads)
	}
}

func TestCheckModel(t *testing.T) {
	ctx := WithPrincipal(context.Background(), Principal{Account: "a", KeyID: "key_1", Models: []string{"synthetic/*"}})
	if err := CheckModel(ctx, "model", "synthetic/chat"); err != nil {
		t.Errorf("CheckModel(allowed) = %v; want nil", err)
	}
	err := CheckModel(ctx, "models[1]", "openai/gpt-4o")
	if e := apierr.As(err); !errors.Is(err, ErrModelNotAllowed) || e == nil || e.Kind != apierr.PermissionDenied || e.Param != "models[1]" {
		t.Errorf("CheckModel(other) = %#v; want ErrModelNotAllowed for models[1]", err)
	}
	if err := CheckModel(context.Background(), "model", "anything"); err != nil {
		t.Errorf("CheckModel(no principal) = %v; want nil", err)
	}
	if KeyID(ctx) != "key_1" || KeyID(context.Background()) != "" {
		t.Errorf("KeyID = %q, %q; want key_1, empty", KeyID(ctx), KeyID(context.Background()))
	}
}
