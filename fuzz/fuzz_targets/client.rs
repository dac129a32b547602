//! Drives the client library against a hostile server over an in-memory
//! pipe. The server answers each message it reads as a script says: with a
//! reply of the right type whose fields are the fuzzer's (walks of more
//! names than asked, reads of more bytes than asked, writes of more bytes
//! than sent, stream pieces past the credit granted, bad directory entries),
//! with an error, on a wrong tag, twice, with a reply to a request never
//! sent, with garbage, with a frame larger than msize, or not at all; once
//! the script runs out it hangs up.
//!
//! The client must never panic (a panic in any of its tasks aborts the
//! run), and once the server has hung up every call must end in an error:
//! each operation is bounded by a timeout on a paused clock, so a client
//! that waits for something that cannot come is found at once.

#![no_main]

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arbitrary::Arbitrary;
use bytes::{BufMut, Bytes, BytesMut};
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use ninep_client::{Client, Fsys, Mode, Options, ReadAhead, Transfer, WriteBehind};
use ninep_transport::FrameCodec;
use ninep_wire::*;
use tokio::io::{AsyncWriteExt, DuplexStream};
use tokio_util::codec::FramedRead;

/// Most (virtual) time one operation may take while the server lives.
const OP_TIME: Duration = Duration::from_secs(30);
/// Most (virtual) time anything may take once the server has hung up.
const AFTER_HANGUP: Duration = Duration::from_secs(60);

const MSIZES: &[u32] = &[8192 + IOHDRSZ, 65536 + IOHDRSZ, 256, 100, 0, u32::MAX];
const SIZES: &[u64] = &[
    0,
    1,
    2,
    11,
    100,
    4096,
    8192,
    65536,
    1 << 20,
    u32::MAX as u64,
    u64::MAX,
];
const PATHS: &[&str] = &["", "a", "a/b", "d/e/f", "..", "x/../y"];
const ERRNOS: &[u32] = &[2, 5, 13, 17, 22, 28, 95, 0, 0xffff_ffff];
const VERSIONS: &[&str] = &[
    "9P2000.L.stream",
    "9P2000.L",
    "9P2000.u.stream",
    "9P2000.u",
    "9P2000.stream",
    "9P2000",
    "unknown",
    "9P2000.X",
    "",
];

fn pick<T: Copy>(pool: &[T], i: u8) -> T {
    pool[usize::from(i) % pool.len()]
}

#[derive(Arbitrary, Debug)]
struct Case {
    /// The dialect the client insists on (or none: it tries them in turn).
    dialect: Option<u8>,
    msize: u8,
    ops: Vec<Op>,
    script: Vec<Act>,
}

/// Something the client is asked to do.
#[derive(Arbitrary, Debug)]
enum Op {
    Attach {
        uname: u8,
    },
    Read {
        path: u8,
    },
    Write {
        path: u8,
        len: u8,
    },
    ReadDir {
        path: u8,
    },
    Stat {
        path: u8,
    },
    Mkdir {
        path: u8,
    },
    Remove {
        path: u8,
    },
    Rename {
        path: u8,
        to: u8,
    },
    Walk {
        path: u8,
    },
    ReadAt {
        path: u8,
        offset: u8,
        count: u8,
    },
    WriteAt {
        path: u8,
        offset: u8,
        len: u8,
    },
    Range {
        path: u8,
        mode: u8,
        offset: u8,
        len: Option<u8>,
        window: u8,
    },
    WriteRange {
        path: u8,
        mode: u8,
        pieces: Vec<u8>,
        window: u8,
    },
    Ahead {
        path: u8,
        reads: Vec<(u8, u8)>,
    },
    Behind {
        path: u8,
        writes: Vec<(u8, u8)>,
    },
    Xattr {
        path: u8,
    },
    Statfs {
        path: u8,
    },
    Fsync {
        path: u8,
    },
    Raw {
        fid: u8,
        offset: u8,
    },
    /// An operation dropped as soon as it has sent its first request: the
    /// client flushes it.
    Abandon {
        path: u8,
    },
}

