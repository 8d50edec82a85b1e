// Package httpapi is the HTTP edge of the service: one handler maker per
// route, request decoding and validation, response encoding, and the single
// place where errors become HTTP statuses and the OpenAI error envelope (a
// route's handler returns its error; serve writes it).
// `genway serve` mounts every maker on one mux; each Lambda function mounts
// its own.
package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/route"
)

// MaxBodyBytes is the largest request body accepted: the Lambda synchronous
// payload limit. Only a chat or Responses request with an image may be
// that large; the others are limited to the text limit (see Bodies).
const MaxBodyBytes = 6 << 20

// envelope is the OpenAI error body. status is the HTTP status the error
// stands for, and overloaded says it is an upstream's 503 or 529 (its
// provider is overloaded), for the Messages API's envelope, which another
// encoder of a stream makes from this one (anthropicError).
type envelope struct {
	Error      errorBody `json:"error"`
	status     int
	overloaded bool
}

type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// statusOf maps a kind to its status and OpenAI error type.
func statusOf(k apierr.Kind) (int, string) {
	switch k {
	case apierr.Invalid:
		return http.StatusBadRequest, "invalid_request_error"
	case apierr.Unauthenticated:
		return http.StatusUnauthorized, "authentication_error"
	case apierr.InsufficientQuota:
		return http.StatusPaymentRequired, "insufficient_quota"
	case apierr.PermissionDenied:
		return http.StatusForbidden, "permission_error"
	case apierr.NotFound:
		return http.StatusNotFound, "not_found_error"
	case apierr.MethodNotAllowed:
		return http.StatusMethodNotAllowed, "invalid_request_error"
	case apierr.Conflict:
		return http.StatusConflict, "invalid_request_error"
	case apierr.TooLarge:
		return http.StatusRequestEntityTooLarge, "invalid_request_error"
	case apierr.UnsupportedMedia:
		return http.StatusUnsupportedMediaType, "invalid_request_error"
	case apierr.RateLimited:
		return http.StatusTooManyRequests, "rate_limit_error"
	case apierr.Upstream:
		return http.StatusBadGateway, "api_error"
	case apierr.UpstreamUnavailable, apierr.Unavailable:
		return http.StatusServiceUnavailable, "api_error"
	case apierr.UpstreamTimeout:
		return http.StatusGatewayTimeout, "api_error"
	default:
		return http.StatusInternalServerError, "api_error"
	}
}

// toAPIError turns any error into the client-facing *apierr.Error: coded
// errors as they are, a vendor's failure (route.VendorFailure) as its
// Fault says (vendorAPIError), anything else an internal error whose
// message carries only the request id.
func toAPIError(err error, requestID string) *apierr.Error {
	if e := apierr.As(err); e != nil {
		return e
	}
	if errors.Is(err, auth.ErrKeyNotFound) {
		return &apierr.Error{Kind: apierr.NotFound, Code: "key_not_found", Message: "No key with that id or prefix."}
	}
	if f, ok := vendorFault(err); ok {
		return vendorAPIError(f, requestID)
	}
	return &apierr.Error{Kind: apierr.Internal, Code: "internal_error",
		Message: fmt.Sprintf("Internal error; quote request id %s when reporting it.", requestID)}
}

// vendorFault returns the Fault of the vendor failure err is or wraps.
func vendorFault(err error) (route.Fault, bool) {
	var vf route.VendorFailure
	if !errors.As(err, &vf) {
		return route.Fault{}, false
	}
	return vf.Fault(), true
}

// vendorAPIError is the client-facing error of a vendor's failure, by its
// kind: a refused prompt 400 content_policy with the vendor's words (or
// naming the provider); a rejected request 400 upstream_invalid_request
// with the vendor's words; 429 upstream_rate_limited with Retry-After (1 s
// if the vendor gave none); 503 upstream_unavailable; 504
// upstream_timeout; any other 502 upstream_error, with the Fault's
// message if it has one (a file of a type no image may have), else
// naming the provider and the request id. Only the Fault's Message is
// ever the vendor's words.
func vendorAPIError(f route.Fault, requestID string) *apierr.Error {
	switch f.Kind {
	case route.VendorContentPolicy:
		msg := f.Message
		if msg == "" {
			msg = fmt.Sprintf("The %s provider refused the prompt.", f.Provider)
		}
		return &apierr.Error{Kind: apierr.Invalid, Code: "content_policy", Message: msg}
	case route.VendorRejected:
		msg := f.Message
		if msg == "" {
			msg = "The upstream provider rejected the request."
		}
		return &apierr.Error{Kind: apierr.Invalid, Code: "upstream_invalid_request", Message: msg}
	case route.VendorRateLimited:
		ra := f.RetryAfter
		if ra <= 0 {
			ra = time.Second
		}
		return &apierr.Error{Kind: apierr.RateLimited, Code: "upstream_rate_limited", RetryAfter: ra,
			Message: fmt.Sprintf("The %s provider is rate limiting requests; retry later.", f.Provider)}
	case route.VendorUnavailable:
		return &apierr.Error{Kind: apierr.UpstreamUnavailable, Code: "upstream_unavailable",
			Message: fmt.Sprintf("The %s provider is unavailable.", f.Provider)}
	case route.VendorTimeout:
		return &apierr.Error{Kind: apierr.UpstreamTimeout, Code: "upstream_timeout",
			Message: fmt.Sprintf("The %s provider did not answer in time.", f.Provider)}
	}
	if f.Message != "" {
		return &apierr.Error{Kind: apierr.Upstream, Code: "upstream_error", Message: f.Message}
	}
	return &apierr.Error{Kind: apierr.Upstream, Code: "upstream_error",
		Message: fmt.Sprintf("The %s provider failed (request id %s).", f.Provider, requestID)}
}

