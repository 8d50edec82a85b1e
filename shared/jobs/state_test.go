package jobs

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var allStatuses = []Status{Queued, Processing, Completed, Failed}

// TestStateTable: the table's shape: one row per event, create the only
// row without a status before it, no row leaving a final status, and
// every status reachable; and Transition.check lets a row happen exactly
// in its From statuses.
func TestStateTable(t *testing.T) {
	events := map[string]bool{}
	reached := map[Status]bool{}
	for _, tr := range stateTable {
		if events[tr.Event] {
			t.Errorf("event %q has two rows", tr.Event)
		}
		events[tr.Event] = true
		reached[tr.To] = true
		if !slices.Contains(allStatuses, tr.To) || tr.By == "" {
			t.Errorf("row %+v: want a known status and who makes it", tr)
		}
		if (len(tr.From) == 0) != (tr.Event == "create") {
			t.Errorf("row %q from %v; want no status before it for create only", tr.Event, tr.From)
		}
		for _, s := range allStatuses {
			if got, want := tr.check(s) == nil, slices.Contains(tr.From, s); got != want {
				t.Errorf("%s.check(%s) = %v; want allowed %v", tr.Event, s, tr.check(s), want)
			}
			if s.Final() && slices.Contains(tr.From, s) {
				t.Errorf("row %q leaves final status %s", tr.Event, s)
			}
		}
	}
	for _, s := range allStatuses {
		if !reached[s] {
			t.Errorf("no row leads to %s", s)
		}
	}
}

// TestStateTableDoc: the state table in docs/architecture.md ("How a job
// flows") is the code's, row for row.
func TestStateTableDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs/architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := docStateTable(t, string(b))
	if len(doc) != len(stateTable) {
		t.Errorf("docs/architecture.md has %d rows; the code %d", len(doc), len(stateTable))
	}
	for i := range min(len(doc), len(stateTable)) {
		got, want := doc[i], stateTable[i]
		if got.Event != want.Event || !slices.Equal(got.From, want.From) || got.To != want.To || got.By != want.By {
			t.Errorf("docs/architecture.md row %d = %+v; want the code's %+v", i+1, got, want)
		}
	}
}

// docStateTable reads the state table of the section "How a job flows"
// of docs/architecture.md: the markdown table whose header starts "| event |",
// its cells' backticks dropped.
func docStateTable(t *testing.T, doc string) []Transition {
	t.Helper()
	_, section, ok := strings.Cut(doc, "\n## How a job flows\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no section "How a job flows"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, table, ok := strings.Cut(section, "\n| event |")
	if !ok {
		t.Fatal(`"How a job flows" has no table starting "| event |"`)
	}
	lines := strings.Split(table, "\n")[2:] // the header's rest, the separator
	var rows []Transition
	for _, line := range lines {
		if !strings.HasPrefix(line, "|") {
			break
		}
		cells := strings.Split(strings.Trim(strings.ReplaceAll(line, "`", ""), "|"), "|")
		if len(cells) != 4 {
			t.Fatalf("state table row %q: %d cells; want 4", line, len(cells))
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		tr := Transition{Event: cells[0], To: Status(cells[2]), By: cells[3]}
		if cells[1] != "" {
			for _, s := range strings.Split(cells[1], ",") {
				tr.From = append(tr.From, Status(strings.TrimSpace(s)))
			}
		}
		rows = append(rows, tr)
	}
	return rows
}
