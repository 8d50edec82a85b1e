package console

import (
	"cmp"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/genway/genway/shared/admin"
	"github.com/genway/genway/shared/apierr"
	"github.com/genway/genway/shared/catalog"
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
	chartW, chartH = 720.0, 260.0
	// The y axis is labelled on both sides: a phone shows the chart's
	// newest (right) end first, a wide screen the whole.
	plotLeft, plotRight = 56.0, 56.0
	plotTop, plotBottom = 12.0, 28.0
	chartMaxXLabels     = 8
	chartBarOf          = 0.75 // a bar's width: this much of its day's slot
)

// counts are what the second chart can show, by the metric parameter:
// chat tokens (the default), chat requests, or completed jobs and
// generations (the usage rows' Jobs: one for each completed job, image
// request, whatever its n, and speech request). The first chart always
// shows credits, the one unit all kinds share.
var counts = []count{
	{"tokens", "Chat tokens", "Chat tokens (prompt + completion)"},
	{"requests", "Chat requests", "Chat requests"},
	{"jobs", "Jobs and generations", "Completed jobs and generations"},
}

// count is a metric of the second chart: its parameter value, its name in
// the menu and its chart's label.
type count struct{ ID, Option, Label string }

// kinds are the kind filter's values: chat, the job types, then the
// synchronous generations (image and speech requests are recorded as job
// usage of their own types).
var kinds = []string{admin.KindChat, catalog.TypeMusic, catalog.TypeSFX, catalog.TypeVideo, catalog.TypeImage, catalog.TypeSpeech}

// countOf is row u's value for a count metric (0 where it does not apply:
// a job or generation row has no tokens, a chat row no jobs).
func countOf(u *admin.DayUsage, metric string) int64 {
	switch metric {
	case "tokens":
		return u.Tokens()
	case "requests":
		return u.Requests
	}
	return u.Jobs
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

// series is one model of the legend, with its total as text.
type series struct {
	Class, Model, Kind string
	Total              string
}

// units writes a chart's values: exact (totals, bar titles) and short
// (the axis).
type units struct {
	exact, short func(int64) string
}

// countUnits are those of a count (requests, tokens, jobs).
var countUnits = units{exact: func(n int64) string { return strconv.FormatInt(n, 10) }, short: compact}

// creditUnits are those of credits: values are micro-credits
// (credits.Amount), written as decimal credits.
var creditUnits = units{exact: func(n int64) string { return credits.Amount(n).String() }, short: compactCredits}

// chart is one usage chart, laid out for the template.
type chart struct {
	ID                             string // the svg's id; its title and description ids derive from it
	W, H, Left, Right, Top, Bottom float64
	Bars                           []bar
	YTicks, XTicks                 []tick
	Legend                         []series
	Label, Summary, None           string
	Empty                          bool
}

// point is one model's value on one day, for a chart: a count, or
// micro-credits (see units).
type point struct {
	Day, Model, Kind string
	Value            int64
}

// usagePage is the usage page's data.
type usagePage struct {
	Account, Kind, Model, From, To, Metric string
	Accounts                               []admin.AccountInfo
	Kinds, Models                          []string
	Counts                                 []count
	Rows                                   []admin.DayUsage
	Total                                  admin.DayUsage
	Credits, Count                         chart
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
	d := usagePage{Account: strings.TrimSpace(q.Get("account")), Kind: q.Get("kind"), Model: strings.TrimSpace(q.Get("model")),
		From: from.Format(time.DateOnly), To: to.Format(time.DateOnly), Metric: q.Get("metric"), Kinds: kinds, Counts: counts}
	if d.Kind != "" && !slices.Contains(kinds, d.Kind) {
		return apierr.Invalidf("kind", "invalid_value", "kind must be one of %s; got %q", strings.Join(kinds, ", "), d.Kind)
	}
	if !slices.ContainsFunc(counts, func(m count) bool { return m.ID == d.Metric }) {
		// The count that fits the kind shown: jobs and generations for
		// any kind but chat.
		d.Metric = "tokens"
		if d.Kind != "" && d.Kind != admin.KindChat {
			d.Metric = "jobs"
		}
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
		if (d.Model == "" || u.Model == d.Model) && (d.Kind == "" || u.Kind == d.Kind) {
			d.Rows = append(d.Rows, u)
		}
	}
	for _, m := range c.cfg.Catalog.List("", nil) {
		models[m.ID] = true
	}
	for m := range models {
		d.Models = append(d.Models, m)
	}
	slices.Sort(d.Models)
	// Newest day first; then by account, kind and model.
	slices.SortFunc(d.Rows, func(a, b admin.DayUsage) int {
		return cmp.Or(cmp.Compare(b.Day, a.Day), cmp.Compare(a.Account, b.Account), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Model, b.Model))
	})
	var spent, counted []point
	for i := range d.Rows {
		u := &d.Rows[i]
		d.Total.Requests += u.Requests
		d.Total.PromptTokens += u.PromptTokens
		d.Total.CompletionTokens += u.CompletionTokens
		d.Total.Jobs += u.Jobs
		d.Total.Credits += u.Credits
		spent = append(spent, point{u.Day, u.Model, u.Kind, int64(u.Credits)})
		counted = append(counted, point{u.Day, u.Model, u.Kind, countOf(u, d.Metric)})
	}
	label := d.Metric
	for _, m := range counts {
		if m.ID == d.Metric {
			label = m.Label
		}
	}
	// One colour per model in both charts: the models that spent the
	// most first, then those that counted the most.
	class := seriesClasses(spent, counted)
	d.Credits = layoutChart("credits-chart", spent, from, days, "Credits (chat, jobs, images and speech)", class, creditUnits)
	d.Credits.None = "No credits spent in this range."
	d.Count = layoutChart("usage-chart", counted, from, days, label, class, countUnits)
	d.Count.None = "No " + strings.ToLower(label) + " in this range."
	p.Section, p.Title, p.Data = "usage", "Usage", d
	return p.Render(w, r, "usage")
}

