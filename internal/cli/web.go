//go:build linux && !sqm_noweb

package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"sqm/internal/config"
	"sqm/internal/features"
	"sqm/internal/kernel"
	"sqm/internal/metrics"
	"sqm/internal/metrics/metricshttp"
	"sqm/internal/service"
	"sqm/internal/web"
)

// webFlags are the daemon's page flags; daemonOptions maps the config's
// `config sqm 'daemon'` options to them.
func webFlags(fs *flag.FlagSet) {
	fs.String("http", "", "serve the web page on ADDR (PORT or :PORT: loopback; HOST:PORT: a LAN address, never the WAN's)")
	fs.String("http-users", "/etc/sqm/web-users", "file with the page's logins (ROLE HASH lines; make them with sqm passwd)")
	fs.String("test-server", "", "the 'sqm server' the page's bufferbloat test uses by default (host[:port])")
}

// webQueue is one device on the page: the status document's entry plus
// what the kernel and the daemon say about it beyond the tree.
type webPage struct {
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

// startWeb listens on --http (after refusing WAN addresses) and serves the
// page until ctx ends. The daemon's loop applies changes through reqs.
func startWeb(ctx context.Context, fs *flag.FlagSet, d *service.Daemon, reqs chan<- service.Request, log *slog.Logger) error {
	addr, err := web.ResolveListen(flagString(fs, "http"))
	if err != nil {
		return usageError("--http: %v", err)
	}
	qs, err := config.LoadQueues(d.ConfigPath)
	if err != nil {
		return err
	}
	var wan []string
	for _, q := range qs {
		wan = append(wan, q.Interface)
	}
	if err := web.CheckListen(addr, wan, ifaceAddrs); err != nil {
		return usageError("--http: %v", err)
	}
	users, err := web.LoadUsers(flagString(fs, "http-users"))
	if err != nil {
		return fmt.Errorf("--http-users: %w (make a login with: sqm passwd --users FILE)", err)
	}
	conn, err := kernel.Open()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		conn.Close()
		return fmt.Errorf("--http: %w", err)
	}
	var connMu sync.Mutex
	srv := &web.Server{
		ConfigPath: d.ConfigPath,
		Users:      users,
		TestServer: flagString(fs, "test-server"),
		Log:        log,
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
		Qdiscs: availableQdiscs,
		Metrics: metricshttp.Handler(&metrics.KernelSource{
			Store: d.Svc.Store, Kernel: lockedStatus{conn, &connMu}, Build: metrics.DefaultBuild(Version),
		}),
	}
	log.Info("web page listening", "addr", ln.Addr().String())
	go func() {
		defer conn.Close()
		if err := srv.Serve(ctx, ln); err != nil {
			log.Error("web page stopped", "err", err)
		}
	}()
	return nil
}

func webStatus(conn *kernel.Conn, d *service.Daemon) (*webPage, error) {
	states, serr := d.Svc.Store.All()
	rep := statusReport(conn, states, nil, time.Now())
	page := &webPage{statusDoc: statusJSON(rep, d.Svc.Store.Dir), Links: map[string]webLink{}, Last: map[string]string{}}
	for _, dev := range page.Devices {
		l := webLink{}
		if ifi, err := net.InterfaceByName(dev.Device); err == nil {
			l = webLink{Exists: true, Up: ifi.Flags&net.FlagUp != 0, Running: ifi.Flags&net.FlagRunning != 0}
		}
		page.Links[dev.Device] = l
	}
	last, lerr, at := d.Last()
	for k, o := range last {
		page.Last[k] = o.String()
	}
	if lerr != nil {
		page.LastError = lerr.Error()
	}
	page.LastAt = at.UTC()
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
// use it can create, as sqm-scripts' available_qdiscs directory does.
func availableQdiscs() []string {
	var out []string
	for _, q := range []string{"cake", "fq_codel", "codel", "pie", "fq_pie", "sfq", "pfifo", "bfifo"} {
		if err := features.Qdisc(q); err == nil || !errors.Is(err, features.ErrNotAvailable) {
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
