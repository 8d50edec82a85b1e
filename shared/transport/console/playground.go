package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/speech"
)

// Playground bounds.
const (
	// maxPlayChatBody bounds a chat request: a conversation and one image
	// (chat.DefaultMaxImageBytes as a base64 data URI).
	maxPlayChatBody = 8 << 20
	maxPlayJobBody  = 64 << 10
	maxPlayMessages = 100
	// maxPlayMediaBody bounds an image or speech request: a prompt or an
	// input of the longest the catalog takes (32,000 characters), in
	// UTF-8.
	maxPlayMediaBody = 256 << 10
)

// jobTypes are the types of the jobs API, in the order the pickers list
// them; image and speech models are not jobs (they answer at once).
var jobTypes = []string{jobs.TypeMusic, jobs.TypeSFX, jobs.TypeVideo}

// isJobType reports whether t is a job type (music, sfx, video).
func isJobType(t string) bool { return slices.Contains(jobTypes, t) }

// playModel is a model as the playground's pickers show it.
type playModel struct {
	ID                string
	Vision, Reasoning bool
	Type              string
	Min, Max, Default int // job models: durations, seconds
	// Image models: the sizes, qualities and output formats they take,
	// the default size, the most images a request may ask for and how
	// they are answered by default (b64_json or url). Speech models: the
	// voices and response formats, the default voice ("" if the model
	// has none, or one outside Voices: a vendor's voice id) and the
	// longest input. Lists are space-separated, for data-* attributes.
	Sizes, Qualities, Formats, Voices string
	DefaultSize, DefaultRF, Voice     string
	MaxImages, MaxInput               int
}

// playgroundPage is the playground's data.
type playgroundPage struct {
	Accounts     []string
	Account      string // billed by default
	ChatModels   []playModel
	JobModels    []playModel
	ImageModels  []playModel
	SpeechModels []playModel
	JobTypes     []string
	Efforts      []string
}

// imageModel is image model m as the image form shows it.
func imageModel(m *catalog.Model) playModel {
	rf := m.DefaultResponseFormat
	if rf == "" {
		rf = images.FormatB64
	}
	return playModel{ID: m.ID, Type: m.Type, Sizes: strings.Join(m.Sizes, " "), Qualities: strings.Join(m.Qualities, " "),
		Formats: strings.Join(m.Formats, " "), DefaultSize: m.DefaultSize, DefaultRF: rf, MaxImages: max(m.MaxImages, 1)}
}

// speechModel is speech model m as the speech form shows it: mp3 (the
// API's default) first among its formats.
func speechModel(m *catalog.Model) playModel {
	formats := []string{speech.DefaultFormat}
	for _, f := range m.Formats {
		if f != speech.DefaultFormat {
			formats = append(formats, f)
		}
	}
	pm := playModel{ID: m.ID, Type: m.Type, Voices: strings.Join(m.Voices, " "), Formats: strings.Join(formats, " "), MaxInput: m.MaxInput}
	if slices.Contains(m.Voices, m.DefaultVoice) {
		pm.Voice = m.DefaultVoice
	}
	return pm
}

func (c *Console) playground(p *Page, w http.ResponseWriter, r *http.Request) error {
	accts, err := c.cfg.Operator.Accounts(r.Context())
	if err != nil {
		return err
	}
	d := playgroundPage{Accounts: accountIDs(accts), Efforts: []string{"low", "medium", "high"}}
	if len(d.Accounts) > 0 {
		d.Account = d.Accounts[0]
	}
	types := map[string]bool{}
	for _, m := range c.cfg.Catalog.List("", c.configed) {
		switch {
		case m.Type == catalog.TypeChat && c.cfg.Chat != nil:
			pm := playModel{ID: m.ID, Type: m.Type}
			if m.Capabilities != nil {
				pm.Vision, pm.Reasoning = m.Capabilities.Vision, m.Capabilities.Reasoning
			}
			d.ChatModels = append(d.ChatModels, pm)
		case m.Type == catalog.TypeImage && c.images != nil:
			d.ImageModels = append(d.ImageModels, imageModel(&m))
		case m.Type == catalog.TypeSpeech && c.speech != nil:
			d.SpeechModels = append(d.SpeechModels, speechModel(&m))
		case isJobType(m.Type) && c.cfg.JobService != nil:
			d.JobModels = append(d.JobModels, playModel{ID: m.ID, Type: m.Type, Min: max(m.MinDuration, 1), Max: m.MaxDuration, Default: jobs.DefaultDuration(&m)})
			types[m.Type] = true
		}
	}
	for _, t := range jobTypes {
		if types[t] {
			d.JobTypes = append(d.JobTypes, t)
		}
	}
	p.Section, p.Title, p.Data, p.Scripts = "playground", "Playground", d, []string{"playground.js"}
	return p.Render(w, r, "playground")
}

