# The router smoke, run by busybox sh inside the router VM (tools/routervm).
# Each step prints one line the host parses:
#   SMOKE PASS step [detail]     SMOKE FAIL step detail
# and outputs the host checks itself come back base64-encoded between
#   SMOKE DATA name   ...   SMOKE END name
# The host fails the run on a FAIL line, on a step or data block that is
# missing, and on data that does not check out; this script only reports.
SQM=/bin/sqm
S=/run/sqm
C=/etc/config/sqm
pass() { echo "SMOKE PASS $*"; }
fail() { echo "SMOKE FAIL $*"; }
# data NAME CMD...: run CMD and send its stdout to the host.
data() {
	n=$1
	shift
	"$@" >/tmp/data.out 2>/tmp/data.err
	rc=$?
	echo "SMOKE DATA $n"
	base64 /tmp/data.out
	echo "SMOKE END $n"
	[ $rc -eq 0 ] || fail "$n.cmd" "exit $rc from $*: $(head -c 400 /tmp/data.err)"
}
has_qdisc() { tc qdisc show dev "$1" 2>/dev/null | grep -q "qdisc $2 "; }
mac() { cat /sys/class/net/$1/address; }
# alive PID: running, not a zombie (kill -0 succeeds on a zombie too).
alive() { [ -r /proc/$1/status ] && ! grep -q '^State:[[:space:]]*Z' /proc/$1/status; }

# A veth pair: wan0 is shaped; packets sent from wan0 leave through its
# egress tree, packets sent from wanp arrive at wan0's ingress hook. Both
# ends are in one namespace, so the destinations are off-link addresses
# with static neighbours: the stack sends them out instead of looping them.
setup() {
	# busybox's ip cannot name a veth's peer: the kernel names it (veth0),
	# found here by its link to wan0 and renamed.
	ip link add wan0 type veth || return 1
	for d in /sys/class/net/*; do
		if [ "${d##*/}" != wan0 ] && [ "$(cat $d/iflink)" = "$(cat /sys/class/net/wan0/ifindex)" ]; then
			ip link set "${d##*/}" name wanp || return 1
		fi
	done
	ip link set wan0 up && ip link set wanp up || return 1
	ip addr add 10.9.9.1/24 dev wan0 && ip addr add 10.9.8.1/24 dev wanp || return 1
	# (busybox's ip cannot add neighbours; its arp can.)
	arp -i wan0 -s 10.9.9.2 "$(mac wanp)" || return 1
	arp -i wanp -s 10.9.8.2 "$(mac wan0)" || return 1
}
if setup; then pass setup; else fail setup "veth pair wan0/wanp"; fi
egress() { ping -c 5 -i 0.2 -W 1 -s 200 -I wan0 10.9.9.2 >/dev/null 2>&1; }
ingress() { ping -c 5 -i 0.2 -W 1 -s 200 -I wanp 10.9.8.2 >/dev/null 2>&1; }