/// How the server answers the next message it reads.
#[derive(Arbitrary, Debug)]
enum Act {
    Answer(Fill),
    Error(u8),
    WrongTag(Fill, u16),
    Twice(Fill),
    /// A well-formed reply on a tag of the fuzzer's choosing, then the
    /// answer.
    Unsolicited(Fill, u16),
    Silent,
    Raw {
        ty: u8,
        body: Vec<u8>,
    },
    Oversize,
    HangUp,
}

/// The fields of a reply of the right type.
#[derive(Arbitrary, Debug)]
struct Fill {
    n: u8,
    size: u8,
    qid_ty: u8,
    version: u32,
    data: Vec<u8>,
}

impl Fill {
    fn qid(&self, i: u64) -> Qid {
        Qid {
            ty: QidType(self.qid_ty),
            version: self.version,
            path: i,
        }
    }

    fn size(&self) -> u64 {
        pick(SIZES, self.size)
    }

    /// `len` bytes of the fuzzer's data, repeated (or as it is, if asked
    /// for none).
    fn bytes(&self, len: u64) -> Bytes {
        let len = len.min(1 << 20) as usize;
        if self.data.is_empty() {
            return Bytes::from(vec![0; len]);
        }
        self.data
            .iter()
            .copied()
            .cycle()
            .take(len)
            .collect::<Vec<_>>()
            .into()
    }

    fn stat(&self) -> Stat {
        Stat {
            qid: self.qid(1),
            mode: u32::from(self.qid_ty) << 24 | 0o644,
            length: self.size(),
            name: String::from_utf8_lossy(&self.data).into_owned(),
            ..Stat::default()
        }
    }

    /// The reply of the right type to `req`, as the fuzzer fills it in.
    fn reply(&self, req: &Msg, protocol: Protocol) -> Vec<Msg> {
        let qid = self.qid(u64::from(self.n));
        let one: Msg = match req {
            Msg::Tauth(_) => Rauth { aqid: qid }.into(),
            Msg::Tattach(_) => Rattach { qid }.into(),
            Msg::Tflush(_) => Rflush {}.into(),
            Msg::Twalk(w) => Rwalk {
                wqid: (0..u64::from(self.n) % (w.wname.len() as u64 + 3))
                    .map(|i| self.qid(i))
                    .collect(),
            }
            .into(),
            Msg::Topen(_) => Ropen {
                qid,
                iounit: self.size() as u32,
            }
            .into(),
            Msg::Tcreate(_) => Rcreate {
                qid,
                iounit: self.size() as u32,
            }
            .into(),
            Msg::Tlopen(_) => Rlopen {
                qid,
                iounit: self.size() as u32,
            }
            .into(),
            Msg::Tlcreate(_) => Rlcreate {
                qid,
                iounit: self.size() as u32,
            }
            .into(),
            Msg::Tread(r) => {
                let len = match self.n % 4 {
                    0 => u64::from(r.count),
                    1 => u64::from(r.count) + 1,
                    _ => self.size(),
                };
                Rread {
                    data: self.bytes(len),
                }
                .into()
            }
            Msg::Twrite(w) => Rwrite {
                count: match self.n % 3 {
                    0 => w.data.len() as u32,
                    1 => w.data.len() as u32 + 1,
                    _ => self.size() as u32,
                },
            }
            .into(),
            Msg::Tclunk(_) => Rclunk {}.into(),
            Msg::Tremove(_) => Rremove {}.into(),
            Msg::Tstat(_) => Rstat { stat: self.stat() }.into(),
            Msg::Twstat(_) => Rwstat {}.into(),
            Msg::Tstatfs(_) => Rstatfs {
                ty: 0,
                bsize: self.size() as u32,
                blocks: self.size(),
                bfree: self.size(),
                bavail: u64::MAX,
                files: 0,
                ffree: 0,
                fsid: 0,
                namelen: u32::from(self.n),
            }
            .into(),
            Msg::Tsymlink(_) => Rsymlink { qid }.into(),
            Msg::Tmknod(_) => Rmknod { qid }.into(),
            Msg::Trename(_) => Rrename {}.into(),
            Msg::Treadlink(_) => Rreadlink {
                target: String::from_utf8_lossy(&self.data).into_owned(),
            }
            .into(),
            Msg::Tgetattr(_) => Rgetattr {
                valid: u64::MAX,
                qid,
                mode: u32::from(self.qid_ty) << 12 | 0o644,
                uid: 0,
                gid: 0,
                nlink: 1,
                rdev: 0,
                size: self.size(),
                blksize: self.size(),
                blocks: self.size(),
                atime_sec: 0,
                atime_nsec: u64::MAX,
                mtime_sec: u64::MAX,
                mtime_nsec: 0,
                ctime_sec: 0,
                ctime_nsec: 0,
                btime_sec: 0,
                btime_nsec: 0,
                generation: 0,
                data_version: 0,
            }
            .into(),
            Msg::Tsetattr(_) => Rsetattr {}.into(),
            Msg::Txattrwalk(_) => Rxattrwalk { size: self.size() }.into(),
            Msg::Txattrcreate(_) => Rxattrcreate {}.into(),
            Msg::Treaddir(r) => Rreaddir {
                data: self.bytes(if self.n % 2 == 0 {
                    self.data.len() as u64
                } else {
                    u64::from(r.count) + 1
                }),
            }
            .into(),
            Msg::Tfsync(_) => Rfsync {}.into(),
            Msg::Tlock(_) => Rlock { status: self.n }.into(),
            Msg::Tgetlock(g) => Rgetlock {
                ty: self.n,
                start: g.start,
                length: self.size(),
                proc_id: 0,
                client_id: String::new(),
            }
            .into(),
            Msg::Tlink(_) => Rlink {}.into(),
            Msg::Tmkdir(_) => Rmkdir { qid }.into(),
            Msg::Trenameat(_) => Rrenameat {}.into(),
            Msg::Tunlinkat(_) => Runlinkat {}.into(),
            // A stream: pieces of the fuzzer's sizes, whatever the credit,
            // then (for most) the end.
            Msg::Tsread(_) => {
                let mut pieces: Vec<Msg> = (0..self.n % 5)
                    .map(|i| {
                        Rsread {
                            data: self.bytes(pick(SIZES, self.size.wrapping_add(i))),
                        }
                        .into()
                    })
                    .collect();
                if self.n % 7 != 0 {
                    pieces.push(Rsread { data: Bytes::new() }.into());
                }
                return pieces;
            }
            Msg::Tswrite(_) => Rscredit {
                credit: self.size() as u32,
            }
            .into(),
            Msg::Tsdata(d) if d.data.is_empty() => Rswrite { count: self.size() }.into(),
            Msg::Tsdata(_) => Rscredit {
                credit: self.size() as u32,
            }
            .into(),
            Msg::Tscredit(_) => return Vec::new(),
            _ => return vec![error(protocol, 95)],
        };
        vec![one]
    }
}

