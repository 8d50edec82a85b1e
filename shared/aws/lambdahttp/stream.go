package lambdahttp

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// streamBuffer is how much the stream writer gathers between flushes; a
// handler that never flushes still sends every streamBuffer bytes.
const streamBuffer = 4 << 10

// Stream adapts h to a REST API proxy integration with response streaming.
// It always returns a *events.APIGatewayProxyStreamingResponse (stream and
// non-stream requests alike: the integration is one or the other), whose
// Body is read by the Lambda runtime while h is still running, so bytes
// reach API Gateway as h flushes them.
//
// h runs in its own goroutine, writing through an http.ResponseWriter that
// implements http.Flusher into an io.Pipe. The returned function waits for
// h's first WriteHeader, Write or Flush (or h's return) to learn the status
// and headers. h's context is cancelled when the invocation ends: when the
// runtime closes the response after sending it, or at the invocation
// deadline. A panic in h becomes a 500 if nothing was sent yet, else it cuts
// the stream short.
func Stream(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
		ctx, cancel := context.WithCancel(ctx)
		r, err := Request(ctx, ev)
		if err != nil {
			cancel()
			bad := badEvent()
			return &events.APIGatewayProxyStreamingResponse{StatusCode: bad.StatusCode, MultiValueHeaders: bad.MultiValueHeaders, Body: strings.NewReader(bad.Body)}, nil
		}
		pr, pw := io.Pipe()
		w := &streamWriter{header: http.Header{}, pw: pw, ready: make(chan struct{})}
		w.bw = bufio.NewWriterSize(pw, streamBuffer)
		go w.serve(h, r)

		select {
		case <-w.ready:
		case <-ctx.Done():
			cancel()
			pr.CloseWithError(ctx.Err())
			return nil, fmt.Errorf("stream %s %s: no response before the invocation ended: %w", ev.HTTPMethod, ev.Path, ctx.Err())
		}
		return &events.APIGatewayProxyStreamingResponse{
			StatusCode:        w.status,
			MultiValueHeaders: w.sent,
			Body:              &body{pr: pr, cancel: cancel},
		}, nil
	}
}

// body is the streaming response body: closing it (the runtime does, once
// the response is sent or abandoned) cancels the handler.
type body struct {
	pr     *io.PipeReader
	cancel context.CancelFunc
}

func (b *body) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *body) Close() error {
	b.cancel()
	return b.pr.Close()
}

// streamWriter is the http.ResponseWriter and http.Flusher of Stream. Its
// methods are called from the handler's goroutine only, as net/http
// requires; ready publishes status and sent to the Stream goroutine.
type streamWriter struct {
	header http.Header
	pw     *io.PipeWriter
	bw     *bufio.Writer

	once   sync.Once
	ready  chan struct{}
	status int
	sent   map[string][]string // the headers as of WriteHeader
}

func (w *streamWriter) Header() http.Header { return w.header }

func (w *streamWriter) WriteHeader(code int) {
	if code < 200 {
		return // informational responses cannot be streamed through API Gateway
	}
	w.once.Do(func() {
		w.status = code
		w.sent = headers(w.header)
		close(w.ready)
	})
}

func (w *streamWriter) started() bool {
	select {
	case <-w.ready:
		return true
	default:
		return false
	}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if !w.started() {
		if w.header.Get("Content-Type") == "" && len(p) > 0 {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	return w.bw.Write(p)
}

// Flush sends the status, headers and everything written so far to API
// Gateway now.
func (w *streamWriter) Flush() {
	w.WriteHeader(http.StatusOK)
	w.bw.Flush()
}

// serve runs h and ends the stream when h returns.
func (w *streamWriter) serve(h http.Handler, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if !w.started() {
				w.header = http.Header{"Content-Type": {"application/json"}}
				w.WriteHeader(http.StatusInternalServerError)
				b, _ := json.Marshal(map[string]any{"error": map[string]any{
					"message": "Internal error.", "type": "api_error", "param": nil, "code": "internal_error"}})
				w.bw.Write(b)
				w.bw.Flush()
				w.pw.Close()
				return
			}
			w.pw.CloseWithError(fmt.Errorf("handler panic: %v", v))
			return
		}
		w.WriteHeader(http.StatusOK)
		w.bw.Flush()
		w.pw.Close()
	}()
	h.ServeHTTP(w, r)
}
