//! Load-time repacking: PQ2_0 -> T2P, PTQ1_0 -> T2P, PTQ1_0 -> PTQ1_0x4, and the exact inverses
//! (used by tests and by anyone who wants their original bytes back).
//!
//! Source matrices are ggml row-major: row `r`'s block `i` at index `r * k/128 + i`. Repacked
//! matrices are row-group major (see [`crate::PackedWeights`]) and have the same byte size as the
//! source for T2P from PQ2_0 and for PTQ1_0x4; T2P from PTQ1_0 is 136/112 of the PTQ1_0 size.
//! Row groups are repacked in parallel on the current rayon pool.

use crate::format::{BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockT2p, GGML_TYPE_PQ2_0, GGML_TYPE_PTQ1_0, QK};
use crate::Error;
use core::mem::size_of;
use rayon::prelude::*;

/// The repacked layouts. The numeric values are the C header's `GGML_T2P_LAYOUT_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Layout {
    /// T2P (from PQ2_0, or from PTQ1_0 at 2.125 bits per weight).
    T2p = 1,
    /// PTQ1_0x4 (from PTQ1_0 only, 1.75 bits per weight kept).
    Ptq1_0x4 = 2,
}

impl Layout {
    /// Parses the C value.
    pub fn from_i32(v: i32) -> Option<Self> {
        match v {
            1 => Some(Layout::T2p),
            2 => Some(Layout::Ptq1_0x4),
            _ => None,
        }
    }

    /// Bytes of one 4-row x 128-weight block of this layout.
    pub fn block_size(self) -> usize {
        match self {
            Layout::T2p => size_of::<BlockT2p>(),
            Layout::Ptq1_0x4 => size_of::<BlockPtq1_0x4>(),
        }
    }
}

/// The weight types we repack from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceType {
    /// ggml type 142.
    Pq2_0,
    /// ggml type 143.
    Ptq1_0,
}

impl SourceType {
    /// From a ggml type id.
    pub fn from_ggml(type_id: u32) -> Option<Self> {
        match type_id {
            GGML_TYPE_PQ2_0 => Some(SourceType::Pq2_0),
            GGML_TYPE_PTQ1_0 => Some(SourceType::Ptq1_0),
            _ => None,
        }
    }

    /// Bytes per 128-weight source block.
    pub fn block_size(self) -> usize {
        match self {
            SourceType::Pq2_0 => size_of::<BlockPq2_0>(),
            SourceType::Ptq1_0 => size_of::<BlockPtq1_0>(),
        }
    }
}

fn shape_blocks(n_rows: usize, k: usize) -> Result<usize, Error> {
    if n_rows == 0 || k == 0 || n_rows % 4 != 0 || k % QK != 0 {
        return Err(Error::Shape);
    }
    n_rows.checked_mul(k / QK).ok_or(Error::Shape)
}

/// Bytes of the source matrix (`n_rows * k/128` blocks).
///
/// # Errors
/// [`Error::Shape`] for `n_rows % 4 != 0`, `k % 128 != 0`, zero or overflowing sizes.
pub fn source_size(src: SourceType, n_rows: usize, k: usize) -> Result<usize, Error> {
    shape_blocks(n_rows, k)?.checked_mul(src.block_size()).ok_or(Error::Shape)
}

/// Bytes of the repacked matrix (`n_rows/4 * k/128` blocks of the layout).
///
/// # Errors
/// [`Error::Shape`] as [`source_size`]; [`Error::Unsupported`] for PQ2_0 -> PTQ1_0x4.
pub fn repacked_size(src: SourceType, layout: Layout, n_rows: usize, k: usize) -> Result<usize, Error> {
    if src == SourceType::Pq2_0 && layout == Layout::Ptq1_0x4 {
        return Err(Error::Unsupported);
    }
    (shape_blocks(n_rows, k)? / 4).checked_mul(layout.block_size()).ok_or(Error::Shape)
}

/// Checks lengths and returns blocks per row.
fn check(n_rows: usize, k: usize, src_len: usize, dst_len: usize) -> Result<usize, Error> {
    let blocks = shape_blocks(n_rows, k)?;
    if src_len < blocks || dst_len < blocks / 4 {
        return Err(Error::BufferSize);
    }
    Ok(k / QK)
}

