package vertextest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestTokenEndpointChecks: the fake refuses every assertion Google would:
// a bad signature, another issuer, scope or audience, an expired or
// too-long-lived one.
func TestTokenEndpointChecks(t *testing.T) {
	s := NewServer(t)
	now := time.Now()
	good := map[string]any{"iss": s.Email, "scope": Scope, "aud": s.URL + "/token", "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
	tests := []struct {
		name   string
		edit   func(c map[string]any)
		alg    string
		stolen bool // signed with another key
		want   string
	}{
		{"good", func(map[string]any) {}, "RS256", false, ""},
		{"another scope too", func(c map[string]any) { c["scope"] = "openid " + Scope }, "RS256", false, ""},
		{"another key", func(map[string]any) {}, "RS256", true, "Invalid JWT Signature."},
		{"alg", func(map[string]any) {}, "HS256", false, "alg HS256"},
		{"iss", func(c map[string]any) { c["iss"] = "x@y.iam.gserviceaccount.com" }, "RS256", false, "iss"},
		{"scope", func(c map[string]any) { c["scope"] = "https://www.googleapis.com/auth/devstorage.read_only" }, "RS256", false, "scope"},
		{"aud", func(c map[string]any) { c["aud"] = "https://oauth2.googleapis.com/token" }, "RS256", false, "aud"},
		{"expired", func(c map[string]any) { c["exp"] = now.Add(-time.Second).Unix() }, "RS256", false, "expired"},
		{"two hours", func(c map[string]any) { c["exp"] = now.Add(2 * time.Hour).Unix() }, "RS256", false, "60 minutes"},
		{"from the future", func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() }, "RS256", false, "future"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := map[string]any{}
			for k, v := range good {
				claims[k] = v
			}
			tt.edit(claims)
			key := s.key
			if tt.stolen {
				key, _ = rsa.GenerateKey(rand.Reader, 1024)
			}
			h, _ := json.Marshal(map[string]string{"alg": tt.alg, "typ": "JWT"})
			c, _ := json.Marshal(claims)
			enc := base64.RawURLEncoding
			signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
			sum := sha256.Sum256([]byte(signed))
			sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
			resp, err := http.PostForm(s.URL+"/token", url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {signed + "." + enc.EncodeToString(sig)}})
			if err != nil {
				t.Fatal(err)
			}
			var body map[string]any
			json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if tt.want == "" {
				if resp.StatusCode != 200 || body["token_type"] != "Bearer" || body["access_token"] == nil {
					t.Errorf("token = %d %v; want a bearer token", resp.StatusCode, body)
				}
				return
			}
			if d, _ := body["error_description"].(string); resp.StatusCode != 400 || body["error"] != "invalid_grant" || !strings.Contains(d, tt.want) {
				t.Errorf("token = %d %v; want 400 invalid_grant mentioning %q", resp.StatusCode, body, tt.want)
			}
		})
	}
}
