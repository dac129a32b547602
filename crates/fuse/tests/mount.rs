//! A ninep mount used through ordinary system calls.

mod support;

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ninep_client::Client;
use ninep_fuse::Cache;
use ninep_ramfs::RamFs;
use ninep_server::tree::{Dir, Tree};
use ninep_server::{Attr, Cx, Filesystem, User};
use ninep_testkit::{read_frame, tag};
use ninep_transport::Addr;
use ninep_wire::consts::unix::{S_IFDIR, S_IFREG};
use ninep_wire::{Dialect, Msg, Name, Protocol, Qid, QidType};
use tokio::io::AsyncWriteExt;

/// Requests sent, by name.
type Counts = Arc<Mutex<HashMap<&'static str, usize>>>;

struct Scene {
    base: PathBuf,
    /// Requests the mount has sent.
    sent: Counts,
    /// The round trip of each request the mount has sent, in order: the
    /// round after the highest of the replies let through before it.
    rounds: Rounds,
}

/// Each request's round trip, in the order they came.
type Rounds = Arc<Mutex<Vec<u32>>>;

impl Scene {
    /// How many of each request the mount has sent so far.
    fn sent(&self) -> HashMap<&'static str, usize> {
        self.sent.lock().unwrap().clone()
    }

    /// How many requests the mount has sent so far.
    fn requests(&self) -> usize {
        self.rounds.lock().unwrap().len()
    }

    /// How many round trips, one after another, the requests sent since
    /// the `mark`-th took, where replies are held long enough that
    /// requests sent together arrive before any of them is answered.
    fn rounds_since(&self, mark: usize) -> u32 {
        let rounds = self.rounds.lock().unwrap();
        let since = &rounds[mark..];
        match (since.iter().min(), since.iter().max()) {
            (Some(first), Some(last)) => last - first + 1,
            _ => 0,
        }
    }
}

/// A client of the mount's server of its own, attached as root.
async fn other_client(scene: &Scene) -> ninep_client::Fsys {
    let addr = format!("unix!{}", scene.base.join("sock").display());
    ninep_testkit::attach_root(&addr).await
}

/// Makes `name` holding `data` through another client, so that no page of
/// it is cached by the mount.
async fn made_elsewhere(scene: &Scene, name: &str, data: &[u8]) {
    let file = other_client(scene)
        .await
        .create(name, 0o644, ninep_wire::consts::dotl::O_WRONLY)
        .await
        .unwrap();
    if !data.is_empty() {
        file.write_all_at(0, bytes::Bytes::copy_from_slice(data))
            .await
            .unwrap();
    }
    file.close().await.unwrap();
}

/// How many more of request `name` `after` shows than `before`.
fn more(before: &HashMap<&str, usize>, after: &HashMap<&str, usize>, name: &str) -> usize {
    after.get(name).unwrap_or(&0) - before.get(name).unwrap_or(&0)
}

