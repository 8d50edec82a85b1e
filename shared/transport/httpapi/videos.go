package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/jobs"
)

// OpenAI's Videos API (/v1/videos) over the jobs: a video is a job of type
// video, with the same id, vendors, credits, fallbacks and cancel; only
// the shape differs. The mapping:
//
//	video                  job
//	id                     id
//	model                  model (as asked; served_by: the model that made it)
//	prompt                 input.prompt
//	seconds ("8")          input.duration (8)
//	size                   input.size
//	status                 status; processing is "in_progress"
//	progress               queued 0, in_progress 50, completed 100; failed: as far as it got
//	created_at             created
//	completed_at           when it ended (completed or failed), else null
//	expires_at             completed_at + the media retention, for a completed video
//	error {code, message}  error, for a failed video
//	remixed_from_video_id  null (no remixes)

// errVideoNotFound is the 404 of a video id that is unknown, malformed,
// another account's, deleted, or a job of another type.
var errVideoNotFound = &apierr.Error{Kind: apierr.NotFound, Code: "video_not_found", Message: "No video with that id."}

// videoView is OpenAI's Video object, field by field, plus served_by.
type videoView struct {
	ID                 string      `json:"id"`
	Object             string      `json:"object"` // "video"
	Model              string      `json:"model"`
	Status             string      `json:"status"`
	Progress           int         `json:"progress"`
	CreatedAt          int64       `json:"created_at"`
	CompletedAt        *int64      `json:"completed_at"`
	ExpiresAt          *int64      `json:"expires_at"`
	Prompt             string      `json:"prompt"`
	Seconds            string      `json:"seconds"`
	Size               string      `json:"size"`
	Error              *videoError `json:"error"`
	RemixedFromVideoID *string     `json:"remixed_from_video_id"`
	// ServedBy is the model that made a completed video: the model asked
	// for, or one of its catalog fallbacks.
	ServedBy string `json:"served_by,omitempty"`
	// Charged is what a final video is charged, as the job's.
	Charged *credits.Amount `json:"charged,omitempty"`
}

type videoError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// videoStatus is OpenAI's name of a job status.
func videoStatus(s jobs.Status) string {
	if s == jobs.Processing {
		return "in_progress"
	}
	return string(s)
}

// videoProgress is an honest percentage: nothing is known of a vendor's
// progress between its start and its end, so a running video is halfway;
// a failed one stays where it got (0 if it never started).
func videoProgress(j *jobs.Job) int {
	switch j.Status {
	case jobs.Completed:
		return 100
	case jobs.Processing:
		return 50
	case jobs.Failed:
		for _, h := range j.History {
			if h.Status == jobs.Processing {
				return 50
			}
		}
	}
	return 0
}

func viewVideo(svc *jobs.Service, j *jobs.Job) videoView {
	v := videoView{ID: j.ID, Object: "video", Model: j.Model, Status: videoStatus(j.Status), Progress: videoProgress(j),
		CreatedAt: j.Created, Prompt: j.Input.Prompt, Seconds: strconv.Itoa(j.Input.Duration), Size: j.Input.Size, ServedBy: j.ServedBy()}
	if t := j.Ended(); t != 0 {
		v.CompletedAt = &t
	}
	if t := svc.Expires(j); t != 0 {
		v.ExpiresAt = &t
	}
	if j.Status == jobs.Failed && j.Error != nil {
		v.Error = &videoError{Code: j.Error.Code, Message: j.Error.Message}
	}
	if c, ok := j.Charged(); ok {
		v.Charged = &c
	}
	return v
}

// getVideo returns the caller's video {id}, or errVideoNotFound.
func getVideo(svc *jobs.Service, r *http.Request) (*jobs.Job, error) {
	j, err := svc.Get(r.Context(), account(r), r.PathValue("id"))
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && j.Type != jobs.TypeVideo) {
		return nil, errVideoNotFound
	}
	return j, err
}

// videoRequest is a decoded POST /v1/videos body: the fields as given,
// nil when absent.
type videoRequest struct {
	Model   *string `json:"model,omitempty"`
	Prompt  *string `json:"prompt,omitempty"`
	Seconds *string `json:"seconds,omitempty"`
	Size    *string `json:"size,omitempty"`
	// WebhookURL is where to POST the video job's end (package webhooks).
	WebhookURL *string `json:"webhook_url,omitempty"`
}

