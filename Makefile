# sqm build and test entry points. `make test` is what CI runs (as root):
# setup, gofmt, go vet, host tests, then the TestVM* tests inside qemu.

GO      ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X sqm/internal/cli.Version=$(VERSION)
GOFILES  = $(shell find . -name '*.go' -not -path './.cache/*' -not -path '*/testdata/*' -not -path './dist/*' -not -path './bin/*')

.PHONY: all build setup test fmt vet bpf bpfcheck cross unit vmtest demo sizes router clean install install-openwrt fresh-check bench-tune bench-policer bench-web

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sqm ./cmd/sqm

setup:
	scripts/setup.sh

test: setup fmt vet bpfcheck cross unit vmtest

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

# The lab: an emulated bloated link, measured without and with sqm. Where
# the kernel lacks netem or cake (like the development machines'), the lab
# runs inside the VM (`sqm lab --vm`).
demo: setup build
	@if modprobe -q sch_netem 2>/dev/null && modprobe -q sch_cake 2>/dev/null; then \
		bin/sqm lab; else bin/sqm lab --vm; fi

# Stripped static binaries for the router targets, full and router builds
# side by side (scripts/sizes.sh). The router build leaves out what a small
# router does not need, by build tag: sqm_nolab (the lab and the VM
# harness); sqm_notest (sqm test/server) and sqm_noweb (the daemon's page,
# which also runs tests, so the tester stays while the page does) go
# further, as in the "minimal" column. `make router` builds only that one.
SIZE_TARGETS = linux/amd64 linux/arm64 linux/arm/7 linux/mipsle/softfloat
ROUTER_TAGS ?= sqm_nolab
MIN_TAGS    ?= sqm_nolab,sqm_notest,sqm_noweb
SIZES_ENV    = GO='$(GO)' LDFLAGS='$(LDFLAGS)' SIZE_TARGETS='$(SIZE_TARGETS)' ROUTER_TAGS='$(ROUTER_TAGS)' MIN_TAGS='$(MIN_TAGS)'

sizes:
	@$(SIZES_ENV) scripts/sizes.sh

router:
	@$(SIZES_ENV) BUILDS=router scripts/sizes.sh

# The tester (sqm test, sqm server) for the machines people test from, and
# the Linux builds: compile-only (nothing but Linux runs here), so CI sees
# when a Linux-only import or syscall leaks into the portable commands.
CROSS_TARGETS = linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64 freebsd/amd64 freebsd/arm64

CROSS_VET = ./internal/bloat/... ./internal/stats ./internal/report ./internal/plot ./internal/units ./internal/iperf3/... ./internal/irtt ./internal/rpm ./internal/cli

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
bench-policer: build
	$(GO) run ./tools/policersweep -sqm bin/sqm -out bench-out/policer

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
