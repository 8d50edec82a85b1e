// Command bifrostlike is a minimal OpenAI chat-completions gateway built
// the way Bifrost (github.com/maximhq/bifrost) builds its hot path, for
// comparing Genway against it (BenchmarkChatGatewayBifrostLike in
// cmd/genway). It listens on -addr, prints "listening on http://ADDR" and
// proxies POST /v1/chat/completions to the OpenAI-compatible -upstream.
//
// What it imitates: a fasthttp server and a fasthttp client (keep-alive,
// at most 64 connections to the upstream, request and response objects
// from fasthttp's pools); sonic for every JSON decode and encode; typed
// structs, pooled, for the client's request and for the provider's
// response. Per request it decodes the client's request, strips the
// provider prefix of the model ("openai/gpt-4o-mini" is sent upstream as
// "gpt-4o-mini"), encodes the provider request (max_tokens sent as
// max_completion_tokens; a stream asks for usage) and either decodes the
// completion and encodes it to the client, or, for a stream, reads the
// upstream's events in a goroutine that decodes each data: event into the
// response struct and hands it over a channel to the response's stream
// writer, which encodes it as a data: line and flushes it; [DONE] ends it.
//
// What it leaves out: authentication, virtual keys, budgets and rate
// limits, provider keys and their selection, the provider's request queue
// and worker pool, plugins, logging, metrics, fallbacks and retries,
// content other than strings (parts, images, tools) and every request
// parameter but model, messages, max_tokens and stream. An upstream
// error's status and body are passed through as they are.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/bytedance/sonic"
	"github.com/valyala/fasthttp"
)

// Message is a chat message with string content.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// ChatRequest is the client's chat completion request.
type ChatRequest struct {
	Model     string    `json:"model"`
	Messages  []Message `json:"messages"`
	MaxTokens *int      `json:"max_tokens,omitempty"`
	Stream    bool      `json:"stream,omitempty"`
}

// StreamOptions asks the provider for a usage chunk at the end of a stream.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ProviderRequest is the request sent to the upstream.
type ProviderRequest struct {
	Model               string         `json:"model"`
	Messages            []Message      `json:"messages"`
	MaxCompletionTokens *int           `json:"max_completion_tokens,omitempty"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *StreamOptions `json:"stream_options,omitempty"`
}

// Delta is the new part of a message in a stream chunk.
type Delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// Choice is one choice of a completion (Message) or of a stream chunk (Delta).
type Choice struct {
	Index        int      `json:"index"`
	Message      *Message `json:"message,omitempty"`
	Delta        *Delta   `json:"delta,omitempty"`
	FinishReason *string  `json:"finish_reason"`
}

// Usage is the token count of a completion.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// ChatResponse is a completion or one chunk of a stream.
type ChatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage,omitempty"`
}

var (
	requestPool  = sync.Pool{New: func() any { return new(ChatRequest) }}
	responsePool = sync.Pool{New: func() any { return new(ChatResponse) }}
)

func getRequest() *ChatRequest {
	r := requestPool.Get().(*ChatRequest)
	*r = ChatRequest{Messages: r.Messages[:0]}
	return r
}

func getResponse() *ChatResponse {
	r := responsePool.Get().(*ChatResponse)
	*r = ChatResponse{}
	return r
}

// gateway proxies chat completions to one OpenAI-compatible upstream.
type gateway struct {
	client *fasthttp.Client
	url    string // the upstream's chat completions URL
	key    string // sent as a bearer token if not empty
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "http://127.0.0.1:8080/v1", "OpenAI-compatible base URL")
	key := flag.String("key", "", "API key for the upstream (optional)")
	flag.Parse()
	g := &gateway{
		client: &fasthttp.Client{
			MaxConnsPerHost:     64,
			MaxIdleConnDuration: 30 * time.Second,
			MaxConnWaitTimeout:  10 * time.Second,
			ReadTimeout:         60 * time.Second,
			WriteTimeout:        60 * time.Second,
		},
		url: strings.TrimSuffix(*upstream, "/") + "/chat/completions",
		key: *key,
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stdout, "listening on http://%s\n", ln.Addr())
	srv := &fasthttp.Server{Handler: g.handle, Name: "bifrostlike"}
	log.Fatal(srv.Serve(ln))
}

