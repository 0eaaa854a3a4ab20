#!/bin/sh
# Stripped static sqm binaries for the router targets, in three builds:
#   full     what `make build` makes;
#   router   -tags $ROUTER_TAGS (default sqm_nolab: no lab, no VM harness);
#   minimal  -tags $MIN_TAGS (also no tester and no web page).
# Prints bytes and gzip -9 bytes of each; binaries land in bin/sizes.
# Used by `make sizes` and `make router`; LDFLAGS and GO come from make.
set -e
GO=${GO:-go}
ROUTER_TAGS=${ROUTER_TAGS:-sqm_nolab}
MIN_TAGS=${MIN_TAGS:-sqm_nolab,sqm_notest,sqm_noweb}
TARGETS=${SIZE_TARGETS:-linux/amd64 linux/arm64 linux/arm/7 linux/mipsle/softfloat}
BUILDS=${BUILDS:-full router minimal}
mkdir -p bin/sizes

echo "router: -tags $ROUTER_TAGS; minimal: -tags $MIN_TAGS"
printf '%-22s' target
for b in $BUILDS; do printf ' %10s %9s' "$b" gzip-9; done
echo
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
	printf '%-22s' "$name"
	for b in $BUILDS; do
		case $b in
		full) tags= ;;
		router) tags=$ROUTER_TAGS ;;
		minimal) tags=$MIN_TAGS ;;
		esac
		out=bin/sizes/sqm-$name-$b
		env CGO_ENABLED=0 "$@" "$GO" build -trimpath -tags "$tags" -ldflags "$LDFLAGS" -o "$out" ./cmd/sqm
		printf ' %10d %9d' "$(stat -c %s "$out")" "$(gzip -9c "$out" | wc -c)"
	done
	echo
done
