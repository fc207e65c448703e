//! What a kernel reads and writes: the repacked weights ([`PackedWeights`]), the activation rows
//! before packing ([`Activations`]), the output pointer (`OutPtr`), one unit of work (`Job`),
//! and the checks that make every kernel's indexing safe (`validate`). Shared by every ISA file;
//! depends on no kernel.

use super::act_pack::PackedActs;
use crate::error::Error;
use crate::format::{BlockL64, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16};
use crate::repack::{repacked_blocks, Layout};
use core::ops::Range;

/// A repacked weight matrix of `n_rows x k` weights (`n_rows % 4 == 0`, `k % 128 == 0`), stored
/// tile major: all `k/128` blocks of rows `0..tile`, then the next tile (tile = 4 rows for T2P and
/// PTQ1_0x4, 16 for X16 and 64 for L64, whose last tile may be padded).
#[derive(Clone, Copy, Debug)]
pub enum PackedWeights<'a> {
    /// T2P blocks (from PQ2_0 or PTQ1_0).
    T2p {
        /// `n_rows/4 * k/128` blocks.
        blocks: &'a [BlockT2p],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
    /// PTQ1_0x4 blocks (native 1.75 bits per weight).
    Ptq1_0x4 {
        /// `n_rows/4 * k/128` blocks.
        blocks: &'a [BlockPtq1_0x4],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
    /// X16 blocks (from PQ2_0 or PTQ1_0; x86-64).
    X16 {
        /// `ceil(n_rows/16) * k/128` blocks.
        blocks: &'a [BlockX16],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
    /// L64 blocks (from PTQ1_0, 1.75 bits per weight; x86-64 with AVX-512 VBMI).
    L64 {
        /// `ceil(n_rows/64) * k/128` blocks.
        blocks: &'a [BlockL64],
        /// Output rows.
        n_rows: usize,
        /// Weights per row.
        k: usize,
    },
}

fn check_matrix(layout: Layout, n_rows: usize, k: usize, n_blocks: usize) -> Result<(), Error> {
    if n_blocks < repacked_blocks(layout, n_rows, k)? {
        return Err(Error::BufferSize);
    }
    Ok(())
}

impl<'a> PackedWeights<'a> {
    /// A T2P matrix; extra trailing blocks are ignored.
    ///
    /// # Errors
    /// [`Error::Shape`] for a shape outside [`crate::format::check_shape`]; [`Error::BufferSize`] if `blocks` is
    /// shorter than [`repacked_blocks`].
    pub fn t2p(blocks: &'a [BlockT2p], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::T2p, n_rows, k, blocks.len())?;
        Ok(PackedWeights::T2p { blocks, n_rows, k })
    }

    /// A PTQ1_0x4 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn ptq1_0x4(blocks: &'a [BlockPtq1_0x4], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::Ptq1_0x4, n_rows, k, blocks.len())?;
        Ok(PackedWeights::Ptq1_0x4 { blocks, n_rows, k })
    }

    /// An X16 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn x16(blocks: &'a [BlockX16], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::X16, n_rows, k, blocks.len())?;
        Ok(PackedWeights::X16 { blocks, n_rows, k })
    }

    /// An L64 matrix; errors as [`PackedWeights::t2p`].
    ///
    /// # Errors
    /// As [`PackedWeights::t2p`].
    pub fn l64(blocks: &'a [BlockL64], n_rows: usize, k: usize) -> Result<Self, Error> {
        check_matrix(Layout::L64, n_rows, k, blocks.len())?;
        Ok(PackedWeights::L64 { blocks, n_rows, k })
    }

    /// The layout.
    pub fn layout(&self) -> Layout {
        match self {
            PackedWeights::T2p { .. } => Layout::T2p,
            PackedWeights::Ptq1_0x4 { .. } => Layout::Ptq1_0x4,
            PackedWeights::X16 { .. } => Layout::X16,
            PackedWeights::L64 { .. } => Layout::L64,
        }
    }

    /// Output rows.
    pub fn n_rows(&self) -> usize {
        match *self {
            PackedWeights::T2p { n_rows, .. }
            | PackedWeights::Ptq1_0x4 { n_rows, .. }
            | PackedWeights::X16 { n_rows, .. }
            | PackedWeights::L64 { n_rows, .. } => n_rows,
        }
    }

    /// Weights per row.
    pub fn k(&self) -> usize {
        match *self {
            PackedWeights::T2p { k, .. }
            | PackedWeights::Ptq1_0x4 { k, .. }
            | PackedWeights::X16 { k, .. }
            | PackedWeights::L64 { k, .. } => k,
        }
    }
}

