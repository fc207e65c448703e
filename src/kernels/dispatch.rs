//! The entry points that reach the kernels: (level, weight layout, batch width) -> one kernel of
//! the kernel table ([`super::table`]), through [`gemm_raw`]; level -> Q8_K activation quantizer
//! ([`quantize_q8_k`]). Names no ISA file: every kernel is an entry of the table.

use super::act_pack::{ActFormat, ActPack, PackedActs};
use super::operands::{validate, Activations, Job, OutPtr, PackedWeights};
use super::table::{Entry, KernelLevel};
use crate::error::Error;
use crate::format::{BlockQ8K, QK, QK_K};
use crate::reference::{self, Contract};
use crate::repack::Layout;
use core::ops::Range;

impl Activations<'_> {
    /// Packs these activations for `level`'s kernels on `layout`.
    ///
    /// # Errors
    /// As [`ActFormat::for_kernel`] and [`ActPack::new`].
    pub fn pack(&self, layout: Layout, level: KernelLevel) -> Result<ActPack, Error> {
        ActPack::new(ActFormat::for_kernel(layout, level, self.n_cols)?, self.k, self.n_cols, self.blocks)
    }
}

/// Computes rows `rows` of `dst = W x A` for every activation column, packing the activations
/// for `level` first (a convenience for tests and tools; a matrix multiplication in ggml packs
/// once with [`pack_raw`](super::act_pack::pack_raw) and calls [`gemm_raw`] per row chunk). Element (row `r`,
/// column `j`) goes to `dst[j * col_stride + r]`; nothing else in `dst` is touched. One column
/// runs the gemv kernel of `level`, more run its gemm kernel, zero columns do nothing.
///
/// # Errors
/// [`Error::Unsupported`] if `level` is not available on this CPU or has no kernels for the
/// layout; [`Error::Shape`], [`Error::Range`], [`Error::BufferSize`] for shapes that disagree (see
/// [`gemm_raw`]).
pub fn gemm(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    let pack = a.pack(w.layout(), level)?;
    gemm_packed(level, w, &pack.view(), dst, col_stride, rows)
}

/// [`gemm`] with a single activation column: `dst[r]` for `r` in `rows`.
///
/// # Errors
/// As [`gemm`].
pub fn gemv(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    act: &[BlockQ8K],
    dst: &mut [f32],
    rows: Range<usize>,
) -> Result<(), Error> {
    let a = Activations::new(act, 1, w.k())?;
    gemm(level, w, &a, dst, 0, rows)
}

/// [`gemm`] on activations packed already (for `level`, `w`'s layout and `a.n_cols` columns).
///
/// # Errors
/// As [`gemm`]; [`Error::InvalidArgument`] if `a` is packed in another format than
/// [`ActFormat::for_kernel`] gives.
pub fn gemm_packed(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    // SAFETY: dst is a live, uniquely borrowed slice of dst.len() floats.
    unsafe { gemm_raw(level, w, a, dst.as_mut_ptr(), dst.len(), col_stride, rows) }
}

