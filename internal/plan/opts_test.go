package plan

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func i32(v int32) *int32    { return &v }
func u32p(v uint32) *uint32 { return &v }

func TestParseCake(t *testing.T) {
	for _, tt := range []struct {
		opts string
		want Cake
	}{
		{"bandwidth 85mbit", Cake{BandwidthBits: 85e6, Autorate: boolp(false)}},
		{"bandwidth 10Mbit unlimited", Cake{Autorate: boolp(false)}},
		{"bandwidth 1gbit autorate-ingress", Cake{BandwidthBits: 1e9, Autorate: boolp(true)}},
		{"bandwidth 1000kbps", Cake{BandwidthBits: 8e6, Autorate: boolp(false)}},
		{"rtt 50ms", Cake{RTT: 50 * time.Millisecond}},
		{"datacentre", Cake{RTT: 100 * time.Microsecond}},
		{"satellite metro", Cake{RTT: 10 * time.Millisecond}},
		{"interplanetary", Cake{RTT: 1000 * time.Second}},
		{"diffserv3 nat besteffort", Cake{Diffserv: "besteffort", NAT: boolp(true)}},
		{"precedence diffserv8 diffserv4", Cake{Diffserv: "diffserv4"}},
		{"triple-isolate dual-dsthost", Cake{FlowMode: "dual-dsthost"}},
		{"flowblind srchost dsthost hosts flows dual-srchost", Cake{FlowMode: "dual-srchost"}},
		{"nat nonat wash nowash split-gso", Cake{NAT: boolp(false), Wash: boolp(false), SplitGSO: boolp(true)}},
		{"no-split-gso ack-filter-aggressive", Cake{SplitGSO: boolp(false), ACKFilter: "ack-filter-aggressive"}},
		{"ack-filter no-ack-filter ingress", Cake{ACKFilter: "no-ack-filter", Ingress: boolp(true)}},
		{"egress", Cake{Ingress: boolp(false)}},
		{"memlimit 32mb fwmark 0xff00", Cake{Memlimit: 32 << 20, FwMark: 0xff00}},
		{"atm overhead 44 mpu 84", Cake{ATM: "atm", Overhead: i32(44), MPU: u32p(84)}},
		{"overhead -4 noatm ptm", Cake{ATM: "ptm", Overhead: i32(-4)}},
		{"mpu 64 mpu 0", Cake{}},
		// framing presets add to the overhead so far, as in q_cake.c
		{"overhead 44 mpu 0 pppoe-ptm ether-vlan", Cake{ATM: "ptm", Overhead: i32(78)}},
		{"pppoe-llcsnap", Cake{ATM: "atm", Overhead: i32(40)}},
		{"pppoa-vcmux", Cake{ATM: "atm", Overhead: i32(10)}},
		{"pppoa-llc", Cake{ATM: "atm", Overhead: i32(14)}},
		{"pppoe-vcmux", Cake{ATM: "atm", Overhead: i32(32)}},
		{"bridged-vcmux", Cake{ATM: "atm", Overhead: i32(24)}},
		{"bridged-llcsnap", Cake{ATM: "atm", Overhead: i32(32)}},
		{"ipoa-vcmux", Cake{ATM: "atm", Overhead: i32(8)}},
		{"ipoa-llcsnap", Cake{ATM: "atm", Overhead: i32(16)}},
		{"bridged-ptm", Cake{ATM: "ptm", Overhead: i32(22)}},
		{"ethernet", Cake{Overhead: i32(38), MPU: u32p(84)}},
		{"docsis", Cake{ATM: "noatm", Overhead: i32(18), MPU: u32p(64)}},
		{"bridged-ptm ethernet", Cake{ATM: "ptm", Overhead: i32(60), MPU: u32p(84)}},
		{"via-ethernet", Cake{}},
		{"conservative", Cake{ATM: "atm", Overhead: i32(48)}},
		{"pppoe-ptm raw", Cake{ATM: "noatm", Overhead: i32(0), Raw: boolp(true)}},
		{"raw overhead 8", Cake{ATM: "noatm", Overhead: i32(8), Raw: boolp(true)}},
	} {
		var c Cake
		if err := parseCake(&c, strings.Fields(tt.opts)); err != nil {
			t.Errorf("%q: %v", tt.opts, err)
			continue
		}
		if !reflect.DeepEqual(c, tt.want) {
			t.Errorf("%q:\n got %s\nwant %s", tt.opts, strings.Join(CakeArgs(&c), " "), strings.Join(CakeArgs(&tt.want), " "))
		}
	}
}

