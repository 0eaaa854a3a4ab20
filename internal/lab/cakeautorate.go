package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"sqm/internal/config"
	"sqm/internal/plan"
)

// CakeAutorate is lynxthecat/cake-autorate, the bash controller OpenWrt
// users run today, from a checkout in dir, run the way its users run it:
// `bash cake-autorate.sh config.X.sh` in the router namespace (through
// `ip netns exec`, so that /sys/class/net shows the router's devices, whose
// counters it reads), fping as its pinger, changing cake's bandwidth with
// tc. It gets the same rate ranges (the plan's autorate ranges, from the
// same config defaults as sqm's autorate) and the same reflector (the lab's
// server) as sqm's autorate, and otherwise its own defaults, so that a run
// compares the two controllers on one trace. The checkout is never part of
// this repository: the bench is given one (make bench-autorate
// CAKE_AUTORATE=DIR).
func CakeAutorate(dir string) Controller { return &cakeAutorate{dir: dir} }

type cakeAutorate struct {
	dir  string
	work string // config and log
	cmd  *exec.Cmd
	done chan error
}

// cakeAutoratePingInterval is the one reflector's ping interval: the lab has
// one server, and cake-autorate's defaults (6 pingers every 0.3 s) send 20
// pings a second in all, which its detection window (3 of the last 6
// samples) is sized for; one pinger every 0.05 s keeps that pace.
const cakeAutoratePingInterval = 0.05

func (c *cakeAutorate) Name() string { return "cake-autorate" }

// prepareQueue turns the queue's autorate options on, for the plan's rate
// ranges only: sqm's autorate is not started, the shaping is the same.
func (c *cakeAutorate) prepareQueue(q *config.Queue) { q.Autorate.Enabled = true }

func (c *cakeAutorate) Start(ctx context.Context, env ControlEnv) error {
	for _, f := range []string{filepath.Join(c.dir, "cake-autorate.sh"), filepath.Join(c.dir, "defaults.sh"), filepath.Join(c.dir, "lib.sh")} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("cake-autorate checkout %s: %w (give the directory of a lynxthecat/cake-autorate checkout)", c.dir, err)
		}
	}
	for _, tool := range []string{"bash", "fping", "tc", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("cake-autorate needs %s: %w", tool, err)
		}
	}
	if out, err := exec.Command("bash", "-c", `((BASH_VERSINFO[0] >= 5)) || { echo "$BASH_VERSION"; exit 1; }`).CombinedOutput(); err != nil {
		return fmt.Errorf("cake-autorate needs bash 5 or later, found %s", strings.TrimSpace(string(out)))
	}
	a := env.Plan.Autorate
	if a == nil || a.Download == nil || a.Upload == nil {
		return errors.New("the plan has no autorate ranges for cake-autorate")
	}
	if env.IFB == "" {
		return errors.New("cake-autorate changes cake on an IFB for the download; the ingress here is policed")
	}
	if len(env.Reflectors) == 0 {
		return errors.New("no reflector for cake-autorate")
	}
	var err error
	if c.work, err = os.MkdirTemp("", "sqm-cake-autorate-"); err != nil {
		return err
	}
	if err := c.start(ctx, env, a); err != nil {
		// the lab calls Stop only after a Start that worked
		if c.cmd != nil {
			_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
			<-c.done
			c.cmd = nil
		}
		os.RemoveAll(c.work)
		return err
	}
	return nil
}

