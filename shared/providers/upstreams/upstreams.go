// Package upstreams builds the providers the catalog names and the
// environment configures: one chat.Provider per configured catalog
// provider, of the package for its kind (synthetic, openai, anthropic,
// gemini, bedrock), one jobs.Provider per configured media vendor
// (synthetic, elevenlabs, vertex and gemini for Veo, fal, replicate), and
// one images.Provider per configured provider with image models
// (synthetic, openai, gemini, fal, replicate), and one speech.Provider per
// configured speech vendor (synthetic, openai, elevenlabs). It is wiring,
// used by cmd/genway and the functions.
package upstreams

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"

	"github.com/genway/genway/shared/aws/awsenv"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/chat"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/providers/anthropic"
	"github.com/genway/genway/shared/providers/bedrock"
	"github.com/genway/genway/shared/providers/elevenlabs"
	"github.com/genway/genway/shared/providers/fal"
	"github.com/genway/genway/shared/providers/gemini"
	"github.com/genway/genway/shared/providers/openai"
	"github.com/genway/genway/shared/providers/replicate"
	"github.com/genway/genway/shared/providers/synthetic"
	"github.com/genway/genway/shared/speech"
)

// NewHTTPClient returns the client the HTTP chat providers share when New
// is given none: net/http's transport, tuned for many concurrent upstream
// streams (a large idle pool per host, HTTP/2 where the upstream offers
// it), with bounded dial, TLS and header waits and no overall timeout
// (streams last minutes; the gateway bounds each completion). net/http
// never sends a request body again once any of it was written (a POST is
// retried on a new connection only when the old one failed before
// anything was sent), so an upstream never sees, or bills, one completion
// twice.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 1024
	t.MaxIdleConnsPerHost = 256
	t.IdleConnTimeout = 60 * time.Second
	t.TLSHandshakeTimeout = 10 * time.Second
	t.ResponseHeaderTimeout = 5 * time.Minute // a non-streamed reasoning answer comes with its headers
	t.ForceAttemptHTTP2 = true
	// Streams must not be compressed: a gzip reader may hold a delta back
	// until more of the stream arrives.
	t.DisableCompression = true
	return &http.Client{Transport: t}
}

// Settings is what New, NewMedia, NewImages and NewSpeech build the
// providers from: values read once, at start (package app reads them from
// the environment).
type Settings struct {
	// Setup says which providers are configured, with their keys and
	// base URLs (catalog.Setup).
	Setup catalog.Setup
	// AllowPrivateMedia (GENWAY_MEDIA_ALLOW_PRIVATE=1) lets the media
	// vendors' output links name loopback and private hosts
	// (NewDownloadClient): tests and local vendors only.
	AllowPrivateMedia bool
	// Vertex configures Veo on Vertex AI besides its key.
	Vertex Vertex
	// AWS is the region and endpoint of Bedrock's AWS configuration.
	AWS awsenv.Settings
}

// Vertex configures Veo on Vertex AI besides its key
// (gemini.VertexConfig).
type Vertex struct {
	Project    string // the Google Cloud project billed ("": the key's project_id)
	Region     string // the Vertex AI location ("": us-central1)
	StorageURI string // a gs:// prefix the videos are written to ("": answered inline)
}

// New returns the configured providers by catalog provider name. A
// provider is configured as catalog.Provider.Configured says under
// s.Setup (its key, or for key-optional ones its base URL; Bedrock when
// switched on; the synthetic provider unless switched off); its base URL
// is the catalog's, overridden by its variable; it speaks the client
// APIs its catalog entry names natively (catalog.Provider.NativeAPIs:
// none with the native APIs off). httpClient may be nil
// (NewHTTPClient). Bedrock loads the AWS configuration (awsenv.LoadConfig:
// the default credential chain, s.AWS's region) only when it is
// configured; an error doing so, or a provider of unknown kind, is
// returned.
func New(cat *catalog.Catalog, s Settings, httpClient *http.Client) (map[string]chat.Provider, error) {
	if httpClient == nil {
		httpClient = NewHTTPClient()
	}
	return build(cat, s.Setup, chatTypes, func(p *catalog.Provider, key, base string) (chat.Provider, error) {
		switch p.Kind {
		case "synthetic":
			return synthetic.NewChat(), nil
		case "openai":
			return openai.New(openai.Config{Name: p.Name, BaseURL: base, APIKey: key, HTTPClient: httpClient, Native: p.NativeAPIs(s.Setup)}), nil
		case "anthropic":
			return anthropic.New(anthropic.Config{Name: p.Name, BaseURL: base, APIKey: key, HTTPClient: httpClient, Native: p.NativeAPIs(s.Setup)}), nil
		case "gemini":
			return gemini.New(gemini.Config{Name: p.Name, BaseURL: base, APIKey: key, HTTPClient: httpClient}), nil
		case "bedrock":
			// Loading the configuration reads env and files, no network:
			// credentials are fetched lazily on the first call.
			cfg, err := awsenv.LoadConfig(context.Background(), s.AWS)
			if err != nil {
				return nil, err
			}
			return bedrock.New(bedrockruntime.NewFromConfig(cfg)), nil
		}
		return nil, fmt.Errorf("unknown kind %q", p.Kind)
	})
}