/// Forwards each connection to `front` on to `back`, counting the requests
/// (by their names in `dialect` and its extensions) in `sent` and the round trips in `round`,
/// each reply held `hold` before it goes on.
async fn counting_proxy(
    front: &Addr,
    back: Addr,
    dialect: Dialect,
    scene: (Counts, Rounds),
    hold: Duration,
) {
    let (sent, log) = scene;
    // The highest round of the replies let through so far.
    let round = Arc::new(AtomicU32::new(0));
    let listener = front.listen().await.unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = back.dial().await.unwrap();
            let (mut from_client, mut to_client) = tokio::io::split(client);
            let (mut from_server, mut to_server) = tokio::io::split(server);
            let rounds = Arc::new(Mutex::new(HashMap::new()));
            let (sent, delivered, asked) = (sent.clone(), round.clone(), rounds.clone());
            let log = log.clone();
            tokio::spawn(async move {
                while let Some(frame) = read_frame(&mut from_client).await {
                    let protocol = Protocol {
                        dialect,
                        streams: true,
                        resume: true,
                    };
                    let name = Msg::type_name(frame[4], protocol).unwrap_or("?");
                    *sent.lock().unwrap().entry(name).or_default() += 1;
                    let round = delivered.load(Ordering::SeqCst) + 1;
                    asked.lock().unwrap().insert(tag(&frame), round);
                    log.lock().unwrap().push(round);
                    if to_server.write_all(&frame).await.is_err() {
                        break;
                    }
                }
            });
            let (held, mut due) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                while let Some(frame) = read_frame(&mut from_server).await {
                    let round = rounds.lock().unwrap().remove(&tag(&frame)).unwrap_or(0);
                    let _ = held.send((tokio::time::Instant::now() + hold, round, frame));
                }
            });
            let delivered = round.clone();
            tokio::spawn(async move {
                while let Some((at, round, frame)) = due.recv().await {
                    tokio::time::sleep_until(at).await;
                    delivered.fetch_max(round, Ordering::SeqCst);
                    if to_client.write_all(&frame).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// Serves a ramfs and mounts it; the session unmounts when dropped.
async fn mounted(name: &str, cache: Cache, dialect: Dialect) -> (Scene, PathBuf, support::Mounted) {
    mounted_fs(name, cache, dialect, RamFs::new()).await
}

/// Serves `fs` and mounts it; the session unmounts when dropped.
async fn mounted_fs(
    name: &str,
    cache: Cache,
    dialect: Dialect,
    fs: impl Filesystem,
) -> (Scene, PathBuf, support::Mounted) {
    mounted_far(name, &support::options(cache), dialect, fs, Duration::ZERO).await
}

/// Serves `fs` and mounts it with `options`, each reply held `hold` on its
/// way; the session unmounts when dropped.
async fn mounted_far(
    name: &str,
    options: &ninep_fuse::Options,
    dialect: Dialect,
    fs: impl Filesystem,
    hold: Duration,
) -> (Scene, PathBuf, support::Mounted) {
    let base = std::env::temp_dir().join(format!("ninep-fuse-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    support::serve(fs, &addr).await;
    // The mount reaches the server through a proxy that counts requests.
    let counted = Addr::Unix(base.join("counted"));
    let sent = Arc::new(Mutex::new(HashMap::new()));
    let rounds = Arc::new(Mutex::new(Vec::new()));
    let scene = (sent.clone(), rounds.clone());
    counting_proxy(&counted, addr, dialect, scene, hold).await;
    let mnt = base.join("mnt");
    let session = support::mount(&counted, dialect, options, &mnt).await;
    (Scene { base, sent, rounds }, mnt, session)
}

fn exercise(mnt: &Path, dialect: Dialect) {
    // Files: create, write, read back, seek, append, truncate.
    let path = mnt.join("notes");
    std::fs::write(&path, "hello, fuse\n").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello, fuse\n");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    f.seek(SeekFrom::Start(7)).unwrap();
    f.write_all(b"9p!!\n").unwrap();
    let mut back = String::new();
    f.seek(SeekFrom::Start(0)).unwrap();
    f.read_to_string(&mut back).unwrap();
    assert_eq!(back, "hello, 9p!!\n");
    f.set_len(5).unwrap();
    drop(f);
    assert_eq!(std::fs::read(&path).unwrap(), b"hello");
    // A large file spanning many messages.
    let big: Vec<u8> = (0..5_000_000u32).map(|i| (i % 253) as u8).collect();
    std::fs::write(mnt.join("big"), &big).unwrap();
    assert_eq!(std::fs::read(mnt.join("big")).unwrap(), big);
    // Directories, listings, rename, links, permissions.
    std::fs::create_dir(mnt.join("dir")).unwrap();
    for i in 0..500 {
        std::fs::write(mnt.join(format!("dir/f{i:03}")), i.to_string()).unwrap();
    }
    let mut names: Vec<String> = std::fs::read_dir(mnt.join("dir"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let want: Vec<String> = (0..500).map(|i| format!("f{i:03}")).collect();
    assert_eq!(names, want);
    // A 9P2000 wstat renames within a directory only.
    let renamed = if dialect == Dialect::L {
        "dir/renamed"
    } else {
        let across = std::fs::rename(mnt.join("notes"), mnt.join("dir/renamed"));
        assert_eq!(across.unwrap_err().raw_os_error(), Some(18), "EXDEV");
        "renamed"
    };
    std::fs::rename(mnt.join("notes"), mnt.join(renamed)).unwrap();
    assert!(!path.exists());
    assert_eq!(std::fs::read(mnt.join(renamed)).unwrap(), b"hello");
    let linked = std::os::unix::fs::symlink(renamed, mnt.join("link"))
        .and_then(|()| std::fs::hard_link(mnt.join(renamed), mnt.join("hard")));
    if dialect == Dialect::Base {
        // 9P2000 has no links of either kind.
        assert_eq!(
            linked.unwrap_err().kind(),
            std::io::ErrorKind::PermissionDenied
        );
        std::fs::hard_link(mnt.join(renamed), mnt.join("hard")).unwrap_err();
        std::fs::write(mnt.join("hard"), "hello").unwrap();
    } else {
        linked.unwrap();
        assert_eq!(
            std::fs::read_link(mnt.join("link")).unwrap(),
            Path::new(renamed)
        );
        assert_eq!(std::fs::read(mnt.join("link")).unwrap(), b"hello");
        assert_eq!(std::fs::read(mnt.join("hard")).unwrap(), b"hello");
    }
    if dialect == Dialect::L {
        // Every name of a file shows its link count at once after link,
        // unlink and rename, even where attributes are cached.
        use std::os::unix::fs::MetadataExt;
        let nlink = |p: &str| std::fs::metadata(mnt.join(p)).unwrap().nlink();
        assert_eq!((nlink(renamed), nlink("hard")), (2, 2));
        std::fs::hard_link(mnt.join("hard"), mnt.join("third")).unwrap();
        assert_eq!((nlink(renamed), nlink("hard"), nlink("third")), (3, 3, 3));
        std::fs::remove_file(mnt.join("third")).unwrap();
        assert_eq!((nlink(renamed), nlink("hard")), (2, 2));
        std::fs::rename(mnt.join("hard"), mnt.join("moved")).unwrap();
        assert!(!mnt.join("hard").exists());
        assert_eq!((nlink(renamed), nlink("moved")), (2, 2));
        std::fs::rename(mnt.join("moved"), mnt.join("hard")).unwrap();
    }
    std::fs::set_permissions(mnt.join("hard"), std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(
        std::fs::metadata(mnt.join("hard"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o600
    );
    // Removal.
    for i in 0..500 {
        std::fs::remove_file(mnt.join(format!("dir/f{i:03}"))).unwrap();
    }
    std::fs::write(mnt.join("dir/last"), "").unwrap();
    assert!(
        std::fs::remove_dir(mnt.join("dir")).is_err(),
        "dir still holds a file"
    );
    assert_eq!(
        std::fs::remove_file(mnt.join("dir"))
            .unwrap_err()
            .raw_os_error(),
        Some(21),
        "EISDIR"
    );
    std::fs::remove_file(mnt.join("dir/last")).unwrap();
    std::fs::remove_file(mnt.join(renamed)).unwrap();
    std::fs::remove_dir(mnt.join("dir")).unwrap();
    assert_eq!(
        std::fs::read_to_string(mnt.join("nothing"))
            .unwrap_err()
            .kind(),
        std::io::ErrorKind::NotFound
    );
    // A name longer than 9P carries is too long, not invalid.
    let long = mnt.join("n".repeat(256));
    for result in [
        std::fs::write(&long, ""),
        std::fs::create_dir(&long),
        std::fs::rename(mnt.join("hard"), &long),
    ] {
        assert_eq!(result.unwrap_err().raw_os_error(), Some(36), "ENAMETOOLONG");
    }
    // statfs through the mount answers: df works.
    let df = std::process::Command::new("df").arg(mnt).output().unwrap();
    assert!(df.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_and_directories_through_the_mount() {
    for (name, cache, dialect) in [
        ("none", Cache::None, Dialect::L),
        ("strict", Cache::Strict, Dialect::L),
        ("loose", Cache::Loose, Dialect::L),
        ("u", Cache::Strict, Dialect::U),
        ("base", Cache::Strict, Dialect::Base),
    ] {
        let (_scene, mnt, session) = mounted(name, cache, dialect).await;
        let at = mnt.clone();
        tokio::task::spawn_blocking(move || exercise(&at, dialect))
            .await
            .unwrap();
        drop(session);
        // Unmounted: the mount point is an empty directory again.
        assert_eq!(std::fs::read_dir(&mnt).unwrap().count(), 0, "{name}");
    }
}

/// Under the strict policy a file's pages are kept while its qid.version
/// holds, and dropped when the file changes behind the mount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_cache_sees_changes_made_elsewhere() {
    let (scene, mnt, session) = mounted("strict-change", Cache::Strict, Dialect::L).await;
    let path = mnt.join("shared");
    let at = path.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(&at, "version one").unwrap();
        assert_eq!(std::fs::read_to_string(&at).unwrap(), "version one");
        assert_eq!(std::fs::read_to_string(&at).unwrap(), "version one");
    })
    .await
    .unwrap();
    // Another client changes the file on the server.
    let file = other_client(&scene)
        .await
        .open(
            "shared",
            ninep_wire::consts::dotl::O_WRONLY | ninep_wire::consts::dotl::O_TRUNC,
        )
        .await
        .unwrap();
    file.write_all_at(0, "version two!".into()).await.unwrap();
    file.close().await.unwrap();
    let at = path.clone();
    let seen = tokio::task::spawn_blocking(move || std::fs::read_to_string(&at).unwrap())
        .await
        .unwrap();
    assert_eq!(seen, "version two!");
    drop(session);
}

/// A file just made keeps no walked fid of its own: what the kernel asks
/// of it while it is open (fstat, attributes after a write) goes through
/// the open file, without a walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_file_answers_for_its_inode() {
    let (scene, mnt, session) = mounted("fstat-open", Cache::None, Dialect::L).await;
    let path = mnt.join("new");
    let before = scene.sent();
    let file = tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::create(&path).unwrap();
        file.write_all(b"seven b").unwrap();
        assert_eq!(file.metadata().unwrap().len(), 7);
        file
    })
    .await
    .unwrap();
    let after = scene.sent();
    // The lookup that finds no such file, and the directory's clone that
    // Tlcreate turns into the new file.
    assert_eq!(more(&before, &after, "Twalk"), 2);
    drop(file);
    drop(session);
}

/// Through the page cache the kernel reads whole pages, past the end of a
/// file whose size it knows: one Tread answers, with no second one to find
/// the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_file_is_read_in_one_request() {
    let (scene, mnt, session) = mounted("read-once", Cache::Strict, Dialect::L).await;
    let path = mnt.join("small");
    let at = path.clone();
    tokio::task::spawn_blocking(move || std::fs::write(&at, vec![7; 5000]).unwrap())
        .await
        .unwrap();
    let before = scene.sent();
    let data = tokio::task::spawn_blocking(move || std::fs::read(&path).unwrap())
        .await
        .unwrap();
    assert_eq!(data, vec![7; 5000]);
    assert_eq!(more(&before, &scene.sent(), "Tread"), 1);
    drop(session);
}

/// Fifos and devices made through the mount are what they were made as,
/// before and after a chmod (in 9P2000.u a wstat of the whole mode);
/// 9P2000 has no such files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn special_files_keep_their_type_through_chmod() {
    use rustix::fs::{CWD, FileType, Mode, makedev, mknodat};
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    for dialect in Dialect::ALL {
        let (_scene, mnt, session) = mounted("special", Cache::None, dialect).await;
        tokio::task::spawn_blocking(move || {
            let fifo = mnt.join("fifo");
            let null = mnt.join("null");
            let made = [
                mknodat(CWD, &fifo, FileType::Fifo, Mode::from(0o640), 0),
                mknodat(
                    CWD,
                    &null,
                    FileType::CharacterDevice,
                    Mode::from(0o600),
                    makedev(1, 3),
                ),
            ];
            if dialect == Dialect::Base {
                for result in made {
                    assert_eq!(result.unwrap_err(), rustix::io::Errno::PERM);
                }
                return;
            }
            for result in made {
                result.unwrap();
            }
            for (path, mode) in [(&fifo, 0o604), (&null, 0o666)] {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
                let meta = std::fs::symlink_metadata(path).unwrap();
                assert_eq!(meta.mode() & 0o7777, mode, "{dialect} {path:?}");
            }
            let fifo = std::fs::symlink_metadata(&fifo).unwrap();
            assert!(fifo.file_type().is_fifo(), "{dialect}");
            let null = std::fs::symlink_metadata(&null).unwrap();
            assert!(null.file_type().is_char_device(), "{dialect}");
            assert_eq!(null.rdev(), makedev(1, 3), "{dialect}");
        })
        .await
        .unwrap();
        drop(session);
    }
}

/// What a file of /proc says: the contents of [`Proc`]'s one file.
const UPTIME: &str = "4242.17 8484.34\n";

/// A tree like /proc: one file, `uptime`, whose stat gives size 0 and a
/// version that is not 0 (so it may be cached) though it has data. With
/// `held`, reads of it never finish, as reads of a pipe nobody writes to.
#[derive(Default)]
struct Proc {
    held: Option<Arc<HeldReads>>,
}

/// What became of reads that never finish.
#[derive(Default)]
struct HeldReads {
    /// Told when a read has reached the server.
    started: tokio::sync::Notify,
    /// Told when the server has given a read up (it was flushed).
    given_up: tokio::sync::Notify,
}

/// Tells [`HeldReads::given_up`] when the read holding it is dropped.
struct GivenUp(Arc<HeldReads>);

impl Drop for GivenUp {
    fn drop(&mut self) {
        self.0.given_up.notify_one();
    }
}

impl Proc {
    fn qid(is_root: bool) -> Qid {
        Qid {
            ty: if is_root { QidType::DIR } else { QidType::FILE },
            version: 1,
            path: u64::from(!is_root),
        }
    }
}

impl Filesystem for Proc {
    /// True for the root, false for `uptime`.
    type File = bool;

    async fn attach(&self, _user: &User) -> ninep_server::Result<(bool, Qid)> {
        Ok((true, Proc::qid(true)))
    }

    async fn walk(&self, _cx: &Cx, dir: &bool, name: &Name) -> ninep_server::Result<(bool, Qid)> {
        match (*dir, name.as_str()) {
            (true, "uptime") => Ok((false, Proc::qid(false))),
            (true, "..") => Ok((true, Proc::qid(true))),
            _ => Err(ninep_server::Error::not_found()),
        }
    }

    async fn getattr(&self, _cx: &Cx, file: &bool) -> ninep_server::Result<Attr> {
        let (mode, name) = match file {
            true => (S_IFDIR | 0o555, "/"),
            false => (S_IFREG | 0o444, "uptime"),
        };
        Ok(Attr {
            qid: Proc::qid(*file),
            name: name.into(),
            mode,
            nlink: 1,
            size: 0,
            ..Attr::default()
        })
    }

    async fn read(
        &self,
        _cx: &Cx,
        _file: &bool,
        offset: u64,
        count: u32,
    ) -> ninep_server::Result<bytes::Bytes> {
        if let Some(held) = &self.held {
            let _given_up = GivenUp(held.clone());
            held.started.notify_one();
            std::future::pending::<()>().await;
        }
        let data = UPTIME.as_bytes();
        let from = (offset as usize).min(data.len());
        let to = (from + count as usize).min(data.len());
        Ok(bytes::Bytes::copy_from_slice(&data[from..to]))
    }

    async fn read_dir(
        &self,
        cx: &Cx,
        _dir: &bool,
    ) -> ninep_server::Result<Vec<ninep_server::DirEntry>> {
        Ok(vec![ninep_server::DirEntry {
            name: Name::new("uptime").expect("a valid name"),
            attr: self.getattr(cx, &false).await?,
        }])
    }
}

/// A file whose size is 0 but which has data (/proc, /sys) reads whole
/// under every cache policy, in every dialect, and again when read twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_size_zero_reads_its_data() {
    for cache in [Cache::None, Cache::Strict, Cache::Loose] {
        for dialect in Dialect::ALL {
            let (_scene, mnt, session) =
                mounted_fs("size-zero", cache, dialect, Proc::default()).await;
            let read = tokio::task::spawn_blocking(move || {
                let path = mnt.join("uptime");
                assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
                [(); 2].map(|()| std::fs::read_to_string(&path).unwrap())
            })
            .await
            .unwrap();
            assert_eq!(read, [UPTIME; 2], "{cache:?} {dialect}");
            drop(session);
        }
    }
}

/// A process killed while its read waits on the server (Ctrl-C on `cat`
/// of a pipe nobody writes to) ends at once: the mount gives the read up,
/// flushes it on the server, and goes on serving. The kernel itself would
/// wait for an answer, even for a process killed with SIGKILL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_killed_while_waiting_is_let_go() {
    let held = Arc::new(HeldReads::default());
    let fs = Proc {
        held: Some(held.clone()),
    };
    let (_scene, mnt, session) = mounted_fs("killed", Cache::None, Dialect::L, fs).await;
    let mut cat = std::process::Command::new("cat")
        .arg(mnt.join("uptime"))
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let wait = Duration::from_secs(10);
    tokio::time::timeout(wait, held.started.notified())
        .await
        .expect("the read reaches the server");
    let status = std::process::Command::new("kill")
        .args(["-INT", &cat.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let ended = tokio::time::timeout(wait, tokio::task::spawn_blocking(move || cat.wait())).await;
    let status = ended.expect("cat ends once interrupted").unwrap().unwrap();
    assert_eq!(status.signal(), Some(2), "cat ends by its SIGINT: {status}");
    tokio::time::timeout(wait, held.given_up.notified())
        .await
        .expect("the server's read is flushed");
    let meta = tokio::task::spawn_blocking(move || std::fs::metadata(mnt.join("uptime")))
        .await
        .unwrap();
    assert!(meta.unwrap().is_file(), "the mount goes on serving");
    drop(session);
}

/// `ninep serve /proc`: the host's /proc/uptime through an export reads
/// as it does on the host, two figures, under every cache policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proc_through_an_export_reads_its_data() {
    for cache in [Cache::None, Cache::Strict, Cache::Loose] {
        let export = ninep_export::Export::new("/proc", ninep_export::Options::default()).unwrap();
        let (_scene, mnt, session) = mounted_fs("proc", cache, Dialect::L, export).await;
        let uptime = tokio::task::spawn_blocking(move || {
            std::fs::read_to_string(mnt.join("uptime")).unwrap()
        })
        .await
        .unwrap();
        let figures: Vec<f64> = uptime
            .split_whitespace()
            .map(|f| f.parse().unwrap())
            .collect();
        assert_eq!(figures.len(), 2, "{cache:?}: {uptime:?}");
        drop(session);
    }
}

/// An overwrite (open with O_TRUNC) of a control file, which takes writes
/// but refuses wstat and setattr, truncates with the open: the write
/// arrives, in every dialect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_needs_no_setattr() {
    for dialect in Dialect::ALL {
        let got = Arc::new(Mutex::new(Vec::new()));
        let into = got.clone();
        let tree = Tree::new(Dir::new().write("ctl", move |_, data| {
            into.lock().unwrap().push(data.to_vec());
            Ok(())
        }));
        let (scene, mnt, session) = mounted_fs("ctl", Cache::Strict, dialect, tree).await;
        let before = scene.sent();
        let shell = tokio::task::spawn_blocking(move || {
            let ctl = mnt.join("ctl");
            std::fs::write(&ctl, "first\n").unwrap();
            std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("echo second > '{}'", ctl.display()))
                .status()
                .unwrap()
        })
        .await
        .unwrap();
        assert!(shell.success(), "{dialect}");
        assert_eq!(
            *got.lock().unwrap(),
            [b"first\n".to_vec(), b"second\n".to_vec()],
            "{dialect}"
        );
        let after = scene.sent();
        for change in ["Tsetattr", "Twstat"] {
            assert_eq!(more(&before, &after, change), 0, "{dialect} {change}");
        }
        drop(session);
    }
}

/// O_TRUNC still truncates a regular file, in every dialect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overwrite_truncates() {
    for dialect in Dialect::ALL {
        let (_scene, mnt, session) = mounted("truncate", Cache::Strict, dialect).await;
        tokio::task::spawn_blocking(move || {
            let path = mnt.join("file");
            std::fs::write(&path, "a longer first version\n").unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"a longer first version\n");
            std::fs::write(&path, "short\n").unwrap();
            assert_eq!(std::fs::read(&path).unwrap(), b"short\n", "{dialect}");
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .unwrap();
            assert_eq!(file.metadata().unwrap().len(), 0, "{dialect}");
            file.write_all(b"x").unwrap();
            drop(file);
            assert_eq!(std::fs::read(&path).unwrap(), b"x", "{dialect}");
        })
        .await
        .unwrap();
        drop(session);
    }
}

