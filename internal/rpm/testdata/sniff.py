#!/usr/bin/env python3
"""Record every TCP segment on one interface with the kernel's timestamp.

Used by TestRPMBreakdown (SQM_RPM_BREAKDOWN=1) in a namespace, where no
tcpdump is installed: one line per segment, "ts out|in sport dport flags
seq ack payload_len", until SIGTERM.
"""
import signal, socket, struct, sys

ETH_P_IP = 0x0800
ETH_P_ALL = 0x0003  # outgoing packets reach only ETH_P_ALL taps
SO_TIMESTAMPNS = 35
PACKET_OUTGOING = 4

dev, path = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(ETH_P_ALL))
s.bind((dev, ETH_P_ALL))
s.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
out = open(path, "w", buffering=1 << 20)
stop = False
def term(*_):
    global stop
    stop = True
    s.close()
signal.signal(signal.SIGTERM, term)
while not stop:
    try:
        data, anc, _, addr = s.recvmsg(128, socket.CMSG_SPACE(16))
    except OSError:
        break
    if addr[1] != ETH_P_IP or len(data) < 20 or data[9] != 6:
        continue
    ts = 0.0
    for lvl, typ, cd in anc:
        if lvl == socket.SOL_SOCKET and typ == SO_TIMESTAMPNS:
            sec, ns = struct.unpack("qq", cd[:16])
            ts = sec + ns / 1e9
    ihl = (data[0] & 15) * 4
    tot = struct.unpack("!H", data[2:4])[0]
    sport, dport, seq, ack, off, flags = struct.unpack("!HHIIBB", data[ihl:ihl + 14])
    plen = tot - ihl - (off >> 4) * 4
    d = "out" if addr[2] == PACKET_OUTGOING else "in"
    out.write(f"{ts:.6f} {d} {sport} {dport} {flags} {seq} {ack} {plen}\n")
out.close()
