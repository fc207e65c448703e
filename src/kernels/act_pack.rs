//! The activation (LHS) pack: Q8_K activation rows rearranged once per matrix multiplication into
//! the form the chosen kernel reads, KleidiAI style: the packed format is this crate's business,
//! callers only ask for its size ([`packed_size`]) and fill it ([`pack_raw`], safe for disjoint
//! pieces from several threads at once).
//!
//! Five formats; which one a kernel reads is a column of the kernel table (`table.rs`), asked with
//! [`ActFormat::for_kernel`] (from the layout, kernel level and batch width):
//!
//! | format | element | for |
//! |---|---|---|
//! | [`ActFormat::Halves`] | [`Q8Half`]: one column's 128 values, scale, `-sum` | x86 kernels (activation groups are broadcast from it), the scalar reference |
//! | [`ActFormat::Dup`] | [`ActDup`]: each 8-value chunk duplicated `[y \| y]` | ARM `sdot` gemv (one column) |
//! | [`ActFormat::X4`] | [`ActBlockX4`] ("Q8_Kx4"): 4 columns interleaved in 8-byte chunks | ARM `smmla` and `sdot` gemm |
//! | [`ActFormat::T16`] | [`ActTile16`]: 16 columns as two 16 x 64 int8 AMX tiles, tile major | x86 AMX gemm |
//! | [`ActFormat::Lut`] | [`LutHalf`]: the column's 26 group tables of partial dot products | x86 L64 gemv (one column) |
//!
//! Element `i` of a column is the half `i % 2` of its Q8_K block `i / 2` that 128-weight block `i`
//! of a weight row meets (a row of `k = 128 * odd` values has `k/128` halves: the zero-padded half
//! of its last Q8_K block is not packed). Every element stores `sum(y)` of its 128 values computed
//! from the values themselves, so the Q8_K `bsums` (which the reference quantizer leaves stale in
//! all-zero blocks) are never read: as `-sum(y)` in [`Q8Half`], and in the ARM formats as ready-made
//! accumulator seeds `M - sum(y)` and `M + sum(y)` with `M =` [`MAGIC`] (see there).

use super::act_lut::{self, LutHalf};
use crate::error::Error;
use crate::format::{cast_blocks, check_k, BlockQ8K, Pod, QK};
use crate::reference::ROUNDING_MAGIC;
use core::mem::size_of;
use core::ptr::addr_of_mut;

/// One column's 128-value half block: the values, the Q8_K scale and the negated value sum.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct Q8Half {
    /// The 128 int8 values (group `g` of 4 values at bytes `4g .. 4g+4`).
    pub qs: [i8; 128],
    /// The Q8_K block's `d`.
    pub d: f32,
    /// `-sum(qs)`.
    pub nysum: i32,
    _pad: [u32; 2],
}

const _: () = assert!(size_of::<Q8Half>() == 144);

impl Default for Q8Half {
    fn default() -> Self {
        Q8Half { qs: [0; 128], d: 0.0, nysum: 0, _pad: [0; 2] }
    }
}

/// `0x4B40_0000`, the bits of the float [`ROUNDING_MAGIC`] `= 1.5 * 2^23 = 12582912.0`. While
/// `|v| < 2^22`, the int32 `MAGIC + v` read as a float is exactly `12582912 + v`, so one `fsub` of
/// [`ROUNDING_MAGIC`] turns it into `(float) v` with no `scvtf`. The ARM kernels seed an
/// accumulator of each block with `MAGIC - sum(y)` (code decoders: it ends at `MAGIC + isum`) or
/// `MAGIC + sum(y)` (negated decoders: it ends at `MAGIC - isum`); `|isum| <= 128 * 2 * 128 < 2^22`.
pub const MAGIC: i32 = ROUNDING_MAGIC.to_bits() as i32;

/// One column's 128-value half block prepared for `sdot`: chunk `c` (values `8c..8c+8`)
/// duplicated into both halves of `qs[c]`.
///
/// An `sdot` accumulator of a row pair has lanes `[row a, row a, row b, row b]` (each row's two
/// lanes are added pairwise at the end), so a seed that adds `x` to both rows is `[x, 0, x, 0]`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct ActDup {
    /// `qs[c] = [y(8c..8c+8) | y(8c..8c+8)]`.
    pub qs: [[i8; 16]; 16],
    /// `[MAGIC - sum(y), 0, MAGIC - sum(y), 0]`, twice (one per row pair: two loads cost no
    /// SIMD instruction where a register copy would).
    pub seed: [[i32; 4]; 2],
    /// `[MAGIC + sum(y), 0, MAGIC + sum(y), 0]`, twice (for negated decoders).
    pub nseed: [[i32; 4]; 2],
    /// Zeros: the starting values of a block's other accumulators. Loading them keeps the SIMD
    /// pipes free (a `movi` is a SIMD instruction, a load is not), and a load from the pack
    /// cannot be hoisted out of the block loop or folded into a constant.
    pub zero: [[i32; 4]; 4],
    /// The Q8_K block's `d`.
    pub d: f32,
    _pad: [u32; 3],
}