/// Requests of any of `names` that `after` shows more of than `before`.
fn more_of(before: &HashMap<&str, usize>, after: &HashMap<&str, usize>, names: &[&str]) -> usize {
    names.iter().map(|name| more(before, after, name)).sum()
}

/// A file read in order in small pieces is read ahead in large ones (or
/// one stream), under every cache policy: not a round trip per read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_read_in_order_is_read_ahead() {
    let data: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
    for (name, cache) in [
        ("ahead-none", Cache::None),
        ("ahead-strict", Cache::Strict),
        ("ahead-loose", Cache::Loose),
    ] {
        let (scene, mnt, session) = mounted(name, cache, Dialect::L).await;
        // Written by another client, so that no page of it is cached.
        made_elsewhere(&scene, "big", &data).await;
        let path = mnt.join("big");
        let before = scene.sent();
        let read = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::open(&path).unwrap();
            let mut out = Vec::new();
            let mut piece = vec![0; 8192];
            loop {
                let n = file.read(&mut piece).unwrap();
                if n == 0 {
                    break out;
                }
                out.extend_from_slice(&piece[..n]);
            }
        })
        .await
        .unwrap();
        assert!(read == data, "{name}: what was read differs");
        let reads = more_of(&before, &scene.sent(), &["Tread", "Tsread"]);
        // 512 reads of 8 KiB, of which the kernel gathers some.
        assert!(reads <= 16, "{name}: {reads} read requests");
        drop(session);
    }
}

