//! Directory entries: the 9P2000/.u stat (Rstat, Twstat, directory reads) and
//! the 9P2000.L dirent (Rreaddir).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{DecodeError, DecodeErrorKind, EncodeError};
use crate::field::{Field, Reader, put_str, rebase};
use crate::{Dialect, NONUNAME, Name, Qid};

/// A 9P2000 stat, with the 9P2000.u fields that follow it.
///
/// The `.u` fields are on the wire only in 9P2000.u; decoded in another dialect
/// they read as "unknown": an empty extension and [`NONUNAME`] ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stat {
    /// Server type, for kernel use.
    pub ty: u16,
    /// Server subtype, for kernel use.
    pub dev: u32,
    /// The file's qid.
    pub qid: Qid,
    /// Permission bits and `DM*` flags (see [`crate::consts::mode`]).
    pub mode: u32,
    /// Last access, in seconds since the epoch.
    pub atime: u32,
    /// Last modification, in seconds since the epoch.
    pub mtime: u32,
    /// Length in bytes (0 for directories).
    pub length: u64,
    /// The last path element; `/` for a server's root.
    pub name: String,
    /// Owner's name.
    pub uid: String,
    /// Group's name.
    pub gid: String,
    /// Name of the user who last modified the file.
    pub muid: String,
    /// 9P2000.u: symlink target, device numbers, and so on.
    pub extension: String,
    /// 9P2000.u: numeric owner.
    pub n_uid: u32,
    /// 9P2000.u: numeric group.
    pub n_gid: u32,
    /// 9P2000.u: numeric id of the last modifier.
    pub n_muid: u32,
}

/// Fixed bytes of a 9P2000 stat after its `size[2]`.
const STAT_FIXED: usize = 2 + 4 + 13 + 4 + 4 + 4 + 8 + 4 * 2;
/// What 9P2000.u adds: `extension[s] n_uid[4] n_gid[4] n_muid[4]`.
const STAT_U_FIXED: usize = 2 + 3 * 4;

impl Default for Stat {
    fn default() -> Self {
        Stat {
            ty: 0,
            dev: 0,
            qid: Qid::default(),
            mode: 0,
            atime: 0,
            mtime: 0,
            length: 0,
            name: String::new(),
            uid: String::new(),
            gid: String::new(),
            muid: String::new(),
            extension: String::new(),
            n_uid: NONUNAME,
            n_gid: NONUNAME,
            n_muid: NONUNAME,
        }
    }
}

impl Stat {
    /// A Twstat stat that changes nothing: every integer all ones, every
    /// string empty. Set the fields to change; sent as is, it asks the server
    /// to commit the file to stable storage.
    pub fn dont_touch() -> Stat {
        Stat {
            ty: !0,
            dev: !0,
            qid: Qid {
                ty: crate::QidType(!0),
                version: !0,
                path: !0,
            },
            mode: !0,
            atime: !0,
            mtime: !0,
            length: !0,
            ..Stat::default()
        }
    }

    /// The value of the stat's own `size[2]`: its length after that field.
    pub fn encoded_len(&self, dialect: Dialect) -> usize {
        let strings = self.name.len() + self.uid.len() + self.gid.len() + self.muid.len();
        let u = if dialect.is_u() {
            STAT_U_FIXED + self.extension.len()
        } else {
            0
        };
        STAT_FIXED + strings + u
    }

    /// Appends the stat as it appears in a directory read: `size[2]` first.
    pub fn encode_entry(&self, buf: &mut BytesMut, dialect: Dialect) -> Result<(), EncodeError> {
        let len = self.encoded_len(dialect);
        let size = u16::try_from(len).map_err(|_| EncodeError::StatTooLarge(len))?;
        let start = buf.len();
        buf.reserve(2 + len);
        buf.put_u16_le(size);
        buf.put_u16_le(self.ty);
        buf.put_u32_le(self.dev);
        buf.put_u8(self.qid.ty.0);
        buf.put_u32_le(self.qid.version);
        buf.put_u64_le(self.qid.path);
        buf.put_u32_le(self.mode);
        buf.put_u32_le(self.atime);
        buf.put_u32_le(self.mtime);
        buf.put_u64_le(self.length);
        let strings = [&self.name, &self.uid, &self.gid, &self.muid];
        let result = strings
            .iter()
            .try_for_each(|s| put_str(buf, s))
            .and_then(|()| {
                if dialect.is_u() {
                    put_str(buf, &self.extension)?;
                    buf.put_u32_le(self.n_uid);
                    buf.put_u32_le(self.n_gid);
                    buf.put_u32_le(self.n_muid);
                }
                Ok(())
            });
        if result.is_err() {
            buf.truncate(start);
        }
        result
    }

