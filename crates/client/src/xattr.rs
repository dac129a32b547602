//! Extended attributes (9P2000.L): Txattrwalk makes a fid whose contents are
//! an attribute's value (or, for the empty name, the list of names);
//! Txattrcreate turns a fid into one whose writes become a value, set when
//! it is clunked.

use bytes::Bytes;
use ninep_wire::consts::dotl::XATTR_REPLACE;
use ninep_wire::*;

use crate::error::Error;
use crate::file::File;
use crate::fsys::Fid;

/// Linux's largest attribute value (XATTR_SIZE_MAX).
const MAX_VALUE: u64 = 64 * 1024;

impl Fid {
    /// The value of the attribute `name`.
    pub async fn xattr(&self, name: &str) -> Result<Bytes, Error> {
        self.xattr_read(name).await
    }

    /// The names of the file's attributes, each ended by a NUL, as
    /// listxattr(2) gives them.
    pub async fn xattr_names(&self) -> Result<Bytes, Error> {
        self.xattr_read("").await
    }

    /// Sets the attribute `name`; `flags` are setxattr(2)'s (XATTR_CREATE,
    /// XATTR_REPLACE). The server's verdict comes with the Rclunk.
    pub async fn set_xattr(&self, name: &str, value: Bytes, flags: u32) -> Result<(), Error> {
        let fid = self.clone_fid().await?;
        let msg = Txattrcreate {
            fid: fid.number(),
            name: name.to_owned(),
            attr_size: value.len() as u64,
            flags,
        };
        self.client().call(msg).await?;
        let file = File::new(fid, 0);
        if !value.is_empty() {
            file.write_all_at(0, value).await?;
        }
        file.close().await
    }

    /// Removes the attribute `name`: an empty value set with XATTR_REPLACE,
    /// as Linux's 9p client sends it.
    pub async fn remove_xattr(&self, name: &str) -> Result<(), Error> {
        self.set_xattr(name, Bytes::new(), XATTR_REPLACE).await
    }

    async fn xattr_read(&self, name: &str) -> Result<Bytes, Error> {
        let client = self.client();
        let newfid = client.inner.alloc_fid();
        let msg = Txattrwalk {
            fid: self.number(),
            newfid,
            name: name.to_owned(),
        };
        let size = match client.call(msg).await {
            Ok(r) => r.size,
            Err(e) => {
                client.inner.free_fid(newfid);
                return Err(e);
            }
        };
        let file = File::new(Fid::new(client.clone(), newfid, self.qid()), 0);
        if size > MAX_VALUE {
            return Err(Error::Remote {
                errno: Errno::ERANGE,
                ename: Errno::ERANGE.ename().to_owned(),
            });
        }
        let mut value = Vec::with_capacity(size as usize);
        while (value.len() as u64) < size {
            let want = (size - value.len() as u64).min(file.iounit() as u64) as u32;
            let data = file.read_at(value.len() as u64, want).await?;
            if data.is_empty() {
                break;
            }
            value.extend_from_slice(&data);
        }
        Ok(Bytes::from(value))
    }
}
