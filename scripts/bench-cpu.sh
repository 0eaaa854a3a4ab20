#!/bin/sh
# CPU cost of each ingress recipe on this machine's kernel (issues 13 and
# 24): one TCP stream (iperf3, cubic) from a sender namespace through a
# veth into a receiver namespace whose veth end carries the recipe on its
# ingress, offloads off so the hook sees MTU-sized packets as a router's
# WAN does. Sender and receiver are pinned to one CPU, where the veth's
# softirq work also runs, so that CPU's busy time (user+system+irq+softirq
# from /proc/stat) is the whole cost of moving the data; the iperf3
# processes' own accounting (getrusage) is the column to read on a shared
# machine, where /proc/stat also counts other work on that CPU.
#
# Paced (the default): the sender's veth egress carries an htb at PACE
# times the shaped rate (sqm's simplest/pfifo, 1 ms burst), so packets
# reach the recipe spaced by a line a little faster than the shaped rate,
# as a WAN delivers them. Offloads off, TCP still builds GSO packets of up
# to 44 segments, which leave the htb whole and are split after it: the
# sender's gso_max_segs keeps them within the htb's 1 ms (9 segments at
# 110 Mbit/s; one-segment packets throughout would make the sender's TCP
# cost several times the path's, and 1 Gbit/s out of one core's reach). Unpaced (-m unpaced): the sender bursts at veth
# speed, which no WAN does; it shows what such bursts do to each policer
# (docs/codel-police.md, "CPU cost"). The pacer's own cost is in every row,
# "none" included, so compare rows of one mode and rate.
#
# Recipes: none; codel_police flow-aware and flow-blind (cls_bpf);
# simplest/pfifo via IFB (htb + mirred redirect), the IFB path
# htb+fq_codel/cake take on kernels that have them. police (act_police),
# cake and fq_codel are not in this host kernel: VM only, whose emulated
# CPU says nothing about cost, so they are not measured here.
#
# Prints each run as it goes, then a table (medians of the runs) to paste
# into docs/codel-police.md, with the date, kernel, CPU model and the load
# averages before and after.
#
# usage: scripts/bench-cpu.sh [-m paced|unpaced|both] [-r "KBIT ..."]
#          [-t SECONDS] [-n RUNS] [-c CPU] [-p PACE] [-R "RECIPE ..."]  (root)
#   defaults: -m paced -r "100000 500000 1000000" -t 5 -n 3 -c 1 -p 1.1
#   -R: recipes, default "none codel_police codel_police_flowblind htb_ifb"
#   -r 10000000 -m unpaced: a rate the core cannot reach, the per-packet
#   cost of classifying alone (issue 13's first table)
set -eu
modes=paced rates="100000 500000 1000000" secs=5 runs=3 cpu=1 pace=1.1
recipes="none codel_police codel_police_flowblind htb_ifb"
while getopts m:r:t:n:c:p:R: o; do
	case $o in
	m) modes=$OPTARG ;;
	r) rates=$OPTARG ;;
	t) secs=$OPTARG ;;
	n) runs=$OPTARG ;;
	c) cpu=$OPTARG ;;
	p) pace=$OPTARG ;;
	R) recipes=$OPTARG ;;
	*) sed -n '/^# usage:/,/^set -eu/p' "$0" | sed '$d' >&2; exit 2 ;;
	esac
done
[ "$modes" = both ] && modes="paced unpaced"
for m in $modes; do
	case $m in paced | unpaced) ;; *) echo "bench-cpu: -m $m: want paced, unpaced or both" >&2; exit 2 ;; esac
done
for r in $recipes; do
	case $r in none | codel_police | codel_police_flowblind | htb_ifb) ;; *) echo "bench-cpu: -R $r: want none, codel_police, codel_police_flowblind or htb_ifb" >&2; exit 2 ;; esac
done
[ "$(id -u)" = 0 ] || { echo "bench-cpu: needs root (namespaces, qdiscs, BPF)" >&2; exit 2; }
for c in iperf3 ethtool taskset python3 tc; do
	command -v $c >/dev/null || { echo "bench-cpu: $c is missing (scripts/setup.sh installs it)" >&2; exit 2; }
