//! taskbag: the task bag of the v9fs paper, as a file server.
//!
//! Three directories: `questions`, `working`, `answers`. A client creates a
//! file in `questions` (always exclusive-use) and writes a question to it.
//! A worker that later opens a question for writing takes it: the file
//! moves to `working`. If the worker closes it without writing, the worker
//! gave up and the file goes back to `questions`; if it wrote, the file
//! moves to `answers`. All of it works from the shell through any 9P client:
//! `ls questions`, `cat answers/x`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use ninep_server::{
    Attr, Cx, DirEntry, Error, Filesystem, Opened, Result, SetAttr, User, fs::can_write,
};
use ninep_wire::consts::mode::DMEXCL;
use ninep_wire::{Name, Qid};

use crate::ramfs::{RamFile, RamFs};
use crate::space::Limits;

/// The task bag file server.
#[derive(Debug)]
pub struct Taskbag {
    ram: RamFs,
    questions: RamFile,
    working: RamFile,
    answers: RamFile,
}

/// A fid: a ramfs file, and the task a worker took by opening it.
#[derive(Debug, Clone)]
pub struct TaskFile {
    file: RamFile,
    task: Option<Arc<Task>>,
}

/// A question being worked on.
#[derive(Debug)]
struct Task {
    name: String,
    wrote: AtomicBool,
}

impl Default for Taskbag {
    fn default() -> Self {
        Self::new()
    }
}

impl Taskbag {
    /// An empty bag: `questions`, `working` and `answers`, all empty,
    /// held to the default [`Limits`].
    pub fn new() -> Taskbag {
        Taskbag::with_limits(Limits::default())
    }

    /// The same, its questions and answers held to `limits`.
    pub fn with_limits(limits: Limits) -> Taskbag {
        let ram = RamFs::with_limits(limits);
        let make = |name| {
            ram.make_dir(name, 0o777)
                .unwrap_or_else(|e| unreachable!("a new ramfs takes {name}: {e}"))
        };
        let (questions, working, answers) = (make("questions"), make("working"), make("answers"));
        Taskbag {
            ram,
            questions,
            working,
            answers,
        }
    }

    fn plain(file: RamFile) -> TaskFile {
        TaskFile { file, task: None }
    }
}

impl Filesystem for Taskbag {
    type File = TaskFile;

    async fn attach(&self, user: &User) -> Result<(TaskFile, Qid)> {
        let (file, qid) = self.ram.attach(user).await?;
        Ok((Self::plain(file), qid))
    }

    async fn walk(&self, cx: &Cx, dir: &TaskFile, name: &Name) -> Result<(TaskFile, Qid)> {
        let (file, qid) = self.ram.walk(cx, &dir.file, name).await?;
        Ok((Self::plain(file), qid))
    }

    async fn getattr(&self, cx: &Cx, file: &TaskFile) -> Result<Attr> {
        self.ram.getattr(cx, &file.file).await
    }

    async fn setattr(&self, cx: &Cx, file: &TaskFile, set: &SetAttr) -> Result<()> {
        self.ram.setattr(cx, &file.file, set).await
    }

    /// Opening a question for writing takes it to `working`.
    async fn open(&self, cx: &Cx, file: &mut TaskFile, flags: u32) -> Result<Opened> {
        let opened = self.ram.open(cx, &mut file.file, flags).await?;
        if can_write(flags) && self.ram.parent(file.file) == Some(self.questions) {
            let name = self.ram.name(file.file).ok_or_else(Error::not_found)?;
            self.ram.move_to(file.file, self.working, &name)?;
            file.task = Some(Arc::new(Task {
                name,
                wrote: AtomicBool::new(false),
            }));
        }
        Ok(opened)
    }

    /// Questions are asked by creating exclusive-use files in `questions`.
    async fn create(
        &self,
        cx: &Cx,
        dir: &TaskFile,
        name: &Name,
        mode: u32,
        flags: u32,
        gid: u32,
    ) -> Result<(TaskFile, Opened)> {
        if dir.file != self.questions {
            return Err(Error::prohibited("create"));
        }
        let (file, opened) = self
            .ram
            .create(cx, &dir.file, name, mode | DMEXCL, flags, gid)
            .await?;
        Ok((Self::plain(file), opened))
    }

    async fn read(&self, cx: &Cx, file: &TaskFile, offset: u64, count: u32) -> Result<Bytes> {
        self.ram.read(cx, &file.file, offset, count).await
    }

    async fn write(&self, cx: &Cx, file: &TaskFile, offset: u64, data: Bytes) -> Result<u32> {
        let n = self.ram.write(cx, &file.file, offset, data).await?;
        if let Some(task) = &file.task {
            task.wrote.store(true, Ordering::Release);
        }
        Ok(n)
    }

    async fn read_dir(&self, cx: &Cx, dir: &TaskFile) -> Result<Vec<DirEntry>> {
        self.ram.read_dir(cx, &dir.file).await
    }

    async fn remove(&self, cx: &Cx, file: &TaskFile) -> Result<()> {
        let fixed = [self.questions, self.working, self.answers];
        if fixed.contains(&file.file) || file.file.0 == crate::ramfs::ROOT {
            return Err(Error::prohibited("remove"));
        }
        self.ram.remove(cx, &file.file).await
    }

    /// A worker's close settles its task: answered if it wrote, back to the
    /// questions if it did not.
    async fn clunk(&self, _cx: &Cx, file: TaskFile) -> Result<()> {
        if let Some(task) = file.task {
            let to = if task.wrote.load(Ordering::Acquire) {
                self.answers
            } else {
                self.questions
            };
            // A question removed while being worked on has nowhere to go.
            if self.ram.parent(file.file) == Some(self.working) {
                self.ram.move_to(file.file, to, &task.name)?;
            }
        }
        Ok(())
    }
}
