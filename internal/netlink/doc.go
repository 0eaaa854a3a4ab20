// Package netlink is sqm's NETLINK_ROUTE socket: requests with acks,
// dumps, multicast receive, and errors with the kernel's extended ack.
//
// It replaces github.com/mdlayher/netlink in the router build, which
// through mdlayher/socket, golang.org/x/net/bpf and the whole net package
// cost a small program about 0.33 MB on linux/mipsle; sqm needs one
// protocol, one socket type and none of the generic machinery. The socket
// is an *os.File on a non-blocking descriptor, so reads and writes wait
// in the runtime's poller: deadlines work, and Close from another
// goroutine wakes a blocked Receive (the link watcher relies on that).
//
// Replies are read whole: each datagram's size is peeked first
// (MSG_PEEK|MSG_TRUNC), so a large dump chunk is never cut to a buffer's
// size. Framing errors name the message and byte where the reply goes
// wrong; they are the kernel's fault or memory corruption, never the
// caller's, and are reported rather than skipped.
package netlink
