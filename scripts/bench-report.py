#!/usr/bin/env python3
"""Writes report.md and report.html from a scripts/bench-report run.

usage: bench-report.py DIR

DIR holds data/ (each section's CSV, machine.tsv, sections.tsv), logs/ and
plots/. Each table puts the figures of this run beside the paper's own and
beside the baseline measured in the same run. Plots are drawn by `ninep
bench plot` ($NINEP) from CSV files written into plots/. Exits 1 if a
section failed or a cell of a table is empty, naming them.
"""

import csv
import html
import math
import os
import re
import subprocess
import sys

DIR = sys.argv[1]
NINEP = os.environ.get("NINEP", "ninep")


def data(name):
    return os.path.join(DIR, "data", name)


def rows_of(name):
    """The rows of a CSV file in data/ as dicts; None if it is missing."""
    try:
        with open(data(name), newline="") as f:
            return list(csv.DictReader(f))
    except FileNotFoundError:
        return None


def tsv(name):
    try:
        with open(data(name)) as f:
            return [line.rstrip("\n").split("\t") for line in f if line.strip()]
    except FileNotFoundError:
        return []


def num(v, fmt="{:.1f}"):
    """A number formatted, or None (an empty cell) if it is not one."""
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    if math.isinf(x):
        return "+++++"
    return fmt.format(x)


def ratio(a, b, fmt="{:.2f}"):
    try:
        a, b = float(a), float(b)
    except (TypeError, ValueError):
        return None
    if math.isinf(a) or math.isinf(b):
        return "n/a (+++++)"
    if b == 0:
        return None
    return fmt.format(a / b)


class Report:
    def __init__(self):
        self.blocks = []
        self.empty = []
        self.heading = ""

    def h(self, level, text):
        self.blocks.append(("h", level, text))
        if level == 2:
            self.heading = text

    def p(self, text):
        self.blocks.append(("p", text))

    def table(self, header, rows):
        out = []
        for row in rows:
            cells = []
            for i, c in enumerate(row):
                if c is None or str(c).strip() in ("", "-"):
                    self.empty.append("%s: %s / %s" % (self.heading, row[0], header[i]))
                    c = "–"
                cells.append(str(c))
            out.append(cells)
        self.blocks.append(("table", header, out))

    def plot(self, name, title, csv_text, x, y, by, where=()):
        """Draws a plot from CSV text with `ninep bench plot`."""
        path = os.path.join(DIR, "plots", name + ".csv")
        with open(path, "w") as f:
            f.write(csv_text)
        svg = os.path.join(DIR, "plots", name + ".svg")
        cmd = [NINEP, "bench", "plot", path, "--x", x, "--y", y, "--by", by,
               "--title", title, "--out", svg]
        for w in where:
            cmd += ["--where", w]
        drawn = subprocess.run(cmd, stderr=subprocess.PIPE, text=True)
        if drawn.returncode != 0:
            self.empty.append("%s: plot %s: %s" % (self.heading, name, drawn.stderr.strip()))
        self.image(name + ".svg", title)

    def image(self, file, title):
        if os.path.exists(os.path.join(DIR, "plots", file)):
            self.blocks.append(("img", file, title))
        else:
            self.empty.append("%s: no plot %s" % (self.heading, file))

    def failed(self, section, what):
        self.empty.append("%s: %s" % (section, what))
        self.p("**Not measured**: %s (see `logs/%s.log`)." % (what, section))

    def markdown(self):
        out = []
        for b in self.blocks:
            if b[0] == "h":
                out.append("#" * b[1] + " " + b[2])
            elif b[0] == "p":
                out.append(b[1])
            elif b[0] == "table":
                out.append("| " + " | ".join(b[1]) + " |")
                out.append("|" + "---|" * len(b[1]))
                for r in b[2]:
                    out.append("| " + " | ".join(r) + " |")
            elif b[0] == "img":
                out.append("![%s](plots/%s)" % (b[2], b[1]))
            out.append("")
        return "\n".join(out)

    def html(self):
        def inline(text):
            text = html.escape(text)
            text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
            return re.sub(r"`(.+?)`", r"<code>\1</code>", text)

        out = ["<!DOCTYPE html>", "<html><head><meta charset=\"utf-8\">",
               "<title>ninep against its papers</title>",
               "<style>body{font-family:sans-serif;max-width:70em;margin:auto}"
               "table{border-collapse:collapse;margin:1em 0}"
               "td,th{border:1px solid #999;padding:2px 6px;text-align:right}"
               "td:first-child,th:first-child{text-align:left}</style>",
               "</head><body>"]
        for b in self.blocks:
            if b[0] == "h":
                out.append("<h%d>%s</h%d>" % (b[1], inline(b[2]), b[1]))
            elif b[0] == "p":
                out.append("<p>%s</p>" % inline(b[1]))
            elif b[0] == "table":
                out.append("<table><tr>" + "".join("<th>%s</th>" % inline(h) for h in b[1]) + "</tr>")
                for r in b[2]:
                    out.append("<tr>" + "".join("<td>%s</td>" % inline(c) for c in r) + "</tr>")
                out.append("</table>")
            elif b[0] == "img":
                # The SVG goes inline, so that the page stands alone.
                with open(os.path.join(DIR, "plots", b[1])) as f:
                    svg = f.read()
                out.append("<figure>%s<figcaption>%s</figcaption></figure>" % (svg, inline(b[2])))
        out.append("</body></html>")
        return "\n".join(out)


