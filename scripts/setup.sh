#!/bin/sh
# Installs what `make test` needs on a Debian machine, and only what is
# missing: qemu and Debian's full kernel for the VM tests, a static busybox
# for the VM's initramfs, and the traffic tools the lab and the
# measurement tests run. Go itself is expected at /usr/local/go.
set -eu

pkgs="qemu-system-x86 linux-image-amd64 busybox-static iperf3 iputils-ping ethtool flent iproute2"

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
	apt-get update -q
	apt-get install -y -q --no-install-recommends $missing
fi

if ! command -v go >/dev/null 2>&1 && [ ! -x /usr/local/go/bin/go ]; then
	echo "setup: no Go toolchain: install Go (go.mod wants 1.26) to /usr/local/go" >&2
	exit 1
fi
