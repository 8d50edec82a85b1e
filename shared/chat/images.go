package chat

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ImageBytesNeeder is implemented by providers that cannot pass image URLs to
// their upstream and need the image bytes instead (Anthropic and Bedrock
// take base64 or bytes, the synthetic provider decodes them). For such a
// provider the Gateway fetches every http(s) image URL itself, with an
// ImageFetcher, and hands the provider Image.Data and Image.MediaType.
// Providers that do not implement it, or return false, get URLs as they are.
type ImageBytesNeeder interface {
	NeedsImageBytes() bool
}

// MediaTypes accepted for image input.
var imageTypes = map[string]bool{
	"image/png":  true,
	"image/jpeg": true,
	"image/gif":  true,
	"image/webp": true,
}

// DefaultMaxImageBytes caps a decoded or fetched image: 5 MiB, the smallest
// per-image limit among the upstreams that take bytes.
const DefaultMaxImageBytes = 5 << 20

// Per-request image limits (Config): at most DefaultMaxImages images,
// DefaultMaxRequestImageBytes of them together, all fetched within
// DefaultImageFetchTimeout, fetchConcurrency at a time.
const (
	DefaultMaxImages            = 16
	DefaultMaxRequestImageBytes = 20 << 20
	DefaultImageFetchTimeout    = 15 * time.Second
	fetchConcurrency            = 4
)

// errNotImage is the cause of a decoded image whose bytes are no known type.
var errNotImage = errors.New("not a png, jpeg, gif or webp image")

// parseDataURI decodes a data:image/...;base64,... URI. It returns the media
// type sniffed from the bytes (a client that labels a JPEG as PNG is
// forgiven; bytes that are no allowed image are not), and a client-facing
// reason on failure.
func parseDataURI(s string, maxBytes int) (mediaType string, data []byte, reason string) {
	rest, ok := cutPrefixFold(s, "data:")
	if !ok {
		return "", nil, "must be an http(s) URL or a data URI"
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok {
		return "", nil, "data URI has no comma before its data"
	}
	params := strings.Split(meta, ";")
	declared := strings.ToLower(strings.TrimSpace(params[0]))
	if !imageTypes[declared] {
		return "", nil, fmt.Sprintf("data URI media type %q is not image/png, image/jpeg, image/gif or image/webp", params[0])
	}
	base64ed := false
	for _, p := range params[1:] {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			base64ed = true
		}
	}
	if !base64ed {
		return "", nil, "data URI must be base64-encoded (data:<type>;base64,<data>)"
	}
	if base64.StdEncoding.DecodedLen(len(payload)) > maxBytes+3 {
		return "", nil, fmt.Sprintf("image is larger than %d bytes", maxBytes)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		data, err = base64.RawStdEncoding.DecodeString(payload)
	}
	if err != nil {
		return "", nil, "data URI is not valid base64"
	}
	if len(data) == 0 {
		return "", nil, "data URI holds no data"
	}
	if len(data) > maxBytes {
		return "", nil, fmt.Sprintf("image is larger than %d bytes", maxBytes)
	}
	sniffed := sniffImage(data)
	if sniffed == "" {
		return "", nil, fmt.Sprintf("data URI says %s but the data is not a png, jpeg, gif or webp image", declared)
	}
	return sniffed, data, ""
}

// sniffImage returns the image media type of data, or "" if it is none of
// the accepted types.
func sniffImage(data []byte) string {
	t := http.DetectContentType(data)
	if imageTypes[t] {
		return t
	}
	return ""
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// checkImageURL reports whether s is an absolute http(s) URL with a host.
func checkImageURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// PublicAddr reports whether addr may be fetched: it refuses loopback,
// link-local, private (RFC 1918, RFC 4193), unspecified, multicast and the
// shared / reserved ranges that reach internal networks. It is the default
// ImageFetcherConfig.Allow.
func PublicAddr(addr netip.Addr) bool {
	addr = addr.Unmap()
	switch {
	case !addr.IsValid(), addr.IsLoopback(), addr.IsPrivate(), addr.IsUnspecified(),
		addr.IsLinkLocalUnicast(), addr.IsLinkLocalMulticast(), addr.IsInterfaceLocalMulticast(),
		addr.IsMulticast():
		return false
	}
	for _, p := range refusedPrefixes {
		if p.Contains(addr) {
			return false
		}
	}
	return true
}

// refusedPrefixes are the IANA special-purpose ranges (IPv4 and IPv6
// Special-Purpose Address Registries) that netip has no predicate for:
// none of them is a public web server's address.
var refusedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation (TEST-NET-1)
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast (deprecated)
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation (TEST-NET-2)
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation (TEST-NET-3)
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64 can reach private IPv4
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (Teredo, benchmarking, ORCHID)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("2002::/16"),       // 6to4 embeds IPv4
	netip.MustParsePrefix("3fff::/20"),       // documentation
	netip.MustParsePrefix("5f00::/16"),       // segment routing SIDs
	netip.MustParsePrefix("::ffff:0:0/96"),   // mapped (Unmap handles most)
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	// IPv4-compatible (::a.b.c.d, deprecated) and IPv4-translated
	// (::ffff:0:a.b.c.d, SIIT) addresses embed an IPv4 address that
	// Unmap does not take out; ::/96 also holds :: and ::1.
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("::ffff:0:0:0/96"),
}

