//! Block formats: the on-disk ggml blocks we read (PQ2_0, PTQ1_0), the activation block we
//! consume (Q8_K) and the repacked layouts we run on (T2P and PTQ1_0x4 on ARM, X16 and L64 on
//! x86-64).
//!
//! Every type is `#[repr(C)]`, has no padding, and accepts any bit pattern, so a byte buffer of
//! the right length and alignment can be viewed as a slice of blocks ([`cast_blocks`]).
//! Sizes and field offsets are checked at compile time against docs/formats.md.

mod l64;
mod pq2_0;
mod ptq1_0;
mod q8_k;
mod t2p;
mod x16;

pub use l64::{
    decode_group, encode_group, group_half, group_trits, group_weight, index_digits, position_row, scale_position,
    BlockL64, L64_GROUPS, L64_ROWS, SCALE_OF_ROW,
};
pub use pq2_0::BlockPq2_0;
pub use ptq1_0::{digits_swar, ptq1_0_digit, ptq1_0_element_source, BlockPtq1_0, BlockPtq1_0x4, TRITS, TRIT_BYTES};
pub use q8_k::BlockQ8K;
pub use t2p::{pair_words_scalar, t2p_position, BlockT2p, SPREAD};
pub use x16::{transpose_2bit_4x4, x16_position, BlockX16, X16_ROWS, ZERO_ROW};

use crate::error::Error;

/// Weights per PQ2_0, PTQ1_0 and T2P block row (one fp16 scale each).
pub const QK: usize = 128;
/// Activations per Q8_K block.
pub const QK_K: usize = 256;

/// ggml type id of PQ2_0 in PrismML's fork (`GGML_TYPE_PQ2_0`).
pub const GGML_TYPE_PQ2_0: u32 = 142;
/// ggml type id of PTQ1_0 in PrismML's fork (`GGML_TYPE_PTQ1_0`).
pub const GGML_TYPE_PTQ1_0: u32 = 143;

/// Marker for block types that are plain old data: `repr(C)`, no padding, every bit pattern valid.
///
/// # Safety
/// Implementors must satisfy exactly that; [`cast_blocks`] relies on it.
pub unsafe trait Pod: Copy + 'static {}

// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (pq2_0.rs) equal the sum of the fields.
unsafe impl Pod for BlockPq2_0 {}
// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (ptq1_0.rs) equal the sum of the fields.
unsafe impl Pod for BlockPtq1_0 {}
// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (ptq1_0.rs) equal the sum of the fields.
unsafe impl Pod for BlockPtq1_0x4 {}
// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (q8_k.rs) equal the sum of the fields.
unsafe impl Pod for BlockQ8K {}
// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (t2p.rs) equal the sum of the fields.
unsafe impl Pod for BlockT2p {}
// SAFETY: repr(C) of integer and f16/f32 fields and arrays, so every bit pattern is valid; no
// padding: the size assertions beside the type (x16.rs) equal the sum of the fields.
unsafe impl Pod for BlockX16 {}
// SAFETY: repr(C) of f16 and u8 arrays, so every bit pattern is valid; no padding: the size
// assertions beside the type (l64.rs) equal the sum of the fields.
unsafe impl Pod for BlockL64 {}
// SAFETY: a primitive: every bit pattern is a valid u8, no padding.
unsafe impl Pod for u8 {}
// SAFETY: a primitive: every bit pattern is a valid f32 (NaNs included), no padding.
unsafe impl Pod for f32 {}

/// Views `bytes` as blocks of `T`.
///
/// # Errors
/// [`Error::Misaligned`] if `bytes` is not aligned for `T`; [`Error::BufferSize`] if its length is
/// not a multiple of `size_of::<T>()`.
pub fn cast_blocks<T: Pod>(bytes: &[u8]) -> Result<&[T], Error> {
    let size = core::mem::size_of::<T>();
    if !(bytes.as_ptr() as usize).is_multiple_of(core::mem::align_of::<T>()) {
        return Err(Error::Misaligned);
    }
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::BufferSize);
    }
    // SAFETY: alignment and length checked above; T is Pod, so every bit pattern is a valid T.
    Ok(unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<T>(), bytes.len() / size) })
}

/// Mutable twin of [`cast_blocks`].
///
/// # Errors
/// As [`cast_blocks`].
pub fn cast_blocks_mut<T: Pod>(bytes: &mut [u8]) -> Result<&mut [T], Error> {
    let size = core::mem::size_of::<T>();
    if !(bytes.as_ptr() as usize).is_multiple_of(core::mem::align_of::<T>()) {
        return Err(Error::Misaligned);
    }
    if !bytes.len().is_multiple_of(size) {
        return Err(Error::BufferSize);
    }
    // SAFETY: as in cast_blocks, and the borrow is unique.
    Ok(unsafe { core::slice::from_raw_parts_mut(bytes.as_mut_ptr().cast::<T>(), bytes.len() / size) })
}

/// Views blocks as their bytes (for writing files and comparing buffers).
pub fn as_bytes<T: Pod>(blocks: &[T]) -> &[u8] {
    // SAFETY: Pod types have no padding, so every byte is initialised.
    unsafe { core::slice::from_raw_parts(blocks.as_ptr().cast::<u8>(), core::mem::size_of_val(blocks)) }
}

/// The row-length rule shared by every path: `k` is a non-zero multiple of 128. Returns the
/// number of 128-weight blocks per row.
///
/// # Errors
/// [`Error::Shape`] otherwise.
pub const fn check_k(k: usize) -> Result<usize, Error> {
    if k == 0 || !k.is_multiple_of(QK) {
        return Err(Error::Shape);
    }
    Ok(k / QK)
}

/// The matrix shape rule shared by the repack, the kernels and the C ABI (one source): `k` as in
/// [`check_k`], `n_rows` a non-zero multiple of 4, and `n_rows * k/128` blocks without overflow.
/// Returns the number of 128-weight blocks per row.
///
/// # Errors
/// [`Error::Shape`] otherwise.
pub const fn check_shape(n_rows: usize, k: usize) -> Result<usize, Error> {
    let nb = match check_k(k) {
        Ok(nb) => nb,
        Err(e) => return Err(e),
    };
    if n_rows == 0 || !n_rows.is_multiple_of(4) || n_rows.checked_mul(nb).is_none() {
        return Err(Error::Shape);
    }
    Ok(nb)
}

/// Number of Q8_K blocks that hold one activation row of `k` values. Rows whose `k` is a multiple
/// of 128 but not of 256 are zero-padded to the next multiple of 256 before quantizing (the zeros
/// change no scale), so this rounds up.
pub const fn q8k_blocks_per_row(k: usize) -> usize {
    k.div_ceil(QK_K)
}

// The kernels read blocks with plain loads of their little-endian fields.
#[cfg(not(target_endian = "little"))]
compile_error!("ggml-t2p supports little-endian targets only (as ggml's quantized types do)");
