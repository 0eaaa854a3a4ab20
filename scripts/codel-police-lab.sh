#!/bin/bash
# Repeated VM lab runs for issue 13's latency criterion: the same link
# (55/10 Mbit/s emulated modem, 1000-packet FIFO, 20 ms base RTT, RRUL for
# 20 s, shaping 50/9 Mbit/s) through each ingress recipe, ROUNDS times,
# interleaved so that a slow spell of the host lands on all recipes alike.
# One VM boot per run, each under the VM lock, so other users of the VM
# get their turn between runs. Every run's `sqm lab --json` is kept in
# OUTDIR; the summary (one line per run) goes to stdout.
#
# The VM is emulated (TCG) on the host's CPUs: when the host is busy the
# guest stalls: every recipe's shaped download falls far below the 50
# Mbit/s it is shaped to and single RTTs reach hundreds of milliseconds.
# The summary prints the host's load average and the largest induced RTT
# (max) of each run so such runs can be told apart
# (docs/evidence/codel-police-lab.md).
#
# usage: scripts/codel-police-lab.sh [ROUNDS] [OUTDIR] [RECIPE...]   (as root)
#   RECIPE is a --script name, optionally with +ecn (the lab's --ecn);
#   default: piece_of_cake police codel_police codel_police+ecn
# needs: go, jq, qemu (as make vmtest)
set -eu
rounds=${1:-3}
out=${2:-/tmp/sqm-codel-police-lab}
shift $(( $# >= 2 ? 2 : $# ))
recipes=("$@")
[ ${#recipes[@]} -gt 0 ] || recipes=(piece_of_cake police codel_police codel_police+ecn)
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
(cd "$here" && go build -o "$out/sqm" ./cmd/sqm)

for i in $(seq 1 "$rounds"); do
	for r in "${recipes[@]}"; do
		script=${r%+ecn}
		flags=()
		[ "$script" = "$r" ] || flags=(--ecn)
		f="$out/$r-$i.json"
		load0=$(cut -d' ' -f1 /proc/loadavg)
		flock /tmp/sqm-vm.lock "$out/sqm" lab --vm --down 55mbit --up 10mbit \
			--shape-down 50mbit --shape-up 9mbit --mode rrul --rtt 20ms \
			--script "$script" "${flags[@]}" --json >"$f" 2>"$out/$r-$i.log" ||
			{ echo "$r run $i failed: see $out/$r-$i.log" >&2; continue; }
		echo "$load0 $(cut -d' ' -f1 /proc/loadavg)" >"$out/$r-$i.load"
	done
done

# One line per run. Induced latency is the loaded RTT percentile minus the
# idle median, as the lab's table computes it; owd_dn is the probes' mean
# induced one-way delay towards the client (the direction the ingress
# recipe governs).
{
printf 'recipe\trun\tload\tnone_dn\tp50\tp90\tmax\tdown\tup\tloss%%\towd_dn\tcounters\n'
for f in "$out"/*-[0-9]*.json; do
	b=$(basename "$f" .json)
	load=$(tr ' ' '>' <"${f%.json}.load" 2>/dev/null || echo -)
	jq -r --arg name "${b%-*}" --arg run "${b##*-}" --arg load "$load" '
		def ind(s; p): s.loaded[p] - s.idle.median_ms;
		def owd(s): [s.probes[] | select(.clocks_synced) | .induced_owd_down_ms] | add / length;
		def r(n): . * n | round / n;
		([.shaping.status[] | .device as $d | .qdiscs[] | select(.kind == "ingress" or .kind == "cake") |
			"\($d) \(.kind) drops \(.drops) marks \(.ecn_marks)"] | join(", ")) as $q |
		([.shaping.status[] | select(.codel_police) | .codel_police |
			"pass \(.passed_packets) mark \(.marked_packets) dropsig \(.dropped_signal_packets) droplim \(.dropped_limit_packets) spared \(.spared)"] | join(", ")) as $cp |
		[$name, $run, $load, (.before.download_mbps | r(100)),
		 (ind(.after; "median_ms") | r(10)), (ind(.after; "p90_ms") | r(10)), (ind(.after; "max_ms") | round),
		 (.after.download_mbps | r(100)), (.after.upload_mbps | r(100)),
		 (.after.loaded.loss_pct | r(100)), (owd(.after) | r(10)),
		 ([$cp, $q] | map(select(. != "")) | join("; "))] | @tsv
	' "$f"
done
} | column -t -s $'\t'
