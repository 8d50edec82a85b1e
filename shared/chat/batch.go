package chat

// Batch adapts a Writer to a provider that reads upstream events from a
// buffer and learns that it is about to wait (sse.Reader.OnWait) through a
// callback that cannot fail: Emit writes a delta, Flush flushes and keeps
// the error for the next Emit. When the upstream sends one delta at a
// time, each is flushed on its own; when a burst arrives in one read, the
// client gets it in one write.
//
// A Batch is for one stream and one goroutine.
type Batch struct {
	w    Writer
	held bool  // a delta was written since the last flush
	err  error // the first error of a flush: the writer failed
}

// NewBatch returns a Batch over w.
func NewBatch(w Writer) *Batch { return &Batch{w: w} }

// Emit writes d. It returns the writer's error, or the error of an
// earlier Flush.
func (b *Batch) Emit(d Delta) error {
	if b.err != nil {
		return b.err
	}
	b.held = true
	return b.w.Delta(d)
}

// Flush flushes the writer if a delta was written since the last flush.
// Its error is returned by the next Emit (the provider is about to read
// the upstream; the writer's failure, usually the client going away, also
// cancels that read).
func (b *Batch) Flush() {
	if !b.held || b.err != nil {
		return
	}
	b.held = false
	b.err = b.w.Flush()
}
