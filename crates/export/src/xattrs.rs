//! Extended attributes, as 9P2000.L's Txattrwalk and Txattrcreate reach
//! them: read, listed, set and removed through the server's own
//! `/proc/self/fd` link of the file. A symbolic link's are not reached.

use bytes::Bytes;
use ninep_server::{Error, Result};
use ninep_wire::Errno;
use rustix::fs::FileType;

use crate::{Export, ExportFile, errno};

/// The value of attribute `name`, or with an empty name the list of names.
pub(crate) async fn get(export: &Export, file: &ExportFile, name: &str) -> Result<Bytes> {
    let node = file.node.clone();
    let name = name.to_owned();
    export
        .call_here(&file.creds, move |inner| {
            if node.ty == FileType::Symlink {
                return Err(Error::from_errno(Errno::ENODATA));
            }
            let path = inner.proc_path(&node);
            let mut buf = Vec::with_capacity(64 * 1024);
            let n = if name.is_empty() {
                rustix::fs::listxattr(path.as_str(), rustix::buffer::spare_capacity(&mut buf))
                    .map_err(errno)?
            } else {
                rustix::fs::getxattr(
                    path.as_str(),
                    name.as_str(),
                    rustix::buffer::spare_capacity(&mut buf),
                )
                .map_err(errno)?
            };
            debug_assert_eq!(n, buf.len());
            Ok(Bytes::from(buf))
        })
        .await
}

/// Sets attribute `name` to `value`, or removes it.
pub(crate) async fn set(
    export: &Export,
    file: &ExportFile,
    name: &str,
    value: Bytes,
    flags: u32,
) -> Result<()> {
    export.readonly()?;
    let node = file.node.clone();
    let name = name.to_owned();
    export
        .call_here(&file.creds, move |inner| {
            if node.ty == FileType::Symlink {
                return Err(Error::not_supported());
            }
            let path = inner.proc_path(&node);
            if ninep_server::fs::removes_xattr(&value, flags) {
                return rustix::fs::removexattr(path.as_str(), name.as_str()).map_err(errno);
            }
            let f = rustix::fs::XattrFlags::from_bits_retain(flags);
            rustix::fs::setxattr(path.as_str(), name.as_str(), &value, f).map_err(errno)
        })
        .await
}
