"""aio9p's client drives a 9P server through one scenario of files.

    client.py --addr HOST:PORT --dialect 9P2000|9P2000.u [--hostdir DIR] [--top NAME]

Attach, create a directory and a file in it, write, read back, stat (names,
lengths, modes, and for 9P2000.u the numeric ids), rename, truncate and
chmod with Twstat, list a directory in several reads, walk to missing and
partly missing names, remove everything. With --hostdir (the directory
'ninep serve' exports) each step is also checked on the host, and the
directory must hold what it held before. Prints each step, then PASS; exits
1 at the first failed check, saying what was expected and what came back.

aio9p 0.3.3's client gets much of 9P wrong, so part of it is worked around
here without changing what it sends:
  - Topen and Tcreate go out with the type byte of Twalk and Twrite (Topen
    of fid 1 for reading is 0c000000 6e TAG 01000000 00: type 110), Tcreate
    also with a size one larger than its bytes, and read() returns bytes
    0..17 of the Rread body instead of its data: these three messages are
    built here from its field helpers and sent through its connection's
    message().
  - A reply of exactly 7 bytes (Rclunk, Rremove, Rwstat: 07000000 79 TAG
    for Rclunk) stays in its receive buffer until more bytes arrive
    (Py9PCommon.data_received loops while msgstart < buflen - 7), so Tclunk, Tremove and Twstat are each
    followed by Tstat requests until their reply comes through.
  - It never clears a tag's Event once a reply has set it, so the next
    request to draw that tag from its pool returns at once and fails
    (KeyError in message()): after each request the Events of the tags
    back in the pool are cleared here.
  - Its error parser raises TypeError (Py9PError passes keyword arguments to
    Exception.__init__), losing the error string of every Rerror: the
    client classes here parse Rerror themselves.
"""

import argparse
import asyncio
import os
import pwd
import stat as hoststat
import sys

import aio9p.constant as c
from aio9p.dialect.client.Py9P2000 import Py9P2000Client
from aio9p.dialect.client.Py9P2000u import Py9P2000uClient
from aio9p.helper import extract, extract_bytefields, mkbytefields, mkfield
from aio9p.stat import Py9P2000Stat, Py9P2000uStat

