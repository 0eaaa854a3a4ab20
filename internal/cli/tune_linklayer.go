//go:build linux && !sqm_notest

package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"sqm/internal/json"
	"sqm/internal/linklayer"
)

// linkLayerOpts are the flags of `sqm tune --linklayer`.
type linkLayerOpts struct {
	sizes    string
	repeat   int
	interval time.Duration
}

// linkLayerReport is what `sqm tune --linklayer --json` prints.
type linkLayerReport struct {
	Target      string                 `json:"target"`
	Sent        int                    `json:"sent"`
	Answered    int                    `json:"answered"`
	Seconds     float64                `json:"seconds"`
	Result      linklayer.Result       `json:"result"`
	Interface   *linklayer.Iface       `json:"interface,omitempty"`
	Suggestions []linklayer.Suggestion `json:"suggestions"`
}

// runLinkLayer probes HOST with echoes of many sizes on the idle line and
// prints the link-layer verdict. The shaping is left alone: the probes
// are small and paced, so a shaper set near the line rate does not queue
// them, and a shaper's own accounting is not what is being measured.
func runLinkLayer(ctx context.Context, env *Env, fs *flag.FlagSet, o linkLayerOpts, section, host string, jsonOut, quiet, v4, v6 bool) error {
	po, err := o.probe()
	if err != nil {
		return err
	}
	// The interface, for the cake keywords: the section's, if the config
	// names one; without a config the verdict stands alone.
	var ifc *linklayer.Iface
	configSet := false
	fs.Visit(func(f *flag.Flag) { configSet = configSet || f.Name == "config" })
	f, cerr := loadConfig(env, flagString(fs, "config"))
	if cerr != nil && (section != "" || configSet) {
		return cerr
	}
	if cerr == nil {
		q, err := tuneSection(f.Queues, section)
		if err != nil && section != "" {
			return err
		}
		if err == nil {
			i, err := linklayer.ReadIface("/", q.Interface)
			if err != nil {
				fmt.Fprintf(env.Stderr, "sqm tune: %v (suggestions without it)\n", err)
			} else {
				ifc = &i
			}
		}
	}
	if po.Target, err = probeTarget(ctx, host, v4, v6); err != nil {
		return err
	}
	start := time.Now()
	samples, res, err := probeLinkLayer(ctx, env, po, quiet)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted: %w", err)
		}
		return err
	}
	total := len(po.Sizes) * po.Repeat
	rep := linkLayerReport{Target: po.Target.String(), Sent: total, Answered: len(samples),
		Seconds: time.Since(start).Seconds(), Result: res, Interface: ifc}
	var i linklayer.Iface
	if ifc != nil {
		i = *ifc
	}
	rep.Suggestions = linklayer.Suggest(res, i)
	if jsonOut {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return writeLinkLayer(env.Stdout, rep)
}

// probe checks the flags and turns them into what linklayer.Probe sends
// (the target is filled in later).
func (o linkLayerOpts) probe() (linklayer.ProbeOptions, error) {
	sizes, err := linklayer.ParseSizes(o.sizes)
	if err != nil {
		return linklayer.ProbeOptions{}, usageError("--%v", err)
	}
	if o.repeat < 1 || o.repeat > 1000 {
		return linklayer.ProbeOptions{}, usageError("--repeat %d outside 1..1000", o.repeat)
	}
	if o.interval < time.Millisecond || o.interval > time.Second {
		return linklayer.ProbeOptions{}, usageError("--interval %v outside 1ms..1s", o.interval)
	}
	return linklayer.ProbeOptions{Sizes: sizes, Repeat: o.repeat, Interval: o.interval}, nil
}

// probeTarget resolves the host the echoes go to (a :port is dropped).
func probeTarget(ctx context.Context, host string, v4, v6 bool) (netip.Addr, error) {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	network := "ip"
	if v4 {
		network = "ip4"
	} else if v6 {
		network = "ip6"
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, network, host)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("tune: resolve %q for the link-layer echoes: %v", host, err)
	}
	return addrs[0].Unmap(), nil
}

// probeLinkLayer sends the echoes po describes, with progress on stderr
// unless quiet, and judges them.
func probeLinkLayer(ctx context.Context, env *Env, po linklayer.ProbeOptions, quiet bool) ([]linklayer.Sample, linklayer.Result, error) {
	total := len(po.Sizes) * po.Repeat
	if !quiet {
		fmt.Fprintf(env.Stderr, "sqm tune: %d echoes (%d sizes %d..%d bytes x %d) to %s, one every %v: about %v; keep the line idle\n",
			total, len(po.Sizes), po.Sizes[0], po.Sizes[len(po.Sizes)-1], po.Repeat, po.Target, po.Interval, (time.Duration(total) * po.Interval).Round(time.Second))
		step := max(total/10, 1)
		po.Progress = func(sent, total int) {
			if sent%step == 0 {
				fmt.Fprintf(env.Stderr, "sqm tune: %d/%d sent\n", sent, total)
			}
		}
	}
	samples, err := linklayer.Probe(ctx, po)
	if err != nil {
		return samples, linklayer.Result{}, err
	}
	res, err := linklayer.Detect(samples, linklayer.Options{})
	if err != nil {
		return samples, res, fmt.Errorf("tune: link layer: %d of %d echoes answered by %s: %w", len(samples), total, po.Target, err)
	}
	return samples, res, nil
}

func writeLinkLayer(w io.Writer, r linkLayerReport) error {
	res := r.Result
	sure := "not sure"
	if res.Sure {
		sure = "sure"
	}
	fmt.Fprintf(w, "link layer: %s (%s)\n", res.LinkLayer, sure)
	switch res.LinkLayer {
	case linklayer.ATM:
		fmt.Fprintf(w, "overhead:   %d bytes per packet (the steps show it modulo 48: %d would fit the same; ±%d)\n", res.Overhead, res.Alternative, res.OverheadSpread)
		fmt.Fprintf(w, "per cell:   %.1f µs round trip, %s both directions together (1/(1/down + 1/up))\n", res.StepUs, fmtRate(res.RateBits))
	case linklayer.Ethernet:
		fmt.Fprintf(w, "overhead:   not measurable from idle delays on a non-ATM line; set it from the framing below\n")
		fmt.Fprintf(w, "per byte:   %.4f µs round trip, %s both directions together (1/(1/down + 1/up))\n", res.ByteUs, fmtRate(res.RateBits))
	}
	fmt.Fprintf(w, "noise:      %.1f µs after the %d-sample percentile per size; %d of %d echoes answered from %s in %.0f s\n",
		res.NoiseUs, r.Sent/max(len(res.Points), 1), r.Answered, r.Sent, r.Target, r.Seconds)
	fmt.Fprintf(w, "why:        %s\n", res.Reason)
	name := "the interface"
	if r.Interface != nil {
		name = r.Interface.Name
	}
	if len(r.Suggestions) > 0 {
		fmt.Fprintf(w, "\ncake options for %s:\n", name)
		for _, s := range r.Suggestions {
			fmt.Fprintf(w, "  %-32s %s\n", s.Cake, s.When)
		}
	}
	return nil
}

func fmtRate(bits float64) string {
	if bits <= 0 {
		return "rate unknown"
	}
	return fmt.Sprintf("%.0f kbit/s", bits/1000)
}
