//! File data sent without passing through our memory, as nginx's sendfile
//! sends it: `splice` moves a file's pages (references, not copies) into a
//! pipe, and later from the pipe into the socket of the connection.
//!
//! The pipe is filled first, so that the frame's head can say exactly how
//! many bytes follow, whatever the file does meanwhile (a truncation makes
//! a short read, never a frame that lies about its size).

use std::any::Any;
use std::io::{self, IoSliceMut};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::OFlags;
use rustix::io::{Errno, ReadWriteFlags};
use rustix::pipe::{PipeFlags, SpliceFlags};
use tokio::io::Interest;
use tokio::net::{TcpStream, UnixStream};

/// A second handle on the socket under a plain TCP or unix stream, with
/// its own readiness, through which piped file data is spliced into it.
#[derive(Debug)]
pub struct SpliceTarget(Kind);

#[derive(Debug)]
enum Kind {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl SpliceTarget {
    /// A handle on the socket of `tcp`.
    pub(crate) fn tcp(tcp: &TcpStream) -> io::Result<SpliceTarget> {
        let fd = tcp.as_fd().try_clone_to_owned()?;
        Ok(SpliceTarget(Kind::Tcp(TcpStream::from_std(fd.into())?)))
    }

    /// A handle on the socket of `unix`.
    pub(crate) fn unix(unix: &UnixStream) -> io::Result<SpliceTarget> {
        let fd = unix.as_fd().try_clone_to_owned()?;
        Ok(SpliceTarget(Kind::Unix(UnixStream::from_std(fd.into())?)))
    }

    /// Splices up to `left` bytes of `piped` into the socket, waiting
    /// while it is full; how many went.
    pub(crate) async fn splice(&self, piped: &PipedFile, left: usize) -> io::Result<usize> {
        let splice = || piped.splice_into(self.fd(), left);
        match &self.0 {
            Kind::Tcp(s) => s.async_io(Interest::WRITABLE, splice).await,
            Kind::Unix(s) => s.async_io(Interest::WRITABLE, splice).await,
        }
    }

    /// As [`SpliceTarget::splice`], without waiting: WouldBlock while it is full.
    /// (Tried whatever the runtime last heard of the socket's readiness: a
    /// later [`SpliceTarget::splice`] learns the truth when it tries.)
    pub(crate) fn try_splice(&self, piped: &PipedFile, left: usize) -> io::Result<usize> {
        piped.splice_into(self.fd(), left)
    }

    fn fd(&self) -> BorrowedFd<'_> {
        match &self.0 {
            Kind::Tcp(s) => s.as_fd(),
            Kind::Unix(s) => s.as_fd(),
        }
    }
}

/// When [`splice_in`] stops short of what it was asked for.
#[derive(Clone, Copy, PartialEq)]
enum Stop {
    /// At the end of the source only.
    AtEnd,
    /// Also once some came and the source has no more for now (or the
    /// pipe no more room), or fails: what came is not to be lost, and the
    /// next read meets the failure.
    WhenDry,
}