    /// Reads one `size[2]`-prefixed stat; the strings must fill `size` exactly.
    pub(crate) fn decode_entry(r: &mut Reader) -> Result<Stat, DecodeError> {
        let at = r.pos();
        let size = u16::decode(r)? as usize;
        let base = r.pos();
        let mut s = r.sub(size)?;
        let stat = Self::decode_fields(&mut s).map_err(|e| match e.kind {
            // The frame holds all `size` bytes, so running out inside them
            // means the size field is too small for the strings it covers.
            DecodeErrorKind::Truncated => DecodeError::new(DecodeErrorKind::BadStatSize, at),
            _ => rebase(e, base),
        })?;
        if s.remaining() != 0 {
            return Err(DecodeError::new(DecodeErrorKind::BadStatSize, at));
        }
        Ok(stat)
    }

    fn decode_fields(r: &mut Reader) -> Result<Stat, DecodeError> {
        let mut stat = Stat {
            ty: Field::decode(r)?,
            dev: Field::decode(r)?,
            qid: Field::decode(r)?,
            mode: Field::decode(r)?,
            atime: Field::decode(r)?,
            mtime: Field::decode(r)?,
            length: Field::decode(r)?,
            name: Field::decode(r)?,
            uid: Field::decode(r)?,
            gid: Field::decode(r)?,
            muid: Field::decode(r)?,
            ..Stat::default()
        };
        if r.dialect.is_u() {
            stat.extension = Field::decode(r)?;
            stat.n_uid = Field::decode(r)?;
            stat.n_gid = Field::decode(r)?;
            stat.n_muid = Field::decode(r)?;
        }
        Ok(stat)
    }

    /// The stats packed in the data of a 9P2000 or 9P2000.u directory Rread.
    pub fn entries(data: &Bytes, dialect: Dialect) -> StatIter {
        StatIter {
            r: Reader::new(data.clone(), 0, dialect),
        }
    }
}

/// The stats in a directory read's data, in order; a malformed one ends the
/// iteration with its error.
#[derive(Debug)]
pub struct StatIter {
    r: Reader,
}

impl Iterator for StatIter {
    type Item = Result<Stat, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.r.remaining() == 0 {
            return None;
        }
        let item = Stat::decode_entry(&mut self.r);
        if item.is_err() {
            self.r.skip_rest();
        }
        Some(item)
    }
}

/// A 9P2000.L directory entry: `qid[13] offset[8] type[1] name[s]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirent {
    /// The file's qid.
    pub qid: Qid,
    /// Resume cookie: the Treaddir offset that continues after this entry.
    pub offset: u64,
    /// Linux `d_type` (DT_DIR 4, DT_REG 8, DT_LNK 10, ...).
    pub ty: u8,
    /// The entry's name.
    pub name: Name,
}

impl Dirent {
    /// Bytes this entry takes in an Rreaddir.
    pub fn encoded_len(&self) -> usize {
        13 + 8 + 1 + 2 + self.name.len()
    }

    /// Appends the entry to Rreaddir data.
    pub fn encode(&self, buf: &mut BytesMut) {
        buf.reserve(self.encoded_len());
        buf.put_u8(self.qid.ty.0);
        buf.put_u32_le(self.qid.version);
        buf.put_u64_le(self.qid.path);
        buf.put_u64_le(self.offset);
        buf.put_u8(self.ty);
        // A Name is at most MAX_NAME_LEN bytes, well within a len[2].
        buf.put_u16_le(self.name.len() as u16);
        buf.put_slice(self.name.as_bytes());
    }

    /// The entries packed in Rreaddir data.
    pub fn entries(data: &Bytes) -> DirentIter {
        DirentIter {
            r: Reader::new(data.clone(), 0, Dialect::L),
        }
    }

    fn decode(r: &mut Reader) -> Result<Dirent, DecodeError> {
        Ok(Dirent {
            qid: Field::decode(r)?,
            offset: Field::decode(r)?,
            ty: Field::decode(r)?,
            name: Field::decode(r)?,
        })
    }
}

/// The dirents in Rreaddir data, in order; a malformed one ends the iteration
/// with its error.
#[derive(Debug)]
pub struct DirentIter {
    r: Reader,
}

impl Iterator for DirentIter {
    type Item = Result<Dirent, DecodeError>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.r.remaining() == 0 {
            return None;
        }
        let item = Dirent::decode(&mut self.r);
        if item.is_err() {
            self.r.skip_rest();
        }
        Some(item)
    }
}
