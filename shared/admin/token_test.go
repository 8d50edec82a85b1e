package admin

import (
	"context"
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
	secret := string(v.Secret("session"))
	tok = "gwop_two"
	if !v.Verify("gwop_one") || v.Verify("gwop_two") {
		t.Fatal("the token changed before the TTL")
	}
	v.loaded = time.Now().Add(-2 * time.Hour) // past the TTL
	if v.Verify("gwop_one") || !v.Verify("gwop_two") {
		t.Fatal("the rotated token did not take over after the TTL")
	}
	if string(v.Secret("session")) == secret {
		t.Error("session secret unchanged by rotation: old sessions would survive")
	}
	fail = true
	v.loaded = time.Now().Add(-2 * time.Hour)
	if !v.Verify("gwop_two") || len(errs) != 1 {
		t.Errorf("a failed reload: Verify(current) false or errors %v; want the last token kept and one error", errs)
	}
	if _, err := LoadingVerifier(context.Background(), func(context.Context) (string, error) { return "", nil }, time.Hour, nil); err == nil {
		t.Error("an empty token was accepted at start")
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