/// The raw-pointer form of [`gemm_packed`], for callers (ggml threads, [`gemm_par`](super::gemm_par)) that write
/// disjoint row ranges of one output buffer at the same time.
///
/// Requirements checked here: `level` available and running `w`'s layout; `a` in the format of
/// [`ActFormat::for_kernel`]; `a.k == w.k()`; `rows` within `0..n_rows`, starting on a row tile
/// boundary (4 rows, 16 for X16, 64 for L64) and ending on one or at `n_rows`; `col_stride >= n_rows` when
/// `a.n_cols > 1`; `(n_cols - 1) * col_stride + rows.end <= dst_len`, and that extent no larger
/// than `isize::MAX` bytes; `dst` non-null and 4-byte aligned when anything is written.
///
/// # Errors
/// As [`gemm_packed`].
///
/// # Safety
/// `dst` must be valid for writes of `dst_len` floats, and no other thread may access the
/// elements this call writes (rows `rows` of each column) while it runs.
pub unsafe fn gemm_raw(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: *mut f32,
    dst_len: usize,
    col_stride: usize,
    rows: Range<usize>,
) -> Result<(), Error> {
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    let Some(kernel) = level.kernel(w.layout(), a.n_cols) else {
        return Err(Error::Unsupported); // no kernels for the layout
    };
    if kernel.act != a.format {
        return Err(Error::InvalidArgument);
    }
    validate(w, a, dst_len, col_stride, &rows)?;
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(()); // nothing is written: dst may be anything, NULL included
    }
    if dst.is_null() {
        return Err(Error::Null);
    }
    if !(dst as usize).is_multiple_of(core::mem::align_of::<f32>()) {
        return Err(Error::Misaligned);
    }
    let Some(entry) = kernel.entry else {
        return Err(Error::Unsupported); // another architecture's kernel (its level is unavailable)
    };
    let out = OutPtr { ptr: dst, col_stride };
    let nb = w.k() / QK;
    let tile = w.layout().tile_rows();
    let tiles = rows.start / tile..rows.end.div_ceil(tile);
    let (n_cols, n_rows) = (a.n_cols, w.n_rows());
    macro_rules! job {
        ($blocks:expr) => {
            Job { w: $blocks, nb, n_rows, act: a.elements(), n_cols, out, tiles }
        };
    }
    // SAFETY: (every arm) validated above, in the format the kernel reads; the level is
    // available (its features present, so its entry points run); the caller owns the rows.
    unsafe {
        match (entry, *w) {
            (Entry::T2pHalves(f), PackedWeights::T2p { blocks, .. }) => f(job!(blocks)),
            (Entry::Ptq1Halves(f), PackedWeights::Ptq1_0x4 { blocks, .. }) => f(job!(blocks)),
            (Entry::X16Halves(f), PackedWeights::X16 { blocks, .. }) => f(job!(blocks)),
            (Entry::X16Tile16(f), PackedWeights::X16 { blocks, .. }) => f(job!(blocks)),
            (Entry::T2pDup(f), PackedWeights::T2p { blocks, .. }) => f(job!(blocks)),
            (Entry::T2pX4(f), PackedWeights::T2p { blocks, .. }) => f(job!(blocks)),
            (Entry::Ptq1Dup(f), PackedWeights::Ptq1_0x4 { blocks, .. }) => f(job!(blocks)),
            (Entry::Ptq1X4(f), PackedWeights::Ptq1_0x4 { blocks, .. }) => f(job!(blocks)),
            (Entry::L64Halves(f), PackedWeights::L64 { blocks, .. }) => f(job!(blocks)),
            (Entry::L64Lut(f), PackedWeights::L64 { blocks, .. }) => f(job!(blocks)),
            (Entry::L64Tile16(f), PackedWeights::L64 { blocks, .. }) => f(job!(blocks)),
            _ => unreachable!("the table's kernel for {:?} reads another layout", w.layout()),
        }
    }
    Ok(())
}

/// Quantizes one row of `x.len() = 256 * y.len()` floats to Q8_K blocks with the quantizer of
/// `level`: bit for bit [`reference::quantize_row_q8_k`] with the same `contract` (zero blocks
/// leave their `bsums` untouched, as there). The reference level runs the reference itself; the
/// x86 levels run AVX2 + FMA (`avx2`, `avxvnni`) or AVX-512 F/BW (`avx512vnni`) code; the ARM
/// levels run NEON code.
///
/// # Errors
/// [`Error::Unsupported`] if `level` is not available on this CPU; [`Error::Shape`] if
/// `x.len() != 256 * y.len()`.
pub fn quantize_q8_k(level: KernelLevel, x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    if !level.is_available() {
        return Err(Error::Unsupported);
    }
    if y.len().checked_mul(QK_K) != Some(x.len()) {
        return Err(Error::Shape);
    }
    match level.spec().quantize {
        // SAFETY: the level is available (its quantizer's features with it); the lengths agree
        // (checked above).
        Some(quantize) => unsafe { quantize(x, y, contract) },
        None => return reference::quantize_row_q8_k(x, y, contract),
    }
    Ok(())
}

/// [`quantize_q8_k`] at this CPU's best level ([`KernelLevel::best`], asked from the features kept
/// once per process; the reference where there is none): the fast way to the reference's bits.
///
/// # Errors
/// [`Error::Shape`] if `x.len() != 256 * y.len()`.
pub fn quantize_row_q8_k_fast(x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    quantize_q8_k(KernelLevel::best().unwrap_or(KernelLevel::Reference), x, y, contract)
}
