// Command models is the Lambda function behind GET /v1/models and
// GET /v1/models/{id} (a buffered REST API proxy integration).
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/genway/genway/functions/internal/api"
	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "models:", err)
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
	// This function reads no secret (it has no SSM client): it learns
	// which vendors are configured from GENWAY_CONFIGURED, names only.
	configured := cat.ConfiguredFunc(b.Config.Providers)
	h := api.Handler(b,
		httpapi.Route{Method: "GET", Pattern: "/v1/models", Handler: httpapi.ListModels(cat, configured, b.Log)},
		httpapi.Route{Method: "GET", Pattern: "/v1/models/{id...}", Handler: httpapi.GetModel(cat, configured, b.Log)})
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
