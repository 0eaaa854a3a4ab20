package reflector

import "sync"

// Buffer holds samples between a controller's ticks: pass its Add to
// Prober.Poll as emit, and call Drain at each tick. It is a fixed ring:
// when the controller falls behind, the oldest samples are dropped (and
// counted), so memory stays bounded and the newest delays win.
type Buffer struct {
	mu      sync.Mutex
	s       []Sample
	head, n int
	dropped uint64
}

// NewBuffer holds up to n samples (at least 1).
func NewBuffer(n int) *Buffer {
	return &Buffer{s: make([]Sample, max(n, 1))}
}

// Add copies *s in, dropping the oldest sample if the buffer is full.
func (b *Buffer) Add(s *Sample) {
	b.mu.Lock()
	if b.n == len(b.s) {
		b.head = (b.head + 1) % len(b.s)
		b.n--
		b.dropped++
	}
	b.s[(b.head+b.n)%len(b.s)] = *s
	b.n++
	b.mu.Unlock()
}

// Drain appends the samples held, oldest first, to dst, empties the
// buffer, and returns them with the number dropped since the last Drain.
func (b *Buffer) Drain(dst []Sample) ([]Sample, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := range b.n {
		dst = append(dst, b.s[(b.head+i)%len(b.s)])
	}
	d := b.dropped
	b.head, b.n, b.dropped = 0, 0, 0
	return dst, d
}