/// The kernel's read-ahead sends several reads at once, each starting
/// where the one before it ends, before any is answered: those are reads
/// in order too, and a file read through the page cache over a long round
/// trip streams after its first few reads, not after a round trip of plain
/// reads for every few MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_the_kernel_sends_together_are_read_ahead() {
    let hold = Duration::from_millis(20);
    let (scene, mnt, session) = mounted_far(
        "ahead-together",
        &support::options(Cache::Loose),
        Dialect::L,
        RamFs::new(),
        hold,
    )
    .await;
    let data: Vec<u8> = (0..32 << 20).map(|i: u32| (i % 253) as u8).collect();
    made_elsewhere(&scene, "big", &data).await;
    let before = scene.sent();
    let path = mnt.join("big");
    let read = tokio::task::spawn_blocking(move || std::fs::read(path).unwrap())
        .await
        .unwrap();
    assert!(read == data, "what was read differs");
    let after = scene.sent();
    let plain = more(&before, &after, "Tread");
    assert_eq!(more(&before, &after, "Tsread"), 1);
    // The kernel's first batches may reach the mount in any order: some
    // slack, far below the 20 or so of a read-ahead that starts late.
    assert!(plain <= 8, "{plain} plain reads before the file streamed");
    drop(session);
}

/// Regular files show as their block size what one request carries (a MiB
/// at the default msize), not the server's disk block: programs that read and
/// write in st_blksize pieces (cp, cat) then make one kernel request per
/// MiB rather than per 4 KiB or 128 KiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn files_show_what_one_request_carries_as_their_block_size() {
    let (_scene, mnt, session) = mounted("blksize", Cache::None, Dialect::L).await;
    let path = mnt.join("f");
    let dir = mnt.clone();
    let (file, dir) = tokio::task::spawn_blocking(move || {
        std::fs::write(&path, "x").unwrap();
        let file = std::fs::metadata(&path).unwrap().blksize();
        (file, std::fs::metadata(&dir).unwrap().blksize())
    })
    .await
    .unwrap();
    assert_eq!(file, 1 << 20);
    // Anything else keeps a page, by which stdio sizes its buffers.
    assert_eq!(dir, 4096);
    drop(session);
}

/// Under strict caching small writes in order are gathered and sent behind
/// the writer; whatever asks next (a stat, a read through another open
/// file, another client after close) sees every byte written, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_in_order_go_behind_and_are_all_seen() {
    let (scene, mnt, session) = mounted("behind", Cache::Strict, Dialect::L).await;
    let path = mnt.join("written");
    let before = scene.sent();
    let at = path.clone();
    tokio::task::spawn_blocking(move || {
        let mut file = std::fs::File::create(&at).unwrap();
        for i in 0..512u32 {
            file.write_all(&[(i % 251) as u8; 8192]).unwrap();
            if i == 100 {
                // Mid-way, the size and the bytes are those written so far.
                assert_eq!(std::fs::metadata(&at).unwrap().len(), 101 * 8192);
                let mut other = std::fs::File::open(&at).unwrap();
                other.seek(SeekFrom::Start(100 * 8192)).unwrap();
                let mut last = vec![0; 8192];
                other.read_exact(&mut last).unwrap();
                assert!(last.iter().all(|&b| b == 100), "read through another file");
            }
        }
        // An overwrite of bytes already sent lands after them.
        file.seek(SeekFrom::Start(4096)).unwrap();
        file.write_all(&[255; 8192]).unwrap();
        file.sync_all().unwrap();
    })
    .await
    .unwrap();
    let writes = more_of(&before, &scene.sent(), &["Twrite", "Tswrite"]);
    assert!(writes <= 32, "{writes} write requests for 512 writes");
    // Another client reads what the server has.
    let got = other_client(&scene).await.read("written").await.unwrap();
    assert_eq!(got.len(), 512 * 8192);
    for (i, block) in got.chunks(8192).enumerate() {
        let (head, tail) = block.split_at(4096);
        let want = (i % 251) as u8;
        match i {
            0 => assert!(head.iter().all(|&b| b == 0) && tail.iter().all(|&b| b == 255)),
            1 => assert!(head.iter().all(|&b| b == 255) && tail.iter().all(|&b| b == 1)),
            _ => assert!(block.iter().all(|&b| b == want), "block {i}"),
        }
    }
    drop(session);
}

/// A write the server refuses after the writer was answered (written
/// behind, or from the kernel's writeback) is reported by fsync: nothing
/// is lost without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_refused_later_is_reported_by_fsync() {
    for (name, cache) in [("full-strict", Cache::Strict), ("full-loose", Cache::Loose)] {
        // A file system with room for 256 KiB, behind an export.
        let full = std::env::temp_dir().join(format!("ninep-full-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&full).unwrap();
        let mounted_tmpfs = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&full)
            .status()
            .unwrap();
        assert!(mounted_tmpfs.success());
        let _unmount = Unmount(full.clone());
        let export = ninep_export::Export::new(&full, ninep_export::Options::default()).unwrap();
        let (_scene, mnt, session) = mounted_fs(name, cache, Dialect::L, export).await;
        let outcome = tokio::task::spawn_blocking(move || {
            let mut file = std::fs::File::create(mnt.join("big"))?;
            for _ in 0..128 {
                file.write_all(&[1; 8192])?;
            }
            file.sync_all()
        })
        .await
        .unwrap();
        let error = outcome.expect_err("1 MiB written into 256 KiB");
        assert_eq!(
            error.raw_os_error(),
            Some(28),
            "{name}: ENOSPC, not {error}"
        );
        drop(session);
    }
}