// ErrorStatus is the HTTP status of err and the message a client is shown,
// as the API answers it (the operator console's pages use it).
func ErrorStatus(err error, requestID string) (int, string) {
	e := toAPIError(err, requestID)
	status, _ := statusOf(e.Kind)
	return status, e.Message
}

// WriteError writes err as the API does: its status and the OpenAI error
// envelope, logged (the operator console's scripts get the same).
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	writeError(w, r, log, err)
}

// errorEnvelope returns the status, headers and OpenAI envelope for err.
func errorEnvelope(err error, requestID string) (int, envelope, *apierr.Error) {
	e := toAPIError(err, requestID)
	status, typ := statusOf(e.Kind)
	body := errorBody{Message: e.Message, Type: typ}
	if e.Param != "" {
		p := e.Param
		body.Param = &p
	}
	if e.Code != "" {
		c := e.Code
		body.Code = &c
	}
	env := envelope{Error: body, status: status}
	f, ok := vendorFault(err)
	env.overloaded = ok && f.Overloaded()
	return status, env, e
}

// writeError writes err as an OpenAI error response and logs it (5xx at
// error level, with the cause; 4xx at info).
//
// A request of the Messages API (messagesAPI) has its errors in
// Anthropic's envelope instead (anthropicError), with a request-id
// header, whichever layer refused it (authentication, rate limits, body
// limits, the mux, the handler).
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	rid := RequestID(r.Context())
	status, env, e := errorEnvelope(err, rid)
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	var body any = env
	if messagesAPI(r) {
		w.Header().Set("request-id", rid)
		var a anthropicEnvelope
		status, a = anthropicError(env)
		a.RequestID = rid
		body = a
	}
	if log != nil {
		if status >= 500 {
			log.ErrorContext(r.Context(), "request failed", "request_id", rid, "status", status, "err", err)
		} else {
			log.InfoContext(r.Context(), "request refused", "request_id", rid, "status", status, "code", e.Code, "err", err)
		}
	}
	writeJSON(w, status, body)
}

// handlerFunc is a public route's handler: it writes its answer, or
// returns the error that stands for it (nothing written yet), which serve
// writes. A handler that began its answer (a stream) deals with a later
// failure itself and returns nil.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// serve adapts h to an http.Handler: the error h returns is answered and
// logged by writeError (in the request's API shape: the OpenAI envelope,
// Anthropic's for the Messages API), the one place a route's error is
// written. log may be nil (not logged).
func serve(log *slog.Logger, h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			writeError(w, r, log, err)
		}
	})
}

// statusOverloaded is the status of Anthropic's overloaded_error.
const statusOverloaded = route.StatusOverloaded

// messagesAPI reports whether r is a request of the Messages API
// (/v1/messages, /v1/messages/count_tokens), whose errors are in
// Anthropic's envelope.
func messagesAPI(r *http.Request) bool {
	return r.URL.Path == "/v1/messages" || strings.HasPrefix(r.URL.Path, "/v1/messages/")
}

// anthropicEnvelope is the Messages API's error body:
// {"type": "error", "error": {"type", "message"}, "request_id"}.
// https://docs.anthropic.com/en/api/errors
type anthropicEnvelope struct {
	Type      string           `json:"type"`
	Error     anthropicErrBody `json:"error"`
	RequestID string           `json:"request_id,omitempty"`
}

type anthropicErrBody struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// anthropicError returns env, an error's OpenAI envelope, in Anthropic's
// shape, and the status to answer it with: its own, typed by it
// (invalid_request_error 400 and other 4xx,
// authentication_error 401, billing_error 402, permission_error 403,
// not_found_error 404, request_too_large 413, rate_limit_error 429,
// timeout_error 504, api_error 500 and other 5xx), an upstream's
// overload (503 or 529) as overloaded_error 529, as Anthropic says it.
// The field at fault, which the envelope has no place for, begins the
// message ("tools[2].type: ...").
func anthropicError(env envelope) (int, anthropicEnvelope) {
	typ, status := "invalid_request_error", env.status
	switch {
	case env.overloaded:
		typ, status = "overloaded_error", statusOverloaded
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status == http.StatusPaymentRequired:
		typ = "billing_error"
	case status == http.StatusForbidden:
		typ = "permission_error"
	case status == http.StatusNotFound:
		typ = "not_found_error"
	case status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusGatewayTimeout:
		typ = "timeout_error"
	case status >= 500:
		typ = "api_error"
	}
	msg := env.Error.Message
	if p := env.Error.Param; p != nil && *p != "" {
		msg = *p + ": " + msg
	}
	return status, anthropicEnvelope{Type: "error", Error: anthropicErrBody{Type: typ, Message: msg}}
}

