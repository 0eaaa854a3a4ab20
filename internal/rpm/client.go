package rpm

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sqm/internal/stats"
)

// Options says what to measure and how.
type Options struct {
	// URL of the configuration document (see ConfigURL).
	URL string
	// Insecure skips certificate verification (self-signed test servers,
	// `sqm server --rpm` without --cert); RootCAs, if set, are the only
	// trusted roots.
	Insecure bool
	RootCAs  *x509.CertPool
	// Duration bounds the loaded part (the draft leaves the time limit to
	// the tool); default 20 s.
	Duration time.Duration
	// Interval is the draft's ID; default 1 s (see the constants).
	Interval time.Duration
	// Direction is "both" (downloads and uploads at once, like
	// networkQuality's default), "down" or "up".
	Direction string
	// Network is tcp, tcp4 or tcp6.
	Network string
	// IdleProbes is how many foreign probes measure the idle latency
	// before any load (default 10).
	IdleProbes int
	// Secret is an `sqm server`'s shared secret: the client puts its
	// path prefix (PathPrefix) in front of the URL's path. What the
	// result records has the prefix replaced by "/(secret)", so a shared
	// result does not hand out access.
	Secret string
	Logf   func(format string, a ...any)
}

// ResultVersion is the version of the Result JSON layout.
const ResultVersion = 1

// Result is one responsiveness test: what `sqm test --rpm --json` prints.
type Result struct {
	FormatVersion int       `json:"format_version"`
	Kind          string    `json:"kind"` // always "rpm": which server protocol was used
	ConfigURL     string    `json:"config_url"`
	Config        Config    `json:"config"`
	Protocol      string    `json:"protocol"` // e.g. "HTTP/2, TLS 1.3"
	Server        string    `json:"server"`   // address connected to
	Direction     string    `json:"direction"`
	Start         time.Time `json:"start"`
	DNSMs         float64   `json:"dns_ms"` // one lookup of the host; not part of RPM (the draft leaves it out)
	// The loaded part, in seconds since Start.
	LoadStartS float64 `json:"load_start_s"`
	LoadEndS   float64 `json:"load_end_s"`
	IntervalS  float64 `json:"interval_s"`

	// Idle holds the foreign probes made before any load; Loaded the
	// probes completed in the last MAD intervals of the loaded part, the
	// window the draft computes the result over.
	Idle   Aggregate `json:"idle"`
	Loaded Aggregate `json:"loaded"`
	// Headline numbers, named like `sqm test`'s: RPM under load, its band,
	// the round-trip time it stands for (60000/RPM), the idle one, their
	// difference and its DSLReports grade.
	RPM          float64 `json:"rpm"`
	RPMBand      string  `json:"rpm_band"`
	IdleRPM      float64 `json:"idle_rpm"`
	IdleRTTMs    float64 `json:"idle_rtt_ms"`
	LoadedRTTMs  float64 `json:"loaded_rtt_ms"`
	InducedMs    float64 `json:"induced_ms"`
	Grade        string  `json:"grade"`
	DownloadMbps float64 `json:"download_mbps"` // moving average over the last MAD intervals
	UploadMbps   float64 `json:"upload_mbps"`
	// Confidence is the draft's: High when the measure became stable,
	// Medium when MAD intervals ran without stability, Low otherwise.
	GoodputConfidence        string `json:"goodput_confidence"`
	ResponsivenessConfidence string `json:"responsiveness_confidence"`
	// Summaries of all loaded probes' raw round trips (ms), for the
	// spread the trimmed means hide.
	LoadedForeign stats.Summary `json:"loaded_foreign_http"`
	LoadedSelf    stats.Summary `json:"loaded_self_http"`
	Intervals     []Interval    `json:"intervals"`
	Probes        []Probe       `json:"probes"`
	Notes         []string      `json:"notes,omitempty"`
}

