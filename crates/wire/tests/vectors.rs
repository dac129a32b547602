//! The test vectors in `shared/spec/vectors/`, produced by independent 9P
//! implementations (9fans.net/go/plan9, lionkov/go9p, hugelgupf/p9, rs9p).
//!
//! For every vector: decode its bytes and compare every field with the JSON;
//! build the message from the JSON, encode it and compare every byte; decode
//! then encode and expect the same bytes; and print it in Plan 9 text form.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::path::PathBuf;

use bytes::{Bytes, BytesMut};
use ninep_wire::*;
use serde_json::{Map, Value};

/// Where the vectors are: `$NINEP_SPEC_DIR`, else `shared/spec` beside the
/// repository.
fn spec_dir() -> PathBuf {
    let candidates = [
        std::env::var_os("NINEP_SPEC_DIR").map(PathBuf::from),
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec")),
    ];
    candidates
        .into_iter()
        .flatten()
        .find(|p| p.join("vectors").is_dir())
        .expect("test vectors not found: set NINEP_SPEC_DIR to the spec folder")
}

struct Vector {
    file: &'static str,
    dialect: Dialect,
    name: String,
    message: String,
    hex: String,
    fields: Map<String, Value>,
}

fn vectors() -> Vec<Vector> {
    let mut all = Vec::new();
    for (file, dialect) in [
        ("9p2000.json", Dialect::Base),
        ("9p2000u.json", Dialect::U),
        ("9p2000L.json", Dialect::L),
    ] {
        let path = spec_dir().join("vectors").join(file);
        let text = std::fs::read_to_string(&path).expect("read vectors");
        let doc: Value = serde_json::from_str(&text).expect("parse vectors");
        assert_eq!(doc["dialect"].as_str(), Some(dialect.version()));
        for v in doc["vectors"].as_array().expect("vectors array") {
            all.push(Vector {
                file,
                dialect,
                name: v["name"].as_str().expect("name").to_owned(),
                message: v["message"].as_str().expect("message").to_owned(),
                hex: v["hex"].as_str().expect("hex").to_owned(),
                fields: v["fields"].as_object().expect("fields").clone(),
            });
        }
    }
    all
}

fn unhex(s: &str) -> Vec<u8> {
    assert!(s.len() % 2 == 0, "odd hex");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex digit"))
        .collect()
}

/// The JSON fields of one vector; every key must be looked at before `done`.
struct Fields<'a> {
    map: &'a Map<String, Value>,
    used: RefCell<BTreeSet<String>>,
}

impl<'a> Fields<'a> {
    fn new(map: &'a Map<String, Value>) -> Self {
        Fields {
            map,
            used: RefCell::new(BTreeSet::new()),
        }
    }

    fn get(&self, key: &str) -> &'a Value {
        self.used.borrow_mut().insert(key.to_owned());
        self.map
            .get(key)
            .unwrap_or_else(|| panic!("field {key} missing"))
    }

    fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    fn u64(&self, key: &str) -> u64 {
        self.get(key)
            .as_u64()
            .unwrap_or_else(|| panic!("{key} not a u64"))
    }
    fn u32(&self, key: &str) -> u32 {
        u32::try_from(self.u64(key)).expect("u32")
    }
    fn u16(&self, key: &str) -> u16 {
        u16::try_from(self.u64(key)).expect("u16")
    }
    fn u8(&self, key: &str) -> u8 {
        u8::try_from(self.u64(key)).expect("u8")
    }
    fn fid(&self, key: &str) -> Fid {
        Fid(self.u32(key))
    }
    fn str(&self, key: &str) -> String {
        self.get(key).as_str().expect("string").to_owned()
    }
    fn name(&self, key: &str) -> Name {
        Name::new(self.str(key)).expect("valid name")
    }
    fn qid_of(v: &Value) -> Qid {
        Qid {
            ty: QidType(v["type"].as_u64().expect("qid type") as u8),
            version: v["version"].as_u64().expect("qid version") as u32,
            path: v["path"].as_u64().expect("qid path"),
        }
    }
    fn qid(&self, key: &str) -> Qid {
        Self::qid_of(self.get(key))
    }
    /// `data` with its `count`, which must agree.
    fn data(&self) -> Bytes {
        let data = Bytes::from(unhex(self.get("data").as_str().expect("data hex")));
        assert_eq!(self.u64("count") as usize, data.len(), "count vs data");
        data
    }
    fn stat(&self, dialect: Dialect) -> Stat {
        let stat = stat_of(self.get("stat"), dialect);
        let nstat = self.u64("nstat") as usize;
        assert_eq!(nstat, stat.encoded_len(dialect) + 2, "nstat");
        stat
    }

    fn done(self, vector: &str) {
        let keys: BTreeSet<String> = self.map.keys().cloned().collect();
        let used = self.used.into_inner();
        let missed: Vec<_> = keys.difference(&used).collect();
        assert!(
            missed.is_empty(),
            "{vector}: fields not compared: {missed:?}"
        );
    }
}

