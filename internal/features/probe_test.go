package features

import (
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"sqm/internal/testutil"
)

func TestMissingErrorText(t *testing.T) {
	f, _ := Lookup(TypeQdisc, "cake")
	err := error(&MissingError{Feature: f, Err: os.ErrNotExist})
	want := "qdisc cake is not available: kernel module sch_cake is missing (OpenWrt: opkg install kmod-sched-cake)"
	if err.Error() != want {
		t.Errorf("got %q\nwant %q", err, want)
	}
	if !errors.Is(err, ErrNotAvailable) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("errors.Is: want ErrNotAvailable and the wrapped errno")
	}
	perm := error(&permissionError{Feature: f})
	if !errors.Is(perm, ErrPermission) || !strings.Contains(perm.Error(), "needs CAP_NET_ADMIN: run as root") {
		t.Errorf("permission error %q", perm)
	}
}

func TestTable(t *testing.T) {
	want := map[Type][]string{
		TypeQdisc:      {"htb", "tbf", "cake", "fq_codel", "codel", "pie", "fq_pie", "sfq", "pfifo", "bfifo", "netem", "ingress", "clsact"},
		TypeClassifier: {"u32", "matchall", "flower", "fw", "bpf"},
		TypeAction:     {"mirred", "police", "gact", "skbedit", "ctinfo"},
		TypeLink:       {"ifb"},
	}
	n := 0
	for typ, names := range want {
		for _, name := range names {
			n++
			f, ok := Lookup(typ, name)
			if !ok {
				t.Errorf("%s %s missing from the table", typ, name)
				continue
			}
			if !strings.HasPrefix(f.OpenWrt, "kmod-") {
				t.Errorf("%s: OpenWrt package %q", f, f.OpenWrt)
			}
		}
	}
	if len(All()) != n {
		t.Errorf("table has %d entries, want %d", len(All()), n)
	}
	if err := NewProber().Qdisc("nosuch"); err == nil || !strings.Contains(err.Error(), "cake") {
		t.Errorf("unknown kind: err = %v, want one listing the known kinds", err)
	}
}

func TestProbeNonRoot(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("checks the error without privileges; running as root")
	}
	err := NewProber().Qdisc("htb")
	if !errors.Is(err, ErrPermission) {
		t.Errorf("as non-root: err = %v, want ErrPermission", err)
	}
}

// TestHostKernel pins what the development/CI host kernel offers (see
// /work/shared/lab/README.md §1). Inside the VM everything is there, so
// the test only runs on the host.
func TestHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	if testutil.InVM() {
		t.Skip("host kernel expectations; the VM has every module")
	}
	p := NewProber()
	for _, c := range []struct {
		typ  Type
		name string
	}{
		{TypeQdisc, "htb"}, {TypeQdisc, "tbf"}, {TypeQdisc, "ingress"}, {TypeQdisc, "clsact"},
		{TypeQdisc, "pfifo"}, {TypeQdisc, "bfifo"},
		{TypeClassifier, "u32"}, {TypeAction, "mirred"}, {TypeLink, "ifb"},
	} {
		if err := p.check(c.typ, c.name); err != nil {
			t.Errorf("%s %s: %v", c.typ, c.name, err)
		}
	}
	err := p.Qdisc("cake")
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("cake on the host: err = %v, want ErrNotAvailable", err)
	}
	if !strings.Contains(err.Error(), "sch_cake") || !strings.Contains(err.Error(), "kmod-sched-cake") {
		t.Errorf("cake error %q does not name the module and package", err)
	}
	for _, c := range []struct {
		typ  Type
		name string
	}{{TypeQdisc, "netem"}, {TypeClassifier, "matchall"}, {TypeAction, "police"}, {TypeAction, "gact"}} {
		if err := p.check(c.typ, c.name); !errors.Is(err, ErrNotAvailable) {
			t.Errorf("%s %s on the host: err = %v, want ErrNotAvailable", c.typ, c.name, err)
		}
	}
	// The answer is cached: same error value, no new namespace.
	if err2 := p.Qdisc("cake"); err2 != err {
		t.Errorf("second answer %v is not the cached %v", err2, err)
	}
}

