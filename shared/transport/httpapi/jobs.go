package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// idempotencyKey returns the request's Idempotency-Key header ("" if
// none): a 400 naming it past maxIdempotencyKey characters.
func idempotencyKey(r *http.Request) (string, error) {
	idem := r.Header.Get("Idempotency-Key")
	if len(idem) > maxIdempotencyKey {
		return "", apierr.Invalidf("Idempotency-Key", "invalid_value", "The Idempotency-Key header is longer than %d characters.", maxIdempotencyKey)
	}
	return idem, nil
}

// jobView is the Job object of the API: the seed's fields plus model,
// input, updated and history (the statuses it entered, when; absent for
// jobs stored before history was kept). output.url is made at read time.
type jobView struct {
	ID     string      `json:"id"`
	Object string      `json:"object"`
	Type   string      `json:"type"`
	Status jobs.Status `json:"status"`
	Model  string      `json:"model"`
	// ServedBy is the model that made the output of a completed job: the
	// model asked for, or one of its catalog fallbacks. Absent until the
	// job is completed.
	ServedBy string              `json:"served_by,omitempty"`
	Input    jobs.Input          `json:"input"`
	Output   *outputView         `json:"output"`
	Error    *jobErrorView       `json:"error"`
	Created  int64               `json:"created"`
	Updated  int64               `json:"updated"`
	History  []jobs.StatusChange `json:"history,omitempty"`
	// WebhookURL is the request's webhook_url, absent when none was given.
	WebhookURL string `json:"webhook_url,omitempty"`
	// Charged is what a final job is charged, in credits (jobs.Job.Charged:
	// a completed job's capture, 0 for a failed one); absent until the
	// job is final.
	Charged *credits.Amount `json:"charged,omitempty"`
}

// jobErrorView is a failed job's error as the API shows it: its code and
// message. The vendor's own words of a failure about the operator's
// account (jobs.JobError.Vendor) are never here, nor in a webhook (which
// renders this view); only the admin API's view (viewAdminJob) has them.
type jobErrorView struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Vendor  string `json:"vendor,omitempty"` // the admin API only
}

type outputView struct {
	URL         string `json:"url"`
	ContentType string `json:"content_type"`
	Bytes       int64  `json:"bytes"`
	Duration    int    `json:"duration"`
	Width       int    `json:"width,omitempty"`
	Height      int    `json:"height,omitempty"`
}

func viewJob(j *jobs.Job, url string) jobView {
	v := jobView{ID: j.ID, Object: "job", Type: j.Type, Status: j.Status, Model: j.Model, ServedBy: j.ServedBy(), Input: j.Input,
		Created: j.Created, Updated: j.Updated, History: j.History, WebhookURL: j.WebhookURL}
	if j.Error != nil {
		v.Error = &jobErrorView{Code: j.Error.Code, Message: j.Error.Message}
	}
	if j.Status == jobs.Completed && j.Output != nil {
		o := j.Output
		v.Output = &outputView{URL: url, ContentType: o.ContentType, Bytes: o.Bytes, Duration: o.Duration, Width: o.Width, Height: o.Height}
	}
	if j.Status != jobs.Failed {
		v.Error = nil
	}
	if c, ok := j.Charged(); ok {
		v.Charged = &c
	}
	return v
}

// CreateJob serves POST /v1/jobs.
func CreateJob(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		body, err := readBody(r)
		if err != nil {
			return err
		}
		req, err := DecodeCreateJob(body)
		if err != nil {
			return err
		}
		idem, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		j, err := svc.Create(r.Context(), account(r), req, idem, hex.EncodeToString(sum[:]))
		if err != nil {
			return err
		}
		url, err := svc.Link(r.Context(), j)
		if err != nil {
			return err
		}
		log.InfoContext(r.Context(), "job created", "request_id", RequestID(r.Context()), "job_id", j.ID, "account", j.Account)
		writeJSON(w, http.StatusOK, viewJob(j, url))
		return nil
	})
}

// GetJob serves GET /v1/jobs/{id}.
func GetJob(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		j, err := svc.Get(r.Context(), account(r), r.PathValue("id"))
		if err != nil {
			return err
		}
		url, err := svc.Link(r.Context(), j)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, viewJob(j, url))
		return nil
	})
}

// jobList is the GET /v1/jobs answer: the OpenAI list shape with a cursor.
type jobList struct {
	Object     string    `json:"object"` // "list"
	Data       []jobView `json:"data"`
	HasMore    bool      `json:"has_more"`
	NextCursor *string   `json:"next_cursor"` // the next page's after; null on the last page
}

