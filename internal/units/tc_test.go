package units

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"sqm/internal/testutil"
)

// TestTCDifferential checks ParseRate, ParseSize and ParseTime against the
// real tc binary: each value is given to tc (tbf rate/latency, bfifo limit)
// on the loopback device of a private network namespace, and the kernel's
// dump is compared with our result. Values we reject on purpose (signs,
// hex, inf, too large) are not compared.
func TestTCDifferential(t *testing.T) {
	testutil.RequireRoot(t)
	for _, bin := range []string{"tc", "unshare", "ip"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	nums := []string{"0", "1", "7", "8", "9", "10", "20", "100", "830", "1000", "1514", "16857", "1.5", "2.5", ".5", "5.", "0.1",
		"1.1", "3.3333", "12", "1e3", "2E2", "25e-1", "4294967295", "999999", "123.456"}
	rateUnits := []string{"", "bit", "kbit", "Kbit", "mbit", "Mbit", "gbit", "kibit", "Kibit", "mibit", "bps", "Bps", "kbps",
		"KBps", "mbps", "kibps", "mibps", "k", "m", "kb", "mb", "x", "mbitx", " mbit"}
	sizeUnits := []string{"", "b", "B", "k", "K", "kb", "KB", "m", "Mb", "mb", "g", "kbit", "mbit", "gbit", "kib", "bit", "x"}
	timeUnits := []string{"", "us", "usec", "usecs", "ms", "MS", "msec", "msecs", "s", "sec", "secs", "ns", "m", "min", "x"}
	r := rand.New(rand.NewPCG(3, 4))
	pick := func(n, u []string, count int) []string {
		var out []string
		for _, a := range n {
			out = append(out, a+u[r.IntN(len(u))])
		}
		for i := 0; i < count; i++ {
			out = append(out, n[r.IntN(len(n))]+u[r.IntN(len(u))])
		}
		return out
	}
	rates := pick(nums, rateUnits, 60)
	sizes := pick(nums, sizeUnits, 60)
	times := pick(nums, timeUnits, 60)

	var script strings.Builder
	script.WriteString("ip link set lo up\n")
	cmd := func(tcArgs string) {
		fmt.Fprintf(&script, "if tc qdisc replace dev lo root %s 2>/dev/null; then tc -j qdisc show dev lo; echo; else echo ERR; fi\n", tcArgs)
	}
	for _, v := range rates {
		cmd(fmt.Sprintf("tbf rate '%s' burst 10k latency 50ms", v))
	}
	for _, v := range sizes {
		cmd(fmt.Sprintf("bfifo limit '%s'", v))
	}
	for _, v := range times {
		cmd(fmt.Sprintf("tbf rate 8bps burst 10k latency '%s'", v))
	}
	out, err := exec.Command("unshare", "-n", "sh", "-c", script.String()).Output()
	if err != nil {
		t.Fatalf("unshare -n sh: %v", err)
	}
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(rates)+len(sizes)+len(times) {
		t.Fatalf("got %d result lines for %d values:\n%s", len(lines), len(rates)+len(sizes)+len(times), out)
	}
	type dump []struct {
		Options struct {
			Rate  *uint64 `json:"rate"`
			Limit *uint64 `json:"limit"`
		} `json:"options"`
	}
	parse := func(line string) (dump, bool) {
		if line == "ERR" {
			return nil, false
		}
		var d dump
		if err := json.NewDecoder(bytes.NewReader([]byte(line))).Decode(&d); err != nil || len(d) != 1 {
			t.Fatalf("cannot decode tc output %q: %v", line, err)
		}
		return d, true
	}
	compared := 0
	for i, v := range rates {
		d, tcOK := parse(lines[i])
		bits, err := ParseRate(v)
		switch {
		case err != nil && strings.Contains(err.Error(), "too large"):
		case err != nil && tcOK:
			t.Errorf("rate %q: we reject (%v), tc accepts (%d bytes/s)", v, err, *d[0].Options.Rate)
		case err == nil && bits/8 == 0:
			// tbf cannot be set up with a rate of 0 bytes/s; nothing to compare
		case err == nil && !tcOK:
			t.Errorf("rate %q: we accept (%d bit/s), tc rejects", v, bits)
		case err == nil:
			compared++
			if got := *d[0].Options.Rate; got != bits/8 {
				t.Errorf("rate %q: tc sets %d bytes/s, we parse %d bit/s = %d bytes/s", v, got, bits, bits/8)
			}
		}
	}
	for i, v := range sizes {
		d, tcOK := parse(lines[len(rates)+i])
		n, err := ParseSize(v)
		switch {
		case err != nil && strings.Contains(err.Error(), "too large"):
		case err != nil && tcOK:
			t.Errorf("size %q: we reject (%v), tc accepts (%d bytes)", v, err, *d[0].Options.Limit)
		case err == nil && !tcOK:
			t.Errorf("size %q: we accept (%d bytes), tc rejects", v, n)
		case err == nil:
			compared++
			if got := *d[0].Options.Limit; got != uint64(n) {
				t.Errorf("size %q: tc sets %d bytes, we parse %d", v, got, n)
			}
		}
	}
	for i, v := range times {
		_, tcOK := parse(lines[len(rates)+len(sizes)+i])
		d, err := ParseTime(v)
		switch {
		case err != nil && strings.Contains(err.Error(), "too large"):
		case err != nil && tcOK:
			t.Errorf("time %q: we reject (%v), tc accepts", v, err)
		case err == nil && !tcOK && d > 0:
			t.Errorf("time %q: we accept (%v), tc rejects", v, d)
		case err == nil:
			compared++
		}
	}
	t.Logf("%d rates, %d sizes, %d times; %d accepted values compared with tc", len(rates), len(sizes), len(times), compared)
}
