//! A mount of a server that lies: between the mount and a ramfs sits a
//! proxy that falsifies one reply at a time (a read longer than asked, a
//! walk past its names, absurd attributes, directory entries no file system
//! may have, a reply of the wrong type, a reply to a tag never used, the
//! stat of a file just made refused). Each lie costs at most the call it
//! answered: the mount keeps serving, gives the kernel nothing a file
//! system may not hold, and never panics.

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::{BufMut, Bytes, BytesMut};
use ninep_fuse::Cache;
use ninep_ramfs::RamFs;
use ninep_transport::Addr;
use ninep_wire::{Dialect, Errno, Fcall, Msg, Protocol, QidType, Rclunk, Rlerror};
use parking_lot::Mutex;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A falsehood the proxy tells once, in the first reply it fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lie {
    /// Rread with more bytes than the Tread asked for.
    ReadTooLong,
    /// Rwalk with one qid more than the names walked.
    WalkTooFar,
    /// Rgetattr of a regular file with every figure out of range and the
    /// mode of a socket.
    AbsurdAttributes,
    /// Rgetattr whose qid says directory for a regular file.
    QidOfADirectory,
    /// Rreaddir with ".", "..", "a/b", an empty name, a name of 300 bytes,
    /// a name with a NUL, and one good name twice.
    ImpossibleNames,
    /// Rreadlink with a target of 5,000 bytes, more than the kernel takes.
    LongLink,
    /// Rreadlink with a NUL in its target, which 9P's strings may not hold.
    Undecodable,
    /// Rclunk answering a Tgetattr.
    WrongType,
    /// An Rgetattr on a tag with no request, before the true reply.
    StrayTag,
    /// Rlerror EMFILE for the Tgetattr sent behind a Tlcreate on the fid
    /// it made, and for the one the client asks again at once: the file is
    /// made, and only its stat may be asked for again.
    StatRefusedAfterCreate,
}

impl Lie {
    /// How many replies in a row the lie falsifies.
    fn times(self) -> u32 {
        match self {
            Lie::StatRefusedAfterCreate => 2,
            _ => 1,
        }
    }
}

const LIES: [Lie; 10] = [
    Lie::ReadTooLong,
    Lie::AbsurdAttributes,
    Lie::QidOfADirectory,
    Lie::ImpossibleNames,
    Lie::LongLink,
    Lie::Undecodable,
    Lie::WrongType,
    Lie::StrayTag,
    Lie::WalkTooFar,
    Lie::StatRefusedAfterCreate,
];

/// The lie to tell next, how many more times, and whether it has been told.
#[derive(Default)]
struct Liar {
    next: Option<Lie>,
    left: u32,
    told: Option<Lie>,
}

/// What a request in flight asked, where a lie depends on it.
#[derive(Debug, Clone, Copy)]
enum Asked {
    /// A Tread of this count.
    Read(u32),
    /// A Tgetattr of the fid the last Tlcreate made into its file.
    StatOfMade,
}

/// Reads one frame (size[4] first) from `r`.
async fn frame(r: &mut (impl AsyncRead + Unpin)) -> Option<Bytes> {
    let mut size = [0; 4];
    r.read_exact(&mut size).await.ok()?;
    let len = u32::from_le_bytes(size) as usize;
    let mut buf = vec![0; len];
    buf[..4].copy_from_slice(&size);
    r.read_exact(&mut buf[4..]).await.ok()?;
    Some(Bytes::from(buf))
}

/// A directory entry of a 9P2000.L Rreaddir, with any name at all.
fn entry(buf: &mut BytesMut, path: u64, offset: u64, name: &[u8]) {
    buf.put_u8(0); // qid type: a file
    buf.put_u32_le(1);
    buf.put_u64_le(path);
    buf.put_u64_le(offset);
    buf.put_u8(8); // DT_REG
    buf.put_u16_le(name.len() as u16);
    buf.put_slice(name);
}

/// `fcalls` as frames of 9P2000.L.
fn frames(fcalls: &[Fcall]) -> Bytes {
    let mut buf = BytesMut::new();
    for fcall in fcalls {
        buf.put_slice(&fcall.to_bytes(Dialect::L).unwrap());
    }
    buf.freeze()
}

