//! Each conversion and its inverse give back what they were given, for
//! everything the other side can say.

use ninep_wire::consts::{dotl, mode::*, open::*, unix::*};
use ninep_wire::convert::*;
use ninep_wire::{Dialect, QidType};
use proptest::prelude::*;
use proptest::sample::select;

const FILE_TYPES: [u32; 7] = [
    S_IFREG, S_IFDIR, S_IFLNK, S_IFCHR, S_IFBLK, S_IFIFO, S_IFSOCK,
];

fn qid_type_of(mode: u32) -> QidType {
    match mode & S_IFMT {
        S_IFDIR => QidType::DIR,
        S_IFLNK => QidType::SYMLINK,
        _ => QidType::FILE,
    }
}

proptest! {
    #[test]
    fn device_numbers_round_trip(major in any::<u32>(), minor in any::<u32>()) {
        prop_assert_eq!(major_minor(makedev(major, minor)), (major, minor));
    }

    #[test]
    fn device_extensions_round_trip(
        ty in select(vec![S_IFCHR, S_IFBLK]),
        major in any::<u32>(),
        minor in any::<u32>(),
    ) {
        let rdev = makedev(major, minor);
        let extension = device_extension(ty, rdev).expect("a device has an extension");
        prop_assert_eq!(device(&extension), Some((ty, rdev)));
    }

    #[test]
    fn unix_modes_round_trip_through_9p2000u(ty in select(FILE_TYPES.to_vec()), perm in 0u32..0o10000) {
        let mode = ty | perm;
        let rdev = makedev(8, 1);
        let extension = device_extension(mode, rdev).unwrap_or_default();
        let plan9 = plan9_mode(mode, qid_type_of(mode), Dialect::U);
        prop_assert_eq!(unix_mode(plan9, &extension, Dialect::U), mode);
    }

    #[test]
    fn base_dialect_keeps_directories_and_permissions(
        ty in select(FILE_TYPES.to_vec()),
        perm in 0u32..0o10000,
    ) {
        let mode = ty | perm;
        let plan9 = plan9_mode(mode, qid_type_of(mode), Dialect::Base);
        let kept = if ty == S_IFDIR { S_IFDIR } else { S_IFREG };
        prop_assert_eq!(unix_mode(plan9, "", Dialect::Base), kept | (perm & 0o777));
        prop_assert_eq!(plan9 & !(DMDIR | 0o777), 0, "no .u bits in 9P2000");
    }

    #[test]
    fn plan9_modes_round_trip_through_unix(perm in 0u32..0o1000, dm in select(vec![
        0, DMDIR, DMSYMLINK, DMNAMEDPIPE, DMSOCKET, DMSETUID, DMSETGID, DMSETVTX,
        DMSETUID | DMSETGID | DMSETVTX,
    ])) {
        let plan9 = dm | perm;
        let mode = unix_mode(plan9, "", Dialect::U);
        prop_assert_eq!(plan9_mode(mode, qid_type_of(mode), Dialect::U), plan9);
    }

    #[test]
    fn open_modes_round_trip(access in select(vec![OREAD, OWRITE, ORDWR]), trunc in any::<bool>()) {
        let mode = access | if trunc { OTRUNC } else { 0 };
        prop_assert_eq!(open_mode(open_flags(mode)), mode);
    }

    #[test]
    fn open_flags_keep_access_and_truncation(flags in any::<u32>()) {
        let kept = flags & (dotl::O_ACCMODE | dotl::O_TRUNC);
        // O_NOACCESS (3) has no Plan 9 mode; it reads as OREAD.
        let kept = if kept & dotl::O_ACCMODE == dotl::O_NOACCESS { kept & dotl::O_TRUNC } else { kept };
        prop_assert_eq!(open_flags(open_mode(flags)), kept);
    }
}

#[test]
fn dirent_types_round_trip() {
    for ty in FILE_TYPES {
        assert_eq!(file_type(dirent_type(ty | 0o644)), ty);
    }
    assert_eq!(dirent_type(0), dotl::DT_UNKNOWN);
    assert_eq!(file_type(dotl::DT_UNKNOWN), 0);
}

#[test]
fn qid_bits_become_plan9_mode_bits() {
    let ty = QidType(QidType::APPEND.0 | QidType::EXCL.0);
    assert_eq!(
        plan9_mode(S_IFREG | 0o640, ty, Dialect::Base),
        DMAPPEND | DMEXCL | 0o640
    );
    assert_eq!(open_flags(OEXEC | ORCLOSE), dotl::O_RDONLY);
    assert_eq!(makedev(1, 3), 0x103);
    assert_eq!(device("c 1"), None);
    assert_eq!(device("x 1 3"), None);
    assert_eq!(device("c 1 3 4"), None);
}
