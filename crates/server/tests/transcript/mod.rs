//! Transcript tests: a script of requests (`->`) and expected replies (`<-`)
//! in Plan 9's text form, played against a server over an in-memory stream.
//!
//! An expected reply may use `*` to match any text (times, versions). `<- none`
//! asserts that no reply comes within a short wait; `<- closed` that the
//! server hung up. Consecutive `<~` lines are replies that may come in any
//! order. `-> raw HEX` sends bytes as they are.

use std::collections::HashMap;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use ninep_server::{Filesystem, Limits, Server};
use ninep_transport::FrameCodec;
use ninep_wire::*;
use tokio::io::AsyncWriteExt;
use tokio_util::codec::FramedRead;

// The mux's and ramfs's transcripts include this module too, and begin
// their scripts in their own ways.

/// Version and attach in 9P2000, as most scripts begin.
#[allow(dead_code)]
pub const HELLO_9P2000: &str = "
-> Tversion tag 65535 msize 8192 version '9P2000'
<- Rversion tag 65535 msize 8192 version '9P2000'
-> Tattach tag 1 fid 0 afid -1 uname glenda aname
<- Rattach tag 1 qid (0000000000000000 0 d)
";

/// The limits scripts are written for: msize 8192, the rest as default.
pub fn limits() -> Limits {
    Limits {
        msize: 8192,
        ..Limits::default()
    }
}

/// Plays `script` against `fs` served with `limits`.
#[allow(dead_code)]
pub async fn play<F: Filesystem>(fs: F, limits: Limits, script: &str) {
    play_server(Server::with_limits(fs, limits), script).await
}

/// Plays `script` against `server`.
pub async fn play_server<F: Filesystem>(server: Server<F>, script: &str) {
    let (ours, theirs) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn(async move {
        server
            .serve_stream(Box::new(theirs), std::future::pending())
            .await;
    });
    let (reader, mut writer) = tokio::io::split(ours);
    let mut frames = FramedRead::new(reader, FrameCodec::new(u32::MAX, Dialect::Base));
    let mut dialect = Protocol::from(Dialect::Base);
    let mut unordered: Vec<String> = Vec::new();
    let lines: Vec<&str> = script.lines().map(str::trim).collect();
    for (n, &line) in lines.iter().enumerate() {
        let at = || format!("line {}: {line}", n + 1);
        if let Some(expected) = line.strip_prefix("<~ ") {
            unordered.push(expected.to_owned());
            if lines.get(n + 1).is_some_and(|next| next.starts_with("<~ ")) {
                continue;
            }
            while !unordered.is_empty() {
                let frame = tokio::time::timeout(Duration::from_secs(5), frames.next())
                    .await
                    .unwrap_or_else(|_| panic!("{}: no reply", at()))
                    .unwrap_or_else(|| panic!("{}: connection closed", at()))
                    .unwrap_or_else(|e| panic!("{}: {e}", at()));
                let text = Fcall::decode(frame, dialect)
                    .unwrap_or_else(|e| panic!("{}: {e}", at()))
                    .to_string();
                let Some(i) = unordered.iter().position(|p| glob(p, &text)) else {
                    panic!(
                        "{}: unexpected {text}; still waiting for {unordered:?}",
                        at()
                    );
                };
                unordered.remove(i);
            }
            continue;
        }
        if let Some(request) = line.strip_prefix("-> ") {
            let bytes = match request.strip_prefix("raw ") {
                Some(hex) => Bytes::from(unhex(hex)),
                None => {
                    let fcall = parse(request).unwrap_or_else(|e| panic!("{}: {e}", at()));
                    let mut buf = BytesMut::new();
                    fcall
                        .encode(dialect, &mut buf)
                        .unwrap_or_else(|e| panic!("{}: {e}", at()));
                    buf.freeze()
                }
            };
            writer
                .write_all(&bytes)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}", at()));
        } else if line == "<- closed" {
            let end = tokio::time::timeout(Duration::from_secs(5), frames.next()).await;
            assert!(
                matches!(end, Ok(None) | Ok(Some(Err(_)))),
                "{}: connection still open",
                at()
            );
        } else if let Some(expected) = line.strip_prefix("<- ") {
            let wait = if expected == "none" { 200 } else { 5000 };
            let frame = tokio::time::timeout(Duration::from_millis(wait), frames.next()).await;
            if expected == "none" {
                assert!(frame.is_err(), "{}: got a reply", at());
                continue;
            }
            let frame = frame
                .unwrap_or_else(|_| panic!("{}: no reply", at()))
                .unwrap_or_else(|| panic!("{}: connection closed", at()))
                .unwrap_or_else(|e| panic!("{}: {e}", at()));
            let got = Fcall::decode(frame, dialect).unwrap_or_else(|e| panic!("{}: {e}", at()));
            let text = got.to_string();
            assert!(glob(expected, &text), "{}\n  got: {text}", at());
            if let Msg::Rversion(v) = &got.msg {
                dialect = Protocol::from_version(&v.version).unwrap_or(Dialect::Base.into());
            }
        } else if let Some(ms) = line.strip_prefix("-- sleep ") {
            tokio::time::sleep(Duration::from_millis(ms.parse().expect("ms"))).await;
        } else {
            assert!(
                line.is_empty() || line.starts_with('#'),
                "{}: not a transcript line",
                at()
            );
        }
    }
    drop(writer);
    drop(frames);
    let _ = tokio::time::timeout(Duration::from_secs(5), serving).await;
}

