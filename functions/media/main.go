// Command media is the Lambda function behind the synchronous media
// routes: POST /v1/images/generations and POST /v1/audio/speech. Its API
// Gateway integrations stream (ResponseTransferMode RESPONSE_STREAM), as
// chat's do, so that speech reaches the client as the vendor makes it
// and a slow image answer is kept alive with spaces before its JSON. Each
// request reserves its credits in the accounts table before the vendor is
// called and settles them once (credits.Reservations); images asked for
// as links are stored under the media bucket's images/ prefix and
// presigned.
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
	"github.com/genway/genway/shared/app/vendors"
	"github.com/genway/genway/shared/aws/lambdahttp"
	"github.com/genway/genway/shared/aws/s3media"
	"github.com/genway/genway/shared/providers/upstreams"
	"github.com/genway/genway/shared/transport/httpapi"
)

func main() {
	if err := run(context.Background(), os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "media:", err)
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
	// rotate, as chat's and the worker's (keys.Rotation). One rotation
	// serves both kinds, so a key they share (OpenAI's) is read once.
	rot := keys.Rotation(b)
	imageProviders, err := upstreams.NewRotatingImages(ctx, cat, rot, nil)
	if err != nil {
		return fmt.Errorf("image providers: %w", err)
	}
	speechProviders, err := upstreams.NewRotatingSpeech(ctx, cat, rot, nil)
	if err != nil {
		return fmt.Errorf("speech providers: %w", err)
	}
	// The router's breakers and key rests are this container's
	// (GENWAY_ROUTE_* tune its policy).
	router := app.Router(b.Config, b.Log)
	imgs := vendors.Images(b.Config, imageProviders.Providers(), router, b.Store, s3media.Open(b.AWS, b.Names.MediaBucket), b.Log)
	voices := vendors.Speech(b.Config, speechProviders.Providers(), router, b.Store, b.Log)
	// An image answer is kept alive with spaces before its JSON, so that
	// API Gateway does not cut a vendor that takes a minute
	// (GENWAY_IMAGES_KEEPALIVE, default 10 s).
	keepAlive := b.Config.ImagesKeepAlive
	h := api.Handler(b,
		httpapi.Route{Method: "POST", Pattern: "/v1/images/generations", Handler: httpapi.GenerateImages(imgs, b.Log, httpapi.ImagesKeepAlive(keepAlive))},
		httpapi.Route{Method: "POST", Pattern: "/v1/audio/speech", Handler: httpapi.Speech(voices, b.Log)})
	lambda.StartWithOptions(lambdahttp.Stream(h), lambda.WithContext(ctx))
	return nil
}
