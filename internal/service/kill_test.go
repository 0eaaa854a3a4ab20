package service_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"sqm/internal/clitest"
	"sqm/internal/service"
)

// TestHostKillAfterIFBCreated kills `sqm start` (-9) after it has created
// the IFB of an interface sqm never shaped before and before it has saved
// that interface's state, the window in which nothing on disk but the
// pending marker says the IFB is sqm's. The next start must take the IFB
// as its own, so that stop removes it: otherwise it is left behind, and
// every later change to the section is refused ("ifb exists but sqm did
// not create it"), as TestVMKillDaemonMidApply once met in CI. Every second
// landed kill is followed by `sqm stop` instead, which must remove the half
// tree and the IFB from the pending record alone.
//
// Where the kill lands is a race; the test repeats until enough kills
// landed in the window and checks recovery after every one of them.
func TestHostKillAfterIFBCreated(t *testing.T) {
	r := newRig(t)
	r.ns.sh(t, "ip link add sq0 type veth peer name sq1 && ip link set sq0 up && ip link set sq1 up")
	r.config(simplestPfifo)
	pendingFile := filepath.Join(r.state, "sq0.pending.json")
	stateFile := filepath.Join(r.state, "sq0.state.json")
	ifbExists := func() bool {
		ok := false
		r.ns.Do(func() { _, err := net.InterfaceByName("ifb4sq0"); ok = err == nil })
		return ok
	}
	const want, attempts = 4, 80
	landed, tried := 0, 0
	for ; tried < attempts && landed < want; tried++ {
		i := tried
		cmd := clitest.Command("start", "--config", r.cfg, "--state-dir", r.state)
		r.ns.start(t, cmd)
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
	poll:
		for {
			select {
			case <-exited:
				break poll
			default:
			}
			if _, err := os.Stat(pendingFile); err == nil && ifbExists() {
				cmd.Process.Signal(syscall.SIGKILL)
				break
			}
		}
		<-exited
		_, perr := os.Stat(pendingFile)
		_, serr := os.Stat(stateFile)
		if perr != nil || serr == nil || !ifbExists() {
			// The kill came too late (or start finished first):
			// start from nothing again.
			r.mustRun("stop")
			continue
		}
		landed++
		if landed%2 == 0 {
			// Stop without a start between: it must remove what the
			// killed first start left, which only its pending record
			// describes.
			out := r.mustRun("stop")
			if !strings.Contains(out, "sq0: removed") {
				t.Fatalf("attempt %d: stop after the kill: %s", i, out)
			}
			if q := r.ns.sh(t, "tc qdisc show dev sq0"); strings.Contains(q, "ingress") || strings.Contains(q, " 1: ") || ifbExists() {
				t.Fatalf("attempt %d: left after stop: qdiscs\n%s\nifbs:\n%s", i, q, r.ns.sh(t, "ip -o link show type ifb"))
			}
			if _, err := os.Stat(pendingFile); err == nil {
				t.Fatalf("attempt %d: pending record left after stop", i)
			}
			continue
		}
		out := r.mustRun("start")
		if !strings.Contains(out, "sq0: applied") {
			t.Fatalf("attempt %d: start after the kill: %s", i, out)
		}
		st, err := (&service.Store{Dir: r.state}).Load("sq0")
		if err != nil || st == nil {
			t.Fatalf("attempt %d: state after recovery: %v %v", i, st, err)
		}
		if st.Owned.IFB != "ifb4sq0" {
			t.Errorf("attempt %d: the state after recovery owns IFB %q; want ifb4sq0 (the killed start created it)", i, st.Owned.IFB)
		}
		r.mustRun("stop")
		if ifbExists() {
			t.Fatalf("attempt %d: ifb4sq0 is left after stop:\n%s", i, r.ns.sh(t, "ip -o link show type ifb"))
		}
	}
	t.Logf("%d of %d kills landed between the IFB's creation and the state's save", landed, tried)
	if landed < want {
		t.Errorf("only %d of %d attempts killed start inside the window; the test did not test much", landed, tried)
	}
}
