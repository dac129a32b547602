//! Property tests over every message of every dialect.
//!
//! For each message type and each dialect it exists in, random messages
//! (representable in that dialect: fields the dialect lacks hold the values
//! they decode as) must survive encode/decode, every cut-off frame must fail
//! as truncated, a lying `size[4]` must fail cleanly, and the Plan 9 text form
//! must be one line. Arbitrary and mutated bytes must never make decoding
//! panic, and whatever decodes must encode back to the same bytes.
//!
//! `PROPTEST_CASES` sets the number of cases per message type and dialect
//! (default [`CASES_PER_MESSAGE`]) and per arbitrary-bytes property.

use std::collections::BTreeSet;

use bytes::{Bytes, BytesMut};
use ninep_wire::*;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::{Index, select};
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};

const DIALECTS: [Dialect; 3] = [Dialect::Base, Dialect::U, Dialect::L];

/// Every dialect, plain and with each combination of extensions.
fn protocols() -> Vec<Protocol> {
    DIALECTS
        .into_iter()
        .flat_map(|dialect| {
            [(false, false), (true, false), (false, true), (true, true)].map(|(streams, resume)| {
                Protocol {
                    dialect,
                    streams,
                    resume,
                }
            })
        })
        .collect()
}

/// Random messages tried per message type and dialect, by each property.
const CASES_PER_MESSAGE: u32 = 40;

/// Cases for the properties over arbitrary bytes.
const CASES_ARBITRARY: u32 = 256;

fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------
// Strategies for the fields.

fn u8s() -> impl Strategy<Value = u8> {
    prop_oneof![6 => any::<u8>(), 1 => Just(0), 1 => Just(u8::MAX)]
}

fn u16s() -> impl Strategy<Value = u16> {
    prop_oneof![6 => any::<u16>(), 1 => Just(0), 1 => Just(u16::MAX)]
}

fn u32s() -> impl Strategy<Value = u32> {
    prop_oneof![6 => any::<u32>(), 1 => Just(0), 1 => Just(u32::MAX)]
}

fn token() -> impl Strategy<Value = Token> {
    any::<[u8; 16]>().prop_map(Token)
}

fn u64s() -> impl Strategy<Value = u64> {
    prop_oneof![6 => any::<u64>(), 1 => Just(0), 1 => Just(u64::MAX)]
}

fn fid() -> impl Strategy<Value = Fid> {
    prop_oneof![8 => u32s().prop_map(Fid), 1 => Just(Fid::NOFID)]
}

fn qid() -> impl Strategy<Value = Qid> {
    (u8s(), u32s(), u64s()).prop_map(|(ty, version, path)| Qid {
        ty: QidType(ty),
        version,
        path,
    })
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn truncate_to(mut s: String, max: usize) -> String {
    let mut end = max.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// Valid file names: no '/', no NUL, at most 255 bytes; empty, "." and ".."
/// included, and any Unicode (control characters too).
fn name() -> impl Strategy<Value = Name> {
    prop_oneof![
        1 => Just(String::new()),
        1 => Just(".".to_owned()),
        1 => Just("..".to_owned()),
        3 => "[a-zA-Z0-9._-]{1,16}",
        4 => "[^/\\x00]{1,24}",
        2 => "[^/\\x00]{60,90}".prop_map(|s| truncate_to(s, MAX_NAME_LEN)),
        1 => "[a-z]{250,255}",
        1 => "[.é日🦀\\n\\x1b]{1,63}",
    ]
    .prop_map(|s| Name::new(s).expect("generated names are valid"))
}

/// Strings other than names: anything without NUL, sometimes long.
fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        2 => Just(String::new()),
        4 => "[ -~]{0,40}",
        4 => "[^\\x00]{0,32}",
        1 => "[^\\x00]{100,600}",
    ]
}

fn version_string() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => Just("9P2000".to_owned()),
        1 => Just("9P2000.u".to_owned()),
        1 => Just("9P2000.L".to_owned()),
        1 => Just("unknown".to_owned()),
        2 => string(),
    ]
}

/// Arbitrary payload bytes, up to 4 KiB.
fn payload() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        1 => Just(Bytes::new()),
        4 => vec(any::<u8>(), 0..64).prop_map(Bytes::from),
        2 => vec(any::<u8>(), 0..4096).prop_map(Bytes::from),
        1 => "[ -~\\n\\t]{0,200}".prop_map(Bytes::from),
    ]
}

