package service

import (
	"strings"
	"testing"
	"time"
)

// TestDaemonRequest checks that a requested reload is made by the daemon's
// loop and its outcome handed back: the applied rate change, and a config
// that does not load reported as the error with the old shaping kept.
func TestDaemonRequest(t *testing.T) {
	k := newFake("eth0")
	reqs := make(chan Request)
	var d *Daemon
	r := startDaemonWith(t, k, true, func(dd *Daemon) { dd.Requests = reqs; dd.PollEvery = -1; d = dd }, queue("wan", "eth0", 1000, 1000))
	eventually(t, "eth0 applied at start", func() bool { return k.count(k.applies, "eth0") == 1 })

	ask := func() RequestResult {
		done := make(chan RequestResult, 1)
		reqs <- Request{Why: "test", Done: done}
		select {
		case res := <-done:
			return res
		case <-time.After(5 * time.Second):
			t.Fatal("no answer to the request within 5 s")
		}
		return RequestResult{}
	}
	r.writeConfig(queue("wan", "eth0", 2000, 1000))
	res := ask()
	if res.Err != nil || len(res.Outcomes) != 1 || res.Outcomes[0].Action != ActApplied {
		t.Fatalf("reload after a rate change: %+v", res)
	}
	if k.count(k.applies, "eth0") != 2 {
		t.Errorf("applies = %d; want 2", k.count(k.applies, "eth0"))
	}
	if last := d.Last(); last.Err != nil || last.Outcomes["eth0"].Action != ActApplied || last.At.IsZero() {
		t.Errorf("Last() = %+v", last)
	}

	r.writeRaw("{not json")
	res = ask()
	if res.Err == nil || !strings.Contains(res.Err.Error(), "sqm.json:1") {
		t.Fatalf("broken config: %+v", res)
	}
	if k.count(k.applies, "eth0") != 2 {
		t.Errorf("a broken config changed the kernel: applies = %d", k.count(k.applies, "eth0"))
	}
	if d.Last().Err == nil {
		t.Error("Last() does not report the failed reload")
	}
}
