//! The limit of PostMark through any 9P client and server that answer one
//! request at a time: the workload's requests, one loopback round trip
//! each, sent by a client that only writes them and reads their replies to
//! a thread that makes only the file system calls each request needs, with
//! no protocol to decode and no hand-off to another thread on either side.
//!
//! The requests are the ones the 9P workload sends: for a read, a walk
//! (which looks the name up and stats it, as a server must to give a qid),
//! an open, reads of at most iounit bytes and a clunk (a close); for an
//! append the same with writes; for a create, the walk that clones the
//! directory's fid (a round trip with nothing to do), the create (open
//! with O_CREAT|O_EXCL and a stat for the qid), the writes and the clunk;
//! for a deletion, a walk and a remove. What a run takes is then the
//! machine's round trips plus the file system's own work.
//!
//! [`round_trips`] sends the same requests to a thread that makes no file
//! system call at all and answers each with a reply of the same size: what
//! the round trips alone allow, whatever the file system.

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use anyhow::{Context, Result, anyhow, bail, ensure};
use bytes::Bytes;
use ninep_wire::IOHDRSZ;
use rustix::fs::{AtFlags, Mode, OFlags};
use rustix::io::Errno;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{Config, Phases, Report, Served, Store, drive};

/// A request's header: op, open flags, offset, count, name length. The
/// name follows it, then a write's data.
const HEAD: usize = 24;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
enum Op {
    Clone = 1,
    Walk,
    Open,
    Create,
    Read,
    Write,
    Clunk,
    Remove,
}

impl Op {
    fn from_u32(n: u32) -> Option<Op> {
        [
            Op::Clone,
            Op::Walk,
            Op::Open,
            Op::Create,
            Op::Read,
            Op::Write,
            Op::Clunk,
            Op::Remove,
        ]
        .into_iter()
        .find(|op| *op as u32 == n)
    }
}

/// Runs the workload in `root/config.dir` (made, and removed at the end,
/// if missing) through the socket. Of the target only the msize counts:
/// reads and writes are cut at the iounit it gives.
pub async fn run(config: &Config, root: &Path) -> Result<Report> {
    config.check()?;
    ensure!(
        Path::new(&config.dir)
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir)),
        "--dir {}: want a directory below the host directory",
        config.dir
    );
    let piece = piece(config)?;
    let dir = root.join(&config.dir);
    let made_dir = match std::fs::create_dir(&dir) {
        Ok(()) => true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e).with_context(|| format!("make {}", dir.display())),
    };
    let dir_fd = rustix::fs::open(
        &dir,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .with_context(|| format!("open {}", dir.display()))?;

    let phases = through_socket(config, piece, move |listener| {
        serve(listener, Some(&dir_fd))
    })
    .await?;
    if made_dir {
        std::fs::remove_dir(&dir).with_context(|| format!("remove {}", dir.display()))?;
    }
    Ok(phases.report(config, Served::Bound))
}

/// Runs the workload's requests against a thread that answers each at
/// once, with no file system call: a read gets as many bytes as it asks.
pub async fn round_trips(config: &Config) -> Result<Report> {
    config.check()?;
    let piece = piece(config)?;
    let phases = through_socket(config, piece, |listener| serve(listener, None)).await?;
    Ok(phases.report(config, Served::RoundTrips))
}

/// The most data one read or write moves: the 9P client's iounit at the
/// target's msize.
fn piece(config: &Config) -> Result<u32> {
    ensure!(
        config.target.msize > IOHDRSZ,
        "msize {} leaves no room for data",
        config.target.msize
    );
    Ok(config.target.msize - IOHDRSZ)
}

/// Drives the workload through a loopback socket to `server`, run on a
/// thread of its own with the listener; reads and writes move at most
/// `piece` bytes each.
async fn through_socket(
    config: &Config,
    piece: u32,
    server: impl FnOnce(&TcpListener) -> io::Result<()> + Send + 'static,
) -> Result<Phases> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    // The connection is made (in the listener's backlog) before the
    // server's thread exists, so no thread is left accepting if it fails.
    let stream = tokio::net::TcpStream::connect(listener.local_addr()?).await?;
    stream.set_nodelay(true)?;
    let server = std::thread::Builder::new()
        .name("postmark-bound".into())
        .spawn(move || server(&listener))?;
    let socket = Socket {
        stream,
        piece,
        requests: 0,
        reply: Vec::new(),
    };
    let phases = drive(config, socket).await;
    // The socket went with `drive`: the server reads its end and returns.
    let server_result = tokio::task::spawn_blocking(move || server.join())
        .await?
        .map_err(|_| anyhow!("the bound's server panicked"))?;
    server_result.context("the bound's server")?;
    phases
}

