package httpapi

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/webhooks"
)

// AdminConfig is what the admin API serves.
type AdminConfig struct {
	Operator admin.AuditingOperator
	Catalog  *catalog.Catalog
	// Configured reports whether a catalog provider has its credentials
	// (catalog.ConfiguredFunc); nil: every provider.
	Configured func(provider string) bool
	// Verifier checks the operator token (Authorization: Bearer). nil
	// means the caller is trusted already: the unix socket in the data
	// directory, which only its owner can reach.
	Verifier *admin.Verifier
	// Jobs serves the job routes (every account's jobs); nil: none.
	Jobs *jobs.Service
	// Router is this process's router: each model's breaker and recent
	// error rate are shown with it; nil: none shown.
	Router *route.Router
	// Webhooks serves the webhook routes (account configs, deliveries);
	// nil: none.
	Webhooks *webhooks.Service
	Log      *slog.Logger
}

// adminHandler is an admin route: it returns the value to answer with
// (JSON, 200) or an error, written in one place.
type adminHandler func(r *http.Request) (any, error)

// AdminAPI serves the operator's API under /admin/v1/: accounts (list,
// create, grant, rate limit, ledger), keys (create, list, update controls
// with PATCH, revoke), models (the catalog, configured or not), usage
// (chat, jobs, images, speech), the open reservations (credits held by
// images and speech being made: ?account= for one account's), jobs and
// the audit log. Lists are
// OpenAI-style ({"object": "list", "data": [...], "has_more": ...}, with
// ?limit= and ?after=<the last id of the previous page>). Every route
// needs the operator token; an API key (sk_live_...) or any other token
// is a 401 like no token at all. Errors use the OpenAI envelope. Actions
// are audited with the actor "token" (or "cli" on the socket).
func AdminAPI(cfg AdminConfig, extra ...Route) http.Handler {
	return NewMux(cfg.Log, append(AdminRoutes(cfg), extra...)...)
}