fn error(protocol: Protocol, errno: u32) -> Msg {
    match protocol.dialect {
        Dialect::L => Rlerror { ecode: errno }.into(),
        _ => Rerror {
            ename: "no".into(),
            errno,
        }
        .into(),
    }
}

/// The hostile server: answers as `script` says, then hangs up.
async fn serve(link: DuplexStream, script: Vec<Act>, msize: u32) {
    let (reader, mut writer) = tokio::io::split(link);
    let mut frames = FramedRead::new(reader, FrameCodec::new(u32::MAX, Dialect::Base));
    let mut protocol = Protocol::from(Dialect::Base);
    let mut msize = msize;
    let mut script = script.into_iter();
    while let Some(Ok(frame)) = frames.next().await {
        let Some(act) = script.next() else { break };
        let Ok(fcall) = Fcall::decode(frame.clone(), protocol) else {
            continue;
        };
        let tag = fcall.tag;
        let mut out = BytesMut::new();
        let mut put = |tag: u16, msg: Msg| {
            // A reply our own encoder refuses (too long a string) is not sent.
            if let Ok(b) = Fcall::new(tag, msg).to_bytes(protocol) {
                out.extend_from_slice(&b);
            }
        };
        let replies = |fill: &Fill| -> Vec<Msg> {
            match &fcall.msg {
                Msg::Tversion(v) => {
                    let version = match fill.n % 4 {
                        0 => v.version.clone(),
                        _ => pick(VERSIONS, fill.size).to_owned(),
                    };
                    let msize = if fill.qid_ty % 2 == 0 {
                        v.msize.min(msize)
                    } else {
                        pick(MSIZES, fill.n)
                    };
                    vec![Rversion { msize, version }.into()]
                }
                req => fill.reply(req, protocol),
            }
        };
        match &act {
            Act::Answer(fill) => replies(fill).into_iter().for_each(|m| put(tag, m)),
            Act::Error(e) => put(tag, error(protocol, pick(ERRNOS, *e))),
            Act::WrongTag(fill, other) => replies(fill)
                .into_iter()
                .for_each(|m| put(tag ^ other.max(&1), m)),
            Act::Twice(fill) => {
                for _ in 0..2 {
                    replies(fill).into_iter().for_each(|m| put(tag, m));
                }
            }
            Act::Unsolicited(fill, other) => {
                replies(fill).into_iter().for_each(|m| put(*other, m));
                replies(fill).into_iter().for_each(|m| put(tag, m));
            }
            Act::Silent => {}
            Act::Raw { ty, body } => {
                out.put_u32_le((HEADER_LEN + body.len()) as u32);
                out.put_u8(*ty);
                out.put_u16_le(tag);
                out.put_slice(body);
            }
            Act::Oversize => {
                out.put_u32_le(msize.saturating_add(1));
                out.put_u8(Rread::TYPE);
                out.put_u16_le(tag);
            }
            Act::HangUp => break,
        }
        // The server speaks what it answered to Tversion from now on.
        if let Msg::Tversion(_) = fcall.msg
            && let Ok(Fcall {
                msg: Msg::Rversion(r),
                ..
            }) = Fcall::decode(out.clone().freeze().slice(..), protocol)
        {
            protocol = Protocol::from_version(&r.version).unwrap_or(Dialect::Base.into());
            msize = r.msize;
        }
        if writer.write_all(&out).await.is_err() {
            break;
        }
    }
    let _ = writer.shutdown().await;
}