/// `*` matches any run of characters; everything else matches itself.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (i, part) in parts.iter().enumerate() {
        if i == parts.len() - 1 {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

fn unhex(s: &str) -> Vec<u8> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex"))
        .collect()
}

/// Splits a request line into words; `'...'` is one word, with `\n` and `\t`.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c == ' ' {
            chars.next();
        } else if c == '\'' {
            chars.next();
            let mut word = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\'' => break,
                    '\\' => match chars.next() {
                        Some('n') => word.push('\n'),
                        Some('t') => word.push('\t'),
                        Some(other) => word.push(other),
                        None => {}
                    },
                    c => word.push(c),
                }
            }
            out.push(word);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c == ' ' {
                    break;
                }
                word.push(c);
                chars.next();
            }
            out.push(word);
        }
    }
    out
}

fn number(s: &str) -> Result<u64, String> {
    let parsed = if let Some(hex) = s.strip_prefix("0x") {
        u64::from_str_radix(hex, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8)
    } else if let Some(neg) = s.strip_prefix('-') {
        neg.parse::<u64>().map(|n| (n as u32).wrapping_neg() as u64)
    } else {
        s.parse()
    };
    parsed.map_err(|e| format!("{s:?}: {e}"))
}

/// A Plan 9 mode: `d-rwxr-xr-x`, or a number.
fn perm(s: &str) -> Result<u32, String> {
    if s.len() != 11 || !s.is_char_boundary(2) {
        return number(s).map(|n| n as u32);
    }
    let mut mode = match &s[..1] {
        "d" => consts::mode::DMDIR,
        "a" => consts::mode::DMAPPEND,
        _ => 0,
    };
    if &s[1..2] == "l" {
        mode |= consts::mode::DMEXCL;
    }
    for (i, c) in s[2..].chars().enumerate() {
        if c != '-' {
            mode |= 1 << (8 - i);
        }
    }
    Ok(mode)
}