// Interval is one ID of the loaded part.
type Interval struct {
	EndS         float64 `json:"end_s"`
	DownloadMbps float64 `json:"download_mbps"`
	UploadMbps   float64 `json:"upload_mbps"`
	DownConns    int     `json:"down_conns"`
	UpConns      int     `json:"up_conns"`
	RPM          float64 `json:"rpm,omitempty"` // over the last MAD intervals' probes
	Saturated    bool    `json:"goodput_saturated"`
}

// Probe is one probe. Kind is foreign (new connection) or self (on a
// load-generating connection); Phase is idle or loaded.
type Probe struct {
	Kind   string  `json:"kind"`
	Phase  string  `json:"phase"`
	Load   string  `json:"load,omitempty"` // self probes: the direction of the connection's load
	StartS float64 `json:"start_s"`
	EndS   float64 `json:"end_s"`
	TCPMs  float64 `json:"tcp_ms,omitempty"`
	TLSMs  float64 `json:"tls_ms,omitempty"` // per TLS round trip
	HTTPMs float64 `json:"http_ms,omitempty"`
	// WaitMs is the part of HTTPMs the request spent in this client
	// before its headers were written: on an upload connection Go's HTTP/2
	// transport holds a new request while it writes the body's frames
	// into a socket that is full. It counts, since the draft times a self
	// probe from when it is issued, but it is the client's own share.
	WaitMs float64 `json:"wait_ms,omitempty"`
	Err    string  `json:"error,omitempty"`
}

const probeTimeout = 10 * time.Second

type client struct {
	o      Options
	cfg    *Config
	large  *url.URL
	small  *url.URL
	upload *url.URL
	scheme string
	addr   string // host:port to dial
	tr     *http.Transport
	start  time.Time
	useTLS bool

	mu     sync.Mutex
	probes []Probe
	proto  string
}

