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
        add_line(&mut acc, ch);
    }
    acc.iter().fold(0, |a, &b| a.wrapping_add(b))
}

/// Adds the eight u64 words of one 64-byte `line` to the eight lanes of `acc` (wrapping).
#[inline(always)]
fn add_line(acc: &mut [u64; 8], line: &[u8]) {
    assert!(line.len() >= 64);
    for (i, a) in acc.iter_mut().enumerate() {
        // SAFETY: 8 * i + 8 <= 64 <= line.len() (checked above); read_unaligned.
        *a = a.wrapping_add(unsafe { line.as_ptr().add(8 * i).cast::<u64>().read_unaligned() });
    }
}

/// Row tiles the library's x86 gemv reads side by side (`GEMV_STREAMS` in `src/kernels/x86.rs`;
/// the VNNI levels from k = 16384, `avx2` at every k): the order of [`read_sum_streams`] in
/// `examples/dram` (`read X16 4 str`) and `examples/levels --dram`.
pub const GEMV_STREAMS: usize = 4;

/// [`read_sum`] in the order of a gemv that reads `streams` row tiles side by side (the
/// library's `GEMV_STREAMS`): `bytes` is cut into pieces of `tile` bytes, and each group of
/// `streams` consecutive pieces is read 64 bytes from each piece in turn; a last group of fewer
/// pieces, and a tail shorter than a piece, are read as one stream. Where the gemv's own read
/// order gets more from DRAM than one stream does (several hardware prefetch streams in flight),
/// this is the plain read it is held against.
pub fn read_sum_streams(bytes: &[u8], tile: usize, streams: usize) -> u64 {
    assert!(tile > 0 && tile.is_multiple_of(64) && streams > 0, "tile: a positive multiple of 64; streams > 0");
    let mut acc = [0u64; 8];
    let group = tile * streams;
    let mut groups = bytes.chunks_exact(group);
    for g in &mut groups {
        for off in (0..tile).step_by(64) {
            for j in 0..streams {
                add_line(&mut acc, &g[j * tile + off..j * tile + off + 64]);
            }
        }
    }
    acc.iter().fold(read_sum(groups.remainder()), |a, &b| a.wrapping_add(b))
}