fn path(i: u8) -> &'static str {
    pick(PATHS, i)
}

fn how(mode: u8, window: u8) -> Transfer {
    Transfer {
        mode: pick(
            &[
                Mode::Auto,
                Mode::OneAtATime,
                Mode::Pipelined,
                Mode::Streamed,
            ],
            mode,
        ),
        max_window: pick(SIZES, window).max(1),
    }
}

/// Runs one operation; its result does not matter, only that it ends.
async fn run_op(client: &Client, fsys: &mut Option<Fsys>, op: &Op) {
    if let Op::Attach { uname } = op {
        if let Ok(f) = client
            .attach(pick(&["glenda", "", "none"], *uname), "")
            .await
        {
            *fsys = Some(f);
        }
        return;
    }
    if let Op::Raw { fid, offset } = op {
        let _ = client
            .rpc(Tread {
                fid: Fid(u32::from(*fid)),
                offset: pick(SIZES, *offset),
                count: 100,
            })
            .await;
        return;
    }
    let Some(fsys) = fsys.as_ref() else { return };
    match op {
        Op::Attach { .. } | Op::Raw { .. } => {}
        Op::Read { path: p } => drop(fsys.read(path(*p)).await),
        Op::Write { path: p, len } => drop(
            fsys.write(path(*p), vec![7; pick(SIZES, *len).min(1 << 20) as usize])
                .await,
        ),
        Op::ReadDir { path: p } => drop(fsys.read_dir(path(*p)).await),
        Op::Stat { path: p } => drop(fsys.stat(path(*p)).await),
        Op::Mkdir { path: p } => drop(fsys.mkdir(path(*p), 0o755).await),
        Op::Remove { path: p } => drop(fsys.remove(path(*p)).await),
        Op::Rename { path: p, to } => drop(fsys.rename(path(*p), path(*to)).await),
        Op::Walk { path: p } => drop(fsys.walk(path(*p)).await),
        Op::ReadAt {
            path: p,
            offset,
            count,
        } => {
            if let Ok(file) = fsys.open(path(*p), 0).await {
                let _ = file
                    .read_at(pick(SIZES, *offset), pick(SIZES, *count) as u32)
                    .await;
            }
        }
        Op::WriteAt {
            path: p,
            offset,
            len,
        } => {
            if let Ok(file) = fsys.open(path(*p), 2).await {
                let data = Bytes::from(vec![1; pick(SIZES, *len).min(1 << 20) as usize]);
                let _ = file.write_all_at(pick(SIZES, *offset), data).await;
            }
        }
        Op::Range {
            path: p,
            mode,
            offset,
            len,
            window,
        } => {
            if let Ok(file) = fsys.open(path(*p), 0).await
                && let Ok(mut range) = file
                    .read_range(
                        pick(SIZES, *offset),
                        len.map(|l| pick(SIZES, l)),
                        how(*mode, *window),
                    )
                    .await
            {
                while let Ok(Some(_)) = range.next().await {}
            }
        }
        Op::WriteRange {
            path: p,
            mode,
            pieces,
            window,
        } => {
            if let Ok(file) = fsys.open(path(*p), 1).await
                && let Ok(mut range) = file.write_range(0, how(*mode, *window)).await
            {
                for &len in pieces.iter().take(8) {
                    let data = Bytes::from(vec![2; pick(SIZES, len).min(1 << 20) as usize]);
                    if range.write(data).await.is_err() {
                        return;
                    }
                }
                let _ = range.finish().await;
            }
        }
        Op::Ahead { path: p, reads } => {
            if let Ok(file) = fsys.open(path(*p), 0).await {
                let file = Arc::new(file);
                let ahead = ReadAhead::new(1 << 20);
                for &(offset, count) in reads.iter().take(8) {
                    let _ = ahead
                        .read(&file, pick(SIZES, offset), pick(SIZES, count) as u32, true)
                        .await;
                }
                ahead.stop().await;
            }
        }
        Op::Behind { path: p, writes } => {
            if let Ok(file) = fsys.open(path(*p), 1).await {
                let file = Arc::new(file);
                let behind = WriteBehind::new(1 << 20);
                for &(offset, len) in writes.iter().take(8) {
                    let data = Bytes::from(vec![3; pick(SIZES, len).min(1 << 16) as usize]);
                    let _ = behind.write(&file, pick(SIZES, offset), data).await;
                }
                let _ = behind.flush().await;
            }
        }
        Op::Xattr { path: p } => {
            if let Ok(fid) = fsys.walk(path(*p)).await {
                let _ = fid.xattr_names().await;
                let _ = fid.xattr("user.a").await;
            }
        }
        Op::Statfs { path: p } => {
            if let Ok(fid) = fsys.walk(path(*p)).await {
                let _ = fid.statfs().await;
            }
        }
        Op::Fsync { path: p } => {
            if let Ok(file) = fsys.open(path(*p), 2).await {
                let _ = file.fsync(false).await;
            }
        }
        Op::Abandon { path: p } => {
            let stat = fsys.stat(path(*p));
            // One poll sends the request; dropping it then flushes it.
            let _ = tokio::time::timeout(Duration::ZERO, stat).await;
        }
    }
}

