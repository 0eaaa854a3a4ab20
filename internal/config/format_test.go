package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// checkFormat: Format(q) parses back to q, whatever q's options were (the
// section's name and positions aside; the autorate target to the
// microsecond, which is what Format writes).
func checkFormat(t *testing.T, q Queue) {
	t.Helper()
	text := Format(&q, "round_trip")
	f, err := Parse("formatted", strings.NewReader(string(text)))
	if err != nil || len(f.Queues) != 1 || len(f.Warnings) != 0 {
		t.Fatalf("Format of queue %q does not parse back cleanly: %v %v\n%s", q.Name, err, f, text)
	}
	got := f.Queues[0]
	want := q
	for _, p := range []*Queue{&got, &want} {
		p.Name, p.Pos, p.OptionPos = "", Position{}, nil
		p.Autorate.Target = p.Autorate.Target.Truncate(time.Microsecond)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Format of queue %q parses back as\n%+v\nwant\n%+v\nformatted:\n%s", q.Name, got, want, text)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.sqm")
	if len(files) == 0 {
		t.Fatal("no testdata/*.sqm")
	}
	n := 0
	for _, p := range files {
		f, _ := Load(p)
		if f == nil {
			continue
		}
		for _, q := range f.Queues {
			checkFormat(t, q)
			n++
		}
	}
	q := scriptDefaults()
	q.Enabled, q.Interface, q.Script, q.IQdiscOpts = true, "eth1", "layer_cake", `nat "dual-dsthost" it's`
	q.ITarget, q.ETarget = Target{Mode: TargetDefault}, Target{Mode: TargetExplicit, Value: 2500 * time.Microsecond}
	q.Autorate = Autorate{Enabled: true, DownloadMin: 1000, UploadMax: 5000, Target: 7500 * time.Microsecond,
		Reflectors: []string{"192.0.2.1:2112", "[2001:db8::1]:53"}, Probe: ProbeUDP}
	checkFormat(t, q)
	if n < 5 {
		t.Fatalf("only %d queues in testdata", n)
	}
}

// TestFormatDaemonReads: a file of Format's sections is one the daemon
// starts from as written (every section, each as it was).
func TestFormatDaemonReads(t *testing.T) {
	q := scriptDefaults()
	q.Enabled, q.Interface, q.Script, q.Qdisc = true, "eth1", "piece_of_cake", "cake"
	p := filepath.Join(t.TempDir(), "sqm")
	if err := os.WriteFile(p, Format(&q, "lab"), 0o644); err != nil {
		t.Fatal(err)
	}
	qs, err := LoadQueues(p)
	if err != nil || len(qs) != 1 || qs[0].Name != "lab" || qs[0].Interface != "eth1" {
		t.Fatalf("LoadQueues: %v %+v", err, qs)
	}
}