/// Moves up to `want` bytes of `source` (from `offset`, and past it, for
/// a file) into the pipe whose write end is `input`: how many.
fn splice_in(
    source: BorrowedFd<'_>,
    mut offset: Option<&mut u64>,
    input: &OwnedFd,
    want: usize,
    stop: Stop,
) -> io::Result<usize> {
    let mut len = 0;
    while len < want {
        match rustix::pipe::splice(
            source,
            offset.as_deref_mut(),
            input,
            None,
            want - len,
            SpliceFlags::NONBLOCK,
        ) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(Errno::INTR) => {}
            Err(_) if stop == Stop::WhenDry && len > 0 => break,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(len)
}

/// How many of `count` bytes of `file` from `offset` a read can take
/// without waiting on a device, when that is all of them: every page of
/// the range is in the page cache (cachestat; for tmpfs, in memory, not
/// swapped out), and its first and last pages are readable at once (a
/// page still being read in is present but not yet readable: RWF_NOWAIT
/// says so; tmpfs, which refuses RWF_NOWAIT, holds only readable pages).
/// The range is cut at the file's size now, and only that much should be
/// read. None where any of this cannot be told: an empty range (a file of
/// size 0, as in /proc, may still block), a kernel without cachestat
/// (before 6.5), a file system other than tmpfs that refuses RWF_NOWAIT
/// (FUSE, NFS: their reads may go to the network).
pub fn in_memory(file: BorrowedFd<'_>, offset: u64, count: usize) -> Option<usize> {
    let size = u64::try_from(rustix::fs::fstat(file).ok()?.st_size).ok()?;
    let end = offset.saturating_add(count as u64).min(size);
    if end <= offset || !pages_in_memory(file, offset, end)? {
        return None;
    }
    // Whether the page at `at` reads at once; None where RWF_NOWAIT is
    // refused.
    let readable = |at: u64| {
        let mut byte = [0u8];
        let one = &mut [IoSliceMut::new(&mut byte)];
        match rustix::io::preadv2(file, one, at, ReadWriteFlags::NOWAIT) {
            Ok(_) => Some(true),
            Err(Errno::OPNOTSUPP) => None,
            Err(_) => Some(false),
        }
    };
    let ready = match readable(offset) {
        None => is_tmpfs(file),
        Some(first) => first && readable(end - 1) == Some(true),
    };
    ready.then_some((end - offset) as usize)
}

/// Whether a write of `count` bytes to `file` at `offset` waits on no
/// device: `file` is a regular file on tmpfs, which has none and never
/// holds a writer back for writeback, and every page the write lands on
/// that already holds data (up to the file's size; an append-only file's
/// last page) is in memory, not swapped out (so none lies in a hole, which
/// cachestat cannot tell from a page swapped out). Pages past the end are
/// made anew. False where this cannot be told (a kernel without
/// cachestat), and for devices and fifos, even on a tmpfs (devtmpfs is
/// one): their writes wait on what is behind them.
///
/// Such a write may still wait on memory: a page made anew may have to be
/// reclaimed first, and a cgroup over its `memory.high` is made to sleep.
pub fn writes_in_memory(file: BorrowedFd<'_>, offset: u64, count: usize) -> bool {
    if !is_tmpfs(file) {
        return false;
    }
    let Ok(st) = rustix::fs::fstat(file) else {
        return false;
    };
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return false;
    }
    let size = st.st_size.max(0) as u64;
    let appends = rustix::fs::fcntl_getfl(file).is_ok_and(|f| f.contains(OFlags::APPEND));
    let offset = if appends { size } else { offset.min(size) };
    let end = offset.saturating_add(count as u64).min(size);
    pages_in_memory(file, offset, end) == Some(true)
}

/// Whether every page holding a byte of `from..to` of `file` is in the page
/// cache (for tmpfs: in memory, not swapped out); true for an empty range,
/// None where cachestat cannot tell.
fn pages_in_memory(file: BorrowedFd<'_>, from: u64, to: u64) -> Option<bool> {
    let page = rustix::param::page_size() as u64;
    let (first, last) = (from / page, to.div_ceil(page));
    if last <= first {
        return Some(true);
    }
    let cached = crate::sys::pages_cached(file, first * page, (last - first) * page).ok()?;
    Some(cached >= last - first)
}

/// Whether `file` lives on tmpfs (statfs's TMPFS_MAGIC).
fn is_tmpfs(file: BorrowedFd<'_>) -> bool {
    rustix::fs::fstatfs(file).is_ok_and(|fs| fs.f_type == 0x0102_1994)
}

/// Bytes of a file (or that came on a socket) held in a pipe, waiting to
/// go into a socket.
pub struct PipedFile {
    /// The pipe's read end; its write end is closed once it is filled.
    pipe: OwnedFd,
    len: usize,
    /// Whatever must last as long as the pipe (a permit that bounds how
    /// many pipes are held at once).
    _held: Option<Box<dyn Any + Send + Sync>>,
}

impl std::fmt::Debug for PipedFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PipedFile").field("len", &self.len).finish()
    }
}

impl PipedFile {
    /// Up to `count` bytes of `file` from `offset`, moved into a new pipe:
    /// fewer only at the end of the file. Blocks while the file is read
    /// from its device, so it belongs where blocking is allowed. Fails when
    /// the file cannot be spliced (EINVAL: not every file system can), or
    /// when no pipe can hold the read (a pipe holds whole pages, one more
    /// for a read that does not start on a page, and its size is bounded
    /// per user): a plain read should answer then.
    pub fn from_file(file: BorrowedFd<'_>, offset: u64, count: usize) -> io::Result<PipedFile> {
        let (pipe, input) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        // Room for a read off the page boundary may be over the limit
        // (pipe-max-size, 1 MiB, without CAP_SYS_RESOURCE) where room for
        // one on it is not.
        let page = rustix::param::page_size();
        let room = match rustix::pipe::fcntl_setpipe_size(&input, count.saturating_add(page)) {
            Ok(room) => room,
            Err(_) => rustix::pipe::fcntl_setpipe_size(&input, count)
                .or_else(|_| rustix::pipe::fcntl_getpipe_size(&input))?,
        };
        // What the read should bring, by the file's size, and a byte more
        // to see the end: a file that grows, or whose size says nothing
        // (as in /proc), fills the pipe past it and fails below.
        let expected = Self::would_bring(file, offset, count)
            .saturating_add(1)
            .min(count);
        let spanned = (offset % page as u64) as usize + expected;
        if spanned.div_ceil(page) > room / page {
            return Err(io::ErrorKind::FileTooLarge.into());
        }
        let mut at = offset;
        let len = splice_in(file, Some(&mut at), &input, count, Stop::AtEnd)?;
        Ok(PipedFile {
            pipe,
            len,
            _held: None,
        })
    }

