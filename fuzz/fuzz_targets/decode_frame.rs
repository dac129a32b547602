//! Decodes one untrusted frame. The first byte picks the dialect (byte % 3:
//! 9P2000, 9P2000.u, 9P2000.L) and whether the stream extension was
//! negotiated (byte / 3 odd), the rest is the frame.
//!
//! Decoding must never panic; whatever decodes must encode back to exactly
//! the same bytes (whole, and as head + uncopied payload) and print as one
//! line; the directory entries in any Rread or Rreaddir payload must iterate
//! to an end, and re-encode to the payload when all of them are good.

#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use ninep_wire::{Dialect, Dirent, Fcall, Header, Msg, Protocol, Stat};

fuzz_target!(|data: &[u8]| {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let dialect = match selector % 3 {
        0 => Dialect::Base,
        1 => Dialect::U,
        _ => Dialect::L,
    };
    let protocol = Protocol {
        dialect,
        streams: (selector / 3) % 2 == 1,
        resume: (selector / 6) % 2 == 1,
    };
    let frame = Bytes::copy_from_slice(frame);
    let header = Header::decode(&frame);

    let fcall = match Fcall::decode(frame.clone(), protocol) {
        Ok(fcall) => fcall,
        Err(e) => {
            assert!(e.offset <= frame.len(), "{e} is outside the frame");
            if let Err(he) = header {
                assert_eq!(e, he, "Fcall::decode and Header::decode disagree");
            }
            assert!(!e.to_string().is_empty());
            return;
        }
    };

    let h = header.expect("a decoded frame has a header");
    assert_eq!(h.size as usize, frame.len());
    assert_eq!((h.ty, h.tag), (fcall.msg.ty(), fcall.tag));

    let again = fcall.to_bytes(protocol).expect("a decoded message encodes");
    assert_eq!(again, frame, "{fcall} re-encodes differently");
    let mut head = BytesMut::new();
    let tail = fcall
        .encode_head(protocol, &mut head)
        .expect("a decoded message encodes");
    assert_eq!(tail.as_ref(), fcall.msg.payload());
    head.extend_from_slice(tail.as_deref().unwrap_or_default());
    assert_eq!(head, frame, "{fcall}: head + payload differs");

    let text = fcall.to_string();
    let start = format!("{} tag {}", fcall.msg.name(), fcall.tag);
    assert!(text.starts_with(&start), "{text:?}");
    assert!(!text.chars().any(char::is_control), "{text:?}");

    match &fcall.msg {
        Msg::Rread(m) => check_stats(&m.data, dialect),
        Msg::Rreaddir(m) => check_dirents(&m.data),
        _ => {}
    }
});

/// A directory read's stats: iterate to the end; if all are good, they are
/// the data.
fn check_stats(data: &Bytes, dialect: Dialect) {
    let mut all_ok = true;
    let mut buf = BytesMut::new();
    for stat in Stat::entries(data, dialect) {
        match stat {
            Ok(s) => {
                let _ = s.to_string();
                s.encode_entry(&mut buf, dialect)
                    .expect("a decoded stat encodes");
            }
            Err(e) => {
                assert!(e.offset <= data.len(), "{e} is outside the data");
                all_ok = false;
            }
        }
    }
    if all_ok {
        assert_eq!(buf, data, "stats re-encode differently");
    }
}

/// An Rreaddir's dirents, likewise.
fn check_dirents(data: &Bytes) {
    let mut all_ok = true;
    let mut buf = BytesMut::new();
    for dirent in Dirent::entries(data) {
        match dirent {
            Ok(d) => {
                let _ = d.to_string();
                d.encode(&mut buf);
            }
            Err(e) => {
                assert!(e.offset <= data.len(), "{e} is outside the data");
                all_ok = false;
            }
        }
    }
    if all_ok {
        assert_eq!(buf, data, "dirents re-encode differently");
    }
}