const _: () = assert!(size_of::<ActDup>() == 400);

impl Default for ActDup {
    fn default() -> Self {
        ActDup { qs: [[0; 16]; 16], seed: [[0; 4]; 2], nseed: [[0; 4]; 2], zero: [[0; 4]; 4], d: 0.0, _pad: [0; 3] }
    }
}

/// Four columns' 128-value halves: `qs[(4c + j) * 8 + e]` is column `j`, value `8c + e`
/// (c = 0..16 chunks), i.e. chunk `c` of columns 0,1 then 2,3 as two 16-byte `smmla` operands.
///
/// Scales and seeds are stored in the lane order of the accumulators that use them, so the kernels
/// load them as they are. For `smmla`, per column pair `q`
/// (`[row a . col 2q, row a . col 2q+1, row b . col 2q, row b . col 2q+1]`):
/// `yd[q] = [d(2q), d(2q+1), d(2q), d(2q+1)]`, `seed[p][q]` likewise with `MAGIC - sum(y)` and
/// `nseed[p][q]` with `MAGIC + sum(y)` (see [`MAGIC`]). The seeds are stored once per row pair `p`
/// (two identical copies): the `smmla` accumulators of both row pairs start from them, and two
/// loads are free where one load and a register copy would cost a SIMD instruction. For `sdot`
/// (one column `j` per accumulator, lanes `[row a, row a, row b, row b]`): `dseed[j]` is
/// `[MAGIC - sum(y_j), 0, MAGIC - sum(y_j), 0]` twice (one per row pair), `ndseed[j]` the same with
/// `MAGIC + sum(y_j)`. Columns past the batch are zero values with scale 0 (their seeds are
/// `MAGIC`), so a batch that is not a multiple of the tile width runs as one padded pass whose
/// extra outputs are dropped.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct ActBlockX4 {
    /// Scales, per column pair, in `smmla` lane order.
    pub yd: [[f32; 4]; 2],
    /// `smmla` seeds `MAGIC - sum(y)`, `[row pair][column pair]`, `smmla` lane order.
    pub seed: [[[i32; 4]; 2]; 2],
    /// `smmla` seeds `MAGIC + sum(y)`, the same way.
    pub nseed: [[[i32; 4]; 2]; 2],
    /// `sdot` seeds `MAGIC - sum(y)`, `[column][row pair]`, `sdot` lane order.
    pub dseed: [[[i32; 4]; 2]; 4],
    /// `sdot` seeds `MAGIC + sum(y)`, the same way.
    pub ndseed: [[[i32; 4]; 2]; 4],
    /// Interleaved values.
    pub qs: [i8; 512],
}

const _: () = assert!(size_of::<ActBlockX4>() == 928);

impl Default for ActBlockX4 {
    fn default() -> Self {
        ActBlockX4 {
            yd: [[0.0; 4]; 2],
            seed: [[[0; 4]; 2]; 2],
            nseed: [[[0; 4]; 2]; 2],
            dseed: [[[0; 4]; 2]; 4],
            ndseed: [[[0; 4]; 2]; 4],
            qs: [0; 512],
        }
    }
}

/// Sixteen columns' 128-value halves as two AMX `A` tiles (16 rows = columns x 64 bytes):
/// `qs[h][m][e]` is column `16g + m`, value `64h + e` (tile `h` row `m`, loaded with a 64-byte
/// stride), and `d[m]` that column's Q8_K scale. Columns past the batch are zero values with
/// scale 0, so a batch that is not a multiple of 16 runs as padded tiles whose extra outputs are
/// dropped. No value sums: the AMX kernel expands the weight codes to signed values (`tdpbssd`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct ActTile16 {
    /// The two `A` tiles.
    pub qs: [[[i8; 64]; 16]; 2],
    /// Scales of the 16 columns.
    pub d: [f32; 16],
}

const _: () = assert!(size_of::<ActTile16>() == 2112);