R = Report()
machine = dict(r for r in tsv("machine.tsv") if len(r) == 2)
# section: (status, started, seconds, load average before)
sections = {r[0]: tuple(r[1:]) for r in tsv("sections.tsv")[1:] if len(r) == 5}
ran = lambda s: s in sections
if not sections:
    R.empty.append("data/sections.tsv: no sections")


def figures(section, name):
    """The rows of data/NAME for SECTION, saying in the report if the
    section failed or left no figures (None then)."""
    status = sections[section][0]
    if status != "ok":
        R.failed(section, "the section %s" % status)
    rows = rows_of(name)
    if rows is None:
        R.failed(section, "no figures in data/%s" % name)
    return rows


def distinct(rows, key):
    """The values of column KEY in the order they first appear."""
    seen = []
    for r in rows:
        if r[key] not in seen:
            seen.append(r[key])
    return seen


mode = machine.get("mode", "?")
R.h(1, "ninep against its papers: %s report, %s" % (mode, machine.get("date", "?")))
R.p("Every table of the papers ninep started from, measured on one machine in one run of "
    "`scripts/bench-report%s`. Each figure stands beside the paper's own number (where the "
    "paper's text gives one; some give only a plot) and beside the baseline measured in the "
    "same run, which is the figure to compare with: the papers' machines are 15 to 35 years "
    "old." % ({"quick": " --quick", "smoke": " --smoke"}.get(mode, "")))
if mode != "full":
    R.p("**This is a %s run**: small sizes and one repetition, to show the report works; "
        "its figures are indicative only." % mode)
R.h(2, "Machine")
R.table(["", ""], [[k, machine.get(k)] for k in
                   ("date", "host", "cpu", "memory", "kernel", "congestion", "os", "load_before", "load_after",
                    "ninep", "rustc", "build_seconds", "bench_seconds")])
R.p("Peers, as installed (Debian package versions):")
R.table(["peer", "version"], [[k, machine.get(k)] for k in
                              ("diod", "sshfs", "nginx", "curl", "wrk", "bonnie++", "postmark",
                               "toxiproxy", "fuse3")])
R.p("Each section, when it ran and the load average as it started (a run into an existing "
    "report replaces the sections it runs; the machine table is of the last run):")
R.table(["section", "status", "started", "seconds", "load average", "log"],
        [[s] + list(v) + ["logs/%s.log" % s] for s, v in sections.items()])

# --- v9fs ---------------------------------------------------------------------

