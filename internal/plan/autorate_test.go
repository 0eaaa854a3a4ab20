package plan

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"sqm/internal/config"
)

// TestRerateIsBuildAtTheRate: for every recipe, leaf and link-layer
// variant, Rerate's tree is Build's tree at that rate (cake bandwidth,
// tbf, every class), with the leaves of the base rate's tree.
func TestRerateIsBuildAtTheRate(t *testing.T) {
	env := Env{MTU: 1500}
	for _, script := range config.Scripts() {
		for _, qdisc := range leafQdiscList() {
			for _, v := range variantsFor(script, qdisc) {
				q := baseQueue()
				q.Script, q.Qdisc = script, qdisc
				v.mod(q)
				base, err := Build(q, env)
				if err != nil {
					continue // the golden test covers refusals
				}
				for _, ingress := range []bool{false, true} {
					baseKbit := q.Upload
					if ingress {
						baseKbit = q.Download
					}
					for _, kbit := range []uint64{64, 300, 2000, baseKbit, baseKbit*3/2 + 7} {
						name := script + "/" + qdisc + "/" + v.name
						got, err := Rerate(q, env, ingress, kbit)
						if baseKbit == 0 || ingress && (script == "police" || script == "codel_police") {
							if err == nil {
								t.Errorf("%s ingress=%v: Rerate of an unshaped or policed direction gave no error", name, ingress)
							}
							continue
						}
						if err != nil {
							t.Fatalf("%s ingress=%v %d: %v", name, ingress, kbit, err)
						}
						at := *q
						at.Autorate = config.Autorate{}
						if ingress {
							at.Download = kbit
						} else {
							at.Upload = kbit
						}
						want, err := Build(&at, env)
						if err != nil {
							t.Fatalf("%s: Build at %d: %v", name, kbit, err)
						}
						wt, bt := want.Egress, base.Egress
						if ingress {
							wt, bt = want.Ingress.Shaper, base.Ingress.Shaper
						}
						exp := *wt
						exp.Qdiscs = append([]Qdisc{wt.Qdiscs[0]}, bt.Qdiscs[1:]...)
						// The inner class keeps its base quantum (htbClass).
						exp.Classes = slices.Clone(wt.Classes)
						for i := range exp.Classes {
							if exp.Classes[i].ClassID == hTop {
								h := *exp.Classes[i].HTB
								h.Quantum = bt.Classes[i].HTB.Quantum
								exp.Classes[i].HTB = &h
							}
						}
						if !reflect.DeepEqual(got, &exp) {
							t.Errorf("%s ingress=%v at %d kbit/s:\n got %+v\nwant %+v", name, ingress, kbit, got, &exp)
						}
						if got.RateKbit != kbit {
							t.Errorf("%s: RateKbit %d, want %d", name, got.RateKbit, kbit)
						}
					}
				}
			}
		}
	}
}

func TestRerateRefuses(t *testing.T) {
	q := baseQueue()
	for _, kbit := range []uint64{0, 63, config.MaxKbit + 1} {
		if _, err := Rerate(q, Env{MTU: 1500}, false, kbit); err == nil || !strings.Contains(err.Error(), "outside 64..") {
			t.Errorf("Rerate(%d) = %v", kbit, err)
		}
	}
}

func TestAutoratePlan(t *testing.T) {
	tests := []struct {
		name string
		mod  func(q *config.Queue)
		want string // error, or "" and then check
		chk  func(a *Autorate) bool
	}{
		{"off", func(q *config.Queue) {}, "", func(a *Autorate) bool { return a == nil }},
		{"on", func(q *config.Queue) { q.Autorate.Enabled = true }, "", func(a *Autorate) bool {
			return *a.Download == RateRange{21250, 85000, 170000} && *a.Upload == RateRange{2500, 10000, 20000} && a.Probe == "both"
		}},
		{"upload unshaped", func(q *config.Queue) { q.Autorate.Enabled, q.Upload = true, 0 }, "", func(a *Autorate) bool {
			return a.Upload == nil && a.Download != nil
		}},
		{"police ingress", func(q *config.Queue) { q.Autorate.Enabled, q.Script = true, "police" }, `option autorate: script police polices the download without a shaper`, nil},
		{"codel_police egress only", func(q *config.Queue) { q.Autorate.Enabled, q.Script, q.Download = true, "codel_police", 0 }, "", func(a *Autorate) bool {
			return a.Upload != nil && a.Download == nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := baseQueue()
			tt.mod(q)
			p, err := Build(q, Env{MTU: 1500})
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Build = %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil || !tt.chk(p.Autorate) {
				t.Fatalf("Build = %v, autorate %+v", err, p.Autorate)
			}
		})
	}
}
