package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/genway/genway/shared/credits"
)

// TestAdminRecords: GET /admin/v1/records lists every account's records
// newest first, filtered by account, key, model, status and kind, in
// pages chained by next_cursor; GET /admin/v1/records/{id} is any
// account's record with its charge explained; an unknown id is a 404
// record_not_found, a bad filter or cursor a 400 naming it, and without
// the operator token both are 401.
func TestAdminRecords(t *testing.T) {
	e := adminServer(t)
	now := time.Now() // records expire after the store's retention from their At
	base := now.UnixMilli() - 10_000
	var recs []credits.Record
	for i := range 7 {
		r := credits.Record{ID: fmt.Sprintf("chatcmpl-%02d", i), Kind: credits.KindChat, Account: "a", Key: "key_a",
			ModelAsked: "openai/gpt-4o-mini", Model: "openai/gpt-4o-mini", Provider: "openai", Attempts: "openai/gpt-4o-mini=200",
			Tokens: credits.Tokens{Prompt: 1000, Cached: 200, Completion: 50},
			Rates:  credits.TokenRates{Input: 150_000, CachedInput: 75_000, Output: 600_000},
			Status: credits.StatusCompleted, FinishReason: "stop", LatencyMS: 300, At: base + int64(i)*1000}
		switch {
		case i == 3:
			r.Account, r.Key = "b", "key_b"
		case i == 5:
			r.Status, r.Tokens, r.FinishReason = credits.StatusFailed, credits.Tokens{}, ""
		case i == 6:
			r.ID, r.Kind, r.Model, r.ModelAsked, r.Provider, r.Attempts = "img_06", credits.KindImage, "openai/gpt-image-1", "openai/gpt-image-1", "openai", "openai/gpt-image-1=200"
			r.Tokens, r.Rates, r.FinishReason, r.Units, r.UnitPrice = credits.Tokens{}, credits.TokenRates{}, "", 2, 40_000
		}
		r.Cost = r.Explain().Rounded
		if r.Status == credits.StatusFailed {
			r.Cost = 0
		}
		recs = append(recs, r)
	}
	for i, err := range e.store.AddRecords(context.Background(), recs[:6]) {
		if err != nil {
			t.Fatalf("AddRecords[%d] = %v", i, err)
		}
	}
	// The image's record is written with its settlement, as images are.
	img := recs[6]
	res := credits.Entry{ID: credits.ReservationID(img.ID), Account: "a", Kind: credits.Reservation, Amount: 100_000,
		JobType: "image", Model: img.Model, At: now.Unix()}
	if err := e.store.Reserve(context.Background(), res); err != nil {
		t.Fatal(err)
	}
	settlement := credits.Entry{ID: credits.SettlementID(img.ID), Account: "a", Kind: credits.Capture, Amount: img.Cost, Hold: res.Amount,
		JobType: "image", Model: img.Model, At: now.Unix()}
	if err := e.store.SettleRecord(context.Background(), settlement, img); err != nil {
		t.Fatal(err)
	}

	type list struct {
		Data       []credits.Record `json:"data"`
		HasMore    bool             `json:"has_more"`
		NextCursor *string          `json:"next_cursor"`
	}
	ids := func(l list) string {
		var s []string
		for _, r := range l.Data {
			s = append(s, r.ID)
		}
		return strings.Join(s, ",")
	}
	for _, tc := range []struct{ query, want string }{
		{"", "img_06,chatcmpl-05,chatcmpl-04,chatcmpl-03,chatcmpl-02,chatcmpl-01,chatcmpl-00"},
		{"account=b", "chatcmpl-03"},
		{"key=key_a&kind=chat", "chatcmpl-05,chatcmpl-04,chatcmpl-02,chatcmpl-01,chatcmpl-00"},
		{"status=failed", "chatcmpl-05"},
		{"kind=image", "img_06"},
		{"model=openai/gpt-image-1", "img_06"},
		{"account=nobody", ""},
	} {
		var l list
		if status, body := e.call(t, bearer, "GET", "/admin/v1/records?"+tc.query, "", &l); status != 200 {
			t.Fatalf("GET records?%s = %d %s", tc.query, status, body)
		}
		if got := ids(l); got != tc.want || l.HasMore || l.NextCursor != nil {
			t.Errorf("records?%s = [%s] more=%v cursor=%v; want [%s], no more", tc.query, got, l.HasMore, l.NextCursor, tc.want)
		}
	}

	// Pages of 3, each after the previous one's cursor, hold every record
	// once, in order; the last says there is no more.
	var all []string
	after := ""
	for page := 0; ; page++ {
		var l list
		path := "/admin/v1/records?limit=3"
		if after != "" {
			path += "&after=" + url.QueryEscape(after)
		}
		if status, body := e.call(t, bearer, "GET", path, "", &l); status != 200 {
			t.Fatalf("GET %s = %d %s", path, status, body)
		}
		all = append(all, ids(l))
		if !l.HasMore {
			if l.NextCursor != nil || page != 2 {
				t.Errorf("last page %d has cursor %v; want page 2, none", page, l.NextCursor)
			}
			break
		}
		if l.NextCursor == nil || len(l.Data) != 3 {
			t.Fatalf("page %d: %d records, cursor %v; want 3 and a cursor", page, len(l.Data), l.NextCursor)
		}
		after = *l.NextCursor
	}
	if got, want := strings.Join(all, "|"), "img_06,chatcmpl-05,chatcmpl-04|chatcmpl-03,chatcmpl-02,chatcmpl-01|chatcmpl-00"; got != want {
		t.Errorf("pages = %s; want %s", got, want)
	}

	// One record: every field, and the charge whose cost is the record's.
	var one struct {
		credits.Record
		Charge credits.Charge `json:"charge"`
	}
	if status, body := e.call(t, bearer, "GET", "/admin/v1/records/chatcmpl-03", "", &one); status != 200 {
		t.Fatalf("GET record = %d %s", status, body)
	}
	want := recs[3]
	want.Expires = one.Expires // the store's retention after At
	if one.Record != want || one.Expires <= now.Unix() {
		t.Errorf("record = %+v; want %+v with an expiry", one.Record, recs[3])
	}
	if one.Charge.Cost != recs[3].Cost || one.Charge.Cost == 0 || one.Charge.Entry != credits.ChatEntryID(recs[3].ID) {
		t.Errorf("charge = %+v; want cost %d, entry %s", one.Charge, recs[3].Cost, credits.ChatEntryID(recs[3].ID))
	}
	var classes []string
	for _, l := range one.Charge.Lines {
		classes = append(classes, l.Class)
	}
	if got := strings.Join(classes, ","); got != "input,cached input,output" {
		t.Errorf("charge lines = %s; want input,cached input,output", got)
	}
	var imgView struct {
		credits.Record
		Charge credits.Charge `json:"charge"`
	}
	if status, body := e.call(t, bearer, "GET", "/admin/v1/records/img_06", "", &imgView); status != 200 {
		t.Fatalf("GET image record = %d %s", status, body)
	}
	if imgView.Charge.Cost != img.Cost || imgView.Charge.Entry != credits.SettlementID(img.ID) || len(imgView.Charge.Lines) != 1 || imgView.Charge.Lines[0].Quantity != 2 {
		t.Errorf("image charge = %+v; want cost %d over 2 images, entry %s", imgView.Charge, img.Cost, credits.SettlementID(img.ID))
	}
	// The ledger's charges are the records' costs.
	var charged credits.Amount
	for _, r := range recs {
		if r.Account == "a" {
			charged += r.Cost
		}
	}
	acct, err := e.store.Account(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	if spent := 1_000_000*credits.Credit - acct.Balance; spent != charged {
		t.Errorf("account a spent %d; its records cost %d", spent, charged)
	}

	for _, tc := range []struct {
		path        string
		status      int
		code, param string
	}{
		{"/admin/v1/records/chatcmpl-nothing", 404, "record_not_found", ""},
		{"/admin/v1/records?status=done", 400, "invalid_value", "status"},
		{"/admin/v1/records?kind=video", 400, "invalid_value", "kind"},
		{"/admin/v1/records?limit=0", 400, "invalid_value", "limit"},
		{"/admin/v1/records?limit=x", 400, "invalid_value", "limit"},
		{fmt.Sprintf("/admin/v1/records?limit=%d", credits.MaxRecordLimit+1), 400, "invalid_value", "limit"},
		{"/admin/v1/records?after=not-a-cursor", 400, "invalid_value", "after"},
	} {
		status, body := e.call(t, bearer, "GET", tc.path, "", nil)
		var env struct {
			Error struct {
				Code  string  `json:"code"`
				Param *string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal([]byte(body), &env)
		param := ""
		if env.Error.Param != nil {
			param = *env.Error.Param
		}
		if status != tc.status || env.Error.Code != tc.code || param != tc.param {
			t.Errorf("GET %s = %d %s; want %d %s param %q", tc.path, status, body, tc.status, tc.code, tc.param)
		}
	}
	for _, path := range []string{"/admin/v1/records", "/admin/v1/records/chatcmpl-03"} {
		for _, auth := range []string{"", "Bearer gwop_wrong", adminTestToken} {
			if status, body := e.call(t, auth, "GET", path, "", nil); status != 401 || !strings.Contains(body, `"code":"invalid_admin_token"`) {
				t.Errorf("GET %s with %q = %d %s; want 401 invalid_admin_token", path, auth, status, body)
			}
		}
	}
}
