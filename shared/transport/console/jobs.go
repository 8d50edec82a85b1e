package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/transport/httpapi"
	"github.com/genway/genway/shared/webhooks"
)

// Jobs is what the jobs pages need: every account's jobs (the operator
// sees them all), one job by id whatever its account, cancelling one, and
// the link to a completed job's output (the job page's player).
// ServiceJobs makes one from a *jobs.Service.
type Jobs interface {
	// List returns the jobs q selects, newest first, and the next page's
	// cursor ("" if none); q.Account "" is every account's.
	List(ctx context.Context, q jobs.ListQuery) ([]*jobs.Job, string, error)
	// Get returns the job with id, or jobs.ErrNotFound.
	Get(ctx context.Context, id string) (*jobs.Job, error)
	// Cancel stops account's job id (see jobs.Service.Cancel).
	Cancel(ctx context.Context, account, id string) (*jobs.Job, error)
	// Link returns a link to completed job j's output.
	Link(ctx context.Context, j *jobs.Job) (string, error)
}

// ServiceJobs returns the Jobs of s for the operator: its store's listing
// of every account and its reads by id, and s.Cancel.
func ServiceJobs(s *jobs.Service) Jobs { return serviceJobs{s} }

type serviceJobs struct{ s *jobs.Service }

func (a serviceJobs) List(ctx context.Context, q jobs.ListQuery) ([]*jobs.Job, string, error) {
	return a.s.ListAny(ctx, q)
}

func (a serviceJobs) Get(ctx context.Context, id string) (*jobs.Job, error) {
	return a.s.GetAny(ctx, id)
}

func (a serviceJobs) Cancel(ctx context.Context, account, id string) (*jobs.Job, error) {
	return a.s.Cancel(ctx, account, id)
}

func (a serviceJobs) Link(ctx context.Context, j *jobs.Job) (string, error) { return a.s.Link(ctx, j) }

// jobsPageSize is the jobs page's page size.
const jobsPageSize = 50

// liveRoutes are the pages on jobs, usage and the playground.
func (c *Console) liveRoutes() []Route {
	return []Route{
		{"GET", "/console/jobs", c.jobsPage},
		{"GET", "/console/jobs.json", c.jobsJSON},
		{"GET", "/console/jobs/{id}", c.jobPage},
		{"GET", "/console/jobs/{id}/status", c.jobStatus},
		{"POST", "/console/jobs/{id}/cancel", c.cancelJob},
		{"GET", "/console/usage", c.usage},
		{"GET", "/console/playground", c.playground},
		{"POST", "/console/playground/chat", c.playChat},
		{"POST", "/console/playground/job", c.playJob},
		{"POST", "/console/playground/image", c.playImage},
		{"POST", "/console/playground/speech", c.playSpeech},
	}
}

// jobFilter is the jobs page's filter, from its query string.
type jobFilter struct {
	Account, Status, Type, Model, After string
}

func filterOf(r *http.Request) jobFilter {
	q := r.URL.Query()
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return jobFilter{Account: get("account"), Status: get("status"), Type: get("type"), Model: get("model"), After: get("after")}
}

// query is f as a listing query.
func (f jobFilter) query() jobs.ListQuery {
	return jobs.ListQuery{Account: f.Account, Status: jobs.Status(f.Status), Type: f.Type, Model: f.Model, Cursor: f.After, Limit: jobsPageSize}
}

