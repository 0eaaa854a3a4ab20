#!/bin/sh
# Installs what `make test` and `make demo` need on a Debian machine, and
# only what is missing, then checks that each tool the tests and the lab run
# is really there. Go itself is expected at /usr/local/go.
#
# Why each package (from an audit of every exec.Command/LookPath in the
# tests, the lab, internal/vm and tools/vmtest):
#   qemu-system-x86    the VM that runs TestVM*, `make vmtest`, `sqm lab --vm`
#   qemu-system-mips   the mipsel router VM (`make routervm`, tools/routervm)
#   qemu-system-arm    the ARMv7 router VM (the same); both VMs' kernels and
#                      busyboxes come from Debian's archive at the first run
#                      (apt-get download, dpkg -x, depmod: apt, dpkg, kmod)
#   qemu-user-static   qemu-mips-static: the big-endian unit tests
#                      (`make bigendian`, go test -exec)
#   linux-image-amd64  the VM's kernel and its modules (cake, fq_codel, netem,
#                      police, 9p); internal/vm.FindKernel reads /boot
#   kmod               /sbin/modprobe: the VM's module autoload wrapper runs
#                      the host root's modprobe; `make demo` probes sch_netem
#   xz-utils zstd      internal/vm decompresses .ko.xz/.ko.zst modules
#   busybox-static     the VM initramfs's only binary, and the ash that
#                      internal/luci runs the OpenWrt init script and hotplug
#                      hook with (OpenWrt's /bin/sh is busybox ash)
#   iproute2           ip and tc: plan/kernel/units/netns/bloat tests
#   iperf3 iputils-ping  the measurement accuracy reference (bloat tests)
#   irtt               `irtt server` answers sqm test --irtt's probes and
#                      `irtt client` is the reference in internal/bloat's irtt
#                      test (the package also enables a service on :2112 on a
#                      systemd machine; the tests run their own in a netns)
#   ethtool            no test runs it (internal/netns switches offloads by
#                      ioctl); kept to inspect offloads by hand
#   netperf            Debian's netperf 2.7.0 (client and netserver): the
#                      server and the reference client of `sqm test
#                      --netperf` in internal/bloat's netperf test. It is in
#                      Debian's non-free component only: apt-non-free.sh
#                      adds that component of the machine's own archive,
#                      pinned so that nothing else comes from it
#                      (the package's netserver service is not needed; the
#                      tests run their own netserver in a netns)
#   flent              TestFlentOpens and the e2e test open our .flent.gz;
#                      internal/netperf runs `flent rrul` against sqm server
#   fping              flent's ICMP pinger (a Recommends of flent): without
#                      it flent falls back to iputils ping, cannot parse its
#                      output and gives up the rrul run before it starts
#                      ("Cannot parse output of the system ping binary"),
#                      writing no data file
#   python3-matplotlib flent's plotting (only a Recommends of flent, so
#                      --no-install-recommends alone leaves flent unable to
#                      plot: "Unable to plot -- matplotlib is missing!")
#   librsvg2-bin       rsvg-convert: the e2e test renders our SVG plots
#   clang              scripts/check-bpf.sh (make bpfcheck) recompiles the
#                      codel_police eBPF program and compares it with the
#                      committed objects (building sqm never needs it)
#   prometheus         promtool checks the metrics output; internal/metrics
#                      starts the server on loopback to scrape /metrics (on a
#                      systemd machine the package also enables its own
#                      service on :9090; the tests do not use it)
#   nginx              the independent HTTP/2+TLS responsiveness server the
#                      rpm tests run `sqm test --rpm` against (internal/rpm)
#   chromium           headless browser for internal/web's page tests
#                      (driven with chromedp; a test-only dependency)
#   fonts-liberation   chromium's fonts are only a Recommends: without them
#                      the page tests' screenshots show no readable text
set -eu

pkgs="qemu-system-x86 qemu-system-mips qemu-system-arm qemu-user-static linux-image-amd64 kmod xz-utils zstd busybox-static iproute2 iperf3 iputils-ping irtt netperf ethtool flent fping python3-matplotlib librsvg2-bin prometheus clang nginx chromium fonts-liberation"

missing=""
for p in $pkgs; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

if [ -z "$missing" ]; then
	echo "setup: all packages present ($pkgs)"
else
	if [ "$(id -u)" -ne 0 ]; then
		echo "setup: missing packages:$missing; run as root (or: sudo apt-get install$missing)" >&2
		exit 1
	fi
	echo "setup: installing$missing"
	export DEBIAN_FRONTEND=noninteractive
	case " $missing " in
	*" netperf "*) "$(dirname "$0")/apt-non-free.sh" /etc/apt ;;
	esac
	# Wait for another apt/dpkg run (unattended-upgrades, a colleague's
	# setup) instead of failing on its lock.
	apt-get -o DPkg::Lock::Timeout=600 update -q
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends $missing
fi

# A package can be "installed" yet not give what the tests run (a partial
# install, a diverted binary, a Recommends that was left out). Check the
# things themselves so a broken set-up fails here, with its name, and not
# as a skipped or puzzling test later.
fail=""
for c in qemu-system-x86_64 qemu-system-mipsel qemu-system-arm qemu-mips-static apt-get dpkg /sbin/depmod /sbin/modprobe busybox ip tc iperf3 ping irtt netperf netserver ethtool flent fping rsvg-convert xz zstd promtool prometheus clang nginx chromium; do
	command -v "$c" >/dev/null 2>&1 || fail="$fail $c"
done
# busybox must have its ash applet: the OpenWrt script tests run it.
if command -v busybox >/dev/null 2>&1 && ! busybox ash -c : >/dev/null 2>&1; then
	fail="$fail busybox-ash(busybox has no working ash applet)"
fi
# Ask the interpreter flent itself runs (its #! line), not whatever python3
# is first in PATH (a pyenv shim, a virtualenv).
if flent=$(command -v flent); then
	py=$(sed -n '1s/^#! *\([^ ]*\).*/\1/p' "$flent")
	"${py:-/usr/bin/python3}" -c 'import matplotlib' 2>/dev/null || fail="$fail python3-matplotlib(${py:-/usr/bin/python3} cannot import it)"
fi
if [ -n "$fail" ]; then
	echo "setup: packages are installed but these are missing or broken:$fail" >&2
	exit 1
fi

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
	echo "setup: no Go toolchain: install Go (go.mod wants 1.26) to /usr/local/go" >&2
	exit 1
fi
