package features

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/florianl/go-tc"
	"golang.org/x/sys/unix"

	"sqm/internal/netlink"
	"sqm/internal/netns"
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
			if f.OpenWrt != "" && !strings.HasPrefix(f.OpenWrt, "kmod-") {
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
	extack := &netlink.Error{Errno: unix.ENOENT, Message: "Specified qdisc kind is unknown"}
	tests := []struct {
		typ  Type
		name string
		err  error
		want string // "" = not a missing-module answer
	}{
		{TypeQdisc, "cake", extack, "qdisc cake is not available: kernel module sch_cake is missing (OpenWrt: opkg install kmod-sched-cake)"},
		{TypeQdisc, "fq_codel", unix.ENOENT, "kernel module sch_fq_codel is missing (OpenWrt builds it into its kernel; a custom kernel needs it enabled)"},
		{TypeClassifier, "matchall", unix.ENOENT, "kernel module cls_matchall is missing (OpenWrt: opkg install kmod-sched-core)"},
		{TypeAction, "police", unix.ENOENT, "kernel module act_police is missing (OpenWrt: opkg install kmod-sched-act-police)"},
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

// TestOpenWrtPackages pins the table's OpenWrt column to OpenWrt 25.12's
// package definitions (see the table's comment for the files). The table
// once sent police, pie and fq_pie users to kmod-sched, which has none of
// them, and fq_codel users to kmod-sched-core, which does not carry it
// (OpenWrt builds it in).
func TestOpenWrtPackages(t *testing.T) {
	want := map[string]string{
		"qdisc htb": "kmod-sched-core", "qdisc tbf": "kmod-sched-core",
		"qdisc cake": "kmod-sched-cake", "qdisc fq_codel": "",
		"qdisc codel": "kmod-sched", "qdisc pie": "kmod-sched-pie",
		"qdisc fq_pie": "kmod-sched-fq-pie", "qdisc sfq": "kmod-sched",
		"qdisc pfifo": "", "qdisc bfifo": "", "qdisc netem": "kmod-netem",
		"qdisc ingress": "kmod-sched-core", "qdisc clsact": "kmod-sched-core",
		"classifier u32": "kmod-sched-core", "classifier matchall": "kmod-sched-core",
		"classifier flower": "kmod-sched-flower", "classifier fw": "kmod-sched-core",
		"classifier bpf": "kmod-sched-bpf",
		"action mirred":  "kmod-sched-core", "action police": "kmod-sched-act-police",
		"action gact": "kmod-sched-core", "action skbedit": "kmod-sched-core",
		"action ctinfo": "kmod-sched-ctinfo",
		"link ifb":      "kmod-ifb",
	}
	for _, f := range All() {
		w, ok := want[f.String()]
		if !ok {
			t.Errorf("%s: not checked against OpenWrt's packages; add it here and to the table's comment", f)
			continue
		}
		if f.OpenWrt != w {
			t.Errorf("%s: OpenWrt package %q, want %q", f, f.OpenWrt, w)
		}
	}
}

// TestInstaller: the hint names the package manager the router has (apk
// from OpenWrt 25.12 on, opkg before), found under a root directory.
func TestInstaller(t *testing.T) {
	cake, _ := Lookup(TypeQdisc, "cake")
	for _, tt := range []struct {
		name  string
		files []string
		want  string // Advice's parenthesis
	}{
		{"OpenWrt 25.12", []string{"usr/bin/apk"}, "(OpenWrt: apk add kmod-sched-cake)"},
		{"OpenWrt 24.10", []string{"bin/opkg"}, "(OpenWrt: opkg install kmod-sched-cake)"},
		{"upgraded, stale opkg", []string{"bin/opkg", "usr/bin/apk"}, "(OpenWrt: apk add kmod-sched-cake)"},
		{"not OpenWrt", nil, "(OpenWrt: opkg install kmod-sched-cake)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, f := range tt.files {
				p := filepath.Join(root, f)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			got := cake.AdviceFor(Installer(root))
			if want := "kernel module sch_cake is missing " + tt.want; got != want {
				t.Errorf("got %q\nwant %q", got, want)
			}
		})
	}
	// A directory named like the binary is not a package manager.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "usr/bin/apk"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got := Installer(root); got != "" {
		t.Errorf("Installer with a directory usr/bin/apk = %q, want \"\"", got)
	}
	fq, _ := Lookup(TypeQdisc, "fq_codel")
	if got := fq.AdviceFor(InstallAPK); strings.Contains(got, "apk add") || !strings.Contains(got, "builds it into its kernel") {
		t.Errorf("fq_codel advice %q: OpenWrt has no package for it", got)
	}
}

