//! File names: one path element, validated where it enters.

use std::fmt;
use std::ops::Deref;

/// Longest file name accepted, in bytes: Linux's NAME_MAX, which every host
/// file system under a 9P export imposes anyway.
pub const MAX_NAME_LEN: usize = 255;

/// One path element as it appears in Twalk, Tcreate, Tlcreate and the other
/// messages that name a file in a directory, and in directory entries.
///
/// Valid by construction: UTF-8, no `/`, no NUL, at most [`MAX_NAME_LEN`]
/// bytes. So a handler never sees a name that could climb out of a directory
/// by itself. The empty name, `.` and `..` are valid encodings; whether they
/// mean anything is for the server to decide (`..` in Twalk is the parent).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Name(String);

/// Why a string is not a valid [`Name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameError {
    /// Contains `/`.
    Slash,
    /// Contains NUL.
    Nul,
    /// Longer than [`MAX_NAME_LEN`] bytes.
    TooLong(usize),
    /// Empty, `.` or `..`: valid in a walk, but never the name of a new
    /// file or a rename's target.
    NotAnEntry,
}

impl Name {
    /// Checks `name` and wraps it.
    pub fn new(name: impl Into<String>) -> Result<Name, NameError> {
        let name = name.into();
        Self::check(&name)?;
        Ok(Name(name))
    }

    /// Checks that `name` can name a new directory entry (a file to create,
    /// link or rename to): a valid name that is not empty, `.` or `..`.
    pub fn entry(name: impl Into<String>) -> Result<Name, NameError> {
        let name = Self::new(name)?;
        name.check_entry()?;
        Ok(name)
    }

    /// For a name already decoded: fails unless it can name a new directory
    /// entry, as [`Name::entry`] checks.
    pub fn check_entry(&self) -> Result<(), NameError> {
        if self.0.is_empty() || self.is_dot_or_dotdot() {
            return Err(NameError::NotAnEntry);
        }
        Ok(())
    }

    pub(crate) fn check(name: &str) -> Result<(), NameError> {
        if name.len() > MAX_NAME_LEN {
            Err(NameError::TooLong(name.len()))
        } else if name.contains('/') {
            Err(NameError::Slash)
        } else if name.contains('\0') {
            Err(NameError::Nul)
        } else {
            Ok(())
        }
    }

    /// The name as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The name as an owned string.
    pub fn into_string(self) -> String {
        self.0
    }

    /// True for `.` and `..`, which never name a new file.
    pub fn is_dot_or_dotdot(&self) -> bool {
        self.0 == "." || self.0 == ".."
    }
}

/// The names of a slash-separated path, empty elements and `.` dropped
/// (`..` is kept: what it means is the walk's to decide).
pub fn split_path(path: &str) -> Result<Vec<Name>, NameError> {
    path.split('/')
        .filter(|e| !e.is_empty() && *e != ".")
        .map(Name::new)
        .collect()
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl TryFrom<&str> for Name {
    type Error = NameError;
    fn try_from(s: &str) -> Result<Name, NameError> {
        Name::new(s)
    }
}

impl TryFrom<String> for Name {
    type Error = NameError;
    fn try_from(s: String) -> Result<Name, NameError> {
        Name::new(s)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl NameError {
    /// The errno Linux gives for such a name.
    pub fn errno(self) -> crate::Errno {
        match self {
            NameError::TooLong(_) => crate::Errno::ENAMETOOLONG,
            NameError::Slash | NameError::Nul | NameError::NotAnEntry => crate::Errno::EINVAL,
        }
    }
}

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::Slash => write!(f, "name contains '/'"),
            NameError::Nul => write!(f, "name contains NUL"),
            NameError::TooLong(n) => write!(f, "name of {n} bytes is too long"),
            NameError::NotAnEntry => write!(f, "illegal name"),
        }
    }
}

impl std::error::Error for NameError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(Name::new("usr").is_ok());
        assert!(Name::new("").is_ok());
        assert!(Name::new("..").unwrap().is_dot_or_dotdot());
        for reserved in ["", ".", ".."] {
            assert_eq!(Name::entry(reserved), Err(NameError::NotAnEntry));
        }
        assert_eq!(Name::entry("..."), Name::new("..."));
        assert_eq!(Name::entry("a/b"), Err(NameError::Slash));
        let names = split_path("/a//./b/../").unwrap();
        assert_eq!(names, ["a", "b", ".."].map(|n| Name::new(n).unwrap()));
        assert_eq!(split_path("a/\0"), Err(NameError::Nul));
        assert!(Name::new("日本語").is_ok());
        assert_eq!(Name::new("a/b"), Err(NameError::Slash));
        assert_eq!(Name::new("/"), Err(NameError::Slash));
        assert_eq!(Name::new("a\0b"), Err(NameError::Nul));
        assert!(Name::new("x".repeat(MAX_NAME_LEN)).is_ok());
        assert_eq!(
            Name::new("x".repeat(MAX_NAME_LEN + 1)),
            Err(NameError::TooLong(MAX_NAME_LEN + 1))
        );
    }
}
