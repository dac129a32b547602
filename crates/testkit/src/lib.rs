//! What the tests of several ninep crates share.
//!
//! [`Password`] is an authentication scheme for tests of servers that ask
//! for Tauth: the client proves itself by writing [`PASSWORD`] to the afid,
//! and is then whoever its Tauth named. It is both ends: the server's
//! [`Scheme`] and the client's [`Prover`].
//!
//! [`read_frame`] and [`tag`] take 9P messages off a byte stream whole,
//! for proxies that count, hold or change them. [`attach_root`] is a
//! client's attach as root, the usual first step of a test.

use bytes::Bytes;
use ninep_client::{AuthFid, Client, Fsys, Prover};
use ninep_server::User;
use ninep_server::auth::{BoxFuture, Exchange, Proof, Scheme};
use tokio::io::{AsyncRead, AsyncReadExt};

/// The one password [`Password`] takes.
pub const PASSWORD: &[u8] = b"open sesame";

/// Proof by a fixed password (see the crate's documentation).
#[derive(Debug, Clone, Copy)]
pub struct Password;

/// An exchange under way: the user named and what was written so far.
struct Said {
    user: String,
    said: Vec<u8>,
}

impl Scheme for Password {
    fn name(&self) -> &str {
        "password"
    }

    fn start(&self, user: &User) -> ninep_server::Result<Box<dyn Exchange>> {
        Ok(Box::new(Said {
            user: user.uname.clone(),
            said: Vec::new(),
        }))
    }
}

impl Exchange for Said {
    fn write(&mut self, _offset: u64, data: Bytes) -> BoxFuture<'_, ninep_server::Result<u32>> {
        self.said.extend_from_slice(&data);
        Box::pin(async move { Ok(data.len() as u32) })
    }

    fn proof(&mut self) -> BoxFuture<'_, ninep_server::Result<Proof>> {
        let proof = (self.said == PASSWORD).then(|| Proof {
            uname: Some(self.user.clone()),
            uid: None,
        });
        Box::pin(async move { proof.ok_or_else(|| ninep_server::Error::new("wrong password")) })
    }
}

impl Prover for Password {
    fn prove<'a>(
        &'a self,
        afid: &'a AuthFid,
        _n_uname: u32,
    ) -> ninep_client::BoxFuture<'a, Result<(), ninep_client::Error>> {
        Box::pin(async move { afid.write(0, Bytes::from_static(PASSWORD)).await.map(drop) })
    }
}

/// One whole 9P message (its size first) from `from`, or `None` at end of
/// file.
pub async fn read_frame(from: &mut (impl AsyncRead + Unpin)) -> Option<Vec<u8>> {
    let mut size = [0u8; 4];
    from.read_exact(&mut size).await.ok()?;
    let mut frame = size.to_vec();
    frame.resize(u32::from_le_bytes(size) as usize, 0);
    from.read_exact(&mut frame[4..]).await.ok()?;
    Some(frame)
}

/// The tag of a whole message that [`read_frame`] gave.
pub fn tag(frame: &[u8]) -> u16 {
    u16::from_le_bytes([frame[5], frame[6]])
}

/// An attach as root (uid 0) to the main tree of the server at `addr`.
pub async fn attach_root(addr: &str) -> Fsys {
    let client = Client::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("{addr}: {e}"));
    client
        .attach_as("root", 0, "")
        .await
        .unwrap_or_else(|e| panic!("attach to {addr}: {e}"))
}
