//go:build linux && !sqm_noweb

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/features"
	"sqm/internal/kernel"
	"sqm/internal/logger"
	"sqm/internal/metrics"
	"sqm/internal/metrics/metricshttp"
	"sqm/internal/netlink"
	"sqm/internal/plan"
	"sqm/internal/rtlink"
	"sqm/internal/service"
	"sqm/internal/stats"
	"sqm/internal/web"
)

// webFlags are the daemon's page flags; daemonOptions maps the config's
// `config sqm 'daemon'` options to them.
func webFlags(fs *flag.FlagSet) {
	fs.String("http", "", "serve the web page on ADDR (PORT or :PORT: loopback; HOST:PORT: a LAN address, never the WAN's)")
	fs.String("http-users", "/etc/sqm/web-users", "file with the page's logins (ROLE HASH lines; make them with sqm passwd)")
	fs.String("test-server", "", "the 'sqm server' the page's bufferbloat test uses by default (host[:port])")
	fs.String("http-cert", "", "serve the page over HTTPS with this certificate `file` (PEM or DER; with --http-key; e.g. uhttpd's /etc/uhttpd.crt)")
	fs.String("http-key", "", "the certificate's private key `file` (PEM or DER; e.g. /etc/uhttpd.key)")
	fs.String("http-hosts", "", "more `names` the page answers to (comma or space separated), beyond its addresses, localhost and the host name; others get 421 (DNS rebinding)")
}

// webStatusDoc is the page's status: `sqm status --json`'s document plus
// what the kernel and the daemon say about each device beyond the tree.
type webStatusDoc struct {
	statusDoc
	// Links says, per device, whether it exists and is up (IFF_UP) and
	// running (carrier).
	Links map[string]webLink `json:"links"`
	// Last is the daemon's latest outcome per interface.
	Last      map[string]string `json:"last"`
	LastError string            `json:"last_error,omitempty"`
	LastAt    time.Time         `json:"last_at,omitempty"`
}

type webLink struct {
	Exists  bool `json:"exists"`
	Up      bool `json:"up"`
	Running bool `json:"running"`
}

// webPage is the page, checked and listening, waiting for the daemon.
type webPage struct {
	env   *Env
	fs    *flag.FlagSet
	cfg   string
	users *web.Users
	ln    net.Listener
	tls   *web.TLSConfig
	hosts []string
	// wanPeer refuses clients on the shaped interfaces' side.
	wanPeer func(netip.Addr) string
	conn    *kernel.Conn
	// tuning is set while a tune from the page holds the state lock.
	tuning atomic.Bool
}