// hash is the Idempotency-Key body hash of the request: of its fields,
// not of its bytes, since a client retrying a multipart body sends
// another boundary.
func (v *videoRequest) hash() string {
	b, _ := json.Marshal(struct {
		API string `json:"api"`
		*videoRequest
	}{"videos", v}) // cannot fail: strings
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// jobRequest maps v onto a video job's request: seconds is the duration,
// a string of digits ("8").
func (v *videoRequest) jobRequest() (*jobs.CreateRequest, error) {
	req := &jobs.CreateRequest{Type: jobs.TypeVideo, Size: v.Size}
	if v.WebhookURL != nil {
		req.WebhookURL = *v.WebhookURL
	}
	if v.Model != nil {
		req.Model = *v.Model
	}
	if v.Prompt != nil {
		req.Prompt = *v.Prompt
	}
	if v.Seconds != nil {
		s := *v.Seconds
		n, err := strconv.Atoi(s)
		if err != nil || len(s) > 4 || strings.TrimLeft(s, "0123456789") != "" {
			return nil, apierr.Invalidf("seconds", "invalid_value", "seconds must be a whole number of seconds as a string, e.g. \"8\"; got %q.", s)
		}
		req.Duration = &n
	}
	return req, nil
}

// errInputReference refuses OpenAI's input_reference (an image to start
// the video from), whatever its form: a file, a URL or a file id.
var errInputReference = apierr.Invalidf("input_reference", "unsupported_parameter",
	"input_reference is not supported: the video models here generate from the prompt alone.")

// videoField returns field name of v (a field of POST /v1/videos), or
// the error for a field that is unknown or refused (input_reference is
// known and refused).
func videoField(v *videoRequest, name string) (**string, error) {
	switch name {
	case "model":
		return &v.Model, nil
	case "prompt":
		return &v.Prompt, nil
	case "seconds":
		return &v.Seconds, nil
	case "size":
		return &v.Size, nil
	case "webhook_url": // Genway's own (see package webhooks)
		return &v.WebhookURL, nil
	}
	if name == "input_reference" || strings.HasPrefix(name, "input_reference[") {
		return nil, errInputReference
	}
	return nil, apierr.Invalidf(name, "unknown_parameter", "Unrecognized request argument: %s.", name)
}

// decodeCreateVideo decodes a POST /v1/videos body of media type
// contentType: multipart/form-data (what OpenAI's clients send),
// application/x-www-form-urlencoded, or JSON (also when contentType is
// empty). The fields are model, prompt, seconds and size, all strings (in
// JSON, seconds may also be an integer); a JSON null is an absent field.
// An unknown field, a field given twice, a file part and input_reference
// are refused naming the field. Errors are *apierr.Error.
func decodeCreateVideo(contentType string, body []byte) (*videoRequest, error) {
	mt, params := "application/json", map[string]string(nil)
	if contentType != "" {
		var err error
		if mt, params, err = mime.ParseMediaType(contentType); err != nil {
			mt = ""
		}
	}
	switch {
	case mt == "multipart/form-data":
		return decodeVideoMultipart(params["boundary"], body)
	case mt == "application/x-www-form-urlencoded":
		vals, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, apierr.Invalidf("", "invalid_body", "The form body could not be parsed: %v.", err)
		}
		v := &videoRequest{}
		for _, k := range slices.Sorted(maps.Keys(vals)) { // report the same field first every time
			if len(vals[k]) > 1 {
				return nil, apierr.Invalidf(k, "invalid_value", "%s must be given once.", k)
			}
			if err := setVideoField(v, k, vals[k][0]); err != nil {
				return nil, err
			}
		}
		return v, nil
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		return decodeVideoJSON(body)
	}
	return nil, &apierr.Error{Kind: apierr.UnsupportedMedia, Code: "unsupported_media_type",
		Message: fmt.Sprintf("Content-Type must be multipart/form-data, application/x-www-form-urlencoded or application/json; got %q.", contentType)}
}

// setVideoField sets text field name of v to s, once.
func setVideoField(v *videoRequest, name, s string) error {
	dst, err := videoField(v, name)
	if err != nil {
		return err
	}
	if *dst != nil {
		return apierr.Invalidf(name, "invalid_value", "%s must be given once.", name)
	}
	if !utf8.ValidString(s) {
		return apierr.Invalidf(name, "invalid_value", "%s must be UTF-8 text.", name)
	}
	*dst = &s
	return nil
}

