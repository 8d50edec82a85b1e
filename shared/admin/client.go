package admin

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// Client runs operator commands through a server's admin API
// (httpapi.AdminAPI, /admin/v1/): over the unix socket in the data
// directory of a running genway serve (Dial), or over HTTPS to a
// deployment with the operator token (Remote).
type Client struct {
	hc    *http.Client
	base  string // up to, not including, /admin/v1
	token string
}

var _ Operator = (*Client)(nil)

// Dial returns a Client for the socket at path, after checking that a
// server answers there.
func Dial(ctx context.Context, path string) (*Client, error) {
	c := &Client{base: "http://admin", hc: &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}}
	if _, err := c.Audit(ctx, "", 1); err != nil && !isRemote(err) {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	return c, nil
}

// Remote returns a Client for the deployment at baseURL (as clients use
// it: https://host[/stage], with or without /v1) with the operator token.
func Remote(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("GENWAY_URL %q is not an http(s) URL", baseURL)
	}
	if token == "" {
		return nil, errors.New("GENWAY_ADMIN_TOKEN is needed with GENWAY_URL")
	}
	base := strings.TrimSuffix(u.String(), "/v1")
	return &Client{base: base, token: token, hc: &http.Client{Timeout: 60 * time.Second}}, nil
}

// RemoteError is an error the server answered with: its status and the
// OpenAI error envelope's fields.
type RemoteError struct {
	Status  int
	Code    string
	Message string
	Param   string
}

func (e *RemoteError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("admin API: HTTP %d", e.Status)
	}
	return e.Message
}

func isRemote(err error) bool {
	var re *RemoteError
	return errors.As(err, &re)
}