// prepareWeb checks --http (refusing the wildcard and the shaped
// interfaces' addresses), loads the logins and binds the port, so that a
// mistake stops the daemon before it changes anything. nil without --http.
func prepareWeb(env *Env, fs *flag.FlagSet, cfgPath string) (*webPage, error) {
	if flagString(fs, "http") == "" {
		return nil, nil
	}
	addr, err := web.ResolveListen(flagString(fs, "http"))
	if err != nil {
		return nil, usageError("--http: %v", err)
	}
	var wan []string
	// A refused section still names a shaped interface (the daemon
	// keeps its tree): the page must not listen there either.
	if f, _ := config.Load(cfgPath); f != nil {
		for _, q := range f.Queues {
			wan = append(wan, q.Interface)
		}
		for _, r := range f.Refused {
			if r.Interface != "" {
				wan = append(wan, r.Interface)
			}
		}
	} // a config that does not load is the daemon's own error to report
	if err := web.CheckListen(addr, wan, ifaceAddrs); err != nil {
		return nil, usageError("--http: %v", err)
	}
	wanPeer := wanPeerCheck(wan, routeDev)
	users, err := web.LoadUsers(flagString(fs, "http-users"))
	if err != nil {
		return nil, fmt.Errorf("--http-users: %w (make a login with: sqm passwd --users FILE)", err)
	}
	certFile, keyFile := flagString(fs, "http-cert"), flagString(fs, "http-key")
	var tlsConf *web.TLSConfig
	switch {
	case (certFile == "") != (keyFile == ""):
		return nil, usageError("--http-cert and --http-key go together")
	case certFile != "":
		// In a build with -tags sqm_notls this says the build has no
		// TLS and why.
		if tlsConf, err = web.LoadTLS(certFile, keyFile); err != nil {
			return nil, fmt.Errorf("--http-cert/--http-key: %w", err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	hosts, err := httpHosts(flagString(fs, "http-hosts"))
	if err != nil {
		ln.Close()
		return nil, usageError("--http-hosts: %v", err)
	}
	// With tls the page is HTTPS only and its session cookie Secure
	// (web.Server sets it when the request came over TLS).
	return &webPage{env: env, fs: fs, cfg: cfgPath, users: users, ln: ln, tls: tlsConf, hosts: hosts, wanPeer: wanPeer}, nil
}

// wanPeerCheck is the page's web.Server.WANPeer: the shaped interface
// among wan through which the route to a client goes, or "". routeDev
// says which device the kernel would send to an address; when it cannot
// tell, the client is let in (the listen checks still hold).
func wanPeerCheck(wan []string, routeDev func(netip.Addr) (string, error)) func(netip.Addr) string {
	shaped := map[string]bool{}
	for _, w := range wan {
		shaped[w] = true
	}
	return func(a netip.Addr) string {
		if a.IsLoopback() || len(shaped) == 0 {
			return ""
		}
		dev, err := routeDev(a)
		if err != nil || !shaped[dev] {
			return ""
		}
		return dev
	}
}

// routeDev asks the kernel for its route to a (RTM_GETROUTE, as `ip route
// get` does) and names the route's device.
func routeDev(a netip.Addr) (string, error) {
	c, err := netlink.Dial(netlink.Config{})
	if err != nil {
		return "", err
	}
	defer c.Close()
	idx, err := rtlink.RouteOut(c, a.AsSlice())
	if err != nil {
		return "", fmt.Errorf("route to %s: %w", a, err)
	}
	l, err := rtlink.ByIndex(c, idx)
	if err != nil {
		return "", err
	}
	return l.Name, nil
}

// httpHosts splits --http-hosts into names; an address or a name with a
// port is refused (the router's addresses are served anyway, and the
// port does not matter).
func httpHosts(v string) ([]string, error) {
	var out []string
	for _, n := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }) {
		if _, err := netip.ParseAddr(strings.Trim(n, "[]")); err == nil {
			return nil, fmt.Errorf("%q is an address; the router's own addresses are served without naming them", n)
		}
		for _, r := range n {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.') {
				return nil, fmt.Errorf("%q: a host name has letters, digits, '-' and '.' only (no port)", n)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// close releases the port if start never ran, and waits (a while) for a
// tune from the page to put the shaping from before back: the daemon is
// exiting, and the process must not end with the interface shaped at
// whatever rate the tune was measuring.
func (p *webPage) close() {
	if p.conn == nil {
		p.ln.Close()
	}
	for end := time.Now().Add(30 * time.Second); p.tuning.Load() && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
}

// start serves the page until ctx ends. The daemon's loop applies the
// page's changes through reqs. A page that cannot read the kernel is
// logged; the shaping goes on without it.
func (p *webPage) start(ctx context.Context, d *service.Daemon, reqs chan<- service.Request, log *logger.Logger) {
	conn, err := kernel.Open()
	if err != nil {
		log.Error("web page not started", "err", err)
		return
	}
	p.conn = conn
	var connMu sync.Mutex
	srv := &web.Server{
		ConfigPath: d.ConfigPath,
		Users:      p.users,
		TestServer: flagString(p.fs, "test-server"),
		Log:        log,
		TLS:        p.tls,
		Hosts:      p.hosts,
		WANPeer:    p.wanPeer,
		Status: func(ctx context.Context) (any, error) {
			connMu.Lock()
			defer connMu.Unlock()
			return webStatus(conn, d)
		},
		Apply: func(ctx context.Context) ([]string, error) {
			done := make(chan service.RequestResult, 1)
			select {
			case reqs <- service.Request{Why: "web page", Done: done}:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			// The daemon answers every request it takes; waiting past
			// the client's departure keeps the rollback decision ours.
			res := <-done
			var outs []string
			for _, o := range res.Outcomes {
				outs = append(outs, o.String())
			}
			return outs, res.Err
		},
		Qdiscs: func() []string { return availableQdiscs(features.Qdisc) },
	}
	srv.Tune = webTune(p.env, d.ConfigPath, d.Svc.Store.Dir, &p.tuning, func() error {
		_, err := srv.Apply(ctx)
		return err
	})
	if srv.Tune != nil {
		d.Lock = lockAroundTune(ctx, d.Lock, &p.tuning)
	}
	srv.Metrics = metricshttp.Handler(&metrics.KernelSource{
		Store: d.Svc.Store, Kernel: lockedStatus{conn, &connMu}, Build: metrics.DefaultBuild(Version),
		LastTest: func() *metrics.TestResult { return testMetric(srv.LastResult()) },
	})
	scheme := "http"
	if flagString(p.fs, "http-cert") != "" {
		scheme = "https"
	}
	log.Info("web page listening", "addr", p.ln.Addr().String(), "scheme", scheme)
	go func() {
		defer conn.Close()
		if err := srv.Serve(ctx, p.ln); err != nil {
			log.Error("web page stopped", "err", err)
		}
	}()
}

var errPageTune = fmt.Errorf("%w: a tune from the web page holds the shaping until it ends; the daemon reloads the config then", service.ErrDeferred)

// lockAroundTune is the daemon's lock while the page may tune. A tune
// holds the state lock for minutes; the daemon's operations (the drift
// check, a reload, a link event) would each wait lockWait for it and be
// skipped, the loop stalled meanwhile. They are skipped at once instead,
// saying why, and the reload after the tune (webTune's reapply) does what
// they would have. Once ctx ends the daemon is stopping and the tune is
// being cancelled: then lock waits as always, so the stop-on-exit comes
// after the tune's restore rather than being skipped.
func lockAroundTune(ctx context.Context, lock func() (func(), error), tuning *atomic.Bool) func() (func(), error) {
	return func() (func(), error) {
		if tuning.Load() && ctx.Err() == nil {
			return nil, errPageTune
		}
		return lock()
	}
}

func webStatus(conn statusKernel, d *service.Daemon) (*webStatusDoc, error) {
	states, serr := d.Svc.Store.All()
	intr, ierr := d.Svc.Store.Interrupted()
	serr = errors.Join(serr, ierr)
	rep := statusReport(conn, states, intr, nil, time.Now(), d.Svc.Store)
	refused, rerr := d.Svc.Store.Refused()
	rep.withRefused(refused, nil)
	serr = errors.Join(serr, rerr)
	page := &webStatusDoc{statusDoc: statusJSON(rep, d.Svc.Store.Dir), Links: map[string]webLink{}, Last: map[string]string{}}
	for _, dev := range page.Devices {
		l := webLink{}
		if ifi, err := net.InterfaceByName(dev.Device); err == nil {
			l = webLink{Exists: true, Up: ifi.Flags&net.FlagUp != 0, Running: ifi.Flags&net.FlagRunning != 0}
		}
		page.Links[dev.Device] = l
	}
	last := d.Last()
	for k, o := range last.Outcomes {
		page.Last[k] = o.String()
	}
	if last.Err != nil {
		page.LastError = last.Err.Error()
	}
	page.LastAt = last.At.UTC()
	return page, serr
}

func ifaceAddrs(name string) ([]netip.Addr, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

// availableQdiscs asks the kernel which of the leaf qdiscs sqm's recipes
// use it can create, as sqm-scripts' available_qdiscs directory does. The
// list is the planner's (plan.LeafQdiscs, as LuCI's is), so the form never
// offers a qdisc Build refuses nor misses one it gains. probe returns
// features.ErrNotAvailable for a missing qdisc; any other error means "could
// not tell", and the qdisc is offered rather than hidden.
func availableQdiscs(probe func(kind string) error) []string {
	var out []string
	for _, q := range plan.LeafQdiscs {
		if err := probe(q); err == nil || !errors.Is(err, features.ErrNotAvailable) {
			out = append(out, q)
		}
	}
	return out
}

// lockedStatus shares the page's kernel connection with /metrics: a
// netlink socket carries one request at a time.
type lockedStatus struct {
	conn *kernel.Conn
	mu   *sync.Mutex
}

func (l lockedStatus) Status(devices ...string) ([]kernel.DeviceStatus, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conn.Status(devices...)
}

// testMetric is the headline of a page-run test in the metrics' base units.
func testMetric(r *bloat.Result) *metrics.TestResult {
	if r == nil {
		return nil
	}
	ms := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
	lat := func(s stats.Summary) metrics.Latency {
		return metrics.Latency{Median: ms(s.MedianMs), P90: ms(s.P90Ms), LossRatio: s.LossPct / 100}
	}
	return &metrics.TestResult{
		Mode: string(r.Mode), Server: r.Server, Grade: r.Grade, RPMBand: r.RPMBand, Start: r.Start,
		DownloadBytesPerSecond: r.DownloadMbps * 1e6 / 8, UploadBytesPerSecond: r.UploadMbps * 1e6 / 8,
		Idle: lat(r.Idle), Loaded: lat(r.Loaded), Induced: ms(r.InducedMs), RPM: r.RPM,
	}
}
