//! The scalar contract of the hybrid's float ops (module docs of [`super`]): every SIMD path
//! reproduces these functions bit for bit. Every FMA is [`fma_f32`] (one rounding computed here,
//! not the C library's `fmaf`, which MinGW-w64 gets wrong: docs/numerics.md section 5).

use super::{ConvOut, ConvTile, Rows, MAX_CONV};
use crate::reference::fma_f32;

/// Lanes of the fixed-order dot product.
pub const LANES: usize = 16;

/// The 16 lanes summed as a tree: lane `l` plus lane `l + 8`, then `+ 4`, `+ 2`, `+ 1` (the order
/// of ggml's `_mm512_reduce_add_ps` as GCC writes it, and of every path here).
pub fn reduce16(mut x: [f32; LANES]) -> f32 {
    let mut half = LANES / 2;
    while half > 0 {
        for l in 0..half {
            x[l] += x[l + half];
        }
        half /= 2;
    }
    x[0]
}

/// `dot(x, y)` over `x.len()` (a multiple of 64) elements in the contract's order: four 16-lane
/// accumulators, `acc[a][l]` taking elements `64c + 16a + l` in order of `c` by FMA from `+0.0`,
/// then `(acc0 + acc2) + (acc1 + acc3)` lane by lane, then [`reduce16`].
pub fn dot(x: &[f32], y: &[f32]) -> f32 {
    assert_eq!(x.len(), y.len());
    assert_eq!(x.len() % 64, 0);
    let mut acc = [[0f32; LANES]; 4];
    for c in 0..x.len() / 64 {
        for (a, lanes) in acc.iter_mut().enumerate() {
            for (l, s) in lanes.iter_mut().enumerate() {
                let i = 64 * c + 16 * a + l;
                *s = fma_f32(x[i], y[i], *s);
            }
        }
    }
    let mut t = [0f32; LANES];
    for l in 0..LANES {
        t[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    }
    reduce16(t)
}

/// One token of the gated delta rule on one row: `row` (the state row before, updated in place),
/// key `k`, query `q`, this row's value `v`, `e = expf(g)`, `beta`, `scale`; returns the row's
/// output. The contract's formula (module docs of [`super`]).
pub fn gdn_row(row: &mut [f32], k: &[f32], q: &[f32], v: f32, e: f32, beta: f32, scale: f32) -> f32 {
    for x in row.iter_mut() {
        *x *= e;
    }
    gdn_row_scaled(row, k, q, v, beta, scale)
}

/// [`gdn_row`] after its first step: `row` already holds `M[j] * e`.
pub fn gdn_row_scaled(row: &mut [f32], k: &[f32], q: &[f32], v: f32, beta: f32, scale: f32) -> f32 {
    let delta = (v - dot(row, k)) * beta;
    for (x, &ki) in row.iter_mut().zip(k) {
        *x = fma_f32(ki, delta, *x);
    }
    dot(row, q) * scale
}

/// [`gdn_row`] over a [`Rows`] job: with `pre_scaled` the rows come in already multiplied by
/// `e` (the first step skipped), with `e_next` they go out multiplied by it (the next token's
/// first step done here); the values in between are [`gdn_row`]'s.
///
/// # Safety
/// `r`'s pointers are valid for the sizes in its field docs (`src` may equal `dst`).
pub(crate) unsafe fn gdn_rows(r: &Rows) {
    let mut row = [0f32; 256];
    let row = &mut row[..r.s];
    // SAFETY: per the caller.
    let (k, q) = unsafe { (core::slice::from_raw_parts(r.k, r.s), core::slice::from_raw_parts(r.q, r.s)) };
    for j in 0..r.n {
        // SAFETY: rows j < n of s floats; reading before writing, so src == dst is fine.
        unsafe {
            core::ptr::copy_nonoverlapping(r.src.add(j * r.s), row.as_mut_ptr(), r.s);
            *r.out.add(j) = if r.pre_scaled {
                gdn_row_scaled(row, k, q, *r.v.add(j), r.beta, r.scale)
            } else {
                gdn_row(row, k, q, *r.v.add(j), r.e, r.beta, r.scale)
            };
            if let Some(e_next) = r.e_next {
                row.iter_mut().for_each(|x| *x *= e_next);
            }
            core::ptr::copy_nonoverlapping(row.as_ptr(), r.dst.add(j * r.s), r.s);
        }
    }
}

/// The short conv's output for one channel: taps `x[0..n]` times `w[0..n]` by FMA from `+0.0`.
pub fn conv(x: &[f32], w: &[f32]) -> f32 {
    x.iter().zip(w).fold(0.0f32, |acc, (&a, &b)| fma_f32(a, b, acc))
}

/// A conv tile (see `super::conv_tile`): 16 channels at a time, lane by lane.
///
/// # Safety
/// None beyond the types (`n <= MAX_CONV` and `tb` within the tile are asserted).
pub(crate) unsafe fn conv_tile(tile: &ConvTile, w: &[[f32; 16]; MAX_CONV], n: usize, tb: usize, out: &mut ConvOut) {
    assert!(n <= MAX_CONV && tb + n - 1 <= tile.len() && tb <= out.len());
    for (t, o) in out.iter_mut().enumerate().take(tb) {
        for (c, y) in o.iter_mut().enumerate() {
            let mut acc = 0.0f32;
            for i in 0..n {
                acc = fma_f32(tile[t + i][c], w[i][c], acc);
            }
            *y = acc;
        }
    }
}