func decodeVideoMultipart(boundary string, body []byte) (*videoRequest, error) {
	if boundary == "" {
		return nil, apierr.Invalidf("", "invalid_body", "A multipart/form-data body needs the boundary parameter in its Content-Type.")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	v := &videoRequest{}
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return v, nil
		}
		if err != nil {
			return nil, apierr.Invalidf("", "invalid_body", "The multipart body could not be parsed: %v.", err)
		}
		name := p.FormName()
		if name == "" {
			return nil, apierr.Invalidf("", "invalid_body", "Every part of the multipart body needs a form-data name.")
		}
		if p.FileName() != "" {
			if _, err := videoField(v, name); err != nil {
				return nil, err
			}
			return nil, apierr.Invalidf(name, "invalid_type", "%s must be a text field, not a file.", name)
		}
		b, err := io.ReadAll(p)
		if err != nil {
			return nil, apierr.Invalidf(name, "invalid_body", "The multipart body could not be parsed: %v.", err)
		}
		if err := setVideoField(v, name, string(b)); err != nil {
			return nil, err
		}
	}
}

func decodeVideoJSON(body []byte) (*videoRequest, error) {
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
	v := &videoRequest{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		dst, err := videoField(v, k)
		if err != nil {
			return nil, err
		}
		val := raw[k]
		if string(val) == "null" {
			continue
		}
		var s string
		if err := json.Unmarshal(val, &s); err != nil {
			var n *int
			if k != "seconds" || decodeInt(val, &n) != nil {
				return nil, apierr.Invalidf(k, "invalid_type", "%s must be a string.", k)
			}
			s = strconv.Itoa(*n)
		}
		*dst = &s
	}
	return v, nil
}

// videoParam renames the params of a jobs validation error to the Videos
// API's: duration is seconds, resolution is size.
func videoParam(err error) error {
	e := apierr.As(err)
	if e == nil {
		return err
	}
	switch e.Param {
	case "duration":
		c := *e
		c.Param, c.Message = "seconds", "Invalid seconds (the video's duration): "+e.Message
		return &c
	case "resolution":
		c := *e
		c.Param = "size"
		return &c
	}
	return err
}

// CreateVideo serves POST /v1/videos: it creates a video job
// (jobs.Service.Create, with the Idempotency-Key as POST /v1/jobs takes
// it) and answers the video object, queued. model is required (OpenAI's
// default, sora-2, is not a model here); seconds defaults to the model's
// default duration and size to its default size.
func CreateVideo(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		body, err := readLimited(r, textLimit(r))
		if err != nil {
			return err
		}
		v, err := decodeCreateVideo(r.Header.Get("Content-Type"), body)
		if err != nil {
			return err
		}
		req, err := v.jobRequest()
		if err != nil {
			return err
		}
		idem, err := idempotencyKey(r)
		if err != nil {
			return err
		}
		j, err := svc.Create(r.Context(), account(r), req, idem, v.hash())
		if err != nil {
			return videoParam(err)
		}
		log.InfoContext(r.Context(), "video created", "request_id", RequestID(r.Context()), "job_id", j.ID, "account", j.Account)
		writeJSON(w, http.StatusOK, viewVideo(svc, j))
		return nil
	})
}

// GetVideo serves GET /v1/videos/{id}.
func GetVideo(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		j, err := getVideo(svc, r)
		if err != nil {
			return err
		}
		writeJSON(w, http.StatusOK, viewVideo(svc, j))
		return nil
	})
}

// videoListRounds bounds the store pages one GET /v1/videos reads to fill
// its page (a store page stops at its scan bound, see jobs.Store.List).
const videoListRounds = 5

// videoList is OpenAI's cursor list shape.
type videoList struct {
	Object  string      `json:"object"` // "list"
	Data    []videoView `json:"data"`
	FirstID *string     `json:"first_id"`
	LastID  *string     `json:"last_id"`
	HasMore bool        `json:"has_more"`
}

// ListVideos serves GET /v1/videos: the caller's videos (video jobs,
// whichever API made them), newest first or, with order=asc, oldest
// first; limit 1..100 (default 20); after is the id of a video (the
// last_id of the previous page) and the page holds the videos after it.
func ListVideos(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		q, after, err := DecodeListVideos(r.URL.Query())
		if err != nil {
			return err
		}
		acct := account(r)
		if after != "" {
			if q.Cursor, err = svc.CursorAt(r.Context(), acct, after); err != nil {
				return err
			}
		}
		limit := q.Limit
		var page []*jobs.Job
		var next string
		for range videoListRounds {
			js, n, err := svc.List(r.Context(), acct, q)
			if err != nil {
				return err
			}
			page, next = append(page, js...), n
			if next == "" || len(page) == limit {
				break
			}
			q.Cursor, q.Limit = next, limit-len(page)
		}
		out := videoList{Object: "list", Data: make([]videoView, 0, len(page)), HasMore: next != ""}
		for _, j := range page {
			out.Data = append(out.Data, viewVideo(svc, j))
		}
		if len(page) > 0 {
			first, last := page[0].ID, page[len(page)-1].ID
			out.FirstID, out.LastID = &first, &last
		} else if next != "" {
			// Nothing in the rounds read, but more to read: the next page
			// starts after the last job examined (a job of another type;
			// after takes any of the caller's ids).
			c, err := jobs.DecodeCursor(next)
			if err != nil {
				return fmt.Errorf("list videos: the store's cursor: %w", err)
			}
			out.LastID = &c.ID
		}
		writeJSON(w, http.StatusOK, out)
		return nil
	})
}

