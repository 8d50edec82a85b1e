package route

import "testing"

func TestStatusFault(t *testing.T) {
	tests := []struct {
		status int
		want   FaultKind
	}{
		{400, VendorRejected}, {404, VendorRejected}, {413, VendorRejected}, {422, VendorRejected},
		{429, VendorRateLimited},
		{408, VendorTimeout}, {504, VendorTimeout},
		{503, VendorUnavailable}, {529, VendorUnavailable},
		{0, VendorFailed}, {401, VendorFailed}, {402, VendorFailed}, {403, VendorFailed}, {409, VendorFailed},
		{500, VendorFailed}, {502, VendorFailed},
	}
	for _, tt := range tests {
		if got := StatusFault(tt.status); got != tt.want {
			t.Errorf("StatusFault(%d) = %v; want %v", tt.status, got, tt.want)
		}
	}
}

func TestFaultOverloaded(t *testing.T) {
	tests := []struct {
		f    Fault
		want bool
	}{
		{Fault{Kind: VendorUnavailable, Status: 503}, true},
		{Fault{Kind: VendorUnavailable, Status: 529}, true},
		{Fault{Kind: VendorUnavailable}, false}, // not configured: no status
		{Fault{Kind: VendorFailed, Status: 500}, false},
		{Fault{Kind: VendorRateLimited, Status: 429}, false},
	}
	for _, tt := range tests {
		if got := tt.f.Overloaded(); got != tt.want {
			t.Errorf("%+v.Overloaded() = %v; want %v", tt.f, got, tt.want)
		}
	}
}

func TestFaultKindString(t *testing.T) {
	tests := []struct {
		k    FaultKind
		want string
	}{
		{VendorFailed, "failed"}, {VendorRejected, "rejected"}, {VendorRateLimited, "rate_limited"},
		{VendorUnavailable, "unavailable"}, {VendorTimeout, "timeout"}, {VendorContentPolicy, "content_policy"},
		{FaultKind(42), "FaultKind(42)"},
	}
	for _, tt := range tests {
		if got := tt.k.String(); got != tt.want {
			t.Errorf("FaultKind(%d).String() = %q; want %q", int(tt.k), got, tt.want)
		}
	}
}
