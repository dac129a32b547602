//! Plan 9's text form of a message, as plan9port's `fcallfmt` and u9fs print
//! it (`Twalk tag 5 fid 308 newfid 296 nwname 2 0:tmp 1:usr`), extended in
//! the same style to the 9P2000.u and 9P2000.L messages.
//!
//! One message is always one line: control characters in names and data are
//! escaped, so a hostile name cannot forge trace lines on a terminal.

use std::fmt::{self, Display, Formatter, Write};

use crate::consts::mode::*;
use crate::{Dirent, Fcall, Msg, NONUNAME, Stat};

/// Most bytes of a payload shown, as Plan 9's `dumpsome` (DUMPL).
const DUMP_LIMIT: usize = 64;

/// A string as Plan 9 prints it: bare, with control characters (and the
/// Unicode line and paragraph separators, which end lines too) escaped.
struct Text<'a>(&'a str);

impl Display for Text<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for c in self.0.chars() {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                write!(f, "{}", c.escape_debug())?;
            } else {
                f.write_char(c)?;
            }
        }
        Ok(())
    }
}

/// A payload: quoted text if its first bytes are printable, else hex in
/// groups of four bytes; at most [`DUMP_LIMIT`] bytes, then `...`.
struct Dump<'a>(&'a [u8]);

impl Display for Dump<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let shown = &self.0[..self.0.len().min(DUMP_LIMIT)];
        let printable = shown
            .iter()
            .all(|&b| (32..127).contains(&b) || b == b'\n' || b == b'\t');
        f.write_char('\'')?;
        if printable {
            for &b in shown {
                match b {
                    b'\n' => f.write_str("\\n")?,
                    b'\t' => f.write_str("\\t")?,
                    _ => f.write_char(b as char)?,
                }
            }
        } else {
            for (i, b) in shown.iter().enumerate() {
                if i > 0 && i % 4 == 0 {
                    f.write_char(' ')?;
                }
                write!(f, "{b:02x}")?;
            }
        }
        if shown.len() < self.0.len() {
            f.write_str("...")?;
        }
        f.write_char('\'')
    }
}

/// An octal number as C's `%#o` prints it: `0644`, and `0` for zero.
struct Octal(u32);

impl Display for Octal {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0 == 0 {
            f.write_char('0')
        } else {
            write!(f, "0{:o}", self.0)
        }
    }
}

/// A Plan 9 mode as `ls -l` shows it: `d-rwxr-xr-x`.
pub(crate) struct PlanMode(pub(crate) u32);

impl Display for PlanMode {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let m = self.0;
        f.write_char(if m & DMDIR != 0 {
            'd'
        } else if m & DMAPPEND != 0 {
            'a'
        } else if m & DMAUTH != 0 {
            'A'
        } else {
            '-'
        })?;
        f.write_char(if m & DMEXCL != 0 { 'l' } else { '-' })?;
        for shift in [6, 3, 0] {
            let bits = (m >> shift) & 7;
            f.write_char(if bits & 4 != 0 { 'r' } else { '-' })?;
            f.write_char(if bits & 2 != 0 { 'w' } else { '-' })?;
            f.write_char(if bits & 1 != 0 { 'x' } else { '-' })?;
        }
        Ok(())
    }
}

impl Display for Stat {
    /// Plan 9's `dirfmt`, plus the 9P2000.u fields when any is set.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "'{}' '{}' '{}' '{}' q {} m {} at {} mt {} l {} t {} d {}",
            Text(&self.name),
            Text(&self.uid),
            Text(&self.gid),
            Text(&self.muid),
            self.qid,
            Octal(self.mode),
            self.atime,
            self.mtime,
            self.length,
            self.ty,
            self.dev
        )?;
        let unset = [self.n_uid, self.n_gid, self.n_muid] == [NONUNAME; 3];
        if !self.extension.is_empty() || !unset {
            write!(
                f,
                " ext '{}' nuid {} ngid {} nmuid {}",
                Text(&self.extension),
                self.n_uid as i32,
                self.n_gid as i32,
                self.n_muid as i32
            )?;
        }
        Ok(())
    }
}

impl Display for Dirent {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} off {} type {}",
            Text(&self.name),
            self.qid,
            self.offset,
            self.ty
        )
    }
}

