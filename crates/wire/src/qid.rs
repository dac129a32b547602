//! The qid: the server's unique identity for a file.

use std::fmt;

/// A qid: `type[1] version[4] path[8]`.
///
/// Two files are the same iff their `path`s are equal; `version` changes when
/// the file does (0 conventionally means "synthetic, do not cache").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Qid {
    /// What kind of file: directory, append-only, ... ([`QidType`]).
    pub ty: QidType,
    /// Changes when the file does; 0 for files that are never cached.
    pub version: u32,
    /// Unique among the server's files.
    pub path: u64,
}

/// The type byte of a qid: the top byte of the file's Plan 9 mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct QidType(pub u8);

impl QidType {
    /// Directory.
    pub const DIR: QidType = QidType(0x80);
    /// Append-only file: every write goes to its end.
    pub const APPEND: QidType = QidType(0x40);
    /// Exclusive-use file: open by one client at a time.
    pub const EXCL: QidType = QidType(0x20);
    /// Mounted channel (Plan 9's kernel; not seen on the wire in practice).
    pub const MOUNT: QidType = QidType(0x10);
    /// Authentication file, made by Tauth.
    pub const AUTH: QidType = QidType(0x08);
    /// Temporary file, not backed up.
    pub const TMP: QidType = QidType(0x04);
    /// Symbolic link (9P2000.u and .L).
    pub const SYMLINK: QidType = QidType(0x02);
    /// Hard link (9P2000.u, Linux only).
    pub const LINK: QidType = QidType(0x01);
    /// Plain file.
    pub const FILE: QidType = QidType(0x00);

    /// True if every bit of `other` is set here.
    pub fn contains(self, other: QidType) -> bool {
        self.0 & other.0 == other.0
    }

    /// True for a directory.
    pub fn is_dir(self) -> bool {
        self.contains(QidType::DIR)
    }
}

impl std::ops::BitOr for QidType {
    type Output = QidType;
    fn bitor(self, rhs: QidType) -> QidType {
        QidType(self.0 | rhs.0)
    }
}

impl fmt::Display for QidType {
    /// Plan 9's letters: d(irectory) a(ppend) l(ocked, exclusive) A(uth),
    /// plus t(emporary) and L for a symbolic link.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (bit, letter) in [
            (QidType::DIR, 'd'),
            (QidType::APPEND, 'a'),
            (QidType::EXCL, 'l'),
            (QidType::AUTH, 'A'),
            (QidType::TMP, 't'),
            (QidType::SYMLINK, 'L'),
        ] {
            if self.contains(bit) {
                write!(f, "{letter}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Qid {
    /// `(path version type)` with the path as 16 hex digits, as Plan 9 prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:016x} {} {})", self.path, self.version, self.ty)
    }
}
