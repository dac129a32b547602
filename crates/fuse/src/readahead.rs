//! The kernel's read-ahead on the mount. Whatever a FUSE server asks for at
//! init, the kernel reads ahead at most its default (128 KiB) on a new
//! mount, one request per window: a sequential reader through the page
//! cache then waits a round trip every 128 KiB. The window is the mount's
//! backing device's `read_ahead_kb`, which root may raise; it is raised to
//! what init asks for, where the mount may (elsewhere it stays as it is).

use std::path::Path;

/// Sets the read-ahead of the file system mounted at `mountpoint` to `kib`
/// KiB, if this process may.
pub(crate) fn widen(mountpoint: &Path, kib: u32) {
    if let Some(device) = device_of(mountpoint) {
        let knob = format!("/sys/class/bdi/{device}/read_ahead_kb");
        // Without root the knob is read-only: the default stands.
        let _ = std::fs::write(knob, kib.to_string());
    }
}

/// The device ("major:minor") of the newest mount at `mountpoint`.
fn device_of(mountpoint: &Path) -> Option<String> {
    let table = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let wanted = escaped(&mountpoint.canonicalize().ok()?.to_string_lossy());
    table.lines().rev().find_map(|line| {
        let mut fields = line.split(' ');
        let device = fields.nth(2)?;
        let point = fields.nth(1)?;
        (point == wanted).then(|| device.to_owned())
    })
}

/// A path as mountinfo writes it: space, tab, newline and backslash octal.
fn escaped(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            ' ' | '\t' | '\n' | '\\' => out.push_str(&format!("\\{:03o}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(escaped("/tmp/a b\\c"), "/tmp/a\\040b\\134c");
    }

    #[test]
    fn the_root_has_a_device() {
        let device = device_of(Path::new("/")).expect("/ is mounted");
        assert!(
            device.split(':').all(|n| n.parse::<u32>().is_ok()),
            "{device}"
        );
    }
}