/// A stat representable in `d`: the 9P2000.u fields hold their defaults
/// outside 9P2000.u.
fn stat(d: Dialect) -> BoxedStrategy<Stat> {
    let u = if d.is_u() {
        (string(), u32s(), u32s(), u32s()).boxed()
    } else {
        let def = Stat::default();
        Just((def.extension, def.n_uid, def.n_gid, def.n_muid)).boxed()
    };
    let any_stat = (
        (u16s(), u32s(), qid(), u32s(), u32s(), u32s(), u64s()),
        (string(), string(), string(), string()),
        u,
    )
        .prop_map(
            |(
                (ty, dev, qid, mode, atime, mtime, length),
                (name, uid, gid, muid),
                (extension, n_uid, n_gid, n_muid),
            )| Stat {
                ty,
                dev,
                qid,
                mode,
                atime,
                mtime,
                length,
                name,
                uid,
                gid,
                muid,
                extension,
                n_uid,
                n_gid,
                n_muid,
            },
        );
    prop_oneof![9 => any_stat, 1 => Just(Stat::dont_touch())].boxed()
}

/// Rread data: arbitrary bytes, or (9P2000, .u) a directory read of stats.
fn read_data(d: Dialect) -> BoxedStrategy<Bytes> {
    if d == Dialect::L {
        return payload().boxed();
    }
    let stats = vec(stat(d), 0..4).prop_map(move |stats| {
        let mut buf = BytesMut::new();
        for s in &stats {
            s.encode_entry(&mut buf, d).expect("stat fits");
        }
        buf.freeze()
    });
    prop_oneof![3 => payload(), 1 => stats].boxed()
}

fn dirent() -> impl Strategy<Value = Dirent> {
    (qid(), u64s(), u8s(), name()).prop_map(|(qid, offset, ty, name)| Dirent {
        qid,
        offset,
        ty,
        name,
    })
}

/// Rreaddir data: packed dirents, or arbitrary bytes.
fn readdir_data() -> impl Strategy<Value = Bytes> {
    let dirents = vec(dirent(), 0..8).prop_map(|ds| {
        let mut buf = BytesMut::new();
        ds.iter().for_each(|d| d.encode(&mut buf));
        buf.freeze()
    });
    prop_oneof![3 => dirents, 1 => payload()]
}

// ---------------------------------------------------------------------------
// Strategies for the messages.

/// `(TYPE, strategy)` for a message, its fields drawn from the strategies given.
macro_rules! arb {
    ($name:ident {}) => {
        ($name::TYPE, Just(Msg::from($name {})).boxed())
    };
    ($name:ident { $($field:ident : $strat:expr),+ $(,)? }) => {
        (
            $name::TYPE,
            ($($strat,)+)
                .prop_map(|($($field,)+)| Msg::from($name { $($field),+ }))
                .boxed(),
        )
    };
}

