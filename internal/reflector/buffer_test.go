package reflector

import "testing"

func TestBuffer(t *testing.T) {
	b := NewBuffer(3)
	for i := range 5 {
		b.Add(&Sample{Seq: uint32(i)})
	}
	got, dropped := b.Drain(nil)
	if len(got) != 3 || got[0].Seq != 2 || got[2].Seq != 4 || dropped != 2 {
		t.Fatalf("after 5 into 3: %+v, %d dropped; want seqs 2..4 and 2 dropped", got, dropped)
	}
	if got, dropped := b.Drain(got[:0]); len(got) != 0 || dropped != 0 {
		t.Fatalf("second drain: %+v, %d", got, dropped)
	}
	b.Add(&Sample{Seq: 9})
	if got, _ := b.Drain(nil); len(got) != 1 || got[0].Seq != 9 {
		t.Fatalf("after a drain: %+v", got)
	}
	s := &Sample{Seq: 1}
	if a := testing.AllocsPerRun(100, func() { b.Add(s) }); a != 0 {
		t.Errorf("Add allocates %.1f", a)
	}
}

// TestBufferConcurrent: a prober adding while a controller drains loses
// nothing but what overflow drops, and keeps the order (run with -race).
func TestBufferConcurrent(t *testing.T) {
	b := NewBuffer(64)
	const n = 10000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			b.Add(&Sample{Seq: uint32(i)})
		}
	}()
	var got []Sample
	var dropped uint64
	drain := func() {
		var d uint64
		got, d = b.Drain(got)
		dropped += d
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		drain()
	}
	if uint64(len(got))+dropped != n {
		t.Fatalf("%d drained + %d dropped != %d added", len(got), dropped, n)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Fatalf("order: %d after %d", got[i].Seq, got[i-1].Seq)
		}
	}
}
