package tune

import (
	"os"
	"strings"
	"testing"
)

// TestWriteConfigRoundTrip: the file comes back byte-identical except the
// download and upload values of the chosen section, for sqm's own sample
// (comments everywhere), sqm-scripts' default config and a hand-written
// file with odd quoting and an unknown option.
func TestWriteConfigRoundTrip(t *testing.T) {
	res := &Result{DownloadKbit: 7003, UploadKbit: 831}
	for _, tt := range []struct {
		path, section string
		changed       []string // the lines that must differ, as they read after
	}{
		{"../../dist/openwrt/sqm.config", "wan", []string{"\toption download '7003'", "\toption upload '831'"}},
		{"../uci/testdata/default.sqm", "eth1", []string{"        option download '7003'", "        option upload '831'"}},
		{"../uci/testdata/default.sqm", "@queue[0]", []string{"        option download '7003'", "        option upload '831'"}},
		{"testdata/unknown-options.sqm", "wan", []string{"\toption download '7003' # was 85000", "  option upload '831'"}},
	} {
		t.Run(tt.path+"/"+tt.section, func(t *testing.T) {
			src, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			out, err := res.WriteConfig(tt.path, src, tt.section)
			if err != nil {
				t.Fatal(err)
			}
			a, b := strings.SplitAfter(string(src), "\n"), strings.SplitAfter(string(out), "\n")
			if len(a) != len(b) {
				t.Fatalf("%d lines became %d", len(a), len(b))
			}
			var diff []string
			for i := range a {
				if a[i] != b[i] {
					diff = append(diff, strings.TrimSuffix(b[i], "\n"))
				}
			}
			if strings.Join(diff, "|") != strings.Join(tt.changed, "|") {
				t.Errorf("changed lines %q, want %q", diff, tt.changed)
			}
			// Writing the same rates again changes nothing.
			again, err := res.WriteConfig(tt.path, out, tt.section)
			if err != nil || string(again) != string(out) {
				t.Errorf("second write changed the file (err %v)", err)
			}
		})
	}
}

// A detected framing is written with the rates: the linklayer line edited
// in place, an overhead line added after the section's last option when
// the file had none.
func TestWriteConfigDetectedFraming(t *testing.T) {
	res := &Result{DownloadKbit: 6412, UploadKbit: 798, Linklayer: "atm", Overhead: 44, LinklayerSource: "detected"}
	src, err := os.ReadFile("../uci/testdata/default.sqm")
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.WriteConfig("default.sqm", src, "eth1")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer("'85000'", "'6412'", "'10000'", "'798'", "option linklayer 'none'\n",
		"option linklayer 'atm'\n        option overhead '44'\n").Replace(string(src))
	if string(out) != want {
		t.Errorf("got\n%s\nwant\n%s", out, want)
	}
	// Configured framing is not touched.
	res.LinklayerSource = "configured"
	if out, err := res.WriteConfig("default.sqm", src, "eth1"); err != nil || strings.Contains(string(out), "atm") {
		t.Errorf("configured framing written (err %v):\n%s", err, out)
	}
}

func TestWriteConfigRefuses(t *testing.T) {
	src := []byte("config queue 'wan'\n\toption download '1'\n")
	if _, err := (&Result{DownloadKbit: 5, UploadKbit: 5}).WriteConfig("f", src, "lan"); err == nil || !strings.Contains(err.Error(), "lan") {
		t.Errorf("missing section: %v", err)
	}
	if _, err := (&Result{}).WriteConfig("f", src, "wan"); err == nil {
		t.Error("zero rates written")
	}
	// Joined commands on one line are refused, not guessed at.
	joined := []byte("config queue 'wan'\n\toption interface 'eth0'; option download '1'\n\toption upload '2'\n")
	if _, err := (&Result{DownloadKbit: 5, UploadKbit: 5}).WriteConfig("f", joined, "wan"); err == nil {
		t.Error("option on a shared line edited")
	}
}

func TestUCICommands(t *testing.T) {
	got := (&Result{DownloadKbit: 7000, UploadKbit: 830}).UCICommands("sqm", "@queue[0]")
	want := "uci set sqm.@queue[0].download='7000'\nuci set sqm.@queue[0].upload='830'\nuci commit sqm\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}
