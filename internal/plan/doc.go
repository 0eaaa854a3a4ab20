// Package plan turns one sqm queue section into the qdisc/class/filter tree
// sqm will build, as plain values. It does no I/O: everything it needs from
// the system (the interface MTU) comes in through Env, so every recipe can be
// tested anywhere and compared with what the kernel reports back.
//
// Build follows sqm-scripts 1.6 (see /work/shared/research/sqm-scripts.md):
// the recipes simplest, simple, simplest_tbf, piece_of_cake and layer_cake,
// with the leaf qdiscs fq_codel, codel, pie, fq_pie, cake, sfq, pfifo and
// bfifo, its burst/quantum, limit, flows, target/interval and ECN rules, and
// its link-layer adaptation (tc_stab, htb_private, cake keywords). The free
// text options iqdisc_opts/eqdisc_opts are parsed into the typed options of
// the leaf (tc's own keywords and units), so a typo is an error at plan
// time naming the keyword, not a tc failure halfway through a start.
// RenderShell and RenderRemove print a plan as ip/tc commands; Validate
// checks a plan that did not come from Build (JSON state, tests) before it
// is applied. Recipes and LeafQdiscs list what Build accepts; IFBName and
// CheckIFBs name the IFB devices and catch two sections sharing one.
//
// # Tests
//
// testdata holds golden plans (*.jsonl, one variant a line) and scripts
// (*.tc) for every recipe x leaf qdisc x link-layer mechanism x direction;
// regenerate them with `go test ./internal/plan -update`. As root,
// TestRenderShellHostKernel applies scripts in a network namespace and
// TestClassifierHostKernel sends raw frames through the DSCP filters and
// checks the class each one is counted in; TestVMRenderShell applies the
// AQM, cake and police plans in the VM.
//
// # Differences from sqm-scripts
//
// Deliberate, each for a reason:
//
//   - simple classifies with tc u32 filters in both directions; there is no
//     iptables/nftables marking. Both directions use sqm-scripts' ingress
//     `diffserv` map (TOS byte under mask 0xfc: 0x00 BE -> 1:12, 0x20 CS1
//     -> 1:13, 0x10 low-delay, 0xb8 EF, 0xc0 CS6, 0xe0 CS7, 0x90 AF42 ->
//     1:11, everything else -> 1:12). On egress this equals sqm-scripts'
//     iptables marks except that CS7 is priority too. Each DSCP is matched
//     in IPv4, IPv6, IPv4/IPv6 inside PPPoE session frames (protocol
//     ppp_ses: PPP protocol 0x0021/0x0057 in the low half of the word at
//     offset 4, IP header at 8), inside an 802.1Q tag still in the packet
//     data (inner ethertype at 2, IP header at 4), and behind an 802.1Q tag
//     held in skb metadata, which is how Linux carries VLAN tags nearly
//     everywhere (tc then reports protocol 802.1Q but the network header
//     is the inner IP or PPPoE header), so shaping the Ethernet device
//     under PPPoE and/or a VLAN still classifies. Only fixed-offset u32
//     keys are used (see encaps in filters.go).
//   - ICMP is classified by its DSCP first, as in sqm-scripts, whose
//     fw-mark filters (the DSCP marks) come before its ICMP rule: an
//     EF-marked ping (ping -Q 0xb8) is priority (1:11), an unmarked one
//     best effort (1:12). The ICMP filters follow the DSCP map and send
//     ICMP with a DSCP the map does not name to bulk (1:13); in
//     sqm-scripts every egress packet carried a mark, so its ICMP rule
//     never matched and such a ping was best effort. The IPv6 filter is
//     a real ICMPv6 match (next header 58 at byte 6 of the IPv6 header);
//     sqm-scripts' reused the IPv4 protocol offset and never matched
//     ICMPv6. ICMPv6 behind extension headers is not matched.
//   - The inert ARP fw filter, the vtun PREROUTING rule and the OUTPUT
//     rule marking the router's own DNS/NTP as AF42 are not reproduced;
//     squash_dscp has no effect with simple and an HTB leaf (sqm-scripts
//     rewrote DSCP with iptables after shaping; sqm does not touch the
//     firewall). The plan carries a note when this applies.
//   - Filter prios are 1..80 and 999 (every filter gets its own prio: the
//     kernel keeps one table per prio and protocol).
//   - simple with cake uses the default cake options (diffserv3 nat) in
//     both directions, plus besteffort/wash on ingress like layer_cake;
//     sqm-scripts dropped them (egress was a bare "cake bandwidth X").
//   - fq_pie auto target is "target <t>us" (sqm-scripts emitted the
//     malformed "target us"); like pie it gets no interval.
//   - linklayer_adaptation_mechanism htb_private with cake uses cake's
//     overhead keywords (sqm-scripts applied no adaptation at all).
//   - htb_private on simplest_tbf's tbf root gets mpu/linklayer/overhead
//     but not "mtu 2047", which in tbf sets the peak-rate bucket instead
//     of the rate table's cell size.
//   - linklayer_adaptation_mechanism cake with a non-cake qdisc applies no
//     adaptation, as in sqm-scripts, but the plan says so in a note.
//   - simple at rates below 384 kbit/s clamps the priority class rate to
//     its ceiling (sqm-scripts gave HTB rate 128kbit > ceil); rates below
//     64 kbit/s are rejected (simple's C/6 and C-16 class rates would
//     degenerate to nothing; no real link is that slow).
//   - bfifo's byte limit is (ilimit/elimit, default 1001) * MTU, i.e. the
//     packet limit in full-size packets.
//   - A cake root gets the explicit handle 1: (sqm-scripts let the kernel
//     pick one), so plans compare equal to what the kernel reports.
//   - With download 0 no IFB is created (sqm-scripts created it and left
//     it down); with upload 0 the root qdisc is left alone.
//   - The burst (tbf bucket, HTB burst and quantum) is sqm-scripts'
//     max(1 ms at the rate, ceil((MTU+48)/48)*53), but with tc_stab never
//     less than what the size table charges for one full frame (MTU+14
//     plus overhead, MPU, ATM cells): tbf drops any packet longer than its
//     bucket, so with ATM and an overhead above 70 bytes (or a small MTU)
//     sqm-scripts' tbf dropped every full-size packet. See minBurst.
//   - linklayer_adaptation_mechanism htb_private refuses a negative
//     overhead or an mpu above 65535 (the kernel's rate table stores both
//     as unsigned 16-bit numbers; sqm-scripts passed them to tc, which
//     failed at start). tc_stab takes a negative overhead.
//   - Unknown or malformed keywords in iqdisc_opts/eqdisc_opts are errors
//     (sqm-scripts passed them to tc unchecked).
//   - The police recipe is new (see policer in build.go for the bucket
//     formula): egress as piece_of_cake with cake, else as simplest;
//     ingress is one match-all u32 filter with a police action on the
//     ingress hook, no IFB, for routers short of CPU.
package plan