// build makes one T, with newT, for each configured catalog provider that
// has models of one of types, given its key and base URL (the catalog's,
// overridden by its variable). An error of newT is returned, naming the
// provider.
func build[T any](cat *catalog.Catalog, setup catalog.Setup, types []string, newT func(p *catalog.Provider, key, base string) (T, error)) (map[string]T, error) {
	out := make(map[string]T)
	for i := range cat.Providers {
		p := &cat.Providers[i]
		if !p.Configured(setup) || !serves(cat, p.Name, types) {
			continue
		}
		key := ""
		if p.KeyEnv != "" {
			key = setup.Vars[p.KeyEnv]
		}
		v, err := newT(p, key, p.BaseURLFor(setup))
		if err != nil {
			return nil, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		out[p.Name] = v
	}
	return out, nil
}

// NewMediaHTTPClient returns the client the media vendors share: net/http's
// own transport, which never sends a POST again once any of it was written
// (a second submit could be billed twice), with bounded dial, TLS and
// header waits. No overall timeout: the worker bounds each call by the
// job's deadline and the function's.
func NewMediaHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 16
	t.ResponseHeaderTimeout = 10 * time.Minute // a synchronous song comes with its headers
	return &http.Client{Transport: t}
}

// NewDownloadClient returns the client the media vendors fetch their
// output files with, from the links their answers name (fal's and
// Replicate's files, Veo's video, an OpenAI-compatible image answered as
// a link): NewMediaHTTPClient's, with no proxy and, unless allowPrivate,
// the SSRF guard that image URLs and webhooks have (chat.DialCheck with
// chat.PublicAddr, on every connection, redirects included), so that a
// vendor's answer cannot make Genway fetch from its own network.
// allowPrivate is Settings.AllowPrivateMedia: tests and local vendors on
// loopback.
func NewDownloadClient(allowPrivate bool) *http.Client {
	c := NewMediaHTTPClient()
	t := c.Transport.(*http.Transport)
	t.Proxy = nil
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	if !allowPrivate {
		d.Control = chat.DialCheck(chat.PublicAddr)
	}
	t.DialContext = d.DialContext
	return c
}

// NewMedia returns the configured job providers by catalog provider name:
// the synthetic provider (unless GENWAY_SYNTHETIC=off) and each media
// vendor whose key is set (see catalog.Provider.Configured), at its base
// URL (the catalog's, overridden by its env var). httpClient may be nil
// (NewMediaHTTPClient). Providers whose kind makes no media (openai,
// anthropic, ...) are skipped.
//
// Output files at links a vendor answers are fetched with
// NewDownloadClient(s.AllowPrivateMedia).
//
// A vertex provider's key is a service-account key (its JSON, or a file's
// path); s.Vertex configures the rest (project, region, storage).
// A key that cannot be used is an error, naming the provider, never
// quoting the key.
func NewMedia(cat *catalog.Catalog, s Settings, httpClient *http.Client) (map[string]jobs.Provider, error) {
	if httpClient == nil {
		httpClient = NewMediaHTTPClient()
	}
	files := NewDownloadClient(s.AllowPrivateMedia)
	return build(cat, s.Setup, jobTypes, func(p *catalog.Provider, key, base string) (jobs.Provider, error) {
		c := httpClient // one client for every media vendor
		switch p.Kind {
		case "synthetic":
			return synthetic.Media{}, nil
		case "elevenlabs":
			return elevenlabs.New(elevenlabs.Config{BaseURL: base, APIKey: key, HTTPClient: c}), nil
		case "gemini":
			return gemini.NewVideo(gemini.Config{BaseURL: base, APIKey: key, HTTPClient: c, Downloads: files}), nil
		case "vertex":
			v, err := gemini.NewVertexVideo(gemini.VertexConfig{Credentials: key, BaseURL: base, HTTPClient: c,
				Project: s.Vertex.Project, Region: s.Vertex.Region, StorageURI: s.Vertex.StorageURI})
			if err != nil {
				return nil, err
			}
			return v, nil
		case "fal":
			return fal.New(fal.Config{BaseURL: base, APIKey: key, HTTPClient: c, Downloads: files}), nil
		case "replicate":
			return replicate.New(replicate.Config{BaseURL: base, APIToken: key, HTTPClient: c, Downloads: files}), nil
		}
		return nil, fmt.Errorf("kind %q makes no media", p.Kind)
	})
}

