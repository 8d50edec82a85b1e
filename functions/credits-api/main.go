// Command credits-api is the Lambda function behind GET /v1/credits (the
// calling account's balance, held and available credits), GET
// /v1/generations/{id} (the record of one of its requests) and GET
// /v1/webhooks/secret (its webhook signing secret, made on first use).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/api"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "credits-api:", err)
		os.Exit(1)
	}
}

// run builds the dependencies once per container, then serves invocations.
func run(ctx context.Context, getenv func(string) string) error {
	b, err := wire.Load(ctx, getenv)
	if err != nil {
		return err
	}
	hooks := app.Webhooks(b.Config, b.Store, nil, nil, nil, b.Log) // secrets only: it sends nothing
	h := api.Handler(b,
		httpapi.Route{Method: "GET", Pattern: "/v1/credits", Handler: httpapi.GetCredits(b.Store, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/generations/{id}", Handler: httpapi.GetGeneration(b.Store, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/webhooks/secret", Handler: httpapi.GetWebhookSecret(hooks, b.Log)})
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
