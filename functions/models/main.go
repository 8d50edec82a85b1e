// Command models is the Lambda function behind GET /v1/models and
// GET /v1/models/{id} (a buffered REST API proxy integration).
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
	"github.com/genway/genway/shared/dynamostore"
	"github.com/genway/genway/shared/httpapi"
	"github.com/genway/genway/shared/lambdahttp"
	"github.com/genway/genway/shared/ratelimit"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "models:", err)
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
	authed := func(h http.Handler) http.Handler { return httpapi.Authenticated(authn, limits, log, h) }
	h := httpapi.NewMux(log,
		httpapi.Route{Method: "GET", Pattern: "/v1/models", Handler: authed(httpapi.ListModels(cat, getenv, log))},
		httpapi.Route{Method: "GET", Pattern: "/v1/models/{id...}", Handler: authed(httpapi.GetModel(cat, getenv, log))})
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
