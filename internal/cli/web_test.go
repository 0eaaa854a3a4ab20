//go:build linux && !sqm_noweb

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/features"
	"sqm/internal/metrics"
	"sqm/internal/plan"
	"sqm/internal/service"
	"sqm/internal/stats"
)

// TestDaemonHTTPRefused checks that a page address that would face the
// internet, or a page nobody can log in to, stops the daemon before it
// changes anything (the config names an interface that does not exist, so
// nothing could be applied anyway; the state directory stays empty).
func TestDaemonHTTPRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sqm")
	users := filepath.Join(dir, "users")
	if err := os.WriteFile(users, []byte("admin pbkdf2-sha256$1000$AAAAAAAAAAA$"+strings.Repeat("A", 43)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const queue = "config queue 'wan'\n\toption enabled '1'\n\toption interface 'sqmnone0'\n\toption script 'simplest.qos'\n"
	for _, tc := range []struct {
		name, daemonSection string
		args                []string
		want                string
	}{
		{"wildcard", "", []string{"--http", "0.0.0.0:8480", "--http-users", users}, "every address"},
		{"wildcard from the config", "config sqm 'daemon'\n\toption http '[::]:8480'\n", []string{"--http-users", users}, "every address"},
		{"host name", "", []string{"--http", "router.lan:8480", "--http-users", users}, "not a host name"},
		{"no port", "", []string{"--http", "192.168.1.1", "--http-users", users}, "has no port"},
		{"no users file", "", []string{"--http", "8480", "--http-users", filepath.Join(dir, "missing")}, "sqm passwd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(cfg, []byte(queue+tc.daemonSection), 0o644); err != nil {
				t.Fatal(err)
			}
			state := filepath.Join(t.TempDir(), "run")
			var o, e bytes.Buffer
			args := append([]string{"daemon", "--config", cfg, "--state-dir", state}, tc.args...)
			code := Run(context.Background(), args, &o, &e)
			if code == 0 || !strings.Contains(e.String(), tc.want) {
				t.Fatalf("exit %d, stderr %q; want non-zero and %q", code, e.String(), tc.want)
			}
			if ents, _ := os.ReadDir(state); len(ents) > 0 {
				t.Errorf("state written before the refusal: %v", ents)
			}
		})
	}
}

func TestTestMetric(t *testing.T) {
	if testMetric(nil) != nil {
		t.Error("no test: want nil")
	}
	r := &bloat.Result{Mode: bloat.ModeRRUL, Server: "192.0.2.7:12866", Grade: "A", RPMBand: "Good", RPM: 2400,
		DownloadMbps: 80, UploadMbps: 8, InducedMs: 2.5,
		Idle:   stats.Summary{MedianMs: 20, P90Ms: 21},
		Loaded: stats.Summary{MedianMs: 22.5, P90Ms: 30, LossPct: 1.5}}
	got := testMetric(r)
	want := metrics.TestResult{Mode: "rrul", Server: "192.0.2.7:12866", Grade: "A", RPMBand: "Good", RPM: 2400,
		DownloadBytesPerSecond: 1e7, UploadBytesPerSecond: 1e6, Induced: 2500 * time.Microsecond,
		Idle:   metrics.Latency{Median: 20 * time.Millisecond, P90: 21 * time.Millisecond},
		Loaded: metrics.Latency{Median: 22500 * time.Microsecond, P90: 30 * time.Millisecond, LossRatio: 0.015}}
	if *got != want {
		t.Errorf("got  %+v\nwant %+v", *got, want)
	}
}

