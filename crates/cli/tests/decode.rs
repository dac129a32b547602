//! `ninep decode --hex` prints every shared test vector as one text line.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

fn vectors_dir() -> PathBuf {
    std::env::var_os("NINEP_SPEC_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/spec"))
        .join("vectors")
}

fn decode(args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .arg("decode")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run ninep");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    (
        out.status.success(),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

#[test]
fn every_vector_prints_as_a_line() {
    let mut total = 0;
    for (file, dialect) in [
        ("9p2000.json", "9P2000"),
        ("9p2000u.json", "9P2000.u"),
        ("9p2000L.json", "9P2000.L"),
    ] {
        let text = std::fs::read_to_string(vectors_dir().join(file)).expect("vectors");
        let doc: Value = serde_json::from_str(&text).expect("json");
        let vectors = doc["vectors"].as_array().expect("list");
        let hex: Vec<&str> = vectors
            .iter()
            .map(|v| v["hex"].as_str().expect("hex"))
            .collect();
        let (ok, out, err) = decode(&["--hex", "--dialect", dialect], &hex.join("\n"));
        assert!(ok, "{file}: {err}");
        assert!(err.is_empty(), "{file}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), vectors.len(), "{file}");
        for (line, v) in lines.iter().zip(vectors) {
            let name = v["name"].as_str().expect("name");
            let kind = name.split('_').next().expect("kind");
            assert!(line.starts_with(&format!("{kind} tag ")), "{name}: {line}");
        }
        total += lines.len();
    }
    assert_eq!(total, 200);
}

#[test]
fn raw_frames_from_a_file() {
    let dir = std::env::temp_dir().join(format!("ninep-decode-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let path = dir.join("capture");
    // Twalk tag 5 fid 308 newfid 296 nwname 2 0:tmp 1:usr, as raw bytes.
    let frame = [
        0x1b, 0, 0, 0, 110, 5, 0, 0x34, 1, 0, 0, 0x28, 1, 0, 0, 2, 0, 3, 0, b't', b'm', b'p', 3, 0,
        b'u', b's', b'r',
    ];
    std::fs::write(&path, frame).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_ninep"))
        .args(["decode", path.to_str().expect("path")])
        .output()
        .expect("run");
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Twalk tag 5 fid 308 newfid 296 nwname 2 0:tmp 1:usr\n"
    );
}

#[test]
fn a_bad_frame_fails_with_its_offset() {
    // A valid Tclunk, then a frame whose type number is unknown.
    let (ok, out, err) = decode(&["--hex"], "0b000000780a0001000000 0b000000ff0a0001000000");
    assert!(!ok);
    assert_eq!(out, "Tclunk tag 10 fid 1\n");
    assert_eq!(
        err,
        "ninep: frame at offset 11 (11 bytes, 9P2000): unknown message type 255 at byte 15\n"
    );
}