// Run measures responsiveness. It fails on a bad configuration document,
// a server that does not speak HTTP/2, or a test whose load could not run;
// single failed probes are recorded, not fatal.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Duration == 0 {
		o.Duration = 20 * time.Second
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Direction == "" {
		o.Direction = "both"
	}
	if o.Network == "" {
		o.Network = "tcp"
	}
	if o.IdleProbes == 0 {
		o.IdleProbes = 10
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	switch o.Direction {
	case "both", "down", "up":
	default:
		return nil, fmt.Errorf("direction %q: use both, down or up", o.Direction)
	}
	if o.Duration < time.Duration(2*MAD)*o.Interval {
		return nil, fmt.Errorf("duration %v is shorter than %d intervals of %v; the draft's moving averages need that much", o.Duration, 2*MAD, o.Interval)
	}
	c := &client{o: o}
	tlsCfg := &tls.Config{InsecureSkipVerify: o.Insecure, RootCAs: o.RootCAs, NextProtos: []string{"h2"}}
	c.tr = &http.Transport{
		TLSClientConfig:       tlsCfg,
		DisableCompression:    true,
		ResponseHeaderTimeout: probeTimeout,
		Protocols:             new(http.Protocols),
	}
	c.tr.Protocols.SetHTTP2(true)
	c.tr.Protocols.SetUnencryptedHTTP2(true)
	res := &Result{FormatVersion: ResultVersion, Kind: "rpm", ConfigURL: o.URL, Direction: o.Direction,
		IntervalS: o.Interval.Seconds()}
	if o.Secret != "" {
		u, err := WithPrefix(o.URL, PathPrefix(o.Secret))
		if err != nil {
			return nil, err
		}
		c.o.URL = u
	}
	if err := c.fetchConfig(ctx); err != nil {
		return nil, err
	}
	res.ConfigURL = redact(c.o.URL, o.Secret)
	res.Config = *c.cfg
	for _, u := range []*string{&res.Config.Large, &res.Config.Small, &res.Config.Upload} {
		*u = redact(*u, o.Secret)
	}
	if c.cfg.OldKeys {
		res.Notes = append(res.Notes, "the configuration uses the older URL key names (small_https_download_url, ...)")
	}
	host := c.small.Hostname()
	if c.cfg.Endpoint != "" {
		host = c.cfg.Endpoint
	}
	port := c.small.Port()
	if port == "" {
		port = map[string]string{"https": "443", "http": "80"}[c.scheme]
	}
	t0 := time.Now()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, map[string]string{"tcp": "ip", "tcp4": "ip4", "tcp6": "ip6"}[o.Network], host)
	if err != nil {
		return nil, fmt.Errorf("rpm: resolving %s: %w", host, err)
	}
	res.DNSMs = ms(time.Since(t0))
	c.addr = net.JoinHostPort(ips[0].Unmap().String(), port)
	res.Server = c.addr
	// Everything after the lookup dials the address found, so DNS time
	// stays out of the TCP handshakes, as the draft wants.
	dialer := &net.Dialer{Timeout: probeTimeout, Control: lowatControl}
	c.tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		t := time.Now()
		conn, err := dialer.DialContext(ctx, o.Network, c.addr)
		if pt, ok := ctx.Value(timesKey{}).(*connTimes); ok {
			pt.tcp, pt.conn = time.Since(t), conn
		}
		return conn, err
	}
	c.tr.DialTLSContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		conn, err := c.tr.DialContext(ctx, "", "")
		if err != nil {
			return nil, err
		}
		cfg := tlsCfg.Clone()
		cfg.ServerName = c.small.Hostname()
		tc := tls.Client(conn, cfg)
		t := time.Now()
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", c.addr, err)
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol != "h2" {
			tc.Close()
			return nil, fmt.Errorf("%s did not offer HTTP/2 over TLS (ALPN h2; it chose %q); the draft requires HTTP/2", c.addr, st.NegotiatedProtocol)
		}
		if pt, ok := ctx.Value(timesKey{}).(*connTimes); ok {
			pt.tls = time.Since(t)
			// TLS 1.3 needs one round trip before the client can send,
			// 1.2 two; the draft normalises to one.
			if st.Version < tls.VersionTLS13 {
				pt.tls /= 2
			}
			c.mu.Lock()
			c.proto = "HTTP/2, " + tls.VersionName(st.Version)
			c.mu.Unlock()
		}
		return tc, nil
	}
	if !c.useTLS {
		c.proto = "HTTP/2 without TLS (h2c)"
	}
	c.start = time.Now()
	res.Start = c.start

	// Idle latency: foreign probes one after another on an idle path.
	o.Logf("idle latency: %d probes to %s", o.IdleProbes, c.addr)
	var idle probeSet
	for i := 0; i < o.IdleProbes; i++ {
		p := c.foreign(ctx, "idle")
		if p.Err == "" {
			idle.add(p)
		} else if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	if len(idle.httpF) == 0 {
		return nil, fmt.Errorf("rpm: no idle probe to %s succeeded: %s", c.addr, c.firstErr())
	}
	res.Idle = aggregate(idle, c.useTLS)
	res.Protocol = c.proto

	if err := c.loaded(ctx, res); err != nil {
		return nil, err
	}
	c.mu.Lock()
	res.Probes = append([]Probe(nil), c.probes...)
	c.mu.Unlock()
	var f, s []float64
	for _, p := range res.Probes {
		if p.Phase != "loaded" || p.Err != "" {
			continue
		}
		if p.Kind == "foreign" {
			f = append(f, p.HTTPMs)
		} else {
			s = append(s, p.HTTPMs)
		}
	}
	res.LoadedForeign = stats.Summarize(f, len(f))
	res.LoadedSelf = stats.Summarize(s, len(s))
	res.RPM = res.Loaded.RPM
	res.RPMBand = stats.RPMBand(res.RPM)
	res.IdleRPM = res.Idle.RPM
	if res.IdleRPM > 0 {
		res.IdleRTTMs = 60000 / res.IdleRPM
	}
	if res.RPM > 0 {
		res.LoadedRTTMs = 60000 / res.RPM
		res.InducedMs = res.LoadedRTTMs - res.IdleRTTMs
		res.Grade = stats.Grade(res.InducedMs)
	}
	return res, nil
}

