#!/bin/sh
# bench-start.sh: how long `sqm start`/`sqm stop` take against sqm-scripts'
# start-sqm/stop-sqm, both shaping the same dummy interface with
# piece_of_cake + ATM (overhead 44) in the same VM, plus `sqm version`
# alone and how soon `sqm daemon` (default settings) shapes a re-created
# interface. Prints every run and the medians.
#
#   scripts/bench-start.sh SQM_SCRIPTS_CHECKOUT [RUNS]
#
# SQM_SCRIPTS_CHECKOUT is a checkout of https://github.com/tohojo/sqm-scripts
# (its src/ is used as it is; only the hard-coded /etc/sqm/sqm.conf path is
# pointed at a copy, because /etc is read-only in the VM). RUNS defaults to
# 10, after one unmeasured warm-up run of each. SQM_BIN=/path/to/sqm
# measures that (static) binary instead of building this tree's.
#
# It boots the VM (internal/vm, via scripts/vmrun) under
# flock /tmp/sqm-vm.lock, so it waits for other VM users. Do not wrap it
# in another `flock /tmp/sqm-vm.lock`: its own flock would then wait for
# the outer one forever. The VM emulates its
# CPU: compare the numbers with each other, not with real hardware. Both
# tools run from tmpfs (/tmp in the VM), as from flash on a router, not
# over the 9p share; tc, ip and sh come from the host root (9p, page-cached
# after the warm-up). Kernel modules are loaded before measuring, so
# neither pays for module loading.
set -eu

usage() { echo "usage: $0 SQM_SCRIPTS_CHECKOUT [RUNS]" >&2; exit 2; }
[ $# -ge 1 ] && [ $# -le 2 ] || usage
SRC=$1
RUNS=${2:-10}
case $RUNS in '' | *[!0-9]*) echo "$0: RUNS must be a positive integer, got '$RUNS'" >&2; exit 2 ;; esac
[ "$RUNS" -ge 1 ] || { echo "$0: RUNS must be at least 1" >&2; exit 2; }
for f in start-sqm stop-sqm functions.sh defaults.sh piece_of_cake.qos; do
	[ -f "$SRC/src/$f" ] || { echo "$0: $SRC is not an sqm-scripts checkout: $SRC/src/$f is missing" >&2; exit 2; }