/// A strategy for every message type, generating values representable in
/// `d`. Includes types that do not exist in `d`; see [`messages_in`].
fn table(d: Dialect) -> Vec<(u8, BoxedStrategy<Msg>)> {
    let n_uname = || {
        if d.has_n_uname() {
            u32s().boxed()
        } else {
            Just(NONUNAME).boxed()
        }
    };
    let errno = if d.is_u() {
        u32s().boxed()
    } else {
        Just(0).boxed()
    };
    let extension = if d.is_u() {
        string().boxed()
    } else {
        Just(String::new()).boxed()
    };
    let rgetattr = (
        u64s(),
        qid(),
        u32s(),
        u32s(),
        u32s(),
        prop::array::uniform15(u64s()),
    )
        .prop_map(
            |(
                valid,
                qid,
                mode,
                uid,
                gid,
                [
                    nlink,
                    rdev,
                    size,
                    blksize,
                    blocks,
                    atime_sec,
                    atime_nsec,
                    mtime_sec,
                    mtime_nsec,
                    ctime_sec,
                    ctime_nsec,
                    btime_sec,
                    btime_nsec,
                    generation,
                    data_version,
                ],
            )| {
                Msg::from(Rgetattr {
                    valid,
                    qid,
                    mode,
                    uid,
                    gid,
                    nlink,
                    rdev,
                    size,
                    blksize,
                    blocks,
                    atime_sec,
                    atime_nsec,
                    mtime_sec,
                    mtime_nsec,
                    ctime_sec,
                    ctime_nsec,
                    btime_sec,
                    btime_nsec,
                    generation,
                    data_version,
                })
            },
        )
        .boxed();
    vec![
        arb!(Tversion {
            msize: u32s(),
            version: version_string()
        }),
        arb!(Rversion {
            msize: u32s(),
            version: version_string()
        }),
        arb!(Tauth {
            afid: fid(),
            uname: string(),
            aname: string(),
            n_uname: n_uname()
        }),
        arb!(Rauth { aqid: qid() }),
        arb!(Tattach {
            fid: fid(),
            afid: fid(),
            uname: string(),
            aname: string(),
            n_uname: n_uname(),
        }),
        arb!(Rattach { qid: qid() }),
        arb!(Rerror {
            ename: string(),
            errno: errno
        }),
        arb!(Tflush { oldtag: u16s() }),
        arb!(Rflush {}),
        arb!(Twalk {
            fid: fid(),
            newfid: fid(),
            wname: vec(name(), 0..=MAXWELEM)
        }),
        arb!(Rwalk {
            wqid: vec(qid(), 0..=MAXWELEM)
        }),
        arb!(Topen {
            fid: fid(),
            mode: u8s()
        }),
        arb!(Ropen {
            qid: qid(),
            iounit: u32s()
        }),
        arb!(Tcreate {
            fid: fid(),
            name: name(),
            perm: u32s(),
            mode: u8s(),
            extension: extension,
        }),
        arb!(Rcreate {
            qid: qid(),
            iounit: u32s()
        }),
        arb!(Tread {
            fid: fid(),
            offset: u64s(),
            count: u32s()
        }),
        arb!(Rread { data: read_data(d) }),
        arb!(Twrite {
            fid: fid(),
            offset: u64s(),
            data: payload()
        }),
        arb!(Rwrite { count: u32s() }),
        arb!(Tclunk { fid: fid() }),
        arb!(Rclunk {}),
        arb!(Tremove { fid: fid() }),
        arb!(Rremove {}),
        arb!(Tstat { fid: fid() }),
        arb!(Rstat { stat: stat(d) }),
        arb!(Twstat {
            fid: fid(),
            stat: stat(d)
        }),
        arb!(Rwstat {}),
        arb!(Rlerror { ecode: u32s() }),
        arb!(Tstatfs { fid: fid() }),
        arb!(Rstatfs {
            ty: u32s(),
            bsize: u32s(),
            blocks: u64s(),
            bfree: u64s(),
            bavail: u64s(),
            files: u64s(),
            ffree: u64s(),
            fsid: u64s(),
            namelen: u32s(),
        }),
        arb!(Tlopen {
            fid: fid(),
            flags: u32s()
        }),
        arb!(Rlopen {
            qid: qid(),
            iounit: u32s()
        }),
        arb!(Tlcreate {
            fid: fid(),
            name: name(),
            flags: u32s(),
            mode: u32s(),
            gid: u32s()
        }),
        arb!(Rlcreate {
            qid: qid(),
            iounit: u32s()
        }),
        arb!(Tsymlink {
            fid: fid(),
            name: name(),
            symtgt: string(),
            gid: u32s()
        }),
        arb!(Rsymlink { qid: qid() }),
        arb!(Tmknod {
            dfid: fid(),
            name: name(),
            mode: u32s(),
            major: u32s(),
            minor: u32s(),
            gid: u32s(),
        }),
        arb!(Rmknod { qid: qid() }),
        arb!(Trename {
            fid: fid(),
            dfid: fid(),
            name: name()
        }),
        arb!(Rrename {}),
        arb!(Treadlink { fid: fid() }),
        arb!(Rreadlink { target: string() }),
        arb!(Tgetattr {
            fid: fid(),
            request_mask: u64s()
        }),
        (Rgetattr::TYPE, rgetattr),
        arb!(Tsetattr {
            fid: fid(),
            valid: u32s(),
            mode: u32s(),
            uid: u32s(),
            gid: u32s(),
            size: u64s(),
            atime_sec: u64s(),
            atime_nsec: u64s(),
            mtime_sec: u64s(),
            mtime_nsec: u64s(),
        }),
        arb!(Rsetattr {}),
        arb!(Txattrwalk {
            fid: fid(),
            newfid: fid(),
            name: string()
        }),
        arb!(Rxattrwalk { size: u64s() }),
        arb!(Txattrcreate {
            fid: fid(),
            name: string(),
            attr_size: u64s(),
            flags: u32s()
        }),
        arb!(Rxattrcreate {}),
        arb!(Treaddir {
            fid: fid(),
            offset: u64s(),
            count: u32s()
        }),
        arb!(Rreaddir {
            data: readdir_data()
        }),
        arb!(Tsread {
            fid: fid(),
            offset: u64s(),
            count: u64s(),
            credit: u32s()
        }),
        arb!(Rsread { data: payload() }),
        arb!(Tswrite {
            fid: fid(),
            offset: u64s()
        }),
        arb!(Rswrite { count: u64s() }),
        arb!(Tsdata { data: payload() }),
        arb!(Rscredit { credit: u32s() }),
        arb!(Tscredit { credit: u32s() }),
        arb!(Tsession {}),
        arb!(Rsession { token: token() }),
        arb!(Tresume { token: token() }),
        arb!(Rresume {
            received: u64s(),
            held: u32s(),
            token: token()
        }),
        arb!(Tfsync {
            fid: fid(),
            datasync: prop::option::of(u32s())
        }),
        arb!(Rfsync {}),
        arb!(Tlock {
            fid: fid(),
            ty: u8s(),
            flags: u32s(),
            start: u64s(),
            length: u64s(),
            proc_id: u32s(),
            client_id: string(),
        }),
        arb!(Rlock { status: u8s() }),
        arb!(Tgetlock {
            fid: fid(),
            ty: u8s(),
            start: u64s(),
            length: u64s(),
            proc_id: u32s(),
            client_id: string(),
        }),
        arb!(Rgetlock {
            ty: u8s(),
            start: u64s(),
            length: u64s(),
            proc_id: u32s(),
            client_id: string(),
        }),
        arb!(Tlink {
            dfid: fid(),
            fid: fid(),
            name: name()
        }),
        arb!(Rlink {}),
        arb!(Tmkdir {
            dfid: fid(),
            name: name(),
            mode: u32s(),
            gid: u32s()
        }),
        arb!(Rmkdir { qid: qid() }),
        arb!(Trenameat {
            olddirfid: fid(),
            oldname: name(),
            newdirfid: fid(),
            newname: name(),
        }),
        arb!(Rrenameat {}),
        arb!(Tunlinkat {
            dirfid: fid(),
            name: name(),
            flags: u32s()
        }),
        arb!(Runlinkat {}),
    ]
}