/// `n_cols` Q8_K activation rows (one per token), each `ceil(k/256)` consecutive blocks: the input
/// of the activation pack ([`ActPack::new`](super::act_pack::ActPack::new); `Activations::pack`
/// packs for a kernel level) and of the convenience `kernels::gemm`.
#[derive(Clone, Copy, Debug)]
pub struct Activations<'a> {
    /// At least `n_cols * ceil(k/256)` blocks.
    pub blocks: &'a [BlockQ8K],
    /// Columns (tokens).
    pub n_cols: usize,
    /// Values per row before padding (a multiple of 128).
    pub k: usize,
}

impl<'a> Activations<'a> {
    /// Checks the shape. Zero columns (an empty batch, as ggml produces for a layer whose
    /// outputs are all skipped) is allowed and computes nothing.
    ///
    /// # Errors
    /// [`Error::Shape`] for `k` outside [`crate::format::check_k`]; [`Error::BufferSize`] if
    /// `blocks` is too short.
    pub fn new(blocks: &'a [BlockQ8K], n_cols: usize, k: usize) -> Result<Self, Error> {
        crate::format::check_k(k)?;
        let need = n_cols.checked_mul(crate::format::q8k_blocks_per_row(k)).ok_or(Error::Shape)?;
        if blocks.len() < need {
            return Err(Error::BufferSize);
        }
        Ok(Activations { blocks, n_cols, k })
    }

    /// Column `j`'s blocks.
    pub fn col(&self, j: usize) -> &'a [BlockQ8K] {
        let n = crate::format::q8k_blocks_per_row(self.k);
        &self.blocks[j * n..(j + 1) * n]
    }
}

/// Where outputs go: element (row `r`, column `j`) at `ptr + j * col_stride + r`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OutPtr {
    pub ptr: *mut f32,
    pub col_stride: usize,
}

// SAFETY: an OutPtr is only written through at rows a job owns; parallel jobs own disjoint row
// ranges (see gemm_par), so moving it to another thread cannot race.
unsafe impl Send for OutPtr {}
// SAFETY: as for Send: shared references only let each job write its own rows.
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// # Safety
    /// `ptr + j * col_stride + r` must be valid for writes and owned by the caller's job.
    #[inline(always)]
    pub unsafe fn write(self, r: usize, j: usize, v: f32) {
        // SAFETY: per the function contract.
        unsafe { *self.ptr.add(j * self.col_stride + r) = v };
    }
}

/// One unit of work handed to a kernel: row tiles `tiles` (`B`'s tile of rows each; rows at or
/// past `n_rows` are padding and never stored) of a matrix with `nb` blocks per tile, against
/// `n_cols` columns of packed activations `act` (elements of type `A`, laid out as its
/// [`ActFormat`](super::act_pack::ActFormat) says).
pub(crate) struct Job<'a, B, A> {
    pub w: &'a [B],
    pub nb: usize,
    pub n_rows: usize,
    pub act: &'a [A],
    pub n_cols: usize,
    pub out: OutPtr,
    pub tiles: Range<usize>,
}

impl<'a, B, A> Job<'a, B, A> {
    /// The weight blocks of row tile `t`.
    #[inline]
    pub fn tile(&self, t: usize) -> &'a [B] {
        &self.w[t * self.nb..(t + 1) * self.nb]
    }
    /// Column `j`'s elements (formats with one element per column and block: Halves, Dup).
    #[inline]
    pub fn col(&self, j: usize) -> &'a [A] {
        &self.act[j * self.nb..(j + 1) * self.nb]
    }
}

/// Checks everything a kernel relies on; after this, kernels index without further checks
/// failing.
pub(crate) fn validate(
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst_len: usize,
    col_stride: usize,
    rows: &Range<usize>,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    if a.k != w.k() {
        return Err(Error::Shape);
    }
    let tile = w.layout().tile_rows();
    let end_ok = rows.end.is_multiple_of(tile) || rows.end == n_rows;
    if rows.start > rows.end || rows.end > n_rows {
        return Err(Error::Range);
    }
    // An empty range computes nothing, wherever it sits; a non-empty one covers whole row tiles.
    if !rows.is_empty() && (!rows.start.is_multiple_of(tile) || !end_ok) {
        return Err(Error::Range);
    }
    if a.n_cols > 1 && col_stride < n_rows {
        return Err(Error::Shape);
    }
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(());
    }
    let need = (a.n_cols - 1).checked_mul(col_stride).and_then(|v| v.checked_add(rows.end)).ok_or(Error::Shape)?;
    // no real buffer holds more than isize::MAX bytes: a larger claim would make offsets wrap
    if dst_len < need || need > isize::MAX as usize / core::mem::size_of::<f32>() {
        return Err(Error::BufferSize);
    }
    Ok(())
}
