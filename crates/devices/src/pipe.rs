//! A pipe as a directory (Plan 9's pipe(3)): `data` and `data1`, two
//! streams joined at the device end, so what is written on one is read
//! from the other with each write's boundary kept.
//!
//! The tree attached to names the pipe (an empty aname is the default
//! one), so clients on different connections meet in the same pipe. A pipe
//! is made at the first open of either end; when every fid open on one end
//! is closed, that end hangs up: the other end reads what is left and then
//! end of file, and its writes fail. Once both ends are closed the pipe is
//! gone, and the next open makes a new one.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use ninep_server::queue::{Limits, Modules, Stream};
use ninep_server::{Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, User};
use ninep_wire::consts::unix::{S_IFDIR, S_IFREG};
use ninep_wire::{Errno, Name, Qid, QidType};
use parking_lot::Mutex;

use crate::files::attr;

/// What a pipe server holds to.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Each direction's queue.
    pub queue: Limits,
    /// Pipes (distinct tree names) open at once.
    pub pipes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            queue: Limits::default(),
            pipes: 64,
        }
    }
}

/// The pipe server; see the module documentation.
#[derive(Debug)]
pub struct PipeFs {
    options: Options,
    modules: Modules,
    pipes: Mutex<HashMap<String, Weak<Pipe>>>,
}

#[derive(Debug)]
struct Pipe {
    ends: [Arc<Stream>; 2],
    /// Fids open on each end.
    opens: Mutex<[usize; 2]>,
}

/// One fid's open of an end; the last of an end to go hangs the end up.
#[derive(Debug)]
struct OpenEnd {
    pipe: Arc<Pipe>,
    end: usize,
}

impl OpenEnd {
    fn new(pipe: Arc<Pipe>, end: usize) -> OpenEnd {
        pipe.opens.lock()[end] += 1;
        OpenEnd { pipe, end }
    }

    fn stream(&self) -> &Stream {
        &self.pipe.ends[self.end]
    }
}

impl Drop for OpenEnd {
    fn drop(&mut self) {
        let mut opens = self.pipe.opens.lock();
        opens[self.end] -= 1;
        if opens[self.end] == 0 {
            self.pipe.ends[self.end].hangup();
        }
    }
}

/// A fid of the pipe server: the root or an end, of the pipe named by the
/// tree attached to.
#[derive(Debug, Clone)]
pub struct PipeFile {
    pipe: Arc<str>,
    /// `None` for the directory, else the end: 0 for `data`, 1 for `data1`.
    end: Option<usize>,
    open: Option<Arc<OpenEnd>>,
}

const NAMES: [&str; 2] = ["data", "data1"];

fn qid(end: Option<usize>) -> Qid {
    match end {
        None => Qid {
            ty: QidType::DIR,
            version: 0,
            path: 0,
        },
        Some(end) => Qid {
            ty: QidType::FILE,
            version: 0,
            path: 1 + end as u64,
        },
    }
}

impl PipeFs {
    /// A pipe server held to `options`.
    pub fn new(options: Options) -> PipeFs {
        PipeFs {
            options,
            modules: Modules::default(),
            pipes: Mutex::new(HashMap::new()),
        }
    }

    /// The pipe named `name`, made if it is not there.
    fn pipe(&self, name: &str) -> Result<Arc<Pipe>> {
        let mut pipes = self.pipes.lock();
        if let Some(pipe) = pipes.get(name).and_then(Weak::upgrade) {
            return Ok(pipe);
        }
        pipes.retain(|_, p| p.strong_count() > 0);
        if pipes.len() >= self.options.pipes {
            return Err(Error::with_errno(
                Errno::ENFILE,
                format!("no more pipes (at most {})", self.options.pipes),
            ));
        }
        let (one, two) = Stream::pipe(self.options.queue, self.modules.clone());
        let pipe = Arc::new(Pipe {
            ends: [one, two],
            opens: Mutex::new([0, 0]),
        });
        pipes.insert(name.to_owned(), Arc::downgrade(&pipe));
        Ok(pipe)
    }

    fn attr(&self, end: Option<usize>, user: &User) -> Attr {
        match end {
            None => attr(qid(None), "/", S_IFDIR | 0o555, &user.uname),
            Some(end) => attr(qid(Some(end)), NAMES[end], S_IFREG | 0o660, &user.uname),
        }
    }
}

fn not_open() -> Error {
    Error::with_errno(Errno::EBADF, "pipe end not open")
}

impl Filesystem for PipeFs {
    type File = PipeFile;

    async fn attach(&self, user: &User) -> Result<(PipeFile, Qid)> {
        let file = PipeFile {
            pipe: user.aname.as_str().into(),
            end: None,
            open: None,
        };
        Ok((file, qid(None)))
    }

    async fn walk(&self, _cx: &Cx, dir: &PipeFile, name: &Name) -> Result<(PipeFile, Qid)> {
        let end = match (dir.end, name.as_str()) {
            (Some(_), _) => return Err(Error::not_dir()),
            (None, "..") => None,
            (None, name) => Some(
                NAMES
                    .iter()
                    .position(|n| *n == name)
                    .ok_or_else(Error::not_found)?,
            ),
        };
        let file = PipeFile {
            pipe: dir.pipe.clone(),
            end,
            open: None,
        };
        Ok((file, qid(end)))
    }

    async fn getattr(&self, cx: &Cx, file: &PipeFile) -> Result<Attr> {
        Ok(self.attr(file.end, &cx.user))
    }

    async fn open(&self, _cx: &Cx, file: &mut PipeFile, _flags: u32) -> Result<Opened> {
        if let Some(end) = file.end {
            file.open = Some(Arc::new(OpenEnd::new(self.pipe(&file.pipe)?, end)));
        }
        Ok(Opened {
            qid: qid(file.end),
            iounit: 0,
        })
    }

    async fn read(&self, _cx: &Cx, file: &PipeFile, _offset: u64, count: u32) -> Result<Bytes> {
        let open = file.open.as_ref().ok_or_else(not_open)?;
        Ok(open.stream().read(count as usize).await)
    }

    async fn write(&self, _cx: &Cx, file: &PipeFile, _offset: u64, data: Bytes) -> Result<u32> {
        let open = file.open.as_ref().ok_or_else(not_open)?;
        Ok(open.stream().write(data).await? as u32)
    }

    async fn read_dir(&self, cx: &Cx, dir: &PipeFile) -> Result<Vec<DirEntry>> {
        if dir.end.is_some() {
            return Err(Error::not_dir());
        }
        Ok((0..2)
            .map(|end| DirEntry {
                name: Name::new(NAMES[end]).expect("a valid name"),
                attr: self.attr(Some(end), &cx.user),
            })
            .collect())
    }
}
