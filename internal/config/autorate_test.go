package config

import (
	"strings"
	"testing"
	"time"
)

// TestAutorateOptions parses one enabled section with the given extra
// lines and checks the verdict: want "" accepts it, otherwise the refusal
// must contain want (file:line, option and message).
func TestAutorateOptions(t *testing.T) {
	tests := []struct {
		name  string
		lines string
		want  string
		check func(q *Queue) bool
	}{
		{"off by default", "", "", func(q *Queue) bool { return !q.Autorate.Enabled }},
		{"on, defaults", "option autorate 1", "", func(q *Queue) bool {
			return q.AutorateRange(true) == RateRange{10000, 40000, 80000} &&
				q.AutorateRange(false) == RateRange{2500, 10000, 20000} &&
				q.AutorateTargetOrDefault() == 15*time.Millisecond && q.AutorateProbeOrDefault() == "both"
		}},
		{"target ms", "option autorate_target 30", "", func(q *Queue) bool { return q.Autorate.Target == 30*time.Millisecond }},
		{"target unit", "option autorate_target 2500us", "", func(q *Queue) bool { return q.Autorate.Target == 2500*time.Microsecond }},
		{"min = base = max", "option autorate 1\n\toption autorate_download_min 40000\n\toption autorate_download_max 40000", "", func(q *Queue) bool {
			return q.AutorateRange(true) == RateRange{40000, 40000, 40000}
		}},
		{"probe icmp", "option autorate_probe icmp", "", func(q *Queue) bool { return q.Autorate.Probe == "icmp" }},
		{"reflectors", "list autorate_reflector 1.1.1.1\n\tlist autorate_reflector 'host.example:2112 ::1 fe80::1 ::ffff:1.2.3.4 [2620:fe::fe]:53 9.9.9.9:2112'", "", func(q *Queue) bool {
			return strings.Join(q.Autorate.Reflectors, ",") == "1.1.1.1,host.example:2112,::1,fe80::1,::ffff:1.2.3.4,[2620:fe::fe]:53,9.9.9.9:2112"
		}},
		// A base below 4*64 keeps the default minimum at the shaping floor.
		{"low base", "option autorate 1\n\toption upload 200", "", func(q *Queue) bool { return q.AutorateRange(false).Min == 64 }},

		{"bad bool", "option autorate yes", `f:8: queue "wan" option autorate: "yes" is not 0 or 1`, nil},
		{"min above base", "option autorate 1\n\toption autorate_download_min 50000",
			`f:9: queue "wan" option autorate_download_min: minimum 50000 kbit/s is above the base rate (download 40000 kbit/s); autorate needs min <= base <= max`, nil},
		{"max below base", "option autorate 1\n\toption autorate_upload_max 9000",
			`f:9: queue "wan" option autorate_upload_max: maximum 9000 kbit/s is below the base rate (upload 10000 kbit/s)`, nil},
		{"min too low", "option autorate 1\n\toption autorate_upload_min 10",
			`f:9: queue "wan" option autorate_upload_min: 10 kbit/s is too low to shape; use at least 64`, nil},
		{"unshaped direction", "option autorate 1\n\toption download 0\n\toption autorate_download_max 90000",
			`f:10: queue "wan" option autorate_download_max: download is 0 (not shaped), so it cannot autorate`, nil},
		{"nothing shaped", "option autorate 1\n\toption download 0\n\toption upload 0",
			`f:8: queue "wan" option autorate: download and upload are both 0`, nil},
		{"rate not a number", "option autorate_download_max 90M", `option autorate_download_max: "90M" is not a number of kbit/s`, nil},
		{"rate too large", "option autorate_upload_max 99999999999", `option autorate_upload_max: "99999999999" kbit/s is too large`, nil},
		{"target zero", "option autorate_target 0", `option autorate_target: 0s is out of range: the target must be from 1ms to 1s`, nil},
		{"target negative", "option autorate_target -5", `option autorate_target: -5 ms is out of range`, nil},
		{"target huge", "option autorate_target 5000", `option autorate_target: 5000 ms is out of range`, nil},
		{"target NaN", "option autorate_target NaN", `option autorate_target: "NaN" is not a delay target`, nil},
		{"target words", "option autorate_target soon", `option autorate_target: "soon" is not a delay target; use a delay in ms`, nil},
		{"probe", "option autorate_probe tcp", `option autorate_probe: unknown probe "tcp"; use icmp, udp or both`, nil},
		{"reflector name", "list autorate_reflector 'bad_name!'", `option autorate_reflector: reflector "bad_name!" is not a valid host name`, nil},
		{"reflector port", "list autorate_reflector host:0", `reflector "host:0" has a bad port`, nil},
		{"reflector v6 bad port", "list autorate_reflector '[::1]:x'", `reflector "[::1]:x" has a bad port`, nil},
		{"reflector v6 no port", "list autorate_reflector '[::1]'", `reflector "[::1]" is not a valid address`, nil},
		{"reflector v6 groups", "list autorate_reflector '1:2:3:4:5:6:7:8:9'", `reflector "1:2:3:4:5:6:7:8:9" is not a valid address`, nil},
		{"reflector v6 two ::", "list autorate_reflector '1::2::3'", `is not a valid address`, nil},
		{"reflector v6 long group", "list autorate_reflector '2620:fe::12345'", `is not a valid address`, nil},
		{"reflector empty port", "list autorate_reflector 'host:'", `reflector "host:" has a bad port`, nil},
		{"reflector port too big", "list autorate_reflector 'host:65536'", `has a bad port`, nil},
		{"too many reflectors", "option autorate_reflector '" + strings.Repeat("1.1.1.1 ", 33) + "'", `more than 32 reflectors`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "config queue wan\n\toption enabled 1\n\toption interface eth0\n\toption script piece_of_cake\n" +
				"\toption download 40000\n\toption upload 10000\n\n\t" + tt.lines + "\n"
			f, err := Parse("f", strings.NewReader(src))
			if f == nil {
				t.Fatalf("Parse: %v", err)
			}
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if q := f.Queue("wan"); q == nil || !tt.check(q) {
					t.Errorf("queue = %+v", q)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want %q", err, tt.want)
			}
			if len(f.Refused) != 1 || f.Refused[0].Interface != "eth0" {
				t.Errorf("Refused = %v, want the one section", f.Refused)
			}
		})
	}
}

