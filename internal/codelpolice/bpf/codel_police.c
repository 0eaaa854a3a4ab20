// SPDX-License-Identifier: GPL-2.0
//
// codel_police: a rate limiter for a router's ingress (tc cls_bpf,
// direct-action) that signals congestion along CoDel's lines instead of
// dropping everything above a bucket.
//
// There is no queue at ingress, so the program keeps a virtual one: the
// time the link at the configured rate would need to send everything
// accepted so far (the token debt, read as a delay). Time the link spends
// below the rate is saved as credit, up to half the hard limit, as a token
// bucket saves tokens. A packet that arrives while that delay has stayed
// above the target for an interval gets a congestion signal, at CoDel's
// rising frequency (next signal interval/sqrt(count) later) as long as the
// delay is not falling: ECN-capable packets are marked CE and pass, the
// others are dropped. Past a hard limit packets are dropped outright. In
// flow-aware mode a due signal is deferred past packets of flows that
// sent less than the average flow recently, so a bulk flow
// takes the signals before a call does; and those thin flows' packets
// still pass past the hard limit, up to twice it, since what decides
// whether a call's packet is lost at the limit is only when it arrives.
//
// Shared state is updated without locks (cls_bpf runs on every CPU at
// once): the debt grows with atomic adds; the CoDel state may lose an
// update under a race, which shifts one signal by a packet and is
// harmless. No BTF and no libbpf headers: the object is built with
// `clang -O2 -target bpfel|bpfeb -c` from this file alone, and sqm's own
// loader reads the legacy "maps" section.
//
// Build: see Makefile target bpf (the objects are committed; Go needs no
// clang).

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;

#define SEC(name) __attribute__((section(name), used))
#define INLINE static inline __attribute__((always_inline))

// struct __sk_buff's prefix (include/uapi/linux/bpf.h; stable ABI).
struct __sk_buff {
	__u32 len;
	__u32 pkt_type;
	__u32 mark;
	__u32 queue_mapping;
	__u32 protocol;
	__u32 vlan_present;
	__u32 vlan_tci;
	__u32 vlan_proto;
	__u32 priority;
	__u32 ingress_ifindex;
	__u32 ifindex;
	__u32 tc_index;
	__u32 cb[5];
	__u32 hash;
	__u32 tc_classid;
	__u32 data;
	__u32 data_end;
};

// The legacy map definition sqm's loader reads (struct bpf_map_def).
struct map_def {
	__u32 type;
	__u32 key_size;
	__u32 value_size;
	__u32 max_entries;
	__u32 map_flags;
};

#define MAP_ARRAY 2
#define MAP_PERCPU_ARRAY 6
#define MAP_LRU_HASH 9

#define TC_ACT_OK 0
#define TC_ACT_SHOT 2

static void *(*map_lookup)(void *map, const void *key) = (void *)1;
static __u64 (*ktime_get_ns)(void) = (void *)5;
static __u32 (*get_hash_recalc)(struct __sk_buff *skb) = (void *)34;
static long (*map_update)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;

// Flags in config.flags.
#define F_ECN 1	 // mark ECN-capable packets instead of dropping them
#define F_FLOWS 2 // flow-aware: spare flows below the average

// config is written once by the loader; the layout is mirrored in
// params.go (configBytes).
struct config {
	__u64 mult;	   // ns per byte of IP packet, 16.16 fixed point
	__u64 target_ns;
	__u64 interval_ns;
	__u64 limit_ns;	   // hard limit on the virtual delay; half of it bounds the credit
	__u64 mtu_ns;	   // time to send one full frame: below it, never signal
	__u32 flags;
	__u32 l2len;	   // link-layer header in front of IP: 14 (Ethernet) or 0
};

// state is the virtual queue and the CoDel controller.
struct state {
	__u64 vq;	   // virtual finish time: the debt ends here (ns); before now: credit
	__u64 first_above; // when the delay may first be acted on; 0: below target
	__u64 signal_next; // next signal while signalling
	__u32 count;	   // signals in this episode
	__u32 lastcount;
	__u32 signalling;
	__u32 rec_inv_sqrt; // 1/sqrt(count), 0.16 fixed point
	__u64 signal_delay; // the delay at the last signal, or at the last one held back
	// Flow-aware mode: bytes and flows seen per interval-long epoch.
	__u64 epoch;
	__u64 bytes_cur, bytes_prev;
	__u64 flows_cur, flows_prev;
};

