package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
)

// Handler serves op over HTTP for Client. It is meant for a unix socket
// that only the data directory's owner can reach (mode 0600); it has no
// authentication of its own.
func Handler(op Operator, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern string, fn func(r *http.Request) (any, error)) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			v, err := fn(r)
			w.Header().Set("Content-Type", "application/json")
			if err != nil {
				status, code := http.StatusInternalServerError, "internal_error"
				switch {
				case errors.Is(err, auth.ErrKeyNotFound):
					status, code = http.StatusNotFound, "key_not_found"
				case apierr.As(err) != nil:
					e := apierr.As(err)
					status, code = http.StatusBadRequest, e.Code
					if e.Kind == apierr.NotFound {
						status = http.StatusNotFound
					}
				}
				log.Info("admin command failed", "path", r.URL.Path, "err", err)
				w.WriteHeader(status)
				json.NewEncoder(w).Encode(wireError{Code: code, Message: err.Error()})
				return
			}
			json.NewEncoder(w).Encode(v)
		})
	}
	q := func(r *http.Request, k string) string { return r.URL.Query().Get(k) }
	handle("POST /keys", func(r *http.Request) (any, error) {
		var in struct {
			Account string `json:"account"`
			Credits int64  `json:"credits"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, apierr.Invalidf("", "invalid_json", "bad request: %v", err)
		}
		key, rec, err := op.CreateKey(r.Context(), in.Account, in.Credits)
		return createdKey{Key: string(key), Record: rec}, err
	})
	handle("POST /keys/import", func(r *http.Request) (any, error) {
		var in struct {
			Account string `json:"account"`
			Key     string `json:"key"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			return nil, apierr.Invalidf("", "invalid_json", "bad request: %v", err)
		}
		return op.ImportKey(r.Context(), in.Account, auth.Key(in.Key))
	})
	handle("GET /keys", func(r *http.Request) (any, error) { return op.Keys(r.Context(), q(r, "account")) })
	handle("POST /keys/revoke", func(r *http.Request) (any, error) { return op.RevokeKey(r.Context(), q(r, "id")) })
	handle("POST /credits/grant", func(r *http.Request) (any, error) {
		n, err := strconv.ParseInt(q(r, "amount"), 10, 64)
		if err != nil {
			return nil, apierr.Invalidf("amount", "invalid_value", "amount must be an integer")
		}
		return op.Grant(r.Context(), q(r, "account"), n)
	})
	handle("GET /credits", func(r *http.Request) (any, error) { return op.Account(r.Context(), q(r, "account")) })
	handle("GET /ledger", func(r *http.Request) (any, error) { return op.Ledger(r.Context(), q(r, "account")) })
	handle("GET /usage", func(r *http.Request) (any, error) {
		return op.Usage(r.Context(), q(r, "account"), q(r, "from"), q(r, "to"))
	})
	handle("POST /ratelimit", func(r *http.Request) (any, error) {
		n, err := strconv.Atoi(q(r, "rpm"))
		if err != nil {
			return nil, apierr.Invalidf("rpm", "invalid_value", "rpm must be an integer")
		}
		return op.SetRateLimit(r.Context(), q(r, "account"), n)
	})
	return mux
}

type wireError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type createdKey struct {
	Key    string      `json:"key"`
	Record auth.Record `json:"record"`
}

// Client runs operator commands on a server's Handler over a unix socket.
type Client struct {
	hc *http.Client
}

var _ Operator = (*Client)(nil)

// Dial returns a Client for the socket at path, after checking that a
// server answers there.
func Dial(ctx context.Context, path string) (*Client, error) {
	c := &Client{hc: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}
	if _, err := c.Keys(ctx, "\x00probe"); err != nil && !isRemote(err) {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	return c, nil
}

// remoteError is an error the server answered with.
type remoteError struct {
	status int
	wireError
}

func (e *remoteError) Error() string { return e.Message }

func isRemote(err error) bool {
	var re *remoteError
	return errors.As(err, &re)
}

func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := "http://admin" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var we wireError
		if err := json.NewDecoder(resp.Body).Decode(&we); err != nil {
			return fmt.Errorf("admin: status %d", resp.StatusCode)
		}
		switch we.Code {
		case "key_not_found":
			return auth.ErrKeyNotFound
		case credits.ErrAccountNotFound.Code:
			return credits.ErrAccountNotFound
		}
		return &remoteError{status: resp.StatusCode, wireError: we}
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// CreateKey implements Operator.
func (c *Client) CreateKey(ctx context.Context, account string, amount int64) (auth.Key, auth.Record, error) {
	var out createdKey
	err := c.call(ctx, "POST", "/keys", nil, map[string]any{"account": account, "credits": amount}, &out)
	return auth.Key(out.Key), out.Record, err
}

// ImportKey implements Operator.
func (c *Client) ImportKey(ctx context.Context, account string, key auth.Key) (auth.Record, error) {
	var out auth.Record
	err := c.call(ctx, "POST", "/keys/import", nil, map[string]any{"account": account, "key": string(key)}, &out)
	return out, err
}

// Keys implements Operator.
func (c *Client) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	var out []auth.Record
	err := c.call(ctx, "GET", "/keys", url.Values{"account": {account}}, nil, &out)
	return out, err
}

// RevokeKey implements Operator.
func (c *Client) RevokeKey(ctx context.Context, idOrPrefix string) (auth.Record, error) {
	var out auth.Record
	err := c.call(ctx, "POST", "/keys/revoke", url.Values{"id": {idOrPrefix}}, nil, &out)
	return out, err
}

// Grant implements Operator.
func (c *Client) Grant(ctx context.Context, account string, amount int64) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, "POST", "/credits/grant", url.Values{"account": {account}, "amount": {strconv.FormatInt(amount, 10)}}, nil, &out)
	return out, err
}

// Account implements Operator.
func (c *Client) Account(ctx context.Context, account string) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, "GET", "/credits", url.Values{"account": {account}}, nil, &out)
	return out, err
}

// Ledger implements Operator.
func (c *Client) Ledger(ctx context.Context, account string) ([]credits.Entry, error) {
	var out []credits.Entry
	err := c.call(ctx, "GET", "/ledger", url.Values{"account": {account}}, nil, &out)
	return out, err
}

// SetRateLimit implements Operator.
func (c *Client) SetRateLimit(ctx context.Context, account string, rpm int) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, "POST", "/ratelimit", url.Values{"account": {account}, "rpm": {strconv.Itoa(rpm)}}, nil, &out)
	return out, err
}

// Usage implements Operator.
func (c *Client) Usage(ctx context.Context, account, from, to string) ([]credits.Usage, error) {
	var out []credits.Usage
	err := c.call(ctx, "GET", "/usage", url.Values{"account": {account}, "from": {from}, "to": {to}}, nil, &out)
	return out, err
}
