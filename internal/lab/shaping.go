package lab

import (
	"fmt"

	"sqm/internal/config"
)

// Shaping says how the "after" run shapes the router's WAN veth. The zero
// value is the default: piece_of_cake with cake at 90 % of the emulated
// rates, with the emulated link's framing (link-layer compensation on).
type Shaping struct {
	// ConfigFile, if set, is a UCI file whose first enabled queue section is
	// used (its interface is replaced by the lab's WAN veth); the fields
	// below must then be left zero.
	ConfigFile string
	Script     string // default piece_of_cake
	Qdisc      string // default cake
	DownBits   uint64 // ingress rate; 0: 90 % of the link's down rate
	UpBits     uint64 // egress rate; 0: 90 % of the link's up rate
	// LinkLayer is sqm's linklayer (none, ethernet, atm); "" follows the
	// emulated link, and so does a nil Overhead.
	LinkLayer  string
	Overhead   *int
	IQdiscOpts string
	EQdiscOpts string

	// untold leaves the framing at sqm's defaults instead of the emulated
	// link's, unless the fields above set it: what tune starts from when
	// it has to find the framing itself.
	untold bool
}

// shapeShare is the share of the line rate sqm shapes to by default: the
// usual sqm advice (85-95 %) so the router, not the modem, is the bottleneck.
const shapeShare = 0.90

// queue returns the sqm queue section for the lab's WAN device and where it
// came from ("defaults", "flags" or the config file name).
func (s Shaping) queue(link Link, dev string) (*config.Queue, string, error) {
	if s.ConfigFile != "" {
		q, err := loadQueue(s.ConfigFile)
		if err != nil {
			return nil, "", err
		}
		q.Interface = dev
		return q, s.ConfigFile, nil
	}
	src := "defaults"
	if s.Script != "" && s.Script != "piece_of_cake" || s.Qdisc != "" && s.Qdisc != "cake" ||
		s.DownBits|s.UpBits != 0 || s.LinkLayer != "" || s.Overhead != nil || s.IQdiscOpts+s.EQdiscOpts != "" {
		src = "flags"
	}
	q := baseQueue()
	q.Interface = dev
	q.Script = or(s.Script, "piece_of_cake")
	q.Qdisc = or(s.Qdisc, "cake")
	q.Download = uint64(float64(link.DownBits)*shapeShare) / 1000
	q.Upload = uint64(float64(link.UpBits)*shapeShare) / 1000
	if s.DownBits != 0 {
		q.Download = s.DownBits / 1000
	}
	if s.UpBits != 0 {
		q.Upload = s.UpBits / 1000
	}
	// Follow the emulated line: sqm's ethernet default (linklayer none)
	// counts the frame as the veth carries it, which is what netem charges
	// with the default 14-byte overhead; atm gets cells and the overhead;
	// ptm is ethernet accounting plus cake's ptm keyword (sqm-scripts has no
	// ptm linklayer; users write it in the qdisc options).
	// (Unless untold: then only the fields below set the framing.)
	if !s.untold {
		switch link.LinkLayer {
		case "atm":
			q.LinkLayer, q.Overhead = "atm", link.Overhead
		case "ptm":
			q.LinkLayer, q.Overhead = "ethernet", link.Overhead
			if q.Qdisc == "cake" {
				q.EQdiscOpts, q.IQdiscOpts = "ptm", "ptm"
			}
		default:
			if link.Overhead != ethHeader {
				q.LinkLayer, q.Overhead = "ethernet", link.Overhead
			}
		}
	}
	if s.LinkLayer != "" {
		q.LinkLayer = s.LinkLayer
	}
	if s.Overhead != nil {
		q.Overhead = *s.Overhead
	}
	if s.IQdiscOpts != "" {
		q.IQdiscOpts = s.IQdiscOpts
	}
	if s.EQdiscOpts != "" {
		q.EQdiscOpts = s.EQdiscOpts
	}
	if q.Download == 0 || q.Upload == 0 {
		return nil, "", fmt.Errorf("lab: shaping rate below 1 kbit/s: give --shape-down/--shape-up of at least 1kbit")
	}
	return q, src, nil
}

// baseQueue is an enabled sqm queue section with sqm-scripts' defaults for
// everything the lab does not set.
func baseQueue() *config.Queue {
	q := config.Defaults()
	q.Name = "lab"
	q.Enabled = true
	return &q
}

// loadQueue returns the first enabled queue section of a UCI file.
func loadQueue(path string) (*config.Queue, error) {
	qs, err := config.LoadQueues(path)
	if err != nil {
		return nil, fmt.Errorf("lab: --config: %w", err)
	}
	for i := range qs {
		if qs[i].Enabled {
			return &qs[i], nil
		}
	}
	return nil, fmt.Errorf("lab: --config %s has no enabled queue section: set option enabled '1' in the one to try", path)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