func TestParseLeafOpts(t *testing.T) {
	for _, tt := range []struct {
		kind, opts string
		want       Qdisc
	}{
		{"fq_codel", "limit 2000 flows 0x400 target 3ms interval 0.05s quantum 300 noecn ce_threshold 1ms memory_limit 4Mb drop_batch 32",
			Qdisc{FqCodel: &FqCodel{Limit: 2000, Flows: 1024, Target: 3 * time.Millisecond, Interval: 50 * time.Millisecond, Quantum: 300,
				ECN: boolp(false), CEThreshold: time.Millisecond, MemoryLimit: 4 << 20, DropBatch: 32}}},
		{"fq_codel", "target 5000 ecn", Qdisc{FqCodel: &FqCodel{Target: 5 * time.Millisecond, ECN: boolp(true)}}},
		{"codel", "limit 100 target 10ms interval 200ms ecn ce_threshold 4ms",
			Qdisc{Codel: &Codel{Limit: 100, Target: 10 * time.Millisecond, Interval: 200 * time.Millisecond, ECN: boolp(true), CEThreshold: 4 * time.Millisecond}}},
		{"pie", "limit 100 target 15ms tupdate 30ms alpha 2 beta 20 noecn bytemode",
			Qdisc{Pie: &Pie{Limit: 100, Target: 15 * time.Millisecond, TUpdate: 30 * time.Millisecond, Alpha: 2, Beta: 20, ECN: boolp(false), Bytemode: boolp(true)}}},
		{"fq_pie", "limit 10240 flows 1024 target 15ms tupdate 15ms alpha 2 beta 20 quantum 1514 memory_limit 32mb ecn_prob 10 ecn nobytemode",
			Qdisc{FqPie: &FqPie{Limit: 10240, Flows: 1024, Target: 15 * time.Millisecond, TUpdate: 15 * time.Millisecond, Alpha: 2, Beta: 20,
				Quantum: 1514, MemoryLimit: 32 << 20, ECNProb: 10, ECN: boolp(true), Bytemode: boolp(false)}}},
		{"sfq", "limit 127 perturb 10 quantum 1514 divisor 1024 flows 128 depth 127",
			Qdisc{SFQ: &SFQ{Limit: 127, Perturb: 10, Quantum: 1514, Divisor: 1024, Flows: 128, Depth: 127}}},
		{"pfifo", "limit 100", Qdisc{Fifo: &Fifo{Limit: 100}}},
		{"bfifo", "limit 64kb", Qdisc{Fifo: &Fifo{Limit: 65536}}},
	} {
		q := newLeaf(tt.kind)
		if err := parseLeafOpts(&q, strings.Fields(tt.opts)); err != nil {
			t.Errorf("%s %q: %v", tt.kind, tt.opts, err)
			continue
		}
		tt.want.Kind = tt.kind
		if !reflect.DeepEqual(q, tt.want) {
			t.Errorf("%s %q:\n got %s\nwant %s", tt.kind, tt.opts, QdiscArgs(&q), QdiscArgs(&tt.want))
		}
	}
}

// newLeaf is an empty qdisc of kind with its options struct allocated.
func newLeaf(kind string) Qdisc {
	q := Qdisc{Kind: kind}
	switch kind {
	case "cake":
		q.Cake = &Cake{}
	case "fq_codel":
		q.FqCodel = &FqCodel{}
	case "codel":
		q.Codel = &Codel{}
	case "pie":
		q.Pie = &Pie{}
	case "fq_pie":
		q.FqPie = &FqPie{}
	case "sfq":
		q.SFQ = &SFQ{}
	case "pfifo", "bfifo":
		q.Fifo = &Fifo{}
	}
	return q
}

