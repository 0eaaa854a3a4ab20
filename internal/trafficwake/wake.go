// Package trafficwake tells an idle autorate loop that traffic has
// started on its interface, so that the loop can sleep for long while the
// link is idle and still see a load as it starts.
//
// Without it, an idle loop must wake often (every second) to read the
// shaper's counters, and even then a load is seen up to a tick late: the
// senders' first burst fills the modem's buffer before the controller
// probes and cuts. A tick is what an idle daemon spends its CPU on (in
// the lab's VM, 4-7 ms of CPU each), so the two pulled against each
// other (docs/autorate.md, "Waking on traffic").
//
// The signal is one packet of load size (MinLen bytes or more, a data
// segment, not an ACK, a DNS reply or a keepalive) crossing the
// interface either way, seen through a packet socket whose filter runs
// in the kernel: nothing reaches the process until such a packet does.
// The socket exists only while armed; a wake closes it, so a loaded link
// pays nothing per packet.
package trafficwake

// MinLen is the smallest packet (bytes, link-layer header included) that
// wakes: larger than an ACK or a DNS or NTP exchange, smaller than the
// full-size segments and QUIC datagrams (1200-1500 bytes) a transfer
// sends.
const MinLen = 1000
