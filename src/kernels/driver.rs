//! The row-splitting driver: one matrix multiplication split into row ranges (on row tile
//! boundaries) run in parallel on the current rayon pool, each through [`gemm_raw`].

use super::act_pack::PackedActs;
use super::dispatch::gemm_raw;
use super::operands::{validate, Activations, OutPtr, PackedWeights};
use super::table::KernelLevel;
use crate::error::Error;

/// [`gemm`](super::gemm) over all rows, split into `n_splits` row ranges (on row tile boundaries) run on the
/// current rayon pool, with the activations packed once. The result does not depend on
/// `n_splits`.
///
/// # Errors
/// As [`gemm`](super::gemm).
pub fn gemm_par(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &Activations<'_>,
    dst: &mut [f32],
    col_stride: usize,
    n_splits: usize,
) -> Result<(), Error> {
    let pack = a.pack(w.layout(), level)?;
    gemm_par_packed(level, w, &pack.view(), dst, col_stride, n_splits)
}

/// [`gemm_par`] on activations packed already.
///
/// # Errors
/// As [`gemm_packed`](super::gemm_packed).
pub fn gemm_par_packed(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    n_splits: usize,
) -> Result<(), Error> {
    let n_rows = w.n_rows();
    validate(w, a, dst.len(), col_stride, &(0..n_rows))?;
    if a.n_cols == 0 {
        return Ok(());
    }
    let tile = w.layout().tile_rows();
    let tiles = n_rows.div_ceil(tile);
    let n_splits = n_splits.clamp(1, tiles);
    let out = OutPtr { ptr: dst.as_mut_ptr(), col_stride };
    let len = dst.len();
    use rayon::prelude::*;
    (0..n_splits).into_par_iter().try_for_each(|s| {
        let (t0, t1) = (tiles * s / n_splits, tiles * (s + 1) / n_splits);
        let o = out;
        // SAFETY: the splits own disjoint row ranges of one live buffer of `len` floats.
        unsafe { gemm_raw(level, w, a, o.ptr, len, col_stride, tile * t0..(tile * t1).min(n_rows)) }
    })
}