impl Default for ActTile16 {
    fn default() -> Self {
        ActTile16 { qs: [[[0; 64]; 16]; 2], d: [0.0; 16] }
    }
}

// SAFETY: repr(C), no padding (sizes asserted above are the sums of the fields), any bit pattern.
unsafe impl Pod for Q8Half {}
// SAFETY: as above.
unsafe impl Pod for ActTile16 {}
// SAFETY: as above.
unsafe impl Pod for ActDup {}
// SAFETY: as above.
unsafe impl Pod for ActBlockX4 {}
// SAFETY: repr(C) of u8 arrays, an f32 and u32 padding words, every bit pattern valid; no implicit
// padding (the size assertion in act_lut.rs equals the sum of the fields).
unsafe impl Pod for LutHalf {}

/// The packed activation formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActFormat {
    /// [`Q8Half`] per column and 128-weight block, column major: element `col * nb + i`.
    Halves,
    /// [`ActDup`] per 128-weight block of the single column.
    Dup,
    /// [`ActBlockX4`] per group of 4 columns and 128-weight block: element `(col / 4) * nb + i`.
    X4,
    /// [`ActTile16`] per group of 16 columns and 128-weight block: element `(col / 16) * nb + i`.
    T16,
    /// [`LutHalf`] per 128-weight block of the single column.
    Lut,
}

impl ActFormat {
    /// Bytes of one element.
    pub fn element_size(self) -> usize {
        match self {
            ActFormat::Halves => size_of::<Q8Half>(),
            ActFormat::Dup => size_of::<ActDup>(),
            ActFormat::X4 => size_of::<ActBlockX4>(),
            ActFormat::T16 => size_of::<ActTile16>(),
            ActFormat::Lut => size_of::<LutHalf>(),
        }
    }

    /// Elements for `n_cols` columns of `nb` halves.
    fn elements(self, nb: usize, n_cols: usize) -> Option<usize> {
        match self {
            ActFormat::Halves => n_cols.checked_mul(nb),
            ActFormat::Dup | ActFormat::Lut => (n_cols <= 1).then_some(n_cols * nb),
            ActFormat::X4 => n_cols.div_ceil(4).checked_mul(nb),
            ActFormat::T16 => n_cols.div_ceil(16).checked_mul(nb),
        }
    }

    /// Columns per element group: the batch is padded to a multiple of this.
    fn group(self) -> usize {
        match self {
            ActFormat::Halves | ActFormat::Dup | ActFormat::Lut => 1,
            ActFormat::X4 => 4,
            ActFormat::T16 => 16,
        }
    }
}

/// Alignment the packed buffer needs (the elements' alignment).
pub const PACKED_ALIGN: usize = 16;

/// Bytes of the packed activations of `n_cols` columns of length `k` (0 for no columns).
///
/// # Errors
/// [`Error::Shape`] for `k` outside [`check_k`], an overflowing size, or [`ActFormat::Dup`] with
/// more than one column.
pub fn packed_size(format: ActFormat, k: usize, n_cols: usize) -> Result<usize, Error> {
    let nb = check_k(k)?;
    format
        .elements(nb, n_cols)
        .and_then(|e| e.checked_mul(format.element_size()))
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or(Error::Shape)
}

/// `-sum` of 128 values.
#[inline]
fn neg_sum(qs: &[i8]) -> i32 {
    -qs.iter().map(|&q| i32::from(q)).sum::<i32>()
}