// TestAutorateDisabledSection: a disabled section's autorate mistakes
// are warnings, as every other option's.
func TestAutorateDisabledSection(t *testing.T) {
	src := "config queue wan\n\toption enabled 0\n\toption interface eth0\n\toption script simple\n\toption autorate_probe tcp\n"
	f, err := Parse("f", strings.NewReader(src))
	if err != nil || len(f.Queues) != 1 || len(f.Warnings) != 1 || !strings.Contains(f.Warnings[0].String(), "autorate_probe") {
		t.Fatalf("Parse = %v, queues %d, warnings %v", err, len(f.Queues), f.Warnings)
	}
}

// TestAutorateValidate: a queue built in code is held to what Parse
// accepts.
func TestAutorateValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Autorate)
		want   string
	}{
		{"off with junk ranges", func(a *Autorate) { a.DownloadMin = 1 << 40 }, "option autorate_download_min: 1099511627776 kbit/s is too large"},
		{"bad probe", func(a *Autorate) { a.Probe = "x" }, `option autorate_probe: unknown probe "x"`},
		{"bad target", func(a *Autorate) { a.Target = time.Hour }, "option autorate_target: 1h0m0s is out of range"},
		{"bad reflector", func(a *Autorate) { a.Reflectors = []string{"a b"} }, `option autorate_reflector: reflector "a b"`},
		{"on", func(a *Autorate) { a.Enabled = true }, ""},
		{"on, min above base", func(a *Autorate) { a.Enabled, a.UploadMin = true, 1<<20 }, "option autorate_upload_min: minimum 1048576 kbit/s is above the base rate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := Defaults()
			q.Interface = "eth0"
			tt.modify(&q.Autorate)
			err := q.Validate()
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
}
