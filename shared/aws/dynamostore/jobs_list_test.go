package dynamostore

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/genway/genway/shared/aws/mototest"
	"github.com/genway/genway/shared/jobs"
)

func TestCreatedID(t *testing.T) {
	tests := []struct {
		created int64
		id      string
	}{
		{0, "job_sfx_a"}, {1700000000, "job_video_0123456789abcdefghij"}, {999999999999, "x"},
	}
	for _, tt := range tests {
		k := createdID(tt.created, tt.id)
		c, ok := parseCreatedID(k)
		if !ok || c.Created != tt.created || c.ID != tt.id {
			t.Errorf("parseCreatedID(createdID(%d, %q) = %q) = %+v, %v", tt.created, tt.id, k, c, ok)
		}
	}
	// The string order is the listing's: newer first when descending.
	keys := []string{createdID(99, "job_sfx_b"), createdID(100, "job_sfx_a"), createdID(100, "job_sfx_b"), createdID(1000, "job_sfx_a")}
	if !slices.IsSorted(keys) {
		t.Errorf("created ids %v are not in (created, id) order", keys)
	}
	for _, bad := range []string{"", "123#x", "000000000100", "00000000010x#job", "000000000100#"} {
		if c, ok := parseCreatedID(bad); ok {
			t.Errorf("parseCreatedID(%q) = %+v; want not ok", bad, c)
		}
	}
}

// ids lists every page of q (small index pages) and returns the ids.
func ids(t *testing.T, s *Store, q jobs.ListQuery) (out []string, pages int) {
	t.Helper()
	for {
		js, next, err := s.List(context.Background(), q)
		if err != nil {
			t.Fatalf("List(%+v) = %v", q, err)
		}
		pages++
		for _, j := range js {
			out = append(out, j.ID)
		}
		if next == "" || pages > 100 {
			return out, pages
		}
		q.Cursor = next
	}
}

func TestList(t *testing.T) {
	endpoint := mototest.Start(t)
	ctx := context.Background()

	t.Run("pages of the index and the page bound", func(t *testing.T) {
		s, _ := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 1000, 1); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 30 {
			j := newJob(fmt.Sprintf("job_sfx_%03d", i), "acct1", 1)
			j.Created = 1000 + int64(i)
			if _, err := s.Create(ctx, j, nil); err != nil {
				t.Fatal(err)
			}
			if i%10 == 0 { // 3 of them failed
				if _, err := s.Transition(ctx, j.ID, jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: "x"}}); err != nil {
					t.Fatal(err)
				}
				want = append([]string{j.ID}, want...)
			}
		}
		// Index pages of 2 items: a filter matching 1 in 10 reads 5
		// pages per match, and a page stops after listMaxPages (10).
		s.queryPage = 2
		got, pages := ids(t, s, jobs.ListQuery{Account: "acct1", Status: jobs.Failed, Limit: 5})
		if !slices.Equal(got, want) {
			t.Errorf("List(failed) over small index pages = %v; want %v", got, want)
		}
		t.Logf("List(failed, limit 5) over index pages of 2 items: %d pages", pages)
		if pages < 2 {
			t.Errorf("List(failed) took %d pages; want the page bound to cut at least one", pages)
		}
		all, _ := ids(t, s, jobs.ListQuery{Account: "acct1", Limit: 7})
		if len(all) != 30 || all[0] != "job_sfx_029" || all[29] != "job_sfx_000" {
			t.Errorf("List(all) over small index pages = %v; want the 30 jobs newest first", all)
		}
		every, _ := ids(t, s, jobs.ListQuery{Limit: 7}) // a Scan, in pages of 2 items
		if !slices.Equal(every, all) {
			t.Errorf("List(every account) = %v; want %v", every, all)
		}
	})

	t.Run("expired and pre-index jobs are not listed", func(t *testing.T) {
		s, client := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 1000, 1); err != nil {
			t.Fatal(err)
		}
		now := time.Unix(1_000_000, 0)
		s.now = func() time.Time { return now }
		s.JobRetention = time.Hour
		for _, id := range []string{"job_sfx_old", "job_sfx_live"} {
			if _, err := s.Create(ctx, newJob(id, "acct1", 1), nil); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.Transition(ctx, "job_sfx_old", jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: "x"}}); err != nil {
			t.Fatal(err)
		}
		// A job stored before created_id existed (no index key).
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("jobs"), Item: map[string]types.AttributeValue{
			"id": str("job_sfx_legacy"), "account": str("acct1"), "status": str("queued"), "created": num(1000),
		}}); err != nil {
			t.Fatal(err)
		}
		now = now.Add(2 * time.Hour) // past the failed job's retention
		for _, q := range []jobs.ListQuery{{Account: "acct1"}, {}} {
			if got, _ := ids(t, s, q); !slices.Equal(got, []string{"job_sfx_live"}) {
				t.Errorf("List(%+v) = %v; want only the live, indexed job", q, got)
			}
		}
	})

	t.Run("history is a list in the item", func(t *testing.T) {
		s, client := newStore(t, endpoint)
		if _, err := s.Grant(ctx, "acct1", 10, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, newJob("job_sfx_h", "acct1", 1), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Transition(ctx, "job_sfx_h", jobs.Queued, jobs.Failed, jobs.Patch{Error: &jobs.JobError{Code: jobs.CodeCancelled}, Updated: 1005}); err != nil {
			t.Fatal(err)
		}
		item := rawJob(t, client, "job_sfx_h")
		h, ok := item["history"].(*types.AttributeValueMemberL)
		if !ok || len(h.Value) != 2 {
			t.Fatalf("history = %#v; want a list of 2", item["history"])
		}
		if k := stringAttr(item, CreatedIDAttribute); k != createdID(1000, "job_sfx_h") {
			t.Errorf("created_id = %q; want %q", k, createdID(1000, "job_sfx_h"))
		}
		last := h.Value[1].(*types.AttributeValueMemberM).Value
		if stringAttr(last, "status") != "failed" || numberAttr(last, "at") != 1005 || stringAttr(last, "error_code") != jobs.CodeCancelled {
			t.Errorf("history[1] = %v; want failed at 1005, cancelled", last)
		}
	})
}