MOUNT_ROWS = [
    ("pm.tx", "PostMark transactions/s (Ill. 2)", "{:.0f}"),
    ("pm.read_kibs", "PostMark read, KiB/s (Ill. 3)", "{:.0f}"),
    ("pm.write_kibs", "PostMark written, KiB/s (Ill. 3)", "{:.0f}"),
    ("bn.write", "Bonnie++ block write, MiB/s (Ill. 1)", "{:.1f}"),
    ("bn.rewrite", "Bonnie++ rewrite, MiB/s (Ill. 1)", "{:.1f}"),
    ("bn.read", "Bonnie++ block read, MiB/s (Ill. 1)", "{:.1f}"),
    ("bn.seeks", "Bonnie++ random seeks/s (Ill. 1)", "{:.0f}"),
    ("seq.write", "8 KiB writes + fsync, MiB/s", "{:.1f}"),
    ("seq.read", "8 KiB reads, cold cache, MiB/s", "{:.1f}"),
]
MOUNT_SEED = {
    "pm.tx": "9P2000 ≈ 2× NFSv3",
    "pm.read_kibs": "9P2000 ≈ 2× NFSv3",
    "pm.write_kibs": "9P2000 ≈ 2× NFSv3",
    "bn.write": "9P2000 below NFSv3 (no write-back)",
    "bn.rewrite": "comparable or better",
    "bn.read": "comparable or better",
    "bn.seeks": "comparable or better",
}
if ran("mount"):
    R.h(2, "v9fs (Van Hensbergen and Minnich 2005): Bonnie and PostMark, Illustrations 1-3")
    R.p("The paper ran Bonnie on a 512 MB file and PostMark with 500 files and 50,000 "
        "transactions on 9P2000 (caches off) and NFSv3 at 8 KiB and 32 KiB buffer sizes. Its "
        "illustrations are plots whose numbers the text does not give; the column *paper* "
        "carries what the text says. **NFS cannot be had here**: Debian has a user-space NFS "
        "server (nfs-ganesha), but this kernel has no NFS client (no `nfs` in "
        "/proc/filesystems, no modules to load) and Debian has no FUSE NFS client, so sshfs "
        "(SFTP) over loopback stands in for the other protocol. Everything runs on a tmpfs, "
        "so that the file systems' own costs are compared, not a disk's. *ninep/sshfs* is the "
        "ratio the paper's 9P/NFS corresponds to; *fuse-none* is bindfs of the same directory, a "
        "FUSE file system answering from it with no network and no cache (what FUSE costs "
        "without a server); *local* is the limit.")
    for msize, label in (("8216", "8 KiB"), ("32792", "32 KiB")):
        rows = figures("mount", "mount-%s.csv" % msize)
        if rows is None:
            continue
        val = {(r["measure"], r["config"]): r["median"] for r in rows}
        configs = distinct(rows, "config")
        R.h(3, "msize %s of data (Bonnie++ in 8 KiB blocks)" % label)
        table = []
        for key, label_, fmt in MOUNT_ROWS:
            cells = [label_] + [num(val.get((key, c)), fmt) for c in configs]
            cells.append(ratio(val.get((key, "ninep-none")), val.get((key, "sshfs"))))
            cells.append(MOUNT_SEED.get(key, "(not in the paper)"))
            table.append(cells)
        R.table(["workload"] + configs + ["ninep-none/sshfs", "paper"], table)
    R.p("+++++: bonnie++ found the phase too quick to time (the file fits in the page cache).")

if ran("ops"):
    R.h(2, "v9fs: operations per PostMark transaction")
    R.p("9P requests counted by `ninep trace` between `ninep mount --cache none` and `ninep "
        "serve`, over a whole PostMark run (creation and deletion included), divided by its "
        "transactions. The paper: \"9P2000 with half the operations of NFS for 8k and 32k "
        "buffer sizes\", NFS sending over twice as many lookups and an access almost every "
        "time it touches a file. The NFS side cannot be counted here (no NFS client, above).")
    rows = figures("ops", "ops.csv")
    if rows is not None:
        msizes = sorted({r["msize"] for r in rows}, key=int)
        val = {(r["msize"], r["request"]): r["per_transaction"] for r in rows}
        requests = distinct(rows, "request")
        R.table(["request"] + ["per transaction, msize %s" % m for m in msizes],
                [[q] + [num(val.get((m, q)), "{:.2f}") or "0" for m in msizes] for q in requests])