// TestVMAllFeatures checks that the VM kernel (Debian's, with every
// module) has everything sqm may use, which also proves each probe builds
// a valid object.
func TestVMAllFeatures(t *testing.T) {
	testutil.RequireVM(t)
	p := NewProber()
	for _, f := range All() {
		if err := p.check(f.Type, f.Name); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// TestConcurrentProbes hammers one Prober from several goroutines: every
// caller must get the same answer, and each feature is probed once.
func TestConcurrentProbes(t *testing.T) {
	testutil.RequireRoot(t)
	p := NewProber()
	kinds := []string{"htb", "tbf", "ingress", "cake"}
	var wg sync.WaitGroup
	errs := make([][]error, 8)
	for i := range errs {
		errs[i] = make([]error, len(kinds))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j, k := range kinds {
				errs[i][j] = p.Qdisc(k)
			}
		}()
	}
	wg.Wait()
	for i := range errs {
		for j := range kinds {
			if errs[i][j] != errs[0][j] {
				t.Errorf("goroutine %d got %v for %s, goroutine 0 got %v", i, errs[i][j], kinds[j], errs[0][j])
			}
		}
	}
	if len(p.known) != len(kinds) {
		t.Errorf("cache holds %d answers, want %d", len(p.known), len(kinds))
	}
}

// TestRefused: the kernel's "unknown kind" answers become the table's
// advice; other errors and kinds outside the table are not guessed at.
func TestRefused(t *testing.T) {
	extack := &netlink.OpError{Op: "receive", Err: unix.ENOENT, Message: "Specified qdisc kind is unknown"}
	tests := []struct {
		typ  Type
		name string
		err  error
		want string // "" = not a missing-module answer
	}{
		{TypeQdisc, "cake", extack, "qdisc cake is not available: kernel module sch_cake is missing (OpenWrt: opkg install kmod-sched-cake)"},
		{TypeQdisc, "fq_codel", unix.ENOENT, "kernel module sch_fq_codel is missing (OpenWrt: opkg install kmod-sched-core)"},
		{TypeClassifier, "matchall", unix.ENOENT, "kernel module cls_matchall is missing (OpenWrt: opkg install kmod-sched-core)"},
		{TypeAction, "police", unix.ENOENT, "kernel module act_police is missing (OpenWrt: opkg install kmod-sched)"},
		{TypeLink, "ifb", unix.EOPNOTSUPP, "kernel module ifb is missing (OpenWrt: opkg install kmod-ifb)"},
		{TypeQdisc, "pfifo", unix.ENOENT, "CONFIG_NET_SCHED"},
		{TypeQdisc, "cake", unix.EINVAL, ""},
		{TypeQdisc, "cake", unix.EPERM, ""},
		{TypeQdisc, "cake", nil, ""},
		{TypeQdisc, "hfsc", unix.ENOENT, ""},
	}
	for _, tt := range tests {
		got := Refused(tt.typ, tt.name, tt.err)
		switch {
		case tt.want == "" && got != nil:
			t.Errorf("Refused(%s %s, %v) = %q; want nil", tt.typ, tt.name, tt.err, got)
		case tt.want != "" && got == nil:
			t.Errorf("Refused(%s %s, %v) = nil; want %q", tt.typ, tt.name, tt.err, tt.want)
		case got != nil:
			if !strings.Contains(got.Error(), tt.want) {
				t.Errorf("Refused(%s %s, %v) = %q; want it to contain %q", tt.typ, tt.name, tt.err, got, tt.want)
			}
			if !errors.Is(got, ErrNotAvailable) || !errors.Is(got, tt.err) {
				t.Errorf("Refused(%s %s): errors.Is ErrNotAvailable and the kernel's error: false", tt.typ, tt.name)
			}
		}
	}
}
