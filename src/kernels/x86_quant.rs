//! Q8_K activation quantizers for x86-64, AVX2 + FMA (ymm) and AVX-512 F/BW (zmm): the bits of
//! [`crate::reference::quantize_row_q8_k`] for either [`Contract`].
//!
//! Per 256-value block, exactly the reference's steps:
//! 1. `amax` = the largest `|x|`: `vmaxps(|x|, acc)` returns `acc` when `|x|` is a NaN, so NaNs are
//!    skipped as the reference's `|x| > amax` skips them; `amax == 0` (zeros and NaNs only) writes
//!    `d = +0`, `qs = 0` and leaves `bsums` untouched, as the reference does.
//! 2. `max` = the first element with `|x| == amax` (sign kept): compare masks, first set bit.
//! 3. `iscale = -127 / max` and `d = 1 / iscale` in scalar f32, as the reference.
//! 4. `q = (bits(iscale * x + 1.5 * 2^23) & 0x7fffff) - 0x400000`, the product fused
//!    (`vfmadd`) or rounded first (`vmulps`, `vaddps`) as `contract` says; `min(q, 127)`; stored
//!    as its low byte (C's conversion to int8: the pack below saturates only after the value has
//!    been cut to its low byte and sign-extended, so it never changes a value).
//! 5. `bsums` from the stored bytes: `vpsadbw` of `q ^ 0x80` per 8 bytes, minus `8 * 128`.
//!
//! Intrinsics do not contract: the unfused form really rounds the product.

use crate::format::{BlockQ8K, QK_K};
use crate::reference::{Contract, ROUNDING_MAGIC};
use core::arch::x86_64::*;

/// The reference's block scale from the first element of largest magnitude (`max != 0`):
/// `(iscale, d)`.
#[inline(always)]
fn scales(max: f32) -> (f32, f32) {
    let iscale = -127.0f32 / max;
    (iscale, 1.0 / iscale)
}

/// Quantizes `y.len()` blocks from `x` (AVX2 + FMA).
///
/// # Safety
/// AVX2 and FMA must be available, and `x.len() == 256 * y.len()`.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn quantize_q8_k_avx2(x: &[f32], y: &mut [BlockQ8K], contract: Contract) {
    debug_assert_eq!(x.len(), QK_K * y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // SAFETY: xb holds 256 floats (chunks_exact), yb is one block; AVX2/FMA (function contract).
        unsafe {
            match contract {
                Contract::Fused => block_avx2::<true>(xb.as_ptr(), yb),
                Contract::Unfused => block_avx2::<false>(xb.as_ptr(), yb),
            }
        }
    }
}