/// Detaches a file system mounted for a test, even when the test fails,
/// and lazily: the export may still hold its root open.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        support::detach(&self.0);
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// The kernel reads ahead through the page cache a MiB at a time, as init
/// asks, not its default 128 KiB (this test runs as root, who may say so).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_kernel_reads_ahead_a_mib() {
    let (_scene, mnt, session) = mounted("read-ahead-kb", Cache::Strict, Dialect::L).await;
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let point = mnt.canonicalize().unwrap();
    let device = table
        .lines()
        .rev()
        .map(|line| line.split(' ').collect::<Vec<_>>())
        .find(|f| Path::new(f[4]) == point)
        .map(|f| f[2].to_owned())
        .expect("the mount is in mountinfo");
    let kb = std::fs::read_to_string(format!("/sys/class/bdi/{device}/read_ahead_kb")).unwrap();
    assert_eq!(kb.trim(), "1024");
    drop(session);
}

/// A file looked up and then opened is opened on the fid its lookup
/// walked: one walk, not a walk and a clone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_looked_up_opens_on_its_walked_fid() {
    let (scene, mnt, session) = mounted("open-walked", Cache::Strict, Dialect::L).await;
    made_elsewhere(&scene, "known", b"here").await;
    let before = scene.sent();
    let path = mnt.join("known");
    let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(path).unwrap())
        .await
        .unwrap();
    assert_eq!(read, "here");
    assert_eq!(more(&before, &scene.sent(), "Twalk"), 1);
    drop(session);
}

/// A name another client made is looked up in one round trip (the walk
/// and the stat of what it reaches go together) and opened in one (on the
/// fid the lookup walked); opened again, on a fid walked and opened
/// together, in one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_is_looked_up_and_opened_in_a_round_trip_each() {
    let hold = Duration::from_millis(50);
    let (scene, mnt, session) = mounted_far(
        "open-rounds",
        &support::options(Cache::Loose),
        Dialect::L,
        RamFs::new(),
        hold,
    )
    .await;
    made_elsewhere(&scene, "known", b"").await;
    // The kernel asks for the root's attributes once, first.
    let root = mnt.clone();
    tokio::task::spawn_blocking(move || std::fs::metadata(root).unwrap())
        .await
        .unwrap();
    for (time, most) in [("first", 2), ("again", 1)] {
        // Until the clunk of the last open is answered.
        tokio::time::sleep(hold * 3).await;
        let mark = scene.requests();
        let path = mnt.join("known");
        let opened = tokio::task::spawn_blocking(move || std::fs::File::open(path))
            .await
            .unwrap();
        let rounds = scene.rounds_since(mark);
        drop(opened.unwrap());
        assert!(rounds <= most, "{time}: {rounds} round trips");
    }
    drop(session);
}
/// Under the policies that cache pages, a small file is read behind its
/// open, so the kernel's first read of it waits for no round trip: opening
/// and reading one costs the round trips of opening another alone. Under
/// none, where every read goes to the server when it is made, the read
/// waits for the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_file_is_read_with_its_open_where_pages_are_cached() {
    let hold = Duration::from_millis(50);
    for (cache, read_with_open) in [
        (Cache::Strict, true),
        (Cache::Loose, true),
        (Cache::None, false),
    ] {
        let name = format!("head-{cache:?}");
        let options = support::options(cache);
        let (scene, mnt, session) =
            mounted_far(&name, &options, Dialect::L, RamFs::new(), hold).await;
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        made_elsewhere(&scene, "opened", &data).await;
        made_elsewhere(&scene, "read", &data).await;
        let mut rounds = Vec::new();
        for (file, reads) in [("opened", false), ("read", true)] {
            let path = mnt.join(file);
            let at = path.clone();
            tokio::task::spawn_blocking(move || std::fs::metadata(at).unwrap())
                .await
                .unwrap();
            // Until the clunks of the walks before are answered.
            tokio::time::sleep(hold * 3).await;
            let mark = scene.requests();
            let (opened, got) = tokio::task::spawn_blocking(move || {
                let mut opened = std::fs::File::open(path).unwrap();
                let mut got = vec![0; 5000];
                if reads {
                    opened.read_exact(&mut got).unwrap();
                }
                (opened, got)
            })
            .await
            .unwrap();
            // Counted before the close, whose clunk would be a round more.
            rounds.push(scene.rounds_since(mark));
            drop(opened);
            if reads {
                assert!(got == data, "{cache:?}: the file read differs");
            }
        }
        let (opened, read) = (rounds[0], rounds[1]);
        assert_eq!(read == opened, read_with_open, "{cache:?}: {rounds:?}");
        assert!(read >= opened, "{cache:?}: {rounds:?}");
        drop(session);
    }
}

/// A file's head read with its open is not kept if a write through the
/// mount started while the open was under way: the write may have reached
/// the server after the head was read. Here the write's own requests go
/// out while the open's are held on their way back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_write_during_an_open_is_seen_by_its_reads() {
    let hold = Duration::from_millis(200);
    let options = support::options(Cache::Strict);
    let (scene, mnt, session) =
        mounted_far("head-race", &options, Dialect::L, RamFs::new(), hold).await;
    made_elsewhere(&scene, "f", &[b'a'; 5000]).await;
    let path = mnt.join("f");
    let at = path.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut writer = std::fs::OpenOptions::new().write(true).open(at).unwrap();
        writer.write_all(b"b").unwrap();
        writer.sync_all().unwrap();
        writer
    })
    .await
    .unwrap();
    let opens = |sent: &HashMap<&str, usize>| sent.get("Tlopen").copied().unwrap_or(0);
    let before = opens(&scene.sent());
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let reader = tokio::task::spawn_blocking(move || {
        let mut reader = std::fs::File::open(path).unwrap();
        wait.recv().unwrap();
        let mut got = vec![0; 3];
        reader.read_exact(&mut got).unwrap();
        got
    });
    let waited = std::time::Instant::now();
    while opens(&scene.sent()) == before {
        assert!(waited.elapsed() < Duration::from_secs(5), "no open sent");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let writer = tokio::task::spawn_blocking(move || {
        writer.write_all_at(b"NEW", 0).unwrap();
        writer.sync_all().unwrap();
        writer
    })
    .await
    .unwrap();
    go.send(()).unwrap();
    assert_eq!(reader.await.unwrap(), b"NEW");
    drop(writer);
    drop(session);
}

/// A strict mount where the server checks permissions, so that an open
/// through /proc/self/fd sends the kernel's open alone (no lookup before
/// it, which would wait for every write behind), and the path of a file of
/// 5000 bytes another client made there.
async fn mounted_for_reopening(name: &str) -> (Scene, PathBuf, support::Mounted) {
    let options = ninep_fuse::Options {
        permissions: ninep_fuse::Permissions::Server,
        ..support::options(Cache::Strict)
    };
    let (scene, mnt, session) =
        mounted_far(name, &options, Dialect::L, RamFs::new(), Duration::ZERO).await;
    made_elsewhere(&scene, "f", &[b'a'; 5000]).await;
    (scene, mnt.join("f"), session)
}

/// `path` opened for writing, written and synced once, then written with
/// `data` at its start: a write that waits behind the writer returned.
fn written_behind(path: &Path, data: &[u8]) -> std::fs::File {
    let writer = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    writer.write_all_at(b"b", 0).unwrap();
    writer.sync_all().unwrap();
    std::fs::metadata(path).unwrap();
    writer.write_all_at(data, 0).unwrap();
    writer
}