# --- Floren -------------------------------------------------------------------

FLOREN = {  # size MB: {rtt ms: (9P s, HTTP s)}
    10: {0: (10.60, 11.91), 15: (29.57, 14.08), 50: (76.16, 19.43)},
    50: {0: (51.96, 62.04), 15: (147.44, 70.81), 50: (374.07, 98.88)},
    100: {0: (103.64, 124.80), 15: (296.06, 140.38), 50: (747.13, 197.90)},
    200: {0: (208.81, 249.50), 15: (590.94, 281.63), 50: (1512.31, 400.00)},
}
CLIENT_NAMES = {"one": "9P one at a time", "pipeline": "9P pipelined", "stream": "9P stream",
                "mux": "stream via mux", "none": "mount, none", "strict": "mount, strict",
                "loose": "mount, loose",
                "diod": "diod, pipelined",
                "http": "nginx+curl"}


def floren_table(name, capped):
    rows = figures("streams", name)
    if rows is None:
        return
    clients = distinct(rows, "client")
    secs = {(r["rtt_ms"], r["size_mib"], r["client"]): r["seconds"] for r in rows}
    measured = {r["rtt_ms"]: r["measured_rtt_ms"] for r in rows}
    for size in sorted({r["size_mib"] for r in rows}, key=int):
        table = []
        seed = FLOREN.get(int(size))
        for rtt in sorted({r["rtt_ms"] for r in rows}, key=int):
            cells = ["%s ms (%s)" % (rtt, num(measured.get(rtt), "{:.2f}"))]
            cells += [num(secs.get((rtt, size, c)), "{:.2f}") for c in clients]
            cells.append(ratio(secs.get((rtt, size, "one")), secs.get((rtt, size, "http"))))
            cells.append(ratio(secs.get((rtt, size, "stream")), secs.get((rtt, size, "http"))))
            if seed:
                p9, ph = seed[int(rtt)]
                cells += ["%.2f / %.2f" % (p9, ph), "%.2f" % (p9 / ph)]
            else:
                p9, ph = FLOREN[200][int(rtt)]
                cells += ["(200 MB) %.2f / %.2f" % (p9, ph), "%.2f" % (p9 / ph)]
            table.append(cells)
        R.h(3, "%s MiB, %s" % (size, "10 Mbit/s, msize 8 KiB" if capped else "uncapped, msize 1 MiB"))
        R.table(["RTT (ping-pong)"] + ["%s, s" % CLIENT_NAMES.get(c, c) for c in clients]
                + ["one/HTTP", "stream/HTTP", "paper 9P / HTTP, s", "paper 9P/HTTP"], table)
        csv_text = "rtt_ms,client,mb_per_s\n" + "".join(
            "%s,%s,%s\n" % (r["rtt_ms"], CLIENT_NAMES.get(r["client"], r["client"]), r["mb_per_s"])
            for r in rows if r["size_mib"] == size)
        R.plot("%s-%s" % (name[:-4], size), "%s MiB %s: MB/s against RTT" %
               (size, "at 10 Mbit/s, msize 8 KiB" if capped else "uncapped, msize 1 MiB"),
               csv_text, "rtt_ms", "mb_per_s", "client")


if ran("streams"):
    R.h(2, "Floren (2010): Tables 1.1-1.3, copying files over a long link")
    R.p("Floren copied 10-200 MB between two Plan 9 machines through a 10 Mbit/s hub and a "
        "Linux gateway adding latency with netem (round trips of 0.5, 15 and 50 ms), 9P (one "
        "request at a time, 8 KiB msize) against HTTP. **This kernel has no netem**, and "
        "there is no hub: toxiproxy adds the latency (half each way) and, for the first "
        "tables, its bandwidth toxic caps each direction at 10 Mbit/s. The 0 ms row is "
        "loopback with nothing added (its ping-pong through the proxy is shown), standing for "
        "his 0.5 ms. Sizes are MiB where his are MB; where a size is not his, the paper "
        "column shows his 200 MB figures. The ratio to compare with his 9P/HTTP is *one/HTTP*: "
        "from his tables 0.84 at 0.5 ms, 2.10 at 15 ms, 3.78 at 50 ms (200 MB; 9P itself took "
        "2.83 times as long at 15 ms as at 0.5 ms). Every time is seconds. The uncapped tables carry his figures (taken at 10 Mbit/s) for "
        "their ratio only.")
    floren_table("streams-10mbit.csv", True)
    floren_table("streams-1mib.csv", False)

