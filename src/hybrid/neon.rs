//! aarch64 NEON paths of the hybrid's float ops: a 16-lane sum in four q registers (lanes 0-3,
//! 4-7, 8-11, 12-15). The operations and their order are [`super::reference`]'s.

use super::{ConvOut, ConvTile, Rows, MAX_CONV};
use core::arch::aarch64::*;
use core::hint::black_box;

/// [`super::reference::reduce16`] of four q registers: `l + 8` pairs q0 with q2 and q1 with q3,
/// `l + 4` the two results, `l + 2` the halves, `l + 1` the last pair.
#[inline]
#[target_feature(enable = "neon")]
fn reduce16(v: [float32x4_t; 4]) -> f32 {
    let w0 = vaddq_f32(v[0], v[2]);
    let w1 = vaddq_f32(v[1], v[3]);
    let u = vaddq_f32(w0, w1);
    let p = vadd_f32(vget_low_f32(u), vget_high_f32(u));
    vget_lane_f32::<0>(p) + vget_lane_f32::<1>(p)
}

/// `(acc0 + acc2) + (acc1 + acc3)` per lane, then [`reduce16`]; `acc[4a + h]` holds lanes
/// `4h..4h + 4` of accumulator `a`.
#[inline]
#[target_feature(enable = "neon")]
fn reduce_acc(acc: &[float32x4_t; 16]) -> f32 {
    let mut t = [vdupq_n_f32(0.0); 4];
    for (h, s) in t.iter_mut().enumerate() {
        *s = vaddq_f32(vaddq_f32(acc[h], acc[8 + h]), vaddq_f32(acc[4 + h], acc[12 + h]));
    }
    reduce16(t)
}

/// The gated delta rule's rows with NEON, for rows of 64, 128 or 256 floats (each pass scales the
/// row it reads unless it comes in scaled; see [`gdn_rows_c`]).
///
/// # Safety
/// As [`super::reference::gdn_rows`]; `r.s` is 64, 128 or 256.
pub(crate) unsafe fn gdn_rows(r: &Rows) {
    // SAFETY: forwarded.
    unsafe {
        match r.s {
            64 => gdn_rows_flags::<1>(r),
            128 => gdn_rows_flags::<2>(r),
            _ => gdn_rows_flags::<4>(r),
        }
    }
}

/// [`gdn_rows_c`] for `r`'s `pre_scaled` and `e_next` (constants there).
///
/// # Safety
/// As [`gdn_rows`].
#[target_feature(enable = "neon")]
unsafe fn gdn_rows_flags<const C: usize>(r: &Rows) {
    // SAFETY: forwarded.
    unsafe {
        match (r.pre_scaled, r.e_next.is_some()) {
            (false, false) => gdn_rows_c::<C, false, false>(r),
            (false, true) => gdn_rows_c::<C, false, true>(r),
            (true, false) => gdn_rows_c::<C, true, false>(r),
            (true, true) => gdn_rows_c::<C, true, true>(r),
        }
    }
}

/// [`gdn_rows`] for rows of `64 * C` floats: a first pass for the key dot, then a second that
/// scales the row again (the same bits), updates and stores it and takes the query dot. Q
/// register `i` of each 64 floats (`o = 64c + 4i`) goes into accumulator vector `i` (accumulator
/// `i / 4`, lanes `4 (i % 4)..`): the contract's order. The accumulators are one flat array with
/// constant indices, and the key and query pointers pass through [`black_box`] once per row:
/// without that the compiler kept a 128-wide row's key and query (64 q registers) live across
/// rows, and the first pass stored the scaled row for the second, and both spilled (rustc 1.96:
/// 601 instructions per row at S = 128, 191 of them on the stack; tools/cycle-model.py's hybrid
/// rows give the figures now).
///
/// `PRE`: the rows come in scaled (no multiply in either pass); `NEXT`: they go out scaled by
/// `e_next`.
#[target_feature(enable = "neon")]
unsafe fn gdn_rows_c<const C: usize, const PRE: bool, const NEXT: bool>(r: &Rows) {
    let zero = vdupq_n_f32(0.0);
    let en = r.e_next.unwrap_or(1.0);
    let scaled = |x: float32x4_t| if PRE { x } else { vmulq_n_f32(x, r.e) };
    for j in 0..r.n {
        // SAFETY: row j of n rows of 64 * C floats; k and q hold 64 * C floats; each vector of
        // the row is read before it is written.
        unsafe {
            let src = r.src.add(j * 64 * C);
            let dst = r.dst.add(j * 64 * C);
            let k = black_box(r.k);
            let mut acc = [zero; 16];
            for c in 0..C {
                for (i, s) in acc.iter_mut().enumerate() {
                    let o = 64 * c + 4 * i;
                    let x = scaled(vld1q_f32(src.add(o)));
                    *s = vfmaq_f32(*s, x, vld1q_f32(k.add(o)));
                }
            }
            let delta = (*r.v.add(j) - reduce_acc(&acc)) * r.beta;
            let (k, q) = (black_box(r.k), black_box(r.q));
            let mut acc = [zero; 16];
            for c in 0..C {
                for (i, s) in acc.iter_mut().enumerate() {
                    let o = 64 * c + 4 * i;
                    let x = scaled(vld1q_f32(src.add(o)));
                    let y = vfmaq_n_f32(x, vld1q_f32(k.add(o)), delta);
                    vst1q_f32(dst.add(o), if NEXT { vmulq_n_f32(y, en) } else { y });
                    *s = vfmaq_f32(*s, y, vld1q_f32(q.add(o)));
                }
            }
            *r.out.add(j) = reduce_acc(&acc) * r.scale;
        }
    }
}

/// A conv tile with NEON: four q registers per token.
///
/// # Safety
/// None beyond the types (`n` and `tb` are asserted).
#[target_feature(enable = "neon")]
pub(crate) unsafe fn conv_tile(tile: &ConvTile, w: &[[f32; 16]; MAX_CONV], n: usize, tb: usize, out: &mut ConvOut) {
    assert!(n <= MAX_CONV && tb + n - 1 <= tile.len() && tb <= out.len());
    for h in 0..4 {
        let mut wv = [vdupq_n_f32(0.0); MAX_CONV];
        for i in 0..n {
            // SAFETY: 4 floats of a 16-float row.
            wv[i] = unsafe { vld1q_f32(w[i].as_ptr().add(4 * h)) };
        }
        for t in 0..tb {
            let mut acc = vdupq_n_f32(0.0);
            for i in 0..n {
                // SAFETY: t + i < tb + n - 1 rows; 4 floats of 16.
                acc = vfmaq_f32(acc, unsafe { vld1q_f32(tile[t + i].as_ptr().add(4 * h)) }, wv[i]);
            }
            // SAFETY: 4 floats of an output row.
            unsafe { vst1q_f32(out[t].as_mut_ptr().add(4 * h), acc) };
        }
    }
}