/// # Safety
/// `x` valid for 256 reads; AVX2 and FMA available.
#[target_feature(enable = "avx2,fma")]
#[inline]
unsafe fn block_avx2<const FUSED: bool>(x: *const f32, yb: &mut BlockQ8K) {
    // SAFETY: every load reads within x[0..256] (function contract); stores go to yb's arrays,
    // 256 bytes of qs and 32 bytes of bsums, unaligned stores.
    unsafe {
        let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
        let ld = |i: usize| _mm256_loadu_ps(x.add(8 * i));
        // 1. amax over 32 vectors, 4 chains; NaN lanes keep the accumulator (second operand).
        let mut acc = [_mm256_setzero_ps(); 4];
        for i in 0..32 {
            acc[i % 4] = _mm256_max_ps(_mm256_and_ps(ld(i), abs_mask), acc[i % 4]);
        }
        let m = _mm256_max_ps(_mm256_max_ps(acc[0], acc[1]), _mm256_max_ps(acc[2], acc[3]));
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
        let amax = _mm_cvtss_f32(m);
        if amax == 0.0 {
            yb.d = 0.0;
            yb.qs = [0; QK_K];
            return;
        }
        // 2. The first element with |x| == amax.
        let vamax = _mm256_set1_ps(amax);
        let mut first = QK_K;
        for i in 0..32 {
            let eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(ld(i), abs_mask), vamax, _CMP_EQ_OQ));
            if eq != 0 {
                first = 8 * i + eq.trailing_zeros() as usize;
                break;
            }
        }
        debug_assert!(first < QK_K, "amax is one of the |x|");
        let (iscale, d) = scales(*x.add(first));
        // 3-4. Rounding, 32 values (4 vectors of 8) per 32-byte store.
        let vis = _mm256_set1_ps(iscale);
        let magic = _mm256_set1_ps(ROUNDING_MAGIC);
        let mant = _mm256_set1_epi32(0x007f_ffff);
        let half = _mm256_set1_epi32(0x0040_0000);
        let top = _mm256_set1_epi32(127);
        let fix = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        let q = |i: usize| {
            let v = if FUSED {
                _mm256_fmadd_ps(vis, ld(i), magic)
            } else {
                _mm256_add_ps(_mm256_mul_ps(vis, ld(i)), magic)
            };
            let n = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), half);
            let n = _mm256_min_epi32(n, top);
            _mm256_srai_epi32(_mm256_slli_epi32(n, 24), 24) // the int8 value, sign-extended
        };
        let qs = yb.qs.as_mut_ptr().cast::<__m256i>();
        let bias = _mm256_set1_epi8(-128);
        let mut sad = [_mm256_setzero_si256(); 8];
        for (j, s) in sad.iter_mut().enumerate() {
            let ab = _mm256_packs_epi32(q(4 * j), q(4 * j + 1));
            let cd = _mm256_packs_epi32(q(4 * j + 2), q(4 * j + 3));
            let bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(ab, cd), fix);
            _mm256_storeu_si256(qs.add(j), bytes);
            // 4 u64 lanes: sums of 8 bytes + 8 * 128; groups 2j (lanes 0, 1) and 2j + 1 (2, 3).
            *s = _mm256_sad_epu8(_mm256_xor_si256(bytes, bias), _mm256_setzero_si256());
        }
        // 5. bsums: pair the 8-byte sums into the 16 group sums, in order.
        let groups8 = |k: usize| {
            // dword 0 (lane 0): group 2k, 1: 2k + 2; dword 4 (lane 1): 2k + 1, 5: 2k + 3.
            let c = |k: usize| {
                let a = _mm256_or_si256(sad[k], _mm256_slli_epi64(sad[k + 1], 32));
                _mm256_add_epi32(a, _mm256_shuffle_epi32(a, 0x4E))
            };
            // lane 0: groups 2k, 2k+2, 2k+4, 2k+6; lane 1: 2k+1, 2k+3, 2k+5, 2k+7.
            let u = _mm256_unpacklo_epi64(c(k), c(k + 2));
            _mm256_sub_epi32(_mm256_permutevar8x32_epi32(u, fix), _mm256_set1_epi32(16 * 128))
        };
        let b = _mm256_permute4x64_epi64(_mm256_packs_epi32(groups8(0), groups8(4)), 0xD8);
        _mm256_storeu_si256(yb.bsums.as_mut_ptr().cast(), b);
        yb.d = d;
    }
}

/// Quantizes `y.len()` blocks from `x` (AVX-512 F and BW, on zmm).
///
/// # Safety
/// AVX-512 F and BW must be available, and `x.len() == 256 * y.len()`.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
pub(crate) unsafe fn quantize_q8_k_avx512(x: &[f32], y: &mut [BlockQ8K], contract: Contract) {
    debug_assert_eq!(x.len(), QK_K * y.len());
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        // SAFETY: xb holds 256 floats, yb is one block; AVX-512 F/BW (function contract).
        unsafe {
            match contract {
                Contract::Fused => block_avx512::<true>(xb.as_ptr(), yb),
                Contract::Unfused => block_avx512::<false>(xb.as_ptr(), yb),
            }
        }
    }
}