/// The type numbers that exist in `d`, per the wire crate.
fn types_in(d: impl Into<Protocol> + Copy) -> Vec<u8> {
    (0..=u8::MAX)
        .filter(|&ty| Msg::type_name(ty, d).is_some())
        .collect()
}

/// `(name, strategy for tagged messages)` for every message type of `d`.
fn messages_in(d: Protocol) -> Vec<(&'static str, BoxedStrategy<Fcall>)> {
    table(d.dialect)
        .into_iter()
        .filter_map(|(ty, msgs)| {
            let name = Msg::type_name(ty, d)?;
            let fcalls = (u16s(), msgs).prop_map(|(tag, msg)| Fcall { tag, msg });
            Some((name, fcalls.boxed()))
        })
        .collect()
}

/// Any message of `d`.
fn any_fcall(d: Protocol) -> BoxedStrategy<Fcall> {
    let all: Vec<_> = messages_in(d).into_iter().map(|(_, s)| s).collect();
    proptest::strategy::Union::new(all).boxed()
}

fn protocol() -> impl Strategy<Value = Protocol> {
    select(protocols())
}

/// Runs `test` on random messages of every type in every dialect it exists
/// in, each paired with a value of `extra`; panics naming the message,
/// dialect and (shrunk) failing input.
fn for_every_message<E>(
    extra: E,
    test: impl Fn(Protocol, &Fcall, E::Value) -> Result<(), TestCaseError>,
) where
    E: Strategy + Clone,
{
    let config = Config {
        cases: cases(CASES_PER_MESSAGE),
        failure_persistence: None,
        ..Config::default()
    };
    let mut checked = 0;
    for d in protocols() {
        for (name, fcalls) in messages_in(d) {
            let mut runner = TestRunner::new(config.clone());
            let result = runner.run(&(fcalls, extra.clone()), |(fcall, x)| {
                prop_assert_eq!(fcall.msg.name(), name, "the table generates the wrong type");
                test(d, &fcall, x)
            });
            if let Err(e) = result {
                panic!("{name} in {d}: {e}");
            }
            checked += 1;
        }
    }
    assert_eq!(
        checked,
        protocols()
            .iter()
            .map(|&d| types_in(d).len())
            .sum::<usize>()
    );
}

