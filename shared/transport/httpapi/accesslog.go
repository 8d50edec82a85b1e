package httpapi

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/metrics"
)

// The access log: one JSON line per request (msg "request") with its
// request id, method, route, status, duration, bytes written, and, where
// the handler learned them, the account, key id, model, tokens and the
// hosted tools a Responses request was served without. Never a key, a
// token or a prompt: only ids, names and counts are recorded.

// reqLog is what a request's handlers note for its access log line.
type reqLog struct {
	mu                 sync.Mutex
	account, keyID     string
	model              string // asked for
	served             string // answered (another, after a fallback)
	attempts           int    // upstream attempts made
	prompt, completion int
	omittedTools       string // the hosted tools left out, comma-separated
}

type reqLogKey struct{}

func noteOf(ctx context.Context) *reqLog {
	l, _ := ctx.Value(reqLogKey{}).(*reqLog)
	return l
}

// notePrincipal records who made the request.
func notePrincipal(ctx context.Context, account, keyID string) {
	if l := noteOf(ctx); l != nil {
		l.mu.Lock()
		l.account, l.keyID = account, keyID
		l.mu.Unlock()
	}
}

// noteModel records the model a request asked for.
func noteModel(ctx context.Context, model string) {
	if l := noteOf(ctx); l != nil {
		l.mu.Lock()
		l.model = model
		l.mu.Unlock()
	}
}

// noteRoute records the model that answered (none if no attempt did) and
// how many attempts were made.
func noteRoute(ctx context.Context, served string, attempts int) {
	if l := noteOf(ctx); l != nil {
		l.mu.Lock()
		l.served, l.attempts = served, attempts
		l.mu.Unlock()
	}
}

// noteOmittedTools records the hosted tools a request was served without.
func noteOmittedTools(ctx context.Context, types []string) {
	if l := noteOf(ctx); l != nil {
		l.mu.Lock()
		l.omittedTools = strings.Join(types, ",")
		l.mu.Unlock()
	}
}

// noteTokens records the tokens an answer used.
func noteTokens(ctx context.Context, prompt, completion int) {
	if l := noteOf(ctx); l != nil {
		l.mu.Lock()
		l.prompt, l.completion = prompt, completion
		l.mu.Unlock()
	}
}

// statusWriter records the status, the bytes written and when the first
// byte was. Unwrap lets http.ResponseController reach the writer's Flush
// and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	first  time.Time
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.first.IsZero() {
		w.first = time.Now()
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap returns the underlying writer (for http.ResponseController).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog writes one line per request to log (nothing if log is nil).
func accessLog(log *slog.Logger, next http.Handler) http.Handler {
	if log == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		note := &reqLog{}
		sw := &statusWriter{ResponseWriter: w}
		r = r.WithContext(context.WithValue(r.Context(), reqLogKey{}, note))
		// A handler that cuts its response short (a stream failed after it
		// began: http.ErrAbortHandler) gets its line too, then the panic
		// goes on to net/http.
		defer func() {
			v := recover()
			logRequest(log, r, sw, note, start, v != nil)
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r)
	})
}

// logRequest writes the access log line of r (aborted: its handler cut
// the response short) and records its metrics.
func logRequest(log *slog.Logger, r *http.Request, sw *statusWriter, note *reqLog, start time.Time, aborted bool) {
	note.mu.Lock()
	defer note.mu.Unlock()
	// At most 15 attributes (20 on Lambda, with the EMF ones), in an
	// array that stays on the stack: the record below copies them.
	var buf [20]slog.Attr
	attrs := append(buf[:0],
		slog.String("request_id", RequestID(r.Context())),
		slog.String("method", r.Method),
		slog.String("route", r.Pattern),
		slog.Int("status", sw.status),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.Int64("bytes", sw.bytes),
	)
	if note.account != "" {
		attrs = append(attrs, slog.String("account", note.account), slog.String("key_id", note.keyID))
	}
	if note.model != "" {
		attrs = append(attrs, slog.String("model", note.model))
	}
	if note.attempts > 0 {
		attrs = append(attrs, slog.String("served_model", note.served), slog.Int("attempts", note.attempts))
	}
	if note.prompt+note.completion > 0 {
		attrs = append(attrs, slog.Int("prompt_tokens", note.prompt), slog.Int("completion_tokens", note.completion))
	}
	if note.omittedTools != "" {
		attrs = append(attrs, slog.String("omitted_tools", note.omittedTools))
	}
	if aborted {
		attrs = append(attrs, slog.Bool("aborted", true))
	}
	d := time.Since(start)
	record(r.Pattern, sw, note, d, start)
	if onLambda {
		attrs = append(attrs, emf(r.Pattern, sw.status, d)...)
	}
	// The handler's own, as Logger.LogAttrs does it but for the caller's
	// program counter (runtime.Callers, a tenth of the line's cost): the
	// source of every request line would be this function.
	if h := log.Handler(); h.Enabled(r.Context(), slog.LevelInfo) {
		rec := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
		rec.AddAttrs(attrs...)
		_ = h.Handle(r.Context(), rec) // as Logger.LogAttrs, which drops the handler's error
	}
}