struct flow {
	__u64 epoch;
	__u64 bytes_cur, bytes_prev;
};

// Counter slots; mirrored in counters.go. Bytes follow packets.
enum {
	C_PASS_PKTS,
	C_PASS_BYTES,
	C_MARK_PKTS,
	C_MARK_BYTES,
	C_DROP_SIGNAL_PKTS, // not ECN-capable: the signal was a drop
	C_DROP_SIGNAL_BYTES,
	C_DROP_LIMIT_PKTS, // above the hard limit
	C_DROP_LIMIT_BYTES,
	C_SPARED,	    // a due signal passed over a flow below the average
	C_OTHER_PKTS,	    // not IPv4/IPv6: counted in the debt, never signalled or dropped
	C_SPARED_LIMIT,	    // a thin flow's packet passed past the hard limit
	C_NR,
};

struct counters {
	__u64 v[C_NR];
};

struct map_def SEC("maps") config = {
	.type = MAP_ARRAY, .key_size = 4, .value_size = sizeof(struct config), .max_entries = 1,
};
struct map_def SEC("maps") state = {
	.type = MAP_ARRAY, .key_size = 4, .value_size = sizeof(struct state), .max_entries = 1,
};
struct map_def SEC("maps") counters = {
	.type = MAP_PERCPU_ARRAY, .key_size = 4, .value_size = sizeof(struct counters), .max_entries = 1,
};
struct map_def SEC("maps") flows = {
	.type = MAP_LRU_HASH, .key_size = 4, .value_size = sizeof(struct flow), .max_entries = 4096,
};

// One Newton-Raphson step towards 1/sqrt(count) (CoDel keeps the
// reciprocal so the control law needs no division or square root).
INLINE __u32 newton(__u32 rec, __u32 count)
{
	__u64 x = (__u64)rec << 16;	  // 0.32
	__u64 x2 = (x * x) >> 32;	  // x^2
	__u64 v = (3ULL << 32) - (__u64)count * x2;
	v = (v >> 2) * x >> 31;		  // x * (3 - count*x^2) / 2
	return (__u32)(v >> 16);
}

// The control law: the next signal interval/sqrt(count) after t.
INLINE __u64 control_law(__u64 t, __u64 interval, __u32 rec)
{
	return t + ((interval * ((__u64)rec << 16)) >> 32);
}

// ones' complement update of a 16-bit checksum (RFC 1624, eqn. 3) for one
// changed 16-bit word; byte order does not matter as long as all three
// are read the same way.
INLINE __u16 csum_update(__u16 check, __u16 old, __u16 new)
{
	__u32 s = (__u16)~check + (__u32)(__u16)~old + new;
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return (__u16)~s;
}

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define ETH_P_PPP_SES 0x8864