// decodeJSON reads r's JSON body (at most limit bytes) into v.
func decodeJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return &apierr.Error{Kind: apierr.UnsupportedMedia, Code: "unsupported_media_type", Message: "Send JSON (Content-Type: application/json)."}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, limit))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if me := new(http.MaxBytesError); errors.As(err, &me) {
			return &apierr.Error{Kind: apierr.TooLarge, Code: "too_large", Message: "The request is too large (an image must be 5 MB or less)."}
		}
		return apierr.Invalidf("", "invalid_json", "The request is not valid JSON of the right shape: %v", err)
	}
	return nil
}

// billable returns an error unless account exists: the playground bills
// an account the operator picks, never one it would make up.
func (c *Console) billable(ctx context.Context, account string) error {
	if account == "" {
		return apierr.Invalidf("account", "missing_field", "Pick the account to bill.")
	}
	if _, err := c.cfg.Operator.Account(ctx, account); err != nil {
		if errors.Is(err, credits.ErrAccountNotFound) {
			return &apierr.Error{Kind: apierr.NotFound, Code: "account_not_found", Param: "account", Message: "There is no account " + account + "."}
		}
		return err
	}
	return nil
}

// playChatRequest is a playground chat turn: the conversation so far
// (text), an image for the last user message, and the options.
type playChatRequest struct {
	Account  string `json:"account"`
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	ReasoningEffort string `json:"reasoning_effort"`
	Image           string `json:"image"` // a data: URI
}

// params is the chat request of q, streamed.
func (q *playChatRequest) params() (*chat.Params, error) {
	if len(q.Messages) == 0 || len(q.Messages) > maxPlayMessages {
		return nil, apierr.Invalidf("messages", "invalid_value", "Send 1 to %d messages.", maxPlayMessages)
	}
	p := &chat.Params{Model: q.Model, Stream: true}
	if q.ReasoningEffort != "" {
		p.ReasoningEffort = &q.ReasoningEffort
	}
	for i, m := range q.Messages {
		if m.Role != chat.RoleUser && m.Role != chat.RoleAssistant {
			return nil, apierr.Invalidf("messages", "invalid_value", "A message's role is user or assistant.")
		}
		var content any = m.Content
		if i == len(q.Messages)-1 && q.Image != "" {
			if m.Role != chat.RoleUser {
				return nil, apierr.Invalidf("image", "invalid_value", "An image goes with a user message.")
			}
			content = []any{
				map[string]any{"type": "text", "text": m.Content},
				map[string]any{"type": "image_url", "image_url": map[string]string{"url": q.Image}},
			}
		}
		raw, err := json.Marshal(content)
		if err != nil {
			return nil, err
		}
		p.Messages = append(p.Messages, chat.ParamsMessage{Role: m.Role, Content: raw})
	}
	return p, nil
}

// playChat runs one chat turn for the account the operator picked,
// through the API's own chat completions handler (httpapi.ChatCompletions
// on the same gateway): the same validation, admission, usage, heartbeats
// and stream as a client gets, OpenAI's chunks included, which
// playground.js reads. Errors are the API's JSON error envelope.
func (c *Console) playChat(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var q playChatRequest
	err := decodeJSON(w, r, maxPlayChatBody, &q)
	if err == nil && c.chat == nil {
		err = &apierr.Error{Kind: apierr.NotFound, Code: "not_found", Message: "Chat is not available on this server."}
	}
	if err == nil {
		err = c.billable(ctx, q.Account)
	}
	var params *chat.Params
	if err == nil {
		params, err = q.params()
	}
	var body []byte
	if err == nil {
		body, err = json.Marshal(params)
	}
	if err != nil {
		return c.jsonError(w, r, err)
	}
	c.record(ctx, "playground.chat", q.Account, "model "+q.Model)
	forward(w, r, c.chat, q.Account, body)
	return nil
}

// forward serves body, an API request's JSON, to the API's handler h as
// a request of account: the console's session stands for the account's
// key (the operator picked the account, and billable checked it).
func forward(w http.ResponseWriter, r *http.Request, h http.Handler, account string, body []byte) {
	api := r.Clone(auth.WithAccount(r.Context(), account))
	api.Body, api.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	api.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(w, api)
}

