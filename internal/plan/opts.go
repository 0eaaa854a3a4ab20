package plan

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"sqm/internal/units"
)

// errOpts is wrapped by every opts parse error, so tests and callers can
// tell a user's bad iqdisc_opts/eqdisc_opts from an internal failure.
var errOpts = errors.New("bad qdisc options")

// optsError describes one bad keyword in iqdisc_opts/eqdisc_opts.
type optsError struct{ msg string }

func (e *optsError) Error() string { return e.msg }
func (e *optsError) Unwrap() error { return errOpts }

func optsErrorf(format string, args ...any) error {
	return &optsError{msg: fmt.Sprintf(format, args...)}
}

// optParser walks the words of a tc option string. Values are read with
// tc's own unit rules (see units.go).
type optParser struct {
	qdisc   string
	allowed string // keywords, for "unknown keyword" errors
	toks    []string
	i       int
}

func newOptParser(qdisc, allowed string, toks []string) *optParser {
	return &optParser{qdisc: qdisc, allowed: allowed, toks: toks}
}

func (p *optParser) more() bool { return p.i < len(p.toks) }

func (p *optParser) next() string { p.i++; return p.toks[p.i-1] }

func (p *optParser) unknown(kw string) error {
	return optsErrorf("unknown %s keyword %q; %s accepts: %s", p.qdisc, kw, p.qdisc, p.allowed)
}

const (
	descTime = "a time such as 5ms, 100us or 1s"
	descSize = "a size in bytes such as 1514, 64k or 4mb"
	descRate = "a rate such as 85mbit or 85000kbit"
	descUint = "an unsigned integer"
)

func (p *optParser) arg(kw, desc string) (string, error) {
	if !p.more() {
		return "", optsErrorf("%s keyword %q needs a value: %s", p.qdisc, kw, desc)
	}
	return p.next(), nil
}

func (p *optParser) bad(kw, v, desc string) error {
	return optsErrorf("%s %s %q is not valid: want %s", p.qdisc, kw, v, desc)
}

// badUnit reports a value internal/units rejected; its error names the
// value, what is wrong and what it expected.
func (p *optParser) badUnit(kw string, err error) error {
	return optsErrorf("%s %s: %v", p.qdisc, kw, err)
}

func (p *optParser) time(kw string) (time.Duration, error) {
	s, err := p.arg(kw, descTime)
	if err != nil {
		return 0, err
	}
	d, err := units.ParseTime(s)
	if err != nil {
		return 0, p.badUnit(kw, err)
	}
	return d, nil
}

func (p *optParser) size(kw string) (uint32, error) {
	s, err := p.arg(kw, descSize)
	if err != nil {
		return 0, err
	}
	v, err := units.ParseSize(s)
	if err != nil {
		return 0, p.badUnit(kw, err)
	}
	return v, nil
}

func (p *optParser) uint(kw string) (uint32, error) {
	s, err := p.arg(kw, descUint)
	if err != nil {
		return 0, err
	}
	v, ok := parseUint32(s)
	if !ok {
		return 0, p.bad(kw, s, descUint)
	}
	return v, nil
}

func (p *optParser) rate(kw string) (uint64, error) {
	s, err := p.arg(kw, descRate)
	if err != nil {
		return 0, err
	}
	v, err := units.ParseRate(s)
	if err != nil {
		return 0, p.badUnit(kw, err)
	}
	return v, nil
}

// parseUint32 reads an unsigned integer like tc's get_unsigned (base 0:
// decimal, 0x hex or 0 octal).
func parseUint32(s string) (uint32, bool) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, false
	}
	return uint32(v), true
}

func boolp(b bool) *bool { return &b }

// cakeNamedRTT is tc-cake's rtt preset kw (q_cake.c), if it is one.
func cakeNamedRTT(kw string) (time.Duration, bool) {
	switch kw {
	case "datacentre":
		return 100 * time.Microsecond, true
	case "lan":
		return time.Millisecond, true
	case "metro":
		return 10 * time.Millisecond, true
	case "regional":
		return 30 * time.Millisecond, true
	case "internet":
		return 100 * time.Millisecond, true
	case "oceanic":
		return 300 * time.Millisecond, true
	case "satellite":
		return time.Second, true
	case "interplanetary":
		return 1000 * time.Second, true
	}
	return 0, false
}