SEC("classifier")
int codel_police(struct __sk_buff *skb)
{
	__u32 zero = 0;
	struct config *cfg = map_lookup(&config, &zero);
	struct state *st = map_lookup(&state, &zero);
	struct counters *cnt = map_lookup(&counters, &zero);
	if (!cfg || !st || !cnt)
		return TC_ACT_OK;

	__u64 now = ktime_get_ns();
	__u32 len = skb->len;
	// The IP packet is what costs, as for the plain policer (tc police
	// charges the length past the link-layer header at ingress): the two
	// ingress policers pass the same at one rate, on pppoe-wan as on its
	// Ethernet.
	__u32 l3len = len > cfg->l2len ? len - cfg->l2len : len;
	__u64 cost = ((__u64)l3len * cfg->mult) >> 16;

	// Find the IP header: after the link-layer header, and inside a
	// PPPoE session header when the device is the Ethernet under it.
	void *data = (void *)(long)skb->data;
	void *end = (void *)(long)skb->data_end;
	int v6 = -1; // -1: not IP
	__u8 *ip = 0;
	if (cfg->l2len == 14) {
		__u8 *eth = data;
		if ((void *)(eth + 14 + 20) <= end) {
			__u16 proto = *(__u16 *)(eth + 12);
			if (proto == __builtin_bswap16(ETH_P_IP)) {
				ip = eth + 14, v6 = 0;
			} else if (proto == __builtin_bswap16(ETH_P_IPV6)) {
				if ((void *)(eth + 14 + 40) <= end)
					ip = eth + 14, v6 = 1;
			} else if (proto == __builtin_bswap16(ETH_P_PPP_SES) && (void *)(eth + 22 + 20) <= end) {
				__u16 ppp = *(__u16 *)(eth + 20);
				if (ppp == __builtin_bswap16(0x0021))
					ip = eth + 22, v6 = 0;
				else if (ppp == __builtin_bswap16(0x0057) && (void *)(eth + 22 + 40) <= end)
					ip = eth + 22, v6 = 1;
			}
		}
	} else if (cfg->l2len == 0) {
		__u8 *p = data;
		if ((void *)(p + 20) <= end) {
			if (skb->protocol == __builtin_bswap16(ETH_P_IP))
				ip = p, v6 = 0;
			else if (skb->protocol == __builtin_bswap16(ETH_P_IPV6) && (void *)(p + 40) <= end)
				ip = p, v6 = 1;
		}
	}

	// The delay a packet arriving now would see in the virtual queue.
	// Below the rate the finish time falls behind the clock: that is
	// credit, kept up to half the limit. Without it every moment the
	// senders spent below the rate (as they do for a while after each
	// signal) was capacity lost for good, where the plain policer's bucket
	// refills; in the VM lab that cost about 1 Mbit/s of 50. Half the
	// limit bought nearly all of it back; the whole limit 0.3 Mbit/s more
	// for 2 ms more latency (docs/codel-police.md).
	__u64 credit = cfg->limit_ns >> 1;
	__u64 vq = st->vq;
	if (vq + credit < now) {
		vq = now - credit;
		st->vq = vq;
	}
	__u64 delay = vq > now ? vq - now : 0;

	// Flow-aware bookkeeping: bytes per epoch, globally and per flow.
	// It counts what flows offer, dropped packets included: a flow held
	// at the limit is still the heavy one.
	int spare = 0;
	if ((cfg->flags & F_FLOWS) && ip) {
		__u64 epoch = now / cfg->interval_ns;
		if (epoch > st->epoch) {
			// Roll over. Epochs without packets (a pause longer than
			// an interval) halve what is remembered for each one
			// rather than erase it, so the first packets after a
			// pause are still judged by the flows' recent shares.
			__u64 gap = epoch - st->epoch - 1;
			if (gap > 63)
				gap = 63;
			st->bytes_prev = st->bytes_cur >> gap;
			st->flows_prev = st->flows_cur;
			st->bytes_cur = 0;
			st->flows_cur = 0;
			st->epoch = epoch;
		}
		__u32 key = get_hash_recalc(skb);
		struct flow *f = map_lookup(&flows, &key);
		if (!f) {
			// A new flow has nothing remembered; with no bytes yet in
			// this epoch, the branch below counts it as active.
			struct flow nf = {.epoch = epoch};
			map_update(&flows, &key, &nf, 0);
			f = map_lookup(&flows, &key);
		}
		if (f) {
			if (epoch > f->epoch) {
				__u64 gap = epoch - f->epoch - 1;
				if (gap > 63)
					gap = 63;
				f->bytes_prev = f->bytes_cur >> gap;
				f->bytes_cur = 0;
				f->epoch = epoch;
				__sync_fetch_and_add(&st->flows_cur, 1);
			} else if (f->bytes_cur == 0) {
				__sync_fetch_and_add(&st->flows_cur, 1);
			}
			f->bytes_cur += len;
			__sync_fetch_and_add(&st->bytes_cur, len);
			__u64 nflows = st->flows_cur > st->flows_prev ? st->flows_cur : st->flows_prev;
			if (nflows > 1) {
				// Below the average flow over the last two epochs?
				__u64 mine = f->bytes_cur + f->bytes_prev;
				__u64 all = st->bytes_cur + st->bytes_prev;
				if (mine * nflows < all)
					spare = 1;
			}
		}
	}

	// Past the hard limit, drop, except a thin flow's packet (flow-aware)
	// while the delay is within twice the limit: thin flows add little
	// debt, and a bulk flow held at the limit would otherwise take a
	// call's packets down with its own. Not ARP and the like either: they
	// are few, and losing them would cut the link off rather than slow a
	// sender down.
	if (delay > cfg->limit_ns && ip) {
		if (!spare || delay > 2 * cfg->limit_ns) {
			cnt->v[C_DROP_LIMIT_PKTS]++;
			cnt->v[C_DROP_LIMIT_BYTES] += len;
			return TC_ACT_SHOT;
		}
		cnt->v[C_SPARED_LIMIT]++;
	}

	// CoDel's decision on the virtual delay. Below target, or with less
	// than one full frame of debt, there is no standing queue.
	int signal = 0;
	int ok_to_signal = 0;
	if (ip) {
		if (delay < cfg->target_ns || delay <= cfg->mtu_ns) {
			st->first_above = 0;
		} else if (st->first_above == 0) {
			st->first_above = now + cfg->interval_ns;
		} else if (now >= st->first_above) {
			ok_to_signal = 1;
		}
		if (st->signalling) {
			if (!ok_to_signal) {
				st->signalling = 0;
			} else if (now >= st->signal_next && delay < st->signal_delay) {
				// The delay has fallen since the last signal: the
				// senders are slowing down already. A virtual queue
				// drains only as fast as the arrivals fall below the
				// rate, slowly when the line upstream is only a little
				// faster, and CoDel's rising frequency would go on
				// signalling flows that have answered: each such
				// signal cost goodput in the VM lab. Hold it back and
				// look again one signal interval later.
				st->signal_next = control_law(now, cfg->interval_ns, st->rec_inv_sqrt);
				st->signal_delay = delay;
			} else if (now >= st->signal_next) {
				if (spare) {
					cnt->v[C_SPARED]++;
				} else {
					signal = 1;
					st->signal_delay = delay;
					__u32 c = st->count + 1;
					st->count = c;
					st->rec_inv_sqrt = newton(st->rec_inv_sqrt, c);
					st->signal_next = control_law(st->signal_next, cfg->interval_ns, st->rec_inv_sqrt);
				}
			}
		} else if (ok_to_signal) {
			if (spare) {
				cnt->v[C_SPARED]++;
			} else {
				signal = 1;
				st->signal_delay = delay;
				st->signalling = 1;
				// Resume near the last episode's rate if it ended recently.
				__u32 delta = st->count - st->lastcount;
				__u32 c = 1;
				// Signed: a next signal still in the future counts
				// as recent, as in CoDel.
				if (delta > 1 && (long long)(now - st->signal_next) < (long long)(16 * cfg->interval_ns))
					c = delta;
				st->count = c;
				st->rec_inv_sqrt = c == 1 ? 0xffff : newton(st->rec_inv_sqrt, c);
				st->lastcount = c;
				st->signal_next = control_law(now, cfg->interval_ns, st->rec_inv_sqrt);
			}
		}
	} else {
		cnt->v[C_OTHER_PKTS]++;
	}

	if (signal && ip) {
		__u8 ecn;
		if (v6 == 0) {
			if ((void *)(ip + 20) > end)
				return TC_ACT_OK;
			ecn = ip[1] & 3;
		} else {
			if ((void *)(ip + 40) > end)
				return TC_ACT_OK;
			ecn = (ip[1] >> 4) & 3;
		}
		if (ecn == 0 || !(cfg->flags & F_ECN)) {
			cnt->v[C_DROP_SIGNAL_PKTS]++;
			cnt->v[C_DROP_SIGNAL_BYTES] += len;
			return TC_ACT_SHOT;
		}
		if (ecn != 3) {
			if (v6 == 0) {
				if ((void *)(ip + 20) > end)
					return TC_ACT_OK;
				__u16 old = *(__u16 *)ip;
				ip[1] |= 3;
				__u16 new = *(__u16 *)ip;
				__u16 *check = (__u16 *)(ip + 10);
				*check = csum_update(*check, old, new);
			} else {
				if ((void *)(ip + 40) > end)
					return TC_ACT_OK;
				ip[1] |= 0x30;
			}
		}
		cnt->v[C_MARK_PKTS]++;
		cnt->v[C_MARK_BYTES] += len;
	} else {
		cnt->v[C_PASS_PKTS]++;
		cnt->v[C_PASS_BYTES] += len;
	}
	// The packet passes: it adds to the debt.
	__sync_fetch_and_add(&st->vq, cost);
	return TC_ACT_OK;
}

char _license[] SEC("license") = "GPL";
