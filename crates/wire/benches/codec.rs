//! Encoding and decoding speed: small messages, and a 1 MiB Rread whose
//! payload decoding slices (no copy) and `encode_head` hands back uncopied.
//!
//! `cargo bench -p ninep-wire --bench codec`

use std::hint::black_box;

use bytes::{Bytes, BytesMut};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use ninep_wire::*;

fn qid(path: u64) -> Qid {
    Qid {
        ty: QidType::DIR,
        version: 7,
        path,
    }
}

fn name(s: &str) -> Name {
    Name::new(s).expect("valid name")
}

/// `(label, dialect, message)` for the small-message benchmarks.
fn small_messages() -> Vec<(&'static str, Dialect, Fcall)> {
    vec![
        (
            "Twalk",
            Dialect::Base,
            Fcall::new(
                5,
                Twalk {
                    fid: Fid(308),
                    newfid: Fid(296),
                    wname: vec![name("usr"), name("glenda")],
                },
            ),
        ),
        (
            "Tread",
            Dialect::Base,
            Fcall::new(
                6,
                Tread {
                    fid: Fid(296),
                    offset: 1 << 20,
                    count: 8168,
                },
            ),
        ),
        (
            "Rwalk",
            Dialect::Base,
            Fcall::new(
                5,
                Rwalk {
                    wqid: vec![qid(0x1234), qid(0x5678)],
                },
            ),
        ),
        (
            "Rgetattr.L",
            Dialect::L,
            Fcall::new(
                7,
                Rgetattr {
                    valid: consts::dotl::GETATTR_BASIC,
                    qid: qid(0x9abc),
                    mode: 0o100644,
                    uid: 1000,
                    gid: 1000,
                    nlink: 1,
                    rdev: 0,
                    size: 123_456,
                    blksize: 4096,
                    blocks: 248,
                    atime_sec: 1_700_000_000,
                    atime_nsec: 1,
                    mtime_sec: 1_700_000_001,
                    mtime_nsec: 2,
                    ctime_sec: 1_700_000_002,
                    ctime_nsec: 3,
                    btime_sec: 0,
                    btime_nsec: 0,
                    generation: 0,
                    data_version: 0,
                },
            ),
        ),
        (
            "Rstat.u",
            Dialect::U,
            Fcall::new(
                8,
                Rstat {
                    stat: Stat {
                        qid: qid(0xdef0),
                        mode: consts::mode::DMDIR | 0o755,
                        atime: 1_700_000_000,
                        mtime: 1_700_000_001,
                        length: 0,
                        name: "glenda".into(),
                        uid: "glenda".into(),
                        gid: "sys".into(),
                        muid: "glenda".into(),
                        extension: String::new(),
                        n_uid: 1000,
                        n_gid: 1000,
                        n_muid: 1000,
                        ..Stat::default()
                    },
                },
            ),
        ),
    ]
}

fn small(c: &mut Criterion) {
    let mut group = c.benchmark_group("small");
    for (label, dialect, fcall) in small_messages() {
        let frame = fcall.to_bytes(dialect).expect("encodes");
        assert_eq!(Fcall::decode(frame.clone(), dialect), Ok(fcall.clone()));
        group.throughput(Throughput::Bytes(frame.len() as u64));
        group.bench_function(BenchmarkId::new("decode", label), |b| {
            b.iter(|| Fcall::decode(black_box(frame.clone()), dialect).expect("decodes"))
        });
        let mut buf = BytesMut::with_capacity(frame.len());
        group.bench_function(BenchmarkId::new("encode", label), |b| {
            b.iter(|| {
                buf.clear();
                black_box(&fcall)
                    .encode(dialect, &mut buf)
                    .expect("encodes");
                black_box(&buf);
            })
        });
    }
    group.finish();
}

const MIB: usize = 1 << 20;

fn rread_1mib(c: &mut Criterion) {
    let dialect = Dialect::L;
    let data = Bytes::from((0..MIB).map(|i| i as u8).collect::<Vec<u8>>());
    let fcall = Fcall::new(9, Rread { data });
    let frame = fcall.to_bytes(dialect).expect("encodes");

    // Decoding slices the payload out of the frame rather than copying it.
    let decoded = Fcall::decode(frame.clone(), dialect).expect("decodes");
    let payload = decoded.msg.payload().expect("payload");
    assert_eq!(payload.len(), MIB);
    assert!(frame.as_ptr_range().contains(&payload.as_ptr()));

    let mut group = c.benchmark_group("rread_1MiB");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| Fcall::decode(black_box(frame.clone()), dialect).expect("decodes"))
    });
    let mut buf = BytesMut::with_capacity(frame.len());
    group.bench_function("encode", |b| {
        b.iter(|| {
            buf.clear();
            black_box(&fcall)
                .encode(dialect, &mut buf)
                .expect("encodes");
            black_box(&buf);
        })
    });
    let mut head = BytesMut::with_capacity(64);
    group.bench_function("encode_head", |b| {
        b.iter(|| {
            head.clear();
            let tail = black_box(&fcall)
                .encode_head(dialect, &mut head)
                .expect("encodes");
            black_box(&head);
            tail
        })
    });
    group.finish();
}

criterion_group!(benches, small, rread_1mib);
criterion_main!(benches);
