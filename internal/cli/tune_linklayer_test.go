//go:build linux && !sqm_notest

package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"sqm/internal/linklayer"
)

func TestTuneLinkLayerBadInput(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--linklayer"}, "exactly one HOST"},
		{[]string{"--linklayer", "--write", "192.0.2.7"}, "no --iperf3, --write or --plot"},
		{[]string{"--linklayer", "--sizes", "60-100", "192.0.2.7"}, "two ATM cells"},
		{[]string{"--linklayer", "--sizes", "x", "192.0.2.7"}, "LO-HI"},
		{[]string{"--linklayer", "--repeat", "0", "192.0.2.7"}, "--repeat 0 outside"},
		{[]string{"--linklayer", "--interval", "0s", "192.0.2.7"}, "--interval 0s outside"},
		{[]string{"--linklayer", "-4", "-6", "192.0.2.7"}, "exclude each other"},
		{[]string{"--linklayer", "--section", "lte", "192.0.2.7"}, `no queue section "lte"`},
	} {
		code, out, errs, _, opened := runTune(t, context.Background(), seed004Link(), tt.args...)
		if code != 2 || out != "" || !strings.Contains(errs, tt.want) || opened != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q, link opened %d times; want exit 2 and %q", tt.args, code, out, errs, opened, tt.want)
		}
	}
}

// Over loopback there is no serialisation to see: the verdict must be
// "unknown", with the straight-line keywords, and the JSON complete.
func TestTuneLinkLayerLoopback(t *testing.T) {
	code, out, errs, _, opened := runTune(t, context.Background(), seed004Link(), "--linklayer", "--json", "--quiet", "--interval", "1ms", "--repeat", "2", "127.0.0.1")
	if code != 0 && strings.Contains(errs, "cannot send ICMP echo") {
		t.Skipf("no ICMP socket for this user: %s", errs)
	}
	if code != 0 || opened != 0 {
		t.Fatalf("exit %d, link opened %d times, stderr %s", code, opened, errs)
	}
	var rep struct {
		Sent, Answered int
		Result         struct{ Linklayer string }
		Suggestions    []struct{ Cake string }
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if rep.Sent != 386 || rep.Answered != 386 || rep.Result.Linklayer != "unknown" || len(rep.Suggestions) == 0 {
		t.Errorf("sent %d answered %d verdict %q suggestions %v", rep.Sent, rep.Answered, rep.Result.Linklayer, rep.Suggestions)
	}
	// The config's interface eth9 does not exist here: said, not fatal.
	if !strings.Contains(errs, "eth9") {
		t.Errorf("stderr %q does not mention the missing interface", errs)
	}
}

// The text report of an ATM verdict names the overhead, its mod-48 twin,
// the combined rate and the keyword for a PPP device.
func TestWriteLinkLayerATM(t *testing.T) {
	r := linklayer.Result{LinkLayer: linklayer.ATM, Overhead: 40, OverheadMod: 40, Alternative: 88, OverheadSpread: 1,
		StepUs: 547, ByteUs: 547.0 / 53, RateBits: 775e3, NoiseUs: 30, Sure: true, Reason: "steps", Points: make([]linklayer.Point, 193)}
	i := linklayer.Iface{Name: "pppoe-wan", Type: 512}
	var b strings.Builder
	if err := writeLinkLayer(&b, linkLayerReport{Target: "192.0.2.7", Sent: 1930, Answered: 1925, Seconds: 21, Result: r,
		Interface: &i, Suggestions: linklayer.Suggest(r, i)}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"link layer: atm (sure)", "overhead:   40 bytes", "88 would fit the same", "775 kbit/s", "cake options for pppoe-wan", "pppoe-llcsnap", "atm overhead 40", "1925 of 1930"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