NOFID = b"\xff\xff\xff\xff"
NONUNAME = 0xFFFFFFFF
MSIZE = 65536
OREAD, OWRITE, ORDWR, OTRUNC = 0, 1, 2, 0x10
QTDIR = 0x80
ROOT = mkfield(0, 4)
# Tstat requests after a request with a short reply, each followed by a
# wait of NUDGE_WAIT seconds for that reply.
NUDGES = 50
NUDGE_WAIT = 0.1
PAYLOAD = bytes((i * 7 + i // 251) % 256 for i in range(150_000))


class Failed(Exception):
    pass


class Rerror(Exception):
    """An error reply; its text is the server's error string."""


class ErrorParser:
    """Replaces the library's error parser (see above)."""

    def errparser(self, tmsg_type, tmsg_fields, errmsgbody):
        (ename,) = extract_bytefields(errmsgbody, 0, 1)
        return Rerror(ename.decode())


class Client9P2000(ErrorParser, Py9P2000Client):
    pass


class Client9P2000u(ErrorParser, Py9P2000uClient):
    pass


def step(what):
    print(f"step: {what}", flush=True)


def check(what, want, got):
    if want != got:
        raise Failed(f"{what}: want {want!r}, got {got!r}")


class Conn:
    """One connection and attach through aio9p's client."""

    def __init__(self, host, port, dialect):
        self.dotu = dialect == "9P2000.u"
        client_type = Client9P2000u if self.dotu else Client9P2000
        self.client = client_type(remote={"host": host, "port": port}, maxsize=MSIZE)
        self.stat_type = Py9P2000uStat if self.dotu else Py9P2000Stat
        self.requests = 0
        self.fids = 0

    def new_fid(self):
        self.fids += 1
        return mkfield(self.fids, 4)

    async def request(self, sent):
        self.requests += 1
        try:
            return await sent
        finally:
            # No request waits on a tag in the pool.
            pool = self.client._connection
            for tag in pool._tags:
                pool._event[tag].clear()

    async def call(self, method, *args):
        """A request the library encodes correctly itself."""
        return await self.request(getattr(self.client, method)(*args))

    async def message(self, msgtype, *fields):
        """A request built here, sent through the library's connection."""
        size = sum(map(len, fields))
        return (await self.request(self.client.message((msgtype, size, fields))))[1]

    async def short_reply(self, method, *args):
        """A request whose reply is 7 bytes, followed by Tstat requests until
        that reply has been taken out of aio9p's buffer."""
        task = asyncio.ensure_future(self.call(method, *args))
        await asyncio.sleep(0)  # lets the task send its request
        for _ in range(NUDGES):
            try:
                await self.call("stat", ROOT)
            except Rerror:
                pass  # an error reply (root clunked) lets it through too
            done, _ = await asyncio.wait({task}, timeout=NUDGE_WAIT)
            if done:
                return task.result()
        task.cancel()
        raise Failed(f"no reply to {method} within {NUDGES * NUDGE_WAIT:.0f}s")

    async def attach(self, uname):
        msize, _ = await self.client.negotiate()
        check("Rversion msize at most the asked", True, 256 <= msize <= MSIZE)
        self.msize = msize
        if self.dotu:
            qid = await self.call("attach_u", ROOT, NOFID, uname, b"", NONUNAME)
        else:
            qid = await self.call("attach", ROOT, NOFID, uname, b"")
        check("root qid type", QTDIR, qid[0])

    async def walk(self, path, fid=ROOT):
        newfid = self.new_fid()
        names = tuple(n.encode() for n in path.split("/") if n)
        qids = await self.call("walk", fid, newfid, names)
        check(f"qids from walk to {path}", len(names), len(qids))
        return newfid

    async def open(self, fid, mode):
        body = await self.message(c.TOPEN, fid, mkfield(mode, 1))
        return body[:13], extract(body, 13, 4)

    async def create(self, dirfid, name, perm, mode):
        namelen, namefields = mkbytefields(name.encode())
        fields = (dirfid, *namefields, mkfield(perm, 4), mkfield(mode, 1))
        if self.dotu:
            fields += mkbytefields(b"")[1]
        body = await self.message(c.TCREATE, *fields)
        return body[:13]

    async def read(self, fid, offset, count):
        body = await self.message(c.TREAD, fid, mkfield(offset, 8), mkfield(count, 4))
        n = extract(body, 0, 4)
        return body[4 : 4 + n]

    def iounit(self):
        return self.msize - 24

    async def read_all(self, fid, count=None):
        data, offset = b"", 0
        while True:
            chunk = await self.read(fid, offset, count or self.iounit())
            if not chunk:
                return data
            data += chunk
            offset += len(chunk)

    async def write_all(self, fid, offset, data):
        while data:
            chunk = data[: self.iounit()]
            n = await self.call("write", fid, offset, chunk)
            check(f"Rwrite count at offset {offset}", len(chunk), n)
            offset += n
            data = data[n:]

    async def clunk(self, fid):
        await self.short_reply("clunk", fid)

    async def remove(self, fid):
        await self.short_reply("remove", fid)

    async def stat(self, fid):
        return await self.call("stat_u" if self.dotu else "stat", fid)

    async def wstat(self, fid, **changes):
        """Twstat with every field but `changes` left as "don't touch"."""
        fields = dict(p9qid=b"\xff" * 13, **changes)
        await self.short_reply("wstat_u" if self.dotu else "wstat", fid, self.stat_type(**fields))

    async def stat_path(self, path):
        fid = await self.walk(path)
        st = await self.stat(fid)
        await self.clunk(fid)
        return st

    async def gone(self, path):
        """Checks that walking to `path` fails with "no such file"."""
        names = tuple(n.encode() for n in path.split("/") if n)
        try:
            qids = await self.call("walk", ROOT, self.new_fid(), names)
        except Rerror as e:
            text = str(e).lower()
            if "does not exist" not in text and "no such file" not in text:
                raise Failed(f"walk to {path}: want a no-such-file error, got {text!r}")
            return
        check(f"qids from walk to missing {path}", True, len(qids) < len(names))

    async def listing(self, path, count):
        """A directory's entries, read `count` bytes at a time."""
        fid = await self.walk(path)
        await self.open(fid, OREAD)
        data = await self.read_all(fid, count)
        await self.clunk(fid)
        entries, at = {}, 0
        while at < len(data):
            st = self.stat_type.from_bytes(data, at)
            entries[st.p9name.decode()] = st
            at += 2 + extract(data, at, 2)
        return entries


class Host:
    """Checks on the exported directory; does nothing without one."""

    def __init__(self, root):
        self.root = root

    def path(self, name):
        return os.path.join(self.root, name)

    def file(self, name, data, perm):
        if self.root:
            with open(self.path(name), "rb") as f:
                check(f"host content of {name}", data, f.read())
            check(f"host permissions of {name}", oct(perm), oct(os.stat(self.path(name)).st_mode & 0o777))

    def dir(self, name, perm):
        if self.root:
            st = os.stat(self.path(name))
            check(f"host {name} is a directory", True, hoststat.S_ISDIR(st.st_mode))
            check(f"host permissions of {name}", oct(perm), oct(st.st_mode & 0o777))

    def absent(self, name):
        if self.root:
            check(f"host has no {name}", False, os.path.lexists(self.path(name)))

    def listing(self, name, names):
        if self.root:
            check(f"host listing of {name}", sorted(names), sorted(os.listdir(self.path(name))))

    def owner(self, name, st, dotu):
        if self.root:
            uid = os.stat(self.path(name)).st_uid
            check(f"owner name of {name}", pwd.getpwuid(uid).pw_name, st.p9uid.decode())
            if dotu:
                check(f"numeric owner of {name}", uid, st.p9u_n_uid)


def check_stat(what, st, name, length, perm, dotu):
    check(f"{what}: name", name, st.p9name.decode())
    check(f"{what}: length", length, st.p9length)
    check(f"{what}: mode", oct(perm), oct(st.p9mode))
    check(f"{what}: qid type matches mode", st.p9mode >> 24, st.p9qid[0])
    if dotu:
        check(f"{what}: 9P2000.u extension", b"", st.p9u_extension)


async def scenario(conn, host, top):
    dotu = conn.dotu
    step(f"Tversion {'9P2000.u' if dotu else '9P2000'}, Tattach")
    await conn.attach(b"interop")
    root = await conn.stat(ROOT)
    check("root is a directory", c.DMDIR, root.p9mode & c.DMDIR)

    step(f"create directory {top}")
    parent, _, base = top.rpartition("/")
    dirfid = await conn.walk(parent)
    qid = await conn.create(dirfid, base, c.DMDIR | 0o755, OREAD)
    check("qid type of new directory", QTDIR, qid[0])
    await conn.clunk(dirfid)
    host.dir(top, 0o755)

    data = f"{top}/data"
    want = b"hello, 9P\n" + PAYLOAD
    step(f"create {data}, write {len(want)} bytes, read them back")
    fid = await conn.walk(top)
    qid = await conn.create(fid, "data", 0o644, ORDWR)
    check("qid type of new file", 0, qid[0])
    await conn.write_all(fid, 0, want)
    check("content read through the creating fid", want, await conn.read_all(fid))
    check_stat("stat of the open fid", await conn.stat(fid), "data", len(want), 0o644, dotu)
    await conn.clunk(fid)
    host.file(data, want, 0o644)

    step(f"read 5000 bytes at offset 100003 of {data} through a new fid")
    fid = await conn.walk(data)
    await conn.open(fid, OREAD)
    check("content at offset 100003", want[100003:105003], await conn.read(fid, 100003, 5000))
    check("read at the end", b"", await conn.read(fid, len(want), 100))
    await conn.clunk(fid)

    step(f"stat {data}")
    st = await conn.stat_path(data)
    check_stat(f"stat of {data}", st, "data", len(want), 0o644, dotu)
    host.owner(data, st, dotu)

    renamed = f"{top}/renamed"
    step(f"rename {data} to renamed with Twstat")
    fid = await conn.walk(data)
    await conn.wstat(fid, p9name=b"renamed")
    await conn.clunk(fid)
    await conn.gone(data)
    check_stat(f"stat of {renamed}", await conn.stat_path(renamed), "renamed", len(want), 0o644, dotu)
    host.absent(data)
    host.file(renamed, want, 0o644)

    step(f"truncate {renamed} to 10 bytes and make it 0600 with Twstat")
    fid = await conn.walk(renamed)
    await conn.wstat(fid, p9length=10, p9mode=0o600)
    await conn.clunk(fid)
    check_stat(f"stat of {renamed}", await conn.stat_path(renamed), "renamed", 10, 0o600, dotu)
    host.file(renamed, want[:10], 0o600)

    step(f"open {renamed} with OTRUNC")
    fid = await conn.walk(renamed)
    await conn.open(fid, OWRITE | OTRUNC)
    await conn.clunk(fid)
    check("length after OTRUNC", 0, (await conn.stat_path(renamed)).p9length)
    host.file(renamed, b"", 0o600)

    names = ["a", "b", "c"]
    step(f"create {', '.join(names)} and directory sub in {top}, list {top} 150 bytes a read")
    for name in names:
        fid = await conn.walk(top)
        await conn.create(fid, name, 0o640, OWRITE)
        await conn.write_all(fid, 0, name.encode() * 3)
        await conn.clunk(fid)
    fid = await conn.walk(top)
    await conn.create(fid, "sub", c.DMDIR | 0o750, OREAD)
    await conn.clunk(fid)
    entries = await conn.listing(top, 150)
    check(f"listing of {top}", sorted(names + ["renamed", "sub"]), sorted(entries))
    for name in names:
        check_stat(f"listed {name}", entries[name], name, 3, 0o640, dotu)
    check_stat("listed sub", entries["sub"], "sub", 0, c.DMDIR | 0o750, dotu)
    check_stat("listed renamed", entries["renamed"], "renamed", 0, 0o600, dotu)
    host.listing(top, names + ["renamed", "sub"])
    host.dir(f"{top}/sub", 0o750)

    step("walk to missing and partly missing names")
    await conn.gone(f"{top}/missing")
    await conn.gone(f"{top}/missing/deeper")
    await conn.gone(f"{top}/a/below-a-file")

    step(f"remove {top}: refused while it holds files, then its files, then it")
    fid = await conn.walk(top)
    try:
        await conn.remove(fid)
        raise Failed(f"remove of non-empty {top} succeeded")
    except Rerror as e:
        text = str(e).lower()
        check(f"error removing non-empty {top}", True, "not empty" in text)
    host.listing(top, names + ["renamed", "sub"])
    for name in names + ["renamed", "sub", ""]:
        await conn.remove(await conn.walk(f"{top}/{name}"))
    await conn.gone(top)
    host.absent(top)

    step("clunk root")
    await conn.clunk(ROOT)


async def run(conn, host, top):
    async with conn.client:
        await scenario(conn, host, top)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--addr", required=True, help="HOST:PORT")
    parser.add_argument("--dialect", choices=["9P2000", "9P2000.u"], required=True)
    parser.add_argument("--hostdir", help="the directory the server exports")
    parser.add_argument("--top", help="the directory to make and work in (its parent must exist)")
    args = parser.parse_args()
    host, port = args.addr.rsplit(":", 1)
    conn = Conn(host, int(port), args.dialect)
    top = args.top or f"py-{args.dialect}-{os.getpid()}"
    try:
        asyncio.run(run(conn, Host(args.hostdir), top))
    except (Failed, Rerror) as e:
        print(f"FAIL: {e}", flush=True)
        sys.exit(1)
    print(f"PASS ({conn.requests} requests)")


if __name__ == "__main__":
    main()
