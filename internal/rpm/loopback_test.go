package rpm

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// serveLoopback starts the package's own server on a loopback port with a
// self-signed certificate and returns its configuration URL.
func serveLoopback(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ln, err := Listen(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, ServerOptions{Logf: t.Logf}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	u, err := ConfigURL(ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestLoopback runs the whole measurement against the package's server on
// loopback: every probe kind must have completed, the load must have
// moved data both ways, and the headline must be the draft's formula over
// the reported parts.
func TestLoopback(t *testing.T) {
	u := serveLoopback(t)
	res, err := Run(context.Background(), Options{URL: u, Insecure: true, Duration: 3 * time.Second,
		Interval: 250 * time.Millisecond, IdleProbes: 5, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Idle.Foreign != 5 || res.Idle.Self != 0 {
		t.Errorf("idle probes: %d foreign, %d self; want 5, 0", res.Idle.Foreign, res.Idle.Self)
	}
	if res.Loaded.Foreign == 0 || res.Loaded.Self == 0 {
		t.Errorf("loaded probes: %d foreign, %d self; want both", res.Loaded.Foreign, res.Loaded.Self)
	}
	if res.DownloadMbps <= 0 || res.UploadMbps <= 0 {
		t.Errorf("goodput down %.1f up %.1f Mbit/s; want both > 0", res.DownloadMbps, res.UploadMbps)
	}
	if !strings.HasPrefix(res.Protocol, "HTTP/2, TLS") {
		t.Errorf("protocol %q", res.Protocol)
	}
	a := res.Loaded
	wantF := 60000 / ((a.TCPMs + a.TLSMs + a.HTTPForeignMs) / 3)
	wantS := 60000 / a.HTTPSelfMs
	if !near(a.ForeignRPM, wantF) || !near(a.SelfRPM, wantS) || !near(res.RPM, (wantF+wantS)/2) {
		t.Errorf("RPM %.0f (foreign %.0f self %.0f) is not the draft's formula over the parts %+v", res.RPM, a.ForeignRPM, a.SelfRPM, a)
	}
	var text, js bytes.Buffer
	if err := Text(&text, res); err != nil {
		t.Fatal(err)
	}
	if err := JSON(&js, res); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Responsiveness under load (RPM)", "trimmed means"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	for _, want := range []string{`"kind": "rpm"`, `"tcp_f_ms"`, `"http_l_ms"`, `"foreign_rpm"`, `"self_rpm"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("JSON lacks %s", want)
		}
	}
	t.Logf("\n%s", text.String())
}

func near(a, b float64) bool { return a > 0 && b > 0 && a/b > 0.999 && a/b < 1.001 }

// TestSelfSignedNeedsInsecure checks that a server whose certificate is
// not trusted fails with a message that says what to do.
func TestSelfSignedNeedsInsecure(t *testing.T) {
	u := serveLoopback(t)
	_, err := Run(context.Background(), Options{URL: u, Duration: 3 * time.Second, Interval: 250 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "--insecure") {
		t.Fatalf("err = %v; want a hint about --insecure", err)
	}
}