/// The client's side: each request written whole, its reply read whole.
struct Socket {
    stream: tokio::net::TcpStream,
    /// The most data one read or write moves: the 9P client's iounit.
    piece: u32,
    /// Round trips made.
    requests: u64,
    reply: Vec<u8>,
}

impl Socket {
    /// One round trip; returns the reply's result (a count, or 0).
    async fn call(&mut self, op: Op, name: &str, how: At, data: &[u8]) -> Result<u64> {
        let mut request = Vec::with_capacity(HEAD + name.len() + data.len());
        request.extend_from_slice(&(op as u32).to_le_bytes());
        request.extend_from_slice(&how.flags.to_le_bytes());
        request.extend_from_slice(&how.offset.to_le_bytes());
        request.extend_from_slice(&how.count.to_le_bytes());
        request.extend_from_slice(&(name.len() as u32).to_le_bytes());
        request.extend_from_slice(name.as_bytes());
        request.extend_from_slice(data);
        self.stream.write_all(&request).await?;
        self.requests += 1;
        let result = self.stream.read_i64_le().await?;
        if result < 0 {
            let errno = i32::try_from(-result).unwrap_or(Errno::IO.raw_os_error());
            bail!("{op:?} of {name}: {}", io::Error::from_raw_os_error(errno));
        }
        if op == Op::Read {
            self.reply.resize(result as usize, 0);
            self.stream.read_exact(&mut self.reply).await?;
        }
        Ok(result as u64)
    }

    async fn write_all(&mut self, name: &str, offset: u64, data: &[u8]) -> Result<()> {
        let mut done = 0;
        while done < data.len() {
            let piece = &data[done..data.len().min(done + self.piece as usize)];
            let at = At::data(offset + done as u64, piece.len() as u32);
            let n = self.call(Op::Write, name, at, piece).await?;
            ensure!(n > 0, "{name}: a write took nothing");
            done += n as usize;
        }
        Ok(())
    }
}

/// Where a request acts: open flags, or an offset and a count.
#[derive(Debug, Clone, Copy, Default)]
struct At {
    flags: u32,
    offset: u64,
    count: u32,
}

impl At {
    const NONE: At = At {
        flags: 0,
        offset: 0,
        count: 0,
    };

    fn open(flags: OFlags) -> At {
        At {
            flags: flags.bits(),
            ..At::NONE
        }
    }

    fn data(offset: u64, count: u32) -> At {
        At {
            offset,
            count,
            ..At::NONE
        }
    }
}

impl Store for Socket {
    async fn create(&mut self, name: &str, data: Bytes) -> Result<()> {
        self.call(Op::Clone, "", At::NONE, &[]).await?;
        self.call(Op::Create, name, At::NONE, &[]).await?;
        self.write_all(name, 0, &data).await?;
        self.call(Op::Clunk, name, At::NONE, &[]).await?;
        Ok(())
    }

    async fn read(&mut self, name: &str, size: u64) -> Result<u64> {
        self.call(Op::Walk, name, At::NONE, &[]).await?;
        self.call(Op::Open, name, At::open(OFlags::RDONLY), &[])
            .await?;
        let mut got = 0;
        while got < size {
            // The rest of the file, as one 9P read of iounit bytes gets it:
            // a server that makes no call knows no size to stop at.
            let count = (size - got).min(u64::from(self.piece)) as u32;
            let n = self.call(Op::Read, name, At::data(got, count), &[]).await?;
            if n == 0 {
                break;
            }
            got += n;
        }
        self.call(Op::Clunk, name, At::NONE, &[]).await?;
        Ok(got)
    }

    async fn append(&mut self, name: &str, offset: u64, data: Bytes) -> Result<()> {
        self.call(Op::Walk, name, At::NONE, &[]).await?;
        self.call(Op::Open, name, At::open(OFlags::WRONLY), &[])
            .await?;
        self.write_all(name, offset, &data).await?;
        self.call(Op::Clunk, name, At::NONE, &[]).await?;
        Ok(())
    }

