// Package metrics keeps the service's counters, gauges and histograms in
// memory and writes them in the Prometheus text exposition format
// (genway serve's GET /metrics). It has no dependencies: a handful of
// metric families with a few labels each do not need a client library.
//
// A Registry is safe for concurrent use. Label values are the caller's
// (routes, statuses, providers, job types): bounded sets, never user
// input.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// DefaultBuckets are latency buckets in seconds, from 5 ms to 5 min.
var DefaultBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// Registry holds metric families by name.
type Registry struct {
	mu       sync.Mutex
	families map[string]*family
	gauges   []gaugeFunc
}

// New returns an empty Registry.
func New() *Registry { return &Registry{families: map[string]*family{}} }

// Default is the process's registry: the HTTP edge, the chat gateway and
// the jobs worker record into it, and genway serve writes it at /metrics
// (as expvar and Prometheus' default registry are process-wide).
var Default = New()

type kind int

const (
	counter kind = iota
	histogram
)

type family struct {
	name, help string
	kind       kind
	labels     []string
	buckets    []float64
	series     map[string]*series // by joined label values
}

type series struct {
	values []string
	sum    float64
	count  uint64
	bucket []uint64 // histograms: counts per bucket (not cumulative)
}

// gaugeFunc is a gauge read when metrics are written.
type gaugeFunc struct {
	name, help string
	labels     []string
	read       func() []Sample
}

// Sample is one gauge value with its label values.
type Sample struct {
	Labels []string
	Value  float64
}

func (r *Registry) get(name, help string, k kind, labels []string, buckets []float64) *family {
	f := r.families[name]
	if f == nil {
		f = &family{name: name, help: help, kind: k, labels: labels, buckets: buckets, series: map[string]*series{}}
		r.families[name] = f
	}
	return f
}

func (f *family) at(values []string) *series {
	var buf [128]byte
	key := buf[:0] // the values joined by 0xff, looked up without a copy
	for i, v := range values {
		if i > 0 {
			key = append(key, 0xff)
		}
		key = append(key, v...)
	}
	s := f.series[string(key)]
	if s == nil {
		s = &series{values: append([]string(nil), values...)}
		if f.kind == histogram {
			s.bucket = make([]uint64, len(f.buckets))
		}
		f.series[string(key)] = s
	}
	return s
}

// Add adds v to the counter name with the label values (labels names
// them; the first call of a name fixes its help and label names).
func (r *Registry) Add(name, help string, labels []string, values []string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.get(name, help, counter, labels, nil).at(values)
	s.sum += v
}

// Observe records v (seconds, or any unit) in the histogram name.
func (r *Registry) Observe(name, help string, labels []string, values []string, v float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := r.get(name, help, histogram, labels, DefaultBuckets)
	s := f.at(values)
	s.sum += v
	s.count++
	for i, b := range f.buckets {
		if v <= b {
			s.bucket[i]++
			break
		}
	}
}

// Gauge registers a gauge whose samples read returns when metrics are
// written (queue depth, credits held); a gauge of the same name is
// replaced (a server started again in the same process).
func (r *Registry) Gauge(name, help string, labels []string, read func() []Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	g := gaugeFunc{name: name, help: help, labels: labels, read: read}
	for i := range r.gauges {
		if r.gauges[i].name == name {
			r.gauges[i] = g
			return
		}
	}
	r.gauges = append(r.gauges, g)
}

// WriteTo writes every metric in the Prometheus text format, families by
// name, series by label values.
func (r *Registry) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	r.mu.Lock()
	names := make([]string, 0, len(r.families))
	for n := range r.families {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f := r.families[n]
		keys := make([]string, 0, len(f.series))
		for k := range f.series {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		typ := "counter"
		if f.kind == histogram {
			typ = "histogram"
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, typ)
		for _, k := range keys {
			s := f.series[k]
			if f.kind == counter {
				fmt.Fprintf(&b, "%s%s %s\n", f.name, labelText(f.labels, s.values, "", ""), num(s.sum))
				continue
			}
			var cum uint64
			for i, le := range f.buckets {
				cum += s.bucket[i]
				fmt.Fprintf(&b, "%s_bucket%s %d\n", f.name, labelText(f.labels, s.values, "le", num(le)), cum)
			}
			fmt.Fprintf(&b, "%s_bucket%s %d\n", f.name, labelText(f.labels, s.values, "le", "+Inf"), s.count)
			fmt.Fprintf(&b, "%s_sum%s %s\n", f.name, labelText(f.labels, s.values, "", ""), num(s.sum))
			fmt.Fprintf(&b, "%s_count%s %d\n", f.name, labelText(f.labels, s.values, "", ""), s.count)
		}
	}
	gauges := append([]gaugeFunc(nil), r.gauges...)
	r.mu.Unlock()
	for _, g := range gauges { // read outside the lock: they may call stores
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n", g.name, g.help, g.name)
		for _, s := range g.read() {
			fmt.Fprintf(&b, "%s%s %s\n", g.name, labelText(g.labels, s.Labels, "", ""), num(s.Value))
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

// labelText is {a="x",b="y"} (with an extra label if extraName is set),
// or "" without labels.
func labelText(names, values []string, extraName, extraValue string) string {
	if len(names) == 0 && extraName == "" {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i, n := range names {
		if i > 0 {
			b.WriteByte(',')
		}
		v := ""
		if i < len(values) {
			v = values[i]
		}
		b.WriteString(n + "=" + strconv.Quote(v))
	}
	if extraName != "" {
		if len(names) > 0 {
			b.WriteByte(',')
		}
		b.WriteString(extraName + "=" + strconv.Quote(extraValue))
	}
	b.WriteByte('}')
	return b.String()
}

func num(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
