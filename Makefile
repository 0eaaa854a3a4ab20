# sqm build and test entry points. `make test` is what CI runs (as root):
# setup, gofmt, go vet, host tests, the TestVM* tests inside qemu, then the
# router CPUs: mipsel and armv7 VMs, and big-endian MIPS under qemu-user.

GO      ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X sqm/internal/cli.Version=$(VERSION)
GOFILES  = $(shell find . -name '*.go' -not -path './.cache/*' -not -path '*/testdata/*' -not -path './dist/*' -not -path './bin/*')

.PHONY: all build setup test fmt vet bpf bpfcheck cross unit vmtest demo sizes router full clean install install-openwrt fresh-check bench-tune bench-policer bench-web bench-autorate

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sqm ./cmd/sqm

setup:
	scripts/setup.sh

test: setup fmt vet bpfcheck cross unit vmtest routervm bigendian

fmt:
	@out=$$(gofmt -l $(GOFILES)); \
	if [ -n "$$out" ]; then echo "gofmt: these files need 'gofmt -w':"; echo "$$out"; exit 1; fi; \
	echo "gofmt: ok"

vet:
	$(GO) vet ./...

# The eBPF objects embedded in sqm (committed, so building needs no clang):
# bpf rebuilds them from their C source, bpfcheck fails if the committed
# ones are not what clang makes of it (scripts/check-bpf.sh).
bpf:
	scripts/check-bpf.sh -w

bpfcheck:
	scripts/check-bpf.sh

# Host tests; as root the ones needing namespaces and the host kernel run too.
# -count=1: a second `make test` in the same checkout must run them again,
# not print Go's cached results (a repeated run is how flakes are counted).
unit:
	$(GO) test -count=1 ./...

# TestVM* tests in one qemu VM on Debian's kernel (see docs/testing.md).
vmtest:
	$(GO) run ./tools/vmtest

# The router CPUs (issue 24): sqm's router build in a mipsel (Malta 24Kc)
# and an ARMv7 (virt Cortex-A15) VM on Debian's kernels, a smoke on a veth
# and the daemon's peak RSS (tools/routervm, docs/testing.md). The first
# run downloads the kernels into /var/cache/sqm-routervm.
.PHONY: routervm bigendian
routervm:
	$(GO) run ./tools/routervm -tags '$(SQM_ROUTER_TAGS)' -gcflags '$(SQM_ROUTER_GCFLAGS)'

# Big-endian MIPS (ath79, mips_24kc), which Debian has no kernel for: the
# unit tests of the packages that encode and decode bytes run as GOARCH=mips
# binaries under qemu-user. Root tests skip there (qemu-user translates
# neither netlink nor bpf(2): testutil.QEMUUserEnv). BE_KNOWN_FAIL is a
# go test -skip pattern for failures known and reported, none today.
BE_PKGS = ./internal/kernel/... ./internal/codelpolice/... ./internal/uci/... ./internal/config/... ./internal/metrics/... ./internal/plan/... ./internal/linkwatch/... \
	./internal/netlink/... ./internal/nlattr/... ./internal/rtlink/... ./internal/json/... ./internal/logger/... ./internal/httpd/... \
	./internal/reflector/... ./internal/bloat/probewire/... ./internal/irtt/... ./internal/netperf/...
BE_KNOWN_FAIL ?=
bigendian:
	@if [ -n '$(BE_KNOWN_FAIL)' ]; then echo "bigendian: skipping known big-endian failures: $(BE_KNOWN_FAIL)"; fi
	SQM_QEMU_USER=1 CGO_ENABLED=0 GOARCH=mips GOMIPS=softfloat $(GO) test -count=1 -exec qemu-mips-static $(if $(BE_KNOWN_FAIL),-skip '$(BE_KNOWN_FAIL)') $(BE_PKGS)

# The lab: an emulated bloated link, measured without and with sqm. Where
# the kernel lacks netem or cake (like the development machines'), the lab
# runs inside the VM (`sqm lab --vm`).
demo: setup build
	@if modprobe -q sch_netem 2>/dev/null && modprobe -q sch_cake 2>/dev/null; then \
		bin/sqm lab; else bin/sqm lab --vm; fi