/// Repacks row groups in parallel: `pack(rows_of_group_block_i)` for each of the `nb` blocks of
/// each 4-row group.
fn repack_groups<S: Sync, D: Send>(src: &[S], nb: usize, dst: &mut [D], pack: impl Fn([&S; 4]) -> D + Sync) {
    let groups = dst.len() / nb;
    dst.par_chunks_mut(nb).take(groups).enumerate().for_each(|(g, out)| {
        let row = |r: usize| &src[(4 * g + r) * nb..(4 * g + r + 1) * nb];
        let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
        for (i, o) in out.iter_mut().enumerate() {
            *o = pack([&r0[i], &r1[i], &r2[i], &r3[i]]);
        }
    });
}

/// Scatters row groups back: `unpack(block, r)` gives row `r`'s source block.
fn unpack_groups<S: Sync, D: Send>(src: &[S], nb: usize, dst: &mut [D], unpack: impl Fn(&S, usize) -> D + Sync) {
    dst.par_chunks_mut(4 * nb).enumerate().for_each(|(g, rows)| {
        for (r, row) in rows.chunks_mut(nb).enumerate() {
            for (i, o) in row.iter_mut().enumerate() {
                *o = unpack(&src[g * nb + i], r);
            }
        }
    });
}

/// PQ2_0 (`n_rows x k`, row-major) -> T2P (row-group major). Codes, code 3 included, and scales
/// are kept bit for bit; [`unpack_t2p_to_pq2_0`] is the exact inverse.
///
/// # Errors
/// [`Error::Shape`] for a shape we do not handle; [`Error::BufferSize`] if `src` has fewer than
/// `n_rows * k/128` blocks or `dst` fewer than `n_rows/4 * k/128`.
pub fn repack_pq2_0_to_t2p(src: &[BlockPq2_0], n_rows: usize, k: usize, dst: &mut [BlockT2p]) -> Result<(), Error> {
    let nb = check(n_rows, k, src.len(), dst.len())?;
    repack_groups(src, nb, &mut dst[..n_rows / 4 * nb], BlockT2p::from_rows);
    Ok(())
}

/// T2P -> PQ2_0, the inverse of [`repack_pq2_0_to_t2p`].
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`] with the roles of the buffers swapped.
pub fn unpack_t2p_to_pq2_0(src: &[BlockT2p], n_rows: usize, k: usize, dst: &mut [BlockPq2_0]) -> Result<(), Error> {
    let nb = check(n_rows, k, dst.len(), src.len())?;
    unpack_groups(src, nb, &mut dst[..n_rows * nb], BlockT2p::row);
    Ok(())
}

/// One PTQ1_0 block as a PQ2_0 block: a trit digit (0..=2) is already the 2-bit code of the
/// same weight (`value = (digit - 1) * d`), and the scale is the same fp16.
pub fn ptq1_0_to_pq2_0(b: &BlockPtq1_0) -> BlockPq2_0 {
    BlockPq2_0::from_codes(b.d, &b.digits())
}

/// PTQ1_0 -> T2P (2.125 bits per weight), so a PTQ1_0 file runs on the T2P kernels with the
/// same results as the native PTQ1_0 kernels.
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`].
pub fn repack_ptq1_0_to_t2p(src: &[BlockPtq1_0], n_rows: usize, k: usize, dst: &mut [BlockT2p]) -> Result<(), Error> {
    let nb = check(n_rows, k, src.len(), dst.len())?;
    repack_groups(src, nb, &mut dst[..n_rows / 4 * nb], |rows| {
        let [a, b, c, d] = rows.map(ptq1_0_to_pq2_0);
        BlockT2p::from_rows([&a, &b, &c, &d])
    });
    Ok(())
}

/// PTQ1_0 -> PTQ1_0x4 (1.75 bits per weight kept; bytes only move).
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`].
pub fn repack_ptq1_0_to_x4(
    src: &[BlockPtq1_0],
    n_rows: usize,
    k: usize,
    dst: &mut [BlockPtq1_0x4],
) -> Result<(), Error> {
    let nb = check(n_rows, k, src.len(), dst.len())?;
    repack_groups(src, nb, &mut dst[..n_rows / 4 * nb], BlockPtq1_0x4::from_rows);
    Ok(())
}

/// PTQ1_0x4 -> PTQ1_0, the inverse of [`repack_ptq1_0_to_x4`].
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`] with the roles of the buffers swapped.
pub fn unpack_x4_to_ptq1_0(
    src: &[BlockPtq1_0x4],
    n_rows: usize,
    k: usize,
    dst: &mut [BlockPtq1_0],
) -> Result<(), Error> {
    let nb = check(n_rows, k, dst.len(), src.len())?;
    unpack_groups(src, nb, &mut dst[..n_rows * nb], BlockPtq1_0x4::row);
    Ok(())
}
