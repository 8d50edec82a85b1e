package chat_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/credits"
)

// fakeProvider records the requests it gets; Fn, if set, answers.
type fakeProvider struct {
	needsBytes bool
	mu         sync.Mutex
	got        []*chat.Request
	resp       chat.Response
	err        error
}

func (f *fakeProvider) NeedsImageBytes() bool { return f.needsBytes }

func (f *fakeProvider) Complete(_ context.Context, req *chat.Request) (*chat.Response, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, req)
	if f.err != nil {
		return nil, f.err
	}
	r := f.resp
	return &r, nil
}

func (f *fakeProvider) Stream(ctx context.Context, req *chat.Request, w chat.Writer) (*chat.Response, error) {
	resp, err := f.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := w.Delta(chat.Delta{Content: resp.Content}); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return &chat.Response{FinishReason: resp.FinishReason, Usage: resp.Usage}, nil
}

// sink is a chat.Sink that records its calls; endErr fails End (the
// client went away).
type sink struct {
	calls  []string
	endErr error
}

func (s *sink) Start() error { s.calls = append(s.calls, "start"); return nil }
func (s *sink) Begin(a chat.Answer) error {
	s.calls = append(s.calls, "begin "+a.Model)
	return nil
}
func (s *sink) Delta(d chat.Delta) error {
	s.calls = append(s.calls, "delta "+d.Content)
	return nil
}
func (s *sink) Flush() error { s.calls = append(s.calls, "flush"); return nil }
func (s *sink) End(r *chat.Response) error {
	s.calls = append(s.calls, fmt.Sprintf("end %q %s %d", r.Content, r.FinishReason, r.Usage.TotalTokens))
	return s.endErr
}

