#!/bin/sh
# CPU cost of each ingress recipe on this machine's kernel (issue 13 part 2):
# one TCP stream (iperf3) from a sender namespace through a veth into a
# receiver namespace whose veth end carries the recipe on its ingress,
# offloads off so the hook sees MTU-sized packets as a router's WAN does.
# Sender and receiver are pinned to one CPU, where the veth's softirq
# work also runs, so that CPU's busy time (user+system+irq+softirq from
# /proc/stat) is the whole cost of moving the data, and the throughput is
# the most that one core holds with the recipe in the path. By default the
# shaping rate (RATE_KBIT) is above what the core can carry (10 Gbit/s),
# so the numbers are the per-packet cost of classifying; with a rate the
# core can carry (e.g. 1000000) the recipes shape (htb queues and
# schedules on the IFB, codel_police marks or drops) and the cost of that
# is in the numbers too.
#
# Recipes: none; codel_police flow-aware and flow-blind (cls_bpf); police
# is not in this kernel (act_police: VM only, not measured here);
# simplest/pfifo via IFB (htb + mirred redirect), the IFB path
# htb+fq_codel/cake take on kernels that have them.
#
# usage: scripts/bench-cpu.sh [SECONDS] [RUNS] [CPU] [RATE_KBIT]   (as root)
set -eu
secs=${1:-5}
runs=${2:-3}
cpu=${3:-1}
rate=${4:-10000000}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/sqm-bench-cpu.XXXXXX)
snd=sqmbs$$ rcv=sqmbr$$
cleanup() {
	ip netns del $snd 2>/dev/null || true
	ip netns del $rcv 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
(cd "$here" && CGO_ENABLED=0 go build -o "$work/sqm" ./cmd/sqm)

ip netns add $snd
ip netns add $rcv
ip -n $snd link add s0 type veth peer name r0 netns $rcv
for ns in $snd $rcv; do
	dev=s0; [ $ns = $rcv ] && dev=r0
	ip netns exec $ns ethtool -K $dev tso off gso off gro off >/dev/null 2>&1
	ip -n $ns link set lo up
	ip -n $ns link set $dev up
done
ip -n $snd addr add 10.88.0.1/24 dev s0
ip -n $rcv addr add 10.88.0.2/24 dev r0
ip netns exec $rcv taskset -c $cpu iperf3 -s -D -1 >/dev/null 2>&1 || true

busy() { awk -v c="cpu$cpu" '$1 == c { print $2+$3+$4+$7+$8 }' /proc/stat; }
hz=$(getconf CLK_TCK)

# apply writes a one-section config for the recipe and starts it.
apply() {
	case $1 in
	none) return ;;
	codel_police) set -- codel_police fq_codel flows ;;
	codel_police_flowblind) set -- codel_police fq_codel flowblind ;;
	htb_ifb) set -- simplest pfifo "" ;;
	esac
	cat >"$work/sqm.conf" <<CONF
config queue 'bench'
	option enabled '1'
	option interface 'r0'
	option download '$rate'
	option upload '0'
	option script '$1'
	option qdisc '$2'
	option iqdisc_opts '$3'
CONF
	SQM_STATE_DIR=$work/state ip netns exec $rcv "$work/sqm" start --config "$work/sqm.conf" >/dev/null
	[ -z "${VERBOSE:-}" ] || ip netns exec $rcv tc filter show dev r0 ingress >&2
}
remove() {
	[ "$1" = none ] || SQM_STATE_DIR=$work/state ip netns exec $rcv "$work/sqm" stop >/dev/null
}

printf '%-24s %4s %8s %14s %14s\n' recipe run 'Gbit/s' 'cpu s/Gbit' 'iperf s/Gbit'
for r in none codel_police codel_police_flowblind htb_ifb; do
	apply $r
	i=0
	while [ $i -lt "$runs" ]; do
		i=$((i + 1))
		ip netns exec $rcv taskset -c $cpu iperf3 -s -D -1 -p 5202 >/dev/null 2>&1
		sleep 0.3
		b0=$(busy)
		out=$(ip netns exec $snd taskset -c $cpu iperf3 -c 10.88.0.2 -p 5202 -t "$secs" -J)
		b1=$(busy)
		# The iperf3 processes' own CPU time (getrusage, both ends) as
		# well: it leaves out other work on the CPU on a shared machine.
		bits=$(printf '%s' "$out" | python3 -c 'import json,sys
e=json.load(sys.stdin)["end"]; d=e["sum_received"]; c=e["cpu_utilization_percent"]
print(d["bytes"]*8, d["seconds"], (c["host_total"]+c["remote_total"])/100*d["seconds"])')
		set -- $bits
		awk -v r=$r -v i=$i -v bits=$1 -v s=$2 -v ru=$3 -v t=$((b1 - b0)) -v hz=$hz 'BEGIN {
			g = bits / 1e9; printf "%-24s %4d %8.2f %14.3f %14.3f\n", r, i, g / s, (t / hz) / g, ru / g }'
	done
	remove $r
done