/// Writes column `col`'s element for half `i` (values `qs`, scale `d`).
///
/// # Safety
/// `base` points at a packed buffer of `format` for `n_cols` columns of `nb` halves, aligned to
/// [`PACKED_ALIGN`]; no other thread accesses the bytes of this (column, half) while it runs
/// (other columns' lanes of the same [`ActBlockX4`] may be written at the same time: only this
/// column's lane bytes are touched, through raw pointers).
unsafe fn write_half(format: ActFormat, base: *mut u8, nb: usize, col: usize, i: usize, qs: &[i8], d: f32) {
    let nysum = neg_sum(qs);
    // SAFETY: every offset is inside the element of (col, i), per the caller's contract.
    unsafe {
        match format {
            ActFormat::Halves => {
                let mut h = Q8Half { d, nysum, ..Default::default() };
                h.qs.copy_from_slice(qs);
                base.cast::<Q8Half>().add(col * nb + i).write(h);
            }
            ActFormat::Dup => {
                let (lo, hi) = (MAGIC.wrapping_add(nysum), MAGIC.wrapping_sub(nysum));
                let mut out = ActDup { d, seed: [[lo, 0, lo, 0]; 2], nseed: [[hi, 0, hi, 0]; 2], ..Default::default() };
                for (c, dst) in out.qs.iter_mut().enumerate() {
                    dst[..8].copy_from_slice(&qs[8 * c..8 * c + 8]);
                    dst[8..].copy_from_slice(&qs[8 * c..8 * c + 8]);
                }
                base.cast::<ActDup>().add(i).write(out);
            }
            ActFormat::X4 => {
                let e = base.cast::<ActBlockX4>().add((col / 4) * nb + i);
                let lane = col % 4;
                let (q, s) = (lane / 2, lane % 2);
                let (lo, hi) = (MAGIC.wrapping_add(nysum), MAGIC.wrapping_sub(nysum));
                for slot in [s, s + 2] {
                    addr_of_mut!((*e).yd[q][slot]).write(d);
                    for p in 0..2 {
                        addr_of_mut!((*e).seed[p][q][slot]).write(lo);
                        addr_of_mut!((*e).nseed[p][q][slot]).write(hi);
                    }
                }
                // this column's own sdot seeds: whole vectors
                addr_of_mut!((*e).dseed[lane]).write([[lo, 0, lo, 0]; 2]);
                addr_of_mut!((*e).ndseed[lane]).write([[hi, 0, hi, 0]; 2]);
                let dst = addr_of_mut!((*e).qs).cast::<i8>();
                for c in 0..16 {
                    core::ptr::copy_nonoverlapping(qs.as_ptr().add(8 * c), dst.add((4 * c + lane) * 8), 8);
                }
            }
            ActFormat::Lut => {
                // built in place: the element is 6.7 KB (Pod, aligned: PACKED_ALIGN)
                act_lut::build(qs, d, &mut *base.cast::<LutHalf>().add(i));
            }
            ActFormat::T16 => {
                let e = base.cast::<ActTile16>().add((col / 16) * nb + i);
                let m = col % 16;
                addr_of_mut!((*e).d[m]).write(d);
                for h in 0..2 {
                    let row = addr_of_mut!((*e).qs[h][m]).cast::<i8>();
                    core::ptr::copy_nonoverlapping(qs.as_ptr().add(64 * h), row, 64);
                }
            }
        }
    }
}

/// Checks that Q8_K blocks `blocks` of column `col` are a piece of `n_cols` activation columns of
/// length `k` (`SHAPE` otherwise: `k` not a positive multiple of 128, `col >= n_cols`, a reversed
/// range or one past the `ceil(k / 256)` blocks). Returns the 128-weight blocks per column.
pub(crate) fn check_piece(
    k: usize,
    n_cols: usize,
    col: usize,
    blocks: &core::ops::Range<usize>,
) -> Result<usize, Error> {
    let nb = check_k(k)?;
    if col >= n_cols || blocks.start > blocks.end || blocks.end > nb.div_ceil(2) {
        return Err(Error::Shape);
    }
    Ok(nb)
}

/// Packs Q8_K blocks `blocks` of column `col` (of `n_cols` columns of length `k`) into the packed
/// buffer at `dst`. `q8k` holds exactly those blocks (`blocks.len()` Q8_K blocks, in order).
///
/// Every call writes only the elements of its (column, halves) and, when `col == n_cols - 1`, the
/// zero padding lanes of the last [`ActFormat::X4`] or [`ActFormat::T16`] group for the same halves. So calls whose
/// (column, block range) pieces do not overlap may run on different threads at once, and calls
/// that together cover every block of every column fill the whole buffer.
///
/// # Errors
/// [`Error::Shape`] for `k` outside [`check_k`], `col >= n_cols`, a block range outside
/// `0..ceil(k/256)` or `q8k.len() != blocks.len()`; [`Error::BufferSize`] if `dst_len` is smaller
/// than [`packed_size`]; [`Error::Null`] / [`Error::Misaligned`] for a null or misaligned `dst`.
///
/// # Safety
/// `dst` must be valid for writes of `dst_len` bytes, and no other thread may access the bytes
/// this call writes while it runs.
#[allow(clippy::too_many_arguments)] // the C ABI's ggml_t2p_act_pack, one to one
pub unsafe fn pack_raw(
    format: ActFormat,
    k: usize,
    n_cols: usize,
    col: usize,
    blocks: core::ops::Range<usize>,
    q8k: &[BlockQ8K],
    dst: *mut u8,
    dst_len: usize,
) -> Result<(), Error> {
    let nb = check_piece(k, n_cols, col, &blocks)?;
    if q8k.len() != blocks.len() {
        return Err(Error::Shape);
    }
    if dst_len < packed_size(format, k, n_cols)? {
        return Err(Error::BufferSize);
    }
    if blocks.is_empty() {
        return Ok(());
    }
    if dst.is_null() {
        return Err(Error::Null);
    }
    if !(dst as usize).is_multiple_of(PACKED_ALIGN) {
        return Err(Error::Misaligned);
    }
    let g = format.group();
    let pad_cols = if col + 1 == n_cols { n_cols..n_cols.div_ceil(g) * g } else { 0..0 };
    let zero = [0i8; QK];
    for (b, blk) in blocks.zip(q8k) {
        for h in 0..2 {
            let i = 2 * b + h;
            if i >= nb {
                break; // the zero-padded half of a row of k = 128 * odd
            }
            // SAFETY: (col, i) and the padding lanes are this call's, per the contract.
            unsafe {
                write_half(format, dst, nb, col, i, &blk.qs[QK * h..QK * h + QK], blk.d);
                for pc in pad_cols.clone() {
                    write_half(format, dst, nb, pc, i, &zero, 0.0);
                }
            }
        }
    }
    Ok(())
}

