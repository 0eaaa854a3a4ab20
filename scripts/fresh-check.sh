#!/bin/sh
# fresh-check: runs `make demo` and `make test` the way a newcomer would,
# on a freshly built Debian 12 root, so that a missing package, a file only
# the developers' machines have, or a step the README forgets shows up here
# and not on someone else's first try.
#
# It builds a minimal bookworm root with debootstrap (variant minbase, plus
# git, make and ca-certificates: what one needs to clone and type `make`)
# from the apt source this machine is configured with, copies the Go
# toolchain from /usr/local/go into it, clones the repository's current
# HEAD to /root/sqm inside, and runs `make demo` then `make test` there as
# root, in a chroot with its own mount and PID namespaces (proc, sys and
# dev mounted; everything it started dies with it).
#
# The debootstrap result is cached as a tarball (debootstrap is the slow,
# network-bound part); every run unpacks it into a new directory, so each
# check starts from a pristine root. Nothing the previous run installed
# (apt packages, Go module and build caches) is carried over.
#
# It boots VMs (the demo and the VM tests), so on a shared machine run it as
#   flock /tmp/sqm-vm.lock make fresh-check
# (it does not take that lock itself, so that wrapping it cannot deadlock).
#
# Environment:
#   SQM_FRESH_MIRROR   debootstrap mirror (default: the URI of the first
#                      enabled "bookworm" entry in /etc/apt/sources.list*)
#   SQM_FRESH_CACHE    where the root tarball is kept (/var/cache/sqm-fresh-check)
#   SQM_FRESH_REBUILD  1: debootstrap again even if the tarball exists
#   SQM_FRESH_KEEP     1: keep the work directory (the root) afterwards
#   SQM_FRESH_STEPS    what to run inside (default "demo test"; "test" for
#                      only the tests; "setup" for only scripts/setup.sh,
#                      the quick check of a change to what it installs;
#                      empty: only build and enter the root)
set -eu

repo=$(cd "$(dirname "$0")/.." && pwd)
suite=bookworm
include=git,make,ca-certificates
cache=${SQM_FRESH_CACHE:-/var/cache/sqm-fresh-check}
steps=${SQM_FRESH_STEPS-demo test}

say() { echo "fresh-check: $*"; }
die() {
	echo "fresh-check: $*" >&2
	exit 1
}

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot, mounts)"
for s in $steps; do
	case $s in setup | demo | test) ;; *) die "SQM_FRESH_STEPS: unknown step \"$s\" (want setup, demo and/or test)" ;; esac
done
[ -x /usr/local/go/bin/go ] || die "no Go toolchain at /usr/local/go to copy into the root"
command -v unshare >/dev/null || die "unshare (util-linux) not found"

# aptsources prints "URI SUITE COMPONENTS..." for every enabled deb entry of
# this machine's apt configuration, from both the one-line (.list) and the
# deb822 (.sources) formats. It leaves out the source scripts/apt-non-free.sh
# writes (sqm-non-free.sources): a fresh machine has not run setup.sh yet,
# so its root must not start with the non-free component that setup adds.
aptsources() {
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] URI SUITE COMPONENTS...
		sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 {
			line = $2 " " $3; for (i = 4; i <= NF; i++) line = line " " $i; print line }'
	done
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		[ "${f##*/}" = sqm-non-free.sources ] && continue
		awk '
		function flush() {
			if (types ~ /(^| )deb( |$)/ && enabled != "no")
				for (u = 1; u <= nu; u++) for (s = 1; s <= ns; s++) print uri[u], suite[s], comps
			types = ""; enabled = ""; comps = ""; nu = 0; ns = 0
		}
		/^[ \t]*#/ { next }
		/^[ \t]*$/ { flush(); next }
		{
			key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
			if (key == "types") types = $0
			else if (key == "enabled") enabled = tolower($0)
			else if (key == "components") comps = $0
			else if (key == "uris") nu = split($0, uri, " ")
			else if (key == "suites") ns = split($0, suite, " ")
		}
		END { flush() }' "$f"
	done
}

mirror=${SQM_FRESH_MIRROR:-$(aptsources | awk -v s="$suite" '$2 == s { print $1; exit }')}
[ -n "$mirror" ] || die "no enabled \"deb ... $suite\" entry in /etc/apt/sources.list* to debootstrap from; set SQM_FRESH_MIRROR"

if ! command -v debootstrap >/dev/null; then
	say "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends debootstrap
fi

# The cache key names everything the tarball depends on, so a changed
# mirror or package list never reuses an old root.
key=$(printf '%s %s %s %s\n' "$suite" minbase "$include" "$mirror" | sha256sum | cut -c1-12)
tarball=$cache/$suite-minbase-$key.tar
mkdir -p "$cache"
t0=$(date +%s)
if [ ! -s "$tarball" ] || [ "${SQM_FRESH_REBUILD:-0}" = 1 ]; then
	say "debootstrap $suite (minbase + $include) from $mirror"
	build=$(mktemp -d "$cache/build.XXXXXX")
	if ! debootstrap --variant=minbase --include="$include" "$suite" "$build" "$mirror" >"$build.log" 2>&1; then
		tail -n 30 "$build.log" >&2
		rm -rf --one-file-system "$build"
		die "debootstrap failed (log: $build.log)"
	fi
	chmod 0755 "$build"
	tar -C "$build" --numeric-owner -cf "$tarball.tmp" .
	mv "$tarball.tmp" "$tarball"
	rm -rf --one-file-system "$build" "$build.log"
	say "root cached as $tarball ($(($(date +%s) - t0)) s)"