/// # Safety
/// `x` valid for 256 reads; AVX-512 F and BW available.
#[target_feature(enable = "avx512f,avx512bw,avx2,fma")]
#[inline]
unsafe fn block_avx512<const FUSED: bool>(x: *const f32, yb: &mut BlockQ8K) {
    // SAFETY: every load reads within x[0..256] (function contract); stores go to yb's arrays,
    // 256 bytes of qs and 32 bytes of bsums, unaligned stores.
    unsafe {
        let ld = |i: usize| _mm512_loadu_ps(x.add(16 * i));
        // AVX-512 F's vpandd form (`vandps` on zmm would need DQ)
        let abs = |i: usize| _mm512_abs_ps(ld(i));
        // 1. amax over 16 vectors, 4 chains; NaN lanes keep the accumulator (second operand).
        let mut acc = [_mm512_setzero_ps(); 4];
        for i in 0..16 {
            acc[i % 4] = _mm512_max_ps(abs(i), acc[i % 4]);
        }
        let m = _mm512_max_ps(_mm512_max_ps(acc[0], acc[1]), _mm512_max_ps(acc[2], acc[3]));
        let m =
            _mm256_max_ps(_mm512_castps512_ps256(m), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(m), 1)));
        let m = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        let m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
        let amax = _mm_cvtss_f32(m);
        if amax == 0.0 {
            yb.d = 0.0;
            yb.qs = [0; QK_K];
            return;
        }
        // 2. The first element with |x| == amax.
        let vamax = _mm512_set1_ps(amax);
        let mut first = QK_K;
        for i in 0..16 {
            let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(abs(i), vamax);
            if eq != 0 {
                first = 16 * i + eq.trailing_zeros() as usize;
                break;
            }
        }
        debug_assert!(first < QK_K, "amax is one of the |x|");
        let (iscale, d) = scales(*x.add(first));
        // 3-4. Rounding, 64 values (4 vectors of 16) per 64-byte store.
        let vis = _mm512_set1_ps(iscale);
        let magic = _mm512_set1_ps(ROUNDING_MAGIC);
        let mant = _mm512_set1_epi32(0x007f_ffff);
        let half = _mm512_set1_epi32(0x0040_0000);
        let top = _mm512_set1_epi32(127);
        // After two in-lane packs, dword 4L + j holds chunk L of source j: put it at 4j + L.
        let fix = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
        let q = |i: usize| {
            let v = if FUSED {
                _mm512_fmadd_ps(vis, ld(i), magic)
            } else {
                _mm512_add_ps(_mm512_mul_ps(vis, ld(i)), magic)
            };
            let n = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), half);
            let n = _mm512_min_epi32(n, top);
            _mm512_srai_epi32::<24>(_mm512_slli_epi32::<24>(n)) // the int8 value, sign-extended
        };
        let qs = yb.qs.as_mut_ptr().cast::<__m512i>();
        let bias = _mm512_set1_epi8(-128);
        let mut sad = [_mm512_setzero_si512(); 4];
        for (j, s) in sad.iter_mut().enumerate() {
            let ab = _mm512_packs_epi32(q(4 * j), q(4 * j + 1));
            let cd = _mm512_packs_epi32(q(4 * j + 2), q(4 * j + 3));
            let bytes = _mm512_permutexvar_epi32(fix, _mm512_packs_epi16(ab, cd));
            _mm512_storeu_si512(qs.add(j), bytes);
            // 8 u64 lanes: sums of 8 bytes + 8 * 128; group 4j + g in lanes 2g, 2g + 1.
            *s = _mm512_sad_epu8(_mm512_xor_si512(bytes, bias), _mm512_setzero_si512());
        }
        // 5. bsums. c(k): dword 4g = group 4k + g, dword 4g + 1 = group 4(k + 1) + g.
        let c = |k: usize| {
            let a = _mm512_or_si512(sad[k], _mm512_slli_epi64::<32>(sad[k + 1]));
            _mm512_add_epi32(a, _mm512_shuffle_epi32::<0x4E>(a))
        };
        // 128-bit lane g: groups g, 4 + g, 8 + g, 12 + g (dword 4g + j holds group 4j + g).
        let u = _mm512_unpacklo_epi64(c(0), c(2));
        let sums = _mm512_sub_epi32(_mm512_permutexvar_epi32(fix, u), _mm512_set1_epi32(16 * 128));
        _mm256_storeu_si256(yb.bsums.as_mut_ptr().cast(), _mm512_cvtepi32_epi16(sums));
        yb.d = d;
    }
}