// values is f as a query string, with after set to cursor.
func (f jobFilter) values(cursor string) string {
	v := url.Values{}
	for k, s := range map[string]string{"account": f.Account, "status": f.Status, "type": f.Type, "model": f.Model, "after": cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// jobRow is a job as the jobs table shows it (and jobs.json sends it).
type jobRow struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	Type    string `json:"type"`
	Model   string `json:"model"`
	// ServedBy is the model that made a completed job's output (the
	// model, or one of its fallbacks); "" until then.
	ServedBy string         `json:"served_by,omitempty"`
	Status   jobs.Status    `json:"status"`
	Price    credits.Amount `json:"price"`
	Created  string         `json:"created"`
	Updated  string         `json:"updated"`
	Prompt   string         `json:"prompt"`
}

// promptPreview is the first words of a prompt, for a table cell.
func promptPreview(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 60 {
		return string(r[:59]) + "…"
	}
	return s
}

func rowOf(j *jobs.Job) jobRow {
	return jobRow{ID: j.ID, Account: j.Account, Type: j.Type, Model: j.Model, ServedBy: j.ServedBy(), Status: j.Status, Price: j.Price,
		Created: unixTime(j.Created), Updated: unixTime(j.Updated), Prompt: promptPreview(j.Input.Prompt)}
}

// unixTime formats Unix seconds as the pages show times (UTC).
func unixTime(unix int64) string {
	if unix == 0 {
		return ""
	}
	return time.Unix(unix, 0).UTC().Format("2006-01-02 15:04:05")
}

// jobsList is one page of the listing.
type jobsList struct {
	Rows []jobRow `json:"jobs"`
	// Next is the next page's URL ("" on the last page).
	Next string `json:"next"`
}

func (c *Console) list(ctx context.Context, f jobFilter) (jobsList, error) {
	js, next, err := c.cfg.Jobs.List(ctx, f.query())
	if err != nil {
		return jobsList{}, err
	}
	l := jobsList{Rows: make([]jobRow, len(js))}
	for i, j := range js {
		l.Rows[i] = rowOf(j)
	}
	if next != "" {
		l.Next = "/console/jobs?" + f.values(next)
	}
	return l, nil
}

// jobsPage is the jobs page's data.
type jobsPage struct {
	Available bool
	Filter    jobFilter
	jobsList
	Accounts []admin.AccountInfo
	Models   []string
	Statuses []jobs.Status
	Types    []string
}

func (c *Console) jobsPage(p *Page, w http.ResponseWriter, r *http.Request) error {
	p.Section, p.Title = "jobs", "Jobs"
	d := jobsPage{Filter: filterOf(r), Statuses: []jobs.Status{jobs.Queued, jobs.Processing, jobs.Completed, jobs.Failed},
		Types: jobTypes}
	p.Data = &d
	if c.cfg.Jobs == nil {
		return p.Render(w, r, "jobs")
	}
	d.Available = true
	var err error
	if d.jobsList, err = c.list(r.Context(), d.Filter); err != nil {
		return err
	}
	if d.Accounts, err = c.cfg.Operator.Accounts(r.Context()); err != nil {
		return err
	}
	for _, m := range c.cfg.Catalog.List("", nil) {
		if isJobType(m.Type) { // image and speech models make no jobs
			d.Models = append(d.Models, m.ID)
		}
	}
	p.Scripts = []string{"jobs.js"}
	return p.Render(w, r, "jobs")
}

// writeJSON writes v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

// jsonError writes err for the console's scripts as the API writes
// errors: its status and the OpenAI envelope ({"error": {"message", ...}}).
func (c *Console) jsonError(w http.ResponseWriter, r *http.Request, err error) error {
	httpapi.WriteError(w, r, c.log, err)
	return nil
}

// noJobs is the error of the jobs endpoints where there are no jobs.
var noJobs = &apierr.Error{Kind: apierr.NotFound, Code: "not_found", Message: "Jobs are not available on this server."}

// jobsJSON is the jobs page's listing for jobs.js, with the same filters.
func (c *Console) jobsJSON(p *Page, w http.ResponseWriter, r *http.Request) error {
	if c.cfg.Jobs == nil {
		return c.jsonError(w, r, noJobs)
	}
	l, err := c.list(r.Context(), filterOf(r))
	if err != nil {
		return c.jsonError(w, r, err)
	}
	if l.Rows == nil {
		l.Rows = []jobRow{}
	}
	return writeJSON(w, http.StatusOK, l)
}

// step is one entry of a job's status timeline.
type step struct {
	Status    jobs.Status `json:"status"`
	At        string      `json:"at"`
	After     string      `json:"after,omitempty"` // since the previous entry
	ErrorCode string      `json:"error_code,omitempty"`
}

// timeline is j's History as the job page shows it.
func timeline(j *jobs.Job) []step {
	h := j.History
	if len(h) == 0 { // stored before History: what is known
		h = []jobs.StatusChange{{Status: jobs.Queued, At: j.Created}}
		if j.Status != jobs.Queued {
			h = append(h, jobs.StatusChange{Status: j.Status, At: j.Updated})
		}
	}
	out := make([]step, len(h))
	for i, e := range h {
		out[i] = step{Status: e.Status, At: unixTime(e.At), ErrorCode: e.ErrorCode}
		if i > 0 {
			out[i].After = (time.Duration(e.At-h[i-1].At) * time.Second).String()
		}
	}
	return out
}

// jobView is a job as its page shows it.
type jobView struct {
	*jobs.Job
	Timeline   []step
	URL        string // the output link, for a completed job
	Kind       string // "audio" or "video": the player
	Cancelable bool
	// Webhooks is whether the console manages webhooks; Deliveries are
	// the job's.
	Webhooks   bool
	Deliveries []*webhooks.Delivery
}

func (c *Console) view(ctx context.Context, j *jobs.Job) (jobView, error) {
	v := jobView{Job: j, Timeline: timeline(j), Cancelable: !j.Status.Final()}
	if j.Status != jobs.Completed || j.Output == nil {
		return v, nil
	}
	u, err := c.cfg.Jobs.Link(ctx, j)
	if err != nil {
		return v, err
	}
	v.URL = u
	switch {
	case strings.HasPrefix(j.Output.ContentType, "video/"):
		v.Kind = "video"
	case strings.HasPrefix(j.Output.ContentType, "audio/"):
		v.Kind = "audio"
	}
	return v, nil
}

func (c *Console) getJob(r *http.Request) (*jobs.Job, error) {
	if c.cfg.Jobs == nil {
		return nil, noJobs
	}
	return c.cfg.Jobs.Get(r.Context(), r.PathValue("id"))
}

func (c *Console) jobPage(p *Page, w http.ResponseWriter, r *http.Request) error {
	p.Section = "jobs"
	j, err := c.getJob(r)
	if err != nil {
		return err
	}
	v, err := c.view(r.Context(), j)
	if err != nil {
		return err
	}
	v.Webhooks = c.cfg.Webhooks != nil
	if v.Deliveries, err = c.deliveries(r, j.ID); err != nil {
		return err
	}
	p.Title, p.Data, p.Scripts = "Job "+j.ID, v, []string{"jobs.js"}
	p.Flash = r.URL.Query().Get("done")
	return p.Render(w, r, "job")
}

// jobState is a job's state for scripts: the playground's and the job
// page's polls.
type jobState struct {
	ID          string         `json:"id"`
	Account     string         `json:"account"`
	Status      jobs.Status    `json:"status"`
	Error       *jobs.JobError `json:"error,omitempty"`
	URL         string         `json:"url,omitempty"`
	Kind        string         `json:"kind,omitempty"`
	ContentType string         `json:"content_type,omitempty"`
	Timeline    []step         `json:"timeline"`
}

func (c *Console) jobStatus(p *Page, w http.ResponseWriter, r *http.Request) error {
	j, err := c.getJob(r)
	if err != nil {
		return c.jsonError(w, r, err)
	}
	v, err := c.view(r.Context(), j)
	if err != nil {
		return c.jsonError(w, r, err)
	}
	s := jobState{ID: j.ID, Account: j.Account, Status: j.Status, Error: j.Error, URL: v.URL, Kind: v.Kind, Timeline: v.Timeline}
	if j.Output != nil {
		s.ContentType = j.Output.ContentType
	}
	return writeJSON(w, http.StatusOK, s)
}

func (c *Console) cancelJob(p *Page, w http.ResponseWriter, r *http.Request) error {
	j, err := c.getJob(r)
	if err != nil {
		return err
	}
	if _, err := c.cfg.Jobs.Cancel(r.Context(), j.Account, j.ID); err != nil {
		return err
	}
	c.record(r.Context(), "jobs.cancel", j.ID, "account "+j.Account)
	http.Redirect(w, r, "/console/jobs/"+url.PathEscape(j.ID)+"?done=cancelled", http.StatusSeeOther)
	return nil
}

// record writes an audit entry.
func (c *Console) record(ctx context.Context, action, target, detail string) {
	c.cfg.Operator.Record(ctx, action, target, detail)
}

// accountIDs are the ids of accts, "dev" first if it is there (the
// playground bills it by default).
func accountIDs(accts []admin.AccountInfo) []string {
	ids := make([]string, len(accts))
	for i, a := range accts {
		ids[i] = a.ID
	}
	slices.Sort(ids)
	if i := slices.Index(ids, "dev"); i > 0 {
		ids = append([]string{"dev"}, slices.Delete(ids, i, i+1)...)
	}
	return ids
}