func TestOptsErrors(t *testing.T) {
	for _, tt := range []struct {
		kind, opts, msg string
	}{
		{"cake", "diffserv5", `unknown cake keyword "diffserv5"; cake accepts: bandwidth RATE`},
		{"cake", "autorate_ingress", `unknown cake keyword "autorate_ingress"`},
		{"cake", "bandwidth", `cake keyword "bandwidth" needs a value: a rate`},
		{"cake", "bandwidth fast", `cake bandwidth: parse rate "fast": not a number; expected a rate`},
		{"cake", "bandwidth 10furlongs", `cake bandwidth: parse rate "10furlongs": unknown unit "furlongs"`},
		{"cake", "bandwidth 0mbit", `cake bandwidth must be above 0`},
		{"cake", "rtt 100parsecs", `cake rtt: parse time "100parsecs": unknown unit "parsecs"; expected a time`},
		{"cake", "rtt 0", `cake rtt must be above 0`},
		{"cake", "overhead 300", `cake overhead "300" is not valid: want an integer from -64 to 256`},
		{"cake", "overhead -65", `cake overhead "-65"`},
		{"cake", "overhead 4x", `cake overhead "4x"`},
		{"cake", "mpu 257", `cake mpu "257" is not valid`},
		{"cake", "mpu -1", `cake mpu "-1"`},
		{"cake", "memlimit lots", `cake memlimit: parse size "lots": not a number; expected a size`},
		{"cake", "fwmark -1", `cake fwmark "-1" is not valid: want an unsigned integer`},
		{"cake", "overhead 250 ethernet", `cake overhead adds up to 288`},
		{"fq_codel", "limit", `fq_codel keyword "limit" needs a value`},
		{"fq_codel", "limit 1k", `fq_codel limit "1k" is not valid`},
		{"fq_codel", "target 5 ms", `unknown fq_codel keyword "ms"`},
		{"fq_codel", "diffserv4", `unknown fq_codel keyword "diffserv4"; fq_codel accepts: limit PACKETS`},
		{"fq_codel", "memory_limit 4q", `fq_codel memory_limit: parse size "4q": unknown unit "q"`},
		{"codel", "flows 8", `unknown codel keyword "flows"`},
		{"pie", "alpha 33", `pie alpha "33" is not valid: want an integer from 0 to 32`},
		{"fq_pie", "ecn_prob 101", `fq_pie ecn_prob "101" is not valid: want a percentage`},
		{"sfq", "divisor 1000", `sfq divisor "1000" is not valid: want a power of two`},
		{"sfq", "headdrop", `unknown sfq keyword "headdrop"`},
		{"pfifo", "limit 1mb", `pfifo limit "1mb" is not valid: want an unsigned integer`},
		{"bfifo", "burst 10", `unknown bfifo keyword "burst"; bfifo accepts: limit N`},
		{"fq_codel", "limit 99999999999", `fq_codel limit "99999999999" is not valid`},
		{"fq_codel", "target 9999999s", `fq_codel target: parse time "9999999s": too large`},
	} {
		q := newLeaf(tt.kind)
		err := parseLeafOpts(&q, strings.Fields(tt.opts))
		if err == nil || !errors.Is(err, errOpts) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s %q: error %v, want %q", tt.kind, tt.opts, err, tt.msg)
		}
	}
}

// FuzzOpts feeds arbitrary option text to every leaf's parser. It must
// never panic, errors must be opts errors, and what it accepts must
// render (OptionArgs) to text that parses back to the same options.
func FuzzOpts(f *testing.F) {
	for _, s := range []string{
		"bandwidth 85mbit diffserv4 dual-srchost nat wash ack-filter rtt 50ms",
		"pppoe-ptm ether-vlan mpu 64 memlimit 32mb fwmark 0xff",
		"raw overhead 8 atm", "conservative ingress no-split-gso unlimited autorate-ingress",
		"limit 2000 flows 1024 target 3ms interval 50ms quantum 300 noecn ce_threshold 1ms memory_limit 4mb drop_batch 32",
		"limit 100 target 15ms tupdate 30ms alpha 2 beta 20 ecn bytemode ecn_prob 10",
		"limit 127 perturb 10 quantum 1514 divisor 1024 depth 127", "limit 64k", "target", "overhead 999",
	} {
		for k := range leafQdiscList() {
			f.Add(uint8(k), s)
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, s string) {
		kind := leafQdiscList()[int(k)%len(leafQdiscList())]
		q := newLeaf(kind)
		err := parseLeafOpts(&q, strings.Fields(s))
		if err != nil {
			if !errors.Is(err, errOpts) {
				t.Fatalf("%s %q: error %v is not an opts error", kind, s, err)
			}
			return
		}
		args := strings.Fields(strings.Join(OptionArgs(&q), " "))
		q2 := newLeaf(kind)
		if err := parseLeafOpts(&q2, args); err != nil {
			t.Fatalf("%s %q rendered as %q which does not parse: %v", kind, s, args, err)
		}
		if !reflect.DeepEqual(q, q2) {
			t.Fatalf("%s %q: round trip through %q changed the options", kind, s, args)
		}
	})
}
