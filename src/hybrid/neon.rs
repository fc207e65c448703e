//! aarch64 NEON paths of the hybrid's float ops: a 16-lane sum in four q registers (lanes 0-3,
//! 4-7, 8-11, 12-15). The operations and their order are [`super::reference`]'s.

use super::{ConvOut, ConvTile, Rows, MAX_CONV};
use core::arch::aarch64::*;

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

/// `(acc0 + acc2) + (acc1 + acc3)` per lane, then [`reduce16`].
#[inline]
#[target_feature(enable = "neon")]
fn reduce_acc(acc: &[[float32x4_t; 4]; 4]) -> f32 {
    let mut t = [vdupq_n_f32(0.0); 4];
    for (q, s) in t.iter_mut().enumerate() {
        *s = vaddq_f32(vaddq_f32(acc[0][q], acc[2][q]), vaddq_f32(acc[1][q], acc[3][q]));
    }
    reduce16(t)
}

/// The gated delta rule's rows with NEON (the scaled row goes through L1 between the passes).
///
/// # Safety
/// As [`super::reference::gdn_rows`].
#[target_feature(enable = "neon")]
pub(crate) unsafe fn gdn_rows(r: &Rows) {
    let zero = vdupq_n_f32(0.0);
    for j in 0..r.n {
        // SAFETY: row j of n rows of s floats; k and q hold s floats; each vector of the row is
        // read before it is written.
        unsafe {
            let src = r.src.add(j * r.s);
            let dst = r.dst.add(j * r.s);
            let mut acc = [[zero; 4]; 4];
            for c in 0..r.s / 64 {
                for (a, lanes) in acc.iter_mut().enumerate() {
                    for (h, s) in lanes.iter_mut().enumerate() {
                        let o = 64 * c + 16 * a + 4 * h;
                        let x = vmulq_n_f32(vld1q_f32(src.add(o)), r.e);
                        vst1q_f32(dst.add(o), x);
                        *s = vfmaq_f32(*s, x, vld1q_f32(r.k.add(o)));
                    }
                }
            }
            let delta = (*r.v.add(j) - reduce_acc(&acc)) * r.beta;
            let mut acc = [[zero; 4]; 4];
            for c in 0..r.s / 64 {
                for (a, lanes) in acc.iter_mut().enumerate() {
                    for (h, s) in lanes.iter_mut().enumerate() {
                        let o = 64 * c + 16 * a + 4 * h;
                        let y = vfmaq_n_f32(vld1q_f32(dst.add(o)), vld1q_f32(r.k.add(o)), delta);
                        vst1q_f32(dst.add(o), y);
                        *s = vfmaq_f32(*s, y, vld1q_f32(r.q.add(o)));
                    }
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