/// A stat as `Stat`'s Display prints it: `'name' 'uid' 'gid' 'muid' q
/// (path version type) m mode at atime mt mtime l length t type d dev`,
/// then for 9P2000.u `ext 'extension' nuid n ngid n nmuid n`. Any number
/// may be `-1`, all ones ("don't touch"); a qid type may be a number.
fn stat(words: &[String]) -> Result<Stat, String> {
    let [name, uid, gid, muid, rest @ ..] = words else {
        return Err("a stat starts with four names".into());
    };
    let mut stat = Stat {
        name: name.clone(),
        uid: uid.clone(),
        gid: gid.clone(),
        muid: muid.clone(),
        ..Stat::default()
    };
    let mut words = rest.iter().map(String::as_str);
    while let Some(key) = words.next() {
        let mut value = || words.next().ok_or(format!("no value for {key}"));
        match key {
            "q" => {
                let path = value()?.strip_prefix('(').ok_or("qid without '('")?;
                let version = value()?;
                let ty = value()?.strip_suffix(')').ok_or("qid without ')'")?;
                stat.qid = Qid {
                    ty: qid_type(ty)?,
                    version: number(version)? as u32,
                    path: u64::from_str_radix(path, 16).map_err(|e| format!("{path}: {e}"))?,
                };
            }
            "m" => stat.mode = number(value()?)? as u32,
            "at" => stat.atime = number(value()?)? as u32,
            "mt" => stat.mtime = number(value()?)? as u32,
            "l" => {
                stat.length = match value()? {
                    "-1" => u64::MAX,
                    n => number(n)?,
                }
            }
            "t" => stat.ty = number(value()?)? as u16,
            "d" => stat.dev = number(value()?)? as u32,
            "ext" => stat.extension = value()?.to_owned(),
            "nuid" => stat.n_uid = number(value()?)? as u32,
            "ngid" => stat.n_gid = number(value()?)? as u32,
            "nmuid" => stat.n_muid = number(value()?)? as u32,
            other => return Err(format!("no stat field {other}")),
        }
    }
    Ok(stat)
}

/// A qid type: Plan 9's letters (`d`, `al`), or a number.
fn qid_type(s: &str) -> Result<QidType, String> {
    if s.starts_with("0x") {
        return Ok(QidType(number(s)? as u8));
    }
    let mut ty = QidType::FILE;
    for c in s.chars() {
        ty = ty
            | match c {
                'd' => QidType::DIR,
                'a' => QidType::APPEND,
                'l' => QidType::EXCL,
                'A' => QidType::AUTH,
                't' => QidType::TMP,
                'L' => QidType::SYMLINK,
                _ => return Err(format!("{c}: not a qid type letter")),
            };
    }
    Ok(ty)
}