/// A file opened again without a lookup (through /proc/self/fd) while a
/// write to it waits behind its writer is read with that write: the open
/// waits for it before the head is read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_behind_is_in_the_head_of_a_file_opened_again() {
    let (_scene, path, session) = mounted_for_reopening("head-behind").await;
    let got = tokio::task::spawn_blocking(move || {
        let writer = written_behind(&path, b"NEW");
        let again = format!("/proc/self/fd/{}", writer.as_raw_fd());
        let mut reader = std::fs::File::open(again).unwrap();
        let mut got = vec![0; 3];
        reader.read_exact(&mut got).unwrap();
        got
    })
    .await
    .unwrap();
    assert_eq!(got, b"NEW");
    drop(session);
}

/// An open of a file made without a lookup (through /proc/self/fd) that
/// truncates it comes after the writes waiting behind its writer: the
/// file ends empty, not with what those writes carried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncating_open_comes_after_the_writes_behind() {
    let (_scene, path, session) = mounted_for_reopening("trunc-behind").await;
    let len = tokio::task::spawn_blocking(move || {
        let writer = written_behind(&path, b"OLD");
        let again = format!("/proc/self/fd/{}", writer.as_raw_fd());
        drop(
            std::fs::OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(again)
                .unwrap(),
        );
        drop(writer);
        std::fs::read(&path).unwrap().len()
    })
    .await
    .unwrap();
    assert_eq!(len, 0, "the truncation came before a write made earlier");
    drop(session);
}

/// Writes the kernel sends from a shared mapping as it is unmapped, after
/// the file's last close, reach the server before a read that follows
/// the unmap, though the kernel lets the file go (its release) without
/// waiting: the mount settles them while the file is still open to it.
/// Read with O_DIRECT through a file opened before, so that the server,
/// not the page cache, answers, and at once; each reply held on its way,
/// so that the writes take a while.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_from_a_mapping_reach_the_server_before_a_later_read() {
    let options = support::options(Cache::Strict);
    let hold = Duration::from_millis(100);
    let (_scene, mnt, session) =
        mounted_far("mapped", &options, Dialect::L, RamFs::new(), hold).await;
    let path = mnt.join("mapped");
    // Mapped through libc: Python's own mmap keeps a descriptor of the
    // file, whose close would flush the writes before the release.
    let script = r#"
import ctypes, mmap, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
path, size = sys.argv[1], 64 << 20
with open(path, "wb") as f:
    f.truncate(size)
# Open before: a read then asks the mount nothing else first.
reader = os.open(path, os.O_RDONLY | os.O_DIRECT)
page = mmap.mmap(-1, 4096)
for round in range(3):
    fd = os.open(path, os.O_RDWR)
    at = libc.mmap(None, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED, fd, 0)
    if at in (None, ctypes.c_void_p(-1).value):
        sys.exit("mmap failed")
    os.close(fd)
    fill = ord("1") + round
    ctypes.memset(at, fill, size)
    if libc.munmap(at, size) != 0:
        sys.exit("munmap failed")
    # The last page: the last written, the likeliest still on its way.
    got = os.preadv(reader, [page], size - 4096)
    if got != 4096 or page[:] != bytes([fill]) * 4096:
        sys.exit("round %d: the server had older bytes" % round)
"#;
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(session);
}

/// Where the server alone checks permissions, the kernel asks no
/// directory's attributes to check them: under `none`, where it may trust
/// none, a stat of a file three directories down asks the server for
/// attributes once for each name looked up and once for the stat. access(2)
/// and exec still find a file without execute bits not executable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_server_checks_permissions_the_kernel_asks_no_attributes_for_them() {
    let options = ninep_fuse::Options {
        permissions: ninep_fuse::Permissions::Server,
        ..support::options(Cache::None)
    };
    let (scene, mnt, session) = mounted_far(
        "server-perms",
        &options,
        Dialect::L,
        RamFs::new(),
        Duration::ZERO,
    )
    .await;
    let other = other_client(&scene).await;
    other.mkdir("a", 0o755).await.unwrap();
    other.mkdir("a/b", 0o755).await.unwrap();
    other.mkdir("a/b/c", 0o755).await.unwrap();
    for (name, perm) in [("plain", 0o644), ("tool", 0o755)] {
        let file = other
            .create(
                &format!("a/b/c/{name}"),
                perm,
                ninep_wire::consts::dotl::O_WRONLY,
            )
            .await
            .unwrap();
        file.write_all_at(0, "#!/bin/sh\nexit 0\n".into())
            .await
            .unwrap();
        file.close().await.unwrap();
    }
    let before = scene.sent();
    let dir = mnt.join("a/b/c");
    let at = dir.clone();
    let size =
        tokio::task::spawn_blocking(move || std::fs::metadata(at.join("plain")).unwrap().len())
            .await
            .unwrap();
    assert_eq!(size, 17);
    let asked = more(&before, &scene.sent(), "Tgetattr");
    assert!(asked <= 5, "{asked} Tgetattr for a stat of a/b/c/plain");
    tokio::task::spawn_blocking(move || {
        use rustix::fs::{Access, AtFlags, CWD, accessat};
        let x = |name: &str| accessat(CWD, dir.join(name), Access::EXEC_OK, AtFlags::empty());
        assert_eq!(x("plain"), Err(rustix::io::Errno::ACCESS));
        assert_eq!(x("tool"), Ok(()));
        assert_eq!(x("."), Ok(()));
        let ran = std::process::Command::new(dir.join("plain")).status();
        assert_eq!(
            ran.unwrap_err().kind(),
            std::io::ErrorKind::PermissionDenied
        );
        assert!(
            std::process::Command::new(dir.join("tool"))
                .status()
                .unwrap()
                .success()
        );
    })
    .await
    .unwrap();
    drop(session);
}

/// Under loose caching a file written through the mount and closed keeps
/// its pages: read again it is read from them, with no Tread. Its times,
/// set by the kernel after writeback, are the server's by its next open. A
/// change another client makes after is read at the next open that asks
/// the server: here every open, no file being kept open after its close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_pages_written_back_are_kept_until_the_file_changes() {
    // Files closed are let go at once, so that each open asks the server.
    let options = ninep_fuse::Options {
        keep_open: 0,
        ..support::options(Cache::Loose)
    };
    let (scene, mnt, session) = mounted_far(
        "loose-pages",
        &options,
        Dialect::L,
        RamFs::new(),
        Duration::ZERO,
    )
    .await;
    let other = other_client(&scene).await;
    let path = mnt.join("kept");
    let at = path.clone();
    tokio::task::spawn_blocking(move || std::fs::write(at, "first").unwrap())
        .await
        .unwrap();
    let before = scene.sent();
    let at = path.clone();
    let (read, mtime) = tokio::task::spawn_blocking(move || {
        let read = std::fs::read_to_string(&at).unwrap();
        (read, std::fs::metadata(at).unwrap().mtime_nsec())
    })
    .await
    .unwrap();
    assert_eq!(read, "first");
    assert_eq!(
        more(&before, &scene.sent(), "Tread"),
        0,
        "read from the pages kept"
    );
    let info = other.stat("kept").await.unwrap();
    assert_eq!(
        i64::from(info.mtime_nsec),
        mtime,
        "the kernel's mtime is the server's"
    );
    other.write("kept", "other").await.unwrap();
    let read = tokio::task::spawn_blocking(move || std::fs::read_to_string(path).unwrap())
        .await
        .unwrap();
    assert_eq!(read, "other");
    drop(session);
}