    /// Up to `count` bytes that have come on `socket`, moved into a new
    /// pipe without waiting: WouldBlock while none have, empty once the
    /// peer has ended the stream.
    pub fn from_socket(socket: BorrowedFd<'_>, count: usize) -> io::Result<PipedFile> {
        let (pipe, input) = rustix::pipe::pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK)?;
        let room = rustix::pipe::fcntl_setpipe_size(&input, count)
            .or_else(|_| rustix::pipe::fcntl_getpipe_size(&input))?;
        let len = splice_in(socket, None, &input, count.min(room), Stop::WhenDry)?;
        Ok(PipedFile {
            pipe,
            len,
            _held: None,
        })
    }

    /// How many of `count` bytes from `offset` a read of `file` brings, by
    /// the file's size now (none where its size says nothing, as in /proc):
    /// a large read near the end of a file is a small read.
    pub fn would_bring(file: BorrowedFd<'_>, offset: u64, count: usize) -> usize {
        let size = rustix::fs::fstat(file).map_or(0, |st| st.st_size.max(0) as u64);
        size.saturating_sub(offset).min(count as u64) as usize
    }

    /// The most of `count` bytes from `offset` that end on a page boundary
    /// (all of them if less than a page would be left).
    pub fn to_page_boundary(offset: u64, count: usize) -> usize {
        let page = rustix::param::page_size() as u64;
        let past = (offset.wrapping_add(count as u64) % page) as usize;
        if count > past { count - past } else { count }
    }

    /// The same, keeping `held` until the pipe is gone.
    pub fn holding(self, held: impl Any + Send + Sync) -> PipedFile {
        PipedFile {
            _held: Some(Box::new(held)),
            ..self
        }
    }

    /// How many bytes it holds (all of them, until [`PipedFile::splice_into`]
    /// takes some).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing (the file ended at the offset).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Moves up to `left` of its bytes into `socket` without waiting: how
    /// many went, or WouldBlock while the socket is full.
    fn splice_into(&self, socket: BorrowedFd<'_>, left: usize) -> io::Result<usize> {
        loop {
            match rustix::pipe::splice(
                &self.pipe,
                None,
                socket,
                None,
                left,
                SpliceFlags::MOVE | SpliceFlags::NONBLOCK,
            ) {
                Err(Errno::INTR) => {}
                Ok(0) if left > 0 => return Err(io::ErrorKind::WriteZero.into()),
                done => return Ok(done?),
            }
        }
    }

    /// Up to `left` of its bytes read into memory, for a stream that is no
    /// socket (the data is already in the pipe, so this never waits).
    pub(crate) fn read_out(&self, left: usize) -> io::Result<Vec<u8>> {
        let mut data = vec![0; left];
        let mut got = 0;
        while got < left {
            match rustix::io::read(self.pipe.as_fd(), &mut data[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        data.truncate(got);
        Ok(data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::fs::{Mode, OFlags};

    const LEN: usize = 16 << 20;
    const MIB: usize = 1 << 20;

    /// Whether this kernel answers cachestat for `file` (not before 6.5,
    /// nor under a seccomp filter that refuses it).
    fn cachestat_works(file: BorrowedFd<'_>) -> bool {
        let works = crate::sys::pages_cached(file, 0, 4096).is_ok();
        if !works {
            eprintln!("no cachestat here: skipped");
        }
        works
    }

    #[test]
    fn pages_read_are_in_memory_and_pages_never_read_are_not() {
        let path = std::env::temp_dir().join(format!("ninep-in-memory-{}", std::process::id()));
        let data = vec![7u8; LEN + 4096];
        let at = data.as_ptr().align_offset(4096);
        // Written past the page cache (O_DIRECT) where the file system
        // allows it, so that no page of the file is in memory yet.
        let direct = rustix::fs::open(
            &path,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::DIRECT,
            Mode::from_raw_mode(0o600),
        )
        .ok()
        .filter(|fd| rustix::io::write(fd, &data[at..at + LEN]).ok() == Some(LEN));
        if direct.is_none() {
            std::fs::write(&path, &data[..LEN]).unwrap();
        }
        let file = std::fs::File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let fd = file.as_fd();
        if !cachestat_works(fd) {
            return;
        }
        // tmpfs keeps what O_DIRECT wrote in memory all the same.
        let uncached = direct.is_some() && !is_tmpfs(fd);

        assert_eq!(in_memory(fd, 0, 0), None, "nothing to read");
        assert_eq!(in_memory(fd, LEN as u64, MIB), None, "at the end");
        if uncached {
            assert_eq!(in_memory(fd, 0, MIB), None, "never read");
        }
        let mut buf = vec![0; MIB];
        assert_eq!(rustix::io::pread(fd, &mut buf, 0).unwrap(), MIB);
        assert_eq!(in_memory(fd, 0, MIB), Some(MIB), "just read");
        assert_eq!(in_memory(fd, 4095, 4097), Some(4097), "off a page");
        if uncached {
            assert_eq!(
                in_memory(fd, (LEN - 100) as u64, 1000),
                None,
                "its last page"
            );
            assert_eq!(in_memory(fd, 0, LEN), None, "the whole file");
        }
        assert_eq!(
            rustix::io::pread(fd, &mut buf[..4096], (LEN - 4096) as u64).unwrap(),
            4096
        );
        assert_eq!(
            in_memory(fd, (LEN - 100) as u64, 1000),
            Some(100),
            "cut at the file's size"
        );
        if uncached {
            // Its first and last pages are in memory now, not those between.
            assert_eq!(in_memory(fd, 0, LEN), None, "pages missing between");
        }
    }

    /// A file of `len` bytes on /dev/shm, open for reading and writing and
    /// already unlinked; None where /dev/shm is no tmpfs or the kernel has
    /// no cachestat.
    fn tmpfs_file(name: &str, len: usize) -> Option<std::fs::File> {
        let dir = std::path::Path::new("/dev/shm");
        let probe = std::fs::File::open(dir).ok()?;
        if !is_tmpfs(probe.as_fd()) {
            return None;
        }
        let path = dir.join(format!("ninep-{name}-{}", std::process::id()));
        std::fs::write(&path, vec![7u8; len]).unwrap();
        let file = (std::fs::OpenOptions::new().read(true).write(true))
            .open(&path)
            .unwrap();
        std::fs::remove_file(&path).unwrap();
        cachestat_works(file.as_fd()).then_some(file)
    }

    #[test]
    fn tmpfs_pages_are_in_memory() {
        let Some(file) = tmpfs_file("in-memory", 3 * MIB + 5) else {
            return;
        };
        let fd = file.as_fd();
        assert_eq!(in_memory(fd, 0, 3 * MIB + 5), Some(3 * MIB + 5));
        assert_eq!(in_memory(fd, 3 * MIB as u64, MIB), Some(5));
        assert_eq!(in_memory(fd, 3 * MIB as u64 + 5, 1), None);
    }

    #[test]
    fn writes_to_tmpfs_pages_in_memory_wait_on_nothing() {
        let Some(file) = tmpfs_file("writes-in-memory", MIB + 5) else {
            return;
        };
        let fd = file.as_fd();
        assert!(writes_in_memory(fd, 0, 4096), "over pages in memory");
        assert!(writes_in_memory(fd, MIB as u64, 8192), "over the end");
        assert!(writes_in_memory(fd, 4 * MIB as u64, 100), "past the end");
        // A hole holds no page, as a page swapped out holds none in memory:
        // cachestat cannot tell them apart, so a write into one may wait.
        file.set_len(4 * MIB as u64).unwrap();
        assert!(!writes_in_memory(fd, 2 * MIB as u64, 4096), "into a hole");
        assert!(writes_in_memory(fd, 4 * MIB as u64, 4096), "past the hole");
    }

    #[test]
    fn writes_to_a_fifo_on_tmpfs_may_wait() {
        let Some(probe) = tmpfs_file("fifo-probe", 0) else {
            return;
        };
        drop(probe);
        let path = format!("/dev/shm/ninep-fifo-{}", std::process::id());
        rustix::fs::mknodat(
            rustix::fs::CWD,
            path.as_str(),
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        // Both ends, so that opening it waits for nobody.
        let fifo = rustix::fs::open(path.as_str(), OFlags::RDWR, Mode::empty()).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert!(!writes_in_memory(fifo.as_fd(), 0, 100));
    }

    #[test]
    fn writes_beyond_tmpfs_may_wait() {
        // Beside the test's own executable, which is on a disk in a build.
        let exe = std::env::current_exe().unwrap();
        let path = exe.with_file_name(format!("ninep-writes-may-wait-{}", std::process::id()));
        std::fs::write(&path, [7u8; 4096]).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        if is_tmpfs(file.as_fd()) {
            eprintln!("the build is on tmpfs: skipped");
            return;
        }
        assert!(!writes_in_memory(file.as_fd(), 0, 100));
    }
}