func pngBytes(t testing.TB, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func dataURI(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func mustCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Default()
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func params(t *testing.T, body string) *chat.Params {
	t.Helper()
	var p chat.Params
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("test body %s: %v", body, err)
	}
	return &p
}

func TestPrepareErrors(t *testing.T) {
	cat := mustCatalog(t)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"synthetic": &fakeProvider{}, "openai": &fakeProvider{},
	}})
	png1 := dataURI("image/png", pngBytes(t, 2, 2))
	tests := []struct {
		name, body string
		kind       apierr.Kind
		code       string
		param      string
	}{
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "missing_field", "model"},
		{"unknown model", `{"model":"nope/x","messages":[{"role":"user","content":"hi"}]}`, apierr.NotFound, "model_not_found", "model"},
		{"job model", `{"model":"synthetic-music","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "model_type_mismatch", "model"},
		{"not configured", `{"model":"anthropic/claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`, apierr.UpstreamUnavailable, "upstream_unavailable", ""},
		{"no messages", `{"model":"synthetic/echo"}`, apierr.Invalid, "missing_field", "messages"},
		{"empty messages", `{"model":"synthetic/echo","messages":[]}`, apierr.Invalid, "missing_field", "messages"},
		{"bad role", `{"model":"synthetic/echo","messages":[{"role":"robot","content":"hi"}]}`, apierr.Invalid, "invalid_value", "messages[0].role"},
		{"tool without call id", `{"model":"synthetic/echo","messages":[{"role":"tool","content":"hi"}]}`, apierr.Invalid, "missing_field", "messages[0].tool_call_id"},
		{"tool answers nothing", `{"model":"synthetic/echo","messages":[{"role":"tool","tool_call_id":"c1","content":"hi"}]}`, apierr.Invalid, "invalid_value", "messages[0].tool_call_id"},
		{"tool calls in user", `{"model":"synthetic/echo","messages":[{"role":"user","content":"hi","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, apierr.Invalid, "invalid_value", "messages[0].tool_calls"},
		{"tool call no id", `{"model":"synthetic/echo","messages":[{"role":"assistant","content":null,"tool_calls":[{"type":"function","function":{"name":"f"}}]}]}`, apierr.Invalid, "missing_field", "messages[0].tool_calls[0].id"},
		{"tool call no name", `{"model":"synthetic/echo","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{}}]}]}`, apierr.Invalid, "missing_field", "messages[0].tool_calls[0].function.name"},
		{"no role", `{"model":"synthetic/echo","messages":[{"content":"hi"}]}`, apierr.Invalid, "missing_field", "messages[0].role"},
		{"no content", `{"model":"synthetic/echo","messages":[{"role":"user","content":"a"},{"role":"user"}]}`, apierr.Invalid, "missing_field", "messages[1].content"},
		{"null content", `{"model":"synthetic/echo","messages":[{"role":"user","content":null}]}`, apierr.Invalid, "missing_field", "messages[0].content"},
		{"number content", `{"model":"synthetic/echo","messages":[{"role":"user","content":3}]}`, apierr.Invalid, "invalid_value", "messages[0].content"},
		{"empty parts", `{"model":"synthetic/echo","messages":[{"role":"user","content":[]}]}`, apierr.Invalid, "invalid_value", "messages[0].content"},
		{"part type", `{"model":"synthetic/echo","messages":[{"role":"user","content":[{"type":"audio"}]}]}`, apierr.Invalid, "invalid_value", "messages[0].content[0].type"},
		{"part no type", `{"model":"synthetic/echo","messages":[{"role":"user","content":[{"text":"x"}]}]}`, apierr.Invalid, "missing_field", "messages[0].content[0].type"},
		{"part not object", `{"model":"synthetic/echo","messages":[{"role":"user","content":["x"]}]}`, apierr.Invalid, "invalid_value", "messages[0].content[0]"},
		{"text part no text", `{"model":"synthetic/echo","messages":[{"role":"user","content":[{"type":"text"}]}]}`, apierr.Invalid, "missing_field", "messages[0].content[0].text"},
		{"image on text model", `{"model":"synthetic/echo","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"` + png1 + `"}}]}]}`, apierr.Invalid, "model_not_vision_capable", "messages[0].content[1]"},
		{"image in assistant", `{"model":"synthetic/thinker","messages":[{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"` + png1 + `"}}]}]}`, apierr.Invalid, "invalid_value", "messages[0].content[0].type"},
		{"image no url", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, apierr.Invalid, "missing_field", "messages[0].content[0].image_url.url"},
		{"image ftp", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x/a.png"}}]}]}`, apierr.Invalid, "invalid_image_url", "messages[0].content[0].image_url.url"},
		{"data uri svg", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,PHN2Zz4="}}]}]}`, apierr.Invalid, "invalid_image_url", "messages[0].content[1].image_url.url"},
		{"data uri bad base64", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,!!!!"}}]}]}`, apierr.Invalid, "invalid_image_url", "messages[0].content[0].image_url.url"},
		{"data uri not base64", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png,abc"}}]}]}`, apierr.Invalid, "invalid_image_url", "messages[0].content[0].image_url.url"},
		{"data uri not an image", `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,aGVsbG8gd29ybGQ="}}]}]}`, apierr.Invalid, "invalid_image_url", "messages[0].content[0].image_url.url"},
		{"tool type", `{"model":"synthetic/echo","tools":[{"type":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "tools[0].type"},
		{"tool no function", `{"model":"synthetic/echo","tools":[{"type":"function"}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "missing_field", "tools[0].function"},
		{"tool bad name", `{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"a b"}}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tools[0].function.name"},
		{"tool twice", `{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f"}},{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tools[1].function.name"},
		{"tool parameters not object", `{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","parameters":[1]}}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tools[0].function.parameters"},
		{"named tool choice not in tools", `{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"g"}},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tool_choice.function.name"},
		{"tool choice required without tools", `{"model":"synthetic/echo","tool_choice":"required","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tool_choice"},
		{"tool choice unknown", `{"model":"synthetic/echo","tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"always","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "tool_choice"},
		{"store", `{"model":"synthetic/echo","store":true,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "store"},
		{"audio", `{"model":"synthetic/echo","modalities":["text","audio"],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "modalities"},
		{"presence penalty range", `{"model":"synthetic/echo","presence_penalty":3,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "presence_penalty"},
		{"logit bias range", `{"model":"synthetic/echo","logit_bias":{"50256":-200},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "logit_bias"},
		{"functions", `{"model":"synthetic/echo","functions":[{"name":"f"}],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "functions"},
		{"json schema missing", `{"model":"synthetic/echo","response_format":{"type":"json_schema"},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "missing_field", "response_format.json_schema"},
		{"json schema no name", `{"model":"synthetic/echo","response_format":{"type":"json_schema","json_schema":{"schema":{}}},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "response_format.json_schema.name"},
		{"json schema not object", `{"model":"synthetic/echo","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":true}},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "response_format.json_schema.schema"},
		{"response format type", `{"model":"synthetic/echo","response_format":{"type":"yaml"},"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "response_format.type"},
		{"n 2", `{"model":"synthetic/echo","n":2,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "n"},
		{"logprobs", `{"model":"synthetic/echo","logprobs":true,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "unsupported_parameter", "logprobs"},
		{"max_tokens zero", `{"model":"synthetic/echo","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_tokens"},
		{"max_tokens negative", `{"model":"synthetic/echo","max_tokens":-3,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_tokens"},
		{"max_tokens fraction", `{"model":"synthetic/echo","max_tokens":1.5,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_tokens"},
		{"max_tokens string", `{"model":"synthetic/echo","max_tokens":"10","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_tokens"},
		{"max_completion_tokens zero", `{"model":"synthetic/echo","max_completion_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_completion_tokens"},
		{"alias conflict", `{"model":"synthetic/echo","max_tokens":5,"max_completion_tokens":6,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "max_completion_tokens"},
		{"effort empty", `{"model":"synthetic/thinker","reasoning_effort":"","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "reasoning_effort"},
		{"effort unknown", `{"model":"synthetic/echo","reasoning_effort":"max","messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "reasoning_effort"},
		{"temperature", `{"model":"synthetic/echo","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "temperature"},
		{"top_p", `{"model":"synthetic/echo","top_p":-1,"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "top_p"},
		{"stop", `{"model":"synthetic/echo","stop":["a","b","c","d","e"],"messages":[{"role":"user","content":"hi"}]}`, apierr.Invalid, "invalid_value", "stop"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := gw.Prepare(context.Background(), params(t, tt.body))
			e := apierr.As(err)
			if e == nil {
				t.Fatalf("Prepare(%s) = %v; want *apierr.Error", tt.body, err)
			}
			if e.Kind != tt.kind || e.Code != tt.code || e.Param != tt.param {
				t.Errorf("Prepare(%s) = kind %d code %q param %q; want kind %d code %q param %q",
					tt.body, e.Kind, e.Code, e.Param, tt.kind, tt.code, tt.param)
			}
		})
	}
}

func TestPrepare(t *testing.T) {
	cat := mustCatalog(t)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"synthetic": &fakeProvider{}, "openai": &fakeProvider{},
	}})
	pngData := pngBytes(t, 3, 2)
	tests := []struct {
		name  string
		body  string
		check func(t *testing.T, c *chat.Call)
	}{
		{"developer is system", `{"model":"synthetic/echo","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if got := c.Request.Messages[0].Role; got != chat.RoleSystem {
					t.Errorf("Messages[0].Role = %q; want %q", got, chat.RoleSystem)
				}
			}},
		{"alias same value", `{"model":"synthetic/echo","max_tokens":7,"max_completion_tokens":7,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if c.Request.MaxTokens != 7 {
					t.Errorf("MaxTokens = %d; want 7", c.Request.MaxTokens)
				}
			}},
		{"max_completion_tokens alone", `{"model":"synthetic/echo","max_completion_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if c.Request.MaxTokens != 9 {
					t.Errorf("MaxTokens = %d; want 9", c.Request.MaxTokens)
				}
			}},
		{"max_tokens capped at model", `{"model":"synthetic/echo","max_tokens":1000000,"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if c.Request.MaxTokens != 4096 {
					t.Errorf("MaxTokens = %d; want 4096", c.Request.MaxTokens)
				}
			}},
		{"effort dropped without reasoning", `{"model":"synthetic/echo","reasoning_effort":"high","messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if c.Request.ReasoningEffort != "" {
					t.Errorf("ReasoningEffort = %q; want empty", c.Request.ReasoningEffort)
				}
			}},
		{"effort kept with reasoning", `{"model":"synthetic/thinker","reasoning_effort":"medium","messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if c.Request.ReasoningEffort != "medium" {
					t.Errorf("ReasoningEffort = %q; want medium", c.Request.ReasoningEffort)
				}
			}},
		{"stop string", `{"model":"synthetic/echo","stop":"END","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			func(t *testing.T, c *chat.Call) {
				if len(c.Request.Stop) != 1 || c.Request.Stop[0] != "END" || !c.Stream {
					t.Errorf("Stop, Stream = %q, %v; want [END], true", c.Request.Stop, c.Stream)
				}
			}},
		{"parts and data URI", `{"model":"openai/gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"what"},{"type":"image_url","image_url":{"url":"` + dataURI("image/jpeg", pngData) + `","detail":"low"}},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			func(t *testing.T, c *chat.Call) {
				parts := c.Request.Messages[0].Parts
				if len(parts) != 3 || parts[0].Text != "what" {
					t.Fatalf("Parts = %+v; want text then two images", parts)
				}
				// Mislabelled data is forgiven: the sniffed type wins.
				if img := parts[1].Image; img == nil || img.MediaType != "image/png" || !bytes.Equal(img.Data, pngData) {
					t.Errorf("Parts[1].Image = %+v; want png bytes", img)
				}
				// openai takes URLs: not fetched.
				if img := parts[2].Image; img == nil || img.URL != "https://example.com/a.png" || img.Data != nil {
					t.Errorf("Parts[2].Image = %+v; want the URL untouched", img)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := gw.Prepare(context.Background(), params(t, tt.body))
			if err != nil {
				t.Fatalf("Prepare(%s) = %v; want nil error", tt.body, err)
			}
			tt.check(t, c)
		})
	}
}

// allowLoopback lets tests fetch from httptest servers.
func allowLoopback(a netip.Addr) bool { return a.IsLoopback() }

func TestPrepareFetchesForByteProviders(t *testing.T) {
	pngData := pngBytes(t, 4, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a.png":
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Write(pngData)
		case "/big":
			w.Write(bytes.Repeat(pngData, 100))
		case "/text":
			w.Write([]byte("hello there"))
		case "/redirect":
			http.Redirect(w, r, "/a.png", http.StatusFound)
		case "/redirect-v6": // the dial check refuses ::1 before connecting
			_, port, _ := strings.Cut(r.Host, ":")
			http.Redirect(w, r, "http://[::1]:"+port+"/a.png", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cat := mustCatalog(t)
	prov := &fakeProvider{needsBytes: true}
	body := func(u string) string {
		return `{"model":"synthetic/thinker","messages":[{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"` + u + `"}}]}]}`
	}
	tests := []struct {
		name    string
		allow   func(netip.Addr) bool
		url     string
		wantErr string // substring of the message; "" for success
	}{
		{"fetched", allowLoopback, srv.URL + "/a.png", ""},
		{"redirect followed", allowLoopback, srv.URL + "/redirect", ""},
		{"loopback refused by default", nil, srv.URL + "/a.png", "could not be fetched"},
		{"names checked at dial time", nil, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1) + "/a.png", "could not be fetched"},
		{"redirect hop checked", func(a netip.Addr) bool { return a == netip.MustParseAddr("127.0.0.1") }, srv.URL + "/redirect-v6", "could not be fetched"},
		{"too big", allowLoopback, srv.URL + "/big", "larger than"},
		{"not an image", allowLoopback, srv.URL + "/text", "not a png"},
		{"404 says no more than a refusal", allowLoopback, srv.URL + "/missing", "could not be fetched"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov},
				Images: chat.NewImageFetcher(chat.ImageFetcherConfig{Allow: tt.allow, MaxBytes: len(pngData) * 10})})
			c, err := gw.Prepare(context.Background(), params(t, body(tt.url)))
			if err == nil {
				err = gw.FetchImages(context.Background(), c)
			}
			if tt.wantErr != "" {
				e := apierr.As(err)
				if e == nil || e.Param != "messages[0].content[1].image_url.url" || !strings.Contains(e.Message, tt.wantErr) {
					t.Fatalf("Prepare(%s) = %v; want a 400 on the URL containing %q", tt.url, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare(%s) = %v; want nil", tt.url, err)
			}
			img := c.Request.Messages[0].Parts[1].Image
			if img.URL != "" || img.MediaType != "image/png" || !bytes.Equal(img.Data, pngData) {
				t.Errorf("Prepare(%s) image = %s %q %d bytes; want fetched png bytes", tt.url, img.URL, img.MediaType, len(img.Data))
			}
		})
	}
}

func TestPublicAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"8.8.8.8", true},
		{"2606:4700:4700::1111", true},
		{"127.0.0.1", false},
		{"::1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false},
		{"fe80::1", false},
		{"fd00:ec2::254", false},
		{"0.0.0.0", false},
		{"::", false},
		{"::ffff:127.0.0.1", false},
		{"::ffff:10.0.0.1", false},
		{"100.64.0.1", false},
		{"224.0.0.1", false},
		{"255.255.255.255", false},
		{"64:ff9b::a00:1", false},
		{"192.0.2.10", false},
		{"198.51.100.7", false},
		{"203.0.113.200", false},
		{"192.88.99.1", false},
		{"198.19.255.1", false},
		{"2001:db8::1", false},
		{"2001::1", false},
		{"3fff::1", false},
		{"192.0.3.1", true},
		{"203.0.114.1", true},
		{"::127.0.0.1", false},                          // IPv4-compatible (::/96)
		{"::8.8.8.8", false},                            // deprecated whatever it embeds
		{"::ffff:0:127.0.0.1", false},                   // IPv4-translated (::ffff:0:0:0/96)
		{"::ffff:0:8.8.8.8", false},                     // the same
		{"64:ff9b::7f00:1", false},                      // NAT64 of 127.0.0.1
		{"64:ff9b:1::a00:1", false},                     // local-use NAT64
		{"2002:a00:1::1", false},                        // 6to4 of 10.0.0.1
		{"2002:808:808::1", false},                      // 6to4, even of a public address
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", false}, // Teredo
		{"fe80::1%eth0", false},
		{"ff02::1", false},
		{"2a00:1450:4001:81a::200e", true},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			if got := chat.PublicAddr(netip.MustParseAddr(tt.addr)); got != tt.want {
				t.Errorf("PublicAddr(%q) = %v; want %v", tt.addr, got, tt.want)
			}
		})
	}
}

// TestDialCheck: the guard refuses at dial time every address PublicAddr
// refuses, however it is written, and lets an allow function decide when
// given one.
func TestDialCheck(t *testing.T) {
	tests := []struct {
		address string
		allow   func(netip.Addr) bool
		ok      bool
	}{
		{"127.0.0.1:443", nil, false},
		{"[::1]:443", nil, false},
		{"[::7f00:1]:443", nil, false},        // ::127.0.0.1
		{"[::ffff:0:7f00:1]:443", nil, false}, // ::ffff:0:127.0.0.1
		{"[::ffff:7f00:1]:443", nil, false},   // ::ffff:127.0.0.1
		{"[64:ff9b::a9fe:a9fe]:80", nil, false},
		{"[2002:a9fe:a9fe::]:80", nil, false},
		{"169.254.169.254:80", nil, false},
		{"not an address", nil, false},
		{"8.8.8.8:443", nil, true},
		{"[2606:4700:4700::1111]:443", nil, true},
		{"127.0.0.1:443", func(netip.Addr) bool { return true }, true},
	}
	for _, tt := range tests {
		err := chat.DialCheck(tt.allow)("tcp", tt.address, nil)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, chat.ErrRefusedAddr)) {
			t.Errorf("DialCheck(%q) = %v; want ok=%v (refusals wrap ErrRefusedAddr)", tt.address, err, tt.ok)
		}
	}
}

// memRecorder is a recorder that only adds to memory (as BufferedRecorder).
type memRecorder struct{ recorder }

func (*memRecorder) InMemory() bool { return true }

// recorder is a UsageRecorder fake that writes each record at once.
type recorder struct {
	mu      sync.Mutex
	calls   []string
	records []credits.Record
	ctxErr  error // of the last call's context
	err     error
}

func (*recorder) InMemory() bool                         { return false }
func (*recorder) UnwrittenCredits(string) credits.Amount { return 0 }

func (r *recorder) Record(ctx context.Context, rec credits.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ctxErr = ctx.Err()
	r.records = append(r.records, rec)
	r.calls = append(r.calls, rec.Account+" "+rec.Model+" "+strings.Join([]string{
		itoa(int(rec.Tokens.Prompt)), itoa(int(rec.Tokens.Completion)), rec.Cost.String()}, " "))
	return r.err
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestRun: one call runs a completion into its sink, in order, and
// records it once, after End; a failure at the provider leaves a failed
// record, a refusal before any call none.
func TestRun(t *testing.T) {
	cat := mustCatalog(t)
	body := func(stream bool) string {
		return fmt.Sprintf(`{"model":"synthetic/echo","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream)
	}
	gone := errors.New("client gone")
	tests := []struct {
		name      string
		body      string
		provErr   error
		endErr    error
		wantErr   error
		wantCalls string
		wantUsage int
	}{
		{"whole answer", body(false), nil, nil, nil, `start|begin synthetic/echo|end "ok" stop 5|flush`, 1},
		{"stream", body(true), nil, nil, nil, `start|begin synthetic/echo|delta ok|flush|end "" stop 5|flush`, 1},
		{"client gone at the end still records", body(true), nil, gone, gone, `start|begin synthetic/echo|delta ok|flush|end "" stop 5`, 1},
		{"upstream failure", body(false), &chat.UpstreamError{Provider: "synthetic", Kind: chat.UpstreamRateLimited}, nil, nil, `start`, 1},
		{"invalid request", `{"model":"synthetic/echo","messages":[]}`, nil, nil, nil, ``, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: chat.Usage{PromptTokens: 3, CompletionTokens: 2}}, err: tt.provErr}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov}, Usage: rec})
			s := &sink{endErr: tt.endErr}
			err := gw.Run(context.Background(), "acct", params(t, tt.body), s)
			switch {
			case tt.provErr != nil:
				var ue *chat.UpstreamError
				if !errors.As(err, &ue) {
					t.Errorf("Run = %v; want the provider's UpstreamError", err)
				}
			case tt.wantCalls == "":
				if apierr.As(err) == nil {
					t.Errorf("Run = %v; want a validation error", err)
				}
			case !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil):
				t.Errorf("Run = %v; want %v", err, tt.wantErr)
			}
			if got := strings.Join(s.calls, "|"); got != tt.wantCalls {
				t.Errorf("sink calls %q; want %q", got, tt.wantCalls)
			}
			if len(rec.calls) != tt.wantUsage {
				t.Errorf("usage recorded %d times; want %d", len(rec.calls), tt.wantUsage)
			}
			if tt.provErr != nil && len(rec.records) == 1 {
				if r := rec.records[0]; r.Status != credits.StatusFailed || r.Cost != 0 || r.Model != "" || r.ModelAsked != "synthetic/echo" || !strings.HasPrefix(r.Attempts, "synthetic/echo=") {
					t.Errorf("record of a failed request = %+v; want failed, no cost, no model, the attempt", r)
				}
			}
		})
	}
}

// pricedCatalog has an unpriced model and models priced per million input
// and output tokens.
const pricedCatalog = `{
  "providers": [{"name": "synthetic", "kind": "synthetic"}],
  "models": [
    {"id": "synthetic/free", "type": "chat", "provider": "synthetic"},
    {"id": "synthetic/priced", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 2000000}},
    {"id": "synthetic/cheap", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 1, "credits_per_million_output_tokens": 1}},
    {"id": "synthetic/mini", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 0.15, "credits_per_million_output_tokens": 0.6}}
  ]
}`

func TestRecordUsage(t *testing.T) {
	cat, err := catalog.Parse([]byte(pricedCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	tests := []struct {
		name  string
		model string
		usage chat.Usage
		err   error // the recorder's
		want  string
	}{
		{"unpriced", "synthetic/free", chat.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, nil, "acct synthetic/free 3 2 0"},
		{"priced", "synthetic/priced", chat.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, nil, "acct synthetic/priced 3 2 7"},
		// Charged exactly, to the micro-credit: never a whole credit.
		{"exact", "synthetic/cheap", chat.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}, nil, "acct synthetic/cheap 3 2 0.000005"},
		// 100 tokens at 0.15 and 0.6 credits per million: 60 x 0.15 + 40 x
		// 0.6 = 33 millionths of a credit.
		{"a 100-token request at its exact price", "synthetic/mini", chat.Usage{PromptTokens: 60, CompletionTokens: 40, TotalTokens: 100}, nil, "acct synthetic/mini 60 40 0.000033"},
		// 0.15 + 0.6 = 0.75 millionths: rounded up once, for the request.
		{"rounded up once", "synthetic/mini", chat.Usage{PromptTokens: 1, CompletionTokens: 1, TotalTokens: 2}, nil, "acct synthetic/mini 1 1 0.000001"},
		// No usage reported: the input is estimated (see chat.Gateway.Run):
		// ceil(4/4) for the content "hi" as sent, and 4 for its message.
		{"no usage: estimated", "synthetic/cheap", chat.Usage{}, nil, "acct synthetic/cheap 5 0 0.000005"},
		{"recorder error is logged", "synthetic/priced", chat.Usage{PromptTokens: 1, TotalTokens: 1}, errors.New("store down"), "acct synthetic/priced 1 0 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{err: tt.err}
			var logged bytes.Buffer
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": &fakeProvider{resp: chat.Response{Usage: tt.usage}}}, Usage: rec,
				Log: slog.New(slog.NewTextHandler(&logged, nil))})
			s := &sink{}
			if err := gw.Run(context.Background(), "acct", params(t, `{"model":"`+tt.model+`","messages":[{"role":"user","content":"hi"}]}`), s); err != nil {
				t.Fatal(err)
			}
			if !strings.HasSuffix(strings.Join(s.calls, "|"), "|flush") {
				t.Errorf("sink calls %q; want a flush before a recorder that writes at once", s.calls)
			}
			if len(rec.calls) != 1 || rec.calls[0] != tt.want || rec.ctxErr != nil {
				t.Errorf("RecordUsage: Record calls = %q (context error %v); want [%q] (none)", rec.calls, rec.ctxErr, tt.want)
			}
			if got := strings.Contains(logged.String(), "record chat usage"); got != (tt.err != nil) {
				t.Errorf("RecordUsage logged %q; want an error logged %v", logged.String(), tt.err != nil)
			}
		})
	}
	// Without a recorder, or with one that only adds to memory, there is
	// nothing to wait for: no extra flush.
	for _, usage := range []chat.UsageRecorder{nil, &memRecorder{}} {
		cfg := chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}}
		if usage != nil {
			cfg.Usage = usage
		}
		s := &sink{}
		if err := chat.NewGateway(cfg).Run(context.Background(), "acct", params(t, `{"model":"synthetic/priced","messages":[{"role":"user","content":"hi"}]}`), s); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.Join(s.calls, "|"), "flush") {
			t.Errorf("recorder %T: sink calls %q; want no flush", usage, s.calls)
		}
	}
}

// tieredCatalog prices each token class apart, with service tiers:
// tokens per credit are easy to count (input 1, cached 0.1, cache write
// 1.25, 1-hour write 2, output 4 credits a token; flex half, priority
// double); synthetic/fast names its priority tier "fast".
const tieredCatalog = `{
  "providers": [{"name": "synthetic", "kind": "synthetic"}],
  "models": [
    {"id": "synthetic/tiered", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_cached_input_tokens": 100000,
       "credits_per_million_cache_write_tokens": 1250000, "credits_per_million_cache_write_1h_tokens": 2000000,
       "credits_per_million_output_tokens": 4000000,
       "service_tiers": {
         "flex": {"credits_per_million_input_tokens": 500000, "credits_per_million_cached_input_tokens": 50000,
           "credits_per_million_cache_write_tokens": 625000, "credits_per_million_cache_write_1h_tokens": 1000000,
           "credits_per_million_output_tokens": 2000000},
         "priority": {"credits_per_million_input_tokens": 2000000, "credits_per_million_cached_input_tokens": 200000,
           "credits_per_million_cache_write_tokens": 2500000, "credits_per_million_cache_write_1h_tokens": 4000000,
           "credits_per_million_output_tokens": 8000000}}}},
    {"id": "synthetic/fast", "type": "chat", "provider": "synthetic",
     "price": {"credits_per_million_input_tokens": 1000000, "credits_per_million_output_tokens": 4000000,
       "service_tiers": {"fast": {"credits_per_million_input_tokens": 2000000, "credits_per_million_output_tokens": 8000000}}}}
  ]
}`

// TestPriceByClassAndTier: the gateway prices each token class at its
// rate, at the service tier the upstream served at (else the one asked
// for; "fast" and "priority" are one tier), puts the cost in the
// answer's usage and records exactly that; details beyond what they are
// parts of are bounded first.
func TestPriceByClassAndTier(t *testing.T) {
	cat, err := catalog.Parse([]byte(tieredCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatalf("Parse = %v", err)
	}
	// 250 fresh + 600 cached x 0.1 + 100 written x 1.25 + 50 written for
	// an hour x 2 + 200 output (150 of them reasoning) x 4.
	all := chat.Usage{PromptTokens: 1000, CachedTokens: 600, CacheWriteTokens: 100, CacheWrite1hTokens: 50, CompletionTokens: 200, ReasoningTokens: 150}
	tests := []struct {
		name   string
		model  string
		asked  string // the request's service_tier
		served string // the upstream's
		usage  chat.Usage
		want   string
	}{
		{"every class", "synthetic/tiered", "", "", all, "1335"},
		{"served at priority", "synthetic/tiered", "", "priority", all, "2670"},
		{"served at flex", "synthetic/tiered", "", "flex", all, "667.5"},
		{"asked for priority, the upstream says none", "synthetic/tiered", "priority", "", all, "2670"},
		{"asked for priority, served at default", "synthetic/tiered", "priority", "default", all, "1335"},
		{"asked for fast, priced as priority", "synthetic/tiered", "fast", "", all, "2670"},
		// A cheaper tier the upstream does not confirm is not a discount.
		{"asked for flex, the upstream says none", "synthetic/tiered", "flex", "", all, "1335"},
		{"asked for flex, served at flex", "synthetic/tiered", "flex", "flex", all, "667.5"},
		{"served at priority, priced as fast", "synthetic/fast", "fast", "priority", chat.Usage{PromptTokens: 10, CompletionTokens: 5}, "60"},
		{"an unknown tier is the model's price", "synthetic/tiered", "", "scale", all, "1335"},
		// A vendor that reports more cached tokens than the prompt: the
		// prompt is all cached, not more.
		{"cached beyond the prompt", "synthetic/tiered", "", "", chat.Usage{PromptTokens: 100, CachedTokens: 500, CompletionTokens: 1}, "14"},
		{"writes beyond the prompt", "synthetic/tiered", "", "", chat.Usage{PromptTokens: 100, CachedTokens: 60, CacheWriteTokens: 60, CompletionTokens: 1}, "60"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			prov := &fakeProvider{resp: chat.Response{Content: "ok", Usage: tt.usage, ServiceTier: tt.served}}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": prov}, Usage: rec})
			s := &endSink{}
			body := `{"model":"` + tt.model + `","messages":[{"role":"user","content":"hi"}]`
			if tt.asked != "" {
				body += `,"service_tier":"` + tt.asked + `"`
			}
			if err := gw.Run(context.Background(), "acct", params(t, body+"}"), s); err != nil {
				t.Fatal(err)
			}
			if got := s.resp.Usage.Cost.String(); got != tt.want {
				t.Errorf("usage.cost = %s; want %s", got, tt.want)
			}
			if len(rec.calls) != 1 || !strings.HasSuffix(rec.calls[0], " "+tt.want) {
				t.Errorf("recorded %q; want the charge %s", rec.calls, tt.want)
			}
			u := s.resp.Usage
			if u.CachedTokens+u.CacheWriteTokens+u.CacheWrite1hTokens > u.PromptTokens || u.ReasoningTokens > u.CompletionTokens {
				t.Errorf("usage %+v: details beyond the prompt or the completion", u)
			}
		})
	}
}

// TestPrepareAcceptsDefaults: the empty or default forms of the fields the
// gateway cannot honour yet pass, as clients send them unasked.
func TestPrepareAcceptsDefaults(t *testing.T) {
	gw := chat.NewGateway(chat.Config{Catalog: mustCatalog(t), Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}})
	for _, extra := range []string{
		`"tools":[]`, `"tools":null`, `"tool_choice":"none"`, `"tool_choice":"auto"`, `"function_call":"none"`,
		`"response_format":{"type":"text"}`, `"n":1`, `"logprobs":false`, `"user":"u1","metadata":{"a":"b"}`,
	} {
		body := `{"model":"synthetic/echo",` + extra + `,"messages":[{"role":"user","content":"hi"}]}`
		if _, err := gw.Prepare(context.Background(), params(t, body)); err != nil {
			t.Errorf("Prepare(%s) = %v; want nil", extra, err)
		}
	}
}

// TestRunRecord: the record of an answered request has the handler's id
// and kind, the caller's key, the model asked and the one that answered,
// the attempts, the tokens by class, the rates and the cost the answer
// carries, its status and timing; without an id, Run makes one.
func TestRunRecord(t *testing.T) {
	cat, err := catalog.Parse([]byte(pricedCatalog), catalog.Pricing{})
	if err != nil {
		t.Fatal(err)
	}
	usage := chat.Usage{PromptTokens: 1000, CompletionTokens: 100, CachedTokens: 400, ReasoningTokens: 30}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			rec := &recorder{}
			gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": &fakeProvider{resp: chat.Response{Content: "ok", Usage: usage}}}, Usage: rec})
			p := params(t, fmt.Sprintf(`{"model":"synthetic/mini","stream":%v,"messages":[{"role":"user","content":"hi"}]}`, stream))
			p.ID, p.Kind = "resp_test1", credits.KindResponses
			ctx := auth.WithPrincipal(context.Background(), auth.Principal{Account: "acct", KeyID: "key1"})
			before := time.Now().UnixMilli()
			s := &sink{}
			if err := gw.Run(ctx, "acct", p, s); err != nil {
				t.Fatal(err)
			}
			if len(rec.records) != 1 {
				t.Fatalf("records = %+v; want one", rec.records)
			}
			r := rec.records[0]
			// 600 fresh input x 0.15 + 400 cached x 0.15 (no price of its
			// own) + 100 output x 0.6 per million: 210 millionths.
			want := credits.Record{ID: "resp_test1", Kind: credits.KindResponses, Account: "acct", Key: "key1", ModelAsked: "synthetic/mini",
				Model: "synthetic/mini", Provider: "synthetic", Attempts: "synthetic/mini=200",
				Tokens: credits.Tokens{Prompt: 1000, Cached: 400, Completion: 100, Reasoning: 30},
				Rates:  credits.TokenRates{Input: 150_000, CachedInput: 150_000, CacheWrite: 150_000, CacheWrite1h: 150_000, Output: 600_000},
				Cost:   210, Status: credits.StatusCompleted, FinishReason: "stop", Stream: stream}
			if stream {
				// fakeProvider's stream reports no reasoning count.
				want.Tokens.Cached, want.Tokens.Reasoning = 0, 0
			}
			got := r
			got.LatencyMS, got.FirstTokenMS, got.At = 0, 0, 0
			if stream {
				got.Tokens.Cached, got.Tokens.Reasoning = 0, 0
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("record = %+v; want %+v", got, want)
			}
			after := time.Now().UnixMilli()
			if r.At < before || r.At > after || r.LatencyMS < 0 || r.LatencyMS > after-before || r.FirstTokenMS > r.LatencyMS || (!stream && r.FirstTokenMS != 0) {
				t.Errorf("record at %d, latency %d ms, first token %d ms; want within [%d, %d], first token only for a stream", r.At, r.LatencyMS, r.FirstTokenMS, before, after)
			}
		})
	}
	rec := &recorder{}
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{"synthetic": &fakeProvider{}}, Usage: rec})
	if err := gw.Run(context.Background(), "acct", params(t, `{"models":["synthetic/free"],"messages":[{"role":"user","content":"hi"}]}`), &sink{}); err != nil {
		t.Fatal(err)
	}
	if r := rec.records[0]; !strings.HasPrefix(r.ID, "chatcmpl-") || r.Kind != credits.KindChat || r.ModelAsked != "synthetic/free" || r.Key != "" {
		t.Errorf("record without an id or kind = %+v; want a chatcmpl- id, kind chat, models[0] asked", r)
	}
}