func (g *gateway) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() || string(ctx.Path()) != "/v1/chat/completions" {
		fail(ctx, fasthttp.StatusNotFound, "not found")
		return
	}
	req := getRequest()
	defer requestPool.Put(req)
	if err := sonic.Unmarshal(ctx.PostBody(), req); err != nil || req.Model == "" {
		fail(ctx, fasthttp.StatusBadRequest, "invalid request")
		return
	}
	model := req.Model
	if i := strings.IndexByte(model, '/'); i >= 0 {
		model = model[i+1:]
	}
	preq := ProviderRequest{Model: model, Messages: req.Messages, MaxCompletionTokens: req.MaxTokens, Stream: req.Stream}
	if req.Stream {
		preq.StreamOptions = &StreamOptions{IncludeUsage: true}
	}
	body, err := sonic.Marshal(&preq)
	if err != nil {
		fail(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	up, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(up)
	up.SetRequestURI(g.url)
	up.Header.SetMethod(fasthttp.MethodPost)
	up.Header.SetContentType("application/json")
	if g.key != "" {
		up.Header.Set("Authorization", "Bearer "+g.key)
	}
	up.SetBodyRaw(body)
	resp.StreamBody = req.Stream
	if err := g.client.Do(up, resp); err != nil {
		fasthttp.ReleaseResponse(resp)
		fail(ctx, fasthttp.StatusBadGateway, "upstream unreachable")
		return
	}
	if resp.StatusCode() != fasthttp.StatusOK {
		ctx.SetStatusCode(resp.StatusCode())
		ctx.SetContentType("application/json")
		ctx.SetBody(resp.Body())
		fasthttp.ReleaseResponse(resp)
		return
	}
	if req.Stream {
		g.stream(ctx, resp)
		return
	}
	defer fasthttp.ReleaseResponse(resp)
	out := getResponse()
	defer responsePool.Put(out)
	if err := sonic.Unmarshal(resp.Body(), out); err != nil {
		fail(ctx, fasthttp.StatusBadGateway, "invalid upstream response")
		return
	}
	js, err := sonic.Marshal(out)
	if err != nil {
		fail(ctx, fasthttp.StatusInternalServerError, err.Error())
		return
	}
	ctx.SetContentType("application/json")
	ctx.Response.SetBodyRaw(js)
}

// fail answers an OpenAI-style error.
func fail(ctx *fasthttp.RequestCtx, status int, msg string) {
	js, _ := sonic.Marshal(map[string]map[string]string{"error": {"message": msg}})
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.Response.SetBodyRaw(js)
}

// stream relays the upstream's stream in resp (released here) chunk by
// chunk: a goroutine decodes each event and sends it on a channel; the
// response's stream writer encodes, writes and flushes each.
func (g *gateway) stream(ctx *fasthttp.RequestCtx, resp *fasthttp.Response) {
	chunks := make(chan *ChatResponse, 16)
	stop := make(chan struct{})
	go func() {
		defer close(chunks)
		defer fasthttp.ReleaseResponse(resp)
		defer resp.CloseBodyStream()
		var body io.Reader = resp.BodyStream()
		if body == nil {
			body = bytes.NewReader(resp.Body())
		}
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 4096), 1<<20)
		for sc.Scan() {
			data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data:"))
			if !ok {
				continue
			}
			data = bytes.TrimSpace(data)
			if bytes.Equal(data, []byte("[DONE]")) {
				break
			}
			chunk := getResponse()
			if err := sonic.Unmarshal(data, chunk); err != nil {
				responsePool.Put(chunk)
				continue
			}
			select {
			case chunks <- chunk:
			case <-stop:
				responsePool.Put(chunk)
				return
			}
		}
		io.Copy(io.Discard, body) // the rest, so that the connection is reused
	}()
	ctx.SetContentType("text/event-stream")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetBodyStreamWriter(func(w *bufio.Writer) {
		defer close(stop)
		for chunk := range chunks {
			js, err := sonic.Marshal(chunk)
			responsePool.Put(chunk)
			if err != nil {
				return
			}
			w.WriteString("data: ")
			w.Write(js)
			w.WriteString("\n\n")
			if err := w.Flush(); err != nil {
				return
			}
		}
		w.WriteString("data: [DONE]\n\n")
		w.Flush()
	})
}
