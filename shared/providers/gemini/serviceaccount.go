package gemini

// A Google service account's OAuth2 access tokens, with the standard
// library alone (the JWT bearer grant of RFC 7523, as Google documents it
// for server-to-server applications,
// https://developers.google.com/identity/protocols/oauth2/service-account#httprest):
// a JWT {iss: client_email, scope, aud: token_uri, iat, exp} signed RS256
// with the key's private_key is POSTed to token_uri as
// grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<jwt>;
// the answer is {"access_token", "expires_in", "token_type": "Bearer"}.
// golang.org/x/oauth2/google does the same in more code and a dependency;
// this is the one grant Vertex AI needs.

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/mediafetch"
)

// CloudPlatformScope is the OAuth2 scope Vertex AI (and Cloud Storage)
// accept.
const CloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

const (
	// tokenLifetime is how long an assertion asks the token to live: Google
	// refuses more than an hour.
	tokenLifetime = time.Hour
	// clockSkew backdates an assertion's iat, as Google's own libraries do:
	// a host clock slightly ahead of Google's would see its assertion
	// refused as issued in the future.
	clockSkew = 10 * time.Second
	// refreshBefore is how long before its expiry a token is replaced, so
	// that a call never starts with a token about to die.
	refreshBefore = 5 * time.Minute
	// tokenTimeout bounds one token request: it runs on behalf of every
	// caller waiting for it, so no one caller's context may cut it short.
	tokenTimeout = 30 * time.Second
)

// serviceAccount is the part of a service-account key file (JSON, from
// "gcloud iam service-accounts keys create") that signs token requests.
type serviceAccount struct {
	email     string
	tokenURI  string
	projectID string
	keyID     string
	key       *rsa.PrivateKey
}

