package chat_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/genway/genway/shared/chat"
)

// addUsageFunc is a chat.UsageStore fake.
type addUsageFunc func(ctx context.Context, account, model, day string, prompt, completion int, credits int64) error

func (f addUsageFunc) AddUsage(ctx context.Context, account, model, day string, prompt, completion int, credits int64) error {
	return f(ctx, account, model, day, prompt, completion, credits)
}

func TestStoreRecorder(t *testing.T) {
	errStore := errors.New("store down")
	tests := []struct {
		name    string
		now     time.Time
		credits int64
		err     error
		want    string
	}{
		{"utc day", time.Date(2025, 3, 1, 23, 59, 59, 0, time.UTC), 0, nil, "acct1 m 2025-03-01 7 9 0"},
		// 01:30 at UTC+2 is still the previous day in UTC.
		{"local clock", time.Date(2025, 3, 2, 1, 30, 0, 0, time.FixedZone("EET", 2*3600)), 5, nil, "acct1 m 2025-03-01 7 9 5"},
		{"store error", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), 0, errStore, "acct1 m 2025-03-01 7 9 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got string
			r := chat.StoreRecorder{
				Store: addUsageFunc(func(_ context.Context, account, model, day string, prompt, completion int, credits int64) error {
					got = fmt.Sprint(account, " ", model, " ", day, " ", prompt, " ", completion, " ", credits)
					return tt.err
				}),
				Now: func() time.Time { return tt.now },
			}
			err := r.RecordChatUsage(context.Background(), "acct1", "m", chat.Usage{PromptTokens: 7, CompletionTokens: 9, TotalTokens: 16}, tt.credits)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Errorf("RecordChatUsage = %v; want %v", err, tt.err)
			}
			if got != tt.want {
				t.Errorf("AddUsage called with %q; want %q", got, tt.want)
			}
		})
	}
}