/// Under loose caching the times the kernel keeps of a file written back
/// are set on the server behind the close: writing the next file does not
/// wait for them (a round trip fewer in two), and they are there before
/// the mount asks anything else of the file. Times a caller sets after the
/// close come after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_times_written_back_do_not_hold_up_the_close() {
    let hold = Duration::from_millis(50);
    let (scene, mnt, session) = mounted_far(
        "times-behind",
        &support::options(Cache::Loose),
        Dialect::L,
        RamFs::new(),
        hold,
    )
    .await;
    let root = mnt.clone();
    tokio::task::spawn_blocking(move || std::fs::metadata(root).unwrap())
        .await
        .unwrap();
    let mark = scene.requests();
    let dir = mnt.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(dir.join("one"), "1").unwrap();
        std::fs::write(dir.join("two"), "2").unwrap();
    })
    .await
    .unwrap();
    // Until the last reply, the second's times.
    tokio::time::sleep(hold * 4).await;
    // Each: the lookup that finds nothing, the create, the write at close,
    // the times; the first's times go with the second's lookup. The files
    // stay open, to be opened again.
    let rounds = scene.rounds_since(mark);
    assert_eq!(rounds, 7, "round trips to write two files");
    let sent = scene.sent();
    assert_eq!(sent.get("Tsetattr"), Some(&2), "{sent:?}");

    let other = other_client(&scene).await;
    let dir = mnt.clone();
    let shown = tokio::task::spawn_blocking(move || {
        // A stat the kernel may answer alone, then one it may not: the
        // file opened.
        let kernel = std::fs::metadata(dir.join("two")).unwrap().mtime_nsec();
        drop(std::fs::File::open(dir.join("two")).unwrap());
        kernel
    })
    .await
    .unwrap();
    let info = other.stat("two").await.unwrap();
    assert_eq!(
        i64::from(info.mtime_nsec),
        shown,
        "the kernel's times are the server's"
    );

    // A caller's own times, set by name just after the close, wait for
    // the kernel's: a round trip of their own.
    let mark = scene.requests();
    let dir = mnt.clone();
    tokio::task::spawn_blocking(move || {
        use rustix::fs::{AtFlags, CWD, Timespec, Timestamps, utimensat};
        std::fs::write(dir.join("three"), "3").unwrap();
        let given = Timespec {
            tv_sec: 1_234_567_890,
            tv_nsec: 5,
        };
        let times = Timestamps {
            last_access: given,
            last_modification: given,
        };
        utimensat(CWD, dir.join("three"), &times, AtFlags::empty()).unwrap();
    })
    .await
    .unwrap();
    tokio::time::sleep(hold * 4).await;
    // The lookup, the create, the write, the kernel's times (and the clunk
    // once they are set); then a walk to the file by name and the caller's
    // times, which would otherwise have gone beside the kernel's.
    assert_eq!(
        scene.rounds_since(mark),
        6,
        "round trips to write and set times"
    );
    let info = other.stat("three").await.unwrap();
    assert_eq!(
        (info.mtime, info.mtime_nsec),
        (1_234_567_890, 5),
        "the caller's times are the last"
    );
    drop(session);
}

/// Under loose caching a directory made through the mount is known to
/// be empty: a name made in it is not looked for on the server first, and
/// names renamed into it or removed from it are followed. Whatever shows
/// that another client changes it ends that: a name made there that a
/// create (or mkdir) meets, which is then opened (or refused) as though it
/// had been known, and a listing with a name not made here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_names_made_in_a_new_directory_are_not_looked_for_first() {
    let (scene, mnt, session) = mounted("made-empty", Cache::Loose, Dialect::L).await;
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || std::fs::create_dir(at.join("new")).unwrap())
        .await
        .unwrap();
    let before = scene.sent();
    let dir = mnt.join("new");
    let at = dir.clone();
    tokio::task::spawn_blocking(move || {
        for i in 0..10 {
            std::fs::write(at.join(format!("f{i}")), "x").unwrap();
        }
    })
    .await
    .unwrap();
    // One walk for each create, the one beside it; none to look first.
    assert_eq!(more(&before, &scene.sent(), "Twalk"), 10);
    let at = dir.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::rename(at.join("f0"), at.join("g0")).unwrap();
        std::fs::remove_file(at.join("f1")).unwrap();
        // The kernel forgets the names it holds (not the directory, held
        // open), so that it asks the mount for them again.
        let held = std::fs::File::open(&at).unwrap();
        for _ in 0..2 {
            std::fs::write("/proc/sys/vm/drop_caches", "2").unwrap();
        }
        assert!(std::fs::metadata(at.join("g0")).unwrap().is_file());
        for gone in ["f0", "f1", "none"] {
            let found = std::fs::metadata(at.join(gone));
            assert_eq!(
                found.unwrap_err().kind(),
                std::io::ErrorKind::NotFound,
                "{gone}"
            );
        }
        drop(held);
        // Made after that, to be known when others change them.
        for dir in ["new2", "new3"] {
            std::fs::create_dir(at.join("..").join(dir)).unwrap();
        }
    })
    .await
    .unwrap();

    let other = other_client(&scene).await;
    let file = other
        .create("new/theirs", 0o644, ninep_wire::consts::dotl::O_WRONLY)
        .await
        .unwrap();
    file.write_all_at(0, bytes::Bytes::from_static(b"made elsewhere"))
        .await
        .unwrap();
    file.close().await.unwrap();
    other
        .create("new2/later", 0o644, 0)
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    other.mkdir("new3/sub", 0o755).await.unwrap();
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(at.join("new/theirs"), "MADE").unwrap();
        assert_eq!(std::fs::read(at.join("new/theirs")).unwrap(), b"MADE");
        let fresh = std::fs::File::create_new(at.join("new/theirs"));
        assert_eq!(fresh.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        let listed: Vec<_> = std::fs::read_dir(at.join("new2"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(listed, ["later"]);
        assert!(std::fs::metadata(at.join("new2/later")).unwrap().is_file());
        let made = std::fs::create_dir(at.join("new3/sub"));
        assert_eq!(made.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
        assert!(std::fs::metadata(at.join("new3/sub")).unwrap().is_dir());
    })
    .await
    .unwrap();
    drop(session);
}

/// Under loose caching, removing a name of a file with other links, not
/// the last name the file was found by, shows at once in the link count of
/// the names left (pjdfstest's link::remove_link on a fifo).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_link_counts_follow_a_link_removed() {
    let (_scene, mnt, session) = mounted("loose-links", Cache::Loose, Dialect::L).await;
    tokio::task::spawn_blocking(move || {
        use rustix::fs::{CWD, FileType, Mode, mknodat};
        let fifo = mnt.join("fifo");
        mknodat(CWD, &fifo, FileType::Fifo, Mode::from(0o644), 0).unwrap();
        std::fs::hard_link(&fifo, mnt.join("second")).unwrap();
        std::fs::hard_link(&fifo, mnt.join("third")).unwrap();
        assert_eq!(std::fs::metadata(&fifo).unwrap().nlink(), 3);
        std::fs::remove_file(mnt.join("second")).unwrap();
        assert_eq!(std::fs::metadata(&fifo).unwrap().nlink(), 2);
        assert_eq!(std::fs::metadata(mnt.join("third")).unwrap().nlink(), 2);
    })
    .await
    .unwrap();
    drop(session);
}

