package cli

import (
	"fmt"
	"runtime"
)

// Some commands cannot be in every binary: the shaping commands talk to
// Linux's netlink, and the packages leave parts out with build tags
// (dist/build.mk's SQM_ROUTER_TAGS and SQM_FULL_TAGS). Such a command
// keeps its place in the table as a stand-in, so `sqm --help` still lists
// it and calling it says why it cannot run, rather than "unknown
// command". A stand-in has no flags and accepts any arguments: the
// message comes before flag parsing.
//
// The pattern for a new optional part, e.g. a tag sqm_noweb: put
// `//go:build !sqm_noweb` on the command's file (`linux && !sqm_noweb` if
// it needs Linux), and add a file with the opposite constraint whose
// constructor returns omitted("web", "sqm_noweb") (linuxPart for a Linux
// one), as lab_omitted.go does. Add the tag to a package's tags in
// dist/build.mk and to TestBuildTags (build_test.go), which builds and
// runs each such binary.
//
// Stand-ins repeat neither the real summary nor the usage, so nothing
// needs keeping in step: the real command's file is simply not compiled.

// needsLinux is the stand-in for a command that only Linux can run.
func needsLinux(name string) *command {
	return standIn(name, "(needs Linux)", fmt.Sprintf("sqm %s needs Linux (this is %s)", name, runtime.GOOS))
}

// omitted is the stand-in for a command left out of this build by tag.
func omitted(name, tag string) *command {
	return standIn(name, "(not in this build)", fmt.Sprintf("sqm %s is not in this build (built with -tags %s)", name, tag))
}

// linuxPart is the stand-in for a Linux-only command that a tag can also
// leave out: off Linux, needing Linux is the reason given.
func linuxPart(name, tag string) *command {
	if runtime.GOOS != "linux" {
		return needsLinux(name)
	}
	return omitted(name, tag)
}

func standIn(name, summary, why string) *command {
	return &command{
		name:        name,
		summary:     summary,
		usage:       "sqm " + name,
		help:        why + ".",
		unavailable: why,
	}
}