else
	say "using cached root $tarball (SQM_FRESH_REBUILD=1 to rebuild)"
fi

sha=$(git -C "$repo" rev-parse HEAD)
if [ -n "$(git -C "$repo" status --porcelain --untracked-files=no)" ]; then
	say "note: $repo has uncommitted changes; only the committed HEAD is checked"
fi

work=$(mktemp -d /var/tmp/sqm-fresh.XXXXXX)
root=$work/root
cleanup() {
	# The mounts live in the chroot's private mount namespace and vanish
	# with it; refuse to delete anything if one is still visible here, so
	# a bind mount of /dev or /sys can never be recursed into.
	if grep -q " $work/" /proc/self/mountinfo; then
		echo "fresh-check: mounts still under $work; not removing it" >&2
	elif [ "${SQM_FRESH_KEEP:-0}" = 1 ]; then
		say "kept $work"
	else
		rm -rf --one-file-system "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mkdir "$root"
tar -C "$root" --numeric-owner -xpf "$tarball"
# / is 0755 on a machine; mktemp -d made the debootstrap target 0700 (and
# tar -p restores that), which locks every non-root user, apt's _apt
# included, out of the whole root.
chmod 0755 "$root"
cp -a /usr/local/go "$root/usr/local/go"
# The chroot shares this machine's network (apt and the Go module proxy
# need it), so it takes its resolver configuration.
cat /etc/resolv.conf >"$root/etc/resolv.conf"
aptsources | awk -v s="$suite" '$2 == s || index($2, s "-") == 1 { print "deb " $0 }' >"$root/etc/apt/sources.list"
# Certificate authorities this machine trusts beyond Debian's (a
# TLS-inspecting proxy's, say) go in as local CAs, so the Go module
# downloads reach the proxy as they do here; update-ca-certificates keeps
# them when a package later rebuilds the bundle.
bundle=/etc/ssl/certs/ca-certificates.crt
if [ -s "$bundle" ] && [ -s "$root$bundle" ]; then
	mkdir -p "$root/usr/local/share/ca-certificates"
	n=$(awk -v dir="$root/usr/local/share/ca-certificates" '
		/-----BEGIN CERTIFICATE-----/ { pem = "" }
		{ pem = pem $0 "\n" }
		/-----END CERTIFICATE-----/ {
			if (FILENAME == ARGV[1]) known[pem] = 1
			else if (!(pem in known)) { n++; f = dir "/sqm-fresh-host-" n ".crt"; printf "%s", pem > f; close(f) }
		}
		END { print n + 0 }' "$root$bundle" "$bundle")
	if [ "$n" -gt 0 ]; then
		chroot "$root" update-ca-certificates >/dev/null
		say "added $n CA certificate(s) this machine trusts beyond Debian's"
	fi
fi
git clone -q --no-hardlinks "$repo" "$root/root/sqm"
git -C "$root/root/sqm" checkout -q --detach "$sha"
say "root ready in $work ($(du -sh "$root" | cut -f1)); checking $(git -C "$repo" log -1 --format='%h %s' "$sha")"

# Inside: as root, in /root/sqm, with the environment of a login shell on
# a new machine (no GOPATH, no Go caches, /usr/local/go/bin not in PATH:
# the Makefile must find Go itself).
inner='
rc=0
for s in '"$steps"'; do
	t=$(date +%s)
	echo "fresh-check: === make $s ==="
	if make "$s"; then r=0; else r=$?; rc=1; fi
	echo "fresh-check: === make $s: exit $r after $(( $(date +%s) - t )) s ==="
done
exit $rc
'
t1=$(date +%s)
# The output also goes to a log next to the work directory (kept after
# it is removed), from which the failures are summarised at the end.
log=$work.log
set +e
{
	unshare --mount --propagation private --pid --fork --kill-child -- sh -euc '
	r=$1
	# The root must be a mount point, as / is on a machine: `ip netns exec`
	# runs `mount --make-rslave /`, which fails with EINVAL on a plain
	# directory.
	mount --bind "$r" "$r"
	mount -t proc proc "$r/proc"
	mount --rbind /sys "$r/sys" && mount --make-rslave "$r/sys"
	mount --rbind /dev "$r/dev" && mount --make-rslave "$r/dev"
	mount -t tmpfs -o mode=0755 tmpfs "$r/run"
	mount -t tmpfs -o mode=1777 tmpfs "$r/tmp"
	exec chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		/bin/sh -c "cd /root/sqm && $2"
' fresh-check "$root" "$inner"
	echo $? >"$work/rc"
} 2>&1 | tee "$log"
rc=$(cat "$work/rc" 2>/dev/null || echo 1)
set -e
if [ "$rc" -ne 0 ]; then
	say "failures (full output in $log):"
	grep -E '^[[:space:]]*--- FAIL|^FAIL[[:space:]]|^make(\[[0-9]+\])?: \*\*\*|^fresh-check: === make .*: exit [1-9]' "$log" | sed 's/^/  /' || true
fi
say "$steps: $([ "$rc" -eq 0 ] && echo PASS || echo "FAIL (exit $rc)") in $(($(date +%s) - t1)) s; total $(($(date +%s) - t0)) s; commit $sha"
exit $rc