// TestAvailableQdiscs: the form offers exactly the planner's leaf qdiscs
// the kernel has (a hand-kept list here had drifted from plan's order and
// could drift in content), hides those reported missing, and offers a
// qdisc whose probe could not tell rather than hiding it.
func TestAvailableQdiscs(t *testing.T) {
	var all []string
	for _, q := range plan.LeafQdiscs {
		all = append(all, q)
	}
	missing := map[string]bool{"cake": true, "fq_pie": true}
	got := availableQdiscs(func(kind string) error {
		switch {
		case missing[kind]:
			return fmt.Errorf("probe: %w", features.ErrNotAvailable)
		case kind == "sfq":
			return errors.New("netlink: permission denied")
		}
		return nil
	})
	var want []string
	for _, q := range all {
		if !missing[q] {
			want = append(want, q)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("availableQdiscs = %v; want %v (plan's leaves %v less the missing)", got, want, all)
	}
}

// TestWebStatusRefused: the page's status carries the refused sections
// (issue 23 item 1), under the same key as `sqm status --json`, for the
// page's line about them.
func TestWebStatusRefused(t *testing.T) {
	k, _, now := statusFixture()
	store := &service.Store{Dir: t.TempDir()}
	svc := &service.Service{Kernel: nil, Store: store, Plan: buildPlan, Now: func() time.Time { return now }}
	// A start that refuses a section records it for status.
	bad := &config.SectionError{Section: "lte", Interface: "wwan0", Pos: config.Position{File: "/etc/config/sqm", Line: 20},
		Errs: []error{errors.New(`/etc/config/sqm:23: queue "lte" option download: "85mbit" is not a number of kbit/s`)}}
	if _, err := svc.Reload(nil, "/etc/config/sqm", service.PrepareOptions{Refused: []*config.SectionError{bad}}); err == nil {
		t.Fatal("no error for the refused section")
	}
	doc, err := webStatus(k, &service.Daemon{Svc: svc})
	if err != nil {
		t.Fatal(err)
	}
	j, _ := json.Marshal(doc)
	if !strings.Contains(string(j), `"refused":[{"section":"lte","source":"/etc/config/sqm","section_pos":"/etc/config/sqm:20","interface":"wwan0","errors":["/etc/config/sqm:23:`) {
		t.Errorf("page status lacks the refused section: %s", j)
	}
	js, err := os.ReadFile("../web/assets/app.js")
	if err != nil || !strings.Contains(string(js), "st.refused") {
		t.Errorf("the page's script does not show st.refused (%v)", err)
	}
}

// TestHTTPHosts: --http-hosts (option http_hosts, a list is joined by
// spaces) takes names, comma or space separated; an address or a port is
// refused with the reason.
func TestHTTPHosts(t *testing.T) {
	got, err := httpHosts("router.example.com, gw.lan\tnas-1")
	if err != nil || strings.Join(got, "|") != "router.example.com|gw.lan|nas-1" {
		t.Errorf("names: %q %v", got, err)
	}
	for in, want := range map[string]string{
		"192.168.1.1":     "is an address",
		"[fd00::1]":       "is an address",
		"router.lan:8080": "no port",
		"a/b":             "letters, digits",
	} {
		if _, err := httpHosts(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want %q", in, err, want)
		}
	}
}

// TestWANPeerCheck: a client whose route leaves through a shaped interface
// is named; loopback, other devices and unknown routes are let in.
func TestWANPeerCheck(t *testing.T) {
	routes := map[string]string{"203.0.113.9": "pppoe-wan", "192.168.1.20": "br-lan", "2001:db8::9": "pppoe-wan"}
	check := wanPeerCheck([]string{"pppoe-wan", "eth1"}, func(a netip.Addr) (string, error) {
		if d, ok := routes[a.String()]; ok {
			return d, nil
		}
		return "", errors.New("no route")
	})
	for a, want := range map[string]string{"203.0.113.9": "pppoe-wan", "2001:db8::9": "pppoe-wan", "192.168.1.20": "", "127.0.0.1": "", "198.51.100.1": ""} {
		if got := check(netip.MustParseAddr(a)); got != want {
			t.Errorf("%s: %q; want %q", a, got, want)
		}
	}
	if got := wanPeerCheck(nil, nil)(netip.MustParseAddr("203.0.113.9")); got != "" {
		t.Errorf("no shaped interfaces: %q", got)
	}
}
