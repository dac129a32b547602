//! `ninep decode`: how a person looks at a capture. Reads 9P frames (raw, or
//! as hex text) and prints each in Plan 9's text form.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use bytes::BytesMut;
use ninep_transport::FrameCodec;
use ninep_wire::{Dialect, Fcall, Msg, Protocol, RESUME_SUFFIX, STREAM_SUFFIX};
use tokio_util::codec::Decoder;

#[derive(clap::Args)]
pub struct Args {
    /// File of frames; standard input if absent or `-`.
    file: Option<PathBuf>,
    /// Input is hex text (whitespace and `#` comments ignored), not raw bytes.
    #[arg(long)]
    hex: bool,
    /// Dialect to decode in: 9P2000, 9P2000.u, 9P2000.L, any of them with
    /// `.stream` (the stream extension), `.resume` or `.stream.resume`, or
    /// auto (start in 9P2000 and follow Tversion/Rversion in the stream).
    #[arg(long, default_value = "auto", value_parser = parse_dialect)]
    dialect: DialectChoice,
}

/// `None` follows version messages in the stream.
#[derive(Clone, Copy)]
struct DialectChoice(Option<Protocol>);

fn parse_dialect(s: &str) -> Result<DialectChoice, String> {
    if s == "auto" {
        return Ok(DialectChoice(None));
    }
    let (s, resume) = match s.strip_suffix(RESUME_SUFFIX) {
        Some(s) => (s, true),
        None => (s, false),
    };
    let (s, streams) = match s.strip_suffix(STREAM_SUFFIX) {
        Some(s) => (s, true),
        None => (s, false),
    };
    let protocol = Protocol {
        dialect: crate::args::parse_dialect(s)?,
        streams,
        resume,
    };
    Ok(DialectChoice(Some(protocol)))
}

pub fn run(args: Args) -> Result<ExitCode> {
    let mut input = Vec::new();
    match &args.file {
        Some(path) if path.as_os_str() != "-" => {
            input = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
        }
        _ => {
            std::io::stdin()
                .read_to_end(&mut input)
                .context("standard input")?;
        }
    }
    if args.hex {
        input = unhex(&input)?;
    }
    let mut out = std::io::stdout().lock();
    let ok = print_frames(&input, args.dialect.0, &mut out, &mut std::io::stderr())?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints one line per frame to `out` and one per bad frame to `err`; false
/// if any frame was bad.
fn print_frames(
    input: &[u8],
    fixed: Option<Protocol>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> Result<bool> {
    let mut dialect = fixed.unwrap_or(Dialect::Base.into());
    let mut codec = FrameCodec::new(u32::MAX, dialect.dialect);
    let mut buf = BytesMut::from(input);
    let mut offset = 0;
    let mut ok = true;
    loop {
        let frame = match codec.decode_eof(&mut buf) {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(ok),
            Err(e) => {
                writeln!(err, "ninep: frame at offset {offset}: {e}")?;
                return Ok(false);
            }
        };
        let len = frame.len();
        match Fcall::decode(frame, dialect) {
            Ok(fcall) => {
                writeln!(out, "{fcall}")?;
                if fixed.is_none() {
                    dialect = follow_version(&fcall.msg).unwrap_or(dialect);
                }
            }
            Err(e) => {
                ok = false;
                writeln!(
                    err,
                    "ninep: frame at offset {offset} ({len} bytes, {dialect}): {} at byte {}",
                    e.kind,
                    offset + e.offset
                )?;
            }
        }
        offset += len;
    }
}

/// The protocol a version message puts the rest of the stream in.
fn follow_version(msg: &Msg) -> Option<Protocol> {
    match msg {
        Msg::Tversion(v) => Protocol::from_version(&v.version),
        Msg::Rversion(v) => Protocol::from_version(&v.version),
        _ => None,
    }
}

fn unhex(text: &[u8]) -> Result<Vec<u8>> {
    let text = std::str::from_utf8(text).context("hex input is not text")?;
    let digits: Vec<u8> = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or_default())
        .flat_map(|line| line.bytes().filter(|b| !b.is_ascii_whitespace()))
        .collect();
    if digits.len() % 2 != 0 {
        bail!("hex input has an odd number of digits");
    }
    digits
        .chunks(2)
        .map(|pair| {
            let pair = std::str::from_utf8(pair).unwrap_or("??");
            u8::from_str_radix(pair, 16).with_context(|| format!("{pair:?} is not a hex byte"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(hex: &str, dialect: Option<Dialect>) -> (bool, String, String) {
        decode_in(hex, dialect.map(Protocol::from))
    }

    fn decode_in(hex: &str, protocol: Option<Protocol>) -> (bool, String, String) {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let ok = print_frames(
            &unhex(hex.as_bytes()).unwrap(),
            protocol,
            &mut out,
            &mut err,
        )
        .unwrap();
        (
            ok,
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        )
    }

    #[test]
    fn prints_each_frame() {
        // Tversion 9P2000.L then an Rlerror, which only decodes once the
        // stream has switched to 9P2000.L.
        let (ok, out, err) = decode(
            "15000000 64 ffff 00000200 0800 395032303030 2e4c  # Tversion\n\
             0b000000 07 0300 02000000",
            None,
        );
        assert!(ok, "{err}");
        assert_eq!(
            out,
            "Tversion tag 65535 msize 131072 version '9P2000.L'\nRlerror tag 3 ecode 2\n"
        );
    }

    #[test]
    fn names_the_offset_of_a_bad_frame_and_goes_on() {
        // Tclunk fid 1, then a Twalk whose name holds a '/', then Rclunk.
        let (ok, out, err) = decode(
            "0b000000780a0001000000 \
             16000000 6e 0500 00000000 01000000 0100 0300 612f62 \
             070000007902 00",
            Some(Dialect::Base),
        );
        assert!(!ok);
        assert_eq!(out, "Tclunk tag 10 fid 1\nRclunk tag 2\n");
        assert_eq!(
            err,
            "ninep: frame at offset 11 (22 bytes, 9P2000): name contains '/' at byte 28\n"
        );
    }

    #[test]
    fn a_frame_cut_short_is_reported() {
        let (ok, _, err) = decode("0b000000780a00", Some(Dialect::Base));
        assert!(!ok);
        assert!(
            err.starts_with("ninep: frame at offset 0: stream ended inside a frame"),
            "{err}"
        );
    }

    #[test]
    fn follows_the_stream_extension_once_agreed() {
        // Rversion 9P2000.L.stream, then Tscredit, which exists only then.
        let rversion = "1c000000 65 ffff 00000200 0f00 395032303030 2e4c 2e73747265616d";
        let tscredit = "0b000000 a6 0500 00000100";
        let (ok, out, err) = decode(&format!("{rversion} {tscredit}"), None);
        assert!(ok, "{err}");
        assert_eq!(
            out,
            "Rversion tag 65535 msize 131072 version '9P2000.L.stream'\n\
             Tscredit tag 5 credit 65536\n"
        );
        // Without the Rversion it is an unknown type...
        let (ok, _, err) = decode(tscredit, Some(Dialect::L));
        assert!(!ok && err.contains("unknown message type"), "{err}");
        // ... unless asked for.
        let streams = parse_dialect("9P2000.L.stream").ok().and_then(|c| c.0);
        let (ok, out, _) = decode_in(tscredit, streams);
        assert!(ok);
        assert_eq!(out, "Tscredit tag 5 credit 65536\n");
    }

    #[test]
    fn odd_hex_is_an_error() {
        assert!(unhex(b"abc").is_err());
        assert!(unhex(b"zz").is_err());
    }
}
