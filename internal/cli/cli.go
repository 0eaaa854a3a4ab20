// Package cli holds sqm's subcommands: each file parses one command's flags
// and calls the packages that do the work. Nothing here talks to the kernel
// directly.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"time"
)

// Version is set at build time with -ldflags "-X sqm/internal/cli.Version=...".
var Version = "dev"

// Env is what a command gets from the process: its arguments' streams and
// environment lookups, so tests can run commands without a process.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
}

type command struct {
	name    string
	summary string // one line for `sqm --help`
	usage   string // synopsis, e.g. "sqm start [--config FILE] [IFACE...]"
	help    string // longer text with an example, shown by `sqm help CMD`
	run     func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error
	// flags registers the command's flags; run is called after parsing.
	flags func(fs *flag.FlagSet)
	// unavailable, if set, is why this binary cannot run the command (see
	// unavailable.go); it is printed instead of running it.
	unavailable string
}

// commands is the table of subcommands, in the order `sqm --help` lists them.
func commands() []*command {
	return []*command{
		cmdStart(), cmdStop(), cmdRestart(), cmdReload(), cmdStatus(), cmdPlan(), cmdApply(),
		cmdDaemon(), cmdQdiscs(), cmdPasswd(),
		cmdServer(), cmdTest(), cmdTune(), cmdLab(),
		cmdVersion(),
	}
}

// errUsage marks errors that should be followed by the command's usage line.
var errUsage = errors.New("usage")

// usageError reports bad command-line input.
func usageError(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// Run runs sqm with args (without the program name) and returns the exit
// status: 0 on success, 1 on any error, 2 for command-line misuse.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &Env{Stdout: stdout, Stderr: stderr, Getenv: os.Getenv}
	return run(ctx, env, args)
}

func run(ctx context.Context, env *Env, args []string) int {
	cmds := commands()
	if len(args) == 0 {
		printOverview(env.Stderr, cmds)
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		printOverview(env.Stdout, cmds)
		return 0
	case "help":
		if len(args) == 2 && args[1] == "--man" {
			writeMan(env.Stdout, cmds)
			return 0
		}
		if len(args) < 2 {
			printOverview(env.Stdout, cmds)
			return 0
		}
		c := find(cmds, args[1])
		if c == nil {
			fmt.Fprintf(env.Stderr, "sqm: unknown command %q; run 'sqm --help' for the list\n", args[1])
			return 2
		}
		printHelp(env.Stdout, c)
		return 0
	case "-v", "--version":
		name = "version"
	}
	c := find(cmds, name)
	if c == nil {
		fmt.Fprintf(env.Stderr, "sqm: unknown command %q; run 'sqm --help' for the list\n", name)
		return 2
	}
	if c.unavailable != "" {
		fmt.Fprintln(env.Stderr, c.unavailable)
		return 1
	}
	fs := flag.NewFlagSet("sqm "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if c.flags != nil {
		c.flags(fs)
	}
	if err := fs.Parse(interleave(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printHelp(env.Stdout, c)
			return 0
		}
		fmt.Fprintf(env.Stderr, "sqm %s: %s\nusage: %s\nrun 'sqm help %s' for details\n", c.name, flagError(err), c.usage, c.name)
		return 2
	}
	if err := c.run(ctx, env, fs, fs.Args()); err != nil {
		if errors.Is(err, errUsage) {
			fmt.Fprintf(env.Stderr, "sqm %s: %s\nusage: %s\n", c.name, strings.TrimPrefix(err.Error(), "usage: "), c.usage)
			return 2
		}
		fmt.Fprintf(env.Stderr, "sqm %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// interleave moves flags after positional arguments to the front, so that
// `sqm stop eth0 --config x` works like `sqm stop --config x eth0`.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			f := fs.Lookup(name)
			if f == nil {
				continue
			}
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func find(cmds []*command, name string) *command {
	for _, c := range cmds {
		if c.name == name {
			return c
		}
	}
	return nil
}

// overview is what sqm is, for `sqm --help` and the man page.
const overview = `sqm: Smart Queue Management for Linux routers. It ends bufferbloat by making
the router the bottleneck (shaping slightly below the link rate) and managing
that queue with cake or fq_codel, on egress and, through an IFB, on ingress.`

func printOverview(w io.Writer, cmds []*command) {
	fmt.Fprint(w, overview+`

usage: sqm COMMAND [flags] [args]

commands:
`)
	for _, c := range cmds {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Run 'sqm help COMMAND' or 'sqm COMMAND --help' for a command's flags and an example;
'sqm help --man' prints all of it as the sqm(8) manual page.
`)
}

func printHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usage, strings.TrimSpace(c.help))
	docs := flagDocs(c)
	if len(docs) > 0 {
		fmt.Fprint(w, "\nflags:\n")
	}
	for _, d := range docs {
		fmt.Fprintf(w, "  %s\n    \t%s\n", d.synopsis(), strings.ReplaceAll(d.text(), "\n", "\n    \t"))
	}
}

// flagDoc is one flag as the help and the man page describe it.
type flagDoc struct {
	name, arg, usage, def string
}

// synopsis is "--name ARG", the spelling the usage lines and the docs use.
// (flag.PrintDefaults would print "-name", which also works but made the
// help disagree with the usage line above it.)
func (d flagDoc) synopsis() string {
	if d.arg == "" {
		return "--" + d.name
	}
	return "--" + d.name + " " + d.arg
}

// text is the usage with the default appended, as PrintDefaults does.
func (d flagDoc) text() string {
	if d.def == "" {
		return d.usage
	}
	return fmt.Sprintf("%s (default %s)", d.usage, d.def)
}

// flagDocs lists c's flags in name order. Zero defaults ("", 0, false,
// 0s) are not shown, as flag.PrintDefaults omits them.
func flagDocs(c *command) []flagDoc {
	if c.flags == nil {
		return nil
	}
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	c.flags(fs)
	var out []flagDoc
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if g, ok := f.Value.(flag.Getter); ok && arg == "value" {
			if _, ok := g.Get().(time.Duration); ok {
				arg = "duration" // units.DurationVar
			}
		}
		if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
			arg = ""
		}
		// Upper case, as in the usage lines: --config FILE.
		d := flagDoc{name: f.Name, arg: strings.ToUpper(arg), usage: usage}
		switch f.DefValue {
		case "", "0", "false", "0s":
		default:
			d.def = f.DefValue
		}
		out = append(out, d)
	})
	return out
}

// flagError rewrites the flag package's parse errors, which name flags
// with one dash ("invalid value "x" for flag -duration"), to the "--flag"
// spelling the usage lines and the help use.
func flagError(err error) string {
	msg := err.Error()
	for _, p := range []string{"for flag -", "not defined: -", "needs an argument: -"} {
		msg = strings.Replace(msg, p, p+"-", 1)
	}
	return msg
}

func cmdVersion() *command {
	return &command{
		name:    "version",
		summary: "print the version of sqm and of Go it was built with",
		usage:   "sqm version",
		help:    "Prints sqm's version and the Go toolchain version, e.g.\n\n  $ sqm version\n  sqm dev (go1.26.8 linux/amd64)",
		run: func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
			if len(args) > 0 {
				return usageError("version takes no arguments")
			}
			fmt.Fprintf(env.Stdout, "sqm %s (%s %s/%s)\n", Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		},
	}
}
