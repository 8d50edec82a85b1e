// Command admin is the Lambda function behind the operator's side of the
// API: the admin API under /admin/v1/ and the operator console under
// /console/ (a buffered REST API proxy integration, not streamed). It
// authenticates with the operator token, read from the SSM SecureString
// parameter GENWAY_ADMIN_TOKEN_PARAMETER at container start and again
// every few minutes (secrets.DefaultTTL), so a rotated token takes over
// without a deploy. The console's sessions are signed with a secret of
// their own, the SecureString GENWAY_CONSOLE_SECRET_PARAMETER (read the
// same way), and kept live in the accounts table. It never answers an API
// key.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	"github.com/genway/genway/functions/internal/wire"
	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/app"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/aws/secrets"
	"github.com/genway/genway/shared/aws/sqsqueue"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/transport/console"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "admin:", err)
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
	param := b.Config.AdminTokenParameter
	if param == "" {
		return fmt.Errorf("GENWAY_ADMIN_TOKEN_PARAMETER (the SSM SecureString parameter holding the operator token) is not set")
	}
	cache := secrets.New(ssm.NewFromConfig(b.AWS), b.Config.SecretsTTL)
	verifier, err := admin.LoadingVerifier(ctx, func(ctx context.Context) (string, error) { return cache.Get(ctx, param) },
		b.Config.SecretsTTL, func(err error) { b.Log.Error("operator token reload failed; keeping the last one", "err", err) })
	if err != nil {
		return fmt.Errorf("operator token: %w", err)
	}
	secretParam := b.Config.ConsoleSecretParameter
	if secretParam == "" {
		return fmt.Errorf("GENWAY_CONSOLE_SECRET_PARAMETER (the SSM SecureString parameter holding the console's session secret) is not set")
	}
	sessionKeys, err := admin.LoadingSessionKeys(ctx, verifier, func(ctx context.Context) (string, error) { return cache.Get(ctx, secretParam) },
		b.Config.SecretsTTL, func(err error) { b.Log.Error("console session secret reload failed; keeping the last one", "err", err) })
	if err != nil {
		return fmt.Errorf("console session secret: %w", err)
	}
	op := &admin.Service{Store: b.Store, Jobs: b.Store, Log: b.Log}
	configured := cat.ConfiguredFunc(b.Config.Providers)
	queue, err := sqsqueue.Open(ctx, b.AWS, b.Names.JobsQueueURL, b.Names.JobsQueue)
	if err != nil {
		return err
	}
	// Jobs for the jobs pages, the playground's job form and the admin
	// API. No vendor keys here: a processing job is cancelled only where
	// the vendor needs none (the API's cancel route, in jobs-create, has
	// them). No chat providers either: this function is buffered, so the
	// playground's chat is for genway serve; on AWS chat is the API's.
	svc := &jobs.Service{Store: b.Store, Queue: queue, Media: s3media.Open(b.AWS, b.Names.MediaBucket), Catalog: cat, Log: b.Log, Configured: configured, Balances: b.Store,
		CheckWebhookURL: app.WebhookURLCheck(b.Config)}
	// Webhooks: account configs, the deliveries pages and resends (which
	// queue on the webhooks queue); no delivery is sent from here.
	hookQueue, err := sqsqueue.Open(ctx, b.AWS, b.Names.WebhooksQueueURL, b.Names.WebhooksQueue)
	if err != nil {
		return err
	}
	hooks := app.Webhooks(b.Config, b.Store, b.Store, hookQueue, nil, b.Log)
	cons, err := console.New(console.Config{Operator: op, Verifier: verifier, SessionKeys: sessionKeys, Sessions: b.Store,
		Catalog: cat, Configured: configured, Log: b.Log, JobService: svc, Webhooks: hooks})
	if err != nil {
		return err
	}
	routes := httpapi.AdminRoutes(httpapi.AdminConfig{Operator: op, Catalog: cat, Configured: configured, Verifier: verifier, Jobs: svc, Webhooks: hooks, Log: b.Log})
	for _, m := range []string{"GET", "POST"} {
		routes = append(routes, httpapi.Route{Method: m, Pattern: "/console/", Handler: cons})
	}
	h := httpapi.BodyTimeout(httpapi.DefaultBodyTimeout, httpapi.NewMux(b.Log, routes...))
	lambda.StartWithOptions(lambdahttp.Proxy(h), lambda.WithContext(ctx))
	return nil
}
