package chat

import (
	"context"
	"fmt"
	"time"
)

// UsageStore is what a StoreRecorder writes to: it adds one completion to
// the (account, day, model) usage and charges credits when they are > 0.
// credits.UsageStore (localstore, dynamostore) implements it.
type UsageStore interface {
	AddUsage(ctx context.Context, account, model, day string, promptTokens, completionTokens int, credits int64) error
}

// StoreRecorder is the UsageRecorder that adds each completion to Store
// under the UTC day (YYYY-MM-DD) it finished on. It is safe for concurrent
// use if Store is.
type StoreRecorder struct {
	Store UsageStore
	Now   func() time.Time // nil: time.Now
}

var _ UsageRecorder = StoreRecorder{}

// RecordChatUsage implements UsageRecorder.
func (r StoreRecorder) RecordChatUsage(ctx context.Context, account, model string, u Usage, credits int64) error {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	day := now().UTC().Format("2006-01-02")
	if err := r.Store.AddUsage(ctx, account, model, day, u.PromptTokens, u.CompletionTokens, credits); err != nil {
		return fmt.Errorf("record usage of %s for %s: %w", model, account, err)
	}
	return nil
}