fn stat_of(v: &Value, dialect: Dialect) -> Stat {
    let map = v.as_object().expect("stat object");
    let f = Fields::new(map);
    let mut stat = Stat {
        ty: f.u16("type"),
        dev: f.u32("dev"),
        qid: f.qid("qid"),
        mode: f.u32("mode"),
        atime: f.u32("atime"),
        mtime: f.u32("mtime"),
        length: f.u64("length"),
        name: f.str("name"),
        uid: f.str("uid"),
        gid: f.str("gid"),
        muid: f.str("muid"),
        ..Stat::default()
    };
    if dialect == Dialect::U {
        stat.extension = f.str("extension");
        stat.n_uid = f.u32("n_uid");
        stat.n_gid = f.u32("n_gid");
        stat.n_muid = f.u32("n_muid");
    }
    assert_eq!(
        f.u64("size") as usize,
        stat.encoded_len(dialect),
        "stat size"
    );
    f.done("stat");
    stat
}

/// The message a vector describes, built from its JSON fields alone.
fn expected(v: &Vector, f: &Fields<'_>) -> Msg {
    let d = v.dialect;
    let kind = v.name.split('_').next().expect("name");
    let n_uname = |f: &Fields<'_>| {
        if d == Dialect::Base {
            NONUNAME
        } else {
            f.u32("n_uname")
        }
    };
    match kind {
        "Tversion" => Tversion {
            msize: f.u32("msize"),
            version: f.str("version"),
        }
        .into(),
        "Rversion" => Rversion {
            msize: f.u32("msize"),
            version: f.str("version"),
        }
        .into(),
        "Tauth" => Tauth {
            afid: f.fid("afid"),
            uname: f.str("uname"),
            aname: f.str("aname"),
            n_uname: n_uname(f),
        }
        .into(),
        "Rauth" => Rauth {
            aqid: f.qid("aqid"),
        }
        .into(),
        "Tattach" => Tattach {
            fid: f.fid("fid"),
            afid: f.fid("afid"),
            uname: f.str("uname"),
            aname: f.str("aname"),
            n_uname: n_uname(f),
        }
        .into(),
        "Rattach" => Rattach { qid: f.qid("qid") }.into(),
        "Rerror" => Rerror {
            ename: f.str("ename"),
            errno: if d == Dialect::U { f.u32("errno") } else { 0 },
        }
        .into(),
        "Tflush" => Tflush {
            oldtag: f.u16("oldtag"),
        }
        .into(),
        "Rflush" => Rflush {}.into(),
        "Twalk" => {
            let wname: Vec<Name> = f
                .get("wname")
                .as_array()
                .expect("wname")
                .iter()
                .map(|n| Name::new(n.as_str().expect("name")).expect("valid name"))
                .collect();
            assert_eq!(f.u64("nwname") as usize, wname.len());
            Twalk {
                fid: f.fid("fid"),
                newfid: f.fid("newfid"),
                wname,
            }
            .into()
        }
        "Rwalk" => {
            let wqid: Vec<Qid> = f
                .get("wqid")
                .as_array()
                .expect("wqid")
                .iter()
                .map(Fields::qid_of)
                .collect();
            assert_eq!(f.u64("nwqid") as usize, wqid.len());
            Rwalk { wqid }.into()
        }
        "Topen" => Topen {
            fid: f.fid("fid"),
            mode: f.u8("mode"),
        }
        .into(),
        "Ropen" => Ropen {
            qid: f.qid("qid"),
            iounit: f.u32("iounit"),
        }
        .into(),
        "Tcreate" => Tcreate {
            fid: f.fid("fid"),
            name: f.name("name"),
            perm: f.u32("perm"),
            mode: f.u8("mode"),
            extension: if d == Dialect::U {
                f.str("extension")
            } else {
                String::new()
            },
        }
        .into(),
        "Rcreate" => Rcreate {
            qid: f.qid("qid"),
            iounit: f.u32("iounit"),
        }
        .into(),
        "Tread" => Tread {
            fid: f.fid("fid"),
            offset: f.u64("offset"),
            count: f.u32("count"),
        }
        .into(),
        "Rread" => {
            let data = f.data();
            if f.has("entries") {
                let want: Vec<Stat> = f
                    .get("entries")
                    .as_array()
                    .expect("entries")
                    .iter()
                    .map(|e| stat_of(e, d))
                    .collect();
                let got: Vec<Stat> = Stat::entries(&data, d)
                    .map(|s| s.expect("stat entry"))
                    .collect();
                assert_eq!(got, want, "{}: directory entries", v.name);
            }
            Rread { data }.into()
        }
        "Twrite" => Twrite {
            fid: f.fid("fid"),
            offset: f.u64("offset"),
            data: f.data(),
        }
        .into(),
        "Rwrite" => Rwrite {
            count: f.u32("count"),
        }
        .into(),
        "Tclunk" => Tclunk { fid: f.fid("fid") }.into(),
        "Rclunk" => Rclunk {}.into(),
        "Tremove" => Tremove { fid: f.fid("fid") }.into(),
        "Rremove" => Rremove {}.into(),
        "Tstat" => Tstat { fid: f.fid("fid") }.into(),
        "Rstat" => Rstat { stat: f.stat(d) }.into(),
        "Twstat" => Twstat {
            fid: f.fid("fid"),
            stat: f.stat(d),
        }
        .into(),
        "Rwstat" => Rwstat {}.into(),
        "Rlerror" => Rlerror {
            ecode: f.u32("ecode"),
        }
        .into(),
        "Tstatfs" => Tstatfs { fid: f.fid("fid") }.into(),
        "Rstatfs" => Rstatfs {
            ty: f.u32("type"),
            bsize: f.u32("bsize"),
            blocks: f.u64("blocks"),
            bfree: f.u64("bfree"),
            bavail: f.u64("bavail"),
            files: f.u64("files"),
            ffree: f.u64("ffree"),
            fsid: f.u64("fsid"),
            namelen: f.u32("namelen"),
        }
        .into(),
        "Tlopen" => Tlopen {
            fid: f.fid("fid"),
            flags: f.u32("flags"),
        }
        .into(),
        "Rlopen" => Rlopen {
            qid: f.qid("qid"),
            iounit: f.u32("iounit"),
        }
        .into(),
        "Tlcreate" => Tlcreate {
            fid: f.fid("fid"),
            name: f.name("name"),
            flags: f.u32("flags"),
            mode: f.u32("mode"),
            gid: f.u32("gid"),
        }
        .into(),
        "Rlcreate" => Rlcreate {
            qid: f.qid("qid"),
            iounit: f.u32("iounit"),
        }
        .into(),
        "Tsymlink" => Tsymlink {
            fid: f.fid("fid"),
            name: f.name("name"),
            symtgt: f.str("symtgt"),
            gid: f.u32("gid"),
        }
        .into(),
        "Rsymlink" => Rsymlink { qid: f.qid("qid") }.into(),
        "Tmknod" => Tmknod {
            dfid: f.fid("dfid"),
            name: f.name("name"),
            mode: f.u32("mode"),
            major: f.u32("major"),
            minor: f.u32("minor"),
            gid: f.u32("gid"),
        }
        .into(),
        "Rmknod" => Rmknod { qid: f.qid("qid") }.into(),
        "Trename" => Trename {
            fid: f.fid("fid"),
            dfid: f.fid("dfid"),
            name: f.name("name"),
        }
        .into(),
        "Rrename" => Rrename {}.into(),
        "Treadlink" => Treadlink { fid: f.fid("fid") }.into(),
        "Rreadlink" => Rreadlink {
            target: f.str("target"),
        }
        .into(),
        "Tgetattr" => Tgetattr {
            fid: f.fid("fid"),
            request_mask: f.u64("request_mask"),
        }
        .into(),
        "Rgetattr" => Rgetattr {
            valid: f.u64("valid"),
            qid: f.qid("qid"),
            mode: f.u32("mode"),
            uid: f.u32("uid"),
            gid: f.u32("gid"),
            nlink: f.u64("nlink"),
            rdev: f.u64("rdev"),
            size: f.u64("size"),
            blksize: f.u64("blksize"),
            blocks: f.u64("blocks"),
            atime_sec: f.u64("atime_sec"),
            atime_nsec: f.u64("atime_nsec"),
            mtime_sec: f.u64("mtime_sec"),
            mtime_nsec: f.u64("mtime_nsec"),
            ctime_sec: f.u64("ctime_sec"),
            ctime_nsec: f.u64("ctime_nsec"),
            btime_sec: f.u64("btime_sec"),
            btime_nsec: f.u64("btime_nsec"),
            generation: f.u64("gen"),
            data_version: f.u64("data_version"),
        }
        .into(),
        "Tsetattr" => Tsetattr {
            fid: f.fid("fid"),
            valid: f.u32("valid"),
            mode: f.u32("mode"),
            uid: f.u32("uid"),
            gid: f.u32("gid"),
            size: f.u64("size"),
            atime_sec: f.u64("atime_sec"),
            atime_nsec: f.u64("atime_nsec"),
            mtime_sec: f.u64("mtime_sec"),
            mtime_nsec: f.u64("mtime_nsec"),
        }
        .into(),
        "Rsetattr" => Rsetattr {}.into(),
        "Txattrwalk" => Txattrwalk {
            fid: f.fid("fid"),
            newfid: f.fid("newfid"),
            name: f.str("name"),
        }
        .into(),
        "Rxattrwalk" => Rxattrwalk {
            size: f.u64("size"),
        }
        .into(),
        "Txattrcreate" => Txattrcreate {
            fid: f.fid("fid"),
            name: f.str("name"),
            attr_size: f.u64("attr_size"),
            flags: f.u32("flags"),
        }
        .into(),
        "Rxattrcreate" => Rxattrcreate {}.into(),
        "Treaddir" => Treaddir {
            fid: f.fid("fid"),
            offset: f.u64("offset"),
            count: f.u32("count"),
        }
        .into(),
        "Rreaddir" => {
            let data = f.data();
            let want: Vec<Dirent> = f
                .get("entries")
                .as_array()
                .expect("entries")
                .iter()
                .map(|e| Dirent {
                    qid: Fields::qid_of(&e["qid"]),
                    offset: e["offset"].as_u64().expect("offset"),
                    ty: e["type"].as_u64().expect("type") as u8,
                    name: Name::new(e["name"].as_str().expect("name")).expect("valid name"),
                })
                .collect();
            let got: Vec<Dirent> = Dirent::entries(&data).map(|e| e.expect("dirent")).collect();
            assert_eq!(got, want, "{}: dirents", v.name);
            // Re-encoding the entries gives the same payload.
            let mut again = BytesMut::new();
            want.iter().for_each(|e| e.encode(&mut again));
            assert_eq!(again, data, "{}: dirents re-encoded", v.name);
            Rreaddir { data }.into()
        }
        "Tfsync" => Tfsync {
            fid: f.fid("fid"),
            datasync: f.has("datasync").then(|| f.u32("datasync")),
        }
        .into(),
        "Rfsync" => Rfsync {}.into(),
        "Tlock" => Tlock {
            fid: f.fid("fid"),
            ty: f.u8("type"),
            flags: f.u32("flags"),
            start: f.u64("start"),
            length: f.u64("length"),
            proc_id: f.u32("proc_id"),
            client_id: f.str("client_id"),
        }
        .into(),
        "Rlock" => Rlock {
            status: f.u8("status"),
        }
        .into(),
        "Tgetlock" => Tgetlock {
            fid: f.fid("fid"),
            ty: f.u8("type"),
            start: f.u64("start"),
            length: f.u64("length"),
            proc_id: f.u32("proc_id"),
            client_id: f.str("client_id"),
        }
        .into(),
        "Rgetlock" => Rgetlock {
            ty: f.u8("type"),
            start: f.u64("start"),
            length: f.u64("length"),
            proc_id: f.u32("proc_id"),
            client_id: f.str("client_id"),
        }
        .into(),
        "Tlink" => Tlink {
            dfid: f.fid("dfid"),
            fid: f.fid("fid"),
            name: f.name("name"),
        }
        .into(),
        "Rlink" => Rlink {}.into(),
        "Tmkdir" => Tmkdir {
            dfid: f.fid("dfid"),
            name: f.name("name"),
            mode: f.u32("mode"),
            gid: f.u32("gid"),
        }
        .into(),
        "Rmkdir" => Rmkdir { qid: f.qid("qid") }.into(),
        "Trenameat" => Trenameat {
            olddirfid: f.fid("olddirfid"),
            oldname: f.name("oldname"),
            newdirfid: f.fid("newdirfid"),
            newname: f.name("newname"),
        }
        .into(),
        "Rrenameat" => Rrenameat {}.into(),
        "Tunlinkat" => Tunlinkat {
            dirfid: f.fid("dirfd"),
            name: f.name("name"),
            flags: f.u32("flags"),
        }
        .into(),
        "Runlinkat" => Runlinkat {}.into(),
        other => panic!("{}: no message type {other}", v.name),
    }
}

