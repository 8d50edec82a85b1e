package jobs

import (
	"fmt"
	"slices"
)

// Status is a job's place in its lifecycle.
type Status string

// The statuses; completed and failed are final. How a job moves between
// them is the state table (Transition).
const (
	Queued     Status = "queued"
	Processing Status = "processing"
	Completed  Status = "completed"
	Failed     Status = "failed"
)

// Final reports whether s is completed or failed.
func (s Status) Final() bool { return s == Completed || s == Failed }

// Transition is a row of the job's state table: an event, the statuses a
// job may be in when it happens, the status it leaves the job in, and
// what makes it. The table (stateTable) is every way a job's status
// changes; CanTransition reads it, so every Store refuses any other move,
// and the worker makes each of its writes as one of its rows.
// docs/architecture.md ("How a job flows") shows the same table.
type Transition struct {
	Event string
	From  []Status // none: the job did not exist (create)
	To    Status
	By    string // who makes it, and when
}

// The rows of the state table.
var (
	tCreate = Transition{"create", nil, Queued,
		"Service.Create: the job is stored with its credit hold, in one atomic write"}
	tStart = Transition{"start", []Status{Queued, Processing}, Processing,
		"Worker: a delivery claims a start at the job's candidate (an attempt; again after a transient fault or a crash)"}
	tHandle = Transition{"handle", []Status{Processing}, Processing,
		"Worker: the vendor's handle is stored and the first poll scheduled"}
	tPoll = Transition{"poll", []Status{Processing}, Processing,
		"Worker: a delivery claims a poll round"}
	tRetry = Transition{"retry", []Status{Processing}, Processing,
		"Worker: the next run is scheduled after a transient fault"}
	tNext = Transition{"next", []Status{Processing}, Processing,
		"Worker: the candidate definitely refused the submit; the job moves to the next candidate"}
	tComplete = Transition{"complete", []Status{Processing}, Completed,
		"Worker: the output is stored; the charge is the price of the candidate that made it"}
	tFail = Transition{"fail", []Status{Queued, Processing}, Failed,
		"Worker: a refusal, a vendor that kept failing, the deadline passed, or no provider for the model"}
	tCancel = Transition{"cancel", []Status{Queued, Processing}, Failed,
		"Service.Cancel: the client cancelled; a processing job is stopped at its vendor first"}
	tGiveUp = Transition{"give up", []Status{Queued}, Failed,
		"Service.Sweep: still queued after its last re-send"}
)

// stateTable is the job's state table, in the order the docs show it.
// Its rows are pointers so that the linker lays it out (a table of
// values would be copied at start-up, in every program that imports
// jobs).
var stateTable = [...]*Transition{&tCreate, &tStart, &tHandle, &tPoll, &tRetry, &tNext, &tComplete, &tFail, &tCancel, &tGiveUp}

// CanTransition reports whether a job may move from one status to
// another: whether a row of the state table does. Processing ->
// processing is allowed: a worker claims each run of a processing job
// (a start, a poll round) with it.
func CanTransition(from, to Status) bool {
	for _, t := range stateTable {
		if t.To == to && slices.Contains(t.From, from) {
			return true
		}
	}
	return false
}

// check returns an error unless t may happen to a job in status s.
func (t Transition) check(s Status) error {
	if !slices.Contains(t.From, s) {
		return fmt.Errorf("%s from %s: not in the state table", t.Event, s)
	}
	return nil
}