/// ` n_uname N`, shown only when set (it is absent in 9P2000).
struct NUname(u32);

impl Display for NUname {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        if self.0 != NONUNAME {
            write!(f, " n_uname {}", self.0)?;
        }
        Ok(())
    }
}

impl Display for Fcall {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let tag = self.tag;
        let name = self.msg.name();
        write!(f, "{name} tag {tag}")?;
        match &self.msg {
            Msg::Tversion(m) => write!(f, " msize {} version '{}'", m.msize, Text(&m.version)),
            Msg::Rversion(m) => write!(f, " msize {} version '{}'", m.msize, Text(&m.version)),
            Msg::Tauth(m) => write!(
                f,
                " afid {} uname {} aname {}{}",
                m.afid,
                Text(&m.uname),
                Text(&m.aname),
                NUname(m.n_uname)
            ),
            Msg::Rauth(m) => write!(f, " qid {}", m.aqid),
            Msg::Tattach(m) => write!(
                f,
                " fid {} afid {} uname {} aname {}{}",
                m.fid,
                m.afid,
                Text(&m.uname),
                Text(&m.aname),
                NUname(m.n_uname)
            ),
            Msg::Rattach(m) => write!(f, " qid {}", m.qid),
            Msg::Rerror(m) => {
                write!(f, " ename {}", Text(&m.ename))?;
                if m.errno != 0 {
                    write!(f, " errno {}", m.errno)?;
                }
                Ok(())
            }
            Msg::Tflush(m) => write!(f, " oldtag {}", m.oldtag),
            Msg::Twalk(m) => {
                write!(
                    f,
                    " fid {} newfid {} nwname {}",
                    m.fid,
                    m.newfid,
                    m.wname.len()
                )?;
                for (i, name) in m.wname.iter().enumerate() {
                    write!(f, " {i}:{}", Text(name))?;
                }
                Ok(())
            }
            Msg::Rwalk(m) => {
                write!(f, " nwqid {}", m.wqid.len())?;
                for (i, qid) in m.wqid.iter().enumerate() {
                    write!(f, " {i}:{qid}")?;
                }
                Ok(())
            }
            Msg::Topen(m) => write!(f, " fid {} mode {}", m.fid, m.mode),
            Msg::Ropen(m) => write!(f, " qid {} iounit {}", m.qid, m.iounit),
            Msg::Tcreate(m) => {
                write!(
                    f,
                    " fid {} name {} perm {} mode {}",
                    m.fid,
                    Text(&m.name),
                    PlanMode(m.perm),
                    m.mode
                )?;
                if m.perm & !(DMDIR | DMAPPEND | DMEXCL | DMAUTH | DMTMP | 0o777) != 0 {
                    write!(f, " perm_bits {:#x}", m.perm)?;
                }
                if !m.extension.is_empty() {
                    write!(f, " ext '{}'", Text(&m.extension))?;
                }
                Ok(())
            }
            Msg::Rcreate(m) => write!(f, " qid {} iounit {}", m.qid, m.iounit),
            Msg::Tread(m) => write!(f, " fid {} offset {} count {}", m.fid, m.offset, m.count),
            Msg::Rread(m) => write!(f, " count {} {}", m.data.len(), Dump(&m.data)),
            Msg::Twrite(m) => write!(
                f,
                " fid {} offset {} count {} {}",
                m.fid,
                m.offset,
                m.data.len(),
                Dump(&m.data)
            ),
            Msg::Rwrite(m) => write!(f, " count {}", m.count),
            Msg::Tclunk(m) => write!(f, " fid {}", m.fid),
            Msg::Tremove(m) => write!(f, " fid {}", m.fid),
            Msg::Tstat(m) => write!(f, " fid {}", m.fid),
            Msg::Rstat(m) => write!(f, " stat {}", m.stat),
            Msg::Twstat(m) => write!(f, " fid {} stat {}", m.fid, m.stat),
            Msg::Rflush(_)
            | Msg::Rclunk(_)
            | Msg::Rremove(_)
            | Msg::Rwstat(_)
            | Msg::Rrename(_)
            | Msg::Rsetattr(_)
            | Msg::Rxattrcreate(_)
            | Msg::Rfsync(_)
            | Msg::Rlink(_)
            | Msg::Rrenameat(_)
            | Msg::Runlinkat(_) => Ok(()),

            Msg::Rlerror(m) => write!(f, " ecode {}", m.ecode),
            Msg::Tstatfs(m) => write!(f, " fid {}", m.fid),
            Msg::Rstatfs(m) => write!(
                f,
                " type {:#x} bsize {} blocks {} bfree {} bavail {} files {} ffree {} fsid {:#x} namelen {}",
                m.ty, m.bsize, m.blocks, m.bfree, m.bavail, m.files, m.ffree, m.fsid, m.namelen
            ),
            Msg::Tlopen(m) => write!(f, " fid {} flags {:#x}", m.fid, m.flags),
            Msg::Rlopen(m) => write!(f, " qid {} iounit {}", m.qid, m.iounit),
            Msg::Tlcreate(m) => write!(
                f,
                " fid {} name {} flags {:#x} mode {} gid {}",
                m.fid,
                Text(&m.name),
                m.flags,
                Octal(m.mode),
                m.gid
            ),
            Msg::Rlcreate(m) => write!(f, " qid {} iounit {}", m.qid, m.iounit),
            Msg::Tsymlink(m) => write!(
                f,
                " fid {} name {} symtgt {} gid {}",
                m.fid,
                Text(&m.name),
                Text(&m.symtgt),
                m.gid
            ),
            Msg::Rsymlink(m) => write!(f, " qid {}", m.qid),
            Msg::Tmknod(m) => write!(
                f,
                " dfid {} name {} mode {} major {} minor {} gid {}",
                m.dfid,
                Text(&m.name),
                Octal(m.mode),
                m.major,
                m.minor,
                m.gid
            ),
            Msg::Rmknod(m) => write!(f, " qid {}", m.qid),
            Msg::Trename(m) => write!(f, " fid {} dfid {} name {}", m.fid, m.dfid, Text(&m.name)),
            Msg::Treadlink(m) => write!(f, " fid {}", m.fid),
            Msg::Rreadlink(m) => write!(f, " target {}", Text(&m.target)),
            Msg::Tgetattr(m) => write!(f, " fid {} request_mask {:#x}", m.fid, m.request_mask),
            Msg::Rgetattr(m) => write!(
                f,
                " valid {:#x} qid {} mode {} uid {} gid {} nlink {} rdev {:#x} size {} \
                 blksize {} blocks {} atime {}.{:09} mtime {}.{:09} ctime {}.{:09} \
                 btime {}.{:09} gen {} data_version {}",
                m.valid,
                m.qid,
                Octal(m.mode),
                m.uid,
                m.gid,
                m.nlink,
                m.rdev,
                m.size,
                m.blksize,
                m.blocks,
                m.atime_sec,
                m.atime_nsec,
                m.mtime_sec,
                m.mtime_nsec,
                m.ctime_sec,
                m.ctime_nsec,
                m.btime_sec,
                m.btime_nsec,
                m.generation,
                m.data_version
            ),
            Msg::Tsetattr(m) => write!(
                f,
                " fid {} valid {:#x} mode {} uid {} gid {} size {} atime {}.{:09} mtime {}.{:09}",
                m.fid,
                m.valid,
                Octal(m.mode),
                m.uid,
                m.gid,
                m.size,
                m.atime_sec,
                m.atime_nsec,
                m.mtime_sec,
                m.mtime_nsec
            ),
            Msg::Txattrwalk(m) => write!(
                f,
                " fid {} newfid {} name {}",
                m.fid,
                m.newfid,
                Text(&m.name)
            ),
            Msg::Rxattrwalk(m) => write!(f, " size {}", m.size),
            Msg::Txattrcreate(m) => write!(
                f,
                " fid {} name {} attr_size {} flags {}",
                m.fid,
                Text(&m.name),
                m.attr_size,
                m.flags
            ),
            Msg::Treaddir(m) => write!(f, " fid {} offset {} count {}", m.fid, m.offset, m.count),
            Msg::Rreaddir(m) => {
                write!(f, " count {}", m.data.len())?;
                for (i, entry) in Dirent::entries(&m.data).enumerate() {
                    match entry {
                        Ok(d) => write!(f, " {i}:{}", Text(&d.name))?,
                        Err(e) => write!(f, " {i}:<{}>", e.kind)?,
                    }
                }
                Ok(())
            }
            Msg::Tfsync(m) => {
                write!(f, " fid {}", m.fid)?;
                if let Some(d) = m.datasync {
                    write!(f, " datasync {d}")?;
                }
                Ok(())
            }
            Msg::Tlock(m) => write!(
                f,
                " fid {} type {} flags {} start {} length {} proc_id {} client_id {}",
                m.fid,
                m.ty,
                m.flags,
                m.start,
                m.length,
                m.proc_id,
                Text(&m.client_id)
            ),
            Msg::Rlock(m) => write!(f, " status {}", m.status),
            Msg::Tgetlock(m) => write!(
                f,
                " fid {} type {} start {} length {} proc_id {} client_id {}",
                m.fid,
                m.ty,
                m.start,
                m.length,
                m.proc_id,
                Text(&m.client_id)
            ),
            Msg::Rgetlock(m) => write!(
                f,
                " type {} start {} length {} proc_id {} client_id {}",
                m.ty,
                m.start,
                m.length,
                m.proc_id,
                Text(&m.client_id)
            ),
            Msg::Tlink(m) => write!(f, " dfid {} fid {} name {}", m.dfid, m.fid, Text(&m.name)),
            Msg::Tmkdir(m) => write!(
                f,
                " dfid {} name {} mode {} gid {}",
                m.dfid,
                Text(&m.name),
                Octal(m.mode),
                m.gid
            ),
            Msg::Rmkdir(m) => write!(f, " qid {}", m.qid),
            Msg::Trenameat(m) => write!(
                f,
                " olddirfid {} oldname {} newdirfid {} newname {}",
                m.olddirfid,
                Text(&m.oldname),
                m.newdirfid,
                Text(&m.newname)
            ),
            Msg::Tunlinkat(m) => write!(
                f,
                " dirfid {} name {} flags {:#x}",
                m.dirfid,
                Text(&m.name),
                m.flags
            ),

            Msg::Tsread(m) => write!(
                f,
                " fid {} offset {} count {} credit {}",
                m.fid, m.offset, m.count as i64, m.credit
            ),
            Msg::Rsread(m) => write!(f, " count {} {}", m.data.len(), Dump(&m.data)),
            Msg::Tswrite(m) => write!(f, " fid {} offset {}", m.fid, m.offset),
            Msg::Rswrite(m) => write!(f, " count {}", m.count),
            Msg::Tsdata(m) => write!(f, " count {} {}", m.data.len(), Dump(&m.data)),
            Msg::Rscredit(m) => write!(f, " credit {}", m.credit),
            Msg::Tscredit(m) => write!(f, " credit {}", m.credit),

            Msg::Tsession(_) => Ok(()),
            Msg::Rsession(m) => write!(f, " token {}", m.token),
            Msg::Tresume(m) => write!(f, " token {}", m.token),
            Msg::Rresume(m) => write!(
                f,
                " received {} held {} token {}",
                m.received, m.held, m.token
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dump_is_text_or_hex() {
        assert_eq!(Dump(b"hello\n").to_string(), "'hello\\n'");
        assert_eq!(Dump(b"test\0\0\0\0").to_string(), "'74657374 00000000'");
        assert_eq!(Dump(&[0u8; 100]).to_string().matches(' ').count(), 15);
        assert!(Dump(&[b'a'; 65]).to_string().ends_with("...'"));
        assert_eq!(Dump(b"").to_string(), "''");
    }

    #[test]
    fn text_escapes_control_characters() {
        assert_eq!(Text("a\nb\x1b").to_string(), "a\\nb\\u{1b}");
        assert_eq!(Text("x\u{2028}y").to_string(), "x\\u{2028}y");
        assert_eq!(Text("naïve").to_string(), "naïve");
    }

    #[test]
    fn plan9_modes() {
        assert_eq!(PlanMode(DMDIR | 0o755).to_string(), "d-rwxr-xr-x");
        assert_eq!(
            PlanMode(DMAPPEND | DMEXCL | 0o620).to_string(),
            "alrw--w----"
        );
        assert_eq!(PlanMode(0o644).to_string(), "--rw-r--r--");
    }
}