/// The tag as the vector's readable dump gives it.
fn tag_of(v: &Vector) -> u16 {
    let mut words = v.message.split_whitespace();
    words.find(|w| *w == "tag").expect("tag in message");
    words
        .next()
        .expect("tag value")
        .parse()
        .expect("tag number")
}

#[test]
fn there_are_200_vectors() {
    let all = vectors();
    assert_eq!(all.len(), 200);
    for file in ["9p2000.json", "9p2000u.json", "9p2000L.json"] {
        assert!(all.iter().any(|v| v.file == file));
    }
}

#[test]
fn every_vector_decodes_to_its_fields() {
    for v in vectors() {
        let frame = Bytes::from(unhex(&v.hex));
        let header = Header::decode(&frame).expect("header");
        assert_eq!(header.size as usize, frame.len(), "{}", v.name);
        assert_eq!(header.tag, tag_of(&v), "{}: tag", v.name);
        let got = Fcall::decode(frame, v.dialect)
            .unwrap_or_else(|e| panic!("{} ({}): {e}", v.name, v.file));
        let fields = Fields::new(&v.fields);
        let want = expected(&v, &fields);
        fields.done(&v.name);
        assert_eq!(got.tag, tag_of(&v), "{}: tag", v.name);
        assert_eq!(got.msg, want, "{}: fields", v.name);
        assert_eq!(got.msg.name(), v.name.split('_').next().unwrap_or_default());
    }
}