# --- Hickey ---------------------------------------------------------------------

MUX_FIGS = [
    ("mux-clients", "Figure 8: clients, one server", "clients",
     "near-linear to 512 clients, then steep (his queues held 512)"),
    ("mux-servers", "Figure 9: servers, one client", "servers",
     "flat; 40-50 ms a transaction with ramfs"),
    ("mux-both", "Figure 10: clients = servers", "clients and servers",
     "varies below 16, linear above"),
    ("mux-walk", "Figure 11: a walk across mount points", "mount points",
     "linear: a constant cost per mount point"),
    ("mux-union", "Figure 12: reading a union directory", "members",
     "super-linear with a small factor"),
]
if ran("mux"):
    R.h(2, "Hickey (2004): the mux's scaling, Figures 8-12")
    R.p("`ninep bench mux`: ramfs servers and the mux in one process on loopback. A client's "
        "message suite is walk, create, write, clunk; walk, open, read, stat, wstat "
        "(Tsetattr), clunk; walk, remove: every 9P request but auth and flush as in the "
        "thesis, less version and attach (once per session here, not per suite). Latency is "
        "the mean of one message. The thesis gives its figures as plots; *paper* says what "
        "its text reports of their shape. The baseline is the null operation straight to "
        "ramfs, through a byte-copying forwarder and through the mux, below.")
    rows = figures("mux", "mux.csv")
    if rows is not None:
        for fig, title, x, seed in MUX_FIGS:
            pts = [r for r in rows if r["figure"] == fig]
            R.h(3, title)
            R.p("Paper: %s." % seed)
            R.table([x] + [r["x"] for r in pts],
                    [["µs per message"] + [num(r["us_per_message"]) for r in pts]])
            R.image(fig + ".svg", title)
        hop = {(r["figure"], r["x"]): r["us_per_message"] for r in rows if r["figure"].startswith("hop-")}
        conns = sorted({x for _, x in hop}, key=int)
        R.h(3, "The hop: a null operation, p50 µs")
        R.table(["connections", "direct (baseline)", "forwarder", "mux", "mux/direct"],
                [[c, num(hop.get(("hop-direct", c))), num(hop.get(("hop-forwarder", c))),
                  num(hop.get(("hop-mux", c))),
                  ratio(hop.get(("hop-mux", c)), hop.get(("hop-direct", c)))] for c in conns])