/// Under loose caching a file closed here stays open at the server for as
/// long as entries are trusted: opening it again meanwhile, to read or to
/// write, asks the server nothing, and its pages are kept. An open that
/// truncates, one for more access than the file kept has, or one after a
/// change of who may open it, opens at the server as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_files_opened_again_soon_are_not_opened_at_the_server_again() {
    let (scene, mnt, session) = mounted("keep-open", Cache::Loose, Dialect::L).await;
    made_elsewhere(&scene, "theirs", b"made elsewhere").await;
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(at.join("mine"), "first").unwrap();
        assert_eq!(std::fs::read(at.join("theirs")).unwrap(), b"made elsewhere");
    })
    .await
    .unwrap();
    let before = scene.sent();
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        let (mine, theirs) = (at.join("mine"), at.join("theirs"));
        for _ in 0..3 {
            assert_eq!(std::fs::read(&mine).unwrap(), b"first");
        }
        let mut appending = std::fs::OpenOptions::new()
            .append(true)
            .open(&mine)
            .unwrap();
        appending.write_all(b" more").unwrap();
        drop(appending);
        assert_eq!(std::fs::read(&mine).unwrap(), b"first more");
        assert_eq!(std::fs::read(&theirs).unwrap(), b"made elsewhere");
    })
    .await
    .unwrap();
    let after = scene.sent();
    assert_eq!(more(&before, &after, "Tlopen"), 0, "opened again");
    assert_eq!(more(&before, &after, "Tread"), 0, "pages kept");
    assert_eq!(more(&before, &after, "Twrite"), 1, "the append");
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        // Kept open for reading only: writing opens anew.
        let mut appending = std::fs::OpenOptions::new()
            .append(true)
            .open(at.join("theirs"))
            .unwrap();
        appending.write_all(b"!").unwrap();
        drop(appending);
        std::fs::write(at.join("mine"), "new").unwrap();
        assert_eq!(std::fs::read(at.join("mine")).unwrap(), b"new");
    })
    .await
    .unwrap();
    assert_eq!(more(&after, &scene.sent(), "Tlopen"), 2);
    // Who may open it changed: the server is asked again.
    let before = scene.sent();
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        let mine = at.join("mine");
        std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(std::fs::read(&mine).unwrap(), b"new");
    })
    .await
    .unwrap();
    assert_eq!(more(&before, &scene.sent(), "Tlopen"), 1);
    let other = other_client(&scene).await;
    assert_eq!(other.read("mine").await.unwrap(), b"new");
    assert_eq!(other.read("theirs").await.unwrap(), b"made elsewhere!");
    drop(session);
}

/// A file for exclusive use (DMEXCL), which the server lets one fid open
/// at a time, is never kept open after its close: others may open it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_files_for_exclusive_use_are_not_kept_open() {
    let (scene, mnt, session) = mounted("keep-excl", Cache::Loose, Dialect::Base).await;
    let addr = format!("unix!{}", scene.base.join("sock").display());
    let options = ninep_client::Options {
        dialect: Some(Dialect::Base),
        ..Default::default()
    };
    let client = Client::connect_with(&addr, options).await.unwrap();
    let other = client.attach_as("root", 0, "").await.unwrap();
    let perm = ninep_wire::consts::mode::DMEXCL | 0o644;
    let file = other
        .create("lock", perm, ninep_wire::consts::dotl::O_WRONLY)
        .await
        .unwrap();
    file.write_all_at(0, bytes::Bytes::from_static(b"held"))
        .await
        .unwrap();
    file.close().await.unwrap();
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || {
        assert_eq!(std::fs::read(at.join("lock")).unwrap(), b"held");
    })
    .await
    .unwrap();
    // The kernel sends the release after close(2) has returned: the fid
    // is clunked a moment later, not 20 s later as a file kept open would be.
    let mut opened = other.open("lock", ninep_wire::consts::dotl::O_RDONLY).await;
    for _ in 0..40 {
        if opened.is_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        opened = other.open("lock", ninep_wire::consts::dotl::O_RDONLY).await;
    }
    assert!(
        opened.is_ok(),
        "still open 2 s after its close: {:?}",
        opened.err()
    );
    drop(session);
}

/// Under loose caching the attributes given are trusted as long as the
/// kernel may trust them, even where the kernel asks again after a change
/// made through the mount (a create in the directory, a write): what it
/// is told moves with those changes, without asking the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loose_attributes_are_answered_by_the_mount() {
    let (scene, mnt, session) = mounted("loose-attrs", Cache::Loose, Dialect::L).await;
    let at = mnt.clone();
    tokio::task::spawn_blocking(move || std::fs::create_dir(at.join("d")).unwrap())
        .await
        .unwrap();
    let before = scene.sent();
    let at = mnt.clone();
    let nlink = tokio::task::spawn_blocking(move || {
        let dir = at.join("d");
        let mtime = std::fs::metadata(&dir).unwrap().modified().unwrap();
        for i in 0..20 {
            std::fs::write(dir.join(format!("f{i}")), b"some bytes").unwrap();
            let meta = std::fs::metadata(&dir).unwrap();
            assert!(
                meta.modified().unwrap() >= mtime,
                "the directory's mtime moves on"
            );
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        std::fs::metadata(&dir).unwrap().nlink()
    })
    .await
    .unwrap();
    // A subdirectory made changes the link count as the server counts it.
    let links = other_client(&scene).await.stat("d").await.unwrap().nlink;
    assert_eq!(nlink, links);
    // Three Tgetattr per file made (beside the walk of its lookup, which
    // finds nothing; its attributes after the create; behind the times
    // set after its writeback), none for the directory asked about after
    // each; a few for the subdirectory (beside its lookup, its own, and
    // its parent's changed link count). Without the mount answering, the
    // directory is asked about after each file.
    let getattrs = more(&before, &scene.sent(), "Tgetattr");
    assert!(getattrs <= 3 * 20 + 4, "{getattrs} Tgetattr");
    drop(session);
}

/// Runs the shell command `script` as nobody (uid and gid 65534).
fn as_nobody(script: &str) -> std::process::ExitStatus {
    std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "sh",
            "-c",
        ])
        .arg(script)
        .status()
        .unwrap()
}

/// A write by a user who may not keep a file's set-id bits drops them, and
/// the mount shows them dropped at once under every policy: a file just
/// written is never run set-id (whether the kernel or the server drops
/// them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_by_another_user_drops_set_id_bits() {
    for (name, cache) in [
        ("setid-none", Cache::None),
        ("setid-strict", Cache::Strict),
        ("setid-loose", Cache::Loose),
    ] {
        let base = std::env::temp_dir().join(format!("ninep-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (dir, mnt) = (base.join("dir"), base.join("mnt"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::create_dir_all(&mnt).unwrap();
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let export = ninep_export::Export::new(
            &dir,
            ninep_export::Options {
                identity: ninep_export::Identity::Multiuser,
                ..Default::default()
            },
        )
        .unwrap();
        let addr = Addr::Unix(base.join("sock"));
        support::serve(export, &addr).await;
        let fsys = ninep_testkit::attach_root(&addr.to_string()).await;
        let options = ninep_fuse::Options {
            source: "ninep-test".into(),
            cache,
            access: ninep_fuse::Access::User {
                aname: String::new(),
                uid: 0,
            },
            ..Default::default()
        };
        let session = ninep_fuse::mount(fsys, &mnt, &options).unwrap();
        // Set-id and owned by nobody, who writes it through the mount.
        let on_disk = dir.join("tool");
        std::fs::write(&on_disk, "#!/bin/sh\n").unwrap();
        std::os::unix::fs::chown(&on_disk, Some(65534), None).unwrap();
        std::fs::set_permissions(&on_disk, std::fs::Permissions::from_mode(0o4755)).unwrap();
        let through = mnt.join("tool");
        assert_eq!(std::fs::metadata(&through).unwrap().mode() & 0o7777, 0o4755);
        let appended = as_nobody(&format!("echo more >> '{}'", through.display()));
        assert!(appended.success(), "{name}: nobody appends");
        let shown = std::fs::metadata(&through).unwrap().mode() & 0o7777;
        assert_eq!(shown, 0o755, "{name}: the mount shows {shown:o}");
        // And an overwrite, which truncates as it opens.
        std::fs::set_permissions(&through, std::fs::Permissions::from_mode(0o4755)).unwrap();
        assert_eq!(std::fs::metadata(&through).unwrap().mode() & 0o7777, 0o4755);
        let overwritten = as_nobody(&format!("echo new > '{}'", through.display()));
        assert!(overwritten.success(), "{name}: nobody overwrites");
        let shown = std::fs::metadata(&through).unwrap().mode() & 0o7777;
        assert_eq!(
            shown, 0o755,
            "{name}: after an overwrite the mount shows {shown:o}"
        );
        drop(session);
        let _ = std::fs::remove_dir_all(&base);
    }
}
