package lab

import (
	"context"
	"time"

	"sqm/internal/config"
)

// rig is a built lab: the namespaces with the modem emulated and the
// test server listening. Run and Tune measure on it differently but must
// build and tear it down the same way, so that a Tune result and a Run
// result describe the same emulated link.
type rig struct {
	t    *topology
	srv  *server
	q    *config.Queue // the shaping o.Shaping resolves to on this link
	src  string        // where q came from (ShapingReport.Source)
	link LinkReport
}

// shape applies the rig's shaping to the WAN veth and describes it for the
// report; Run and the trace run shape the same way, so their reports
// compare. The function returned removes the shaping.
func (r *rig) shape(o *Options) (ShapingReport, func() error, error) {
	q := r.q
	o.progress("shaping %s with sqm: %s/%s, %d kbit/s down, %d kbit/s up", wanDev, q.Script, q.Qdisc, q.Download, q.Upload)
	p, undo, err := r.t.shape(q)
	if err != nil {
		return ShapingReport{}, nil, err
	}
	return ShapingReport{Interface: wanDev, Script: q.Script, Qdisc: q.Qdisc,
		DownloadKbit: q.Download, UploadKbit: q.Upload, LinkLayer: q.LinkLayer, Overhead: q.Overhead,
		Source: r.src, Plan: p}, undo, nil
}

// setup fills o's defaults in place and builds the rig. Everything that
// can be refused from the options alone (the link, the shaping, a kernel
// without the modules) is refused before a namespace exists; if a later
// step fails, what was built is removed again. The caller owns the rig
// and must call teardown.
func setup(ctx context.Context, o *Options) (r *rig, err error) {
	link, err := o.Link.Resolve()
	if err != nil {
		return nil, err
	}
	o.Link = link
	if o.Idle == 0 {
		o.Idle = 3 * time.Second
	}
	q, src, err := o.Shaping.queue(link, wanDev)
	if err != nil {
		return nil, err
	}
	if err := checkKernel(q.Qdisc, o.traces != nil); err != nil {
		return nil, err
	}

	o.progress("building namespaces client, router, isp, server")
	t, err := newTopology(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			o.progress("removing namespaces")
			t.Close() // the build error is the one worth reporting
		}
	}()
	down, up := link.Modems()
	o.progress("emulating the modem: %s down / %s up, %v delay each way, %d-packet FIFO, %s framing",
		FormatRate(link.DownBits), FormatRate(link.UpBits), down.Delay, link.Buffer, link.LinkLayer)
	if o.traces != nil {
		err = t.traceModems(o.traces, down, up)
	} else {
		err = t.modem(down, up)
	}
	if err != nil {
		return nil, err
	}
	ecn, err := t.setECN(o.ECN)
	if err != nil {
		return nil, err
	}
	srv, err := t.startServer(ctx)
	if err != nil {
		return nil, err
	}

	r = &rig{t: t, srv: srv, q: q, src: src,
		link: LinkReport{Link: link, TCPECN: ecn, RTTMs: float64(link.RTT) / 1e6, Namespaces: t.names(), nsIDs: t.ids()}}
	eff := link.Efficiency()
	r.link.MaxGoodputDownMbps = float64(link.DownBits) * eff / 1e6
	r.link.MaxGoodputUpMbps = float64(link.UpBits) * eff / 1e6
	return r, nil
}

// teardown stops the server and removes the namespaces (with them the
// veths, IFBs and qdiscs inside). Its error is the removal's: a lab that
// leaves namespaces behind must not report success.
func (r *rig) teardown(o *Options) error {
	r.srv.stop()
	o.progress("removing namespaces")
	return r.t.Close()
}