if ran("http"):
    R.h(2, "Hickey: the web server on the mux, Figures 13-14")
    R.p("`ninep http` in front of `ninep serve` directly (over loopback TCP and over a "
        "Unix socket) and through a mux of its own (a namespace file whose root is a union "
        "of two servers, one holding the small file and the other the large one), beside "
        "nginx serving the same directory, "
        "measured by wrk on loopback, keep-alive. Hickey served a Zipf mix of files by "
        "fork-per-request httpd and his mux-based uhttpd: \"for 64 clients, the latency of "
        "uhttpd is 18% worse than httpd\" in memory; his Figure 14 is the distribution of "
        "response times at 32 clients, given here as wrk's percentiles. nginx is the "
        "baseline. The door keeps files it has sent and sends one again once it opens "
        "by its name with its qid unchanged; ninep-http-nothing-kept is the same door keeping "
        "nothing, reading every file anew; nginx-front is nginx in front of nginx.")
    rows = figures("http", "http.csv")
    if rows is not None:
        val = {(r["file"], r["server"], r["connections"]): r for r in rows}
        servers = distinct(rows, "server")
        for f in sorted({r["file"] for r in rows}):
            R.h(3, "Figure 13: requests/s, the %s file" % f)
            conns = sorted({r["connections"] for r in rows if r["file"] == f}, key=int)
            R.table(["connections"] + servers + ["on the mux / nginx"],
                    [[c] + [num(val.get((f, s, c), {}).get("requests_per_s"), "{:.0f}") for s in servers]
                     + [ratio(val.get((f, "ninep-http-mux", c), {}).get("requests_per_s"),
                              val.get((f, "nginx", c), {}).get("requests_per_s"))] for c in conns])
            R.plot("http-%s" % f, "requests/s against connections, %s file" % f,
                   "connections,server,requests_per_s\n" + "".join(
                       "%s,%s,%s\n" % (r["connections"], r["server"], r["requests_per_s"])
                       for r in rows if r["file"] == f),
                   "connections", "requests_per_s", "server")
            if "32" in conns:
                R.h(3, "Figure 14: response time at 32 connections, the %s file (ms)" % f)
                R.table(["server", "p50", "p75", "p90", "p99"],
                        [[s] + [num(val.get((f, s, "32"), {}).get(k), "{:.3f}")
                                for k in ("p50_ms", "p75_ms", "p90_ms", "p99_ms")] for s in servers])

# --- 9Back ---------------------------------------------------------------------------

if ran("rtt"):
    R.h(2, "9Back: Figure 11, round trip on loopback")
    R.p("The paper passed a 256-byte buffer forth and back over TCP on Plan 9's loopback: "
        "44,292.755 µs a round trip (ping: 32 µs). Here, a 9P null operation (Tgetattr of "
        "the root, 9P2000.L) against ninep's ramfs and against diod, beside a TCP ping-pong "
        "of the same sizes in the same run, the baseline; medians.")
    rows = figures("rtt", "rtt.csv")
    if rows is not None:
        R.table(["server", "connections", "9P ops/s", "9P p50 µs", "TCP ping-pong p50 µs",
                 "9P/TCP latency", "paper, TCP µs"],
                [[r["server"], r["conns"], num(r["ninep_ops_per_s"], "{:.0f}"), num(r["ninep_p50_us"]),
                  num(r["tcp_p50_us"]), ratio(r["ninep_p50_us"], r["tcp_p50_us"]), "44292.8"]
                 for r in rows])

