#!/usr/bin/env python3
"""Attribute RPM probe times to their parts, from TestRPMBreakdown's data.

    python3 breakdown.py DIR PORT     (PORT: 4444 for sqm server, 4443 nginx)

Foreign probes: each loaded probe of the result's window is matched to its
connection by the SYN-ACK's arrival (probe start + tcp_ms), and its HTTP
time is split at the request's departure from the client's interface and
the response's arrival. Load connections: `ss -tin` samples in the window
give the bytes each sender holds unsent (notsent) and how long they take to
drain at the connection's share of the direction's goodput.
"""
import collections, datetime, json, re, statistics as S, sys

d, srvport = sys.argv[1], int(sys.argv[2])
r = json.load(open(d + "/result.json"))
base = datetime.datetime.fromisoformat(r["start"][:26]).replace(tzinfo=datetime.timezone.utc).timestamp()
lo_s = r["load_end_s"] - 4


def show(name, v, unit="ms"):
    v = [x for x in v if x == x]
    if len(v) < 2:
        return
    q = S.quantiles(v, n=4)
    print("  %-40s median %7.1f %s (p25 %7.1f, p75 %7.1f, n=%d)" % (name, S.median(v), unit, q[0], q[2], len(v)))


conns = collections.defaultdict(list)
for line in open(d + "/packets.txt"):
    a, _, s, dp, f, sq, ak, n = line.split()
    s, dp = int(s), int(dp)
    up = dp == srvport
    conns[s if up else dp].append((float(a), up, int(f), int(sq), int(ak), int(n)))
synack = {}
for c, v in conns.items():
    x = [p for p in v if not p[1] and p[2] & 0x12 == 0x12]
    if x:
        synack[c] = x[0][0]
rows = []
for p in r["probes"]:
    if p["phase"] != "loaded" or p["kind"] != "foreign" or p.get("error") or p["end_s"] <= lo_s:
        continue
    want = base + p["start_s"] + p["tcp_ms"] / 1000
    c = min(synack, key=lambda c: abs(synack[c] - want))
    if abs(synack[c] - want) > 0.005:
        continue
    v = conns[c]
    tend = base + p["end_s"]
    trt = tend - p["http_ms"] / 1000  # the request was issued
    srv = [q for q in v if not q[1] and q[5] > 0]
    if not srv:
        continue
    ch_end = srv[0][4]  # the server's first flight acks the whole ClientHello
    cp = [q for q in v if q[1] and q[5] > 0]

    def seg_with(off):
        for q in cp:
            if q[3] <= ch_end + off < q[3] + q[5]:
                return q

    # Go's client after the handshake: 64 B (CCS + Finished), 92 B (preface,
    # SETTINGS, WINDOW_UPDATE), then the request's HEADERS.
    pre, req = seg_with(64), seg_with(64 + 92)
    if not (pre and req):
        continue
    reqend = req[3] + req[5]
    resp = [q for q in srv if q[4] - reqend >= 0 and q[0] <= tend + 0.0005]
    if not resp:
        continue
    rows.append(dict(http=p["http_ms"], tcp=p["tcp_ms"], tls=p["tls_ms"],
                     req_out=(req[0] - trt) * 1e3, req_after_pre=(req[0] - pre[0]) * 1e3,
                     resp_first=(resp[0][0] - req[0]) * 1e3, resp_last=(resp[-1][0] - req[0]) * 1e3,
                     after_last=(tend - resp[-1][0]) * 1e3))
print("foreign probes in the window matched to their packets: %d" % len(rows))
for k, name in [("tcp", "TCP handshake"), ("tls", "TLS round trip"), ("http", "HTTP (issued -> last byte)"),
                ("req_out", " request leaves the client's interface"),
                ("req_after_pre", " ... after the client's preface left"),
                ("resp_first", " first response segment after that"),
                ("resp_last", " last response segment after that"),
                ("after_last", " last byte read after it arrived")]:
    show(name, [x[k] for x in rows])

# Load connections from the ss samples.
lo, hi = base + lo_s, base + r["load_end_s"]
mbps = {"down": r["download_mbps"], "up": r["upload_mbps"]}
last = r["intervals"][-1]
nconn = {"down": last["down_conns"], "up": last["up_conns"]}
for fn, at_srv in [(d + "/ss-srv.txt", True), (d + "/ss-cli.txt", False)]:
    by = collections.defaultdict(list)
    ts = head = None
    for line in open(fn):
        if line.startswith("@"):
            ts = float(line.split()[1])
            continue
        if not line[:1].isspace():
            head = line.split()
            continue
        if ts is None or not lo <= ts <= hi or head is None:
            continue
        loc = head[2]
        if at_srv != loc.endswith(":%d" % srvport):
            continue
        f = dict(re.findall(r"(\w+):(\S+)", line))
        sent, recv = int(f.get("bytes_sent", 0)), int(f.get("bytes_received", 0))
        if max(sent, recv) < 300_000:
            continue  # probes, not load
        if sent < recv:
            continue  # only the sending side holds data back
        direction = "down" if at_srv else "up"
        by[direction].append(int(f.get("notsent", 0)))
    for direction, v in by.items():
        share = mbps[direction] / max(nconn[direction], 1) * 1e6 / 8
        print("%s connections, sender (%s): %d samples, %d connections, %.2f Mbit/s each" % (
            direction, "server" if at_srv else "client", len(v), nconn[direction], share * 8 / 1e6))
        show("unsent bytes", [x / 1000 for x in v], "kB")
        show("their drain time at that share", [x / share * 1000 for x in v])
for kind in ("down", "up"):
    sp = [p for p in r["probes"] if p["phase"] == "loaded" and p["kind"] == "self" and p.get("load") == kind
          and not p.get("error") and p["end_s"] > lo_s]
    print("self probes on %s connections:" % kind)
    show("HTTP", [p["http_ms"] for p in sp])
    show(" of which wait in the client", [p.get("wait_ms", 0) for p in sp])