// featureProvider is a fakeProvider with Features.
type featureProvider struct {
	fakeProvider
	f chat.Features
}

func (p *featureProvider) Features() chat.Features { return p.f }

// TestPrepareThoughtsAndHints: the signed reasoning an edge puts on
// Params (an assistant message's Thoughts, a tool call's Signature)
// reaches the provider's Request; the OpenAI-only hints (prompt_cache_key,
// and a verbosity marked a hint) are left out for a provider without
// them, a plain verbosity refused.
func TestPrepareThoughtsAndHints(t *testing.T) {
	cat := mustCatalog(t)
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: map[string]chat.Provider{
		"synthetic": &fakeProvider{}, "gemini": &featureProvider{f: chat.Features{Tools: true}},
	}})
	p := params(t, `{"model":"synthetic/echo","messages":[{"role":"user","content":"hi"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
		{"role":"tool","tool_call_id":"c1","content":"ok"}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	thoughts := []chat.Thought{{Provider: "gemini", Text: "hm", Signature: "sig-1"}}
	p.Messages[1].Thoughts = thoughts
	p.Messages[1].ToolCalls[0].Signature, p.Messages[1].ToolCalls[0].SignedBy = "sig-2", "gemini"
	c, err := gw.Prepare(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	m := c.Request.Messages
	if len(m[1].Thoughts) != 1 || m[1].Thoughts[0] != thoughts[0] || m[0].Thoughts != nil {
		t.Errorf("Thoughts = %+v, %+v; want the assistant's only", m[1].Thoughts, m[0].Thoughts)
	}
	p.Messages[0].Thoughts = thoughts // not an assistant message: a 400
	if _, err := gw.Prepare(context.Background(), p); apierr.As(err) == nil || apierr.As(err).Param != "messages[0].content" {
		t.Errorf("Prepare with thoughts on a user message = %v; want a 400 naming messages[0].content", err)
	}
	if tc := m[1].ToolCalls[0]; tc.Signature != "sig-2" || tc.SignedBy != "gemini" {
		t.Errorf("ToolCalls[0] = %+v; want signed by gemini", tc)
	}

	tests := []struct {
		name, body, wantParam string
		hint                  bool
	}{
		{"prompt_cache_key left out", `{"model":"gemini/gemini-2.5-flash","prompt_cache_key":"k","messages":[{"role":"user","content":"hi"}]}`, "", false},
		{"verbosity hint left out", `{"model":"gemini/gemini-2.5-flash","verbosity":"low","messages":[{"role":"user","content":"hi"}]}`, "", true},
		{"verbosity refused", `{"model":"gemini/gemini-2.5-flash","verbosity":"low","messages":[{"role":"user","content":"hi"}]}`, "verbosity", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := params(t, tt.body)
			p.VerbosityHint = tt.hint
			c, err := gw.Prepare(context.Background(), p)
			if tt.wantParam != "" {
				if e := apierr.As(err); e == nil || e.Param != tt.wantParam {
					t.Fatalf("Prepare(%s) = %v; want a 400 naming %s", tt.body, err, tt.wantParam)
				}
				return
			}
			if err != nil {
				t.Fatalf("Prepare(%s) = %v; want nil error", tt.body, err)
			}
			if c.Request.PromptCacheKey != "" || c.Request.Verbosity != "" {
				t.Errorf("PromptCacheKey, Verbosity = %q, %q; want both left out", c.Request.PromptCacheKey, c.Request.Verbosity)
			}
		})
	}
}