done

here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d /tmp/sqm-bench-cpu.XXXXXX)
snd=sqmbs$$ rcv=sqmbr$$
# The iperf3 processes this script started and has not reaped yet:
# deleting a namespace does not end the processes in it.
srv= cli=
cleanup() {
	for p in $srv $cli; do kill "$p" 2>/dev/null || true; done
	ip netns del $snd 2>/dev/null || true
	ip netns del $rcv 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
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

busy() { awk -v c="cpu$cpu" '$1 == c { print $2+$3+$4+$7+$8 }' /proc/stat; }
hz=$(getconf CLK_TCK)
load() { cut -d' ' -f1-3 /proc/loadavg; }

# start NS STATE IFACE DOWN UP SCRIPT QDISC OPTS writes a one-section
# config and starts it in the namespace.
start() {
	cat >"$work/$2.conf" <<CONF
config queue 'bench'
	option enabled '1'
	option interface '$3'
	option download '$4'
	option upload '$5'
	option script '$6'
	option qdisc '$7'
	option iqdisc_opts '$8'
CONF
	SQM_STATE_DIR=$work/$2 ip netns exec $1 "$work/sqm" start --config "$work/$2.conf" >/dev/null
}
stop() { SQM_STATE_DIR=$work/$2 ip netns exec $1 "$work/sqm" stop >/dev/null; }

apply() { # RECIPE RATE
	case $1 in
	none) return ;;
	codel_police) start $rcv rstate r0 $2 0 codel_police fq_codel flows ;;
	codel_police_flowblind) start $rcv rstate r0 $2 0 codel_police fq_codel flowblind ;;
	htb_ifb) start $rcv rstate r0 $2 0 simplest pfifo "" ;;
	*) echo "bench-cpu: unknown recipe $1" >&2; exit 2 ;;
	esac
	[ -z "${VERBOSE:-}" ] || ip netns exec $rcv tc filter show dev r0 ingress >&2
}
remove() { [ "$1" = none ] || stop $rcv rstate; }

# drops prints the receiver's drop counters: codel_police's signal and
# limit drops, and every qdisc's drops (the IFB's for htb_ifb).
drops() {
	SQM_STATE_DIR=$work/rstate ip netns exec $rcv "$work/sqm" status --json 2>/dev/null | python3 -c 'import json,sys
try: devs=json.load(sys.stdin)["devices"]
except Exception: devs=[]
sig=lim=q=0
for d in devs:
    k=d.get("kernel") or {}
    cp=k.get("codel_police") or {}
    sig+=cp.get("dropped_signal_packets",0); lim+=cp.get("dropped_limit_packets",0)
    q+=sum(x.get("drops",0) for x in k.get("qdiscs") or [])
print(sig, lim, q)'
}

# run RECIPE RATE MODE I: one iperf3 test; appends a record to runs.tsv.
# The server handles that one test and exits; both ends are waited for.
run() {
	ip netns exec $rcv taskset -c $cpu iperf3 -s -1 -p 5201 >"$work/srv.log" 2>&1 &
	srv=$!
	n=0
	until ip netns exec $rcv ss -Hltn 'sport = :5201' | grep -q .; do
		n=$((n + 1))
		[ $n -lt 100 ] || { echo "bench-cpu: iperf3 server did not listen:" >&2; cat "$work/srv.log" >&2; exit 1; }
		sleep 0.05
	done
	d0=$(drops)
	b0=$(busy)
	ip netns exec $snd taskset -c $cpu iperf3 -c 10.88.0.2 -p 5201 -t "$secs" -J >"$work/cli.json" 2>&1 &
	cli=$!
	rc=0; wait $cli || rc=$?
	cli=
	b1=$(busy)
	d1=$(drops)
	wait $srv || true
	srv=
	[ $rc = 0 ] || { echo "bench-cpu: iperf3 client failed ($rc):" >&2; cat "$work/cli.json" >&2; exit 1; }
	# The iperf3 processes' own CPU time (getrusage, both ends) as
	# well: it leaves out other work on the CPU on a shared machine.
	python3 - "$work/cli.json" "$1" "$2" "$3" "$4" $((b1 - b0)) "$hz" $d0 $d1 <<'PY' | tee -a "$work/runs.tsv"
import json, sys
f, recipe, rate, mode, i, ticks, hz = sys.argv[1:8]
d0, d1 = map(int, sys.argv[8:11]), map(int, sys.argv[11:14])
sig, lim, q = (b - a for a, b in zip(d0, d1))
e = json.load(open(f))["end"]
r, c = e["sum_received"], e["cpu_utilization_percent"]
g = r["bytes"] * 8 / 1e9
held = g / r["seconds"]
cpu_run = (c["host_total"] + c["remote_total"]) / 100 * r["seconds"]
print("\t".join(str(x) for x in (mode, rate, recipe, i, "%.3f" % held,
    "%.3f" % (int(ticks) / int(hz) / g), "%.3f" % (cpu_run / g),
    e["sum_sent"].get("retransmits", 0), sig, lim, q)))
PY
}

