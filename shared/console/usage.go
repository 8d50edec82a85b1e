package console

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/credits"
)

// Usage page bounds.
const (
	usageDefaultDays = 30  // the range when none is asked for
	usageMaxDays     = 366 // the longest range (one bar group a day)
	chartSeries      = 8   // colours; more models share the last one
)

// The chart's geometry, in SVG user units (the SVG scales to its box).
const (
	chartW, chartH      = 720.0, 260.0
	plotLeft, plotRight = 56.0, 8.0
	plotTop, plotBottom = 12.0, 28.0
	chartMaxXLabels     = 8
	chartBarOf          = 0.75 // a bar's width: this much of its day's slot
)

// metrics are what the chart can show, by the metric parameter.
var metrics = []struct{ ID, Label string }{
	{"requests", "Requests"},
	{"tokens", "Tokens (prompt + completion)"},
	{"credits", "Credits"},
}

func metricOf(u *credits.Usage, metric string) int64 {
	switch metric {
	case "tokens":
		return u.PromptTokens + u.CompletionTokens
	case "credits":
		return u.Credits
	}
	return u.Requests
}

// bar is one rectangle of the chart: one model's part of one day.
type bar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// tick is a label on an axis, at Pos.
type tick struct {
	Pos   float64
	Label string
}

// series is one model of the legend.
type series struct {
	Class, Model string
	Total        int64
}

// chart is the usage chart, laid out for the template.
type chart struct {
	W, H, Left, Right, Top, Bottom float64
	Bars                           []bar
	YTicks, XTicks                 []tick
	Legend                         []series
	Label, Summary                 string
	Empty                          bool
}

// usagePage is the usage page's data.
type usagePage struct {
	Account, Model, From, To, Metric string
	Accounts                         []admin.AccountInfo
	Models                           []string
	Metrics                          []struct{ ID, Label string }
	Rows                             []credits.Usage
	Total                            credits.Usage
	Chart                            chart
}

// dayParam parses a YYYY-MM-DD query parameter, or returns def.
func dayParam(r *http.Request, name string, def time.Time) (time.Time, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return def, nil
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return t, apierr.Invalidf(name, "invalid_value", "%s must be a day as YYYY-MM-DD; got %q", name, v)
	}
	return t, nil
}

func (c *Console) usage(p *Page, w http.ResponseWriter, r *http.Request) error {
	ctx, q := r.Context(), r.URL.Query()
	today := c.now().UTC().Truncate(24 * time.Hour)
	to, err := dayParam(r, "to", today)
	if err != nil {
		return err
	}
	from, err := dayParam(r, "from", to.AddDate(0, 0, 1-usageDefaultDays))
	if err != nil {
		return err
	}
	days := int(to.Sub(from).Hours()/24) + 1
	if days < 1 || days > usageMaxDays {
		return apierr.Invalidf("from", "invalid_value", "from must be on or before to, and at most %d days before it", usageMaxDays-1)
	}
	d := usagePage{Account: strings.TrimSpace(q.Get("account")), Model: strings.TrimSpace(q.Get("model")),
		From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Metric: q.Get("metric"), Metrics: metrics}
	if !slices.ContainsFunc(metrics, func(m struct{ ID, Label string }) bool { return m.ID == d.Metric }) {
		d.Metric = "requests"
	}
	rows, err := c.cfg.Operator.Usage(ctx, d.Account, d.From, d.To)
	if err != nil {
		return err
	}
	if d.Accounts, err = c.cfg.Operator.Accounts(ctx); err != nil {
		return err
	}
	models := map[string]bool{}
	for _, u := range rows {
		models[u.Model] = true
		if d.Model == "" || u.Model == d.Model {
			d.Rows = append(d.Rows, u)
		}
	}
	for _, m := range c.cfg.Catalog.List("chat", nil) {
		models[m.ID] = true
	}
	for m := range models {
		d.Models = append(d.Models, m)
	}
	slices.Sort(d.Models)
	// Newest day first; then by account and model.
	slices.SortFunc(d.Rows, func(a, b credits.Usage) int {
		if c := strings.Compare(b.Day, a.Day); c != 0 {
			return c
		}
		if c := strings.Compare(a.Account, b.Account); c != 0 {
			return c
		}
		return strings.Compare(a.Model, b.Model)
	})
	for _, u := range d.Rows {
		d.Total.Requests += u.Requests
		d.Total.PromptTokens += u.PromptTokens
		d.Total.CompletionTokens += u.CompletionTokens
		d.Total.Credits += u.Credits
	}
	label := d.Metric
	for _, m := range metrics {
		if m.ID == d.Metric {
			label = m.Label
		}
	}
	d.Chart = layoutChart(d.Rows, from, days, d.Metric, label)
	p.Section, p.Title, p.Data = "usage", "Usage", d
	return p.Render(w, r, "usage")
}