#[test]
fn every_vector_encodes_to_its_bytes() {
    for v in vectors() {
        let fields = Fields::new(&v.fields);
        let msg = expected(&v, &fields);
        let fcall = Fcall {
            tag: tag_of(&v),
            msg,
        };
        let bytes = fcall.to_bytes(v.dialect).expect("encode");
        assert_eq!(hex(&bytes), v.hex, "{} ({})", v.name, v.file);
    }
}

#[test]
fn every_vector_survives_decode_then_encode() {
    for v in vectors() {
        let frame = Bytes::from(unhex(&v.hex));
        let fcall = Fcall::decode(frame.clone(), v.dialect).expect("decode");
        // The split encoding (header apart from payload) joins to the same bytes.
        let mut head = BytesMut::new();
        let tail = fcall.encode_head(v.dialect, &mut head).expect("encode");
        if let Some(tail) = &tail {
            head.extend_from_slice(tail);
        }
        assert_eq!(head, frame, "{}", v.name);
        assert_eq!(tail.is_some(), fcall.msg.payload().is_some(), "{}", v.name);
    }
}

#[test]
fn every_vector_prints_as_one_line() {
    for v in vectors() {
        let fcall = Fcall::decode(Bytes::from(unhex(&v.hex)), v.dialect).expect("decode");
        let text = fcall.to_string();
        let head = format!(
            "{} tag {}",
            v.name.split('_').next().unwrap_or_default(),
            tag_of(&v)
        );
        assert!(text.starts_with(&head), "{}: {text}", v.name);
        assert!(!text.contains('\n'), "{}: {text}", v.name);
    }
}