/// What the proxy sends instead of `reply` under `lie`, if the lie fits
/// it; `asked`: what the request it answers asked, where that matters.
fn falsify(lie: Lie, reply: &Fcall, asked: Option<Asked>) -> Option<Bytes> {
    let tag = reply.tag;
    let msg = match (lie, &reply.msg) {
        (Lie::ReadTooLong, Msg::Rread(r)) => {
            let Some(Asked::Read(count)) = asked else {
                return None;
            };
            let mut data = BytesMut::from(&r.data[..]);
            data.resize(count as usize + 1, b'!');
            Msg::Rread(ninep_wire::Rread {
                data: data.freeze(),
            })
        }
        (Lie::WalkTooFar, Msg::Rwalk(r)) if !r.wqid.is_empty() => {
            let mut wqid = r.wqid.clone();
            wqid.push(wqid[0]);
            Msg::Rwalk(ninep_wire::Rwalk { wqid })
        }
        (Lie::AbsurdAttributes, Msg::Rgetattr(r)) if !r.qid.ty.contains(QidType::DIR) => {
            let mut r = r.clone();
            r.mode = 0o140000 | 0o7777;
            (r.size, r.blocks, r.blksize, r.nlink) = (u64::MAX, u64::MAX, u64::MAX, 0);
            (r.atime_nsec, r.mtime_nsec, r.ctime_nsec) = (u64::MAX, u64::MAX, u64::MAX);
            r.mtime_sec = u64::MAX;
            Msg::Rgetattr(r)
        }
        (Lie::QidOfADirectory, Msg::Rgetattr(r)) if !r.qid.ty.contains(QidType::DIR) => {
            let mut r = r.clone();
            r.qid.ty = QidType::DIR;
            Msg::Rgetattr(r)
        }
        (Lie::ImpossibleNames, Msg::Rreaddir(r)) if !r.data.is_empty() => {
            let mut data = BytesMut::new();
            let long = [b'x'; 300];
            let names: [&[u8]; 8] = [b".", b"..", b"a/b", b"", &long, b"nul\0", b"ok", b"ok"];
            for (i, name) in names.iter().enumerate() {
                entry(&mut data, 1000 + i as u64, i as u64 + 1, name);
            }
            Msg::Rreaddir(ninep_wire::Rreaddir {
                data: data.freeze(),
            })
        }
        (Lie::LongLink, Msg::Rreadlink(_)) => Msg::Rreadlink(ninep_wire::Rreadlink {
            target: "/".repeat(5_000),
        }),
        (Lie::Undecodable, Msg::Rreadlink(_)) => {
            // Our encoder writes no NUL: the target's last byte becomes one.
            let mut frame = BytesMut::from(&frames(std::slice::from_ref(reply))[..]);
            let last = frame.len() - 1;
            frame[last] = 0;
            return Some(frame.freeze());
        }
        (Lie::WrongType, Msg::Rgetattr(_)) => Msg::Rclunk(Rclunk {}),
        (Lie::StrayTag, Msg::Rgetattr(r)) => {
            let stray = Fcall::new(0xfffe, Msg::Rgetattr(r.clone()));
            return Some(frames(&[stray, reply.clone()]));
        }
        (Lie::StatRefusedAfterCreate, Msg::Rgetattr(_))
            if matches!(asked, Some(Asked::StatOfMade)) =>
        {
            Msg::Rlerror(Rlerror {
                ecode: Errno::EMFILE.0,
            })
        }
        _ => return None,
    };
    Some(frames(&[Fcall::new(tag, msg)]))
}

/// Forwards connections to `front` on to `back`, telling `liar`'s lies in
/// the replies.
async fn lying_proxy(front: &Addr, back: Addr, liar: Arc<Mutex<Liar>>) {
    let listener = front.listen().await.unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let server = back.dial().await.unwrap();
            let (mut from_client, to_client) = tokio::io::split(client);
            let (from_server, mut to_server) = tokio::io::split(server);
            // What the requests in flight asked, by tag.
            let asked = Arc::new(Mutex::new(HashMap::new()));
            let asking = asked.clone();
            tokio::spawn(async move {
                // The fid the last Tlcreate made into its file.
                let mut made = None;
                while let Some(f) = frame(&mut from_client).await {
                    if let Ok(Fcall { tag, msg }) = Fcall::decode(f.clone(), Dialect::L) {
                        let what = match msg {
                            Msg::Tread(t) => Some(Asked::Read(t.count)),
                            Msg::Tlcreate(t) => {
                                made = Some(t.fid);
                                None
                            }
                            Msg::Tgetattr(t) if Some(t.fid) == made => Some(Asked::StatOfMade),
                            Msg::Tclunk(t) if Some(t.fid) == made => {
                                made = None;
                                None
                            }
                            _ => None,
                        };
                        if let Some(what) = what {
                            asking.lock().insert(tag, what);
                        }
                    }
                    if to_server.write_all(&f).await.is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(replies(from_server, to_client, asked, liar.clone()));
        }
    });
}

/// Passes the server's replies on, falsified as `liar` says.
async fn replies(
    mut from_server: impl AsyncRead + Unpin,
    mut to_client: impl AsyncWrite + Unpin,
    asked: Arc<Mutex<HashMap<u16, Asked>>>,
    liar: Arc<Mutex<Liar>>,
) {
    let protocol = Protocol::from(Dialect::L);
    while let Some(f) = frame(&mut from_server).await {
        let mut out = f.clone();
        if let Ok(reply) = Fcall::decode(f, protocol) {
            let asked = asked.lock().remove(&reply.tag);
            let mut liar = liar.lock();
            if let Some(lie) = liar.next
                && let Some(lies) = falsify(lie, &reply, asked)
            {
                out = lies;
                liar.left -= 1;
                if liar.left == 0 {
                    liar.next = None;
                }
                liar.told = Some(lie);
            }
        }
        if to_client.write_all(&out).await.is_err() {
            break;
        }
    }
}