# Stripped static binaries for the router targets, in three builds side by
# side (scripts/sizes.sh): the developer build (`make build`), sqm-full and
# sqm, the two OpenWrt packages, with dist/build.mk's tags, flags and
# budgets (the file dist/openwrt/Makefile builds from). Fails when a
# package is over its budget on a target. `make router` and `make full`
# build only that package.
include dist/build.mk
SIZE_TARGETS = linux/mipsle/softfloat linux/mips/softfloat linux/arm/7 linux/arm64 linux/amd64
SIZES_ENV    = GO='$(GO)' LDFLAGS='$(SQM_GO_LDFLAGS) -X sqm/internal/cli.Version=$(VERSION)' SIZE_TARGETS='$(SIZE_TARGETS)' \
	ROUTER_TAGS='$(SQM_ROUTER_TAGS)' ROUTER_GCFLAGS='$(SQM_ROUTER_GCFLAGS)' ROUTER_BUDGET='$(SQM_ROUTER_BUDGET)' \
	FULL_TAGS='$(SQM_FULL_TAGS)' FULL_GCFLAGS='$(SQM_FULL_GCFLAGS)' FULL_BUDGET='$(SQM_FULL_BUDGET)'

sizes:
	@$(SIZES_ENV) scripts/sizes.sh

router:
	@$(SIZES_ENV) BUILDS=router scripts/sizes.sh

full:
	@$(SIZES_ENV) BUILDS=full scripts/sizes.sh

# The tester (sqm test, sqm server) for the machines people test from, and
# the Linux builds: compile-only (nothing but Linux runs here), so CI sees
# when a Linux-only import or syscall leaks into the portable commands.
CROSS_TARGETS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64

CROSS_VET = ./internal/bloat/... ./internal/stats ./internal/report ./internal/plot ./internal/units ./internal/iperf3/... ./internal/irtt ./internal/rpm ./internal/netperf ./internal/reflector ./internal/trace ./internal/cli

cross:
	@mkdir -p bin/cross
	@set -e; for t in $(CROSS_TARGETS); do \
		os=$${t%/*}; arch=$${t#*/}; ext=; [ $$os = windows ] && ext=.exe; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/cross/sqm-$$os-$$arch$$ext ./cmd/sqm; \
		echo "cross: $$t ok"; \
	done
	@# The tester's packages and their tests must build where people test
	@# from (darwin/freebsd socket code compiles only under its GOOS).
	@set -e; for os in darwin freebsd windows; do GOOS=$$os GOARCH=amd64 $(GO) vet $(CROSS_VET); done; echo "cross: go vet of the tester's packages for darwin, freebsd, windows ok"

clean:
	rm -rf bin

# Issue 12's acceptance runs: `sqm lab --vm --tune` on six emulated links
# tune is not told about, judged against the oracle and the criteria
# (tools/tunebench); 45 to 60 minutes of VM time. Not part of `make test`.
# On a shared machine: flock /tmp/sqm-vm.lock make bench-tune
bench-tune: build
	$(GO) run ./tools/tunebench -sqm bin/sqm -out bench-out/tune

# Issue 13's burst question: the police bucket and codel_police's hard
# limit swept against cake on an IFB in `sqm lab --vm --mode rrul`, three
# lines (tools/policersweep); 1 to 3 minutes of VM time per run, 11 runs
# a line. Each run takes the VM lock itself. Not part of `make test`.
# Issue 26's side by side (tools/autoratebench): on each capacity trace, in
# the VM lab, a fixed-rate sweep, sqm's autorate and lynxthecat's
# cake-autorate from the checkout given (never fetched or committed here;
# it runs under the host's bash 5 with fping); MAHIMAHI=DIR adds mahimahi's
# cellular traces. 25 VM runs of 30-100 s (about 35 minutes). Not part of
# `make test`.
# ICMP_AHEAD=1 runs every trace with ICMP queued ahead of the modem's FIFO
# (sqm lab --icmp-ahead), into bench-out/autorate-icmp; NO_LOAD=1 runs the
# two controllers on each trace without load (their idle CPU), into
# bench-out/autorate-idle.
#   flock /tmp/sqm-vm.lock make bench-autorate CAKE_AUTORATE=DIR [MAHIMAHI=DIR] [ICMP_AHEAD=1 | NO_LOAD=1]
bench-autorate: build
	@[ -n "$(CAKE_AUTORATE)" ] || { echo "bench-autorate: give CAKE_AUTORATE=DIR, a lynxthecat/cake-autorate checkout"; exit 2; }
	$(GO) run ./tools/autoratebench -sqm bin/sqm -cake-autorate '$(CAKE_AUTORATE)' $(if $(MAHIMAHI),-mahimahi '$(MAHIMAHI)') $(if $(ICMP_AHEAD),-icmp-ahead -out bench-out/autorate-icmp,$(if $(NO_LOAD),-no-load -out bench-out/autorate-idle,-out bench-out/autorate))