/// Packed activations in memory that this crate owns (aligned to 64 bytes).
#[derive(Clone, Debug)]
pub struct ActPack {
    format: ActFormat,
    k: usize,
    n_cols: usize,
    len: usize,
    buf: Vec<Align64>,
}

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Align64([u8; 64]);

impl ActPack {
    /// Packs all `n_cols` columns of `act` (each `ceil(k/256)` Q8_K blocks, back to back).
    ///
    /// # Errors
    /// As [`packed_size`]; [`Error::BufferSize`] if `act` is too short.
    pub fn new(format: ActFormat, k: usize, n_cols: usize, act: &[BlockQ8K]) -> Result<Self, Error> {
        let len = packed_size(format, k, n_cols)?;
        let nq = k.div_ceil(2 * QK);
        if act.len() < n_cols.checked_mul(nq).ok_or(Error::Shape)? {
            return Err(Error::BufferSize);
        }
        let mut buf = vec![Align64([0; 64]); len.div_ceil(64)];
        for col in 0..n_cols {
            // SAFETY: the buffer is ours, 64-byte aligned and len bytes long.
            unsafe {
                pack_raw(format, k, n_cols, col, 0..nq, &act[col * nq..(col + 1) * nq], buf.as_mut_ptr().cast(), len)?
            };
        }
        Ok(ActPack { format, k, n_cols, len, buf })
    }

    /// A view for the kernels.
    pub fn view(&self) -> PackedActs<'_> {
        // SAFETY: buf holds at least len initialised bytes.
        let bytes = unsafe { core::slice::from_raw_parts(self.buf.as_ptr().cast::<u8>(), self.len) };
        PackedActs { format: self.format, k: self.k, n_cols: self.n_cols, bytes }
    }
}

/// A packed activation buffer of `n_cols` columns of length `k` in `format`.
#[derive(Clone, Copy, Debug)]
pub struct PackedActs<'a> {
    /// The format.
    pub format: ActFormat,
    /// Values per column before padding (a multiple of 128).
    pub k: usize,
    /// Columns.
    pub n_cols: usize,
    /// At least [`packed_size`] bytes, aligned to [`PACKED_ALIGN`].
    pub bytes: &'a [u8],
}

impl<'a> PackedActs<'a> {
    /// Checks the buffer against the shape.
    ///
    /// # Errors
    /// As [`packed_size`]; [`Error::BufferSize`] if `bytes` is too short; [`Error::Misaligned`].
    pub fn new(format: ActFormat, k: usize, n_cols: usize, bytes: &'a [u8]) -> Result<Self, Error> {
        let need = packed_size(format, k, n_cols)?;
        if bytes.len() < need {
            return Err(Error::BufferSize);
        }
        if need > 0 && !(bytes.as_ptr() as usize).is_multiple_of(PACKED_ALIGN) {
            return Err(Error::Misaligned);
        }
        Ok(PackedActs { format, k, n_cols, bytes: &bytes[..need] })
    }

    /// The elements as `T` (which must be the format's element type).
    pub(crate) fn elements<T: Pod>(&self) -> &'a [T] {
        debug_assert_eq!(size_of::<T>(), self.format.element_size());
        if self.bytes.is_empty() {
            return &[];
        }
        cast_blocks(self.bytes).expect("checked by PackedActs::new")
    }
}
