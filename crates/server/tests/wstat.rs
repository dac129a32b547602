//! Twstat in 9P2000 and 9P2000.u, as transcripts: what it may change (name,
//! mode, length, times, group), what it may not (type, dev, qid, muid), and
//! a stat that changes nothing asking for the file to be committed.

mod transcript;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use ninep_server::{Attr, Cx, Error, Filesystem, Result, SetAttr, SetTime, Time, User};
use ninep_wire::consts::unix::{S_IFDIR, S_IFMT, S_IFREG};
use ninep_wire::{Name, Qid, QidType};
use parking_lot::Mutex;
use transcript::{HELLO_9P2000, limits, play};

/// A root directory of files that are only attributes: a file is its qid
/// path, the root 0. Counts the Tfsyncs it is asked for.
struct Attrs {
    files: Mutex<Vec<Attr>>,
    fsyncs: Arc<AtomicUsize>,
}

fn attrs() -> (Attrs, Arc<AtomicUsize>) {
    let made = Time { sec: 1000, nsec: 0 };
    let attr = |path, name: &str, mode| Attr {
        qid: Qid {
            ty: if mode & S_IFMT == S_IFDIR {
                QidType::DIR
            } else {
                QidType::FILE
            },
            version: 0,
            path,
        },
        name: name.into(),
        mode,
        uid: "glenda".into(),
        gid: "glenda".into(),
        muid: "glenda".into(),
        n_uid: 1000,
        n_gid: 1000,
        nlink: 1,
        size: if mode & S_IFMT == S_IFDIR { 0 } else { 5 },
        atime: made,
        mtime: made,
        ctime: made,
        ..Attr::default()
    };
    let fsyncs = Arc::new(AtomicUsize::new(0));
    let fs = Attrs {
        files: Mutex::new(vec![
            attr(0, "/", S_IFDIR | 0o755),
            attr(1, "a", S_IFREG | 0o644),
        ]),
        fsyncs: fsyncs.clone(),
    };
    (fs, fsyncs)
}

impl Filesystem for Attrs {
    type File = u64;