// record adds the request to the process's metrics (metrics.Default).
func record(route string, sw *statusWriter, note *reqLog, d time.Duration, start time.Time) {
	if route == "" {
		route = "unmatched"
	}
	m := metrics.Default
	var status [3]byte
	m.Add("genway_http_requests_total", "HTTP requests by route and status.", routeStatusLabels,
		[]string{route, string(strconv.AppendInt(status[:0], int64(sw.status), 10))}, 1)
	m.Observe("genway_http_request_seconds", "HTTP request duration (to the end of the answer), by route.", routeLabels, []string{route}, d.Seconds())
	if !sw.first.IsZero() {
		m.Observe("genway_http_first_byte_seconds", "Time to the first byte of the answer, by route (a stream's first event).",
			routeLabels, []string{route}, sw.first.Sub(start).Seconds())
	}
	if model := cmp.Or(note.served, note.model); model != "" && note.prompt+note.completion > 0 {
		m.Add("genway_chat_tokens_total", "Chat tokens, by model and kind (prompt, completion).", modelKindLabels, []string{model, "prompt"}, float64(note.prompt))
		m.Add("genway_chat_tokens_total", "Chat tokens, by model and kind (prompt, completion).", modelKindLabels, []string{model, "completion"}, float64(note.completion))
	}
}

// The label names of record's metrics.
var (
	routeStatusLabels = []string{"route", "status"}
	routeLabels       = []string{"route"}
	modelKindLabels   = []string{"model", "kind"}
)

// onLambda is set in a Lambda function: its access log lines are then in
// CloudWatch Embedded Metric Format too, so the same metrics reach
// CloudWatch from the log, with no API call on the request path.
var onLambda = os.Getenv("AWS_LAMBDA_FUNCTION_NAME") != ""

// emf returns the attributes that make an access log line an Embedded
// Metric Format record: Requests (1), Latency (ms) and Errors5xx (0/1),
// with the dimension Route, in the namespace Genway.
func emf(route string, status int, d time.Duration) []slog.Attr {
	if route == "" {
		route = "unmatched"
	}
	e5 := 0
	if status >= 500 {
		e5 = 1
	}
	return []slog.Attr{
		slog.Any("_aws", map[string]any{
			"Timestamp": time.Now().UnixMilli(),
			"CloudWatchMetrics": []map[string]any{{
				"Namespace":  "Genway",
				"Dimensions": [][]string{{"Route"}},
				"Metrics": []map[string]string{
					{"Name": "Requests", "Unit": "Count"}, {"Name": "Latency", "Unit": "Milliseconds"}, {"Name": "Errors5xx", "Unit": "Count"},
				},
			}},
		}),
		slog.String("Route", route),
		slog.Int("Requests", 1),
		slog.Float64("Latency", float64(d.Microseconds())/1000),
		slog.Int("Errors5xx", e5),
	}
}

// notingSink is a chat.Sink that notes, for the access log, the model
// that answers and the attempts made (at Begin) and the answer's usage
// (before its End).
type notingSink struct {
	chat.Sink
	ctx context.Context
}

func (n notingSink) Begin(a chat.Answer) error {
	noteRoute(n.ctx, a.Model, len(a.Attempts))
	if a.Native {
		noteOmittedTools(n.ctx, nil) // the native answer kept them
	}
	return n.Sink.Begin(a)
}

func (n notingSink) End(resp *chat.Response) error {
	noteTokens(n.ctx, resp.Usage.PromptTokens, resp.Usage.CompletionTokens)
	return n.Sink.End(resp)
}