func (c *client) firstErr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range c.probes {
		if p.Err != "" {
			return p.Err
		}
	}
	return "no error recorded"
}

func (p *probeSet) add(pr Probe) {
	if pr.Kind == "self" {
		p.httpL = append(p.httpL, pr.HTTPMs)
		return
	}
	p.tcp = append(p.tcp, pr.TCPMs)
	if pr.TLSMs > 0 {
		p.tls = append(p.tls, pr.TLSMs)
	}
	p.httpF = append(p.httpF, pr.HTTPMs)
}

func (c *client) fetchConfig(ctx context.Context) error {
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: c.o.Insecure, RootCAs: c.o.RootCAs},
		ForceAttemptHTTP2: true, DisableCompression: true}, Timeout: 15 * time.Second}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.o.URL, nil)
	if err != nil {
		return fmt.Errorf("rpm: configuration URL %s: %w", c.o.URL, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("rpm: fetching the configuration: %w%s", err, certHint(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		hint := "is it a responsiveness server?"
		if resp.StatusCode == http.StatusNotFound {
			hint += " ('sqm server --rpm' with a secret answers 404 without the right --secret, --secret-file or SQM_SERVER_SECRET)"
		}
		return fmt.Errorf("rpm: %s answered %s; %s", redact(c.o.URL, c.o.Secret), resp.Status, hint)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxConfigSize+1))
	if err != nil {
		return fmt.Errorf("rpm: reading the configuration from %s: %w", c.o.URL, err)
	}
	cfg, err := ParseConfig(body)
	if err != nil {
		return fmt.Errorf("rpm: %s: %w", c.o.URL, err)
	}
	c.cfg = cfg
	c.large, _ = url.Parse(cfg.Large)
	c.small, _ = url.Parse(cfg.Small)
	c.upload, _ = url.Parse(cfg.Upload)
	c.scheme = c.small.Scheme
	c.useTLS = c.scheme == "https"
	return nil
}

func certHint(err error) string {
	var ue x509.UnknownAuthorityError
	var he x509.HostnameError
	if errors.As(err, &ue) || errors.As(err, &he) || strings.Contains(err.Error(), "certificate") {
		return " (a self-signed server, e.g. 'sqm server --rpm' without --rpm-cert, needs --insecure or --ca FILE)"
	}
	return ""
}

type timesKey struct{}

type connTimes struct {
	tcp, tls time.Duration
	conn     net.Conn // the TCP connection, for its kernel counters
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func (c *client) since(t time.Time) float64 { return t.Sub(c.start).Seconds() }

func (c *client) record(p Probe) Probe {
	c.mu.Lock()
	c.probes = append(c.probes, p)
	c.mu.Unlock()
	return p
}

// foreign is a probe on a new connection: TCP handshake, TLS handshake and
// a GET of the small object, each timed on its own.
func (c *client) foreign(ctx context.Context, phase string) Probe {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	ct := &connTimes{}
	t := time.Now()
	p := Probe{Kind: "foreign", Phase: phase, StartS: c.since(t)}
	cc, err := c.tr.NewClientConn(context.WithValue(ctx, timesKey{}, ct), c.scheme, c.addr)
	if err != nil {
		p.Err, p.EndS = err.Error(), c.since(time.Now())
		return c.record(p)
	}
	defer cc.Close()
	p.TCPMs, p.TLSMs = ms(ct.tcp), ms(ct.tls)
	d, w, err := c.get(ctx, cc, c.small)
	p.HTTPMs, p.WaitMs, p.EndS = ms(d), ms(w), c.since(time.Now())
	if err != nil {
		p.Err = err.Error()
	}
	return c.record(p)
}

// get fetches u on cc and reads the whole body, returning the time from
// issuing the request to its last byte, and how much of it the request
// waited in the client before its headers were written.
func (c *client) get(ctx context.Context, cc *http.ClientConn, u *url.URL) (time.Duration, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	t := time.Now()
	var wrote time.Time
	var wmu sync.Mutex
	req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() {
		wmu.Lock()
		wrote = time.Now()
		wmu.Unlock()
	}}))
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	end := time.Now()
	var wait time.Duration
	wmu.Lock()
	if !wrote.IsZero() {
		wait = wrote.Sub(t)
	}
	wmu.Unlock()
	d := end.Sub(t)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	if err == nil && resp.ProtoMajor != 2 {
		err = fmt.Errorf("GET %s: answered in %s, not HTTP/2", u, resp.Proto)
	}
	return d, wait, err
}

