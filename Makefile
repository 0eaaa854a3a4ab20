# sqm build and test entry points. `make test` is what CI runs (as root):
# setup, gofmt, go vet, host tests, then the TestVM* tests inside qemu.

GO      ?= go
export PATH := /usr/local/go/bin:$(PATH)

VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X sqm/internal/cli.Version=$(VERSION)
GOFILES  = $(shell find . -name '*.go' -not -path './.cache/*' -not -path '*/testdata/*' -not -path './dist/*' -not -path './bin/*')

.PHONY: all build setup test fmt vet bpf bpfcheck unit vmtest demo sizes clean install install-openwrt fresh-check

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sqm ./cmd/sqm

setup:
	scripts/setup.sh

test: setup fmt vet bpfcheck unit vmtest

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
unit:
	$(GO) test ./...

# TestVM* tests in one qemu VM on Debian's kernel (see docs/testing.md).
vmtest:
	$(GO) run ./tools/vmtest

# The lab: an emulated bloated link, measured without and with sqm. Where
# the kernel lacks netem or cake (like the development machines'), the lab
# runs inside the VM (`sqm lab --vm`).
demo: setup build
	@if modprobe -q sch_netem 2>/dev/null && modprobe -q sch_cake 2>/dev/null; then \
		bin/sqm lab; else bin/sqm lab --vm; fi

# Stripped static binaries for router targets, with their sizes.
SIZE_TARGETS = linux/amd64 linux/arm64 linux/arm/7 linux/mipsle/softfloat

sizes:
	@mkdir -p bin/sizes
	@printf '%-22s %12s %10s %10s\n' target bytes MiB gzip-9
	@set -e; for t in $(SIZE_TARGETS); do \
		os=$${t%%/*}; rest=$${t#*/}; arch=$${rest%%/*}; variant=$${rest#$$arch}; variant=$${variant#/}; \
		env="GOOS=$$os GOARCH=$$arch"; name=$$os-$$arch; \
		case $$arch in arm) env="$$env GOARM=$$variant"; name=$$name-v$$variant;; mips*) env="$$env GOMIPS=$$variant"; name=$$name-$$variant;; esac; \
		env CGO_ENABLED=0 $$env $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/sizes/sqm-$$name ./cmd/sqm; \
		b=$$(stat -c %s bin/sizes/sqm-$$name); z=$$(gzip -9c bin/sizes/sqm-$$name | wc -c); \
		awk -v n=$$name -v b=$$b -v z=$$z 'BEGIN { printf "%-22s %12d %10.2f %10d\n", n, b, b / 1048576, z }'; \
	done

clean:
	rm -rf bin

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