if ran("remote"):
    R.h(2, "9Back: Figures 12, 13, 17 and 18, over the network")
    R.p("`ninep bench remote` against `ninep serve` of a directory on /dev/shm over loopback, "
        "each figure beside a baseline of the same run: a bare TCP connection for set-up, "
        "the same bytes over a TCP connection for reads, local reads of the same files for "
        "contention. The paper's remote reads (Fig. 17) crossed the Internet to a public "
        "Plan 9 server; there is none here, so the loopback is the closest honest "
        "substitute and the TCP column says what the wire itself allows.")
    rows = figures("remote", "remote.csv")
    if rows is not None:
        by = lambda fig: [r for r in rows if r["figure"] == fig]
        R.h(3, "Figure 13: connection set-up and tear-down, mean µs")
        seed13 = {"setup": "568.06", "teardown": "5.928"}
        R.table(["", "9P: connect, Tversion, Tattach / Tclunk, close", "TCP connect / close (baseline)",
                 "9P/TCP", "paper, TCP on Plan 9"],
                [[r["figure"], num(r["ninep"]), num(r["baseline"]), ratio(r["ninep"], r["baseline"]),
                  seed13[r["figure"]]] for r in by("setup") + by("teardown")])
        R.h(3, "Figures 12 and 17: reading a whole file, MB/s")
        R.p("One request of iounit size at a time over 9P, timed from the open to the clunk "
            "(two round trips besides the reads, which is most of a small file's time); TCP "
            "moves the same bytes on one open connection, one request and its reply. Paper: peak TCP bandwidth 758.71 Mb/s (94.8 MB/s, Fig. 12); a remote "
            "5 MB file over 9P at 77 KB/s across the Internet (Fig. 17).")
        R.table(["file size, bytes", "9P MB/s", "TCP MB/s (baseline)", "9P/TCP"],
                [[r["x"], num(r["ninep"]), num(r["baseline"]), ratio(r["ninep"], r["baseline"])]
                 for r in by("read-size")])
        R.plot("remote-read-size", "whole-file reads: MB/s against log2 of the size",
               "log2_bytes,path,mb_per_s\n" + "".join(
                   "%.0f,%s,%s\n" % (math.log2(int(r["x"])), path, r[col])
                   for r in by("read-size") for path, col in (("9P", "ninep"), ("TCP", "baseline"))),
               "log2_bytes", "mb_per_s", "path")
        R.h(3, "Figure 18: contending readers, MB/s")
        R.p("Each reader (a 9P connection, or a thread locally) reads random 1 MiB files of 32 in "
            "4 KiB requests, as the paper's processes did. The paper: the log of one process's "
            "bandwidth falls linearly as readers are added (a plot, no numbers).")
        one = {r["x"]: r for r in by("contend-one")}
        allr = {r["x"]: r for r in by("contend-all")}
        R.table(["readers", "one reader, 9P", "one reader, local", "all, 9P", "all, local"],
                [[x, num(one[x]["ninep"]), num(one[x]["baseline"]), num(allr.get(x, {}).get("ninep")),
                  num(allr.get(x, {}).get("baseline"))] for x in sorted(one, key=int)])
        R.plot("remote-contention", "one reader's MB/s against readers",
               "readers,path,mb_per_s\n" + "".join(
                   "%s,%s,%s\n" % (r["x"], path, r[col]) for r in by("contend-one")
                   for path, col in (("9P", "ninep"), ("local", "baseline"))),
               "readers", "mb_per_s", "path")

# --- Presotto -----------------------------------------------------------------------

if ran("devices"):
    R.h(2, "Presotto: Table 1, pipes")
    R.p("64 KiB writes through a pipe, and a 1-byte ping-pong, for a Unix pipe and a "
        "socketpair (the baselines) and ninep's pipe device, in process and over loopback 9P "
        "(scripts/bench-devices). The paper: Plan 9 on an SGI with 1, 2 and 4 CPUs at 6.0, 8.4 "
        "and 8.4 MB/s and 0.29, 0.21 and 0.28 ms; SVR3 pipes 4.5 MB/s and 0.51 ms; a 68020 "
        "Gnot 1.79 MB/s and 1.67 ms.")
    if sections["devices"][0] != "ok":
        R.failed("devices", "the section %s" % sections["devices"][0])
    try:
        text = open(data("devices.txt")).read()
    except FileNotFoundError:
        text = ""
    table1 = text.split("Table 1", 1)[1].split("\n\n", 1)[0] if "Table 1" in text else ""
    found = re.findall(r"^(\S.*?)\s+([0-9.]+) MB/s\s+([0-9.]+) µs$", table1, re.M)
    if not found:
        R.failed("devices", "no Table 1 rows in the output")
    else:
        R.table(["pipe", "throughput MB/s", "latency µs"], [[w, t, l] for w, t, l in found])

R.h(2, "What could not be had here")
R.p("NFS (kernel client: none in this kernel; sshfs stands in), netem and a 10 Mbit/s hub "
    "(toxiproxy's latency and bandwidth toxics stand in), Plan 9 machines and a public Plan 9 "
    "server on the Internet (loopback stands in, with TCP baselines beside). The papers' "
    "hardware is 15-35 years older than this machine's, so compare each figure with the "
    "baseline of this run, and with the paper's ratio, not the paper's absolute number.")

with open(os.path.join(DIR, "report.md"), "w") as f:
    f.write(R.markdown())
with open(os.path.join(DIR, "report.html"), "w") as f:
    f.write(R.html())
if R.empty:
    print("bench-report: %d empty cells or failed sections:" % len(R.empty), file=sys.stderr)
    for e in R.empty[:40]:
        print("  " + e, file=sys.stderr)
    sys.exit(1)