// AdminRoutes are AdminAPI's routes, to mount beside others.
func AdminRoutes(cfg AdminConfig) []Route {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	op := cfg.Operator
	wrap := func(h adminHandler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if cfg.Verifier != nil {
				tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
				if !ok || !cfg.Verifier.Verify(strings.TrimSpace(tok)) {
					w.Header().Set("WWW-Authenticate", `Bearer realm="genway-admin"`)
					writeError(w, r, log, &apierr.Error{Kind: apierr.Unauthenticated, Code: "invalid_admin_token",
						Message: "The admin API needs the operator token (Authorization: Bearer gwop_...); API keys are not accepted here."})
					return
				}
				r = r.WithContext(admin.WithActor(r.Context(), "token"))
			}
			v, err := h(r)
			if err != nil {
				writeError(w, r, log, err)
				return
			}
			writeJSON(w, http.StatusOK, v)
		})
	}
	configured := cfg.Configured
	if configured == nil {
		configured = func(string) bool { return true }
	}
	routes := []Route{
		{"GET", "/admin/v1/accounts", wrap(func(r *http.Request) (any, error) {
			accts, err := op.Accounts(r.Context())
			if err != nil {
				return nil, err
			}
			return pageOf(r, accts, func(a admin.AccountInfo) string { return a.ID })
		})},
		{"POST", "/admin/v1/accounts", wrap(func(r *http.Request) (any, error) {
			var in struct {
				ID      string         `json:"id"`
				Credits credits.Amount `json:"credits"`
				Note    string         `json:"note"`
			}
			if err := decodeBody(r, &in); err != nil {
				return nil, err
			}
			return op.CreateAccount(r.Context(), in.ID, in.Credits, in.Note)
		})},
		{"GET", "/admin/v1/accounts/{id}", wrap(func(r *http.Request) (any, error) {
			return op.Account(r.Context(), r.PathValue("id"))
		})},
		{"POST", "/admin/v1/accounts/{id}/grants", wrap(func(r *http.Request) (any, error) {
			var in struct {
				Amount credits.Amount `json:"amount"`
				Note   string         `json:"note"`
			}
			if err := decodeBody(r, &in); err != nil {
				return nil, err
			}
			return op.Grant(r.Context(), r.PathValue("id"), in.Amount, in.Note)
		})},
		{"POST", "/admin/v1/accounts/{id}/rate_limit", wrap(func(r *http.Request) (any, error) {
			var in struct {
				RPM *int `json:"rpm"`
			}
			if err := decodeBody(r, &in); err != nil {
				return nil, err
			}
			if in.RPM == nil {
				return nil, apierr.Invalidf("rpm", "missing_field", "rpm is required: requests per minute per key, 0 for the default, -1 for unlimited")
			}
			return op.SetRateLimit(r.Context(), r.PathValue("id"), *in.RPM)
		})},
		{"GET", "/admin/v1/accounts/{id}/ledger", wrap(func(r *http.Request) (any, error) {
			entries, err := op.Ledger(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			return pageOf(r, entries, func(e credits.Entry) string { return e.ID })
		})},
		{"GET", "/admin/v1/keys", wrap(func(r *http.Request) (any, error) {
			keys, err := op.Keys(r.Context(), r.URL.Query().Get("account"))
			if err != nil {
				return nil, err
			}
			views := make([]keyView, len(keys))
			for i, k := range keys {
				views[i] = viewKey(k)
			}
			return pageOf(r, views, func(k keyView) string { return k.ID })
		})},
		{"POST", "/admin/v1/keys", wrap(func(r *http.Request) (any, error) {
			var in struct {
				Account string         `json:"account"`
				Credits credits.Amount `json:"credits"`
				auth.Controls
			}
			if err := decodeBody(r, &in); err != nil {
				return nil, err
			}
			key, rec, err := op.CreateKey(r.Context(), in.Account, in.Credits, in.Controls)
			if err != nil {
				return nil, err
			}
			return struct {
				keyView
				Key string `json:"key"` // shown this once
			}{viewKey(rec), string(key)}, nil
		})},
		{"PATCH", "/admin/v1/keys/{id}", wrap(func(r *http.Request) (any, error) {
			var ch auth.Change
			if err := decodeBody(r, &ch); err != nil {
				return nil, err
			}
			rec, err := op.UpdateKey(r.Context(), r.PathValue("id"), ch)
			if err != nil {
				return nil, err
			}
			return viewKey(rec), nil
		})},
		{"POST", "/admin/v1/keys/{id}/revoke", wrap(func(r *http.Request) (any, error) {
			rec, err := op.RevokeKey(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			return viewKey(rec), nil
		})},
		{"GET", "/admin/v1/models", wrap(func(r *http.Request) (any, error) {
			all := cfg.Catalog.List("", nil)
			views := make([]adminModelView, len(all))
			for i := range all {
				views[i] = adminModelView{modelView: viewModel(&all[i]), Provider: all[i].Provider, Configured: cfg.Catalog.Serves(&all[i], configured),
					CatalogPrice: all[i].Price}
				if p := all[i].Price; p != nil {
					pricing := cfg.Catalog.Pricing()
					views[i].CreditUSD, views[i].MarkupPercent = json.Number(pricing.CreditUSDText()), json.Number(pricing.MarkupText())
				}
				if cfg.Router != nil && !all[i].Alias() { // an alias is routed as its targets
					st := cfg.Router.State(all[i].ID)
					views[i].Routing = &st
				}
			}
			return listOf(views, false), nil
		})},
		{"GET", "/admin/v1/usage", wrap(func(r *http.Request) (any, error) {
			q := r.URL.Query()
			u, err := op.Usage(r.Context(), q.Get("account"), q.Get("from"), q.Get("to"))
			if err != nil {
				return nil, err
			}
			if u == nil {
				u = []admin.DayUsage{}
			}
			return listOf(u, false), nil
		})},
		{"GET", "/admin/v1/jobs", wrap(func(r *http.Request) (any, error) {
			if cfg.Jobs == nil {
				return nil, errNoJobs
			}
			q, err := DecodeListJobs(r.URL.Query())
			if err != nil {
				return nil, err
			}
			q.Account = r.URL.Query().Get("account")
			js, next, err := cfg.Jobs.ListAny(r.Context(), q)
			if err != nil {
				return nil, err
			}
			out := adminJobList{Object: "list", Data: make([]adminJobView, 0, len(js)), HasMore: next != ""}
			if next != "" {
				out.NextCursor = &next
			}
			for _, j := range js {
				v, err := viewAdminJob(r, cfg.Jobs, j)
				if err != nil {
					return nil, err
				}
				out.Data = append(out.Data, v)
			}
			return out, nil
		})},
		{"GET", "/admin/v1/jobs/{id}", wrap(func(r *http.Request) (any, error) {
			if cfg.Jobs == nil {
				return nil, errNoJobs
			}
			j, err := cfg.Jobs.GetAny(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			return viewAdminJob(r, cfg.Jobs, j)
		})},
		{"POST", "/admin/v1/jobs/{id}/cancel", wrap(func(r *http.Request) (any, error) {
			if cfg.Jobs == nil {
				return nil, errNoJobs
			}
			j, err := cfg.Jobs.CancelAny(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			cfg.Operator.Record(r.Context(), "jobs.cancel", j.ID+" ("+j.Account+")", "")
			return viewAdminJob(r, cfg.Jobs, j)
		})},
		{"POST", "/admin/v1/credits/reconcile", wrap(func(r *http.Request) (any, error) {
			in := struct {
				Days int `json:"days"`
			}{Days: 7}
			if r.ContentLength != 0 {
				if err := decodeBody(r, &in); err != nil {
					return nil, err
				}
			}
			return op.Reconcile(r.Context(), in.Days)
		})},
		{"GET", "/admin/v1/reservations", wrap(func(r *http.Request) (any, error) {
			res, err := op.Reservations(r.Context(), r.URL.Query().Get("account"))
			if err != nil {
				return nil, err
			}
			return pageOf(r, res, func(e credits.Entry) string { return e.ID })
		})},
		{"GET", "/admin/v1/records", wrap(func(r *http.Request) (any, error) {
			q, err := decodeRecordQuery(r.URL.Query())
			if err != nil {
				return nil, err
			}
			rs, next, err := op.Requests(r.Context(), q)
			if err != nil {
				return nil, err
			}
			out := recordList{Object: "list", Data: rs, HasMore: next != ""}
			if out.Data == nil {
				out.Data = []credits.Record{}
			}
			if next != "" {
				out.NextCursor = &next
			}
			return out, nil
		})},
		{"GET", "/admin/v1/records/{id}", wrap(func(r *http.Request) (any, error) {
			rec, err := op.Request(r.Context(), r.PathValue("id"))
			if err != nil {
				return nil, err
			}
			return recordView{Record: rec, Charge: rec.Explain()}, nil
		})},
		{"GET", "/admin/v1/audit", wrap(func(r *http.Request) (any, error) {
			limit, err := limitParam(r)
			if err != nil {
				return nil, err
			}
			entries, err := op.Audit(r.Context(), r.URL.Query().Get("after"), limit+1)
			if err != nil {
				return nil, err
			}
			more := len(entries) > limit
			if more {
				entries = entries[:limit]
			}
			if entries == nil {
				entries = []admin.AuditEntry{}
			}
			return listOf(entries, more), nil
		})},
	}
	return append(routes, webhookAdminRoutes(cfg, wrap)...)
}

// recordList is a page of GET /admin/v1/records.
type recordList struct {
	Object     string           `json:"object"`
	Data       []credits.Record `json:"data"`
	HasMore    bool             `json:"has_more"`
	NextCursor *string          `json:"next_cursor"`
}

// recordView is GET /admin/v1/records/{id}: the record, and its charge
// explained line by line (credits.Record.Explain).
type recordView struct {
	credits.Record
	Charge credits.Charge `json:"charge"`
}

// decodeRecordQuery reads the query of GET /admin/v1/records: account,
// key, model, status, kind, limit (1..credits.MaxRecordLimit) and after
// (the next_cursor of the previous page); a bad one is a 400 naming it.
func decodeRecordQuery(v url.Values) (credits.RecordQuery, error) {
	q := credits.RecordQuery{Account: v.Get("account"), Key: v.Get("key"), Model: v.Get("model"), Status: v.Get("status"),
		Kind: v.Get("kind"), Cursor: v.Get("after")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, apierr.Invalidf("limit", "invalid_value", "limit must be an integer from 1 to %d", credits.MaxRecordLimit)
		}
		q.Limit = n
	}
	return q, q.Normalize()
}

// errNoJobs answers the job routes where the server has no jobs service.
var errNoJobs = &apierr.Error{Kind: apierr.NotFound, Code: "route_not_found", Message: "This server has no jobs."}

// adminJobView is a job as the operator sees it: the public view plus its
// account, price (the hold while it runs, the charge once completed) and
// hold, its candidates and the one it is at, attempts and runs, and the
// vendor's handle.
type adminJobView struct {
	jobView
	Account string         `json:"account"`
	Price   credits.Amount `json:"price"`
	Hold    credits.Amount `json:"hold"`
	// Candidates are the models that may serve the job, in order; Trying
	// is the one it is at (being submitted to, or generating at).
	Candidates []jobs.Candidate `json:"candidates,omitempty"`
	Trying     string           `json:"trying,omitempty"`
	Attempts   int              `json:"attempts"`
	Runs       int              `json:"runs,omitempty"`
	Handle     *jobs.Handle     `json:"handle,omitempty"`
}

type adminJobList struct {
	Object     string         `json:"object"`
	Data       []adminJobView `json:"data"`
	HasMore    bool           `json:"has_more"`
	NextCursor *string        `json:"next_cursor"`
}

func viewAdminJob(r *http.Request, svc *jobs.Service, j *jobs.Job) (adminJobView, error) {
	url, err := svc.Link(r.Context(), j)
	if err != nil {
		return adminJobView{}, err
	}
	v := adminJobView{jobView: viewJob(j, url), Account: j.Account, Price: j.Price, Hold: j.Hold, Candidates: j.Candidates,
		Attempts: j.Attempts, Runs: j.Runs, Handle: j.Handle}
	if v.Hold == 0 {
		v.Hold = j.Price // a job stored before holds and charges could differ
	}
	if !j.Status.Final() {
		v.Trying = j.Current().Model
	}
	if j.Status == jobs.Failed && j.Error != nil {
		v.Error = &jobErrorView{Code: j.Error.Code, Message: j.Error.Message, Vendor: j.Error.Vendor}
	}
	return v, nil
}

// keyView is a key as the admin API shows it: never its hash.
type keyView struct {
	ID      string `json:"id"`
	Prefix  string `json:"prefix"`
	Account string `json:"account"`
	Created int64  `json:"created"`
	Revoked int64  `json:"revoked,omitempty"`
	// LastUsed is when the key last authenticated a request, to within
	// an hour (auth.TouchEvery); 0 if never.
	LastUsed int64  `json:"last_used"`
	Status   string `json:"status"` // live, expired or revoked
	// Controls: name, models, expires_at, credit_limit,
	// credit_limit_reset (each omitted when unset).
	auth.Controls
	// Spent and Held are the key's credits charged and held so far (in
	// its current period, with a credit_limit_reset); Left is what its
	// credit limit still allows (absent without a limit).
	Spent credits.Amount  `json:"spent"`
	Held  credits.Amount  `json:"held"`
	Left  *credits.Amount `json:"left,omitempty"`
	// Period is the credit limit period Spent counts ("2026-11",
	// "2026-W48", "2026-11-28") and ResetsAt when the next one starts
	// (Unix seconds); both only with a credit_limit_reset.
	Period   string `json:"period,omitempty"`
	ResetsAt int64  `json:"resets_at,omitempty"`
}

func viewKey(r auth.Record) keyView {
	now := time.Now() // r is as the Operator shows it now (admin.Service.Keys: InPeriod)
	v := keyView{ID: r.ID, Prefix: r.Prefix, Account: r.Account, Created: r.Created, Revoked: r.Revoked, LastUsed: r.LastUsed, Status: "live",
		Controls: r.Controls, Spent: r.Spent, Held: r.Held}
	if left, ok := r.Left(); ok {
		v.Left = &left
	}
	if r.CreditLimitReset != auth.ResetNever {
		v.Period, v.ResetsAt = r.Period, r.ResetAt(now).Unix()
	}
	switch {
	case r.Revoked != 0:
		v.Status = "revoked"
	case r.Expired(now):
		v.Status = "expired"
	}
	return v
}

// adminModelView is a model with where it runs and whether that is set up.
type adminModelView struct {
	modelView
	Provider string `json:"provider,omitempty"` // none for an alias
	// Configured: the model's provider is configured here (an alias:
	// one of its targets' providers).
	Configured bool `json:"configured"`
	// Routing is the model's circuit breaker in this process: its state
	// and its last calls' error rate.
	Routing *route.TargetState `json:"routing,omitempty"`
	// CatalogPrice is the model's price as the catalog states it: the
	// vendor's list prices in US dollars (usd_...) with their source, the
	// date they were read (as_of) and a note, or prices in credits. The
	// credits they became (price, as GET /v1/models shows it) were
	// converted with CreditUSD (what a credit is worth in US dollars) and
	// MarkupPercent (the percent added to list prices). None for an alias.
	CatalogPrice  *catalog.Price `json:"catalog_price,omitempty"`
	CreditUSD     json.Number    `json:"credit_usd,omitempty"`
	MarkupPercent json.Number    `json:"markup_percent,omitempty"`
}

// adminList is an OpenAI-style list.
type adminList[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
}

func listOf[T any](data []T, more bool) adminList[T] {
	return adminList[T]{Object: "list", Data: data, HasMore: more}
}

// limitParam is ?limit= (1..100, default 100).
func limitParam(r *http.Request) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return 100, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > 100 {
		return 0, apierr.Invalidf("limit", "invalid_value", "limit must be an integer from 1 to 100")
	}
	return n, nil
}

// pageOf returns the page of items (sorted by id) after ?after= with at
// most ?limit= items.
func pageOf[T any](r *http.Request, items []T, id func(T) string) (adminList[T], error) {
	limit, err := limitParam(r)
	if err != nil {
		return adminList[T]{}, err
	}
	sort.SliceStable(items, func(i, j int) bool { return id(items[i]) < id(items[j]) })
	if after := r.URL.Query().Get("after"); after != "" {
		i := sort.Search(len(items), func(i int) bool { return id(items[i]) > after })
		items = items[i:]
	}
	more := len(items) > limit
	if more {
		items = items[:limit]
	}
	if items == nil {
		items = []T{}
	}
	return listOf(items, more), nil
}

// decodeBody decodes an admin request's JSON body into v (unmarshalStrict):
// a 400 naming the field on a type error, and a 400 unknown_parameter
// naming a field v does not have, so that a typo in an operator's script
// (a key's "modles") is refused instead of making something other than
// meant (docs/operations.md lists the admin API's fields).
func decodeBody(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return unmarshalStrict(b, v)
}
