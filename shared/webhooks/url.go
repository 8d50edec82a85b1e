package webhooks

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/chat"
)

// MaxURLChars bounds a webhook URL.
const MaxURLChars = 2048

// CheckURL validates a webhook URL for param (webhook_url, url): an
// absolute https URL with a host and no user info, whose host is no
// loopback, private or otherwise internal address or name (the addresses
// chat.PublicAddr refuses for image URLs). With allowPrivate
// (GENWAY_WEBHOOK_ALLOW_PRIVATE=1, for local development) internal hosts
// are accepted, and http too for a loopback host. The check at dial time
// (NewClient) refuses what a name resolves to as well.
func CheckURL(param, raw string, allowPrivate bool) error {
	bad := func(format string, args ...any) error {
		return apierr.Invalidf(param, "invalid_webhook_url", format, args...)
	}
	if len(raw) > MaxURLChars {
		return bad("%s is longer than %d characters.", param, MaxURLChars)
	}
	u, err := url.Parse(raw)
	if err != nil || !u.IsAbs() || u.Host == "" || u.Opaque != "" {
		return bad("%s must be an absolute https URL.", param)
	}
	if u.User != nil {
		return bad("%s must not carry a user name or password.", param)
	}
	if u.Fragment != "" {
		return bad("%s must not have a #fragment.", param)
	}
	host := u.Hostname()
	internal := internalHost(host)
	switch u.Scheme {
	case "https":
	case "http":
		if !allowPrivate || !loopbackHost(host) {
			return bad("%s must be https (http is accepted only for a loopback host with GENWAY_WEBHOOK_ALLOW_PRIVATE=1).", param)
		}
	default:
		return bad("%s must be an absolute https URL.", param)
	}
	if internal && !allowPrivate {
		return bad("%s points at a loopback, private or internal address, which is not allowed.", param)
	}
	return nil
}

// internalHost reports whether host is an address chat.PublicAddr refuses,
// a number that resolvers and browsers read as an IPv4 address although
// it is not one written canonically (127.1, 0177.0.0.1, 0x7f.1,
// 2130706433), or a name that only resolves inside a network.
func internalHost(host string) bool {
	h := strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return !chat.PublicAddr(a)
	}
	if numericHost(h) {
		return true
	}
	if !strings.Contains(h, ".") {
		return true // localhost, a bare intranet name
	}
	for _, s := range []string{".localhost", ".local", ".internal", ".lan", ".home.arpa", ".intranet", ".corp"} {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

// numericHost reports whether h's last label is a number (decimal, or
// hexadecimal after 0x): the WHATWG URL standard then reads the whole host
// as an IPv4 address in any of inet_aton's forms, and so does the C
// library's resolver. Only a canonical dotted quad (which netip parses) is
// taken for an address; every other such host is refused.
func numericHost(h string) bool {
	last := h[strings.LastIndexByte(h, '.')+1:]
	if hex, ok := strings.CutPrefix(last, "0x"); ok {
		return strings.Trim(hex, "0123456789abcdef") == ""
	}
	return last != "" && strings.Trim(last, "0123456789") == ""
}

func loopbackHost(host string) bool {
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		return a.Unmap().IsLoopback()
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	return h == "localhost" || strings.HasSuffix(h, ".localhost")
}

// NewClient returns the HTTP client deliveries use: no proxy, no
// redirects followed (a 3xx is a failed attempt), and unless allowPrivate
// every connection's resolved address checked at dial time
// (chat.DialCheck, with chat.PublicAddr), so that a name resolving to an
// internal address (DNS rebinding included) is refused. The caller bounds
// each request with its context (Timeout).
func NewClient(allowPrivate bool) *http.Client {
	dialer := &net.Dialer{Timeout: Timeout}
	if !allowPrivate {
		dialer.Control = chat.DialCheck(chat.PublicAddr)
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   Timeout,
		ResponseHeaderTimeout: Timeout,
		MaxIdleConnsPerHost:   4,
		IdleConnTimeout:       30 * time.Second,
	}
	return &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