// The model types of each kind of provider New, NewMedia, NewImages and
// NewSpeech build.
var (
	chatTypes   = []string{catalog.TypeChat}
	jobTypes    = []string{catalog.TypeMusic, catalog.TypeSFX, catalog.TypeVideo}
	imageTypes  = []string{catalog.TypeImage}
	speechTypes = []string{catalog.TypeSpeech}
)

// NewSpeech returns the configured speech providers by catalog provider
// name: the synthetic provider (unless GENWAY_SYNTHETIC=off), OpenAI (any
// provider of kind openai with speech models) and ElevenLabs, each when
// configured (see catalog.Provider.Configured), at its base URL.
// httpClient may be nil (NewHTTPClient: the client of streams, which
// never asks for a compressed answer, so audio is handed on as it comes).
func NewSpeech(cat *catalog.Catalog, s Settings, httpClient *http.Client) (map[string]speech.Provider, error) {
	if httpClient == nil {
		httpClient = NewHTTPClient()
	}
	return build(cat, s.Setup, speechTypes, func(p *catalog.Provider, key, base string) (speech.Provider, error) {
		switch p.Kind {
		case "synthetic":
			return synthetic.Speech{}, nil
		case "openai":
			return openai.New(openai.Config{Name: p.Name, BaseURL: base, APIKey: key, HTTPClient: httpClient}), nil
		case "elevenlabs":
			return elevenlabs.New(elevenlabs.Config{BaseURL: base, APIKey: key, HTTPClient: httpClient}), nil
		}
		return nil, fmt.Errorf("kind %q makes no speech", p.Kind)
	})
}

// serves reports whether the catalog has a model of one of types on
// provider.
func serves(cat *catalog.Catalog, provider string, types []string) bool {
	for i := range cat.Models {
		if m := &cat.Models[i]; m.Provider == provider && slices.Contains(types, m.Type) {
			return true
		}
	}
	return false
}

// NewImages returns the configured image providers by catalog provider
// name: the synthetic provider (unless GENWAY_SYNTHETIC=off) and each
// provider with image models whose key is set, at its base URL (the
// catalog's, overridden by its env var). httpClient may be nil
// (NewMediaHTTPClient); images answered as links are fetched with
// NewDownloadClient(s.AllowPrivateMedia). A provider of a kind that
// makes no images is an error, naming it.
func NewImages(cat *catalog.Catalog, s Settings, httpClient *http.Client) (map[string]images.Provider, error) {
	if httpClient == nil {
		httpClient = NewMediaHTTPClient()
	}
	files := NewDownloadClient(s.AllowPrivateMedia)
	return build(cat, s.Setup, imageTypes, func(p *catalog.Provider, key, base string) (images.Provider, error) {
		c := httpClient
		switch p.Kind {
		case "synthetic":
			return synthetic.Images{}, nil
		case "openai":
			return openai.NewImages(openai.Config{Name: p.Name, BaseURL: base, APIKey: key, HTTPClient: c, Downloads: files}), nil
		case "gemini":
			return gemini.NewImages(gemini.Config{BaseURL: base, APIKey: key, HTTPClient: c}), nil // images come inline
		case "fal":
			return fal.New(fal.Config{BaseURL: base, APIKey: key, HTTPClient: c, Downloads: files}), nil
		case "replicate":
			return replicate.New(replicate.Config{BaseURL: base, APIToken: key, HTTPClient: c, Downloads: files}), nil
		}
		return nil, fmt.Errorf("kind %q makes no images", p.Kind)
	})
}
