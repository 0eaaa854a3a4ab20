package codelpolice

import (
	"testing"
	"time"

	"sqm/internal/plan"
	"sqm/internal/testutil"
)

func testParams() *plan.CodelPolice {
	return &plan.CodelPolice{RateBits: 50e6, Target: 5 * time.Millisecond, Interval: 100 * time.Millisecond,
		Limit: 200 * time.Millisecond, MTU: 1514, ECN: true, Flows: true}
}

// TestLoadHostKernel: the kernel's verifier accepts the program with every
// combination of modes, and closing it unloads it (maps included).
func TestLoadHostKernel(t *testing.T) {
	testutil.RequireRoot(t)
	checkLoads(t)
}

// TestVMLoad is TestLoadHostKernel on the VM's kernel (Debian 12's 6.1),
// whose verifier is older than the host's.
func TestVMLoad(t *testing.T) {
	testutil.RequireVM(t)
	checkLoads(t)
}

func checkLoads(t *testing.T) {
	for _, l2 := range []int{14, 0} {
		for _, flows := range []bool{true, false} {
			p := testParams()
			p.Flows = flows
			prog, err := Load(p, l2)
			if err != nil {
				t.Fatalf("l2len %d flows %v: %v", l2, flows, err)
			}
			ids, err := LoadedPrograms()
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) == 0 {
				t.Fatalf("loaded, but no %s program listed", ProgName)
			}
			id := ids[len(ids)-1]
			c, err := ReadCounters(id)
			if err != nil {
				t.Fatalf("counters of %d: %v", id, err)
			}
			if c != (Counters{}) {
				t.Errorf("fresh program counted %+v", c)
			}
			if err := prog.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}