// cakeOverheadKeyword is one of tc-cake's link framing presets: it sets
// the ATM/PTM mode and ADDS its bytes to the overhead so far (so
// "pppoe-ptm ether-vlan" is 34), exactly as q_cake.c does.
type cakeOverheadKeyword struct {
	atm string // "" leaves the mode alone
	add int32
	mpu uint32 // 0 leaves mpu alone
}

func cakeOverheadKeywords(kw string) (cakeOverheadKeyword, bool) {
	switch kw {
	case "ipoa-vcmux":
		return cakeOverheadKeyword{"atm", 8, 0}, true
	case "ipoa-llcsnap":
		return cakeOverheadKeyword{"atm", 16, 0}, true
	case "bridged-vcmux":
		return cakeOverheadKeyword{"atm", 24, 0}, true
	case "bridged-llcsnap":
		return cakeOverheadKeyword{"atm", 32, 0}, true
	case "pppoa-vcmux":
		return cakeOverheadKeyword{"atm", 10, 0}, true
	case "pppoa-llc":
		return cakeOverheadKeyword{"atm", 14, 0}, true
	case "pppoe-vcmux":
		return cakeOverheadKeyword{"atm", 32, 0}, true
	case "pppoe-llcsnap":
		return cakeOverheadKeyword{"atm", 40, 0}, true
	case "pppoe-ptm": // PPP 2 + PPPoE 6 + MACs 12 + ethertype 2 + FCS 4 + PTM framing 4
		return cakeOverheadKeyword{"ptm", 30, 0}, true
	case "bridged-ptm":
		return cakeOverheadKeyword{"ptm", 22, 0}, true
	case "ethernet": // preamble, inter-frame gap and FCS; minimum frame 84
		return cakeOverheadKeyword{"", 38, 84}, true
	case "ether-vlan": // one 802.1Q tag; may be repeated
		return cakeOverheadKeyword{"", 4, 0}, true
	case "docsis": // frame with FCS, no preamble or gap; minimum 64
		return cakeOverheadKeyword{"noatm", 18, 64}, true
	}
	return cakeOverheadKeyword{}, false
}

const cakeKeywords = "bandwidth RATE, unlimited, autorate-ingress, rtt TIME, datacentre, lan, metro, regional, internet, oceanic, satellite, interplanetary, " +
	"besteffort, precedence, diffserv3, diffserv4, diffserv8, flowblind, srchost, dsthost, hosts, flows, dual-srchost, dual-dsthost, triple-isolate, " +
	"nat, nonat, wash, nowash, split-gso, no-split-gso, ack-filter, ack-filter-aggressive, no-ack-filter, memlimit SIZE, fwmark MASK, " +
	"atm, ptm, noatm, overhead N (-64..256), mpu N (0..256), raw, conservative, ingress, egress, " +
	"ipoa-vcmux, ipoa-llcsnap, bridged-vcmux, bridged-llcsnap, pppoa-vcmux, pppoa-llc, pppoe-vcmux, pppoe-llcsnap, pppoe-ptm, bridged-ptm, ethernet, ether-vlan, docsis, via-ethernet"