// loadConn is one load-generating connection.
type loadConn struct {
	dir   string
	cc    *http.ClientConn
	tcp   net.Conn
	bytes atomic.Int64 // body bytes read (down) or handed to the transport (up)
	dead  atomic.Bool
	err   atomic.Pointer[string]
}

func (c *client) newLoad(ctx context.Context, dir string) (*loadConn, error) {
	ct := &connTimes{}
	cc, err := c.tr.NewClientConn(context.WithValue(ctx, timesKey{}, ct), c.scheme, c.addr)
	if err != nil {
		return nil, err
	}
	lc := &loadConn{dir: dir, cc: cc, tcp: ct.conn}
	go func() {
		defer lc.dead.Store(true)
		for ctx.Err() == nil {
			var err error
			if dir == "down" {
				err = c.download(ctx, lc)
			} else {
				err = c.uploadOnce(ctx, lc)
			}
			if err != nil && ctx.Err() == nil {
				s := err.Error()
				lc.err.Store(&s)
				return
			}
		}
	}()
	return lc, nil
}

func (c *client) download(ctx context.Context, lc *loadConn) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.large.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := lc.cc.RoundTrip(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", c.large, resp.Status)
	}
	buf := make([]byte, 64<<10)
	for {
		n, err := resp.Body.Read(buf)
		lc.bytes.Add(int64(n))
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// count is the goodput counter of a load connection. Downloads count the
// body bytes read. Uploads count what TCP says the server acknowledged
// where the kernel tells (Linux): what the transport took from the body
// includes its buffers and flow-control window, and a server that answers
// before reading (nginx's "return 200") makes the transport take a lot
// that never leaves. The acknowledged count includes TLS and HTTP/2
// framing, about 1 %.
func (lc *loadConn) count() int64 {
	if lc.dir == "up" {
		if n, ok := bytesAcked(lc.tcp); ok {
			return n
		}
	}
	return lc.bytes.Load()
}

// uploadChunk bounds each read of the upload body (see zeros.Read).
const uploadChunk = 4 << 10

// zeros is an endless upload body that counts what the transport took.
type zeros struct{ n *atomic.Int64 }

func (z zeros) Read(p []byte) (int, error) {
	// Small reads make small DATA frames: Go's HTTP/2 client holds the
	// connection's write lock while a frame goes into the socket, so a
	// self probe's request waits for at most one such write.
	if len(p) > uploadChunk {
		p = p[:uploadChunk]
	}
	clear(p)
	z.n.Add(int64(len(p)))
	return len(p), nil
}

func (c *client) uploadOnce(ctx context.Context, lc *loadConn) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.upload.String(), io.NopCloser(zeros{&lc.bytes}))
	if err != nil {
		return err
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/octet-stream")
	t := time.Now()
	resp, err := lc.cc.RoundTrip(req)
	if err != nil {
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: %s", c.upload, resp.Status)
	}
	if time.Since(t) < 10*time.Millisecond {
		// A server that answers before reading would make this loop spin.
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// self is a probe on a load-generating connection: a GET of the small
// object multiplexed with the load.
func (c *client) self(ctx context.Context, lc *loadConn) Probe {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	t := time.Now()
	p := Probe{Kind: "self", Phase: "loaded", Load: lc.dir, StartS: c.since(t)}
	d, w, err := c.get(ctx, lc.cc, c.small)
	p.HTTPMs, p.WaitMs, p.EndS = ms(d), ms(w), c.since(time.Now())
	if err != nil {
		p.Err = err.Error()
	}
	return c.record(p)
}

// loaded runs the draft's algorithm, bounded by o.Duration: add a
// load-generating connection per direction each interval until that
// direction's goodput is stable, probe throughout, and stop when the
// responsiveness is stable or time is up.
func (c *client) loaded(ctx context.Context, res *Result) error {
	o := c.o
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		connsMu sync.Mutex
		conns   []*loadConn
	)
	snapshot := func() []*loadConn {
		connsMu.Lock()
		defer connsMu.Unlock()
		return append([]*loadConn(nil), conns...)
	}
	defer func() {
		for _, lc := range snapshot() {
			lc.cc.Close()
		}
	}()
	dirs := map[string][]string{"both": {"down", "up"}, "down": {"down"}, "up": {"up"}}[o.Direction]
	add := func(dir string) error {
		lc, err := c.newLoad(ctx, dir)
		if err != nil {
			return fmt.Errorf("rpm: opening a load-generating connection: %w", err)
		}
		connsMu.Lock()
		conns = append(conns, lc)
		connsMu.Unlock()
		return nil
	}
	for _, d := range dirs {
		if err := add(d); err != nil {
			return err
		}
	}
	loadStart := time.Now()
	res.LoadStartS = c.since(loadStart)
	lastTick := loadStart
	o.Logf("loaded: %s, up to %v, interval %v", o.Direction, o.Duration, o.Interval)

	// Probes: a foreign and a self probe every pace, each in its own
	// goroutine so a slow one does not hold the others back.
	var pace atomic.Int64
	pace.Store(int64(100 * time.Millisecond))
	var wg sync.WaitGroup
	var inflight atomic.Int32
	probeDone := make(chan struct{})
	go func() {
		defer close(probeDone)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(pace.Load())):
			}
			if inflight.Load() > 400 {
				continue // a stalled path: do not pile up goroutines
			}
			var live []*loadConn
			for _, lc := range snapshot() {
				if !lc.dead.Load() {
					live = append(live, lc)
				}
			}
			wg.Add(2)
			inflight.Add(2)
			go func() { defer wg.Done(); defer inflight.Add(-1); c.foreign(ctx, "loaded") }()
			go func() {
				defer wg.Done()
				defer inflight.Add(-1)
				if len(live) > 0 {
					c.self(ctx, live[rand.IntN(len(live))])
				}
			}()
		}
	}()

	var (
		perDir     = map[string][]float64{} // bytes per interval
		durs       []float64                // each interval's real length (s): ticks can come late on a busy machine
		mavg       = map[string][]float64{} // moving averages, bytes/s
		saturated  = map[string]bool{}
		prevBytes  = map[string]int64{}
		rpmVals    []float64 // after goodput saturation
		everStable bool
		lastAgg    Aggregate
	)
	tick := time.NewTicker(o.Interval)
	defer tick.Stop()
	deadline := time.NewTimer(o.Duration)
	defer deadline.Stop()
	for i := 0; ; i++ {
		timeUp := false
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			timeUp = true
		case <-tick.C:
		}
		now := time.Now()
		dt := now.Sub(lastTick).Seconds()
		lastTick = now
		durs = append(durs, dt)
		iv := Interval{EndS: c.since(now)}
		var total float64
		for _, d := range dirs {
			var b int64
			n := 0
			for _, lc := range snapshot() {
				if lc.dir == d {
					b += lc.count()
					n++
					if e := lc.err.Load(); e != nil {
						return fmt.Errorf("rpm: a %s load connection failed: %s", d, *e)
					}
				}
			}
			delta := float64(b - prevBytes[d])
			prevBytes[d] = b
			perDir[d] = append(perDir[d], delta)
			total += delta / dt
			mbps := delta * 8 / dt / 1e6
			if d == "down" {
				iv.DownloadMbps, iv.DownConns = mbps, n
			} else {
				iv.UploadMbps, iv.UpConns = mbps, n
			}
			if k := len(perDir[d]); k >= MAD {
				var sum, secs float64
				for j := k - MAD; j < k; j++ {
					sum += perDir[d][j]
					secs += durs[j]
				}
				mavg[d] = append(mavg[d], sum/secs)
				if !saturated[d] && stable(mavg[d]) {
					saturated[d] = true
					o.Logf("%s goodput stable at %.1f Mbit/s with %d connections", d, mavg[d][len(mavg[d])-1]*8/1e6, n)
				}
			}
			if !saturated[d] && n < MNP && !timeUp {
				if err := add(d); err != nil {
					return err
				}
			}
		}
		// Keep the probes within PTC of the goodput, and MPS.
		if total > 0 {
			p := time.Duration(float64(time.Second) * probePairBytes / (PTC * total))
			p = max(p, time.Second/MPS)
			p = min(p, 500*time.Millisecond) // at least two pairs a second, or there is nothing to average
			pace.Store(int64(p))
		}
		all := true
		for _, d := range dirs {
			all = all && saturated[d]
		}
		iv.Saturated = all
		lastAgg = c.window(now, o.Interval)
		iv.RPM = lastAgg.RPM
		if all && lastAgg.RPM > 0 {
			rpmVals = append(rpmVals, lastAgg.RPM)
			if stable(rpmVals) {
				everStable = true
			}
		}
		res.Intervals = append(res.Intervals, iv)
		if everStable || timeUp {
			break
		}
	}
	res.LoadEndS = c.since(time.Now())
	cancel()
	<-probeDone
	wg.Wait()
	res.Loaded = lastAgg
	for _, d := range dirs {
		if m := mavg[d]; len(m) > 0 {
			if d == "down" {
				res.DownloadMbps = m[len(m)-1] * 8 / 1e6
			} else {
				res.UploadMbps = m[len(m)-1] * 8 / 1e6
			}
		}
	}
	res.GoodputConfidence = confidence(true, len(mavg[dirs[0]]) >= MAD, allSat(saturated, dirs))
	res.ResponsivenessConfidence = confidence(true, len(rpmVals) >= MAD, everStable)
	if !everStable {
		res.Notes = append(res.Notes, fmt.Sprintf("responsiveness did not become stable within %v (confidence %s); the result is over the last %d intervals", o.Duration, res.ResponsivenessConfidence, MAD))
	}
	if lastAgg.Self == 0 || lastAgg.Foreign == 0 {
		return fmt.Errorf("rpm: no probe completed under load (foreign %d, self %d): %s", lastAgg.Foreign, lastAgg.Self, c.firstErr())
	}
	return nil
}

func allSat(s map[string]bool, dirs []string) bool {
	for _, d := range dirs {
		if !s[d] {
			return false
		}
	}
	return true
}

func confidence(_ bool, enough, stable bool) string {
	switch {
	case stable:
		return "High"
	case enough:
		return "Medium"
	}
	return "Low"
}

// window aggregates the loaded probes that completed in the last MAD
// intervals before now.
func (c *client) window(now time.Time, id time.Duration) Aggregate {
	from := c.since(now.Add(-time.Duration(MAD) * id))
	to := c.since(now)
	var ps probeSet
	c.mu.Lock()
	for _, p := range c.probes {
		if p.Phase == "loaded" && p.Err == "" && p.EndS > from && p.EndS <= to {
			ps.add(p)
		}
	}
	c.mu.Unlock()
	return aggregate(ps, c.useTLS)
}
