package cli

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"sqm/internal/config"
	"sqm/internal/plan"
	"sqm/internal/units"
)

// These helpers serve the shaping commands and `sqm plan`; plan only reads
// the config, so they build on every OS, unlike start.go's kernel session.

// Defaults shared by the shaping commands.
const (
	defaultConfig   = "/etc/config/sqm"
	defaultStateDir = "/run/sqm"
	lockWait        = 10 * time.Second
)

// stateDirFlag registers --state-dir; the value is resolved by stateDir.
func stateDirFlag(fs *flag.FlagSet) {
	fs.String("state-dir", "", "`dir` to keep sqm's state, lock and debug logs in (default $SQM_STATE_DIR, else "+defaultStateDir+", or /var/run/sqm where there is no /run); it must be root's or yours and writable by nobody else")
}

func configFlag(fs *flag.FlagSet) {
	fs.String("config", defaultConfig, "UCI config `file` with 'config queue' sections")
}

func flagString(fs *flag.FlagSet, name string) string {
	if f := fs.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}

func flagBool(fs *flag.FlagSet, name string) bool {
	return flagString(fs, name) == "true"
}

// stateDir is --state-dir, else $SQM_STATE_DIR, else /run/sqm.
func stateDir(env *Env, fs *flag.FlagSet) string {
	if d := flagString(fs, "state-dir"); d != "" {
		return d
	}
	if d := env.Getenv("SQM_STATE_DIR"); d != "" {
		return d
	}
	// OpenWrt has no /run (its tmpfs is /var/run -> /tmp/run); there the
	// init script, the hotplug hook and a user's `sqm status` must agree.
	if _, err := os.Stat("/run"); err != nil {
		return "/var/run/sqm"
	}
	return defaultStateDir
}

// buildPlan is the service's planner: the real recipes at the interface's
// MTU.
func buildPlan(q *config.Queue, mtu int) (*plan.Plan, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	return plan.Build(q, plan.Env{MTU: mtu})
}

// loadConfig reads the UCI file and prints its warnings (options sqm-scripts
// would silently ignore) to stderr. As config.Load, it returns the File
// even when some sections are refused (the error is then f.Err()):
// commands that shape what they can go on with f.Queues and f.Refused
// and fail only when f is nil; those that need the whole file check err.
func loadConfig(env *Env, path string) (*config.File, error) {
	f, err := config.Load(path)
	if f == nil {
		return nil, err
	}
	for _, w := range f.Warnings {
		fmt.Fprintf(env.Stderr, "warning: %s\n", w)
	}
	return f, err
}

// rateHelp is how every rate flag's help says what it takes.
const rateHelp = "a rate with a unit (20mbit, 830kbit, 1gbit; a bare number other than 0 is refused)"

// rateFlag parses the rate flag name (without dashes) and returns bit/s.
// tc reads a bare number as bit/s, but the config file's download and
// upload are kbit/s: an sqm-scripts user typing the number they know
// (--down 90000) would shape at 90 kbit/s, a trickle. So a bare number
// other than 0 is refused, with both spellings it may have meant.
func rateFlag(name, v string) (uint64, error) {
	bits, err := units.ParseRate(v)
	if err != nil {
		return 0, usageError("--%s: %v", name, err)
	}
	if bits != 0 && strings.TrimLeft(v, "0123456789.eE+-") == "" {
		return 0, usageError("--%s %s has no unit: write %skbit for kbit/s (as the config file's '%s' means) or %sbit for bit/s (as tc reads a bare number)", name, v, v, v, v)
	}
	return bits, nil
}