// parseCake applies tc-cake keywords to c in order. Like tc, the last of
// competing keywords wins, and the framing presets accumulate overhead.
func parseCake(c *Cake, toks []string) error {
	p := newOptParser("cake", cakeKeywords, toks)
	addOverhead := func(n int32) {
		var cur int32
		if c.Overhead != nil {
			cur = *c.Overhead
		}
		cur += n
		c.Overhead = &cur
	}
	setMPU := func(m uint32) {
		if m == 0 { // tc sends no TCA_CAKE_MPU for 0
			c.MPU = nil
			return
		}
		c.MPU = &m
	}
	for p.more() {
		kw := p.next()
		if rtt, ok := cakeNamedRTT(kw); ok {
			c.RTT = rtt
			continue
		}
		if o, ok := cakeOverheadKeywords(kw); ok {
			if o.atm != "" {
				c.ATM = o.atm
			}
			addOverhead(o.add)
			if o.mpu != 0 {
				setMPU(o.mpu)
			}
			continue
		}
		switch kw {
		case "bandwidth":
			r, err := p.rate(kw)
			if err != nil {
				return err
			}
			if r == 0 {
				return optsErrorf("cake bandwidth must be above 0; use \"unlimited\" for no shaping")
			}
			c.BandwidthBits = r
			c.Autorate = boolp(false)
		case "unlimited":
			c.BandwidthBits = 0
			c.Autorate = boolp(false)
		case "autorate-ingress":
			c.Autorate = boolp(true)
		case "rtt":
			d, err := p.time(kw)
			if err != nil {
				return err
			}
			if d <= 0 {
				return optsErrorf("cake rtt must be above 0")
			}
			c.RTT = d
		case "besteffort", "precedence", "diffserv3", "diffserv4", "diffserv8":
			c.Diffserv = kw
		case "flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate":
			c.FlowMode = kw
		case "nat", "nonat":
			c.NAT = boolp(kw == "nat")
		case "wash", "nowash":
			c.Wash = boolp(kw == "wash")
		case "split-gso", "no-split-gso":
			c.SplitGSO = boolp(kw == "split-gso")
		case "ack-filter", "ack-filter-aggressive", "no-ack-filter":
			c.ACKFilter = kw
		case "ingress", "egress":
			c.Ingress = boolp(kw == "ingress")
		case "atm", "ptm", "noatm":
			c.ATM = kw
		case "raw":
			c.ATM = "noatm"
			zero := int32(0)
			c.Overhead = &zero
			c.Raw = boolp(true)
		case "conservative":
			c.ATM = "atm"
			o := int32(48)
			c.Overhead = &o
		case "via-ethernet":
			// Accepted and ignored, as tc does: cake now compensates for
			// the Ethernet header by itself.
		case "overhead":
			s, err := p.arg(kw, "an integer from -64 to 256")
			if err != nil {
				return err
			}
			v, err := strconv.ParseInt(s, 10, 32)
			if err != nil || v < -64 || v > 256 {
				return p.bad(kw, s, "an integer from -64 to 256")
			}
			n := int32(v)
			c.Overhead = &n
		case "mpu":
			s, err := p.arg(kw, "an integer from 0 to 256")
			if err != nil {
				return err
			}
			m, err := strconv.ParseUint(s, 10, 32)
			if err != nil || m > 256 {
				return p.bad(kw, s, "an integer from 0 to 256")
			}
			setMPU(uint32(m))
		case "memlimit":
			v, err := p.size(kw)
			if err != nil {
				return err
			}
			c.Memlimit = v
		case "fwmark":
			v, err := p.uint(kw)
			if err != nil {
				return err
			}
			c.FwMark = v
		default:
			return p.unknown(kw)
		}
	}
	if c.Overhead != nil && (*c.Overhead < -64 || *c.Overhead > 256) {
		return optsErrorf("cake overhead adds up to %d, outside cake's range -64..256; check the overhead keywords", *c.Overhead)
	}
	return nil
}

const fqCodelKeywords = "limit PACKETS, flows N, target TIME, interval TIME, quantum BYTES, ecn, noecn, ce_threshold TIME, memory_limit SIZE, drop_batch N"