// writeJSON writes v as JSON with status; the error is the write's (the
// client went away).
func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"message":"Internal error encoding the response.","type":"api_error","param":null,"code":"internal_error"}}`)
	}
	return writeJSONBytes(w, status, b)
}

// writeJSONBytes is writeJSON of a body already encoded, b (which it may
// extend).
func writeJSONBytes(w http.ResponseWriter, status int, b []byte) error {
	w.Header()["Content-Type"] = jsonContentType
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, err := w.Write(append(b, '\n'))
	return err
}

// jsonContentType is the Content-Type of the JSON answers, one slice
// shared by all of them (net/http reads it; of capacity 1, an append
// copies it).
var jsonContentType = []string{"application/json"}

// marshal is json.Marshal without HTML escaping: a link's "&" stays "&"
// (not "\u0026"), so that what a client prints can be pasted as it is.
// Every JSON answer of the API is encoded with it.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// readBody returns the request body after checking its media type and size:
// 415 for a body that is not application/json, 413 past the text limit (a
// request without images: see Bodies).
func readBody(r *http.Request) ([]byte, error) {
	return readBodyUpTo(r, textLimit(r))
}

// readBodyUpTo is readBody with a limit of its own: MaxBodyBytes for the
// routes whose requests may carry images (then checkTextBody).
func readBodyUpTo(r *http.Request, limit int64) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !(len(mt) > 5 && mt[len(mt)-5:] == "+json")) {
			return nil, &apierr.Error{Kind: apierr.UnsupportedMedia, Code: "unsupported_media_type",
				Message: fmt.Sprintf("Content-Type must be application/json; got %q.", ct)}
		}
	}
	return readLimited(r, limit)
}

// decodeJSON reads the body (see readBody) and decodes it into v: 400
// invalid_json for malformed JSON or a wrong type (naming the field).
func decodeJSON(r *http.Request, v any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return unmarshal(b, v)
}

// unmarshal decodes b into v with errors as *apierr.Error.
func unmarshal(b []byte, v any) error { return decodeBytes(b, v, false) }

// unmarshalStrict is unmarshal that also refuses a field v does not have
// (matched as encoding/json matches names, case-insensitively): a 400
// unknown_parameter naming it, before anything is done with the request.
func unmarshalStrict(b []byte, v any) error { return decodeBytes(b, v, true) }

// decodeBytes is unmarshal, strict or not.
func decodeBytes(b []byte, v any, strict bool) error {
	if len(b) == 0 {
		return apierr.Invalidf("", "invalid_json", "The request body is empty; send a JSON object.")
	}
	var err error
	if strict {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err = dec.Decode(v); err == nil {
			if _, end := dec.Token(); end != io.EOF {
				err = errors.New("more after the top-level value")
			}
		}
	} else {
		err = json.Unmarshal(b, v)
	}
	var te *json.UnmarshalTypeError
	// An amount of credits with more than 6 decimal places, past the
	// maximum, or not a number.
	field, reason, isAmount := credits.AmountFieldError(err)
	switch {
	case err == nil:
		return nil
	case apierr.As(err) != nil: // a field's own decoder refused its value, naming it
		return apierr.As(err)
	case isAmount:
		field = jsonPath(field)
		return apierr.Invalidf(field, "invalid_value", "%s: %s.", fieldName(field), reason)
	case strict && strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.TrimPrefix(err.Error(), "json: unknown field ")
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return apierr.Invalidf(name, "unknown_parameter", "Unknown field %q: this route does not take it.", name)
	case errors.As(err, &te):
		field := jsonPath(te.Field)
		return apierr.Invalidf(field, "invalid_type", "%s must be of JSON type %s, not %s.", fieldName(field), jsonType(te.Type.Kind().String()), te.Value)
	default:
		return &apierr.Error{Kind: apierr.Invalid, Code: "invalid_json", Message: "The request body is not valid JSON: " + err.Error()}
	}
}

// jsonPath is the JSON path of a field as encoding/json reports it, less
// the Go names of embedded structs ("Controls.credit_limit" is
// credit_limit): the request's field names are lower case, Go's are not.
func jsonPath(f string) string {
	parts := strings.Split(f, ".")
	out := parts[:0]
	for _, p := range parts {
		if p != "" && 'A' <= p[0] && p[0] <= 'Z' {
			continue
		}
		out = append(out, p)
	}
	return strings.Join(out, ".")
}

func fieldName(f string) string {
	if f == "" {
		return "The request body"
	}
	return f
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int64", "int32", "float64", "float32", "uint", "uint64":
		return "number"
	case "bool":
		return "boolean"
	case "slice", "array":
		return "array"
	default:
		return "object"
	}
}
