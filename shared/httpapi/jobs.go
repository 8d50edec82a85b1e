package httpapi

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/jobs"
)

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 255

// jobView is the Job object of the API: the seed's fields plus model, input
// and updated. output.url is made at read time.
type jobView struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Type    string         `json:"type"`
	Status  jobs.Status    `json:"status"`
	Model   string         `json:"model"`
	Input   jobs.Input     `json:"input"`
	Output  *outputView    `json:"output"`
	Error   *jobs.JobError `json:"error"`
	Created int64          `json:"created"`
	Updated int64          `json:"updated"`
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
	v := jobView{ID: j.ID, Object: "job", Type: j.Type, Status: j.Status, Model: j.Model, Input: j.Input,
		Error: j.Error, Created: j.Created, Updated: j.Updated}
	if j.Status == jobs.Completed && j.Output != nil {
		o := j.Output
		v.Output = &outputView{URL: url, ContentType: o.ContentType, Bytes: o.Bytes, Duration: o.Duration, Width: o.Width, Height: o.Height}
	}
	if j.Status != jobs.Failed {
		v.Error = nil
	}
	return v
}

// CreateJob serves POST /v1/jobs.
func CreateJob(svc *jobs.Service, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		req, err := DecodeCreateJob(body)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		idem := r.Header.Get("Idempotency-Key")
		if len(idem) > maxIdempotencyKey {
			writeError(w, r, log, apierr.Invalidf("Idempotency-Key", "invalid_value", "The Idempotency-Key header is longer than %d characters.", maxIdempotencyKey))
			return
		}
		sum := sha256.Sum256(body)
		j, err := svc.Create(r.Context(), account(r), req, idem, hex.EncodeToString(sum[:]))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		url, err := svc.Link(r.Context(), j)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		log.InfoContext(r.Context(), "job created", "request_id", RequestID(r.Context()), "job_id", j.ID, "account", j.Account)
		writeJSON(w, http.StatusOK, viewJob(j, url))
	})
}

// GetJob serves GET /v1/jobs/{id}.
func GetJob(svc *jobs.Service, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j, err := svc.Get(r.Context(), account(r), r.PathValue("id"))
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		url, err := svc.Link(r.Context(), j)
		if err != nil {
			writeError(w, r, log, err)
			return
		}
		writeJSON(w, http.StatusOK, viewJob(j, url))
	})
}

// jobFields are the fields of a create request, each with where it goes.
var jobFields = map[string]func(*jobs.CreateRequest) any{
	"type":       func(r *jobs.CreateRequest) any { return &r.Type },
	"model":      func(r *jobs.CreateRequest) any { return &r.Model },
	"prompt":     func(r *jobs.CreateRequest) any { return &r.Prompt },
	"duration":   func(r *jobs.CreateRequest) any { return &r.Duration },
	"format":     func(r *jobs.CreateRequest) any { return &r.Format },
	"mode":       func(r *jobs.CreateRequest) any { return &r.Mode },
	"lyrics":     func(r *jobs.CreateRequest) any { return &r.Lyrics },
	"category":   func(r *jobs.CreateRequest) any { return &r.Category },
	"size":       func(r *jobs.CreateRequest) any { return &r.Size },
	"resolution": func(r *jobs.CreateRequest) any { return &r.Resolution },
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
		dst, ok := jobFields[k]
		if !ok {
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
		if err := json.Unmarshal(v, dst(req)); err != nil {
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
