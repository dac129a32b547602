"""An in-memory 9P file server written with aio9p's server side, for our
client verbs, FUSE mount and multiplexer to drive.

    memfs.py --dialect 9P2000|9P2000.u

Listens on a free port of 127.0.0.1, prints "memfs: serving DIALECT on
tcp!127.0.0.1!PORT" once it does, and serves until SIGTERM. The protocol work
(framing, tags, flush, parsing and formatting every message, the stat
codecs) is aio9p's; this file only keeps the tree.

One dialect per process: aio9p 0.3.3's 9P2000.u server cannot fall back to
9P2000 (Py9P2000u.version_u logs a variable before setting it, which raises
UnboundLocalError), and for the same reason it answers a Tversion for any
other version, 9P2000.L included, with Rerror instead of Rversion "unknown":
  Rerror tag 65535 ename "cannot access local variable 'srvver' where it
  is not associated with a value" errno 255
Our client takes that Rerror as "try another dialect".
"""

import argparse
import asyncio
import errno
import os
import pwd
import signal
import sys
import time

from aio9p.constant import DMDIR
from aio9p.dialect import Py9P2000, Py9P2000u
from aio9p.dialect.Py9P2000u import Py9P2000u_Exception
from aio9p.helper import mkqid
from aio9p.protocol import Py9PServer
from aio9p.stat import Py9P2000Stat, Py9P2000uStat

NOFID = b"\xff\xff\xff\xff"
MSIZE = 65536
# Open mode bits.
ACCESS = 3
OWRITE, ORDWR = 1, 2
OTRUNC = 0x10
ORCLOSE = 0x40
# Tcreate perm bits of files this server cannot hold: 9P2000.u symlinks,
# devices, pipes and sockets, and links.
SPECIAL = 0x02000000 | 0x00800000 | 0x00200000 | 0x00100000 | 0x01000000
# A wstat field left as all ones (or an empty string) means "no change".
NO_CHANGE = {2: 0xFFFF, 4: 0xFFFFFFFF, 8: 0xFFFFFFFFFFFFFFFF}


class Refused(Py9P2000u_Exception):
    """A request refused with a Unix errno; both dialects send its strerror
    text, and 9P2000.u the number too."""

    def __init__(self, code):
        super().__init__(code, os.strerror(code))

    def __str__(self):
        return os.strerror(self.errno)


class Node:
    def __init__(self, path, name, parent, mode):
        self.path = path
        self.name = name
        self.parent = parent or self
        self.mode = mode
        self.version = 0
        self.mtime = self.atime = int(time.time())
        self.children = {} if mode & DMDIR else None
        self.data = None if mode & DMDIR else bytearray()

    def qid(self):
        return mkqid(self.mode, self.path, self.version)

    def changed(self):
        self.version += 1
        self.mtime = int(time.time())


class Tree:
    """The files, shared by every connection to the server."""

    def __init__(self):
        self.paths = 0
        self.root = self.node(b"/", None, DMDIR | 0o777)
        self.uid = os.getuid()
        self.uname = pwd.getpwuid(self.uid).pw_name.encode()

    def node(self, name, parent, mode):
        self.paths += 1
        return Node(self.paths, name, parent, mode)


class Fid:
    def __init__(self, node):
        self.node = node
        self.mode = None  # the open mode once opened
        self.listing = []  # a directory's entries as read from offset 0


