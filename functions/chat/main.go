// Command chat is the Lambda function behind POST /v1/chat/completions,
// POST /v1/responses and POST /v1/messages (Anthropic's Messages API, with
// POST /v1/messages/count_tokens). Its API Gateway integrations stream
// (ResponseTransferMode RESPONSE_STREAM), so it returns
// *events.APIGatewayProxyStreamingResponse for every request and each SSE
// event reaches the client as the upstream produces it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/api"
	"github.com/genway/genway/functions/internal/keys"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	cat, err := wire.Catalog(b)
	if err != nil {
		return err
	}
	// The vendor keys come from SSM (OPENAI_API_KEY_PARAMETER, ...) and
	// rotate (keys.Rotation).
	providers, err := upstreams.NewRotating(ctx, cat, keys.Rotation(b), nil)
	if err != nil {
		return fmt.Errorf("chat providers: %w", err)
	}
	// Each request's record (with its usage and charge) is written
	// synchronously, after the response is flushed: a Lambda may be
	// frozen or killed right after an invocation, so nothing may wait in
	// memory (chat.BufferedRecorder is for genway serve).
	// The router's breakers and key rests are this container's
	// (GENWAY_ROUTE_* tune its policy).
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers.Providers(), Log: b.Log, Usage: chat.StoreRecorder{Store: b.Store}, Balances: b.Store, Holds: b.Store,
		Router: app.Router(b.Config, b.Log)})
	// A non-streamed answer is kept alive with spaces, so that API
	// Gateway does not cut a silent reasoning model (GENWAY_CHAT_KEEPALIVE,
	// default 10 s, the stream heartbeat's interval).
	opt := httpapi.ChatKeepAlive(b.Config.ChatKeepAlive)
	h := api.Handler(b,
		httpapi.Route{Method: "POST", Pattern: "/v1/chat/completions", Handler: httpapi.ChatCompletions(gw, b.Log, opt)},
		httpapi.Route{Method: "POST", Pattern: "/v1/responses", Handler: httpapi.Responses(gw, b.Log, opt)},
		httpapi.Route{Method: "POST", Pattern: "/v1/messages", Handler: httpapi.Messages(gw, b.Log, opt)},
		httpapi.Route{Method: "POST", Pattern: "/v1/messages/count_tokens", Handler: httpapi.CountMessageTokens(gw, b.Log)})
	lambda.StartWithOptions(lambdahttp.Stream(h), lambda.WithContext(ctx))
	return nil
}
