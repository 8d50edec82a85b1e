package gemini

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/vertextest"
)

func testAccount(t *testing.T, credentials string) *serviceAccount {
	t.Helper()
	sa, err := parseServiceAccount([]byte(credentials))
	if err != nil {
		t.Fatal(err)
	}
	return sa
}

// TestAssertion checks the signed JWT itself: RS256 over header.claims
// with the key (verified with its public key), and the claims Google's
// token endpoint requires.
func TestAssertion(t *testing.T) {
	fake := vertextest.NewServer(t)
	sa := testAccount(t, fake.Credentials())
	now := time.Unix(1_800_000_000, 0)
	jwt, err := sa.assertion(CloudPlatformScope, now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("assertion has %d parts; want 3", len(parts))
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&sa.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		t.Errorf("signature does not verify with the key's public key: %v", err)
	}
	var header, claims map[string]any
	h, _ := base64.RawURLEncoding.DecodeString(parts[0])
	c, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if json.Unmarshal(h, &header) != nil || json.Unmarshal(c, &claims) != nil {
		t.Fatalf("header %s, claims %s: not JSON", h, c)
	}
	wantHeader := map[string]any{"alg": "RS256", "typ": "JWT", "kid": "0123456789abcdef"}
	for k, v := range wantHeader {
		if header[k] != v {
			t.Errorf("header[%s] = %v; want %v", k, header[k], v)
		}
	}
	iat := float64(now.Add(-10 * time.Second).Unix())
	wantClaims := map[string]any{"iss": fake.Email, "scope": CloudPlatformScope, "aud": fake.URL + "/token", "iat": iat, "exp": iat + 3600}
	if len(claims) != len(wantClaims) {
		t.Errorf("claims = %v; want exactly %v", claims, wantClaims)
	}
	for k, v := range wantClaims {
		if claims[k] != v {
			t.Errorf("claims[%s] = %v; want %v", k, claims[k], v)
		}
	}
}

// TestTokenRefused: the token endpoint refuses an assertion of another
// account or signed with another key: a permanent failure that says why.
func TestTokenRefused(t *testing.T) {
	fake := vertextest.NewServer(t)
	tests := []struct {
		name, field string
		value       any
		want        string
	}{
		{"another account", "client_email", "someone@else.iam.gserviceaccount.com", "Invalid JWT: iss"},
		{"another key", "private_key", vertextest.StrangerKey(t), "Invalid JWT Signature."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sa := testAccount(t, fake.CredentialsWith(func(f map[string]any) { f[tt.field] = tt.value }))
			ts := newTokenSource(sa, CloudPlatformScope, http.DefaultClient)
			_, err := ts.Token(context.Background())
			var pe *jobs.ProviderError
			if !errors.As(err, &pe) || !strings.Contains(pe.Message, "invalid_grant: "+tt.want) {
				t.Fatalf("Token = %v; want a ProviderError with invalid_grant: %s", err, tt.want)
			}
		})
	}
}

// TestTokenCache: concurrent callers share one token request; the token is
// kept until shortly before its expiry, then replaced.
func TestTokenCache(t *testing.T) {
	fake := vertextest.NewServer(t)
	fake.TokenLife = 10 * time.Minute
	ts := newTokenSource(testAccount(t, fake.Credentials()), CloudPlatformScope, http.DefaultClient)
	now := time.Now().Add(-20 * time.Minute) // the clock advances below: assertions stay in the past
	var mu sync.Mutex
	ts.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	var wg sync.WaitGroup
	got := make([]string, 20)
	errs := make([]error, 20)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], errs[i] = ts.Token(context.Background()) }()
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil || got[i] != "ya29.fake-1" {
			t.Fatalf("caller %d: Token = %q, %v; want ya29.fake-1", i, got[i], errs[i])
		}
	}
	if _, tokens, _ := fake.Counts(); tokens != 1 {
		t.Errorf("%d token requests for 20 concurrent callers; want 1", tokens)
	}
	steps := []struct {
		after time.Duration
		want  string
	}{
		{4 * time.Minute, "ya29.fake-1"},             // 6 minutes left: kept
		{1*time.Minute + time.Second, "ya29.fake-2"}, // under 5 left: replaced
		{4 * time.Minute, "ya29.fake-2"},
	}
	for _, s := range steps {
		advance(s.after)
		if tok, err := ts.Token(context.Background()); err != nil || tok != s.want {
			t.Fatalf("after %v more: Token = %q, %v; want %s", s.after, tok, err, s.want)
		}
	}
}

// TestTokenTransient: a token endpoint that fails or cannot be reached is
// worth another try, and a caller's own context ends its wait, the first
// caller's too (the fetch it started goes on for the others).
func TestTokenTransient(t *testing.T) {
	fake := vertextest.NewServer(t)
	release := make(chan struct{})
	fake.Intercept = func(w http.ResponseWriter, r *http.Request) bool {
		<-release
		w.WriteHeader(503)
		return true
	}
	ts := newTokenSource(testAccount(t, fake.Credentials()), CloudPlatformScope, http.DefaultClient)
	first, cancel := context.WithCancel(context.Background())
	firstErr := make(chan error, 1)
	go func() { _, err := ts.Token(first); firstErr <- err }()
	for fake.Calls() == 0 { // bounded by the test's timeout
		time.Sleep(time.Millisecond)
	}
	waiter := make(chan error, 1)
	go func() { _, err := ts.Token(context.Background()); waiter <- err }()
	cancel()
	if err := <-firstErr; !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled first caller's Token = %v; want context.Canceled while the fetch hangs", err)
	}
	close(release)
	var te *jobs.TransientError
	if err := <-waiter; !errors.As(err, &te) {
		t.Errorf("Token after a 503 = %v; want a TransientError", err)
	}
}
