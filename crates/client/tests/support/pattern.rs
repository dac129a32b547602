//! Test data: deterministic bytes that are not periodic over small
//! distances, so a piece out of place never matches by chance.

/// `len` bytes of a xorshift sequence.
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x: u32 = 0x2545_f491;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect()
}
