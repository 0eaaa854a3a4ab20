package plan

import (
	"fmt"
	"sync"
	"time"

	"sqm/internal/config"
)

// Autorate is a plan's autorate settings (issue 26): the rates the
// daemon's controller may set per direction and how it measures. Nil when
// the section's autorate option is off; a direction is nil when it is not
// shaped.
type Autorate struct {
	Download *RateRange    `json:"download,omitempty"`
	Upload   *RateRange    `json:"upload,omitempty"`
	Target   time.Duration `json:"target"` // one-way delay rise the controller holds, per direction
	Probe    string        `json:"probe"`  // icmp, udp or both
	// Reflectors are the hosts to probe; empty means the probe layer's
	// default (the configured sqm/irtt server, else its built-in list).
	Reflectors []string `json:"reflectors,omitempty"`
}

// RateRange is one direction's rates in kbit/s; the tree is built at
// Base (download/upload), Rerate builds it anywhere in [Min, Max].
type RateRange struct {
	MinKbit  uint64 `json:"min_kbit"`
	BaseKbit uint64 `json:"base_kbit"`
	MaxKbit  uint64 `json:"max_kbit"`
}

func (r *RateRange) String() string {
	return fmt.Sprintf("%d..%d..%d kbit/s (min..base..max)", r.MinKbit, r.BaseKbit, r.MaxKbit)
}

// autorate fills in p.Autorate. It refuses what the kernel cannot change
// in place: the ingress policers (police, codel_police) have no shaper
// whose rate could move.
func (b *builder) autorate() error {
	q := b.q
	if !q.Autorate.Enabled {
		return nil
	}
	a := &Autorate{Target: q.AutorateTargetOrDefault(), Probe: q.AutorateProbeOrDefault(), Reflectors: q.Autorate.Reflectors}
	for _, ingress := range []bool{true, false} {
		r := q.AutorateRange(ingress)
		if r.Base == 0 {
			continue
		}
		opt := "autorate_upload_min"
		if ingress {
			opt = "autorate_download_min"
		}
		if r.Min < minRateKbit || r.Min > r.Base || r.Max < r.Base || r.Max > config.MaxKbit {
			return q.Errorf(opt, "autorate rates %d..%d..%d kbit/s are not min <= base <= max within %d..%d", r.Min, r.Base, r.Max, minRateKbit, uint64(config.MaxKbit))
		}
		rr := &RateRange{MinKbit: r.Min, BaseKbit: r.Base, MaxKbit: r.Max}
		if ingress {
			if b.p.Ingress == nil || b.p.Ingress.Shaper == nil {
				return q.Errorf("autorate", "script %s polices the download without a shaper, whose rate cannot be changed in place; use autorate with piece_of_cake, layer_cake, simple, simplest or simplest_tbf, or set autorate 0", b.p.Script)
			}
			a.Download = rr
		} else {
			a.Upload = rr
		}
	}
	b.p.Autorate = a
	return nil
}

// Rerate returns the tree of one direction of q (ingress: the IFB's) as
// Build makes it at kbit instead of the base rate: what an autorate
// change sets. It is the one place the rate-derived values come from, so
// a changed rate is the rate Build would give: cake's bandwidth, tbf's
// rate and burst, and every HTB class's rate, ceil, burst and quantum
// (simple.qos's tiers are C/3, C/6 and C-16 of the new C). The leaf
// qdiscs stay as built for the base rate: their auto target depends on
// the rate only below 2.8 Mbit/s (one MTU's serialisation), and keeping
// them means a change touches the shaper alone and never a queue holding
// packets.
//
// The kernel package's SetRate applies the difference between the tree
// that runs and this one. The tree's Filters (simple.qos's DSCP set, the
// same at every rate) are one slice shared by every Rerate tree: read
// them, never change them.
func Rerate(q *config.Queue, env Env, ingress bool, kbit uint64) (*Tree, error) {
	b, err := newBuilder(q, env)
	if err != nil {
		return nil, err
	}
	d := b.direction(ingress)
	if d.baseKbit == 0 {
		return nil, fmt.Errorf("plan: queue %s does not shape its %s (rate 0), so its rate cannot change", q.Name, dirName(d))
	}
	if kbit < minRateKbit || kbit > config.MaxKbit {
		return nil, fmt.Errorf("plan: %s rate %d kbit/s is outside %d..%d", dirName(d), kbit, minRateKbit, uint64(config.MaxKbit))
	}
	if ingress && (b.p.Script == "police" || b.p.Script == "codel_police") {
		return nil, fmt.Errorf("plan: script %s polices the download; its rate cannot be changed in place", b.p.Script)
	}
	d.rateKbit = kbit
	b.shared = true
	return b.egress(d)
}

var (
	sharedFiltersOnce sync.Once
	sharedFilters     []Filter
)

// sharedDSCPFilters is simple.qos's filter set, built once for Rerate.
func sharedDSCPFilters() []Filter {
	sharedFiltersOnce.Do(func() { sharedFilters = dscpFilters(hRoot) })
	return sharedFilters
}
