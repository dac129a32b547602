//! What HTTP caches and resuming downloads check a file against: its ETag,
//! made from the qid as Plan 9's httpd makes it, and its modification
//! time; the preconditions (RFC 9110 §13) judged against them; and the
//! byte range asked for.
//!
//! A file of qid.version 0 is synthetic (its contents are made as it is
//! read, and its size says nothing), so it has no validators at all: no
//! ETag, no Last-Modified, no ranges, and every precondition on it fails
//! or is ignored as if nothing were known.

use std::ops::Range;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, Method, header};
use ninep_client::FileInfo;

/// A file's validators, if it has any.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Validators {
    /// The strong entity tag, quotes included.
    pub etag: Option<String>,
    /// The modification time, in whole seconds as HTTP dates carry it.
    pub modified: Option<SystemTime>,
}

impl Validators {
    /// The validators of a file with attributes `info`.
    pub fn of(info: &FileInfo) -> Validators {
        if info.qid.version == 0 {
            return Validators::default();
        }
        Validators {
            etag: tag(info).map(|tag| format!("\"{tag}\"")),
            modified: Some(UNIX_EPOCH + Duration::from_secs(info.mtime)),
        }
    }

    /// The Last-Modified header's value.
    pub fn last_modified(&self) -> Option<String> {
        self.modified.map(httpdate::fmt_http_date)
    }
}

/// The entity tag of a file, unquoted: `<qid.path hex>v<qid.version hex>`,
/// as Plan 9's httpd makes it; none for a synthetic file (qid.version 0).
pub fn tag(info: &FileInfo) -> Option<String> {
    let qid = info.qid;
    (qid.version != 0).then(|| format!("{:x}v{:x}", qid.path, qid.version))
}

/// What the preconditions of a request say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Carry out the request.
    Proceed,
    /// 304: the client's copy is current (GET and HEAD only).
    NotModified,
    /// 412: a condition the client set is false.
    Failed,
}

/// Judges If-Match, If-Unmodified-Since, If-None-Match and
/// If-Modified-Since in RFC 9110's order (§13.2.2).
pub fn preconditions(method: &Method, headers: &HeaderMap, v: &Validators) -> Precondition {
    let safe = method == Method::GET || method == Method::HEAD;
    if let Some(tags) = text(headers, header::IF_MATCH) {
        if !matches_any(tags, v.etag.as_deref(), true) {
            return Precondition::Failed;
        }
    } else if let Some(since) = date(headers, header::IF_UNMODIFIED_SINCE)
        && v.modified.is_none_or(|m| m > since)
    {
        return Precondition::Failed;
    }
    if let Some(tags) = text(headers, header::IF_NONE_MATCH) {
        if matches_any(tags, v.etag.as_deref(), false) {
            return if safe {
                Precondition::NotModified
            } else {
                Precondition::Failed
            };
        }
    } else if safe
        && let Some(since) = date(headers, header::IF_MODIFIED_SINCE)
        && v.modified.is_some_and(|m| m <= since)
    {
        return Precondition::NotModified;
    }
    Precondition::Proceed
}

/// What to send of a file of `len` bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ranged {
    /// The whole file (200): no Range, one that must be ignored, or several
    /// disjoint ranges (multipart/byteranges is not sent).
    Full,
    /// One range of it (206).
    Part(Range<u64>),
    /// 416: no range asked for overlaps the file.
    Unsatisfiable,
}

/// Most ranges one header may list; a longer list is ignored.
const MAX_RANGES: usize = 64;

/// The range a GET asks for, considering If-Range.
pub fn ranged(headers: &HeaderMap, v: &Validators, len: u64) -> Ranged {
    let Some(spec) = text(headers, header::RANGE) else {
        return Ranged::Full;
    };
    if v.etag.is_none() || !if_range_holds(headers, v) {
        return Ranged::Full;
    }
    parse_ranges(spec, len)
}

fn if_range_holds(headers: &HeaderMap, v: &Validators) -> bool {
    let Some(value) = text(headers, header::IF_RANGE) else {
        return true;
    };
    let value = value.trim();
    if value.starts_with('"') || value.starts_with("W/") {
        // Only a strong comparison may allow a range.
        return !value.starts_with("W/") && v.etag.as_deref() == Some(value);
    }
    httpdate::parse_http_date(value).is_ok_and(|d| v.modified == Some(d))
}

/// Parses `bytes=...` for a file of `len` bytes: ranges normalised (suffix
/// ranges made absolute, the ends clamped), overlapping and adjacent ones
/// merged.
pub fn parse_ranges(spec: &str, len: u64) -> Ranged {
    let Some((unit, list)) = spec.split_once('=') else {
        return Ranged::Full;
    };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Ranged::Full;
    }
    let mut ranges = Vec::new();
    for (i, one) in list.split(',').map(str::trim).enumerate() {
        if i == MAX_RANGES {
            return Ranged::Full;
        }
        let Some((first, last)) = one.split_once('-') else {
            return Ranged::Full;
        };
        let number = |s: &str| s.trim().parse::<u64>().ok();
        let range = match (first.trim().is_empty(), last.trim().is_empty()) {
            (true, false) => match number(last) {
                Some(n) => len.saturating_sub(n)..len,
                None => return Ranged::Full,
            },
            (false, true) => match number(first) {
                Some(a) => a..len,
                None => return Ranged::Full,
            },
            (false, false) => match (number(first), number(last)) {
                (Some(a), Some(b)) if a <= b => a..b.saturating_add(1).min(len),
                _ => return Ranged::Full,
            },
            (true, true) => return Ranged::Full,
        };
        if range.start < range.end {
            ranges.push(range);
        }
    }
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<u64>> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    match merged.len() {
        0 => Ranged::Unsatisfiable,
        1 => Ranged::Part(merged.remove(0)),
        _ => Ranged::Full,
    }
}

