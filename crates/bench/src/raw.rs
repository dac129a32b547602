//! A 9P connection with no client library, for the least a null operation
//! can cost: the request's frame made once and written as it is, replies
//! checked by type alone.

use anyhow::{Context, Result, bail, ensure};
use bytes::{Buf, Bytes, BytesMut};
use ninep_transport::{Addr, Stream};
use ninep_wire::{Dialect, Fcall, Fid, HEADER_LEN, Msg, NOTAG, Tattach, Tversion};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::rtt::{Config, Null};

/// The msize the raw client asks for: room for any null reply.
const RAW_MSIZE: u32 = 8192;

/// A 9P connection with no client library: prepared request frames written
/// straight to the socket, replies read straight from it.
pub(crate) struct RawConn {
    stream: Box<dyn Stream>,
    buf: BytesMut,
    request: Bytes,
    reply_type: u8,
}

impl RawConn {
    pub(crate) async fn connect(config: &Config, null: &Null) -> Result<RawConn> {
        let addr: Addr = config.addr.parse().map_err(anyhow::Error::msg)?;
        let stream = addr
            .dial()
            .await
            .with_context(|| format!("connect to {addr}"))?;
        let mut raw = RawConn {
            stream,
            buf: BytesMut::with_capacity(RAW_MSIZE as usize),
            request: Bytes::new(),
            reply_type: 0,
        };
        let d = null.dialect;
        let version = Tversion {
            msize: RAW_MSIZE,
            version: d.version().to_owned(),
        };
        let reply = raw.call(Fcall::new(NOTAG, version), Dialect::Base).await?;
        match &reply.msg {
            Msg::Rversion(r) if Dialect::from_version(&r.version) == Some(d) => {}
            _ => bail!("Tversion {d}: answered {reply}"),
        }
        let fid = Fid(0);
        let tattach = Tattach {
            fid,
            afid: Fid::NOFID,
            uname: config.uname.clone(),
            aname: config.aname.clone(),
            n_uname: config.n_uname,
        };
        let reply = raw.call(Fcall::new(0, tattach), d).await?;
        ensure!(
            matches!(reply.msg, Msg::Rattach(_)),
            "Tattach answered {reply}"
        );
        let request = null.request(fid);
        raw.reply_type = request
            .reply_type()
            .context("the null operation is a request with a reply")?;
        raw.request = Fcall::new(1, request).to_bytes(d)?;
        Ok(raw)
    }

    /// Sends one request and decodes its reply.
    async fn call(&mut self, fcall: Fcall, dialect: Dialect) -> Result<Fcall> {
        self.stream.write_all(&fcall.to_bytes(dialect)?).await?;
        let size = self.fill().await?;
        let frame = self.buf.split_to(size).freeze();
        Ok(Fcall::decode(frame, dialect)?)
    }

    /// One null operation; the reply is checked by type only.
    pub(crate) async fn once(&mut self) -> Result<()> {
        self.stream.write_all(&self.request).await?;
        let size = self.fill().await?;
        let ty = self.buf[4];
        self.buf.advance(size);
        ensure!(
            ty == self.reply_type,
            "reply of type {ty}, not {}",
            self.reply_type
        );
        Ok(())
    }

    /// Reads until the buffer starts with a whole frame; returns its size.
    async fn fill(&mut self) -> Result<usize> {
        loop {
            if let Some(b) = self.buf.get(..4) {
                let size = u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
                ensure!(
                    (HEADER_LEN..=RAW_MSIZE as usize).contains(&size),
                    "bad frame size {size}"
                );
                if self.buf.len() >= size {
                    return Ok(size);
                }
            }
            self.buf.reserve(RAW_MSIZE as usize);
            if self.stream.read_buf(&mut self.buf).await? == 0 {
                bail!("server hung up");
            }
        }
    }
}