// seriesClasses gives each model of the point sets a colour class, in
// order of its total in the first set, then in the next (so that the
// biggest spenders get the distinct colours); models past chartSeries-1
// share the last.
func seriesClasses(sets ...[]point) map[string]string {
	totals := make([]map[string]int64, len(sets))
	seen := map[string]bool{}
	var order []string
	for i, ps := range sets {
		totals[i] = map[string]int64{}
		for _, p := range ps {
			if p.Value == 0 {
				continue
			}
			if !seen[p.Model] {
				seen[p.Model] = true
				order = append(order, p.Model)
			}
			totals[i][p.Model] += p.Value
		}
	}
	slices.SortFunc(order, func(a, b string) int {
		for _, t := range totals {
			if c := cmp.Compare(t[b], t[a]); c != 0 {
				return c
			}
		}
		return strings.Compare(a, b)
	})
	class := make(map[string]string, len(order))
	for i, m := range order {
		class[m] = "s" + strconv.Itoa(min(i, chartSeries-1))
	}
	return class
}

// layoutChart lays out a bar chart of points: one bar a day from from,
// stacked by model (the models with the most first, at the bottom), each
// in its class, its values written in u. (The bars' geometry is in
// floats; the values the chart writes are exact.)
func layoutChart(id string, points []point, from time.Time, days int, label string, class map[string]string, u units) chart {
	ch := chart{ID: id, W: chartW, H: chartH, Left: plotLeft, Right: chartW - plotRight, Top: plotTop, Bottom: chartH - plotBottom, Label: label}
	// Sums per model and per day and model.
	totals := map[string]int64{}
	kindOf := map[string]string{}
	byDay := make([]map[string]int64, days)
	var all int64
	for _, p := range points {
		t, err := time.Parse(time.DateOnly, p.Day)
		if err != nil || p.Value == 0 {
			continue
		}
		i := int(t.Sub(from).Hours() / 24)
		if i < 0 || i >= days {
			continue
		}
		if byDay[i] == nil {
			byDay[i] = map[string]int64{}
		}
		byDay[i][p.Model] += p.Value
		totals[p.Model] += p.Value
		kindOf[p.Model] = p.Kind
		all += p.Value
	}
	order := make([]string, 0, len(totals))
	for m := range totals {
		order = append(order, m)
	}
	slices.SortFunc(order, func(a, b string) int {
		return cmp.Or(cmp.Compare(totals[b], totals[a]), strings.Compare(a, b))
	})
	for _, m := range order {
		ch.Legend = append(ch.Legend, series{Class: class[m], Model: m, Kind: kindOf[m], Total: u.exact(totals[m])})
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
		": " + u.exact(all) + " in all, at most " + u.exact(peak) + " in a day."
	top := niceCeil(peak)
	plotH := ch.Bottom - ch.Top
	lines := []int64{0, top}
	if top%2 == 0 { // a mid-line, where it is a whole number
		lines = []int64{0, top / 2, top}
	}
	for _, v := range lines {
		ch.YTicks = append(ch.YTicks, tick{Pos: round2(ch.Bottom - float64(v)/float64(top)*plotH), Label: u.short(v)})
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
				Title: day.Format(time.DateOnly) + " · " + m + " (" + kindOf[m] + "): " + u.exact(v)})
		}
	}
	return ch
}

// niceCeil rounds n up to 1, 2, 3, 4, 5, 6 or 8 times a power of ten (at
// least 1), so that the tallest bar fills most of the chart.
func niceCeil(n int64) int64 {
	if n <= 1 {
		return 1
	}
	p := int64(math.Pow(10, math.Floor(math.Log10(float64(n)))))
	for _, f := range []int64{1, 2, 3, 4, 5, 6, 8, 10} {
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

// compactCredits writes n micro-credits briefly, as credits: 0.00002,
// 1.5, 9500, 12k.
func compactCredits(n int64) string {
	if a := credits.Amount(n); a < 10_000*credits.Credit {
		return a.String()
	}
	return compact(n / int64(credits.Credit))
}

// round2 rounds to hundredths, to keep the SVG short.
func round2(f float64) float64 { return math.Round(f*100) / 100 }
