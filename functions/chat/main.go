// Command chat is the Lambda function behind POST /v1/chat/completions. Its
// API Gateway integration streams (ResponseTransferMode RESPONSE_STREAM), so
// it returns *events.APIGatewayProxyStreamingResponse for every request and
// each SSE event reaches the client as the upstream produces it.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/genway/genway/shared/auth"
	"github.com/genway/genway/shared/awsenv"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/dynamostore"
	"github.com/genway/genway/shared/httpapi"
	"github.com/genway/genway/shared/lambdahttp"
	"github.com/genway/genway/shared/ratelimit"
	"github.com/genway/genway/shared/upstreams"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "chat:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := awsenv.LoadConfig(ctx, getenv)
	if err != nil {
		return err
	}
	names := awsenv.FromEnv(getenv)
	store := dynamostore.New(dynamodb.NewFromConfig(cfg), names.JobsTable, names.AccountsTable)
	authn := auth.NewAuthenticator(store, auth.DefaultCacheTTL)
	perMinute, err := ratelimit.FromEnv(getenv)
	if err != nil {
		return err
	}
	limits := ratelimit.New(store, store, perMinute)
	cat, err := catalog.Load(getenv("GENWAY_CATALOG"))
	if err != nil {
		return err
	}
	providers, err := upstreams.New(cat, getenv, nil)
	if err != nil {
		return fmt.Errorf("chat providers: %w", err)
	}
	gw := chat.NewGateway(chat.Config{Catalog: cat, Providers: providers, Log: log, Usage: chat.StoreRecorder{Store: store}})
	var h http.Handler = httpapi.Authenticated(authn, limits, log, httpapi.ChatCompletions(gw, log))
	h = httpapi.NewMux(log, httpapi.Route{Method: "POST", Pattern: "/v1/chat/completions", Handler: h})
	lambda.StartWithOptions(lambdahttp.Stream(h), lambda.WithContext(ctx))
	return nil
}
