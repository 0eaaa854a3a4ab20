#!/bin/sh
# Reproducer for the guest soft lockup of issue 9 (docs/testing.md, "Guest
# soft lockups"). Runs INSIDE the test VM:
#
#   flock /tmp/sqm-vm.lock env SQM_VM_KERNEL_ARGS=loglevel=5 \
#     go run ./scripts/vmrun -timeout 20m -- env UNPIN=1 N=400 "$PWD/scripts/lockup-repro.sh"
#
# (from a checkout outside /tmp: vmrun shares the host root, whose /tmp the
# guest replaces with its own tmpfs).
#
# TCP floods both ways across a veth pair (iperf3, both vCPUs busy in the
# receive path) while an ingress qdisc is added to and deleted from a dummy
# device N times. Each add that makes it the only ingress/clsact qdisc
# switches the kernel's ingress static key on, each delete switches it off:
# a live patch of __netif_receive_skb_core. UNPIN=1 first deletes the
# harness's clsact on lo (the pin), so every flip patches; without UNPIN the
# pin holds the key on and no flip patches. A lockup panics the guest
# (softlockup_panic=1) and vmrun fails; a clean run ends with REPRO-DONE.
# MODE=timestamp flips the receive timestamp key (netstamp_needed_key, read
# at the top of the same function) instead, with a ping per flip.
set -e
N=${N:-400}
if [ "$UNPIN" = 1 ]; then tc qdisc del dev lo clsact; echo "unpinned: every flip patches kernel text"; fi
ip netns add ra; ip netns add rb
ip link add va netns ra type veth peer name vb netns rb
ip -n ra addr add 10.9.0.1/24 dev va; ip -n rb addr add 10.9.0.2/24 dev vb
for n in ra rb; do ip -n $n link set lo up; done
ip -n ra link set va up; ip -n rb link set vb up
ip link add d0 type dummy; ip link set d0 up
ip netns exec rb iperf3 -s -D -p 5201
ip netns exec rb iperf3 -s -D -p 5202
sleep 1
ip netns exec ra iperf3 -c 10.9.0.2 -p 5201 -t 3600 -P 2 >/dev/null 2>&1 &
ip netns exec ra iperf3 -c 10.9.0.2 -p 5202 -t 3600 -R -P 2 >/dev/null 2>&1 &
sleep 2
i=0
while [ $i -lt "$N" ]; do
	if [ "$MODE" = timestamp ]; then
		# iputils ping asks for SO_TIMESTAMP: the first such socket
		# switches netstamp_needed_key on, closing the last one off.
		ping -c 1 -W 1 127.0.0.1 >/dev/null
	else
		tc qdisc add dev d0 ingress
		tc qdisc del dev d0 ingress
	fi
	i=$((i + 1))
	if [ $((i % 50)) = 0 ]; then echo "flips $i at $(cut -d' ' -f1 /proc/uptime) s"; fi
done
echo "REPRO-DONE: $i flips under load, no lockup"
