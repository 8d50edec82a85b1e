package chat

import (
	"net/http"
	"strconv"
	"time"
)

// RetryAfter reads how long an upstream's error answer (a 429, a 503...)
// asks to wait: OpenAI's Retry-After-Ms, or Retry-After in seconds or as
// an HTTP date; 0 if absent or invalid. Providers put it in
// UpstreamError.RetryAfter (StatusError does).
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
