#!/bin/sh
# Stripped static sqm binaries for the router targets, in three builds:
#   developer  what `make build` makes (the lab included; no budget);
#   sqm-full   the sqm-full package: -tags $FULL_TAGS;
#   sqm        the sqm package (the router build): -tags $ROUTER_TAGS.
# Prints bytes and gzip -9 bytes (roughly what squashfs stores) of each,
# then checks each package against its budget in bytes ($FULL_BUDGET,
# $ROUTER_BUDGET; empty means none) on every target, and exits 1 naming
# each target and package that is over, and by how much. A size is
# deterministic for a given Go and source, so this is a check, not a
# measurement.
#
# `make sizes` and `make router` call it with the tags, flags and budgets
# of dist/build.mk (the ones dist/openwrt/Makefile builds with). MAIN
# (default ./cmd/sqm) is the package built: cmd/sqm's TestSizesCheck points
# it at a small program to show the check fails. Binaries land in $OUT
# (default bin/sizes).
set -e
GO=${GO:-go}
MAIN=${MAIN:-./cmd/sqm}
OUT=${OUT:-bin/sizes}
ROUTER_TAGS=${ROUTER_TAGS-sqm_nolab,sqm_notest,sqm_noweb,sqm_noautorate}
FULL_TAGS=${FULL_TAGS-sqm_nolab,sqm_nopng,sqm_notls}
DEV_TAGS=${DEV_TAGS-}
TARGETS=${SIZE_TARGETS:-linux/mipsle/softfloat linux/mips/softfloat linux/arm/7 linux/arm64 linux/amd64}
BUILDS=${BUILDS:-developer full router}
mkdir -p "$OUT"

# label, tags, gcflags and budget of a build
label() { case $1 in developer) echo developer ;; full) echo sqm-full ;; router) echo sqm ;; *) echo "sizes: unknown build $1 (developer, full or router)" >&2; exit 2 ;; esac; }
tags() { case $1 in developer) echo "$DEV_TAGS" ;; full) echo "$FULL_TAGS" ;; router) echo "$ROUTER_TAGS" ;; esac; }
gcflags() { case $1 in developer) echo "$DEV_GCFLAGS" ;; full) echo "$FULL_GCFLAGS" ;; router) echo "$ROUTER_GCFLAGS" ;; esac; }
budget() { case $1 in full) echo "$FULL_BUDGET" ;; router) echo "$ROUTER_BUDGET" ;; esac; }

for b in $BUILDS; do
	l=$(label "$b")
	bud=$(budget "$b")
	case $bud in *[!0-9]*) echo "sizes: $l budget '$bud' is not a number of bytes" >&2; exit 2 ;; esac
	echo "$l: -tags '$(tags "$b")' -gcflags '$(gcflags "$b")' -ldflags '$LDFLAGS', budget ${bud:-none}"
done
printf '%-24s' target
for b in $BUILDS; do printf ' %10s %9s' "$(label "$b")" gzip-9; done
echo

over=
for t in $TARGETS; do
	os=${t%%/*} rest=${t#*/}
	arch=${rest%%/*} variant=${rest#"$arch"}
	variant=${variant#/}
	name=$os-$arch
	set -- GOOS=$os GOARCH=$arch
	case $arch in
	arm) set -- "$@" GOARM=$variant; name=$name-v$variant ;;
	mips*) set -- "$@" GOMIPS=$variant; name=$name-$variant ;;
	esac
	printf '%-24s' "$name"
	for b in $BUILDS; do
		out=$OUT/sqm-$name-$(label "$b")
		env CGO_ENABLED=0 "$@" "$GO" build -trimpath -tags "$(tags "$b")" -gcflags "$(gcflags "$b")" -ldflags "$LDFLAGS" -o "$out" "$MAIN"
		size=$(stat -c %s "$out")
		mark=' '
		bud=$(budget "$b")
		if [ -n "$bud" ] && [ "$size" -gt "$bud" ]; then
			mark='!'
			over="$over$t $(label "$b"): $size bytes, $((size - bud)) over its budget of $bud
"
		fi
		printf ' %9d%s %9d' "$size" "$mark" "$(gzip -9c "$out" | wc -c)"
	done
	echo
done
if [ -n "$over" ]; then
	printf '%s' "$over" | sed 's/^/sizes: over budget: /' >&2
	echo "sizes: budgets are in dist/build.mk (SQM_ROUTER_BUDGET, SQM_FULL_BUDGET)" >&2
	exit 1
fi
echo "sizes: every package within its budget"