    async fn attach(&self, _user: &User) -> Result<(u64, Qid)> {
        Ok((0, self.files.lock()[0].qid))
    }
    async fn walk(&self, _cx: &Cx, dir: &u64, name: &Name) -> Result<(u64, Qid)> {
        let files = self.files.lock();
        if name == ".." {
            return Ok((0, files[0].qid));
        }
        let found = files[1..]
            .iter()
            .find(|a| *dir == 0 && a.name == name.as_str());
        let attr = found.ok_or_else(Error::not_found)?;
        Ok((attr.qid.path, attr.qid))
    }
    async fn getattr(&self, _cx: &Cx, file: &u64) -> Result<Attr> {
        Ok(self.files.lock()[*file as usize].clone())
    }
    async fn setattr(&self, _cx: &Cx, file: &u64, set: &SetAttr) -> Result<()> {
        let mut files = self.files.lock();
        let attr = &mut files[*file as usize];
        if let Some(mode) = set.mode {
            attr.mode = attr.mode & S_IFMT | mode;
        }
        if let Some(size) = set.size {
            attr.size = size;
        }
        for (to, time) in [(&mut attr.atime, set.atime), (&mut attr.mtime, set.mtime)] {
            if let Some(SetTime::At(t)) = time {
                *to = t;
            }
        }
        if let Some(gid) = &set.gid_name {
            attr.gid = gid.clone();
        }
        if let Some(gid) = set.gid {
            attr.n_gid = gid;
        }
        Ok(())
    }
    async fn rename(&self, _cx: &Cx, file: &u64, _newdir: Option<&u64>, name: &Name) -> Result<()> {
        self.files.lock()[*file as usize].name = name.to_string();
        Ok(())
    }
    async fn fsync(&self, _cx: &Cx, _file: &u64, _datasync: bool) -> Result<()> {
        self.fsyncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

#[tokio::test]
async fn wstat_in_9p2000() {
    let (fs, fsyncs) = attrs();
    let script = format!(
        "{HELLO_9P2000}
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:a
        <- Rwalk tag 2 nwqid 1 0:(0000000000000001 0 )
        -> Tstat tag 3 fid 1
        <- Rstat tag 3 stat 'a' 'glenda' 'glenda' 'glenda' q (0000000000000001 0 ) m 0644 at 1000 mt 1000 l 5 t 0 d 0
        # a rename
        -> Twstat tag 4 fid 1 stat 'b' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rwstat tag 4
        -> Twalk tag 5 fid 0 newfid 2 nwname 1 0:b
        <- Rwalk tag 5 nwqid 1 0:(0000000000000001 0 )
        # mode, length, mtime and group at once
        -> Twstat tag 6 fid 1 stat '' '' 'sys' '' q (ffffffffffffffff -1 0xff) m 0600 at -1 mt 2000 l 3 t -1 d -1
        <- Rwstat tag 6
        -> Tstat tag 7 fid 2
        <- Rstat tag 7 stat 'b' 'glenda' 'sys' 'glenda' q (0000000000000001 0 ) m 0600 at 1000 mt 2000 l 3 t 0 d 0
        # what only the server sets is refused, and with it the whole stat:
        # the name stays b
        -> Twstat tag 8 fid 1 stat 'c' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t 0 d -1
        <- Rerror tag 8 ename wstat -- attempt to change type
        -> Twstat tag 9 fid 1 stat 'c' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d 0
        <- Rerror tag 9 ename wstat -- attempt to change dev
        # even to the qid the file has
        -> Twstat tag 10 fid 1 stat 'c' '' '' '' q (0000000000000001 0 ) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rerror tag 10 ename wstat -- attempt to change qid
        -> Twstat tag 11 fid 1 stat 'c' '' '' '' q (ffffffffffffffff 0 0xff) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rerror tag 11 ename wstat -- attempt to change qid
        -> Twstat tag 12 fid 1 stat 'c' '' '' 'glenda' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rerror tag 12 ename wstat -- attempt to change muid
        -> Twstat tag 13 fid 1 stat 'c' '' '' '' q (ffffffffffffffff -1 0xff) m 020000000600 at -1 mt -1 l -1 t -1 d -1
        <- Rerror tag 13 ename can't change directory bit
        -> Twstat tag 14 fid 1 stat 'c' 'adm' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rerror tag 14 ename can't change owner
        # a stat that changes nothing commits the file, and changes nothing
        -> Twstat tag 15 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1
        <- Rwstat tag 15
        -> Tstat tag 16 fid 1
        <- Rstat tag 16 stat 'b' 'glenda' 'sys' 'glenda' q (0000000000000001 0 ) m 0600 at 1000 mt 2000 l 3 t 0 d 0
        "
    );
    play(fs, limits(), &script).await;
    assert_eq!(fsyncs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn wstat_in_9p2000_u() {
    let (fs, fsyncs) = attrs();
    let script = "
        -> Tversion tag 65535 msize 8192 version '9P2000.u'
        <- Rversion tag 65535 msize 8192 version '9P2000.u'
        -> Tattach tag 1 fid 0 afid -1 uname glenda aname '' n_uname 1000
        <- Rattach tag 1 qid (0000000000000000 0 d)
        -> Twalk tag 2 fid 0 newfid 1 nwname 1 0:a
        <- Rwalk tag 2 nwqid 1 0:(0000000000000001 0 )
        # setuid, a group by number, a length and a new name
        -> Twstat tag 3 fid 1 stat 'b' '' '' '' q (ffffffffffffffff -1 0xff) m 02000700 at -1 mt -1 l 0 t -1 d -1 ext '' nuid -1 ngid 50 nmuid -1
        <- Rwstat tag 3
        -> Tstat tag 4 fid 1
        <- Rstat tag 4 stat 'b' 'glenda' 'glenda' 'glenda' q (0000000000000001 0 ) m 02000700 at 1000 mt 1000 l 0 t 0 d 0 ext '' nuid 1000 ngid 50 nmuid -1
        # refused: type, dev, qid, and muid by name or by number
        -> Twstat tag 5 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t 7 d -1 ext '' nuid -1 ngid -1 nmuid -1
        <- Rerror tag 5 ename wstat -- attempt to change type errno 1
        -> Twstat tag 6 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d 7 ext '' nuid -1 ngid -1 nmuid -1
        <- Rerror tag 6 ename wstat -- attempt to change dev errno 1
        -> Twstat tag 7 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0x00) m -1 at -1 mt -1 l -1 t -1 d -1 ext '' nuid -1 ngid -1 nmuid -1
        <- Rerror tag 7 ename wstat -- attempt to change qid errno 1
        -> Twstat tag 8 fid 1 stat '' '' '' 'glenda' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1 ext '' nuid -1 ngid -1 nmuid -1
        <- Rerror tag 8 ename wstat -- attempt to change muid errno 1
        -> Twstat tag 9 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1 ext '' nuid -1 ngid -1 nmuid 1000
        <- Rerror tag 9 ename wstat -- attempt to change muid errno 1
        # and the stat that changes nothing commits the file
        -> Twstat tag 10 fid 1 stat '' '' '' '' q (ffffffffffffffff -1 0xff) m -1 at -1 mt -1 l -1 t -1 d -1 ext '' nuid -1 ngid -1 nmuid -1
        <- Rwstat tag 10
        -> Tstat tag 11 fid 1
        <- Rstat tag 11 stat 'b' 'glenda' 'glenda' 'glenda' q (0000000000000001 0 ) m 02000700 at 1000 mt 1000 l 0 t 0 d 0 ext '' nuid 1000 ngid 50 nmuid -1
    ";
    play(fs, limits(), script).await;
    assert_eq!(fsyncs.load(Ordering::SeqCst), 1);
}
