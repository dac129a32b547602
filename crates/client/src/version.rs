//! Version negotiation: which dialect, and which extensions.

use ninep_transport::{Frame, FrameReader, Payload, Writer};
use ninep_wire::*;

use crate::conn::Options;
use crate::error::Error;

/// Tversion: the dialect asked for, or each in turn from the most capable
/// until the server answers with the one asked for. (A 9P2000.u server asked
/// for 9P2000.L answers 9P2000, dropping the suffix it does not know, so the
/// next attempt, 9P2000.u, is still worth making.) Each dialect is offered
/// with the stream extension first, and the resume extension too if
/// `resume`; a server answers with those of them it speaks. One that
/// answers the plain dialect to both may not know `.resume` alone (an
/// older ninep server), so it is asked for the stream extension alone
/// next; one that answers anything else is asked for the plain dialect
/// before the next. Returns what was agreed and the msize.
pub(crate) async fn negotiate<R: tokio::io::AsyncRead + Unpin>(
    writer: &Writer,
    frames: &mut FrameReader<R>,
    options: &Options,
    resume: bool,
) -> Result<(Protocol, u32), Error> {
    let wanted: Vec<Dialect> = match options.dialect {
        Some(d) => vec![d],
        None => Dialect::ALL.to_vec(),
    };
    let mut answers = Vec::new();
    // A server that refuses us (too many connections, TLS expected) says
    // why in an error reply, then hangs up: the why is the failure.
    let mut refusal = None;
    let offers: &[(bool, bool)] = if resume {
        &[(true, true), (true, false), (false, false)]
    } else {
        &[(true, false), (false, false)]
    };
    for want in wanted {
        for &(streams, resume) in offers {
            let asked = Protocol {
                dialect: want,
                streams,
                resume,
            };
            let tversion = Fcall::new(
                NOTAG,
                Tversion {
                    msize: options.msize,
                    version: asked.version(),
                },
            );
            let head = tversion
                .to_bytes(Dialect::Base)
                .map_err(|e| Error::protocol(e.to_string()))?;
            writer.send(Frame {
                head,
                payload: Payload::None,
            });
            let frame = match frames.next().await {
                Some(frame) => frame.map_err(|e| Error::protocol(e.to_string()))?,
                None => return Err(refusal.unwrap_or(Error::Closed)),
            };
            // Rversion reads the same in every dialect; an error reply (diod's
            // answer to a version it does not speak) means "try another".
            let reply = Fcall::decode(frame.clone(), Dialect::Base)
                .or_else(|_| Fcall::decode(frame, Dialect::L));
            let r = match reply {
                Ok(Fcall {
                    msg: Msg::Rversion(r),
                    ..
                }) => r,
                Ok(Fcall {
                    msg: Msg::Rerror(e),
                    ..
                }) => {
                    answers.push(format!("an error ({})", e.ename));
                    refusal = Some(Error::Remote {
                        errno: Errno::from_ename(&e.ename),
                        ename: e.ename,
                    });
                    continue;
                }
                _ => {
                    answers.push("an error".to_owned());
                    continue;
                }
            };
            answers.push(r.version.clone());
            let got = match Protocol::from_version(&r.version) {
                Some(got) if got.version() == r.version && got.is_within(asked) => got,
                _ => continue,
            };
            let plain = Protocol::from(want);
            if got == plain && asked.streams && asked.resume {
                continue;
            }
            if r.msize > options.msize || r.msize < 256 {
                return Err(Error::protocol(format!("bad Rversion msize {}", r.msize)));
            }
            return Ok((got, r.msize));
        }
    }
    Err(Error::protocol(format!(
        "server speaks no dialect we asked for (answered {})",
        answers.join(", ")
    )))
}