// parseServiceAccount reads a service-account key file. The error never
// quotes the file (it holds the private key).
func parseServiceAccount(b []byte) (*serviceAccount, error) {
	var f struct {
		Type         string `json:"type"`
		ProjectID    string `json:"project_id"`
		PrivateKeyID string `json:"private_key_id"`
		PrivateKey   string `json:"private_key"`
		ClientEmail  string `json:"client_email"`
		TokenURI     string `json:"token_uri"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errors.New("not a service-account key: the JSON does not parse")
	}
	if f.Type != "service_account" {
		return nil, fmt.Errorf("not a service-account key: type %q, want \"service_account\"", f.Type)
	}
	if f.ClientEmail == "" || f.PrivateKey == "" || f.TokenURI == "" {
		return nil, errors.New("service-account key: client_email, private_key and token_uri are required")
	}
	u, err := url.Parse(f.TokenURI)
	if err != nil || u.Host == "" || !(u.Scheme == "https" || u.Scheme == "http" && loopback(u.Hostname())) {
		return nil, errors.New("service-account key: token_uri must be an https URL (http only to a loopback test server)")
	}
	block, _ := pem.Decode([]byte(f.PrivateKey))
	if block == nil {
		return nil, errors.New("service-account key: private_key is not PEM")
	}
	var key *rsa.PrivateKey
	switch block.Type {
	case "PRIVATE KEY":
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, errors.New("service-account key: private_key is not a PKCS #8 key")
		}
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("service-account key: private_key is not an RSA key")
		}
		key = rk
	case "RSA PRIVATE KEY":
		if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
			return nil, errors.New("service-account key: private_key is not a PKCS #1 key")
		}
	default:
		return nil, fmt.Errorf("service-account key: private_key is a %q block; want PRIVATE KEY", block.Type)
	}
	return &serviceAccount{email: f.ClientEmail, tokenURI: f.TokenURI, projectID: f.ProjectID, keyID: f.PrivateKeyID, key: key}, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// assertion returns the signed JWT that asks token_uri for a token of
// scope, issued at now.
func (sa *serviceAccount) assertion(scope string, now time.Time) (string, error) {
	iat := now.Add(-clockSkew)
	header := map[string]string{"alg": "RS256", "typ": "JWT"}
	if sa.keyID != "" {
		header["kid"] = sa.keyID
	}
	h, _ := json.Marshal(header)
	c, _ := json.Marshal(map[string]any{
		"iss": sa.email, "scope": scope, "aud": sa.tokenURI,
		"iat": iat.Unix(), "exp": iat.Add(tokenLifetime).Unix(),
	})
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, sa.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign token assertion: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// tokenSource hands out the service account's access token, fetching one
// when there is none or it is within refreshBefore of its expiry, and
// keeping it until then. Safe for concurrent use: of callers that find
// the token stale at the same time, one fetches and the others wait for
// that fetch (or their own context).
type tokenSource struct {
	sa     *serviceAccount
	scope  string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	token     string
	refreshAt time.Time   // when token is replaced: before its expiry
	inflight  *tokenFetch // the fetch running, if any
}

// tokenFetch is one token request and, once done is closed, its outcome.
type tokenFetch struct {
	done  chan struct{}
	token string
	err   error
}

func newTokenSource(sa *serviceAccount, scope string, client *http.Client) *tokenSource {
	return &tokenSource{sa: sa, scope: scope, client: client, now: time.Now}
}

// Token returns a valid access token. Errors are classified as the
// worker expects (mediafetch): a refused key is a *jobs.ProviderError, an
// unreachable or failing token endpoint a *jobs.TransientError. No error
// carries the key, the assertion or a token.
func (ts *tokenSource) Token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	if ts.token != "" && ts.now().Before(ts.refreshAt) {
		t := ts.token
		ts.mu.Unlock()
		return t, nil
	}
	f := ts.inflight
	if f == nil {
		// The first caller starts the fetch; it runs for all of them, on its
		// own goroutine, so that no caller waits past its own context.
		f = &tokenFetch{done: make(chan struct{})}
		ts.inflight = f
		go func() {
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tokenTimeout)
			token, refreshAt, err := ts.fetch(fctx)
			cancel()
			ts.mu.Lock()
			if err == nil {
				ts.token, ts.refreshAt = token, refreshAt
			}
			ts.inflight = nil
			f.token, f.err = token, err
			ts.mu.Unlock()
			close(f.done)
		}()
	}
	ts.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", fmt.Errorf("vertex token: %w", ctx.Err())
	}
}

// Invalidate drops the token if it is still tok (the API refused it), so
// that the next call fetches another.
func (ts *tokenSource) Invalidate(tok string) {
	ts.mu.Lock()
	if ts.token == tok {
		ts.token, ts.refreshAt = "", time.Time{}
	}
	ts.mu.Unlock()
}

// fetch asks the token endpoint for a token, and returns it with the time
// to replace it: refreshBefore its expiry, or half-way through a short
// life. The life counts from the request, not the answer: never longer
// than the token really lives.
func (ts *tokenSource) fetch(ctx context.Context) (string, time.Time, error) {
	now := ts.now()
	jwt, err := ts.sa.assertion(ts.scope, now)
	if err != nil {
		return "", time.Time{}, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The Vertex AI service-account key cannot sign.", Err: err}
	}
	form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {jwt}}
	req, err := http.NewRequest(http.MethodPost, ts.sa.tokenURI, strings.NewReader(form.Encode()))
	if err != nil {
		return "", time.Time{}, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The service-account key's token_uri is not usable.", Err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := mediafetch.Do(ctx, ts.client, req, "vertex token", oauthError)
	if err != nil {
		return "", time.Time{}, err
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
	}
	if err := mediafetch.DecodeJSON(resp, "vertex token", &tok); err != nil {
		return "", time.Time{}, err
	}
	if tok.AccessToken == "" || tok.ExpiresIn <= 0 || !strings.EqualFold(tok.TokenType, "Bearer") {
		return "", time.Time{}, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "Google's token endpoint answered no usable bearer token."}
	}
	life := time.Duration(tok.ExpiresIn) * time.Second
	return tok.AccessToken, now.Add(life - min(refreshBefore, life/2)), nil
}

// oauthError reads an OAuth2 error answer ({"error": "invalid_grant",
// "error_description": "..."}): a refused key is permanent, and the
// operator's account (jobs.Refusal.Account), not the request's fault.
func oauthError(status int, body []byte) jobs.Refusal {
	var e struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == "" {
		return jobs.Refusal{}
	}
	msg := e.Error
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return jobs.Refusal{Message: "Google refused the Vertex AI service-account key (" + msg + ").", Account: !jobs.Retryable(status)}
}

// loadServiceAccount reads credentials: the key file's JSON itself, or the
// path of the file. Errors name the path, never the content.
func loadServiceAccount(credentials string, readFile func(string) ([]byte, error)) (*serviceAccount, error) {
	c := strings.TrimSpace(credentials)
	if c == "" {
		return nil, errors.New("no service-account key")
	}
	b := []byte(c)
	if !bytes.HasPrefix(b, []byte("{")) {
		var err error
		if b, err = readFile(c); err != nil {
			// Not the path itself: a mangled key's JSON would land here.
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("the value is neither a key's JSON nor a readable key file: %w", err)
		}
	}
	return parseServiceAccount(b)
}