fn text(headers: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn date(headers: &HeaderMap, name: header::HeaderName) -> Option<SystemTime> {
    text(headers, name).and_then(|d| httpdate::parse_http_date(d).ok())
}

/// True if the list of entity tags `tags` (or `*`) matches `etag`: with
/// strong comparison for If-Match, weak for If-None-Match.
fn matches_any(tags: &str, etag: Option<&str>, strong: bool) -> bool {
    let Some(etag) = etag else {
        return false;
    };
    if tags.trim() == "*" {
        return true;
    }
    tags.split(',')
        .map(str::trim)
        .any(|tag| match tag.strip_prefix("W/") {
            Some(weak) => !strong && weak == etag,
            None => tag == etag,
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ninep_wire::Qid;

    fn validators() -> Validators {
        let info = FileInfo {
            qid: Qid {
                path: 0x2a,
                version: 3,
                ..Qid::default()
            },
            mtime: 1_700_000_000,
            ..FileInfo::default()
        };
        Validators::of(&info)
    }

    fn headers(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(name.clone(), value.parse().unwrap());
        }
        h
    }

    #[test]
    fn etag_is_the_qid() {
        assert_eq!(validators().etag.as_deref(), Some("\"2av3\""));
        assert_eq!(Validators::of(&FileInfo::default()), Validators::default());
    }

    #[test]
    fn preconditions_in_order() {
        let v = validators();
        let lm = v.last_modified().unwrap();
        let earlier = httpdate::fmt_http_date(UNIX_EPOCH + Duration::from_secs(1_600_000_000));
        let judge =
            |m: Method, h: &[(header::HeaderName, &str)]| preconditions(&m, &headers(h), &v);
        use Precondition::*;
        assert_eq!(judge(Method::GET, &[]), Proceed);
        assert_eq!(
            judge(Method::GET, &[(header::IF_NONE_MATCH, "\"2av3\"")]),
            NotModified
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_NONE_MATCH, "\"x\", W/\"2av3\"")]),
            NotModified
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_NONE_MATCH, "\"2av2\"")]),
            Proceed
        );
        assert_eq!(judge(Method::PUT, &[(header::IF_NONE_MATCH, "*")]), Failed);
        assert_eq!(
            judge(Method::GET, &[(header::IF_MODIFIED_SINCE, &lm)]),
            NotModified
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_MODIFIED_SINCE, &earlier)]),
            Proceed
        );
        // If-None-Match overrides If-Modified-Since.
        let both = [
            (header::IF_NONE_MATCH, "\"other\""),
            (header::IF_MODIFIED_SINCE, lm.as_str()),
        ];
        assert_eq!(judge(Method::GET, &both), Proceed);
        assert_eq!(
            judge(Method::GET, &[(header::IF_MATCH, "\"2av3\"")]),
            Proceed
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_MATCH, "W/\"2av3\"")]),
            Failed
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_MATCH, "\"2av2\"")]),
            Failed
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_UNMODIFIED_SINCE, &earlier)]),
            Failed
        );
        assert_eq!(
            judge(Method::GET, &[(header::IF_UNMODIFIED_SINCE, &lm)]),
            Proceed
        );
        // A synthetic file matches no tag, not even *.
        let none = Validators::default();
        assert_eq!(
            preconditions(&Method::GET, &headers(&[(header::IF_MATCH, "*")]), &none),
            Failed
        );
        assert_eq!(
            preconditions(
                &Method::GET,
                &headers(&[(header::IF_MODIFIED_SINCE, &lm)]),
                &none
            ),
            Proceed
        );
    }

    #[test]
    fn ranges() {
        use Ranged::*;
        assert_eq!(parse_ranges("bytes=0-99", 1000), Part(0..100));
        assert_eq!(parse_ranges("bytes=500-", 1000), Part(500..1000));
        assert_eq!(parse_ranges("bytes=-100", 1000), Part(900..1000));
        assert_eq!(parse_ranges("bytes=-5000", 1000), Part(0..1000));
        assert_eq!(parse_ranges("bytes=900-5000", 1000), Part(900..1000));
        assert_eq!(parse_ranges("bytes=0-9,5-20,21-30", 1000), Part(0..31));
        assert_eq!(parse_ranges("bytes=0-9,20-29", 1000), Full);
        assert_eq!(parse_ranges("bytes=1000-", 1000), Unsatisfiable);
        assert_eq!(parse_ranges("bytes=-0", 1000), Unsatisfiable);
        assert_eq!(parse_ranges("bytes=0-", 0), Unsatisfiable);
        assert_eq!(parse_ranges("bytes=5-1", 1000), Full);
        assert_eq!(parse_ranges("bytes=x-1", 1000), Full);
        assert_eq!(parse_ranges("items=0-1", 1000), Full);
    }

    #[test]
    fn if_range_allows_a_range_only_for_the_same_file() {
        let v = validators();
        let lm = v.last_modified().unwrap();
        let range = |if_range: &str| {
            ranged(
                &headers(&[(header::RANGE, "bytes=0-0"), (header::IF_RANGE, if_range)]),
                &v,
                10,
            )
        };
        assert_eq!(range("\"2av3\""), Ranged::Part(0..1));
        assert_eq!(range("\"2av2\""), Ranged::Full);
        assert_eq!(range("W/\"2av3\""), Ranged::Full);
        assert_eq!(range(&lm), Ranged::Part(0..1));
        assert_eq!(range("Thu, 01 Jan 1970 00:00:00 GMT"), Ranged::Full);
    }
}