#[test]
fn payloads_are_slices_of_the_frame() {
    let v = vectors()
        .into_iter()
        .find(|v| v.name == "Rread_all_256_byte_values")
        .expect("vector");
    let frame = Bytes::from(unhex(&v.hex));
    let Msg::Rread(r) = Fcall::decode(frame.clone(), v.dialect).expect("decode").msg else {
        panic!("not an Rread");
    };
    let frame_range = frame.as_ptr() as usize..frame.as_ptr() as usize + frame.len();
    assert!(
        frame_range.contains(&(r.data.as_ptr() as usize)),
        "data was copied"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The examples at the end of docs/streams.md: hex frames, each followed by
/// its text form.
fn stream_examples() -> Vec<(Vec<u8>, String)> {
    let doc = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/streams.md");
    let doc = std::fs::read_to_string(&doc).expect("docs/streams.md");
    let examples = doc
        .split("## Examples")
        .nth(1)
        .expect("an Examples section");
    let lines: Vec<&str> = examples
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    lines
        .chunks(2)
        .map(|pair| (unhex(&pair[0].replace(' ', "")), pair[1].to_owned()))
        .collect()
}

#[test]
fn the_stream_extension_examples_decode_only_once_negotiated() {
    let examples = stream_examples();
    assert_eq!(examples.len(), 9);
    let mut names = BTreeSet::new();
    for (frame, text) in examples {
        let frame = Bytes::from(frame);
        for dialect in [Dialect::Base, Dialect::U, Dialect::L] {
            let p = Protocol {
                dialect,
                streams: true,
                resume: false,
            };
            let f = Fcall::decode(frame.clone(), p).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(f.to_string(), text);
            assert_eq!(f.to_bytes(p).unwrap(), frame, "{text}");
            assert!(f.msg.is_stream_extension());
            names.insert(f.msg.name());
            let err = Fcall::decode(frame.clone(), dialect).expect_err("decoded unnegotiated");
            assert_eq!(err.kind, DecodeErrorKind::UnknownType(frame[4]));
        }
    }
    let all = [
        "Tsread", "Rsread", "Tswrite", "Rswrite", "Tsdata", "Rscredit", "Tscredit",
    ];
    assert_eq!(names, all.into_iter().collect());
}
