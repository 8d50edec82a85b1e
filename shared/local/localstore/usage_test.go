package localstore

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/storetest"
)

func TestUsageContract(t *testing.T) {
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageBackend { return openTemp(t) })
}

// TestUsageContractShared runs the usage contract against one file for
// every subtest.
func TestUsageContractShared(t *testing.T) {
	s := openTemp(t)
	storetest.RunUsage(t, func(t *testing.T) storetest.UsageBackend { return s })
}

// TestUsageSurvivesReopen checks that a record, its usage and its charge
// are on disk together after a close and reopen.
func TestUsageSurvivesReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "genway.db")
	s, err := Open(path)
	if err != nil {
		t.Fatalf("Open(%q) = %v", path, err)
	}
	if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
		t.Fatalf("Grant = %v", err)
	}
	r := credits.Record{ID: "chatcmpl-1", Kind: credits.KindChat, Account: "acct1", ModelAsked: "priced-chat", Model: "priced-chat",
		Tokens: credits.Tokens{Prompt: 5, Completion: 6}, Cost: 3, Status: credits.StatusCompleted, At: time.Now().UnixMilli()}
	if err := s.AddRecords(ctx, []credits.Record{r})[0]; err != nil {
		t.Fatalf("AddRecords = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close = %v", err)
	}
	s = openAt(t, path)
	u, err := s.Usage(ctx, "acct1", credits.Day(time.Now()), "")
	if err != nil || len(u) != 1 || u[0].Requests != 1 || u[0].PromptTokens != 5 || u[0].CompletionTokens != 6 || u[0].Credits != 3 {
		t.Errorf("Usage after reopen = %+v, %v; want one request of 5+6 tokens, 3 credits", u, err)
	}
	if a, err := s.Account(ctx, "acct1"); err != nil || a.Balance != 7 || a.Available != 7 {
		t.Errorf("Account after reopen = %+v, %v; want balance = available = 7", a, err)
	}
	if got, err := s.Record(ctx, "chatcmpl-1"); err != nil || got.Cost != 3 {
		t.Errorf("Record after reopen = %+v, %v; want the record of 3", got, err)
	}
}