// DecodeListVideos reads the query of GET /v1/videos: limit (1..100,
// default 20), order (asc or desc, default desc) and after (a video id,
// returned apart). A parameter given twice, empty or of the wrong form is
// a 400 naming it; other parameters are ignored.
func DecodeListVideos(v url.Values) (q jobs.ListQuery, after string, err error) {
	q = jobs.ListQuery{Type: jobs.TypeVideo, Limit: jobs.DefaultListLimit}
	if after, _, err = queryParam(v, "after"); err != nil {
		return q, "", err
	}
	if err := queryLimit(v, &q.Limit); err != nil {
		return q, "", err
	}
	if s, ok, err := queryParam(v, "order"); err != nil {
		return q, "", err
	} else if ok {
		switch s {
		case "asc":
			q.Ascending = true
		case "desc":
		default:
			return q, "", apierr.Invalidf("order", "invalid_value", "order must be asc or desc; got %q.", s)
		}
	}
	return q, after, nil
}

// VideoContent serves GET /v1/videos/{id}/content: a 302 redirect to our
// link to the MP4 (the media store's presigned or signed link, fresh for
// each request, never a vendor's). OpenAI's clients follow it (fetch,
// httpx and net/http drop the Authorization header when the link is on
// another origin). variant=video is the default and the only one: there
// are no thumbnails or spritesheets here. A video that is not completed
// is a 404, as OpenAI answers it.
func VideoContent(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		if vs, ok := r.URL.Query()["variant"]; ok {
			switch {
			case len(vs) > 1:
				return apierr.Invalidf("variant", "invalid_value", "variant must be given once.")
			case vs[0] == "thumbnail" || vs[0] == "spritesheet":
				return apierr.Invalidf("variant", "unsupported_value", "variant %s is not available: only the video itself is made here (variant=video).", vs[0])
			case vs[0] != "video":
				return apierr.Invalidf("variant", "invalid_value", "variant must be video, thumbnail or spritesheet; got %q.", vs[0])
			}
		}
		j, err := getVideo(svc, r)
		if err != nil {
			return err
		}
		switch {
		case j.Status == jobs.Failed:
			return &apierr.Error{Kind: apierr.NotFound, Code: "video_failed",
				Message: "The video failed; it has no content. See error in GET /v1/videos/" + j.ID + "."}
		case j.Status != jobs.Completed:
			return &apierr.Error{Kind: apierr.NotFound, Code: "video_not_ready",
				Message: fmt.Sprintf("Video is not ready yet: it is %s. Poll GET /v1/videos/%s until its status is completed.", videoStatus(j.Status), j.ID)}
		case svc.Expired(j):
			return &apierr.Error{Kind: apierr.NotFound, Code: "video_expired", Message: "The video's content has expired (see expires_at)."}
		}
		link, err := svc.Link(r.Context(), j)
		if err == nil && link == "" {
			err = fmt.Errorf("video %s: completed without an output", j.ID)
		}
		if err != nil {
			return err
		}
		w.Header().Set("Location", link)
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusFound)
		return nil
	})
}

// videoDeleted is OpenAI's answer to a delete.
type videoDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"` // "video.deleted"
	Deleted bool   `json:"deleted"`
}

// DeleteVideo serves DELETE /v1/videos/{id}: a completed or failed video
// is deleted with its stored output (jobs.Service.DeleteJob; its charge
// stands), and is not found from then on, under both APIs. A queued or
// running video is a 409 job_not_final: cancel it first (POST
// /v1/jobs/{id}/cancel).
func DeleteVideo(svc *jobs.Service, log *slog.Logger) http.Handler {
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		j, err := getVideo(svc, r)
		if err != nil {
			return err
		}
		if _, err := svc.DeleteJob(r.Context(), j); err != nil {
			if errors.Is(err, jobs.ErrNotFound) {
				err = errVideoNotFound
			}
			return err
		}
		writeJSON(w, http.StatusOK, videoDeleted{ID: j.ID, Object: "video.deleted", Deleted: true})
		return nil
	})
}