bench-policer: build
	$(GO) run ./tools/policersweep -sqm bin/sqm -out bench-out/policer

# Issue 24's CPU cost of each host-kernel ingress recipe: one TCP stream
# through none, codel_police (flow-aware, flow-blind) and htb+IFB at 100,
# 500 and 1000 Mbit/s, arrivals paced by an htb at 1.1x the rate and then
# unpaced (scripts/bench-cpu.sh; root, about 7 minutes, one CPU). Prints
# the table for docs/codel-police.md; run it on an idle host.
.PHONY: bench-cpu
bench-cpu:
	sh scripts/bench-cpu.sh -m both

# The web page under load (issue 25; root, namespaces on the host): 1,000
# stalled connections and a password guesser, the admin's login within 1 s.
bench-web:
	SQM_WEB_LOAD_CONNS=1000 SQM_WEB_LOAD_BENCH=1 $(GO) test -count=1 -v -run '^TestWebUnderLoad$$' ./internal/web

# `make demo` and `make test` as a newcomer runs them: on a fresh Debian 12
# root (debootstrap, cached), Go copied in, HEAD cloned, as root in a
# chroot. Boots VMs: on a shared machine, `flock /tmp/sqm-vm.lock make
# fresh-check`. See scripts/fresh-check.sh and docs/testing.md.
fresh-check:
	scripts/fresh-check.sh

# Install the binary, the systemd units and (only if absent) the sample
# config under DESTDIR, e.g. `make install DESTDIR=/tmp/pkg` for a package.
# The units are rewritten to name $(SBINDIR)/sqm and $(SYSCONFDIR)/config/sqm.
# See dist/README.md.
PREFIX     ?= /usr
SBINDIR    ?= $(PREFIX)/sbin
SYSTEMDDIR ?= /lib/systemd/system
SYSCONFDIR ?= /etc
MANDIR     ?= $(PREFIX)/share/man

install: build
	install -d -m 0755 $(DESTDIR)$(SBINDIR) $(DESTDIR)$(SYSTEMDDIR) $(DESTDIR)$(SYSCONFDIR)/config $(DESTDIR)$(MANDIR)/man8
	install -m 0755 bin/sqm $(DESTDIR)$(SBINDIR)/sqm
	install -m 0644 dist/sqm.8 $(DESTDIR)$(MANDIR)/man8/sqm.8
	for u in sqm.service sqm@.service; do \
		sed -e 's|/usr/sbin/sqm|$(SBINDIR)/sqm|g' -e 's|/etc/config/sqm|$(SYSCONFDIR)/config/sqm|g' dist/systemd/$$u > $(DESTDIR)$(SYSTEMDDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(SYSTEMDDIR)/$$u || exit 1; \
	done
	[ -e $(DESTDIR)$(SYSCONFDIR)/config/sqm ] || install -m 0644 dist/openwrt/sqm.config $(DESTDIR)$(SYSCONFDIR)/config/sqm

# The OpenWrt procd init script and hotplug hook (binary and config as above),
# and the recipe files luci-app-sqm lists (dist/openwrt/Makefile installs the same).
install-openwrt: build
	install -d -m 0755 $(DESTDIR)/usr/sbin $(DESTDIR)/etc/init.d $(DESTDIR)/etc/hotplug.d/iface $(DESTDIR)/etc/config
	install -m 0755 bin/sqm $(DESTDIR)/usr/sbin/sqm
	install -m 0755 dist/openwrt/sqm.init $(DESTDIR)/etc/init.d/sqm
	install -m 0644 dist/openwrt/sqm.hotplug $(DESTDIR)/etc/hotplug.d/iface/11-sqm
	[ -e $(DESTDIR)/etc/config/sqm ] || install -m 0644 dist/openwrt/sqm.config $(DESTDIR)/etc/config/sqm
	install -d -m 0755 $(DESTDIR)/usr/lib/sqm
	install -m 0644 dist/openwrt/recipes/*.qos dist/openwrt/recipes/*.qos.help $(DESTDIR)/usr/lib/sqm/
