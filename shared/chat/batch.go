package chat

// Batch adapts a Writer (or a NativeWriter) to a provider that reads
// upstream events from a buffer and learns that it is about to wait
// (sse.Reader.OnWait) through a callback that cannot fail: Emit writes a
// delta (Event a native event), Flush flushes and keeps the error for the
// next Emit. When the upstream sends one delta at a time, each is flushed
// on its own; when a burst arrives in one read, the client gets it in one
// write.
//
// A Batch is for one stream and one goroutine.
type Batch struct {
	w    Writer       // nil for a native stream
	nw   NativeWriter // nil for a translated one
	held bool         // a delta was written since the last flush
	err  error        // the first error of a flush: the writer failed
}

// NewBatch returns a Batch over w.
func NewBatch(w Writer) *Batch { return &Batch{w: w} }

// NewNativeBatch returns a Batch over w, for a native stream's events.
func NewNativeBatch(w NativeWriter) *Batch { return &Batch{nw: w} }

// Emit writes d. It returns the writer's error, or the error of an
// earlier Flush.
func (b *Batch) Emit(d Delta) error {
	if b.err != nil {
		return b.err
	}
	b.held = true
	return b.w.Delta(d)
}

// Event writes e to the NativeWriter, as Emit writes a delta.
func (b *Batch) Event(e NativeEvent) error {
	if b.err != nil {
		return b.err
	}
	b.held = true
	return b.nw.Event(e)
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
	if b.nw != nil {
		b.err = b.nw.Flush()
		return
	}
	b.err = b.w.Flush()
}