fn frame_of(d: Protocol, f: &Fcall) -> Result<Bytes, TestCaseError> {
    let frame = f.to_bytes(d)?;
    prop_assert!(frame.len() >= HEADER_LEN);
    Ok(frame)
}

fn with_size(frame: &[u8], size: u32) -> Bytes {
    let mut v = frame.to_vec();
    v[..4].copy_from_slice(&size.to_le_bytes());
    Bytes::from(v)
}

/// The text form: one line, no control characters, `<Name> tag <tag>` first.
fn check_text(f: &Fcall) -> Result<(), TestCaseError> {
    let text = f.to_string();
    prop_assert!(
        !text.chars().any(char::is_control),
        "control character in {:?}",
        text
    );
    prop_assert_eq!(text.lines().count(), 1, "not one line: {:?}", text);
    let start = format!("{} tag {}", f.msg.name(), f.tag);
    prop_assert!(
        text.starts_with(&start),
        "{:?} does not start with {:?}",
        text,
        start
    );
    let rest = &text[start.len()..];
    prop_assert!(rest.is_empty() || rest.starts_with(' '), "{:?}", text);
    Ok(())
}

/// Decodes untrusted bytes: must not panic; an error must point inside the
/// frame; a message must encode back to exactly these bytes.
fn check_untrusted(d: Protocol, frame: Bytes) -> Result<(), TestCaseError> {
    let header = Header::decode(&frame);
    match Fcall::decode(frame.clone(), d) {
        Ok(f) => {
            let h = header?;
            prop_assert_eq!(
                (h.size as usize, h.ty, h.tag),
                (frame.len(), f.msg.ty(), f.tag)
            );
            prop_assert_eq!(Msg::type_name(h.ty, d), Some(f.msg.name()));
            let again = f.to_bytes(d)?;
            prop_assert_eq!(&again, &frame, "{} re-encodes differently", f);
            check_text(&f)?;
        }
        Err(e) => {
            prop_assert!(e.offset <= frame.len(), "{e} is outside the frame");
            if let Err(he) = header {
                prop_assert_eq!(e, he);
            }
            prop_assert!(!e.to_string().is_empty());
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Properties of every message.

#[test]
fn every_type_of_every_dialect_has_a_strategy() {
    for d in protocols() {
        let want: BTreeSet<&str> = types_in(d)
            .into_iter()
            .filter_map(|ty| Msg::type_name(ty, d))
            .collect();
        let got: BTreeSet<&str> = messages_in(d).into_iter().map(|(n, _)| n).collect();
        assert_eq!(got, want, "{d}");
    }
    // The table has one entry per type number, and its type numbers are
    // exactly those of some dialect: one entry per variant of Msg.
    let all: Vec<u8> = table(Dialect::L).into_iter().map(|(ty, _)| ty).collect();
    let distinct: BTreeSet<u8> = all.iter().copied().collect();
    assert_eq!(distinct.len(), all.len());
    let known: BTreeSet<u8> = protocols().iter().flat_map(|&d| types_in(d)).collect();
    assert_eq!(distinct, known);
    assert_eq!(all.len(), 77);
}

#[test]
fn every_request_but_the_stream_extension_knows_its_reply() {
    for_every_message(Just(()), |d, f, ()| {
        let msg = &f.msg;
        match msg.reply_type() {
            Some(reply) => {
                prop_assert!(msg.is_request());
                prop_assert_eq!(reply, msg.ty() + 1);
                prop_assert!(Msg::type_name(reply, d).is_some_and(|n| n.starts_with('R')));
            }
            None => prop_assert!(!msg.is_request() || msg.is_stream_extension()),
        }
        Ok(())
    });
}

#[test]
fn encode_then_decode_is_identity() {
    for_every_message(Just(()), |d, f, ()| {
        let mut buf = BytesMut::from(&b"old"[..]);
        f.encode(d, &mut buf)?;
        prop_assert_eq!(&buf[..3], b"old", "encode must append");
        let frame = buf.freeze().slice(3..);
        prop_assert_eq!(&frame, &f.to_bytes(d)?);

        let len = frame.len();
        let header = Header::decode(&frame)?;
        prop_assert_eq!(
            header,
            Header {
                size: len as u32,
                ty: f.msg.ty(),
                tag: f.tag
            }
        );

        let back = Fcall::decode(frame.clone(), d)?;
        prop_assert_eq!(&back, f);

        // A payload comes back as a slice of the frame, not a copy.
        if let Some(p) = back.msg.payload() {
            let range = frame.as_ptr_range();
            if !p.is_empty() {
                prop_assert!(range.contains(&p.as_ptr()));
                prop_assert_eq!(p.as_ptr_range().end, range.end);
            }
        }

        // encode_head + payload == encode; only Rread, Twrite and Rreaddir
        // have a payload, handed back uncopied.
        let mut head = BytesMut::from(&b"xy"[..]);
        let tail = f.encode_head(d, &mut head)?;
        prop_assert_eq!(&head[..2], b"xy");
        prop_assert_eq!(tail.as_ref(), f.msg.payload());
        if let (Some(t), Some(p)) = (&tail, f.msg.payload()) {
            prop_assert_eq!(t.as_ptr(), p.as_ptr());
        }
        let mut joined = head[2..].to_vec();
        joined.extend_from_slice(tail.as_deref().unwrap_or_default());
        prop_assert_eq!(&joined[..], &frame[..]);
        Ok(())
    });
}

#[test]
fn messages_do_not_encode_in_dialects_that_lack_them() {
    for_every_message(Just(()), |d, f, ()| {
        for other in protocols() {
            if Msg::type_name(f.msg.ty(), other).is_some() {
                continue;
            }
            // The stream extension's messages exist in no dialect until
            // Tversion agrees to them.
            let want = if f.msg.is_extension() {
                EncodeError::NotNegotiated(f.msg.name())
            } else {
                EncodeError::NotInDialect(f.msg.name(), other.dialect)
            };
            let mut buf = BytesMut::from(&b"keep"[..]);
            prop_assert_eq!(f.encode(other, &mut buf), Err(want));
            prop_assert_eq!(&buf[..], b"keep");
            // Nor do its bytes decode there.
            let err = Fcall::decode(f.to_bytes(d)?, other).expect_err("decoded");
            prop_assert_eq!(err.kind, DecodeErrorKind::UnknownType(f.msg.ty()));
        }
        Ok(())
    });
}

#[test]
fn every_strict_prefix_is_truncated() {
    for_every_message(Just(()), |d, f, ()| {
        let frame = frame_of(d, f)?;
        let len = frame.len();
        for cut in 0..len {
            let err = Fcall::decode(frame.slice(..cut), d).expect_err("a prefix decoded");
            prop_assert!(err.is_truncated(), "prefix of {} bytes: {}", cut, err);
            let want = if cut < HEADER_LEN {
                DecodeErrorKind::Truncated
            } else {
                DecodeErrorKind::SizeMismatch {
                    declared: len as u32,
                    actual: cut,
                }
            };
            prop_assert_eq!(err.kind, want);
        }
        Ok(())
    });
}

#[test]
fn every_strict_prefix_with_its_own_size_fails() {
    for_every_message(Just(()), |d, f, ()| {
        let frame = frame_of(d, f)?;
        let len = frame.len();
        for cut in HEADER_LEN..len {
            let got = Fcall::decode(with_size(&frame[..cut], cut as u32), d);
            match &f.msg {
                // The one legitimate short form: Tfsync without datasync.
                Msg::Tfsync(m) if m.datasync.is_some() && cut == len - 4 => {
                    let short = Fcall::new(
                        f.tag,
                        Tfsync {
                            fid: m.fid,
                            datasync: None,
                        },
                    );
                    prop_assert_eq!(got, Ok(short));
                }
                _ => match got {
                    Ok(g) => prop_assert!(false, "{} of {} bytes decoded as {}", cut, len, g),
                    Err(e) => {
                        // The fields are all there up to the cut, so the
                        // only fault can be running out of bytes.
                        prop_assert_eq!(e.kind, DecodeErrorKind::Truncated, "cut at {}", cut);
                        prop_assert!(e.offset <= cut);
                    }
                },
            }
        }
        Ok(())
    });
}

#[test]
fn tfsync_without_datasync_is_the_only_short_form() {
    let f = Fcall::new(
        9,
        Tfsync {
            fid: Fid(3),
            datasync: Some(1),
        },
    );
    let frame = f.to_bytes(Dialect::L).unwrap();
    assert_eq!(frame.len(), 15);
    let short = Fcall::decode(with_size(&frame[..11], 11), Dialect::L).unwrap();
    assert_eq!(
        short,
        Fcall::new(
            9,
            Tfsync {
                fid: Fid(3),
                datasync: None
            }
        )
    );
    assert_eq!(
        short.to_bytes(Dialect::L).unwrap(),
        with_size(&frame[..11], 11)
    );
    for cut in [12, 13, 14] {
        let err = Fcall::decode(with_size(&frame[..cut], cut as u32), Dialect::L).unwrap_err();
        assert_eq!(err.kind, DecodeErrorKind::Truncated);
    }
}

#[test]
fn a_wrong_size_field_fails_cleanly() {
    for_every_message(any::<u32>(), |d, f, random| {
        let frame = frame_of(d, f)?;
        let len = frame.len() as u32;
        let mut sizes: Vec<u32> = (0..HEADER_LEN as u32).collect();
        sizes.extend([
            len - 1,
            len + 1,
            len.wrapping_mul(2),
            len + 0x1_0000,
            u32::MAX,
            random,
        ]);
        for size in sizes.into_iter().filter(|&s| s != len) {
            let err = Fcall::decode(with_size(&frame, size), d).expect_err("decoded");
            let want = if (size as usize) < HEADER_LEN {
                DecodeErrorKind::Undersize(size)
            } else {
                DecodeErrorKind::SizeMismatch {
                    declared: size,
                    actual: frame.len(),
                }
            };
            prop_assert_eq!(err.kind, want, "size {}", size);
            prop_assert_eq!(err.offset, 0);
        }
        Ok(())
    });
}

#[test]
fn text_form_is_one_line_naming_message_and_tag() {
    for_every_message(Just(()), |_, f, ()| check_text(f));
}

#[test]
fn directory_data_iterates_back() {
    // Stats in Rread data (9P2000, .u) and dirents in Rreaddir data (.L).
    let config = Config {
        cases: cases(CASES_ARBITRARY),
        failure_persistence: None,
        ..Config::default()
    };
    for d in [Dialect::Base, Dialect::U] {
        let mut runner = TestRunner::new(config.clone());
        runner
            .run(&vec(stat(d), 0..6), |stats| {
                let mut buf = BytesMut::new();
                for s in &stats {
                    s.encode_entry(&mut buf, d)?;
                }
                let got: Vec<Stat> = Stat::entries(&buf.freeze(), d).collect::<Result<_, _>>()?;
                prop_assert_eq!(got, stats);
                Ok(())
            })
            .unwrap_or_else(|e| panic!("stats in {d}: {e}"));
    }
    let mut runner = TestRunner::new(config);
    runner
        .run(&vec(dirent(), 0..10), |dirents| {
            let mut buf = BytesMut::new();
            for e in &dirents {
                e.encode(&mut buf);
            }
            prop_assert_eq!(
                buf.len(),
                dirents.iter().map(Dirent::encoded_len).sum::<usize>()
            );
            let got: Vec<Dirent> = Dirent::entries(&buf.freeze()).collect::<Result<_, _>>()?;
            prop_assert_eq!(got, dirents);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("dirents: {e}"));
}

// ---------------------------------------------------------------------------
// Untrusted bytes.

/// One edit to a valid frame.
#[derive(Debug, Clone)]
enum Mutation {
    Xor(Index, u8),
    Set(Index, u8),
    Insert(Index, Vec<u8>),
    Remove(Index, usize),
    Truncate(Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<Index>(), 1..=u8::MAX).prop_map(|(i, x)| Mutation::Xor(i, x)),
        2 => (any::<Index>(), prop_oneof![Just(0u8), Just(0xff), Just(0x80), Just(b'/'), any::<u8>()])
            .prop_map(|(i, x)| Mutation::Set(i, x)),
        1 => (any::<Index>(), vec(any::<u8>(), 1..8)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        1 => (any::<Index>(), 1..8usize).prop_map(|(i, n)| Mutation::Remove(i, n)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

impl Mutation {
    fn apply(&self, v: &mut Vec<u8>) {
        let len = v.len();
        match self {
            Mutation::Xor(i, x) if len > 0 => v[i.index(len)] ^= x,
            Mutation::Set(i, x) if len > 0 => v[i.index(len)] = *x,
            Mutation::Insert(i, bytes) => {
                let at = i.index(v.len() + 1);
                v.splice(at..at, bytes.iter().copied());
            }
            Mutation::Remove(i, n) if !v.is_empty() => {
                let at = i.index(v.len());
                v.drain(at..(at + n).min(v.len()));
            }
            Mutation::Truncate(i) => v.truncate(i.index(v.len() + 1)),
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(CASES_ARBITRARY),
        // Failing inputs go to tests/properties.proptest-regressions.
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        let frame = Bytes::from(bytes);
        for d in protocols() {
            check_untrusted(d, frame.clone())?;
        }
    }

    /// Arbitrary bodies behind a valid header, so that decoding gets past the
    /// size check and into the fields.
    #[test]
    fn arbitrary_bodies_never_panic(
        ty in prop_oneof![4 => select(protocols().into_iter().flat_map(types_in).collect::<Vec<_>>()), 1 => any::<u8>()],
        tag in any::<u16>(),
        body in prop_oneof![vec(any::<u8>(), 0..24), vec(any::<u8>(), 0..200)],
    ) {
        let mut frame = Vec::with_capacity(HEADER_LEN + body.len());
        frame.extend_from_slice(&((HEADER_LEN + body.len()) as u32).to_le_bytes());
        frame.push(ty);
        frame.extend_from_slice(&tag.to_le_bytes());
        frame.extend_from_slice(&body);
        let frame = Bytes::from(frame);
        for d in protocols() {
            check_untrusted(d, frame.clone())?;
        }
    }

    /// Valid frames with a few bytes changed, inserted or removed, and the
    /// size field fixed up or not.
    #[test]
    fn mutated_frames_never_panic(
        (d, f) in protocol().prop_flat_map(|d| (Just(d), any_fcall(d))),
        edits in vec(mutation(), 1..4),
        fix_size in any::<bool>(),
    ) {
        let mut v = f.to_bytes(d)?.to_vec();
        for m in &edits {
            m.apply(&mut v);
        }
        if fix_size && v.len() >= 4 {
            let len = v.len() as u32;
            v[..4].copy_from_slice(&len.to_le_bytes());
        }
        let frame = Bytes::from(v);
        for d in protocols() {
            check_untrusted(d, frame.clone())?;
        }
    }
}

// ---------------------------------------------------------------------------
// Hand-picked frames.

fn unhex(s: &str) -> Bytes {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect::<Vec<u8>>()
        .into()
}

#[test]
fn hostile_lengths_fail_without_allocating() {
    // Rread claiming 4 GiB of data in a 11-byte frame.
    let e = Fcall::decode(unhex("0b000000750100ffffffff"), Dialect::Base).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    // Twalk with 65535 names.
    let e = Fcall::decode(unhex("110000006e01000100000002000000ffff"), Dialect::Base).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::TooManyWalkElements(0xffff));
    // Rstat whose n[2] is larger than the frame.
    let e = Fcall::decode(unhex("0b0000007d0100ffff0000"), Dialect::U).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::Truncated);
    // Rstat whose stat size[2] is 0: the stat's fields run past it.
    let e = Fcall::decode(unhex("0b0000007d010002000000"), Dialect::Base).unwrap_err();
    assert_eq!(e.kind, DecodeErrorKind::BadStatSize);
    // A name with '/', and one with NUL, in Tlcreate: the error points at
    // the name's len[2].
    for (name, kind) in [
        ("612f62", DecodeErrorKind::Slash),
        ("610062", DecodeErrorKind::Nul),
    ] {
        let hex = format!("1c0000000e0100050000000300{name}000000000000000000000000");
        let e = Fcall::decode(unhex(&hex), Dialect::L).unwrap_err();
        assert_eq!(e.kind, kind);
        assert_eq!(e.offset, 11, "{e:?}");
    }
}
