// Package lambdahttp runs an ordinary http.Handler behind API Gateway REST
// API Lambda proxy integrations: Proxy for buffered responses and Stream for
// response streaming (ResponseTransferMode RESPONSE_STREAM). The handlers
// are the same makers `genway serve` mounts; only the envelope differs.
package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/genway/genway/shared/transport/httpapi"
)

// Request builds the *http.Request that ev describes: method, path,
// multi-value query string and headers, the body (base64-decoded when
// IsBase64Encoded), the client address, and the API Gateway request id in
// the context (see httpapi.ContextWithRequestID). It fails only for a body
// that is not valid base64 or a path that does not parse.
func Request(ctx context.Context, ev events.APIGatewayProxyRequest) (*http.Request, error) {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		b, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return nil, fmt.Errorf("decode base64 request body: %w", err)
		}
		body = b
	}
	path := ev.Path
	if path == "" {
		path = ev.RequestContext.Path
	}
	if path == "" {
		path = "/"
	}
	q := url.Values{}
	if len(ev.MultiValueQueryStringParameters) > 0 {
		for k, vs := range ev.MultiValueQueryStringParameters {
			q[k] = append(q[k], vs...)
		}
	} else {
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
	}
	u := &url.URL{Path: path, RawQuery: q.Encode()}
	if ev.RequestContext.RequestID != "" {
		ctx = httpapi.ContextWithRequestID(ctx, ev.RequestContext.RequestID)
	}
	method := ev.HTTPMethod
	if method == "" {
		method = http.MethodGet
	}
	r, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build request %s %s: %w", method, path, err)
	}
	if len(ev.MultiValueHeaders) > 0 {
		for k, vs := range ev.MultiValueHeaders {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
	} else {
		for k, v := range ev.Headers {
			r.Header.Set(k, v)
		}
	}
	r.Host = r.Header.Get("Host")
	r.RequestURI = u.RequestURI()
	r.ContentLength = int64(len(body))
	if ip := ev.RequestContext.Identity.SourceIP; ip != "" {
		r.RemoteAddr = ip
	}
	return r, nil
}

// Proxy adapts h to a buffered REST API proxy integration: it runs h to
// completion and returns the whole response, base64-encoded unless its
// content type is text. The returned function never returns an error: a
// malformed event gets a 400 response.
func Proxy(h http.Handler) func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	return func(ctx context.Context, ev events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		r, err := Request(ctx, ev)
		if err != nil {
			return badEvent(), nil
		}
		rec := &recorder{header: http.Header{}}
		h.ServeHTTP(rec, r)
		return rec.response(), nil
	}
}

// badEvent is the response to an event that is not a request.
func badEvent() events.APIGatewayProxyResponse {
	return events.APIGatewayProxyResponse{
		StatusCode:        http.StatusBadRequest,
		MultiValueHeaders: map[string][]string{"Content-Type": {"application/json"}},
		Body:              `{"error":{"message":"The request could not be read.","type":"invalid_request_error","param":null,"code":"invalid_body"}}`,
	}
}

// recorder is a buffering http.ResponseWriter.
type recorder struct {
	header      http.Header
	status      int
	wroteHeader bool
	body        bytes.Buffer
}

func (w *recorder) Header() http.Header { return w.header }

func (w *recorder) WriteHeader(code int) {
	if w.wroteHeader || code < 200 {
		return
	}
	w.status, w.wroteHeader = code, true
}

func (w *recorder) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		if w.header.Get("Content-Type") == "" {
			w.header.Set("Content-Type", http.DetectContentType(p))
		}
		w.WriteHeader(http.StatusOK)
	}
	return w.body.Write(p)
}

// Flush is a no-op: a buffered integration sends nothing before the end.
func (w *recorder) Flush() {}

func (w *recorder) response() events.APIGatewayProxyResponse {
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	res := events.APIGatewayProxyResponse{StatusCode: status, MultiValueHeaders: headers(w.header)}
	b := w.body.Bytes()
	if len(b) > 0 {
		if isText(w.header.Get("Content-Type")) {
			res.Body = string(b)
		} else {
			res.Body = base64.StdEncoding.EncodeToString(b)
			res.IsBase64Encoded = true
		}
	}
	return res
}

// headers copies h for a response envelope; Content-Length is recomputed
// by API Gateway and dropped, so a base64 body cannot contradict it.
func headers(h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	for k, vs := range h {
		if strings.EqualFold(k, "Content-Length") {
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// isText reports whether a body of content type ct can travel as a string.
func isText(ct string) bool {
	if ct == "" {
		return false
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return false
	}
	switch {
	case strings.HasPrefix(mt, "text/"),
		mt == "application/json", strings.HasSuffix(mt, "+json"),
		mt == "application/xml", strings.HasSuffix(mt, "+xml"),
		mt == "application/javascript", mt == "application/x-www-form-urlencoded":
		return true
	}
	return false
}
