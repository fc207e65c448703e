//! What the measurement programs share (the examples and the benches, separate crates that include
//! this file with `#[path]`; each uses only some of it): the plain read loop every gemv is held
//! against, a byte view of plain-old-data blocks, and the usage error of a command line.
#![allow(dead_code)]

/// A bad command line: `prog: why` and the usage on stderr, exit status 2.
pub fn usage_error(prog: &str, usage: &str, why: &str) -> ! {
    eprintln!("{prog}: {why}\n{usage}");
    std::process::exit(2)
}

/// The bytes of `s`.
///
/// # Safety
/// `T` must have no padding bytes (every byte initialized): the block types and integers here.
pub unsafe fn bytes_of<T>(s: &[T]) -> &[u8] {
    // SAFETY: the slice covers exactly `s`'s bytes, all initialized by the caller's promise;
    // u8 has alignment 1.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

/// A plain read of `bytes` (a sum of u64 words in 8 independent lanes, so that the adds never
/// limit the loads): the read bandwidth a gemv over the same bytes is held against. A tail of
/// less than 64 bytes is not read.
pub fn read_sum(bytes: &[u8]) -> u64 {
    let mut acc = [0u64; 8];
    for ch in bytes.chunks_exact(64) {
        for (i, a) in acc.iter_mut().enumerate() {
            // SAFETY: 8 * i + 8 <= 64 bytes of the chunk; read_unaligned.
            *a = a.wrapping_add(unsafe { ch.as_ptr().add(8 * i).cast::<u64>().read_unaligned() });
        }
    }
    acc.iter().fold(0, |a, &b| a.wrapping_add(b))
}
