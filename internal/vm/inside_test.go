package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sqm/internal/testutil"
)

// TestVMEnvironment checks, inside the VM, what the harness promises
// tests: root, the package directory as cwd (testdata/ readable), writable
// /tmp and /run/netns, and module autoloading from the host's tree.
func TestVMEnvironment(t *testing.T) {
	testutil.RequireVM(t)
	wd, _ := os.Getwd()
	if filepath.Base(wd) != "vm" {
		t.Errorf("cwd %s, want the package directory", wd)
	}
	if _, err := os.Stat("vm_test.go"); err != nil {
		t.Errorf("package sources not visible: %v", err)
	}
	for _, d := range []string{os.TempDir(), "/run/netns"} {
		f, err := os.CreateTemp(d, "probe")
		if err != nil {
			t.Errorf("%s not writable: %v", d, err)
			continue
		}
		f.Close()
		os.Remove(f.Name())
	}
	b, err := os.ReadFile("/proc/sys/kernel/modprobe")
	if err != nil || strings.TrimSpace(string(b)) != "/sbin/modprobe" {
		t.Errorf("kernel modprobe path %q (%v)", b, err)
	}
	// Ask the kernel itself to load a module (request_module via the
	// modprobe wrapper), as a qdisc add would.
	out, err := exec.Command("/sbin/modprobe", "sch_netem").CombinedOutput()
	if err != nil {
		t.Fatalf("modprobe sch_netem: %v: %s", err, out)
	}
	mods, _ := os.ReadFile("/proc/modules")
	if !strings.Contains(string(mods), "sch_netem") {
		t.Errorf("sch_netem not loaded after modprobe")
	}
}

// TestVMStaticKeysPinned checks that the guest's root-namespace lo carries
// the clsact qdisc the init script adds, so the ingress/egress static keys
// are already on and no test's qdisc change patches the receive path's
// code under traffic (the multi-threaded TCG livelock in docs/testing.md).
func TestVMStaticKeysPinned(t *testing.T) {
	testutil.RequireVM(t)
	out, err := exec.Command("tc", "qdisc", "show", "dev", "lo").CombinedOutput()
	if err != nil {
		t.Fatalf("tc qdisc show dev lo: %v: %s", err, out)
	}
	if !strings.Contains(string(out), "qdisc clsact ffff:") {
		t.Errorf("no clsact qdisc on lo, the static keys are not pinned:\n%s", out)
	}
}