async fn run(case: Case) {
    let (ours, theirs) = tokio::io::duplex(64 * 1024);
    let server_msize = pick(MSIZES, case.msize);
    let server = tokio::spawn(serve(theirs, case.script, server_msize));
    let options = Options {
        msize: pick(MSIZES, case.msize),
        dialect: case.dialect.map(|d| pick(&Dialect::ALL, d)),
    };
    let connect = tokio::time::timeout(OP_TIME, Client::over(Box::new(ours), options)).await;
    let client = match connect {
        Ok(Ok(client)) => client,
        Ok(Err(_)) | Err(_) => {
            server.abort();
            return;
        }
    };
    let mut fsys = None;
    for op in case.ops.iter().take(32) {
        let _ = tokio::time::timeout(OP_TIME, run_op(&client, &mut fsys, op)).await;
    }
    server.abort();
    let _ = server.await;
    // The server is gone: everything must end, with errors.
    let after = async {
        if let Some(fsys) = &fsys {
            assert!(fsys.stat("").await.is_err(), "a stat answered by no one");
        }
        assert!(
            client.rpc(Tclunk { fid: Fid(0) }).await.is_err(),
            "a clunk answered by no one"
        );
        drop(fsys);
        client.idle().await;
    };
    if tokio::time::timeout(AFTER_HANGUP, after).await.is_err() {
        panic!("the client still waits after its server hung up");
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|case: Case| {
    runtime().block_on(run(case));
});
