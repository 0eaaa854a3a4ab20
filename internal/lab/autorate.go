//go:build !sqm_noautorate

package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"sqm/internal/bloat"
	"sqm/internal/config"
	"sqm/internal/service"
)

func init() {
	Autorate = func() Controller { return &sqmAutorate{} }
}

// sqmAutorate is sqm's autorate in the lab as a router runs it: `sqm
// daemon` in the router namespace, given a config file with the lab's
// queue and autorate on, probing the lab's server (its sqm server's echo
// and the kernel's ICMP timestamp replies) through the emulated modem. It
// never sees the ground-truth probes (owd.go), which are the lab's own.
// Being its own process, its CPU time is the kernel's account of all of
// it (wait4: the controller, the prober, the status file it writes, the
// Go runtime's threads), as cake-autorate's is.
type sqmAutorate struct {
	// queue, if set, edits the lab's queue after autorate is turned on
	// (a test's autorate options).
	queue func(*config.Queue)
	// debugf, if set, runs the daemon at --log-level debug and gets each
	// line it logs (a test's log); otherwise it logs at info, as a
	// router's does.
	debugf func(format string, args ...any)

	work, iface string
	cmd         *exec.Cmd
	done        chan error
	logDone     chan struct{}
}

func (a *sqmAutorate) Name() string { return "sqm-autorate" }

// prepareQueue turns autorate on for the lab's queue (RunTrace calls it
// before shaping), leaving a config file's own autorate options as they
// are: the ranges default to config's (base/4 .. 2 x base).
func (a *sqmAutorate) prepareQueue(q *config.Queue) {
	q.Autorate.Enabled = true
	if a.queue != nil {
		a.queue(q)
	}
}

// daemonStartTimeout bounds the daemon's start, to its loop running: a
// TCG VM takes seconds to start a Go binary and apply a tree.
const daemonStartTimeout = 60 * time.Second

func (a *sqmAutorate) Start(ctx context.Context, env ControlEnv) error {
	if env.Plan.Autorate == nil {
		return errors.New("the plan has autorate off")
	}
	bin, benv, err := SQM()
	if err != nil {
		return fmt.Errorf("find sqm to run its daemon: %w", err)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("running the daemon in the router namespace needs ip: %w", err)
	}
	q := *env.Queue
	q.Enabled = true
	if a.debugf != nil {
		q.Verbosity = 8 // the section's debug lines: autorate's, one per rate change
	}
	if len(q.Autorate.Reflectors) == 0 {
		// Each lab server answers sqm server's echo on its port (a UDP
		// reflector whatever the probe) and ICMP timestamps.
		for _, r := range env.Reflectors {
			q.Autorate.Reflectors = append(q.Autorate.Reflectors, bloat.HostPort(r), r)
		}
		q.Autorate.Probe = config.ProbeICMP
	}
	if a.work, err = os.MkdirTemp("", "sqm-lab-daemon-"); err != nil {
		return err
	}
	a.iface = q.Interface
	if err := a.start(ctx, env, &q, bin, benv); err != nil {
		a.kill()
		os.RemoveAll(a.work)
		return err
	}
	return nil
}

func (a *sqmAutorate) start(ctx context.Context, env ControlEnv, q *config.Queue, bin string, benv []string) error {
	cfg := filepath.Join(a.work, "sqm")
	if err := os.WriteFile(cfg, config.Format(q, "lab"), 0o644); err != nil {
		return err
	}
	level := "info"
	if a.debugf != nil {
		level = "debug"
	}
	state := filepath.Join(a.work, "state")
	cmd := exec.Command("ip", "netns", "exec", env.Router.Name(), bin, "daemon", "--config", cfg, "--state-dir", state, "--log-level", level)
	cmd.Env = benv
	// its own process group, so that whatever it leaves is ended with it
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	logf, err := os.Create(filepath.Join(a.work, "log"))
	if err != nil {
		return err
	}
	// The log file is closed once the daemon is waited for: with a
	// debugf, Wait's copier writes to it until then.
	var w io.Writer = logf
	closeLog := func() { logf.Close() }
	a.logDone = make(chan struct{})
	if a.debugf != nil {
		pr, pw := io.Pipe()
		w = io.MultiWriter(logf, pw)
		closeLog = func() { pw.Close(); logf.Close() }
		go func() {
			defer close(a.logDone)
			sc := bufio.NewScanner(pr)
			for sc.Scan() {
				a.debugf("daemon: %s", sc.Text())
			}
			io.Copy(io.Discard, pr) // a line too long for the scanner
		}()
	} else {
		close(a.logDone)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		closeLog()
		<-a.logDone
		return fmt.Errorf("start sqm daemon: %w", err)
	}
	a.cmd = cmd
	a.done = make(chan error, 1)
	go func() {
		err := cmd.Wait()
		closeLog()
		a.done <- err
	}()
	store := service.Store{Dir: state}
	return waitStarted(ctx, "sqm daemon", a.done, daemonStartTimeout, func() (bool, error) {
		st, err := store.Autorate(a.iface)
		switch {
		case err != nil:
			return false, fmt.Errorf("sqm daemon's autorate status: %w", err)
		case st != nil && st.Error != "" && !st.Running:
			return false, fmt.Errorf("sqm daemon's autorate did not start: %s", st.Error)
		}
		return st != nil && st.Running, nil
	}, a.tail)
}

// tail is the end of the daemon's log, for an error.
func (a *sqmAutorate) tail() string {
	b, _ := os.ReadFile(filepath.Join(a.work, "log"))
	if len(b) > 1500 {
		b = b[len(b)-1500:]
	}
	return "[daemon log] " + strings.TrimSpace(string(b))
}

// kill ends the daemon's process group and waits for it.
func (a *sqmAutorate) kill() {
	if a.cmd == nil {
		return
	}
	_ = syscall.Kill(-a.cmd.Process.Pid, syscall.SIGKILL)
	<-a.done
	<-a.logDone
	a.cmd = nil
}

// Stop ends the daemon as its service does (SIGTERM: the loop puts the
// base rates back and the daemon exits, leaving the tree, which the lab
// removes). Its rate changes are what its status file said last (written
// as each change is made); its CPU time and peak RSS are wait4's.
func (a *sqmAutorate) Stop() (ControlStats, error) {
	if a.cmd == nil {
		return ControlStats{}, nil
	}
	defer func() {
		os.RemoveAll(a.work)
		a.cmd = nil
	}()
	st, serr := (&service.Store{Dir: filepath.Join(a.work, "state")}).Autorate(a.iface)
	cs, werr, killed := endProcess(a.cmd, a.done)
	if killed && werr == nil {
		werr = errors.New("killed: not ended 20 s after SIGTERM")
	}
	<-a.logDone
	switch {
	case werr != nil:
		return cs, fmt.Errorf("sqm daemon: %v: %s", werr, a.tail())
	case serr != nil:
		return cs, serr
	case st == nil:
		return cs, errors.New("sqm daemon wrote no autorate status")
	case st.Error != "":
		return cs, fmt.Errorf("sqm daemon's autorate: %s", st.Error)
	}
	cs.RateChanges = int(st.RateChanges)
	return cs, nil
}
