package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestVerifier(t *testing.T) {
	v := NewVerifier("gwop_abc")
	for _, tc := range []struct {
		tok  string
		want bool
	}{{"gwop_abc", true}, {"gwop_abd", false}, {"", false}, {"sk_live_gwop_abc", false}, {"gwop_abc ", false}} {
		if got := v.Verify(tc.tok); got != tc.want {
			t.Errorf("Verify(%q) = %v; want %v", tc.tok, got, tc.want)
		}
	}
	var nilV *Verifier
	if nilV.Verify("x") {
		t.Error("a nil Verifier verifies")
	}
}

func TestLoadingVerifierRotates(t *testing.T) {
	tok, fail := "gwop_one", false
	load := func(context.Context) (string, error) {
		if fail {
			return "", errors.New("ssm down")
		}
		return tok, nil
	}
	var errs []error
	v, err := LoadingVerifier(context.Background(), load, time.Hour, func(err error) { errs = append(errs, err) })
	if err != nil {
		t.Fatal(err)
	}
	keys, err := NewSessionKeys(v, []byte(strings.Repeat("s", MinSessionSecret)))
	if err != nil {
		t.Fatal(err)
	}
	key := string(keys.Key("session"))
	tok = "gwop_two"
	if !v.Verify("gwop_one") || v.Verify("gwop_two") {
		t.Fatal("the token changed before the TTL")
	}
	v.r.loaded = time.Now().Add(-2 * time.Hour) // past the TTL
	if v.Verify("gwop_one") || !v.Verify("gwop_two") {
		t.Fatal("the rotated token did not take over after the TTL")
	}
	if string(keys.Key("session")) == key {
		t.Error("session key unchanged by the token's rotation: old sessions would survive")
	}
	fail = true
	v.r.loaded = time.Now().Add(-2 * time.Hour)
	if !v.Verify("gwop_two") || len(errs) != 1 {
		t.Errorf("a failed reload: Verify(current) false or errors %v; want the last token kept and one error", errs)
	}
	if _, err := LoadingVerifier(context.Background(), func(context.Context) (string, error) { return "", nil }, time.Hour, nil); err == nil {
		t.Error("an empty token was accepted at start")
	}
}

// TestSessionKeys: the keys depend on the secret, the token and the
// purpose; they are not what the token's hash alone gives; a short secret
// is refused; a loaded secret is read again after its TTL, a failed read
// keeping the last one.
func TestSessionKeys(t *testing.T) {
	secretA, secretB := strings.Repeat("a", MinSessionSecret), strings.Repeat("b", MinSessionSecret)
	v := NewVerifier("gwop_one")
	ka, _ := NewSessionKeys(v, []byte(secretA))
	kb, _ := NewSessionKeys(v, []byte(secretB))
	other, _ := NewSessionKeys(NewVerifier("gwop_two"), []byte(secretA))
	hash := sha256.Sum256([]byte("gwop_one"))
	fromHash := sha256.Sum256(append([]byte("genway console session\x00"), hash[:]...)) // the old derivation
	seen := map[string]string{}
	for name, k := range map[string][]byte{"a session": ka.Key("session"), "a csrf": ka.Key("csrf"), "b session": kb.Key("session"),
		"other token": other.Key("session"), "the hash's": fromHash[:]} {
		if prev, ok := seen[string(k)]; ok {
			t.Errorf("keys %s and %s are the same", prev, name)
		}
		seen[string(k)] = name
	}
	if string(ka.Key("session")) != string(ka.Key("session")) {
		t.Error("Key is not stable")
	}
	if _, err := NewSessionKeys(v, []byte("short")); err == nil {
		t.Error("a 5-byte secret was taken")
	}
	secret, fail := secretA, false
	var errs []error
	lk, err := LoadingSessionKeys(context.Background(), v, func(context.Context) (string, error) {
		if fail {
			return "", errors.New("ssm down")
		}
		return secret, nil
	}, time.Hour, func(err error) { errs = append(errs, err) })
	if err != nil || string(lk.Key("session")) != string(ka.Key("session")) {
		t.Fatalf("LoadingSessionKeys = %v; want the keys of its secret", err)
	}
	secret = secretB
	lk.secret.loaded = time.Now().Add(-2 * time.Hour)
	if string(lk.Key("session")) != string(kb.Key("session")) {
		t.Error("the rotated secret did not take over after the TTL")
	}
	fail = true
	lk.secret.loaded = time.Now().Add(-2 * time.Hour)
	if string(lk.Key("session")) != string(kb.Key("session")) || len(errs) != 1 {
		t.Errorf("a failed reload: errors %v; want the last secret kept and one error", errs)
	}
	if _, err := LoadingSessionKeys(context.Background(), v, func(context.Context) (string, error) { return "short", nil }, time.Hour, nil); err == nil {
		t.Error("a short secret was accepted at start")
	}
}

func TestLocalToken(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "admin-token.sha256")
	v, made, err := LocalToken("", file)
	if err != nil || !strings.HasPrefix(made, TokenPrefix) || !v.Verify(made) {
		t.Fatalf("first start: %v, %q", err, made)
	}
	b, _ := os.ReadFile(file)
	if strings.Contains(string(b), made) {
		t.Error("the token itself is stored")
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o600 {
		t.Errorf("hash file mode %v; want 0600", fi.Mode().Perm())
	}
	v2, made2, err := LocalToken("", file)
	if err != nil || made2 != "" || !v2.Verify(made) {
		t.Errorf("second start: %v, made %q; want the same token, not a new one", err, made2)
	}
	v3, _, _ := LocalToken("gwop_env", file)
	if !v3.Verify("gwop_env") || v3.Verify(made) {
		t.Error("GENWAY_ADMIN_TOKEN does not take precedence")
	}
}
