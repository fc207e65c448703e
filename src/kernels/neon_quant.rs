//! Q8_K activation quantizer for aarch64 NEON: the bits of
//! [`crate::reference::quantize_row_q8_k`] for either [`Contract`].
//!
//! The reference's steps per 256-value block, 4 lanes at a time: `amax` by compare-and-select
//! (`|x| > acc`, false for NaN, so NaNs are skipped as in the reference; `fmax` would propagate
//! them and `fmaxnm` would not skip a signalling NaN); `amax == 0` writes `d = +0`, `qs = 0` and
//! leaves `bsums` untouched; `max` = the first element with `|x| == amax`; `iscale = -127 / max`,
//! `d = 1 / iscale` in scalar f32; `q = (bits(iscale * x + 1.5 * 2^23) & 0x7fffff) - 0x400000`
//! fused (`fmla`) or not (`fmul`, `fadd`) as `contract` says, `min(q, 127)`, narrowed to its low
//! byte by two truncating `xtn` (C's conversion to int8); `bsums` by `saddlv` per 16 bytes.

use crate::format::{BlockQ8K, QK_K};
use crate::reference::{Contract, ROUNDING_MAGIC};
use core::arch::aarch64::*;

/// Quantizes `y.len()` blocks from `x`.
///
/// # Safety
/// NEON must be available, and `x.len() == 256 * y.len()`.
#[target_feature(enable = "neon")]
pub unsafe fn quantize_q8_k_neon(x: &[f32], y: &mut [BlockQ8K], contract: Contract) {
    debug_assert_eq!(x.len(), QK_K * y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // SAFETY: xb holds 256 floats (chunks_exact), yb is one block; NEON (function contract).
        unsafe {
            match contract {
                Contract::Fused => block_neon::<true>(xb.as_ptr(), yb),
                Contract::Unfused => block_neon::<false>(xb.as_ptr(), yb),
            }
        }
    }
}

/// # Safety
/// `x` valid for 256 reads; NEON available.
#[target_feature(enable = "neon")]
#[inline]
unsafe fn block_neon<const FUSED: bool>(x: *const f32, yb: &mut BlockQ8K) {
    // SAFETY: every load reads within x[0..256] (function contract); stores go to yb.qs (16
    // bytes at 16 * i for i < 16).
    unsafe {
        let ld = |i: usize| vld1q_f32(x.add(4 * i));
        let mut acc = [vdupq_n_f32(0.0); 4];
        for i in 0..64 {
            let a = vabsq_f32(ld(i));
            acc[i % 4] = vbslq_f32(vcgtq_f32(a, acc[i % 4]), a, acc[i % 4]);
        }
        let m = vmaxq_f32(vmaxq_f32(acc[0], acc[1]), vmaxq_f32(acc[2], acc[3]));
        let amax = vmaxvq_f32(m);
        if amax == 0.0 {
            yb.d = 0.0;
            yb.qs = [0; QK_K];
            return;
        }
        let vamax = vdupq_n_f32(amax);
        let mut first = QK_K;
        for i in 0..64 {
            let eq = vceqq_f32(vabsq_f32(ld(i)), vamax);
            if vmaxvq_u32(eq) != 0 {
                let mut lanes = [0u32; 4];
                vst1q_u32(lanes.as_mut_ptr(), eq);
                first = 4 * i + lanes.iter().position(|&l| l != 0).unwrap_or(0);
                break;
            }
        }
        debug_assert!(first < QK_K, "amax is one of the |x|");
        let iscale = -127.0f32 / *x.add(first);
        let d = 1.0 / iscale;
        let vis = vdupq_n_f32(iscale);
        let magic = vdupq_n_f32(ROUNDING_MAGIC);
        let mant = vdupq_n_s32(0x007f_ffff);
        let half = vdupq_n_s32(0x0040_0000);
        let top = vdupq_n_s32(127);
        let q = |i: usize| {
            let v = if FUSED { vfmaq_f32(magic, vis, ld(i)) } else { vaddq_f32(vmulq_f32(vis, ld(i)), magic) };
            let n = vsubq_s32(vandq_s32(vreinterpretq_s32_f32(v), mant), half);
            vmovn_s32(vminq_s32(n, top)) // low 16 bits (truncating)
        };
        for g in 0..16 {
            let lo = vcombine_s16(q(4 * g), q(4 * g + 1));
            let hi = vcombine_s16(q(4 * g + 2), q(4 * g + 3));
            let bytes = vcombine_s8(vmovn_s16(lo), vmovn_s16(hi)); // low 8 bits (truncating)
            vst1q_s8(yb.qs.as_mut_ptr().add(16 * g), bytes);
            yb.bsums[g] = vaddlvq_s8(bytes);
        }
        yb.d = d;
    }
}