// start writes the configuration, starts cake-autorate and waits until it
// runs.
func (c *cakeAutorate) start(ctx context.Context, env ControlEnv, a *plan.Autorate) error {
	cfg := filepath.Join(c.work, "config.lab.sh")
	var b strings.Builder
	fmt.Fprintf(&b, "dl_if=%s\nul_if=%s\n", env.IFB, env.WAN)
	fmt.Fprintf(&b, "adjust_dl_shaper_rate=1\nadjust_ul_shaper_rate=1\n")
	for _, r := range []struct {
		name string
		rr   *plan.RateRange
	}{{"dl", a.Download}, {"ul", a.Upload}} {
		fmt.Fprintf(&b, "min_%s_shaper_rate_kbps=%d\nbase_%s_shaper_rate_kbps=%d\nmax_%s_shaper_rate_kbps=%d\n",
			r.name, r.rr.MinKbit, r.name, r.rr.BaseKbit, r.name, r.rr.MaxKbit)
	}
	// its idle threshold (default 2000 kbit/s) must not exceed either
	// minimum, or it refuses to start: half the lower one (sqm's own idle
	// threshold is 100 kbit/s)
	fmt.Fprintf(&b, "connection_active_thr_kbps=%d\n", max(min(a.Download.MinKbit, a.Upload.MinKbit)/2, 1))
	fmt.Fprintf(&b, "pinger_method=fping\nreflectors=(%s)\nno_pingers=%d\nrandomize_reflectors=0\nreflector_ping_interval_s=%g\n",
		strings.Join(env.Reflectors, " "), len(env.Reflectors), cakeAutoratePingInterval)
	fmt.Fprintf(&b, "debug=0\noutput_cake_changes=1\nlog_to_file=1\nlog_file_path_override=%s\n", c.work)
	if err := os.WriteFile(cfg, []byte(b.String()), 0o644); err != nil {
		return err
	}
	out, err := os.Create(filepath.Join(c.work, "stdout"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command("ip", "netns", "exec", env.Router.Name(), "bash", filepath.Join(c.dir, "cake-autorate.sh"), cfg)
	cmd.Env = append(os.Environ(), "CAKE_AUTORATE_SCRIPT_PREFIX="+c.dir)
	cmd.Stdout, cmd.Stderr = out, out
	// its own process group, so that Stop can end whatever it leaves
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start cake-autorate: %w", err)
	}
	c.cmd = cmd
	c.done = make(chan error, 1)
	go func() { c.done <- cmd.Wait() }()
	// Ready when its main loop has written its process list (run_path's
	// proc_pids); a bash this size takes seconds to start on a slow CPU.
	pids := "/var/run/cake-autorate/lab/proc_pids"
	return waitStarted(ctx, "cake-autorate", c.done, 30*time.Second, func() (bool, error) {
		_, err := os.Stat(pids)
		return err == nil, nil
	}, func() string { return "(no " + pids + ") " + c.tail() })
}

// tail is the end of its log and output, for an error.
func (c *cakeAutorate) tail() string {
	var s string
	for _, f := range []string{"cake-autorate.lab.log", "stdout"} {
		b, _ := os.ReadFile(filepath.Join(c.work, f))
		if len(b) > 1500 {
			b = b[len(b)-1500:]
		}
		s += fmt.Sprintf("[%s] %s ", f, strings.TrimSpace(string(b)))
	}
	return s
}

// Stop ends it as its service does (SIGTERM: it stops its pingers and
// monitors and waits for them), then ends anything left in its process
// group. Its CPU time is wait4's: the bash and every descendant it waited
// for (its subshells, fping, each tc), as the kernel accounted them.
func (c *cakeAutorate) Stop() (ControlStats, error) {
	if c.cmd == nil {
		return ControlStats{}, nil
	}
	defer func() {
		os.RemoveAll(c.work)
		c.cmd = nil
	}()
	st, werr, _ := endProcess(c.cmd, c.done)
	n, err := countCakeChanges(filepath.Join(c.work, "cake-autorate.lab.log"))
	if err != nil {
		return st, fmt.Errorf("cake-autorate's log: %w (%s)", err, c.tail())
	}
	st.RateChanges = n
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		return st, werr
	}
	return st, nil
}

var shaperLine = regexp.MustCompile(`^SHAPER;.*cake bandwidth ([0-9]+)Kbit`)

// countCakeChanges counts the bandwidth changes cake-autorate logged (one
// SHAPER line per direction changed, with output_cake_changes=1).
func countCakeChanges(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if m := shaperLine.FindStringSubmatch(sc.Text()); m != nil {
			if _, err := strconv.ParseUint(m[1], 10, 64); err == nil {
				n++
			}
		}
	}
	return n, sc.Err()
}