/// The request a line describes, in the form `Fcall`'s Display prints.
pub fn parse(line: &str) -> Result<Fcall, String> {
    let words = words(line);
    let (name, rest) = words.split_first().ok_or("empty request")?;
    // A Twstat's stat is words of its own, after `stat`.
    let (rest, stat_words) = match rest.iter().position(|w| w == "stat") {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let mut fields: HashMap<&str, &str> = HashMap::new();
    let mut wname = Vec::new();
    let mut i = 0;
    while i < rest.len() {
        let key = rest[i].as_str();
        if let Some((index, elem)) = key.split_once(':')
            && index.parse::<usize>().is_ok()
        {
            wname.push(Name::new(elem).map_err(|e| e.to_string())?);
            i += 1;
            continue;
        }
        let value = rest.get(i + 1).map_or("", String::as_str);
        fields.insert(key, value);
        i += 2;
    }
    let get = |k: &str| fields.get(k).copied().ok_or_else(|| format!("no {k}"));
    let num = |k: &str| get(k).and_then(number);
    let fid = |k: &str| num(k).map(|n| Fid(n as u32));
    let name_of = |k: &str| Name::new(get(k)?).map_err(|e| e.to_string());
    let tag = num("tag")? as u16;
    let msg: Msg = match name.as_str() {
        "Tversion" => Tversion {
            msize: num("msize")? as u32,
            version: get("version")?.to_owned(),
        }
        .into(),
        "Tauth" => Tauth {
            afid: fid("afid")?,
            uname: get("uname")?.to_owned(),
            aname: get("aname").unwrap_or("").to_owned(),
            n_uname: num("n_uname").map_or(NONUNAME, |n| n as u32),
        }
        .into(),
        "Tattach" => Tattach {
            fid: fid("fid")?,
            afid: fid("afid")?,
            uname: get("uname")?.to_owned(),
            aname: get("aname").unwrap_or("").to_owned(),
            n_uname: num("n_uname").map_or(NONUNAME, |n| n as u32),
        }
        .into(),
        "Tflush" => Tflush {
            oldtag: num("oldtag")? as u16,
        }
        .into(),
        "Twalk" => Twalk {
            fid: fid("fid")?,
            newfid: fid("newfid")?,
            wname,
        }
        .into(),
        "Topen" => Topen {
            fid: fid("fid")?,
            mode: num("mode")? as u8,
        }
        .into(),
        "Tcreate" => Tcreate {
            fid: fid("fid")?,
            name: name_of("name")?,
            perm: perm(get("perm")?)?,
            mode: num("mode")? as u8,
            extension: get("ext").unwrap_or("").to_owned(),
        }
        .into(),
        "Tread" => Tread {
            fid: fid("fid")?,
            offset: num("offset")?,
            count: num("count")? as u32,
        }
        .into(),
        "Twrite" => {
            let data = rest.last().cloned().unwrap_or_default();
            Twrite {
                fid: fid("fid")?,
                offset: num("offset")?,
                data: Bytes::from(data),
            }
            .into()
        }
        "Tsread" => Tsread {
            fid: fid("fid")?,
            offset: num("offset")?,
            count: match get("count")? {
                "-1" => u64::MAX,
                c => number(c)?,
            },
            credit: num("credit")? as u32,
        }
        .into(),
        "Tswrite" => Tswrite {
            fid: fid("fid")?,
            offset: num("offset")?,
        }
        .into(),
        "Tsdata" => Tsdata {
            data: Bytes::from(rest.last().cloned().unwrap_or_default()),
        }
        .into(),
        "Tscredit" => Tscredit {
            credit: num("credit")? as u32,
        }
        .into(),
        "Tclunk" => Tclunk { fid: fid("fid")? }.into(),
        "Tremove" => Tremove { fid: fid("fid")? }.into(),
        "Tstat" => Tstat { fid: fid("fid")? }.into(),
        "Twstat" => Twstat {
            fid: fid("fid")?,
            stat: stat(stat_words)?,
        }
        .into(),
        "Tlopen" => Tlopen {
            fid: fid("fid")?,
            flags: num("flags")? as u32,
        }
        .into(),
        "Tlcreate" => Tlcreate {
            fid: fid("fid")?,
            name: name_of("name")?,
            flags: num("flags")? as u32,
            mode: num("mode")? as u32,
            gid: num("gid")? as u32,
        }
        .into(),
        "Tmkdir" => Tmkdir {
            dfid: fid("dfid")?,
            name: name_of("name")?,
            mode: num("mode")? as u32,
            gid: num("gid")? as u32,
        }
        .into(),
        "Treaddir" => Treaddir {
            fid: fid("fid")?,
            offset: num("offset")?,
            count: num("count")? as u32,
        }
        .into(),
        "Tgetattr" => Tgetattr {
            fid: fid("fid")?,
            request_mask: num("request_mask")?,
        }
        .into(),
        "Tunlinkat" => Tunlinkat {
            dirfid: fid("dirfid")?,
            name: name_of("name")?,
            flags: num("flags")? as u32,
        }
        .into(),
        other => return Err(format!("no parser for {other}")),
    };
    Ok(Fcall { tag, msg })
}

#[test]
fn requests_parse_back_from_their_text() {
    for line in [
        "Tversion tag 65535 msize 8192 version '9P2000'",
        "Tattach tag 1 fid 0 afid -1 uname glenda aname ",
        "Twalk tag 5 fid 308 newfid 296 nwname 2 0:tmp 1:usr",
        "Tcreate tag 3 fid 1 name x perm d-rwxr-xr-x mode 0",
        "Twrite tag 9 fid 1 offset 0 count 6 'hello\\n'",
        "Tlopen tag 11 fid 2 flags 0x98000",
        "Tmkdir tag 29 dfid 1 name newdir mode 0755 gid 500",
        "Twstat tag 4 fid 1 stat 'new' '' '' '' q (ffffffffffffffff 4294967295 dalAtL) m 037777777777 at 4294967295 mt 4294967295 l 18446744073709551615 t 65535 d 4294967295",
        "Twstat tag 4 fid 1 stat '' '' '' '' q (0000000000000001 0 ) m 0600 at 0 mt 0 l 0 t 0 d 0 ext '' nuid -1 ngid 50 nmuid -1",
    ] {
        let fcall = parse(line).unwrap();
        assert_eq!(fcall.to_string().trim_end(), line.trim_end());
    }
    assert!(glob(
        "Rread tag 1 count * '*'",
        "Rread tag 1 count 5 'hello'"
    ));
    assert!(!glob("Rread tag 1", "Rread tag 12"));
}