func parseFqCodel(f *FqCodel, toks []string) error {
	p := newOptParser("fq_codel", fqCodelKeywords, toks)
	for p.more() {
		kw := p.next()
		var err error
		switch kw {
		case "limit":
			f.Limit, err = p.uint(kw)
		case "flows":
			f.Flows, err = p.uint(kw)
		case "quantum":
			f.Quantum, err = p.uint(kw)
		case "drop_batch":
			f.DropBatch, err = p.uint(kw)
		case "target":
			f.Target, err = p.time(kw)
		case "interval":
			f.Interval, err = p.time(kw)
		case "ce_threshold":
			f.CEThreshold, err = p.time(kw)
		case "memory_limit":
			f.MemoryLimit, err = p.size(kw)
		case "ecn", "noecn":
			f.ECN = boolp(kw == "ecn")
		default:
			return p.unknown(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const codelKeywords = "limit PACKETS, target TIME, interval TIME, ecn, noecn, ce_threshold TIME"

func parseCodel(c *Codel, toks []string) error {
	p := newOptParser("codel", codelKeywords, toks)
	for p.more() {
		kw := p.next()
		var err error
		switch kw {
		case "limit":
			c.Limit, err = p.uint(kw)
		case "target":
			c.Target, err = p.time(kw)
		case "interval":
			c.Interval, err = p.time(kw)
		case "ce_threshold":
			c.CEThreshold, err = p.time(kw)
		case "ecn", "noecn":
			c.ECN = boolp(kw == "ecn")
		default:
			return p.unknown(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const pieKeywords = "limit PACKETS, target TIME, tupdate TIME, alpha N (0..32), beta N (0..32), ecn, noecn, bytemode, nobytemode"

func parsePie(c *Pie, toks []string) error {
	p := newOptParser("pie", pieKeywords, toks)
	for p.more() {
		kw := p.next()
		var err error
		switch kw {
		case "limit":
			c.Limit, err = p.uint(kw)
		case "target":
			c.Target, err = p.time(kw)
		case "tupdate":
			c.TUpdate, err = p.time(kw)
		case "alpha":
			c.Alpha, err = p.alphaBeta(kw)
		case "beta":
			c.Beta, err = p.alphaBeta(kw)
		case "ecn", "noecn":
			c.ECN = boolp(kw == "ecn")
		case "bytemode", "nobytemode":
			c.Bytemode = boolp(kw == "bytemode")
		default:
			return p.unknown(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// alphaBeta reads pie's alpha/beta, which the kernel accepts only up to 32.
func (p *optParser) alphaBeta(kw string) (uint32, error) {
	s, err := p.arg(kw, "an integer from 0 to 32")
	if err != nil {
		return 0, err
	}
	v, ok := parseUint32(s)
	if !ok || v > 32 {
		return 0, p.bad(kw, s, "an integer from 0 to 32")
	}
	return v, nil
}

const fqPieKeywords = "limit PACKETS, flows N, target TIME, tupdate TIME, alpha N (0..32), beta N (0..32), quantum BYTES, memory_limit SIZE, ecn_prob PERCENT, ecn, noecn, bytemode, nobytemode"

func parseFqPie(c *FqPie, toks []string) error {
	p := newOptParser("fq_pie", fqPieKeywords, toks)
	for p.more() {
		kw := p.next()
		var err error
		switch kw {
		case "limit":
			c.Limit, err = p.uint(kw)
		case "flows":
			c.Flows, err = p.uint(kw)
		case "target":
			c.Target, err = p.time(kw)
		case "tupdate":
			c.TUpdate, err = p.time(kw)
		case "alpha":
			c.Alpha, err = p.alphaBeta(kw)
		case "beta":
			c.Beta, err = p.alphaBeta(kw)
		case "quantum":
			c.Quantum, err = p.uint(kw)
		case "memory_limit":
			c.MemoryLimit, err = p.size(kw)
		case "ecn_prob":
			var v uint32
			v, err = p.uint(kw)
			if err == nil && v > 100 {
				err = p.bad(kw, p.toks[p.i-1], "a percentage from 0 to 100")
			}
			c.ECNProb = v
		case "ecn", "noecn":
			c.ECN = boolp(kw == "ecn")
		case "bytemode", "nobytemode":
			c.Bytemode = boolp(kw == "bytemode")
		default:
			return p.unknown(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

const sfqKeywords = "limit PACKETS, perturb SECS, quantum BYTES, divisor N, flows N, depth N"

func parseSFQ(c *SFQ, toks []string) error {
	p := newOptParser("sfq", sfqKeywords, toks)
	for p.more() {
		kw := p.next()
		var err error
		switch kw {
		case "limit":
			c.Limit, err = p.uint(kw)
		case "perturb":
			c.Perturb, err = p.uint(kw)
		case "quantum":
			c.Quantum, err = p.size(kw)
		case "divisor":
			c.Divisor, err = p.uint(kw)
			if err == nil && (c.Divisor == 0 || c.Divisor&(c.Divisor-1) != 0 || c.Divisor > 65536) {
				err = p.bad(kw, p.toks[p.i-1], "a power of two up to 65536")
			}
		case "flows":
			c.Flows, err = p.uint(kw)
		case "depth":
			c.Depth, err = p.uint(kw)
		default:
			return p.unknown(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func parseFifo(kind string, f *Fifo, toks []string) error {
	p := newOptParser(kind, "limit N", toks)
	for p.more() {
		kw := p.next()
		if kw != "limit" {
			return p.unknown(kw)
		}
		var err error
		if kind == "bfifo" {
			f.Limit, err = p.size(kw)
		} else {
			f.Limit, err = p.uint(kw)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// parseLeafOpts applies tc option words to the options of q.Kind.
func parseLeafOpts(q *Qdisc, toks []string) error {
	switch q.Kind {
	case "cake":
		return parseCake(q.Cake, toks)
	case "fq_codel":
		return parseFqCodel(q.FqCodel, toks)
	case "codel":
		return parseCodel(q.Codel, toks)
	case "pie":
		return parsePie(q.Pie, toks)
	case "fq_pie":
		return parseFqPie(q.FqPie, toks)
	case "sfq":
		return parseSFQ(q.SFQ, toks)
	case "pfifo", "bfifo":
		return parseFifo(q.Kind, q.Fifo, toks)
	}
	return fmt.Errorf("plan: no option parser for qdisc %q", q.Kind)
}