/// Panics anywhere in the process, counted.
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// What the kernel answers for the call `lie` is aimed at.
fn probe(mnt: &Path, lie: Lie) -> std::io::Result<String> {
    match lie {
        Lie::ReadTooLong => std::fs::read_to_string(mnt.join("ok")),
        Lie::WalkTooFar => std::fs::metadata(mnt.join("ok")).map(|m| format!("{m:?}")),
        Lie::ImpossibleNames => std::fs::read_dir(mnt)?
            .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect::<std::io::Result<Vec<_>>>()
            .map(|names| names.join("|")),
        Lie::LongLink | Lie::Undecodable => {
            std::fs::read_link(mnt.join("link")).map(|t| t.display().to_string())
        }
        Lie::AbsurdAttributes | Lie::QidOfADirectory | Lie::WrongType | Lie::StrayTag => {
            std::fs::metadata(mnt.join("ok")).map(|m| format!("{m:?}"))
        }
        Lie::StatRefusedAfterCreate => {
            let path = mnt.join("made");
            let mut made = std::fs::File::create_new(&path)?;
            std::io::Write::write_all(&mut made, b"made\n")?;
            drop(made);
            std::fs::read_to_string(path)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_lie_of_a_server_costs_at_most_its_call() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        PANICS.fetch_add(1, Ordering::SeqCst);
        previous(info);
    }));
    let base = std::env::temp_dir().join(format!("ninep-fuse-{}-hostile", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(base.join("mnt")).unwrap();
    let ramfs = Addr::Unix(base.join("ramfs"));
    support::serve(RamFs::new(), &ramfs).await;
    let liar = Arc::new(Mutex::new(Liar::default()));
    let front = Addr::Unix(base.join("liar"));
    lying_proxy(&front, ramfs, liar.clone()).await;
    let mnt = base.join("mnt");
    let session = support::mount(&front, Dialect::L, &support::options(Cache::None), &mnt).await;

    let m = mnt.clone();
    tokio::task::spawn_blocking(move || {
        std::fs::write(m.join("ok"), "fine\n").unwrap();
        std::os::unix::fs::symlink("ok", m.join("link")).unwrap();
    })
    .await
    .unwrap();

    for lie in LIES {
        {
            let mut liar = liar.lock();
            (liar.next, liar.left) = (Some(lie), lie.times());
        }
        let m = mnt.clone();
        let (answer, still) = tokio::task::spawn_blocking(move || {
            let answer = probe(&m, lie);
            (answer, std::fs::read_to_string(m.join("ok")))
        })
        .await
        .unwrap();
        {
            let liar = liar.lock();
            assert_eq!(liar.told, Some(lie), "the lie was told");
            assert!(
                liar.next.is_none(),
                "{lie:?} was told fewer than {} times",
                lie.times()
            );
        }
        match (lie, &answer) {
            // Refused by the client: the call fails, with EPROTO.
            // The walk of a lookup refused; the kernel, whose revalidation
            // of a name it knew failed, may look the name up afresh.
            (Lie::WalkTooFar, Ok(_)) => {}
            (Lie::ReadTooLong | Lie::WalkTooFar | Lie::WrongType | Lie::Undecodable, r) => {
                let errno = r.as_ref().map_err(std::io::Error::raw_os_error);
                assert_eq!(errno, Err(Some(71)), "{lie:?} is refused: {r:?}");
            }
            (Lie::LongLink, r) => {
                let errno = r.as_ref().map_err(std::io::Error::raw_os_error);
                assert_eq!(errno, Err(Some(36)), "{lie:?}: ENAMETOOLONG: {r:?}");
            }
            (Lie::StrayTag, r) => assert!(r.is_ok(), "a stray reply is ignored: {r:?}"),
            // Asking for the create again would meet the file it made.
            (Lie::StatRefusedAfterCreate, r) => assert_eq!(
                r.as_deref().ok(),
                Some("made\n"),
                "the file made is opened, not made again: {r:?}"
            ),
            (Lie::ImpossibleNames, Ok(names)) => {
                eprintln!("{lie:?}: {names}");
                for name in names.split('|') {
                    assert!(
                        !name.is_empty() && !name.contains('/') && name.len() <= 255,
                        "the kernel was given {name:?}"
                    );
                }
            }
            // Absurd figures and impossible names may be refused or made
            // sane; either way only this call sees them.
            (_, r) => eprintln!("{lie:?}: {r:?}"),
        }
        assert_eq!(
            still.as_deref().ok(),
            Some("fine\n"),
            "after {lie:?}, the mount serves on: {still:?}"
        );
    }
    assert_eq!(PANICS.load(Ordering::SeqCst), 0, "nothing panicked");
    drop(session);
    let _ = std::fs::remove_dir_all(&base);
}
