#!/bin/sh
# Builds the eBPF objects sqm embeds (internal/codelpolice) from their C
# source, for both byte orders, and either writes them (-w, `make bpf`) or
# checks that the committed ones are exactly what clang makes of the
# source now (`make bpfcheck`, part of `make test`), so an edited program
# cannot ship with a stale object. The Go build itself never needs clang.
#
# clang output differs between clang versions, so the version that built
# the committed objects is recorded next to them; a check with another
# version says so and does not compare (rebuild with -w to adopt it).
set -eu

dir=internal/codelpolice
src=$dir/bpf/codel_police.c
stamp=$dir/bpf/clang-version
cc=${CLANG:-clang}
flags="-O2 -g0 -mcpu=v2 -Wall -Werror -c"

command -v "$cc" >/dev/null 2>&1 || { echo "bpf: $cc not found (scripts/setup.sh installs clang)" >&2; exit 1; }
ver=$("$cc" --version | sed -n '1s/.*clang version \([0-9.]*\).*/\1/p')

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for t in bpfel bpfeb; do
	"$cc" $flags -target $t "$src" -o "$tmp/codel_police_$t.o"
done

if [ "${1:-}" = "-w" ]; then
	cp "$tmp"/codel_police_bpfel.o "$tmp"/codel_police_bpfeb.o "$dir/"
	echo "$ver" > "$stamp"
	echo "bpf: wrote $dir/codel_police_bpfel.o, codel_police_bpfeb.o (clang $ver)"
	exit 0
fi

want=$(cat "$stamp")
if [ "$ver" != "$want" ]; then
	echo "bpf: NOT CHECKED: the objects were built with clang $want, this is clang $ver, whose output differs; run 'make bpf' to rebuild them with it" >&2
	exit 0
fi
for t in bpfel bpfeb; do
	if ! cmp -s "$tmp/codel_police_$t.o" "$dir/codel_police_$t.o"; then
		echo "bpf: $dir/codel_police_$t.o is not what clang $ver makes of $src; run 'make bpf' and commit the objects" >&2
		exit 1
	fi
done
echo "bpf: objects current (clang $ver)"
