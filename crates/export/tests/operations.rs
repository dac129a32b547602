//! Every operation of the export, checked against what the host sees.

use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::PathBuf;

use bytes::Bytes;
use ninep_client::{Client, Fsys, Options};
use ninep_export::{Export, Options as ExportOptions};
use ninep_server::Server;
use ninep_transport::Addr;
use ninep_wire::consts::{dotl, mode, unix};
use ninep_wire::*;

struct Dir(PathBuf);

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn serve(name: &str) -> (Dir, String) {
    serve_with(name, ExportOptions::default()).await
}

/// An export of a fresh directory (`export` in the returned one) with
/// `options`, served on a unix socket; its address.
async fn serve_with(name: &str, options: ExportOptions) -> (Dir, String) {
    serve_under(&std::env::temp_dir(), name, options).await
}

/// The same, the directory made under `parent`.
async fn serve_under(
    parent: &std::path::Path,
    name: &str,
    options: ExportOptions,
) -> (Dir, String) {
    let base = parent.join(format!("ninep-ops-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("export")).unwrap();
    let export = Export::new(base.join("export"), options).unwrap();
    let addr = Addr::Unix(base.join("sock"));
    let listener = addr.listen().await.unwrap();
    let server = Server::new(export);
    tokio::spawn(async move {
        server
            .serve_listener(listener, std::future::pending())
            .await
    });
    (Dir(base), addr.to_string())
}

/// An export that serves special files, with a fifo `fifo` in it.
async fn serve_fifo(name: &str) -> (Dir, String) {
    let options = ExportOptions {
        allow_special: true,
        ..ExportOptions::default()
    };
    let (dir, addr) = serve_with(name, options).await;
    let made = std::process::Command::new("mkfifo")
        .arg(dir.0.join("export/fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    (dir, addr)
}

async fn attach(addr: &str, dialect: Dialect) -> Fsys {
    let options = Options {
        dialect: Some(dialect),
        ..Options::default()
    };
    Client::connect_with(addr, options)
        .await
        .unwrap()
        .attach_as("root", 0, "")
        .await
        .unwrap()
}

#[tokio::test]
async fn dotl_operations_reach_the_host() {
    let (dir, addr) = serve("dotl").await;
    let host = dir.0.join("export");
    let fsys = attach(&addr, Dialect::L).await;
    let client = fsys.client().clone();
    let root = fsys.root().number();

    // create, write, read; the host sees the bytes.
    let file = fsys.create("a", 0o640, dotl::O_RDWR).await.unwrap();
    file.write_all_at(0, Bytes::from(vec![7u8; 200_000]))
        .await
        .unwrap();
    file.fsync(false).await.unwrap();
    assert_eq!(std::fs::read(host.join("a")).unwrap(), vec![7u8; 200_000]);
    assert_eq!(
        std::fs::metadata(host.join("a"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    drop(file);

    // setattr: chmod, truncate, times.
    let a = fsys.walk("a").await.unwrap();
    let set = Tsetattr {
        fid: a.number(),
        valid: dotl::SETATTR_MODE
            | dotl::SETATTR_SIZE
            | dotl::SETATTR_MTIME
            | dotl::SETATTR_MTIME_SET,
        mode: 0o600,
        uid: 0,
        gid: 0,
        size: 10,
        atime_sec: 0,
        atime_nsec: 0,
        mtime_sec: 1_000_000_000,
        mtime_nsec: 5,
    };
    client.rpc(set).await.unwrap();
    let meta = std::fs::metadata(host.join("a")).unwrap();
    assert_eq!(
        (
            meta.mode() & 0o777,
            meta.len(),
            meta.mtime(),
            meta.mtime_nsec()
        ),
        (0o600, 10, 1_000_000_000, 5)
    );
    let info = a.stat().await.unwrap();
    assert_eq!((info.size, info.mode), (10, unix::S_IFREG | 0o600));

    // mkdir, symlink, readlink, link, mknod (fifo).
    fsys.mkdir("d", 0o750).await.unwrap();
    assert!(host.join("d").is_dir());
    let sym = Tsymlink {
        fid: root,
        name: Name::new("s").unwrap(),
        symtgt: "d/../a".into(),
        gid: 0,
    };
    let Msg::Rsymlink(r) = client.rpc(sym).await.unwrap() else {
        panic!()
    };
    assert!(r.qid.ty.contains(QidType::SYMLINK));
    assert_eq!(
        std::fs::read_link(host.join("s")).unwrap().to_str(),
        Some("d/../a")
    );
    let s = fsys.walk("s").await.unwrap();
    let Msg::Rreadlink(r) = client.rpc(Treadlink { fid: s.number() }).await.unwrap() else {
        panic!()
    };
    assert_eq!(r.target, "d/../a");
    let d = fsys.walk("d").await.unwrap();
    client
        .rpc(Tlink {
            dfid: d.number(),
            fid: a.number(),
            name: Name::new("hard").unwrap(),
        })
        .await
        .unwrap();
    assert_eq!(
        std::fs::metadata(host.join("d/hard")).unwrap().ino(),
        meta.ino()
    );
    client
        .rpc(Tmknod {
            dfid: root,
            name: Name::new("fifo").unwrap(),
            mode: unix::S_IFIFO | 0o644,
            major: 0,
            minor: 0,
            gid: 0,
        })
        .await
        .unwrap();
    assert!(
        std::fs::symlink_metadata(host.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );

    // rename, renameat, unlinkat.
    fsys.rename("a", "b").await.unwrap();
    assert!(host.join("b").exists() && !host.join("a").exists());
    client
        .rpc(Trenameat {
            olddirfid: root,
            oldname: Name::new("b").unwrap(),
            newdirfid: d.number(),
            newname: Name::new("c").unwrap(),
        })
        .await
        .unwrap();
    assert!(host.join("d/c").exists());
    client
        .rpc(Tunlinkat {
            dirfid: d.number(),
            name: Name::new("c").unwrap(),
            flags: 0,
        })
        .await
        .unwrap();
    assert!(!host.join("d/c").exists());
    let err = client
        .rpc(Tunlinkat {
            dirfid: root,
            name: Name::new("d").unwrap(),
            flags: dotl::AT_REMOVEDIR,
        })
        .await
        .unwrap_err();
    assert_eq!(err.errno(), Errno::ENOTEMPTY);

    // statfs and directory listing with . and .. handled by the client.
    let Msg::Rstatfs(st) = client.rpc(Tstatfs { fid: root }).await.unwrap() else {
        panic!()
    };
    assert!(st.bsize > 0 && st.namelen >= 255);
    let mut names: Vec<String> = fsys
        .read_dir("")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    names.sort();
    assert_eq!(names, ["d", "fifo", "s"]);

    // xattrs: set with Txattrcreate + write + clunk, read with Txattrwalk.
    std::fs::write(host.join("x"), "").unwrap();
    let x = fsys.walk("x").await.unwrap();
    let xf = x.clone_fid().await.unwrap();
    client
        .rpc(Txattrcreate {
            fid: xf.number(),
            name: "user.note".into(),
            attr_size: 5,
            flags: 0,
        })
        .await
        .unwrap();
    client
        .rpc(Twrite {
            fid: xf.number(),
            offset: 0,
            data: Bytes::from_static(b"hello"),
        })
        .await
        .unwrap();
    xf.clunk().await.unwrap();
    let newfid = Fid(9999);
    let Msg::Rxattrwalk(w) = client
        .rpc(Txattrwalk {
            fid: x.number(),
            newfid,
            name: "user.note".into(),
        })
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(w.size, 5);
    let Msg::Rread(r) = client
        .rpc(Tread {
            fid: newfid,
            offset: 0,
            count: 100,
        })
        .await
        .unwrap()
    else {
        panic!()
    };
    assert_eq!(r.data, "hello");
    client.rpc(Tclunk { fid: newfid }).await.unwrap();

    // POSIX locks between two lock owners.
    let f = fsys.open("x", dotl::O_RDWR).await.unwrap();
    let lock = |proc_id, ty| whole_file(f.fid().number(), ty, proc_id, "host");
    let Msg::Rlock(r) = client.rpc(lock(1, dotl::LOCK_TYPE_WRLCK)).await.unwrap() else {
        panic!()
    };
    assert_eq!(r.status, dotl::LOCK_SUCCESS);
    let Msg::Rlock(r) = client.rpc(lock(2, dotl::LOCK_TYPE_RDLCK)).await.unwrap() else {
        panic!()
    };
    assert_eq!(r.status, dotl::LOCK_BLOCKED);
    let get = Tgetlock {
        fid: f.fid().number(),
        ty: dotl::LOCK_TYPE_RDLCK,
        start: 0,
        length: 10,
        proc_id: 2,
        client_id: "host".into(),
    };
    let Msg::Rgetlock(g) = client.rpc(get).await.unwrap() else {
        panic!()
    };
    assert_eq!((g.ty, g.proc_id), (dotl::LOCK_TYPE_WRLCK, 1));
    client.rpc(lock(1, dotl::LOCK_TYPE_UNLCK)).await.unwrap();
    let Msg::Rlock(r) = client.rpc(lock(2, dotl::LOCK_TYPE_RDLCK)).await.unwrap() else {
        panic!()
    };
    assert_eq!(r.status, dotl::LOCK_SUCCESS);
}

#[tokio::test]
async fn plan9_and_unix_extensions() {
    let (dir, addr) = serve("dotu").await;
    let host = dir.0.join("export");
    std::fs::write(host.join("f"), "0123456789").unwrap();
    for dialect in [Dialect::Base, Dialect::U] {
        let fsys = attach(&addr, dialect).await;
        let client = fsys.client().clone();
        // wstat: truncate, chmod, rename in one message.
        let f = fsys.walk("f").await.unwrap();
        let stat = Stat {
            length: 4,
            mode: 0o604,
            name: format!("g-{dialect}"),
            ..Stat::dont_touch()
        };
        client
            .rpc(Twstat {
                fid: f.number(),
                stat,
            })
            .await
            .unwrap();
        let path = host.join(format!("g-{dialect}"));
        let meta = std::fs::metadata(&path).unwrap();
        assert_eq!((meta.len(), meta.mode() & 0o777), (4, 0o604));
        std::fs::rename(&path, host.join("f")).unwrap();
        // A directory made with Tcreate DMDIR.
        let made = fsys.mkdir(&format!("dir-{dialect}"), 0o755).await.unwrap();
        assert!(made.ty.is_dir());
        assert!(host.join(format!("dir-{dialect}")).is_dir());
    }
    // 9P2000.u special files through the extension string, and the stat
    // extension naming a link's target.
    let fsys = attach(&addr, Dialect::U).await;
    let client = fsys.client().clone();
    for (name, perm, ext) in [
        ("link", mode::DMSYMLINK | 0o777, "f"),
        ("pipe", mode::DMNAMEDPIPE | 0o644, ""),
    ] {
        let dirfid = fsys.root().clone_fid().await.unwrap();
        let create = Tcreate {
            fid: dirfid.number(),
            name: Name::new(name).unwrap(),
            perm,
            mode: 0,
            extension: ext.into(),
        };
        client.rpc(create).await.unwrap();
    }
    assert_eq!(
        std::fs::read_link(host.join("link")).unwrap().to_str(),
        Some("f")
    );
    let link = fsys.walk("link").await.unwrap();
    let Msg::Rstat(r) = client.rpc(Tstat { fid: link.number() }).await.unwrap() else {
        panic!()
    };
    assert_eq!(r.stat.extension, "f");
    assert_ne!(r.stat.mode & mode::DMSYMLINK, 0);
    let pipe = fsys.stat("pipe").await.unwrap();
    assert_eq!(pipe.mode & unix::S_IFMT, unix::S_IFIFO);
    // Directory reads list stats with the .u fields.
    let entries = fsys.read_dir("").await.unwrap();
    let link = entries.iter().find(|e| e.name == "link").unwrap();
    assert_eq!(link.info.as_ref().unwrap().extension, "f");
    // 9P2000 errors carry the string, .u the errno too.
    let err = fsys.read("nothing").await.unwrap_err();
    assert_eq!(err.errno(), Errno::ENOENT);
}

#[tokio::test]
async fn a_blocked_call_does_not_hold_up_the_connection() {
    let (dir, addr) = serve_fifo("blocking").await;
    let fifo = dir.0.join("export/fifo");
    std::fs::write(dir.0.join("export/plain"), "plain").unwrap();
    let fsys = attach(&addr, Dialect::L).await;
    // Opening a fifo with no writer blocks on the host ...
    let blocked = {
        let fid = fsys.walk("fifo").await.unwrap();
        tokio::spawn(async move { fid.open(dotl::O_RDONLY).await.map(drop) })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(!blocked.is_finished());
    // ... while the same connection goes on serving.
    for _ in 0..20 {
        assert_eq!(fsys.read("plain").await.unwrap(), b"plain");
    }
    // A writer on the host releases it.
    let writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), blocked)
        .await
        .expect("the open finished")
        .unwrap()
        .unwrap();
    drop(writer);
}

/// A write to a fifo whose reader reads nothing waits on the host while
/// the connection serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_write_does_not_hold_up_the_connection() {
    let (dir, addr) = serve_fifo("blocked-write").await;
    std::fs::write(dir.0.join("export/plain"), "plain").unwrap();
    // A reader on the host that never reads: the pipe fills, then writes wait.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(dir.0.join("export/fifo"))
        .unwrap();
    let fsys = attach(&addr, Dialect::L).await;
    let writer = fsys.open("fifo", dotl::O_WRONLY).await.unwrap();
    let blocked = tokio::spawn(async move {
        for _ in 0..64 {
            writer.write_at(0, Bytes::from(vec![1u8; 8192])).await?;
        }
        Ok::<_, ninep_client::Error>(())
    });
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    if blocked.is_finished() {
        panic!("512 KiB went into a fifo nobody reads: {:?}", blocked.await);
    }
    // The same connection goes on serving.
    for _ in 0..20 {
        let read = tokio::time::timeout(std::time::Duration::from_secs(5), fsys.read("plain"));
        assert_eq!(
            read.await.expect("served while a write waits").unwrap(),
            b"plain"
        );
    }
    // What went in is there for the reader, as written.
    let mut got = vec![0u8; 8192];
    let n = std::io::Read::read(&mut &reader, &mut got).unwrap();
    assert!(n > 0 && got[..n].iter().all(|&b| b == 1));
    drop(reader);
    blocked.abort();
}

/// A fifo is a stream, with no offsets: read and written through the
/// export where it stands.
#[tokio::test]
async fn a_fifo_is_read_and_written_as_a_stream() {
    let (_dir, addr) = serve_fifo("fifo-io").await;
    let fsys = attach(&addr, Dialect::L).await;
    // Opened both ways through 9P, the fifo carries what is written at any
    // offset to the next read.
    let both = fsys.open("fifo", dotl::O_RDWR).await.unwrap();
    assert_eq!(both.write_at(1000, "over 9P".into()).await.unwrap(), 7);
    assert_eq!(&both.read_at(5000, 64).await.unwrap()[..], b"over 9P");
}

#[tokio::test]
async fn append_only_and_exclusive_files() {
    let (dir, addr) = serve("dmappend").await;
    let host = dir.0.join("export");
    let fsys = attach(&addr, Dialect::Base).await;
    let log = fsys
        .create("log", mode::DMAPPEND | mode::DMEXCL | 0o644, dotl::O_WRONLY)
        .await
        .unwrap();
    assert!(log.qid().ty.contains(QidType::APPEND | QidType::EXCL));
    log.write_all_at(0, "one ".into()).await.unwrap();
    log.write_all_at(0, "two".into()).await.unwrap();
    // Exclusive use: nobody else may open it while it is open.
    let err = fsys.open("log", dotl::O_RDONLY).await.unwrap_err();
    assert_eq!(err.errno(), Errno::EBUSY);
    drop(log);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        std::fs::read_to_string(host.join("log")).unwrap(),
        "one two"
    );
    // Truncating open is ignored for an append-only file; writes still append.
    let again = fsys
        .open("log", dotl::O_WRONLY | dotl::O_TRUNC)
        .await
        .unwrap();
    again.write_all_at(0, "!".into()).await.unwrap();
    drop(again);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(
        std::fs::read_to_string(host.join("log")).unwrap(),
        "one two!"
    );
    let info = fsys.stat("log").await.unwrap();
    assert_eq!(
        info.plan9_mode & (mode::DMAPPEND | mode::DMEXCL),
        mode::DMAPPEND | mode::DMEXCL
    );
    let listed = fsys.read_dir("").await.unwrap();
    let entry = listed.iter().find(|e| e.name == "log").unwrap();
    assert!(entry.qid.ty.contains(QidType::APPEND));
}

/// The marks of a file are remembered by the export, but a mark set or
/// taken away on the host is seen at once: it changes the file's ctime.
#[tokio::test]
async fn marks_set_on_the_host_are_seen() {
    let (dir, addr) = serve("host-marks").await;
    let host = dir.0.join("export").join("plain");
    std::fs::write(&host, "x").unwrap();
    // Marks are remembered only once the file's last change has settled.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let fsys = attach(&addr, Dialect::L).await;
    let appends = |qid: Qid| qid.ty.contains(QidType::APPEND);
    assert!(!appends(fsys.walk("plain").await.unwrap().qid()));
    rustix::fs::setxattr(&host, "user.9p.mode", b"a", rustix::fs::XattrFlags::empty()).unwrap();
    assert!(appends(fsys.walk("plain").await.unwrap().qid()));
    assert!(appends(fsys.stat("plain").await.unwrap().qid));
    rustix::fs::removexattr(&host, "user.9p.mode").unwrap();
    assert!(!appends(fsys.walk("plain").await.unwrap().qid()));
}

/// Tlock of type `ty` over the whole of `fid`'s file, for process
/// `proc_id` of client `who`.
fn whole_file(fid: ninep_wire::Fid, ty: u8, proc_id: u32, who: &str) -> Tlock {
    Tlock {
        fid,
        ty,
        flags: 0,
        start: 0,
        length: 0,
        proc_id,
        client_id: who.into(),
    }
}

/// A write lock of the whole of `file` for process 1 of client `who`:
/// the Rlock status.
async fn lock_all(file: &ninep_client::File, who: &str) -> u8 {
    let request = whole_file(file.fid().number(), dotl::LOCK_TYPE_WRLCK, 1, who);
    file.fid().client().call(request).await.unwrap().status
}

/// A lock goes with the open fid it was taken through: at its clunk, and
/// when its client hangs up without letting go (it vanished), as a
/// process's locks go with its descriptors; until then others are refused.
#[tokio::test]
async fn locks_go_with_their_fid() {
    let (_dir, addr) = serve("lock-owner").await;
    let other = attach(&addr, Dialect::L).await;
    drop(other.create("f", 0o644, dotl::O_RDWR).await.unwrap());
    let theirs = other.open("f", dotl::O_RDWR).await.unwrap();

    let holder = attach(&addr, Dialect::L).await;
    let ours = holder.open("f", dotl::O_RDWR).await.unwrap();
    assert_eq!(lock_all(&ours, "holder").await, dotl::LOCK_SUCCESS);
    assert_eq!(lock_all(&theirs, "other").await, dotl::LOCK_BLOCKED);
    ours.close().await.unwrap();
    assert_eq!(
        lock_all(&theirs, "other").await,
        dotl::LOCK_SUCCESS,
        "clunked"
    );
    theirs.close().await.unwrap();

    let theirs = other.open("f", dotl::O_RDWR).await.unwrap();
    let ours = holder.open("f", dotl::O_RDWR).await.unwrap();
    assert_eq!(lock_all(&ours, "holder").await, dotl::LOCK_SUCCESS);
    // The holder's connection ends with the lock held.
    drop(ours);
    drop(holder);
    let began = std::time::Instant::now();
    while lock_all(&theirs, "other").await != dotl::LOCK_SUCCESS {
        assert!(
            began.elapsed() < std::time::Duration::from_secs(10),
            "the lock outlives its client's hang-up"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Reads of regular files are answered from the page cache where they
/// can be, and by a blocking call where not: either way whole.
#[tokio::test]
async fn reads_are_whole_in_and_out_of_the_page_cache() {
    let (dir, addr) = serve("cached-reads").await;
    let host = dir.0.join("export");
    let pattern = |len: usize| -> Vec<u8> { (0..len).map(|i| (i * 7 % 251) as u8).collect() };
    std::fs::write(host.join("small"), pattern(10_000)).unwrap();
    std::fs::write(host.join("large"), pattern(300_000)).unwrap();
    let fsys = attach(&addr, Dialect::L).await;

    let small = fsys.open("small", dotl::O_RDONLY).await.unwrap();
    // A read past the end, one that stops short of it, one to it.
    assert_eq!(small.read_at(0, 1 << 20).await.unwrap(), pattern(10_000));
    assert_eq!(small.read_at(100, 50).await.unwrap(), pattern(150)[100..]);
    assert_eq!(small.read_at(10_000, 4096).await.unwrap(), &b""[..]);
    assert_eq!(small.read_at(20_000, 4096).await.unwrap(), &b""[..]);

    // More than is read on the serving thread.
    let large = fsys.open("large", dotl::O_RDONLY).await.unwrap();
    let mut got = Vec::new();
    while got.len() < 300_000 {
        let piece = large.read_at(got.len() as u64, 1 << 20).await.unwrap();
        assert!(!piece.is_empty(), "ended early at {}", got.len());
        got.extend_from_slice(&piece);
    }
    assert_eq!(got, pattern(300_000));

    // Dropped from the page cache, the small file is read from the disk.
    let host_file = std::fs::File::open(host.join("small")).unwrap();
    host_file.sync_all().unwrap();
    rustix::fs::fadvise(&host_file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    assert_eq!(small.read_at(0, 1 << 20).await.unwrap(), pattern(10_000));

    // A file that grew since it was opened is read to its new end.
    std::fs::OpenOptions::new()
        .append(true)
        .open(host.join("small"))
        .and_then(|mut f| std::io::Write::write_all(&mut f, b"more"))
        .unwrap();
    assert_eq!(
        small.read_at(9_998, 4096).await.unwrap(),
        [&pattern(10_000)[9_998..], b"more"].concat()
    );
}

/// Small writes to a file on tmpfs are made on the thread serving them,
/// not on the blocking pool: each still lands where it was aimed. (Which
/// writes are made there is `ninep_transport::writes_in_memory`'s, tested
/// beside it.)
#[tokio::test]
async fn writes_to_tmpfs_land_where_they_are_aimed() {
    let shm = std::path::Path::new("/dev/shm");
    let probe = shm.join(format!("ninep-ops-probe-{}", std::process::id()));
    if std::fs::create_dir(&probe).is_err() {
        eprintln!("no writable /dev/shm: skipped");
        return;
    }
    std::fs::remove_dir(&probe).unwrap();
    let (dir, addr) = serve_under(shm, "tmpfs-writes", ExportOptions::default()).await;
    let host = dir.0.join("export/f");
    let pattern = |len: usize| -> Vec<u8> { (0..len).map(|i| (i * 7 % 251) as u8).collect() };
    std::fs::write(&host, pattern(10_000)).unwrap();
    let fsys = attach(&addr, Dialect::L).await;
    let f = fsys.open("f", dotl::O_RDWR).await.unwrap();
    let mut want = pattern(10_000);
    // Over data, across the end, past it (leaving a hole), into the hole,
    // the most made here, and one byte more.
    for (at, len, fill) in [
        (100, 50, 1u8),
        (9_990, 100, 2),
        (50_000, 10, 3),
        (20_000, 4096, 4),
        (0, 65_536, 5),
        (70_000, 65_537, 6),
    ] {
        let taken = f.write_at(at as u64, Bytes::from(vec![fill; len])).await;
        assert_eq!(taken.unwrap(), len as u32, "write at {at}");
        want.resize(want.len().max(at + len), 0);
        want[at..at + len].fill(fill);
    }
    assert_eq!(std::fs::read(&host).unwrap(), want);
    // Opened to append, a write lands at the end whatever its offset.
    let appending = fsys
        .open("f", dotl::O_WRONLY | dotl::O_APPEND)
        .await
        .unwrap();
    assert_eq!(appending.write_at(0, "tail".into()).await.unwrap(), 4);
    want.extend_from_slice(b"tail");
    assert_eq!(std::fs::read(&host).unwrap(), want);
}
