//! GET and HEAD of a file: one walk and one stat decide the answer (never a
//! listing of its directory), and the data is read only for a GET that
//! will send it.
//!
//! A file that fits in one read is read before the headers go out, so its
//! Content-Length is what was read. A larger one is piped from a transfer
//! (pipelined Treads, or a stream where the server speaks the extension)
//! through a [`Piped`] body, so a slow client holds the transfer back
//! instead of making the door buffer the file. A synthetic file (qid
//! version 0) has no length worth believing: it is read to its end, one
//! request at a time, and sent chunked.

use std::io;

use bytes::{Bytes, BytesMut};
use http::request::Parts;
use http::{HeaderValue, Method, Response, StatusCode, header};
use ninep_client::{Fid, File, FileInfo, Transfer};
use ninep_wire::consts::dotl::O_RDONLY;

use crate::body::{Body, Piped, empty, full};
use crate::status::{failed, plain};
use crate::validators::{Precondition, Ranged, Validators, preconditions, ranged};

/// Answers a GET or HEAD of the file `fid`, of attributes `info`, named
/// `name`; `window` bounds the bytes read ahead of the client.
pub async fn file(
    req: &Parts,
    name: &str,
    fid: Fid,
    info: FileInfo,
    window: u64,
) -> Response<Body> {
    let v = Validators::of(&info);
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
        Precondition::NotModified => return finish(res.status(StatusCode::NOT_MODIFIED), empty()),
        Precondition::Failed => {
            return plain(StatusCode::PRECONDITION_FAILED, "precondition failed");
        }
    }
    if v.etag.is_none() {
        // Synthetic: whatever a read returns, to its end.
        res = res.header(header::CACHE_CONTROL, "no-cache");
        if req.method == Method::HEAD {
            return finish(res, empty());
        }
        return match fid.open(O_RDONLY).await {
            Ok(file) => finish(res, pipe(file, 0, None, window)),
            Err(e) => failed(&e),
        };
    }
    let len = info.size;
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
            return res;
        }
    };
    let content_range = |start: u64, end: u64| format!("bytes {start}-{}/{len}", end - 1);
    if req.method == Method::HEAD {
        if partial {
            res = res.header(header::CONTENT_RANGE, content_range(range.start, range.end));
        }
        return finish(
            res.header(header::CONTENT_LENGTH, range.end - range.start),
            empty(),
        );
    }
    let file = match fid.open(O_RDONLY).await {
        Ok(file) => file,
        Err(e) => return failed(&e),
    };
    let count = range.end - range.start;
    if count <= file.iounit() as u64 {
        let data = match read_small(&file, range.start, count as u32).await {
            Ok(data) => data,
            Err(e) => return failed(&e),
        };
        if partial {
            let end = range.start + data.len() as u64;
            res = res.header(header::CONTENT_RANGE, content_range(range.start, end));
        }
        return finish(res.header(header::CONTENT_LENGTH, data.len()), full(data));
    }
    if partial {
        res = res.header(header::CONTENT_RANGE, content_range(range.start, range.end));
    }
    let res = res.header(header::CONTENT_LENGTH, count);
    finish(res, pipe(file, range.start, Some(count), window))
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

/// Reads `count` bytes from `offset`, fewer if the file ends first.
async fn read_small(file: &File, offset: u64, count: u32) -> Result<Bytes, ninep_client::Error> {
    let mut data = BytesMut::new();
    while data.len() < count as usize {
        let got = file
            .read_at(offset + data.len() as u64, count - data.len() as u32)
            .await?;
        if got.is_empty() {
            break;
        }
        data.extend_from_slice(&got);
    }
    Ok(data.freeze())
}

/// A body of `len` bytes of `file` from `offset` (to its end if `len` is
/// none), read by a task of its own as fast as the client takes them.
fn pipe(file: File, offset: u64, len: Option<u64>, window: u64) -> Body {
    let (tx, body) = Piped::channel();
    tokio::spawn(async move {
        let how = Transfer {
            max_window: window,
            ..Transfer::default()
        };
        let mut range = match file.read_range(offset, len, how).await {
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
