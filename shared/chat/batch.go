package chat

// Batch lets a provider that reads upstream events from a buffer pass on
// together the deltas that arrived together, without ever delaying one:
// Emit hands each delta on at once with More set, and Flush, called just
// before the provider may wait for the upstream (sse.Reader.OnWait), tells
// the writer to send what it holds. When the upstream sends one delta at a
// time, each is flushed on its own as before; when a burst arrives in one
// read, the client gets it in one write instead of one per delta.
//
// A Batch is for one stream and one goroutine.
type Batch struct {
	emit func(Delta) error
	held bool  // a delta was emitted with More since the last flush
	err  error // the first error of a flush: the writer failed
}

// NewBatch returns a Batch over emit.
func NewBatch(emit func(Delta) error) *Batch { return &Batch{emit: emit} }

// Emit emits d with More set. It returns the writer's error, or the error
// of an earlier Flush.
func (b *Batch) Emit(d Delta) error {
	if b.err != nil {
		return b.err
	}
	d.More = true
	b.held = true
	return b.emit(d)
}

// Flush emits an empty Delta without More if a delta is held back. Its
// error is returned by the next Emit (the provider is about to read the
// upstream; the writer's failure, usually the client going away, also
// cancels that read).
func (b *Batch) Flush() {
	if !b.held || b.err != nil {
		return
	}
	b.held = false
	b.err = b.emit(Delta{})
}
