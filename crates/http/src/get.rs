//! GET and HEAD of a file: one walk and one stat decide the answer (never a
//! listing of its directory), and the data is read only for a GET that
//! will send it. A GET sure to send the file from its start has it walked
//! to, opened, stat'ed and its first piece read in one round trip (each
//! request sent behind the one before); any other request opens nothing
//! before it knows it will send data, since opening a synthetic file may
//! act (a clone file makes a conversation).
//!
//! A file that fits in one read is read before the headers go out, so its
//! Content-Length is what was read; one the door kept ([`crate::cache`])
//! is sent from memory once it opens unchanged. A larger one is
//! piped from a transfer (pipelined Treads, or a stream where the server
//! speaks the extension) through a [`Piped`] body, so a slow client holds
//! the transfer back instead of making the door buffer the file. A
//! synthetic file (qid version 0) has no length worth believing: it is
//! read to its end, one request at a time, and sent chunked.

use std::io;
use std::sync::Arc;

use bytes::Bytes;
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use ninep_client::{Fid, File, FileInfo, Transfer};
use ninep_wire::consts::dotl::O_RDONLY;

use crate::body::{Body, Piped, empty, full};
use crate::cache::Kept;
use crate::status::{failed, plain};
use crate::validators::{Precondition, Ranged, Validators, preconditions, ranged};

/// A file to answer for, as [`sends_from_the_start`] says to reach it.
#[derive(Debug)]
pub enum Target {
    /// Walked to.
    Walked(Fid),
    /// Walked to, opened for reading, stat'ed, and the data at offset 0
    /// read.
    Read(File, Box<FileInfo>, Bytes),
    /// Kept by the door, and opened by its name with the qid it was kept
    /// under.
    Kept(Arc<Kept>),
}

impl Target {
    /// The file's qid, as the walk (or the open) gave it.
    pub fn qid(&self) -> ninep_wire::Qid {
        match self {
            Target::Walked(fid) => fid.qid(),
            Target::Read(file, ..) => file.fid().qid(),
            Target::Kept(kept) => kept.qid,
        }
    }
}

/// Answers a GET or HEAD of `target`, named `name`; `window` bounds the
/// bytes read ahead of the client.
pub async fn file(req: &Parts, name: &str, target: Target, window: u64) -> Response<Body> {
    match respond(req, name, target, window).await {
        Ok(res) => res,
        Err(e) => failed(&e),
    }
}

/// True for a GET of the whole file, whatever its state: its first piece
/// is sure to be sent, so the file is opened, stat'ed and its first piece
/// read with the walk, round trips saved. (A directory named without its
/// final slash is read too before it is sent to its URL with one.)
pub fn sends_from_the_start(req: &Parts) -> bool {
    req.method == Method::GET
        && ![
            header::RANGE,
            header::IF_MATCH,
            header::IF_NONE_MATCH,
            header::IF_MODIFIED_SINCE,
            header::IF_UNMODIFIED_SINCE,
        ]
        .iter()
        .any(|h| req.headers.contains_key(h))
}

/// The file as far as the request has taken it.
enum Handle {
    /// Walked to.
    Walked(Fid),
    /// Opened, and the data at offset 0 read.
    Read(File, Bytes),
    /// All of its data, in memory.
    Whole(Bytes),
}