// imageParams are the image form's fields of an images request, as POST
// /v1/images/generations takes them.
type imageParams struct {
	Model          string `json:"model"`
	Prompt         string `json:"prompt"`
	N              int    `json:"n,omitempty"`
	Size           string `json:"size,omitempty"`
	Quality        string `json:"quality,omitempty"`
	OutputFormat   string `json:"output_format,omitempty"`
	ResponseFormat string `json:"response_format,omitempty"`
}

// playImageRequest is the playground's image form: the account to bill
// and the request.
type playImageRequest struct {
	Account string `json:"account"`
	imageParams
}

func (q *playImageRequest) bill() (string, string) { return q.Account, q.Model }
func (q *playImageRequest) request() any           { return q.imageParams }

// speechParams are the speech form's fields of a speech request, as
// POST /v1/audio/speech takes them.
type speechParams struct {
	Model          string `json:"model"`
	Input          string `json:"input"`
	Voice          string `json:"voice,omitempty"`
	ResponseFormat string `json:"response_format,omitempty"`
}

// playSpeechRequest is the playground's speech form: the account to bill
// and the request.
type playSpeechRequest struct {
	Account string `json:"account"`
	speechParams
}

func (q *playSpeechRequest) bill() (string, string) { return q.Account, q.Model }
func (q *playSpeechRequest) request() any           { return q.speechParams }

// playForm is a playground form that is an API request with the account
// to bill: its account and model, and the API request's body.
type playForm interface {
	bill() (account, model string)
	request() any
}

// playImage makes images for the account the operator picked, through
// the API's own images handler (httpapi.GenerateImages on the same
// service): the same validation, credits, routing and answer as a client
// gets (OpenAI's ImagesResponse: data[].b64_json, or data[].url, a link
// to our own storage), which playground.js shows.
func (c *Console) playImage(p *Page, w http.ResponseWriter, r *http.Request) error {
	return c.playAPI(w, r, c.images, "image", "Images are not available on this server.", &playImageRequest{})
}

// playSpeech speaks for the account the operator picked, through the
// API's own speech handler (httpapi.Speech on the same service): the
// audio streams back as the vendor makes it (playground.js plays it as it
// arrives). A failure after the first byte cuts the response short, as
// the API's does.
func (c *Console) playSpeech(p *Page, w http.ResponseWriter, r *http.Request) error {
	return c.playAPI(w, r, c.speech, "speech", "Speech is not available on this server.", &playSpeechRequest{})
}

// playAPI decodes form q from r and serves its request to the API's
// handler h (nil: the 404 unavailable) for the account q bills, which
// must exist; the audit log records it as playground.<action>. Errors
// before h runs are the API's JSON error envelope, as h's are.
func (c *Console) playAPI(w http.ResponseWriter, r *http.Request, h http.Handler, action, unavailable string, q playForm) error {
	err := decodeJSON(w, r, maxPlayMediaBody, q)
	if err == nil && h == nil {
		err = &apierr.Error{Kind: apierr.NotFound, Code: "not_found", Message: unavailable}
	}
	account, model := q.bill()
	if err == nil {
		err = c.billable(r.Context(), account)
	}
	var body []byte
	if err == nil {
		body, err = json.Marshal(q.request())
	}
	if err != nil {
		return c.jsonError(w, r, err)
	}
	c.record(r.Context(), "playground."+action, account, "model "+model)
	forward(w, r, h, account, body)
	return nil
}

// playJobRequest is the playground's job form.
type playJobRequest struct {
	Account  string `json:"account"`
	Type     string `json:"type"`
	Model    string `json:"model"`
	Prompt   string `json:"prompt"`
	Duration int    `json:"duration"`
}

// playJob creates a job for the account the operator picked; the answer
// is the job's state (as /console/jobs/{id}/status), which
// playground.js then polls.
func (c *Console) playJob(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var q playJobRequest
	err := decodeJSON(w, r, maxPlayJobBody, &q)
	if err == nil && c.cfg.JobService == nil {
		err = noJobs
	}
	if err == nil {
		err = c.billable(ctx, q.Account)
	}
	var j *jobs.Job
	if err == nil {
		req := &jobs.CreateRequest{Type: q.Type, Model: q.Model, Prompt: q.Prompt}
		if q.Duration != 0 {
			req.Duration = &q.Duration
		}
		j, err = c.cfg.JobService.Create(ctx, q.Account, req, "", "")
	}
	if err != nil {
		return c.jsonError(w, r, err)
	}
	c.record(ctx, "playground.job", j.ID, "account "+q.Account+", model "+q.Model)
	return writeJSON(w, http.StatusCreated, jobState{ID: j.ID, Account: j.Account, Status: j.Status, Timeline: timeline(j)})
}