// withoutNetNS makes the prober see a kernel without network namespaces
// (unshare answers EINVAL, as with CONFIG_NET_NS off) and probe in the
// namespace at path instead of the process's own, until the test ends. It
// returns how many times unshare was asked for a namespace.
func withoutNetNS(t *testing.T, path string) *int {
	t.Helper()
	oldUnshare, oldHost := unshareNet, hostNetNS
	calls := new(int)
	unshareNet = func() error { *calls++; return unix.EINVAL }
	hostNetNS = path
	t.Cleanup(func() { unshareNet, hostNetNS = oldUnshare, oldHost })
	return calls
}

// TestQdiscsOneSpace: Prober.Qdiscs answers as Qdisc does, kind by kind,
// from one namespace, or without namespaces from one temporary IFB, which
// it deletes. Before it the daemon made a namespace for each qdisc LuCI
// may offer, at every start (750 ms of the lab VM's daemon start-up).
func TestQdiscsOneSpace(t *testing.T) {
	testutil.RequireRoot(t)
	testQdiscsOneSpace(t)
}

// TestVMQdiscsOneSpace is TestQdiscsOneSpace on the VM's kernel, where
// every qdisc exists, so each one is added and must be deleted before the
// next.
func TestVMQdiscsOneSpace(t *testing.T) {
	testutil.RequireVM(t)
	testQdiscsOneSpace(t)
}

// qdiscKinds are the table's qdisc kinds, in its order.
func qdiscKinds() []string {
	var kinds []string
	for _, f := range All() {
		if f.Type == TypeQdisc {
			kinds = append(kinds, f.Name)
		}
	}
	return kinds
}

// checkOnlyLo fails t for every link but lo left in ns.
func checkOnlyLo(t *testing.T, ns *netns.NS) {
	t.Helper()
	c, err := ns.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	links, err := c.Link.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Attributes != nil && l.Attributes.Name != "lo" {
			t.Errorf("left behind: link %s (%+v)", l.Attributes.Name, l.Attributes.Info)
		}
	}
}

func testQdiscsOneSpace(t *testing.T) {
	kinds := qdiscKinds()
	kinds = append(kinds, kinds[0], "nosuch") // a repeat, and one the table lacks
	ref := NewProber()
	want := make([]error, len(kinds))
	for i, k := range kinds[:len(kinds)-1] {
		if want[i] = ref.Qdisc(k); want[i] != nil && !errors.Is(want[i], ErrNotAvailable) {
			t.Fatalf("reference probe %s: %v", k, want[i])
		}
	}
	for _, withNS := range []bool{true, false} {
		t.Run(map[bool]string{true: "netns", false: "ifb"}[withNS], func(t *testing.T) {
			var calls *int
			var ns *netns.NS
			if withNS {
				old := unshareNet
				calls = new(int)
				unshareNet = func() error { *calls++; return old() }
				t.Cleanup(func() { unshareNet = old })
			} else {
				ns = netns.NewT(t, "sqmfq")
				calls = withoutNetNS(t, ns.Path())
			}
			errs := NewProber().Qdiscs(kinds)
			for i, k := range kinds {
				err := errs[i]
				if k == "nosuch" {
					if err == nil || !strings.Contains(err.Error(), "unknown qdisc kind") {
						t.Errorf("%s: err = %v, want an unknown kind", k, err)
					}
					continue
				}
				if (err == nil) != (want[i] == nil) || (err != nil && !errors.Is(err, ErrNotAvailable)) {
					t.Errorf("%s: %v; probed alone: %v", k, err, want[i])
				}
			}
			if *calls != 1 {
				t.Errorf("%d namespaces asked for, want 1 for the %d kinds", *calls, len(kinds))
			}
			if ns != nil {
				checkOnlyLo(t, ns)
			}
		})
	}
}

