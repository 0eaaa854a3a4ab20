package metricshttp

import (
	"bytes"
	"net/http"
	"os"
	"strings"
	"testing"

	"sqm/internal/httpd/httpdtest"
	"sqm/internal/kernel"
	"sqm/internal/metrics"
)

func TestHandler(t *testing.T) {
	src := metrics.SourceFunc(func() (*metrics.Snapshot, error) {
		return &metrics.Snapshot{Queues: []metrics.Queue{{Interface: "eth1", Directions: []metrics.Direction{
			{Name: "egress", Device: "eth1", RateKbit: 1000, Root: &kernel.QdiscStatus{Kind: "cake", Counters: kernel.Counters{Bytes: 14000000}}},
		}}}}, nil
	})
	srv := httpdtest.NewServer(Handler(src))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != metrics.ContentType {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	if !strings.Contains(body.String(), `sqm_queue_sent_bytes_total{interface="eth1",direction="egress"} 14000000`) {
		t.Errorf("body lacks eth1's counter:\n%s", body.String())
	}
	resp2, err := http.Post(srv.URL, "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: status %d, want 405", resp2.StatusCode)
	}
	failing := httpdtest.NewServer(Handler(metrics.SourceFunc(func() (*metrics.Snapshot, error) { return nil, os.ErrPermission })))
	defer failing.Close()
	resp3, err := http.Get(failing.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp3.Body.Close()
	if resp3.StatusCode != http.StatusInternalServerError {
		t.Errorf("failing source: status %d, want 500", resp3.StatusCode)
	}
}
