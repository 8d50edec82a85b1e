package upstreams

import (
	"fmt"
	"net/http"

	"github.com/genway/genway/shared/elevenlabs"
	"github.com/genway/genway/shared/fal"
	"github.com/genway/genway/shared/gemini"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/replicate"
)

// newMediaVendor builds the jobs.Provider of a media vendor's kind.
func newMediaVendor(kind, baseURL, key string, c *http.Client) (jobs.Provider, error) {
	switch kind {
	case "elevenlabs":
		return elevenlabs.New(elevenlabs.Config{BaseURL: baseURL, APIKey: key, HTTPClient: c}), nil
	case "gemini":
		return gemini.NewVideo(gemini.Config{BaseURL: baseURL, APIKey: key, HTTPClient: c}), nil
	case "fal":
		return fal.New(fal.Config{BaseURL: baseURL, APIKey: key, HTTPClient: c}), nil
	case "replicate":
		return replicate.New(replicate.Config{BaseURL: baseURL, APIToken: key, HTTPClient: c}), nil
	}
	return nil, fmt.Errorf("kind %q makes no media", kind)
}