// layoutChart lays out a bar chart of rows' metric: one bar a day from
// from, stacked by model (the models with the most first, at the bottom).
func layoutChart(rows []credits.Usage, from time.Time, days int, metric, label string) chart {
	ch := chart{W: chartW, H: chartH, Left: plotLeft, Right: chartW - plotRight, Top: plotTop, Bottom: chartH - plotBottom, Label: label}
	// Sums per model and per day and model.
	totals := map[string]int64{}
	byDay := make([]map[string]int64, days)
	var all int64
	for i := range rows {
		u := &rows[i]
		t, err := time.Parse(time.DateOnly, u.Day)
		if err != nil {
			continue
		}
		i := int(t.Sub(from).Hours() / 24)
		if i < 0 || i >= days {
			continue
		}
		v := metricOf(u, metric)
		if byDay[i] == nil {
			byDay[i] = map[string]int64{}
		}
		byDay[i][u.Model] += v
		totals[u.Model] += v
		all += v
	}
	order := make([]string, 0, len(totals))
	for m := range totals {
		order = append(order, m)
	}
	slices.SortFunc(order, func(a, b string) int {
		if totals[a] != totals[b] {
			if totals[a] > totals[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	class := map[string]string{}
	for i, m := range order {
		class[m] = "s" + strconv.Itoa(min(i, chartSeries-1))
		ch.Legend = append(ch.Legend, series{Class: class[m], Model: m, Total: totals[m]})
	}
	var peak int64
	for _, day := range byDay {
		var s int64
		for _, v := range day {
			s += v
		}
		peak = max(peak, s)
	}
	ch.Empty = all == 0
	ch.Summary = label + ", " + from.Format(time.DateOnly) + " to " + from.AddDate(0, 0, days-1).Format(time.DateOnly) +
		": " + strconv.FormatInt(all, 10) + " in all, at most " + strconv.FormatInt(peak, 10) + " in a day."
	top := niceCeil(peak)
	plotH := ch.Bottom - ch.Top
	lines := []int64{0, top}
	if top%2 == 0 { // a mid-line, where it is a whole number
		lines = []int64{0, top / 2, top}
	}
	for _, v := range lines {
		ch.YTicks = append(ch.YTicks, tick{Pos: round2(ch.Bottom - float64(v)/float64(top)*plotH), Label: compact(v)})
	}
	slot := (ch.Right - ch.Left) / float64(days)
	barW := slot * chartBarOf
	every := (days + chartMaxXLabels - 1) / chartMaxXLabels
	for i := range days {
		x := ch.Left + float64(i)*slot
		day := from.AddDate(0, 0, i)
		if i%every == 0 {
			ch.XTicks = append(ch.XTicks, tick{Pos: round2(x + slot/2), Label: day.Format("01-02")})
		}
		y := ch.Bottom
		for _, m := range order { // bottom up, in legend order
			v := byDay[i][m]
			if v == 0 {
				continue
			}
			h := float64(v) / float64(top) * plotH
			y -= h
			ch.Bars = append(ch.Bars, bar{X: round2(x + (slot-barW)/2), Y: round2(y), W: round2(barW), H: round2(h), Class: class[m],
				Title: day.Format(time.DateOnly) + " · " + m + ": " + strconv.FormatInt(v, 10)})
		}
	}
	return ch
}

// niceCeil rounds n up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	p := int64(math.Pow(10, math.Floor(math.Log10(float64(n)))))
	for _, f := range []int64{1, 2, 5, 10} {
		if f*p >= n {
			return f * p
		}
	}
	return 10 * p
}

// compact writes n briefly: 950, 1.5k, 12M.
func compact(n int64) string {
	short := func(f float64, unit string) string {
		return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + unit
	}
	switch {
	case n >= 1e9:
		return short(float64(n)/1e9, "G")
	case n >= 1e6:
		return short(float64(n)/1e6, "M")
	case n >= 1e4:
		return short(float64(n)/1e3, "k")
	}
	return strconv.FormatInt(n, 10)
}

// round2 rounds to hundredths, to keep the SVG short.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