// TestProbeWithoutNetNS runs every probe the way a kernel without network
// namespaces (OpenWrt's small-flash builds) forces: on a temporary IFB in
// an existing namespace, here one the test made so the host's is never
// touched. The answers must be the namespace path's, and nothing may be
// left behind: no device, no action. Before the fallback every probe
// failed with "create network namespace: unshare: invalid argument", and
// luci-app-sqm's qdisc list stayed empty.
func TestProbeWithoutNetNS(t *testing.T) {
	testutil.RequireRoot(t)
	testProbeWithoutNetNS(t)
}

// TestVMProbeWithoutNetNS is TestProbeWithoutNetNS on the VM's kernel,
// where every qdisc and action exists, so each probe really creates (and
// must delete) its object on the temporary IFB.
func TestVMProbeWithoutNetNS(t *testing.T) {
	testutil.RequireVM(t)
	testProbeWithoutNetNS(t)
}

func testProbeWithoutNetNS(t *testing.T) {
	ref := NewProber()
	want := map[Feature]error{}
	for _, f := range All() {
		err := ref.check(f.Type, f.Name)
		if err != nil && !errors.Is(err, ErrNotAvailable) {
			t.Fatalf("reference probe %s in a namespace: %v", f, err)
		}
		want[f] = err
	}
	ns := netns.NewT(t, "sqmft")
	calls := withoutNetNS(t, ns.Path())
	p := NewProber()
	for _, f := range All() {
		err := p.check(f.Type, f.Name)
		switch {
		case err != nil && !errors.Is(err, ErrNotAvailable):
			t.Errorf("%s without network namespaces: %v", f, err)
		case (err == nil) != (want[f] == nil):
			t.Errorf("%s without network namespaces: %v; in a namespace: %v", f, err, want[f])
		}
	}
	if *calls == 0 {
		t.Fatal("the prober never asked for a namespace: the test did not exercise the fallback")
	}
	checkOnlyLo(t, ns)
	tcc, err := tc.Open(&tc.Config{NetNS: ns.FD()})
	if err != nil {
		t.Fatal(err)
	}
	defer tcc.Close()
	for _, f := range All() {
		if f.Type != TypeAction || want[f] != nil {
			continue
		}
		acts, err := tcc.Actions().Get(f.Name)
		if err != nil {
			t.Errorf("list %s actions: %v", f.Name, err)
		}
		for _, a := range acts {
			t.Errorf("left behind: action %s index %d", a.Kind, a.Index)
		}
	}
}

// BenchmarkProbeQdiscs probes every qdisc of the table with a fresh
// prober: in throwaway namespaces, and as on a kernel without them, on a
// temporary IFB (in a namespace the benchmark made).
func BenchmarkProbeQdiscs(b *testing.B) {
	testutil.RequireRoot(b)
	kinds := qdiscKinds()
	run := func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			p := NewProber()
			for _, k := range kinds {
				if err := p.Qdisc(k); err != nil && !errors.Is(err, ErrNotAvailable) {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("netns", run)
	// Qdiscs: the same kinds in one namespace, as the daemon refreshes
	// LuCI's list
	b.Run("netns-batch", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			for j, err := range NewProber().Qdiscs(kinds) {
				if err != nil && !errors.Is(err, ErrNotAvailable) {
					b.Fatalf("%s: %v", kinds[j], err)
				}
			}
		}
	})
	b.Run("ifb", func(b *testing.B) {
		ns := netns.NewT(b, "sqmfb")
		oldUnshare, oldHost := unshareNet, hostNetNS
		unshareNet = func() error { return unix.EINVAL }
		hostNetNS = ns.Path()
		defer func() { unshareNet, hostNetNS = oldUnshare, oldHost }()
		run(b)
	})
}