class Files:
    """The file server proper; mixed into aio9p's 9P2000 and 9P2000.u server
    classes, whose abstract methods it implements. One instance per
    connection."""

    stat_type = Py9P2000Stat

    def __init__(self, tree):
        super().__init__(MSIZE)
        self.tree = tree
        self.fids = {}

    def fid(self, fid):
        try:
            return self.fids[fid]
        except KeyError:
            raise Refused(errno.EBADF) from None

    def new_fid(self, fid, node):
        if fid in self.fids:
            raise Refused(errno.EBADF)
        self.fids[fid] = Fid(node)

    def dir_entry(self, node):
        fields = dict(
            p9type=0,
            p9dev=0,
            p9qid=node.qid(),
            p9mode=node.mode,
            p9atime=node.atime,
            p9mtime=node.mtime,
            p9length=0 if node.data is None else len(node.data),
            p9name=node.name,
            p9uid=self.tree.uname,
            p9gid=self.tree.uname,
            p9muid=self.tree.uname,
        )
        if self.stat_type is Py9P2000uStat:
            fields.update(
                p9u_extension=b"",
                p9u_n_uid=self.tree.uid,
                p9u_n_gid=self.tree.uid,
                p9u_n_muid=self.tree.uid,
            )
        return self.stat_type(**fields)

    async def attach(self, fid, afid, uname, aname):
        if afid != NOFID:
            raise Refused(errno.EINVAL)
        if aname:
            raise Refused(errno.ENOENT)
        self.new_fid(fid, self.tree.root)
        return self.tree.root.qid()

    async def walk(self, fid, newfid, wnames):
        start = self.fid(fid)
        if start.mode is not None:
            raise Refused(errno.EBADF)
        node, qids = start.node, []
        for name in wnames:
            if node.children is None:
                break
            node = node.parent if name == b".." else node.children.get(name)
            if node is None:
                break
            qids.append(node.qid())
        if wnames and not qids:
            raise Refused(errno.ENOENT)
        if len(qids) == len(wnames):
            if newfid != fid:
                self.new_fid(newfid, node)
            else:
                start.node = node
        return tuple(qids)

    async def open(self, fid, mode):
        f = self.fid(fid)
        node = f.node
        writing = mode & ACCESS in (OWRITE, ORDWR) or mode & OTRUNC
        if node.children is not None and writing:
            raise Refused(errno.EISDIR)
        if node.data is not None and mode & OTRUNC:
            node.data.clear()
            node.changed()
        f.mode = mode
        return node.qid(), 0

    async def create(self, fid, name, perm, mode):
        f = self.fid(fid)
        parent = f.node
        if parent.children is None:
            raise Refused(errno.ENOTDIR)
        if name in (b".", b"..", b"") or b"/" in name:
            raise Refused(errno.EINVAL)
        if perm & SPECIAL:
            raise Refused(errno.EOPNOTSUPP)
        if name in parent.children:
            raise Refused(errno.EEXIST)
        # Plan 9's rule: the new file's permissions are limited by the
        # directory's.
        if perm & DMDIR:
            perm = DMDIR | (perm & (~0o777 | (parent.mode & 0o777))) & (DMDIR | 0o777)
        else:
            perm = perm & (~0o666 | (parent.mode & 0o666)) & 0o777
        node = self.tree.node(name, parent, perm)
        parent.children[name] = node
        parent.changed()
        f.node = node
        return await self.open(fid, mode)

    async def read(self, fid, offset, count):
        f = self.fid(fid)
        node = f.node
        if f.mode is None:
            raise Refused(errno.EBADF)
        node.atime = int(time.time())
        if node.data is not None:
            return bytes(node.data[offset : offset + count])
        # A directory is read from offset 0, then onwards from where the
        # last read stopped, in whole entries.
        if offset == 0:
            f.listing = [
                self.dir_entry(child).to_bytes()
                for _, child in sorted(node.children.items())
            ]
        at, out = 0, []
        for entry in f.listing:
            if at >= offset:
                if sum(map(len, out)) + len(entry) > count:
                    break
                out.append(entry)
            at += len(entry)
        if not out and offset > 0 and at > offset and count > 0:
            raise Refused(errno.EINVAL)
        return b"".join(out)

    async def write(self, fid, offset, data):
        f = self.fid(fid)
        node = f.node
        if f.mode is None or f.mode & ACCESS not in (OWRITE, ORDWR):
            raise Refused(errno.EBADF)
        if len(node.data) < offset:
            node.data.extend(bytes(offset - len(node.data)))
        node.data[offset : offset + len(data)] = data
        node.changed()
        return len(data)

    async def clunk(self, fid):
        f = self.fids.pop(fid, None)
        if f is None:
            raise Refused(errno.EBADF)
        if f.mode is not None and f.mode & ORCLOSE:
            self.unlink(f.node)

    async def remove(self, fid):
        f = self.fids.pop(fid, None)
        if f is None:
            raise Refused(errno.EBADF)
        self.unlink(f.node)

    def unlink(self, node):
        if node is self.tree.root:
            raise Refused(errno.EPERM)
        if node.children:
            raise Refused(errno.ENOTEMPTY)
        if node.parent.children.get(node.name) is node:
            del node.parent.children[node.name]
            node.parent.changed()

    async def stat(self, fid):
        return self.dir_entry(self.fid(fid).node)

    async def wstat(self, fid, stat):
        node = self.fid(fid).node
        # All or nothing: every change is checked before any is made.
        rename = stat.p9name and stat.p9name != node.name
        if rename and (
            node is self.tree.root or b"/" in stat.p9name or stat.p9name in (b".", b"..")
        ):
            raise Refused(errno.EINVAL)
        if rename and stat.p9name in node.parent.children:
            raise Refused(errno.EEXIST)
        mode = stat.p9mode != NO_CHANGE[4]
        if mode and (stat.p9mode ^ node.mode) & DMDIR:
            raise Refused(errno.EINVAL)
        length = stat.p9length != NO_CHANGE[8]
        if length and node.data is None and stat.p9length != 0:
            raise Refused(errno.EISDIR)
        if stat.p9uid and stat.p9uid != self.tree.uname:
            raise Refused(errno.EPERM)
        if rename:
            del node.parent.children[node.name]
            node.name = stat.p9name
            node.parent.children[node.name] = node
            node.parent.changed()
        if mode:
            node.mode = node.mode & ~0o777 | stat.p9mode & 0o777
        if length and node.data is not None:
            del node.data[stat.p9length :]
            node.data.extend(bytes(stat.p9length - len(node.data)))
            node.changed()
        if stat.p9mtime != NO_CHANGE[4]:
            node.mtime = stat.p9mtime
        if stat.p9atime != NO_CHANGE[4]:
            node.atime = stat.p9atime


class Files9P2000(Files, Py9P2000):
    pass


class Files9P2000u(Files, Py9P2000u):
    """9P2000.u: the same files; attach, create and stat carry its extra
    fields."""

    stat_type = Py9P2000uStat

    async def attach_u(self, fid, afid, uname, aname, n_uname):
        return await self.attach(fid, afid, uname, aname)

    async def create_u(self, fid, name, perm, mode, extension):
        return await self.create(fid, name, perm, mode)

    async def stat_u(self, fid):
        return await self.stat(fid)

    async def wstat_u(self, fid, stat):
        return await self.wstat(fid, stat)


DIALECTS = {"9P2000": Files9P2000, "9P2000.u": Files9P2000u}


async def serve(dialect):
    tree = Tree()
    files = DIALECTS[dialect]
    server = await asyncio.get_running_loop().create_server(
        lambda: Py9PServer(files(tree)), host="127.0.0.1", port=0
    )
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, stop.set)
    port = server.sockets[0].getsockname()[1]
    print(f"memfs: serving {dialect} on tcp!127.0.0.1!{port}", file=sys.stderr, flush=True)
    async with server:
        await stop.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dialect", choices=sorted(DIALECTS), required=True)
    asyncio.run(serve(parser.parse_args().dialect))


if __name__ == "__main__":
    main()
