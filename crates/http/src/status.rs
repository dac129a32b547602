//! What a failed 9P request means in HTTP, and the plain responses that say
//! so.

use http::{Response, StatusCode, header};
use ninep_wire::Errno;

use crate::body::{Body, full};

/// The status for a request that failed with `err` at the server (or on
/// the way to it).
pub fn status_of(err: &ninep_client::Error) -> StatusCode {
    if !err.is_remote() && !matches!(err, ninep_client::Error::Refused { .. }) {
        // The connection to the 9P server failed, not the request.
        return StatusCode::BAD_GATEWAY;
    }
    match err.errno() {
        Errno::ENOENT | Errno::ENOTDIR => StatusCode::NOT_FOUND,
        Errno::EACCES | Errno::EPERM | Errno::EROFS => StatusCode::FORBIDDEN,
        Errno::EEXIST | Errno::ENOTEMPTY | Errno::EISDIR | Errno::EXDEV | Errno::EBUSY => {
            StatusCode::CONFLICT
        }
        Errno::EINVAL | Errno::ENAMETOOLONG => StatusCode::BAD_REQUEST,
        Errno::EFBIG => StatusCode::PAYLOAD_TOO_LARGE,
        Errno::ENOSPC => StatusCode::INSUFFICIENT_STORAGE,
        Errno::ENOSYS => StatusCode::NOT_IMPLEMENTED,
        Errno::EAGAIN => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// A response of `status` whose body says what went wrong.
pub fn plain(status: StatusCode, why: &str) -> Response<Body> {
    let text = format!(
        "{} {}\n{why}\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or("")
    );
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(full(text))
        .expect("a status and a fixed header make a valid response")
}

/// The response for a 9P request that failed with `err`.
pub fn failed(err: &ninep_client::Error) -> Response<Body> {
    let status = status_of(err);
    if status.is_server_error() {
        tracing::warn!("9P request failed: {err}");
    }
    plain(status, &err.to_string())
}
