package jobs

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

// TestFailureOf: a vendor's refusal of the request keeps its code and
// words; a failure about the operator's account at the vendor (its key,
// quota, balance: Account, 401, 402, 403, a quota-exhausted 429) tells
// the client only that the provider failed, and keeps the vendor's words
// in Vendor for the operator; anything else is no final failure.
func TestFailureOf(t *testing.T) {
	const secret = "Incorrect API key provided: el-UPSTREAM-1234; org org-42 balance $0.00"
	tests := []struct {
		name       string
		err        error
		want       *JobError // nil: none
		wantVendor bool
	}{
		{"refused prompt", &ProviderError{Code: CodeContentPolicy, Status: 400, Message: "The prompt was flagged."},
			&JobError{Code: CodeContentPolicy, Message: "The prompt was flagged."}, false},
		{"bad request", &ProviderError{Code: CodeUpstream, Status: 422, Message: "fal: duration must be 5 or 10"},
			&JobError{Code: CodeUpstream, Message: "fal: duration must be 5 or 10"}, false},
		{"401", StatusError("submit", 401, nil, Refusal{Message: secret}), nil, true},
		{"402", StatusError("submit", 402, nil, Refusal{Message: secret}), nil, true},
		{"403", StatusError("poll", 403, nil, Refusal{Message: secret}), nil, true},
		{"400 naming the key (Gemini)", StatusError("submit", 400, nil, Refusal{Message: secret, Account: true}), nil, true},
		{"a status made by hand", &ProviderError{Code: CodeUpstream, Status: http.StatusForbidden, Message: secret}, nil, true},
		{"quota 429", StatusError("submit", 429, nil, Refusal{Message: secret, Account: true}), nil, true},
		{"wrapped", errors.Join(errors.New("start"), StatusError("submit", 401, nil, Refusal{Message: secret})), nil, true},
		{"rate limited 429", StatusError("submit", 429, nil, Refusal{Message: "slow down"}), nil, false},
		{"network", errors.New("connection reset"), nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := FailureOf("elevenlabs", tt.err)
			switch {
			case tt.want != nil:
				if got == nil || *got != *tt.want {
					t.Errorf("FailureOf(%v) = %+v; want %+v", tt.err, got, tt.want)
				}
			case tt.wantVendor:
				if got == nil || got.Code != CodeUpstream || got.Message != "The elevenlabs provider failed; no credits were charged." ||
					!strings.Contains(got.Vendor, "el-UPSTREAM-1234") {
					t.Errorf("FailureOf(%v) = %+v; want the generic upstream_error, the vendor's words in Vendor only", tt.err, got)
				}
			default:
				if got != nil {
					t.Errorf("FailureOf(%v) = %+v; want nil", tt.err, got)
				}
			}
		})
	}
}