    async fn remove(&mut self, name: &str) -> Result<()> {
        self.call(Op::Walk, name, At::NONE, &[]).await?;
        self.call(Op::Remove, name, At::NONE, &[]).await?;
        Ok(())
    }

    fn requests(&self) -> u64 {
        self.requests
    }
}

/// One request as the server reads it.
struct Request {
    op: Op,
    at: At,
    name: String,
}

/// The server's side, on a thread of its own: one connection, one request
/// at a time, until the client hangs up. With no directory, no request
/// makes a call: each is answered at once, a read with the bytes it asks.
fn serve(listener: &TcpListener, dir: Option<&OwnedFd>) -> io::Result<()> {
    let (mut stream, _) = listener.accept()?;
    stream.set_nodelay(true)?;
    let mut open: Option<OwnedFd> = None;
    let mut head = [0u8; HEAD];
    let mut name = Vec::new();
    let mut data = Vec::new();
    let mut reply = Vec::new();
    loop {
        match stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let field = |at: usize, len: usize| {
            let mut b = [0u8; 8];
            b[..len].copy_from_slice(&head[at..at + len]);
            u64::from_le_bytes(b)
        };
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let op = Op::from_u32(field(0, 4) as u32).ok_or_else(|| invalid("no such op"))?;
        let at = At {
            flags: field(4, 4) as u32,
            offset: field(8, 8),
            count: field(16, 4) as u32,
        };
        name.resize(field(20, 4) as usize, 0);
        stream.read_exact(&mut name)?;
        if op == Op::Write {
            data.resize(at.count as usize, 0);
            stream.read_exact(&mut data)?;
        }
        let request = Request {
            op,
            at,
            name: String::from_utf8(name.clone()).map_err(|_| invalid("name not UTF-8"))?,
        };
        reply.clear();
        reply.extend_from_slice(&[0; 8]);
        let answered = match dir {
            Some(dir) => answer(&request, dir, &data, &mut open, &mut reply),
            None if op == Op::Read => {
                reply.resize(reply.len() + at.count as usize, 0);
                Ok(at.count as usize)
            }
            None => Ok(if op == Op::Write { data.len() } else { 0 }),
        };
        let result = answered.map_or_else(|e| -i64::from(e.raw_os_error()), |n| n as i64);
        reply[..8].copy_from_slice(&result.to_le_bytes());
        stream.write_all(&reply)?;
    }
}

/// Makes the file system calls of one request on the directory `dir` and
/// the file opened last; read data is put after the reply's result.
fn answer(
    request: &Request,
    dir: &OwnedFd,
    data: &[u8],
    open: &mut Option<OwnedFd>,
    reply: &mut Vec<u8>,
) -> Result<usize, Errno> {
    let name = request.name.as_str();
    match request.op {
        Op::Clone => Ok(0),
        Op::Walk => rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|_| 0),
        Op::Open => {
            let flags = OFlags::from_bits_retain(request.at.flags) | OFlags::CLOEXEC;
            *open = Some(rustix::fs::openat(dir, name, flags, Mode::empty())?);
            Ok(0)
        }
        Op::Create => {
            let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC;
            let fd = rustix::fs::openat(dir, name, flags, Mode::from_raw_mode(0o644))?;
            rustix::fs::fstat(&fd)?;
            *open = Some(fd);
            Ok(0)
        }
        Op::Read => {
            let fd = open.as_ref().ok_or(Errno::BADF)?;
            // Into the reply's spare room: nothing zeroed first. The room
            // may be larger than asked; what lies past the count is cut.
            let count = request.at.count as usize;
            let at = reply.len();
            reply.reserve(count);
            let n =
                rustix::io::pread(fd, rustix::buffer::spare_capacity(reply), request.at.offset)?;
            let n = n.min(count);
            reply.truncate(at + n);
            Ok(n)
        }
        Op::Write => {
            let fd = open.as_ref().ok_or(Errno::BADF)?;
            rustix::io::pwrite(fd, data, request.at.offset)
        }
        Op::Clunk => {
            *open = None;
            Ok(0)
        }
        Op::Remove => rustix::fs::unlinkat(dir, name, AtFlags::empty()).map(|()| 0),
    }
}