done

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PATH=$PATH:/usr/local/go/bin
WORK=$(mktemp -d /tmp/sqm-bench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if [ -n "${SQM_BIN:-}" ]; then
	cp "$SQM_BIN" "$WORK/sqm"
else
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$WORK/sqm" ./cmd/sqm)
fi
cp -r "$SRC/src" "$WORK/sqm-scripts"
[ -f "$SRC/platform/linux/sqm.conf" ] && cp "$SRC/platform/linux/sqm.conf" "$WORK/sqm-scripts/sqm.conf.orig"

cat >"$WORK/inside.sh" <<'INSIDE'
#!/bin/bash
set -eu
RUNS=$1
OUT=/run/sqm-out
B=/tmp/bench
mkdir -p $B/lib $B/state $B/sqmstate
cp $OUT/sqm $B/sqm
cp $OUT/sqm-scripts/* $B/lib/
# sqm-scripts reads /etc/sqm/sqm.conf (read-only here): point it at a copy.
cat >$B/sqm.conf <<EOF
SQM_LIB_DIR=$B/lib
SQM_STATE_DIR=$B/state
SQM_QDISC_STATE_DIR=$B/state/available_qdiscs
SQM_CHECK_QDISCS="fq_codel codel pie sfq cake"
SQM_SYSLOG=0
EOF
for s in start-sqm stop-sqm; do
	sed "s|^\. /etc/sqm/sqm.conf|. $B/sqm.conf|" $OUT/sqm-scripts/$s >$B/lib/$s
	chmod +x $B/lib/$s
done
cat >$B/uci <<EOF
config queue 'wan'
	option enabled '1'
	option interface 'bench0'
	option download '85000'
	option upload '10000'
	option qdisc 'cake'
	option script 'piece_of_cake.qos'
	option linklayer 'atm'
	option overhead '44'
EOF

for m in dummy ifb sch_cake sch_ingress act_mirred cls_u32 cls_matchall; do modprobe $m; done
ip link add bench0 type dummy
ip link set bench0 up

# Timestamps come from bash's EPOCHREALTIME (microseconds), read without
# forking: a `$(date +%s%N)` per stamp cost about 60 ms of fork and exec in
# the emulated VM, as much as a whole `sqm start`, and was counted in both
# tools' numbers.
ms() { echo $((($2 - $1) / 1000)); }
shaped() { tc qdisc show dev bench0 | grep -q 'qdisc cake' && tc qdisc show dev bench0 | grep -q 'qdisc ingress'; }
unshaped() { ! tc qdisc show dev bench0 | grep -q 'qdisc cake' && ! ip link show ifb4bench0 >/dev/null 2>&1; }
median() { sort -n | awk '{v[NR]=$1} END {if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

sqm_start() { $B/sqm start --config $B/uci --state-dir $B/sqmstate >/dev/null; }
sqm_stop() { $B/sqm stop --state-dir $B/sqmstate >/dev/null; }
# sqm-scripts as its systemd unit runs it: the interface's settings in the
# environment.
ss_env() { env IFACE=bench0 ENABLED=1 SCRIPT=piece_of_cake.qos QDISC=cake UPLINK=10000 DOWNLINK=85000 LINKLAYER=atm OVERHEAD=44 "$@"; }
ss_start() { ss_env $B/lib/start-sqm >/dev/null 2>&1; }
ss_stop() { ss_env $B/lib/stop-sqm >/dev/null 2>&1; }

bench() { # name start stop
	name=$1 start=$2 stop=$3
	$start; shaped || { echo "$name: not shaped after the warm-up start" >&2; tc qdisc show dev bench0 >&2; exit 1; }
	$stop; unshaped || { echo "$name: still shaped after the warm-up stop" >&2; exit 1; }
	: >$B/$name.start; : >$B/$name.stop
	i=0
	while [ $i -lt "$RUNS" ]; do
		t0=${EPOCHREALTIME/./}; $start; t1=${EPOCHREALTIME/./}
		shaped || { echo "$name: run $i: not shaped after start" >&2; exit 1; }
		t2=${EPOCHREALTIME/./}; $stop; t3=${EPOCHREALTIME/./}
		unshaped || { echo "$name: run $i: still shaped after stop" >&2; exit 1; }
		ms $t0 $t1 >>$B/$name.start; ms $t2 $t3 >>$B/$name.stop
		i=$((i + 1))
	done
	echo "$name start ms: $(tr '\n' ' ' <$B/$name.start)"
	echo "$name stop ms:  $(tr '\n' ' ' <$B/$name.stop)"
}

bench sqm sqm_start sqm_stop
bench sqm-scripts ss_start ss_stop

: >$B/version
$B/sqm version >/dev/null
i=0
while [ $i -lt "$RUNS" ]; do
	t0=${EPOCHREALTIME/./}; $B/sqm version >/dev/null; t1=${EPOCHREALTIME/./}
	ms $t0 $t1 >>$B/version
	i=$((i + 1))
done
echo "sqm version ms: $(tr '\n' ' ' <$B/version)"
# Where `sqm version` time goes: the same binary run from the 9p share it
# was copied from (mounted without a page cache), and Go's package init.
: >$B/version9p
i=0
while [ $i -lt "$RUNS" ]; do
	t0=${EPOCHREALTIME/./}; $OUT/sqm version >/dev/null; t1=${EPOCHREALTIME/./}
	ms $t0 $t1 >>$B/version9p
	i=$((i + 1))
done
echo "sqm version from the 9p share ms: $(tr '\n' ' ' <$B/version9p)"
GODEBUG=inittrace=1 $B/sqm version 2>&1 >/dev/null | awk '/^init / { s += $5 } END { printf "package init (GODEBUG=inittrace=1): %.2f ms in total\n", s }'
if command -v strace >/dev/null; then
	strace -f -c -o $B/strace.start $B/sqm start --config $B/uci --state-dir $B/sqmstate >/dev/null
	sqm_stop
	echo "strace -c -f sqm start (top 8 by time):"
	sed -n '1,10p' $B/strace.start
	echo "unshare calls in sqm start: $(grep -c unshare $B/strace.start || true)"
fi

# The daemon with its defaults: delete and re-create the interface, time
# until the tree is back (polling tc, so the resolution is one tc run).
$B/sqm daemon --config $B/uci --state-dir $B/sqmstate >$B/daemon.log 2>&1 &
dpid=$!
t0=${EPOCHREALTIME/./}
until shaped; do
	[ $(ms $t0 ${EPOCHREALTIME/./}) -lt 60000 ] || { echo "daemon did not shape bench0 within 60 s" >&2; cat $B/daemon.log >&2; exit 1; }
done
: >$B/daemon
i=0
while [ $i -lt "$RUNS" ]; do
	ip link del bench0
	t0=${EPOCHREALTIME/./}
	ip link add bench0 type dummy && ip link set bench0 up
	until shaped; do
		[ $(ms $t0 ${EPOCHREALTIME/./}) -lt 60000 ] || { echo "daemon did not re-shape bench0 within 60 s" >&2; cat $B/daemon.log >&2; exit 1; }
	done
	ms $t0 ${EPOCHREALTIME/./} >>$B/daemon
	sleep 2 # past the default 1 s debounce: each run is a fresh appearance
	i=$((i + 1))
done
kill $dpid; wait $dpid || true
echo "daemon re-shape ms: $(tr '\n' ' ' <$B/daemon)"

s=$(median <$B/sqm.start); S=$(median <$B/sqm-scripts.start)
echo
echo "medians over $RUNS runs (ms, emulated CPU):"
echo "  sqm start          $s"
echo "  start-sqm          $S"
echo "  sqm stop           $(median <$B/sqm.stop)"
echo "  stop-sqm           $(median <$B/sqm-scripts.stop)"
echo "  sqm version        $(median <$B/version)"
echo "  sqm version (9p)   $(median <$B/version9p)"
echo "  daemon re-shape    $(median <$B/daemon)"
awk -v a="$S" -v b="$s" 'BEGIN { if (b > 0) printf "  start speed-up     %.1fx\n", a / b; else print "  start speed-up     (sqm start under 1 ms)" }'
INSIDE
chmod +x "$WORK/inside.sh"

cd "$ROOT"
flock /tmp/sqm-vm.lock go run ./scripts/vmrun -out "$WORK" -timeout 60m -- bash /run/sqm-out/inside.sh "$RUNS"