echo "# bench-cpu $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs; CPU $cpu; $runs runs of $secs s; pace ${pace}x"
echo "# load average before: $(load)"
printf '# mode\tkbit/s\trecipe\trun\tGbit/s\tcpu_s/Gbit\tiperf_s/Gbit\tretrans\tsig_drops\tlim_drops\tqdisc_drops\n'
for mode in $modes; do
	for rate in $rates; do
		if [ $mode = paced ]; then
			line=$(awk -v r=$rate -v p=$pace 'BEGIN { printf "%d", r * p }')
			start $snd sstate s0 0 $line simplest pfifo ""
			segs=$(awk -v l=$line 'BEGIN { n = int(l / 8 / 1514); if (n < 1) n = 1; if (n > 65535) n = 65535; print n }')
			ip -n $snd link set dev s0 gso_max_segs $segs
		fi
		for r in $recipes; do
			apply $r $rate
			i=0
			while [ $i -lt "$runs" ]; do
				i=$((i + 1))
				run $r $rate $mode $i
			done
			remove $r
		done
		if [ $mode = paced ]; then
			stop $snd sstate
			ip -n $snd link set dev s0 gso_max_segs 65535
		fi
	done
done
echo "# load average after: $(load)"

# The table: medians per mode, rate and recipe; "vs none" is the iperf3
# CPU per gigabit against none's in the same mode and rate.
python3 - "$work/runs.tsv" "$pace" <<'PY'
import collections, statistics, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    m, rate, rec, _, held, cpu, ip, rt, sig, lim, q = line.split("\t")
    rows.setdefault((m, int(rate), rec), []).append(
        (float(held), float(cpu), float(ip), int(rt), int(sig), int(lim), int(q)))
names = {"none": "none", "codel_police": "codel_police (flow-aware)",
         "codel_police_flowblind": "codel_police (flow-blind)",
         "htb_ifb": "htb+IFB (simplest, pfifo)"}
pace = float(sys.argv[2])
print()
print("| arrivals | shaped rate | recipe | Gbit/s held (min-max) | of the rate | iperf3 CPU s/Gbit | vs none | /proc/stat CPU s/Gbit | retransmits | drops: CoDel / limit / qdisc |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (m, rate, rec), v in rows.items():
    med = lambda k: statistics.median(x[k] for x in v)
    held = [x[0] for x in v]
    none = rows.get((m, rate, "none"))
    vs = med(2) / statistics.median(x[2] for x in none) if none else float("nan")
    arr = "paced at %.2gx" % pace if m == "paced" else "unpaced"
    frac = "-" if rec == "none" else "%.0f %%" % (100 * med(0) / (rate / 1e6))
    drops = "-" if rec == "none" else (
        "%d / %d / -" % (med(4), med(5)) if rec.startswith("codel") else "- / - / %d" % med(6))
    print("| %s | %g Mbit/s | %s | %.3f (%.3f-%.3f) | %s | %.3f | %.2fx | %.3f | %d | %s |" % (
        arr, rate / 1000, names.get(rec, rec), med(0), min(held), max(held), frac,
        med(2), vs, med(1), med(3), drops))
PY
