package upstreams

import (
	"fmt"
	"net/http"

	"github.com/genway/genway/shared/jobs"
)

// newMediaVendor builds the jobs.Provider of a media vendor's kind.
func newMediaVendor(kind, baseURL, key string, c *http.Client) (jobs.Provider, error) {
	switch kind {
	}
	return nil, fmt.Errorf("kind %q makes no media", kind)
}
