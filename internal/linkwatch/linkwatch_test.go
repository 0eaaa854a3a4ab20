package linkwatch

import (
	"context"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"sqm/internal/testutil"
)

// TestWatcherSeesLinks creates, raises and deletes a veth pair in a fresh
// network namespace and expects the matching events, in order.
func TestWatcherSeesLinks(t *testing.T) {
	testutil.RequireRoot(t)
	type step struct {
		cmd  string
		want func(Event) bool
		what string
	}
	steps := []step{
		{"ip link add lw0 type veth peer name lw1", func(e Event) bool { return e.Name == "lw0" && !e.Deleted && !e.Up }, "lw0 appears down"},
		{"ip link set lw1 up && ip link set lw0 up", func(e Event) bool { return e.Name == "lw0" && e.Up }, "lw0 up"},
		{"ip link del lw0", func(e Event) bool { return e.Name == "lw0" && e.Deleted }, "lw0 deleted"},
	}
	fns := make(chan func())
	done := make(chan struct{})
	defer close(done)
	ready := make(chan error)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the namespace
		ready <- unix.Unshare(unix.CLONE_NEWNET)
		for {
			select {
			case fn := <-fns:
				fn()
			case <-done:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	do := func(fn func()) {
		ch := make(chan struct{})
		fns <- func() { fn(); close(ch) }
		<-ch
	}
	var w *Watcher
	var err error
	do(func() { w, err = Open() })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	events := make(chan Event, 100)
	runErr := make(chan error, 1)
	go func() { runErr <- w.Run(ctx, events) }()

	for _, s := range steps {
		var out []byte
		do(func() { out, err = exec.Command("sh", "-c", s.cmd).CombinedOutput() })
		if err != nil {
			t.Fatalf("%s: %v: %s", s.cmd, err, out)
		}
		timeout := time.After(3 * time.Second)
	wait:
		for {
			select {
			case e := <-events:
				t.Logf("event: %v", e)
				if s.want(e) {
					break wait
				}
			case <-timeout:
				t.Fatalf("no event for %q within 3 s", s.what)
			}
		}
	}
	cancel()
	select {
	case err := <-runErr:
		if err != nil {
			t.Errorf("Run after cancel: %v; want nil", err)
		}
	case <-time.After(3 * time.Second):
		t.Error("Run did not return within 3 s of cancel")
	}
}

// TestExists asks the kernel over rtnetlink (no privileges needed) where
// net.InterfaceByName was used before; lo is in every namespace.
func TestExists(t *testing.T) {
	testutil.RequireHostReplies(t)
	if !Exists("lo") {
		t.Error(`Exists("lo") = false`)
	}
	if Exists("sqmnosuch0") {
		t.Error(`Exists("sqmnosuch0") = true`)
	}
}