// ListJobs serves GET /v1/jobs: the caller's jobs, newest first, each as
// GET /v1/jobs/{id} shows it (a fresh output link for completed ones).
// Query parameters (see DecodeListJobs): status, type, model, since,
// until, limit, after.
func ListJobs(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		q, err := DecodeListJobs(r.URL.Query())
		if err != nil {
			return err
		}
		js, next, err := svc.List(r.Context(), account(r), q)
		if err != nil {
			return err
		}
		out := jobList{Object: "list", Data: make([]jobView, 0, len(js)), HasMore: next != ""}
		if next != "" {
			out.NextCursor = &next
		}
		for _, j := range js {
			url, err := svc.Link(r.Context(), j)
			if err != nil {
				return err
			}
			out.Data = append(out.Data, viewJob(j, url))
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// DecodeListJobs reads the query parameters of GET /v1/jobs into a
// jobs.ListQuery (its Account left for the caller): status, type, model,
// since and until (Unix seconds, inclusive), limit (1..100, default 20)
// and after (the next_cursor of the previous page). A parameter given
// twice, empty, or of the wrong form is a 400 naming it; Service.List
// checks the values. Other parameters are ignored.
func DecodeListJobs(v url.Values) (jobs.ListQuery, error) {
	var q jobs.ListQuery
	for _, p := range []struct {
		name string
		dst  *string
	}{{"type", &q.Type}, {"model", &q.Model}, {"after", &q.Cursor}} {
		s, _, err := queryParam(v, p.name)
		if err != nil {
			return q, err
		}
		*p.dst = s
	}
	s, _, err := queryParam(v, "status")
	if err != nil {
		return q, err
	}
	q.Status = jobs.Status(s)
	for _, p := range []struct {
		name string
		dst  *int64
	}{{"since", &q.Since}, {"until", &q.Until}} {
		s, ok, err := queryParam(v, p.name)
		if err != nil || !ok {
			if err != nil {
				return q, err
			}
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			return q, apierr.Invalidf(p.name, "invalid_value", "%s must be a Unix time in whole seconds; got %q.", p.name, s)
		}
		*p.dst = n
	}
	if err := queryLimit(v, &q.Limit); err != nil {
		return q, err
	}
	return q, nil
}

// queryParam returns the query parameter name of v, and whether it was
// given: a parameter given twice or empty is a 400 naming it.
func queryParam(v url.Values, name string) (string, bool, error) {
	vs, ok := v[name]
	switch {
	case !ok:
		return "", false, nil
	case len(vs) > 1:
		return "", false, apierr.Invalidf(name, "invalid_value", "%s must be given once.", name)
	case vs[0] == "":
		return "", false, apierr.Invalidf(name, "invalid_value", "%s must not be empty.", name)
	}
	return vs[0], true, nil
}

// queryLimit sets *limit to the limit query parameter of v when it is
// given: an integer 1..jobs.MaxListLimit, else a 400 naming it.
func queryLimit(v url.Values, limit *int) error {
	s, ok, err := queryParam(v, "limit")
	if err != nil || !ok {
		return err
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > jobs.MaxListLimit {
		return apierr.Invalidf("limit", "invalid_value", "limit must be an integer between 1 and %d; got %q.", jobs.MaxListLimit, s)
	}
	*limit = n
	return nil
}

// CancelJob serves POST /v1/jobs/{id}/cancel: it answers the cancelled
// job (status failed, error.code "cancelled"), or the error that says why
// it cannot be cancelled (404 job_not_found, 409 job_final or
// job_not_cancellable, 502 when the vendor could not be reached). A body
// is ignored.
func CancelJob(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		j, err := svc.Cancel(r.Context(), account(r), r.PathValue("id"))
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, viewJob(j, ""))
		return nil
	})
}

// jobField returns where field name of a create request goes in r, or
// nil if a create request has no such field. (A switch, not a map: a
// map would be built at start-up in every program that links httpapi.)
func jobField(r *jobs.CreateRequest, name string) any {
	switch name {
	case "type":
		return &r.Type
	case "model":
		return &r.Model
	case "prompt":
		return &r.Prompt
	case "duration":
		return &r.Duration
	case "format":
		return &r.Format
	case "mode":
		return &r.Mode
	case "lyrics":
		return &r.Lyrics
	case "category":
		return &r.Category
	case "size":
		return &r.Size
	case "resolution":
		return &r.Resolution
	case "webhook_url": // where to POST the job's end (see package webhooks)
		return &r.WebhookURL
	}
	return nil
}

// DecodeCreateJob decodes a POST /v1/jobs body. Unknown fields are refused
// (a misspelt option must not be silently dropped), a JSON null is the same
// as an absent field, and a wrong type names the field. Errors are
// *apierr.Error.
func DecodeCreateJob(body []byte) (*jobs.CreateRequest, error) {
	var raw map[string]json.RawMessage
	if err := unmarshal(body, &raw); err != nil {
		if e := apierr.As(err); e != nil && e.Code == "invalid_type" {
			return nil, apierr.Invalidf("", "invalid_json", "The request body must be a JSON object.")
		}
		return nil, err
	}
	if raw == nil {
		return nil, apierr.Invalidf("", "invalid_json", "The request body must be a JSON object.")
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names) // report the same field first every time
	req := &jobs.CreateRequest{}
	for _, k := range names {
		v := raw[k]
		dst := jobField(req, k)
		if dst == nil {
			return nil, apierr.Invalidf(k, "unknown_parameter", "Unrecognized request argument: %s.", k)
		}
		if string(v) == "null" {
			continue
		}
		if k == "duration" {
			if err := decodeInt(v, &req.Duration); err != nil {
				return nil, apierr.Invalidf(k, "invalid_type", "duration must be a positive integer number of seconds.")
			}
			continue
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return nil, apierr.Invalidf(k, "invalid_type", "%s must be a string.", k)
		}
	}
	return req, nil
}

// decodeInt accepts a JSON number with an integral value (30 or 30.0).
func decodeInt(v json.RawMessage, dst **int) error {
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return apierr.Invalidf("", "invalid_type", "not a number")
	}
	var f json.Number
	if err := json.Unmarshal(v, &f); err != nil {
		return err
	}
	s := f.String()
	if i := strings.IndexAny(s, ".eE"); i >= 0 {
		fl, err := f.Float64()
		if err != nil || fl != float64(int64(fl)) || fl > 1e9 || fl < -1e9 {
			return apierr.Invalidf("", "invalid_type", "not an integer")
		}
		n := int(fl)
		*dst = &n
		return nil
	}
	n64, err := f.Int64()
	if err != nil || n64 > 1e9 || n64 < -1e9 {
		return apierr.Invalidf("", "invalid_type", "not an integer")
	}
	n := int(n64)
	*dst = &n
	return nil
}
