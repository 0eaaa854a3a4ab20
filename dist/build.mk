# The two packages' build tags, Go flags and size budgets, in one place:
# the repository's Makefile (`make sizes`, `make router`, `make full`) and
# dist/openwrt/Makefile both include this file, so the binaries `make
# sizes` measures and checks are built the way the packages build them.
# Plain make assignments only: OpenWrt's buildroot and GNU make in the
# repository must both read it.

# sqm, the router package: shaping, the daemon, luci-app-sqm, codel_police,
# `status --json` and `--prom`. No lab, no tester, no web page (no net/http,
# no TLS: cmd/sqm's TestForbiddenDeps checks), and no autorate
# (sqm_noautorate: the controller, the reflector probes and their wiring
# add 393,216 bytes on mipsle, 3,408,065 -> 3,801,281, over the budget; a
# queue with autorate 1 is shaped at its base rates and says why; sqm-full
# runs it).
SQM_ROUTER_TAGS := sqm_nolab,sqm_notest,sqm_noweb,sqm_noautorate

# sqm-full: also the daemon's page, /metrics over HTTP, sqm test/server
# and tune; no lab or VM harness (netem, veth and qemu are not on a
# router), no PNG pictures (the page draws SVG; `--plot x.svg` works) and
# no TLS (sqm_notls), hence no HTTPS page and no RPM test or server, whose
# HTTP/2 over TLS would take half this package's budget by itself.
SQM_FULL_TAGS := sqm_nolab,sqm_nopng,sqm_notls

# Go flags of both packages (-trimpath is always on; OpenWrt's
# golang-package.mk passes it itself). The GCFLAGS are a whole -gcflags
# argument, e.g. all=-l (no inlining: -11 % on sqm-full, see docs/testing.md),
# or empty.
SQM_GO_LDFLAGS     := -s -w
SQM_ROUTER_GCFLAGS := all=-l
SQM_FULL_GCFLAGS   :=

# Budgets: bytes of the stripped static binary (1 MB = 1,000,000 bytes),
# the same on every target `make sizes` builds, since what they guard is a
# router's free flash, not a CPU; MIPS (softfloat) makes the largest
# binaries, so it is the target that binds. `make sizes` fails, naming the
# target, the package and the excess, when one is over.
#
# 3.5 MB lets sqm fit a 16 MB router beside LuCI; 7.0 MB is what sqm-full
# may take on one with more room (issue 24). On 2026-12-02, mipsle: sqm
# 3,276,993 (223,007 under its budget), sqm-full 6,095,041
# (docs/testing.md, "Package sizes", says what each part costs). Sizes
# move in 64 KiB steps (each of the text, rodata and data segments is
# aligned): sqm had 5,244 bytes of text, 54,080 of rodata and 12,064 of
# data left before the next step, so a feature for the router package
# must pay for itself. Never raise a budget to let a dependency in.
SQM_ROUTER_BUDGET := 3500000
SQM_FULL_BUDGET   := 7000000
