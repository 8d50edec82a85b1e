package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/credits"
)

// requestsPageSize is the requests page's page size.
const requestsPageSize = 50

// requestRoutes are the pages of the records of requests.
func (c *Console) requestRoutes() []Route {
	return []Route{
		{"GET", "/console/requests", c.requestsPage},
		{"GET", "/console/requests/{id}", c.requestPage},
	}
}

// requestFilter is the requests page's filter, from its query string.
type requestFilter struct {
	Account, Key, Model, Status, Kind, After string
}

func requestFilterOf(r *http.Request) requestFilter {
	q := r.URL.Query()
	get := func(k string) string { return strings.TrimSpace(q.Get(k)) }
	return requestFilter{Account: get("account"), Key: get("key"), Model: get("model"), Status: get("status"), Kind: get("kind"), After: get("after")}
}

// any reports whether a filter is set.
func (f requestFilter) any() bool {
	return f.Account != "" || f.Key != "" || f.Model != "" || f.Status != "" || f.Kind != ""
}

// values is f as a query string, with after set to cursor.
func (f requestFilter) values(cursor string) string {
	v := url.Values{}
	for k, s := range map[string]string{"account": f.Account, "key": f.Key, "model": f.Model, "status": f.Status, "kind": f.Kind, "after": cursor} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// requestRow is a record as the requests table shows it.
type requestRow struct {
	ID, Account, Key, Kind, ModelAsked, Model, Status, At, Tokens, Latency string
	Cost                                                                   credits.Amount
	Partial                                                                bool
}

func requestRowOf(r credits.Record) requestRow {
	row := requestRow{ID: r.ID, Account: r.Account, Key: r.Key, Kind: r.Kind, ModelAsked: r.ModelAsked, Model: r.Model, Status: r.Status,
		At: msTime(r.At), Cost: r.Cost, Partial: r.Partial, Latency: msDuration(r.LatencyMS)}
	switch {
	case r.Chat() && r.Status != credits.StatusFailed:
		row.Tokens = strconv.FormatInt(r.Tokens.Prompt, 10) + " / " + strconv.FormatInt(r.Tokens.Completion, 10)
	case r.Kind == credits.KindImage && r.Units > 0:
		row.Tokens = strconv.FormatInt(r.Units, 10) + " image(s)"
	case r.Kind == credits.KindSpeech && r.Units > 0:
		row.Tokens = strconv.FormatInt(r.Units, 10) + " characters"
	}
	return row
}

// msTime formats Unix milliseconds as the pages show times (UTC), to the
// millisecond.
func msTime(ms int64) string {
	if ms == 0 {
		return ""
	}
	return time.UnixMilli(ms).UTC().Format("2006-01-02 15:04:05.000")
}

// msDuration formats milliseconds ("850 ms", "12.3 s").
func msDuration(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

// requestsPage is the requests page's data.
type requestsPage struct {
	Filter   requestFilter
	Rows     []requestRow
	Next     string // the next page's URL ("" on the last page)
	Filtered bool
	Accounts []admin.AccountInfo
	Models   []string
	Statuses []string
	Kinds    []string
}

// requestsPage lists the records of requests, newest first, with filters
// by account, key, model, status and kind.
func (c *Console) requestsPage(p *Page, w http.ResponseWriter, r *http.Request) error {
	p.Section, p.Title = "requests", "Requests"
	f := requestFilterOf(r)
	d := requestsPage{Filter: f, Filtered: f.any(),
		Statuses: []string{credits.StatusCompleted, credits.StatusClientClosed, credits.StatusUpstreamError, credits.StatusFailed},
		Kinds:    []string{credits.KindChat, credits.KindResponses, credits.KindMessages, credits.KindImage, credits.KindSpeech}}
	p.Data = &d
	rs, next, err := c.cfg.Operator.Requests(r.Context(), credits.RecordQuery{Account: f.Account, Key: f.Key, Model: f.Model,
		Status: f.Status, Kind: f.Kind, Cursor: f.After, Limit: requestsPageSize})
	if err != nil {
		return err
	}
	for _, rec := range rs {
		d.Rows = append(d.Rows, requestRowOf(rec))
	}
	if next != "" {
		d.Next = "/console/requests?" + f.values(next)
	}
	if d.Accounts, err = c.cfg.Operator.Accounts(r.Context()); err != nil {
		return err
	}
	for _, m := range c.cfg.Catalog.List("", nil) {
		if m.Type == catalog.TypeChat || m.Type == catalog.TypeImage || m.Type == catalog.TypeSpeech {
			d.Models = append(d.Models, m.ID)
		}
	}
	return p.Render(w, r, "requests")
}

// requestDetail is a record's page: the record, and its charge line by
// line.
type requestDetail struct {
	credits.Record
	Time, Expires, Latency, FirstToken string
	Charge                             credits.Charge
	// Capped: the cost is below the rounded sum (an image never costs
	// more than was reserved for it).
	Capped bool
	// Unit names what a rate is per, for the charge table.
	Unit string
}

func (c *Console) requestPage(p *Page, w http.ResponseWriter, r *http.Request) error {
	rec, err := c.cfg.Operator.Request(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	p.Section, p.Title = "requests", "Request "+rec.ID
	d := requestDetail{Record: rec, Time: msTime(rec.At), Latency: msDuration(rec.LatencyMS), Charge: rec.Explain(), Unit: "1M tokens"}
	if rec.FirstTokenMS > 0 {
		d.FirstToken = msDuration(rec.FirstTokenMS)
	}
	if rec.Expires > 0 {
		d.Expires = unixTime(rec.Expires)
	}
	switch rec.Kind {
	case credits.KindImage:
		d.Unit = "image"
	case credits.KindSpeech:
		d.Unit = "1,000 characters"
	}
	d.Capped = rec.Status != credits.StatusFailed && rec.Cost < d.Charge.Rounded
	p.Data = &d
	return p.Render(w, r, "request")
}