section() { # NAME SCRIPT QDISC [OPTION VALUE]...
	n=$1 script=$2 qdisc=$3
	shift 3
	{
		echo "config queue '$n'"
		echo "	option enabled '1'"
		echo "	option interface 'wan0'"
		echo "	option download '20000'"
		echo "	option upload '5000'"
		echo "	option script '$script'"
		echo "	option qdisc '$qdisc'"
		while [ $# -ge 2 ]; do
			echo "	option $1 '$2'"
			shift 2
		done
	} >$C
}

start() { # STEP
	if out=$($SQM start --config $C --state-dir $S 2>&1); then
		return 0
	fi
	fail "$1.start" "sqm start: $out"
	return 1
}
stop() { # STEP: sqm stop, then neither qdisc nor IFB is left
	if ! out=$($SQM stop --state-dir $S 2>&1); then
		fail "$1.stop" "sqm stop: $out"
	elif has_qdisc wan0 "$2" || has_qdisc wan0 ingress || ip link show ifb4wan0 >/dev/null 2>&1; then
		fail "$1.stop" "still shaped after sqm stop: $(tc qdisc show dev wan0 | tr '\n' ';')"
	else
		pass "$1.stop"
	fi
}

# piece_of_cake with ATM framing: cake on wan0's egress and on an IFB for
# its ingress. The host checks in the JSON that cake framed the packets
# sent through it in 53-byte cells.
mkdir -p $S /etc/config
section cake_atm piece_of_cake.qos cake linklayer atm overhead 44
if start cake_atm; then
	if has_qdisc wan0 cake && has_qdisc wan0 ingress && has_qdisc ifb4wan0 cake; then
		pass cake_atm.start
	else
		fail cake_atm.start "tree: wan0: $(tc qdisc show dev wan0 | tr '\n' ';') ifb4wan0: $(tc qdisc show dev ifb4wan0 2>&1 | tr '\n' ';')"
	fi
	egress
	ingress
	if out=$($SQM status --state-dir $S 2>&1) && echo "$out" | grep -q "atm overhead 44"; then
		pass cake_atm.status
	else
		fail cake_atm.status "sqm status: $(echo "$out" | head -n 5 | tr '\n' ';')"
	fi
	data cake_atm.json $SQM status --json --state-dir $S
	data cake_atm.prom $SQM status --prom --state-dir $S
	stop cake_atm cake
fi

# simple: htb with fq_codel leaves, both directions.
section simple simple.qos fq_codel
if start simple; then
	if has_qdisc wan0 htb && has_qdisc wan0 fq_codel && has_qdisc ifb4wan0 htb && has_qdisc ifb4wan0 fq_codel; then
		pass simple.start
	else
		fail simple.start "tree: wan0: $(tc qdisc show dev wan0 | tr '\n' ';') ifb4wan0: $(tc qdisc show dev ifb4wan0 2>&1 | tr '\n' ';')"
	fi
	egress
	ingress
	data simple.json $SQM status --json --state-dir $S
	stop simple fq_codel
fi

# codel_police: the eBPF policer on wan0's ingress hook (loaded through the
# guest CPU's verifier and JIT); the host checks that it counted the
# packets sent into wan0.
section cp codel_police.qos fq_codel
if start codel_police; then
	if has_qdisc wan0 clsact || has_qdisc wan0 ingress; then
		pass codel_police.start
	else
		fail codel_police.start "no ingress hook on wan0: $(tc qdisc show dev wan0 | tr '\n' ';')"
	fi
	ingress
	ingress
	data codel_police.json $SQM status --json --state-dir $S
	stop codel_police clsact
fi

# The daemon, started before its interface exists: it must shape lan9 as
# soon as it appears. Its peak RSS with that one interface shaped goes to
# the host, which holds it to the budget. The queue has autorate on,
# probing the guest's own loopback: a build with autorate (-tags without
# sqm_noautorate) runs its loop, so the RSS includes it; the router
# package, built without, shapes at the base rates and logs why.
cat >$C <<EOC
config queue 'lan'
	option enabled '1'
	option interface 'lan9'
	option download '20000'
	option upload '5000'
	option script 'piece_of_cake.qos'
	option qdisc 'cake'
	option autorate '1'
	option autorate_probe 'icmp'
	list autorate_reflector '127.0.0.1'
EOC
$SQM daemon --config $C --state-dir $S >/tmp/daemon.log 2>&1 &
dpid=$!
sleep 3
if ! alive $dpid; then
	fail daemon.start "the daemon exited: $(tail -n 5 /tmp/daemon.log | tr '\n' ';')"
else
	pass daemon.start
	ip link add lan9 type dummy && ip link set lan9 up
	i=0
	while [ $i -lt 60 ] && ! { has_qdisc lan9 cake && has_qdisc ifb4lan9 cake; }; do
		sleep 0.5
		i=$((i + 1))
	done
	if has_qdisc lan9 cake && has_qdisc ifb4lan9 cake; then
		pass daemon.hotplug "shaped after $((i / 2)) s"
	else
		fail daemon.hotplug "lan9 not shaped 30 s after it appeared: $(tc qdisc show dev lan9 | tr '\n' ';') log: $(tail -n 5 /tmp/daemon.log | tr '\n' ';')"
	fi
	# Let it settle (the first check interval's work, the log lines).
	sleep 2
	echo "SMOKE RSS $(grep VmHWM /proc/$dpid/status | tr -s ' \t' ' ') $(grep VmRSS /proc/$dpid/status | tr -s ' \t' ' ')"
	grep -q 'autorate started' /tmp/daemon.log && echo "autorate: running"
	grep -o 'autorate not running.*' /tmp/daemon.log | head -n 1
	kill -TERM $dpid
	(sleep 10 && kill -KILL $dpid) 2>/dev/null &
	watchdog=$!
	wait $dpid
	rc=$?
	kill $watchdog 2>/dev/null
	if [ $rc -eq 0 ]; then
		pass daemon.stop
	else
		fail daemon.stop "exit status $rc after SIGTERM (137: still running 10 s later, killed): $(tail -n 3 /tmp/daemon.log | tr '\n' ';')"
	fi
fi
echo "SMOKE DONE"