// call sends one request and decodes the answer into out. Errors the
// domain knows come back as themselves (key not found, account not
// found), others as *RemoteError.
func (c *Client) call(ctx context.Context, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	u := c.base + "/admin/v1" + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var env struct {
			Error struct {
				Message string  `json:"message"`
				Code    *string `json:"code"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&env)
		re := &RemoteError{Status: resp.StatusCode, Message: env.Error.Message}
		if env.Error.Code != nil {
			re.Code = *env.Error.Code
		}
		if env.Error.Param != nil {
			re.Param = *env.Error.Param
		}
		switch re.Code {
		case "key_not_found":
			return auth.ErrKeyNotFound
		case credits.ErrAccountNotFound.Code:
			return credits.ErrAccountNotFound
		}
		if resp.StatusCode == http.StatusBadRequest {
			return &apierr.Error{Kind: apierr.Invalid, Code: re.Code, Param: re.Param, Message: re.Message}
		}
		return re
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// list reads every page of a list route into out.
func list[T any](ctx context.Context, c *Client, path string, query url.Values, id func(T) string) ([]T, error) {
	var all []T
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for range 10000 { // bounded: 100 per page
		var page struct {
			Data    []T  `json:"data"`
			HasMore bool `json:"has_more"`
		}
		if err := c.call(ctx, http.MethodGet, path, q, nil, &page); err != nil {
			return nil, err
		}
		all = append(all, page.Data...)
		if !page.HasMore || len(page.Data) == 0 {
			return all, nil
		}
		q.Set("after", id(page.Data[len(page.Data)-1]))
	}
	return all, errors.New("admin API: too many pages")
}

// createdKey is a key as the admin API answers it (the list, PATCH,
// revoke), with the plaintext Key for POST /admin/v1/keys.
type createdKey struct {
	ID       string `json:"id"`
	Prefix   string `json:"prefix"`
	Account  string `json:"account"`
	Created  int64  `json:"created"`
	Revoked  int64  `json:"revoked"`
	LastUsed int64  `json:"last_used"`
	auth.Controls
	Spent  credits.Amount `json:"spent"`
	Held   credits.Amount `json:"held"`
	Period string         `json:"period"`
	Key    string         `json:"key"`
}

func (k createdKey) record() auth.Record {
	return auth.Record{ID: k.ID, Prefix: k.Prefix, Account: k.Account, Created: k.Created, Revoked: k.Revoked, LastUsed: k.LastUsed,
		Controls: k.Controls, Spent: k.Spent, Held: k.Held, Period: k.Period}
}

// CreateKey implements Operator.
func (c *Client) CreateKey(ctx context.Context, account string, amount credits.Amount, ctl auth.Controls) (auth.Key, auth.Record, error) {
	var out createdKey
	err := c.call(ctx, http.MethodPost, "/keys", nil, struct {
		Account string         `json:"account"`
		Credits credits.Amount `json:"credits"`
		auth.Controls
	}{account, amount, ctl}, &out)
	return auth.Key(out.Key), out.record(), err
}

// UpdateKey implements Operator.
func (c *Client) UpdateKey(ctx context.Context, idOrPrefix string, ch auth.Change) (auth.Record, error) {
	var out createdKey
	err := c.call(ctx, http.MethodPatch, "/keys/"+url.PathEscape(idOrPrefix), nil, ch, &out)
	return out.record(), err
}

// ImportKey is not offered remotely: a chosen key is for the data
// directory's owner (GENWAY_DEV_KEY).
func (c *Client) ImportKey(ctx context.Context, account string, key auth.Key) (auth.Record, error) {
	return auth.Record{}, errors.New("importing a chosen key is done by genway serve itself (GENWAY_DEV_KEY)")
}

// Keys implements Operator.
func (c *Client) Keys(ctx context.Context, account string) ([]auth.Record, error) {
	q := url.Values{}
	if account != "" {
		q.Set("account", account)
	}
	ks, err := list(ctx, c, "/keys", q, func(k createdKey) string { return k.ID })
	out := make([]auth.Record, len(ks))
	for i, k := range ks {
		out[i] = k.record()
	}
	auth.SortRecords(out)
	return out, err
}

// RevokeKey implements Operator.
func (c *Client) RevokeKey(ctx context.Context, idOrPrefix string) (auth.Record, error) {
	var out createdKey
	err := c.call(ctx, http.MethodPost, "/keys/"+url.PathEscape(idOrPrefix)+"/revoke", nil, nil, &out)
	return out.record(), err
}

// Grant implements Operator.
func (c *Client) Grant(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, http.MethodPost, "/accounts/"+url.PathEscape(account)+"/grants", nil, map[string]any{"amount": amount, "note": note}, &out)
	return out, err
}

// CreateAccount implements Operator.
func (c *Client) CreateAccount(ctx context.Context, account string, amount credits.Amount, note string) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, http.MethodPost, "/accounts", nil, map[string]any{"id": account, "credits": amount, "note": note}, &out)
	return out, err
}

// Account implements Operator.
func (c *Client) Account(ctx context.Context, account string) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, http.MethodGet, "/accounts/"+url.PathEscape(account), nil, nil, &out)
	return out, err
}

// Accounts implements Operator.
func (c *Client) Accounts(ctx context.Context) ([]AccountInfo, error) {
	return list(ctx, c, "/accounts", nil, func(a AccountInfo) string { return a.ID })
}

// Ledger implements Operator.
func (c *Client) Ledger(ctx context.Context, account string) ([]credits.Entry, error) {
	return list(ctx, c, "/accounts/"+url.PathEscape(account)+"/ledger", nil, func(e credits.Entry) string { return e.ID })
}

// SetRateLimit implements Operator.
func (c *Client) SetRateLimit(ctx context.Context, account string, rpm int) (credits.Account, error) {
	var out credits.Account
	err := c.call(ctx, http.MethodPost, "/accounts/"+url.PathEscape(account)+"/rate_limit", nil, map[string]any{"rpm": rpm}, &out)
	return out, err
}

// Usage implements Operator.
func (c *Client) Usage(ctx context.Context, account, from, to string) ([]DayUsage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"account": account, "from": from, "to": to} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Data []DayUsage `json:"data"`
	}
	err := c.call(ctx, http.MethodGet, "/usage", q, nil, &out)
	for i := range out.Data {
		if out.Data[i].Kind == "" { // a server from before job usage lists chat only
			out.Data[i].Kind = KindChat
		}
	}
	return out.Data, err
}

var _ ReservationLister = (*Client)(nil)

// Reservations implements ReservationLister.
func (c *Client) Reservations(ctx context.Context, account string) ([]credits.Entry, error) {
	q := url.Values{}
	if account != "" {
		q.Set("account", account)
	}
	out, err := list(ctx, c, "/reservations", q, func(e credits.Entry) string { return e.ID })
	slices.SortStableFunc(out, func(a, b credits.Entry) int { // pages come by id
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.Account, b.Account), cmp.Compare(a.ID, b.ID))
	})
	return out, err
}

// Requests implements Operator: one page of GET /admin/v1/records.
func (c *Client) Requests(ctx context.Context, q credits.RecordQuery) ([]credits.Record, string, error) {
	v := url.Values{}
	for k, x := range map[string]string{"account": q.Account, "key": q.Key, "model": q.Model, "status": q.Status, "kind": q.Kind, "after": q.Cursor} {
		if x != "" {
			v.Set(k, x)
		}
	}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	var out struct {
		Data       []credits.Record `json:"data"`
		NextCursor *string          `json:"next_cursor"`
	}
	if err := c.call(ctx, http.MethodGet, "/records", v, nil, &out); err != nil {
		return nil, "", err
	}
	next := ""
	if out.NextCursor != nil {
		next = *out.NextCursor
	}
	return out.Data, next, nil
}

// Request implements Operator: GET /admin/v1/records/{id}.
func (c *Client) Request(ctx context.Context, id string) (credits.Record, error) {
	var out credits.Record
	err := c.call(ctx, http.MethodGet, "/records/"+url.PathEscape(id), nil, nil, &out)
	var re *RemoteError
	if errors.As(err, &re) && re.Code == ErrRecordNotFound.Code {
		return credits.Record{}, ErrRecordNotFound
	}
	return out, err
}

// Audit implements Operator.
func (c *Client) Audit(ctx context.Context, before string, limit int) ([]AuditEntry, error) {
	q := url.Values{"limit": {strconv.Itoa(min(max(limit, 1), 100))}}
	if before != "" {
		q.Set("after", before)
	}
	var out struct {
		Data []AuditEntry `json:"data"`
	}
	err := c.call(ctx, http.MethodGet, "/audit", q, nil, &out)
	return out.Data, err
}

// Reconcile implements Operator.
func (c *Client) Reconcile(ctx context.Context, days int) (jobs.ReconcileResult, error) {
	var out jobs.ReconcileResult
	err := c.call(ctx, http.MethodPost, "/credits/reconcile", nil, map[string]any{"days": days}, &out)
	return out, err
}
