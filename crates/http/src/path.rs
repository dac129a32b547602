//! Request paths as 9P names: each segment percent-decoded and checked, so
//! that no request can walk outside the tree it was given.
//!
//! Segments are decoded one at a time, after the path is split on its
//! literal slashes, so `%2f` can never add a level; a segment that decodes
//! to `/`, NUL, `.`, `..` or bytes that are not UTF-8 is refused rather
//! than resolved, as is a path longer than the limit. Empty segments
//! (`a//b`) are dropped, as a shell drops them.

use ninep_wire::Name;
use percent_encoding::percent_decode_str;

/// A request's path, as the names to walk from the root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestPath {
    /// The names to walk, none for the root.
    pub names: Vec<Name>,
    /// True if the path ended in `/` (or was the root): a directory's URL.
    pub slash: bool,
}

/// Why a request path was refused (always 400).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadPath {
    /// Does not start with `/`.
    NotAbsolute,
    /// Longer than the limit, in bytes as sent.
    TooLong,
    /// A segment is `.` or `..`.
    Dots,
    /// A segment decodes to a slash, NUL, or bytes that are not UTF-8.
    BadByte,
    /// A segment is longer than a file name may be.
    NameTooLong,
}

impl std::fmt::Display for BadPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BadPath::NotAbsolute => "path does not start with /",
            BadPath::TooLong => "path too long",
            BadPath::Dots => "path has a . or .. segment",
            BadPath::BadByte => "path has an encoded slash, NUL or bytes that are not UTF-8",
            BadPath::NameTooLong => "path has a name too long for a file",
        })
    }
}

impl RequestPath {
    /// The path as one string, its names joined by slashes (which no name
    /// holds).
    pub fn joined(&self) -> String {
        let names: Vec<&str> = self.names.iter().map(Name::as_str).collect();
        names.join("/")
    }

    /// Parses `path` (a URI's path, still percent-encoded), at most
    /// `max_len` bytes long.
    pub fn parse(path: &str, max_len: usize) -> Result<RequestPath, BadPath> {
        if path.len() > max_len {
            return Err(BadPath::TooLong);
        }
        let rest = path.strip_prefix('/').ok_or(BadPath::NotAbsolute)?;
        let mut names = Vec::new();
        for segment in rest.split('/').filter(|s| !s.is_empty()) {
            let decoded = percent_decode_str(segment)
                .decode_utf8()
                .map_err(|_| BadPath::BadByte)?;
            if decoded == "." || decoded == ".." {
                return Err(BadPath::Dots);
            }
            let name = Name::new(decoded.into_owned()).map_err(|e| match e {
                ninep_wire::NameError::TooLong(_) => BadPath::NameTooLong,
                _ => BadPath::BadByte,
            })?;
            names.push(name);
        }
        Ok(RequestPath {
            slash: names.is_empty() || path.ends_with('/'),
            names,
        })
    }

    /// The last name, if the path is not the root.
    pub fn last(&self) -> Option<&str> {
        self.names.last().map(Name::as_str)
    }
}

/// `name` as one segment of a URL path: everything but the unreserved
/// characters percent-encoded, so that any file name makes a working link.
pub fn encode_segment(name: &str) -> String {
    use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
    const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'.')
        .remove(b'_')
        .remove(b'~');
    utf8_percent_encode(name, SEGMENT).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(path: &str) -> Vec<String> {
        let p = RequestPath::parse(path, 4096).unwrap();
        p.names.into_iter().map(Name::into_string).collect()
    }

    #[test]
    fn segments_are_decoded_one_by_one() {
        assert_eq!(names("/"), Vec::<String>::new());
        assert_eq!(names("/a//b/"), ["a", "b"]);
        assert_eq!(names("/a%20b/%C3%A9"), ["a b", "é"]);
        assert_eq!(names("/100%25"), ["100%"]);
        assert!(RequestPath::parse("/a/", 4096).unwrap().slash);
        assert!(!RequestPath::parse("/a", 4096).unwrap().slash);
    }

    #[test]
    fn escapes_are_refused() {
        let bad = |p| RequestPath::parse(p, 4096).unwrap_err();
        assert_eq!(bad("/../etc/passwd"), BadPath::Dots);
        assert_eq!(bad("/a/%2e%2e/b"), BadPath::Dots);
        assert_eq!(bad("/a/./b"), BadPath::Dots);
        assert_eq!(bad("/a%2fb"), BadPath::BadByte);
        assert_eq!(bad("/a%2Fb"), BadPath::BadByte);
        assert_eq!(bad("/a%00b"), BadPath::BadByte);
        assert_eq!(bad("/%ff"), BadPath::BadByte);
        assert_eq!(bad("a"), BadPath::NotAbsolute);
        assert_eq!(bad(&format!("/{}", "x".repeat(256))), BadPath::NameTooLong);
        assert_eq!(
            RequestPath::parse(&format!("/{}", "a/".repeat(100)), 100).unwrap_err(),
            BadPath::TooLong
        );
    }

    #[test]
    fn any_name_round_trips_through_a_link() {
        for name in ["a b", "100%", "x?y#z", "é", "a;b", "<tag>", "'\"", ":colon"] {
            let link = format!("/{}", encode_segment(name));
            assert_eq!(names(&link), [name]);
        }
    }
}
