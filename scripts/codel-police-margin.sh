#!/bin/bash
# codel_police behind a faster line, on this machine's kernel (no VM, no
# netem): a sender namespace whose veth egress is a tbf at LINE_KBIT with
# a 1000-packet FIFO (the modem), a receiver namespace whose veth carries
# codel_police at RATE_KBIT on its ingress, four TCP streams (iperf3 -R)
# through both for SECS, and pings every 20 ms from the receiver, whose
# replies queue in the modem and then pass the policer. Prints goodput, the
# pings' RTT (the modem's queue) and loss, and the program's counters.
# The base RTT is near zero, so it shows the policer's mechanics (how often
# CoDel signals versus the hard limit drops, as the policed rate moves
# away from the line rate), not a broadband link's latency.
# ECN=1 sets net.ipv4.tcp_ecn=1 at both ends.
# usage: scripts/codel-police-margin.sh LINE_KBIT RATE_KBIT [SECS] [ECN]   (root)
set -eu
line=$1 rate=$2 secs=${3:-12} ecn=${4:-0}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/sqm-cp-margin.XXXXXX)
snd=cpms$$ rcv=cpmr$$
cleanup() { ip netns del $snd 2>/dev/null || true; ip netns del $rcv 2>/dev/null || true; }
trap 'cleanup; rm -rf "$work"' EXIT
(cd "$here" && go build -o "$work/sqm" ./cmd/sqm)
ip netns add $snd; ip netns add $rcv
ip link add s0 netns $snd type veth peer name r0 netns $rcv
for p in "$snd s0 10.89.0.1" "$rcv r0 10.89.0.2"; do set -- $p
  ip -n $1 addr add $3/24 dev $2; ip -n $1 link set $2 up; ip -n $1 link set lo up
  ip netns exec $1 ethtool -K $2 tso off gso off gro off >/dev/null 2>&1 || true
  ip netns exec $1 sysctl -qw net.ipv4.tcp_ecn=$([ $ecn = 1 ] && echo 1 || echo 2)
done
# the modem: tbf at the line rate with a deep (1000-packet) FIFO
ip netns exec $snd tc qdisc add dev s0 root tbf rate ${line}kbit burst 3028 limit 1514000
cat >$work/sqm.conf <<CONF
config queue 'm'
	option enabled '1'
	option interface 'r0'
	option download '$rate'
	option upload '0'
	option script 'codel_police'
	option qdisc 'fq_codel'
CONF
SQM_STATE_DIR=$work/state ip netns exec $rcv $work/sqm start --config $work/sqm.conf >/dev/null
ip netns exec $snd iperf3 -s -D -1 >/dev/null 2>&1; sleep 0.5
ip netns exec $rcv ping -i 0.02 -w $((secs+1)) 10.89.0.1 >$work/ping 2>&1 &
pp=$!
ip netns exec $rcv iperf3 -c 10.89.0.1 -R -P 4 -t $secs -J >$work/iperf.json 2>/dev/null || true
wait $pp || true
mbps=$(jq '.end.sum_received.bits_per_second/1e6*100|round/100' $work/iperf.json)
lat=$(grep -o 'time=[0-9.]*' $work/ping | cut -d= -f2 | sort -n | awk '{a[NR]=$1} END {printf "p50 %.1f p90 %.1f max %.1f n %d", a[int(NR*0.5)], a[int(NR*0.9)], a[NR], NR}')
SQM_STATE_DIR=$work/state ip netns exec $rcv $work/sqm status --json > $work/st.json; cnt=$(jq -c '.devices[0].kernel.codel_police | {pass:.passed_packets,mark:.marked_packets,dropsig:.dropped_signal_packets,droplim:.dropped_limit_packets}' $work/st.json)
loss=$(grep -o "[0-9.]*% packet loss" $work/ping | cut -d% -f1)
echo "line $line rate $rate ($(( rate*100/line ))%) ecn $ecn: goodput $mbps Mbit/s; RTT via the modem $lat loss ${loss}%; $cnt"