// ImageFetcherConfig configures an ImageFetcher; zero fields take defaults.
type ImageFetcherConfig struct {
	MaxBytes     int                   // default DefaultMaxImageBytes
	Timeout      time.Duration         // whole fetch, default 10 s
	MaxRedirects int                   // default 3; each hop is checked again
	Allow        func(netip.Addr) bool // default PublicAddr; tests may allow loopback
	Transport    *http.Transport       // base transport to clone; default a fresh one
}

// ImageFetcher downloads image URLs for providers that need bytes, refusing
// internal addresses so that a request cannot make the gateway reach its own
// network (SSRF). The address check runs at dial time on the resolved IP,
// so a name that resolves to a public address for a check and a private one
// for the connection (DNS rebinding) is still refused, and so is every
// redirect hop. Proxies from the environment are not used. An ImageFetcher
// is safe for concurrent use.
type ImageFetcher struct {
	client   *http.Client
	maxBytes int
	timeout  time.Duration
}

// ErrRefusedAddr is the cause of a connection DialCheck refused.
var ErrRefusedAddr = errors.New("address not allowed")

// DialCheck returns the SSRF guard of every connection Genway makes to an
// address a client or a vendor gave (image URLs, webhooks, vendors' output
// links): a net.Dialer Control function that refuses, with an error
// wrapping ErrRefusedAddr, a connection to an address allow rejects (nil:
// PublicAddr). It sees the address a name resolved to just before the
// connection is made, so a name that resolves to an internal address (DNS
// rebinding included) and every redirect hop are refused too.
func DialCheck(allow func(netip.Addr) bool) func(network, address string, _ syscall.RawConn) error {
	if allow == nil {
		allow = PublicAddr
	}
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil || !allow(ap.Addr()) {
			return fmt.Errorf("dial %s: %w", address, ErrRefusedAddr)
		}
		return nil
	}
}

// NewImageFetcher returns an ImageFetcher for cfg.
func NewImageFetcher(cfg ImageFetcherConfig) *ImageFetcher {
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxImageBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.MaxRedirects <= 0 {
		cfg.MaxRedirects = 3
	}
	dialer := &net.Dialer{Timeout: cfg.Timeout, Control: DialCheck(cfg.Allow)}
	var tr *http.Transport
	if cfg.Transport != nil {
		tr = cfg.Transport.Clone()
	} else {
		tr = &http.Transport{
			TLSHandshakeTimeout:   cfg.Timeout,
			ResponseHeaderTimeout: cfg.Timeout,
			MaxIdleConnsPerHost:   4,
			IdleConnTimeout:       30 * time.Second,
		}
	}
	tr.Proxy = nil
	tr.DialContext = dialer.DialContext
	maxRedirects := cfg.MaxRedirects
	client := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) > maxRedirects {
				return fmt.Errorf("more than %d redirects", maxRedirects)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to scheme %q", req.URL.Scheme)
			}
			return nil
		},
	}
	return &ImageFetcher{client: client, maxBytes: cfg.MaxBytes, timeout: cfg.Timeout}
}

// errNotFetched is every fetch failure that could tell a caller about the
// network behind the gateway.
var errNotFetched = errors.New("image URL could not be fetched")

// Fetch downloads the image at rawURL and returns its sniffed media type and
// bytes. It fails if the URL is not http(s), resolves to a refused address,
// answers other than 200, is larger than the cap, or is not a png, jpeg,
// gif or webp image. The error message is safe to show the client: a
// refused address, a connection failure and a non-200 answer all say
// "could not be fetched".
func (f *ImageFetcher) Fetch(ctx context.Context, rawURL string) (mediaType string, data []byte, err error) {
	if !checkImageURL(rawURL) {
		return "", nil, errors.New("image URL must be http or https")
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return "", nil, errors.New("image URL is malformed")
	}
	req.Header.Set("Accept", "image/png, image/jpeg, image/gif, image/webp")
	// A refused address, a failed connection and an answer other than 200
	// all read the same, so that the gateway is no probe of what answers
	// where (internal hosts, ports, statuses).
	resp, err := f.client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrRefusedAddr) {
			return "", nil, errors.New("image URL did not answer in time")
		}
		return "", nil, errNotFetched
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, errNotFetched
	}
	if resp.ContentLength > int64(f.maxBytes) {
		return "", nil, fmt.Errorf("image is larger than %d bytes", f.maxBytes)
	}
	data, err = io.ReadAll(io.LimitReader(resp.Body, int64(f.maxBytes)+1))
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", nil, errors.New("image URL did not answer in time")
		}
		return "", nil, errNotFetched
	}
	if len(data) > f.maxBytes {
		return "", nil, fmt.Errorf("image is larger than %d bytes", f.maxBytes)
	}
	mediaType = sniffImage(data)
	if mediaType == "" {
		return "", nil, errNotImage
	}
	return mediaType, data, nil
}