async fn respond(
    req: &Parts,
    name: &str,
    target: Target,
    window: u64,
) -> Result<Response<Body>, ninep_client::Error> {
    let (v, len, handle) = match target {
        Target::Read(file, info, first) => {
            (Validators::of(&info), info.size, Handle::Read(file, first))
        }
        Target::Walked(fid) => {
            let info = fid.stat().await?;
            (Validators::of(&info), info.size, Handle::Walked(fid))
        }
        Target::Kept(kept) => (
            Validators::of(&kept.info),
            kept.info.size,
            Handle::Whole(kept.data.clone()),
        ),
    };
    let mut res = Response::builder()
        .header(header::CONTENT_TYPE, content_type(name))
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if let Some(etag) = &v.etag {
        res = res.header(header::ETAG, etag);
    }
    if let Some(lm) = v.last_modified() {
        res = res.header(header::LAST_MODIFIED, lm);
    }
    match preconditions(&req.method, &req.headers, &v) {
        Precondition::Proceed => {}
        Precondition::NotModified => {
            return Ok(finish(res.status(StatusCode::NOT_MODIFIED), empty()));
        }
        Precondition::Failed => {
            return Ok(plain(
                StatusCode::PRECONDITION_FAILED,
                "precondition failed",
            ));
        }
    }
    if v.etag.is_none() {
        // Synthetic: whatever reads return, to the end, sent chunked.
        res = res.header(header::CACHE_CONTROL, "no-cache");
        if req.method == Method::HEAD {
            return Ok(finish(res, empty()));
        }
        let (file, first) = match handle {
            Handle::Read(file, first) => (file, first),
            Handle::Walked(fid) => (fid.open(O_RDONLY).await?, Bytes::new()),
            Handle::Whole(data) => return Ok(finish(res, full(data))),
        };
        return Ok(finish(res, pipe(file, 0, None, first, window)));
    }
    res = res.header(header::ACCEPT_RANGES, "bytes");
    let (range, partial) = match ranged(&req.headers, &v, len) {
        Ranged::Full => (0..len, false),
        Ranged::Part(range) => {
            res = res.status(StatusCode::PARTIAL_CONTENT);
            (range, true)
        }
        Ranged::Unsatisfiable => {
            let mut res = plain(StatusCode::RANGE_NOT_SATISFIABLE, "range not satisfiable");
            let all = HeaderValue::from_str(&format!("bytes */{len}"))
                .expect("a number makes a valid header");
            res.headers_mut().insert(header::CONTENT_RANGE, all);
            return Ok(res);
        }
    };
    let count = range.end - range.start;
    if partial {
        let last = range.end - 1;
        res = res.header(
            header::CONTENT_RANGE,
            format!("bytes {}-{last}/{len}", range.start),
        );
    }
    let res = res.header(header::CONTENT_LENGTH, count);
    if req.method == Method::HEAD {
        return Ok(finish(res, empty()));
    }
    let (file, first) = match handle {
        Handle::Read(file, first) => (file, first),
        Handle::Walked(fid) => {
            let file = fid.open(O_RDONLY).await?;
            let want = count.min(file.iounit() as u64) as u32;
            let first = file.read_at(range.start, want).await?;
            (file, first)
        }
        Handle::Whole(data) => {
            let part = data.slice(range.start as usize..range.end as usize);
            return Ok(finish(res, full(part)));
        }
    };
    if first.len() as u64 >= count {
        return Ok(finish(res, full(first.slice(..count as usize))));
    }
    Ok(finish(
        res,
        pipe(file, range.start, Some(count), first, window),
    ))
}

fn finish(res: http::response::Builder, body: Body) -> Response<Body> {
    res.body(body)
        .expect("headers made from numbers, dates, qids and MIME types are valid")
}

/// The content type for a file named `name`, from its extension.
fn content_type(name: &str) -> String {
    let mime = mime_guess::from_path(name).first_or_octet_stream();
    if mime.type_() == mime_guess::mime::TEXT && mime.get_param("charset").is_none() {
        format!("{mime}; charset=utf-8")
    } else {
        mime.to_string()
    }
}

/// A body of `len` bytes of `file` from `offset` (to its end if `len` is
/// none), of which `first` was read already; the rest is read by a task
/// of its own as fast as the client takes it.
fn pipe(file: File, offset: u64, len: Option<u64>, first: Bytes, window: u64) -> Body {
    let (tx, body) = Piped::channel();
    tokio::spawn(async move {
        let how = Transfer {
            max_window: window,
            ..Transfer::default()
        };
        let start = offset + first.len() as u64;
        let rest = len.map(|len| len - first.len() as u64);
        if !first.is_empty() && tx.send(Ok(first)).await.is_err() {
            return;
        }
        let mut range = match file.read_range(start, rest, how).await {
            Ok(range) => range,
            Err(e) => {
                let _ = tx.send(Err(e.into())).await;
                return;
            }
        };
        loop {
            let piece = match range.next().await {
                Ok(Some(piece)) => Ok(piece),
                Ok(None) => break,
                Err(e) => Err(e.into()),
            };
            let end = piece.is_err();
            // The client went away: dropping the transfer flushes it.
            if tx.send(piece).await.is_err() || end {
                return;
            }
        }
        if let Some(len) = len
            && range.position() < offset + len
        {
            // The file shrank since its stat: end the response broken
            // rather than let the client wait for bytes that never come.
            let short = io::Error::new(io::ErrorKind::UnexpectedEof, "file ended early");
            let _ = tx.send(Err(short)).await;
        }
    });
    body
}
