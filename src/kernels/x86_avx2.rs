//! X16 kernels for AVX2 + FMA + F16C (Haswell, Zen 1 and later): `vpmaddubsw` products summed in
//! int16, widened with `vpmaddwd` twice per block.
//!
//! ## The int16 bound that keeps it exact
//! `vpmaddubsw` multiplies unsigned bytes (the slot operands: `u <= 3`, or `4u <= 12` for the x4
//! slots) with signed bytes (activations, `|y| <= 128`) and adds adjacent pairs into int16 with
//! saturation. One pair is at most `2 * 12 * 128 = 3072` in magnitude, so it never saturates.
//! The pairs are then added (`vpaddw`, wrapping) into an x1 and an x4 sum per lane for four words
//! (8 products each): at most `8 * 2 * 3 * 128 = 6144` and `8 * 3072 = 24576`, both below
//! `32767`, so no int16 sum wraps. After words 3 and 7 they are widened, with the x1 sum scaled by
//! 4: `A += vpmaddwd(S1, 4) + vpmaddwd(S4, 1)`, `A` starting at `-4 sum(y)`, so `A = 4 isum`
//! exactly and `isum = A >> 2` (arithmetic shift of a multiple of 4).
//!
//! Tiles: 16 rows (two ymm vectors) x 2 columns; the 16 ymm registers hold 12 accumulators.

use super::act_pack::Q8Half;
use super::x86::{gemm_x16, Isa};
use super::Job;
use crate::format::BlockX16;
use core::arch::x86_64::*;
use half::f16;

/// The AVX2 level.
pub(crate) struct Avx2;

/// AVX2 accumulator: int16 x1 and x4 sums of the current four words, and the widened `4 isum`.
#[derive(Clone, Copy)]
pub(crate) struct Acc16 {
    s1: __m256i,
    s4: __m256i,
    a: __m256i,
}

impl Isa for Avx2 {
    type V = __m256i;
    type F = __m256;
    type Acc = Acc16;
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 32 readable bytes.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn slots(v: __m256i) -> [__m256i; 4] {
        // SAFETY: register operations (AVX2 enabled by the caller).
        unsafe {
            let (m1, m4) = (_mm256_set1_epi8(0x03), _mm256_set1_epi8(0x0C));
            let h = _mm256_srli_epi16::<4>(v);
            [_mm256_and_si256(v, m1), _mm256_and_si256(v, m4), _mm256_and_si256(h, m1), _mm256_and_si256(h, m4)]
        }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const i8) -> __m256i {
        // SAFETY: the caller passes 4 readable bytes.
        unsafe { _mm256_set1_epi32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn acc_new(nysum: i32) -> Acc16 {
        // SAFETY: register operations. |nysum| <= 128 * 128, so 4 * nysum fits.
        unsafe { Acc16 { s1: _mm256_setzero_si256(), s4: _mm256_setzero_si256(), a: _mm256_set1_epi32(4 * nysum) } }
    }
    #[inline(always)]
    unsafe fn dot1(acc: &mut Acc16, u: __m256i, y: __m256i) {
        // SAFETY: register operations.
        unsafe { acc.s1 = _mm256_add_epi16(acc.s1, _mm256_maddubs_epi16(u, y)) }
    }
    #[inline(always)]
    unsafe fn dot4(acc: &mut Acc16, u: __m256i, y: __m256i) {
        // SAFETY: register operations.
        unsafe { acc.s4 = _mm256_add_epi16(acc.s4, _mm256_maddubs_epi16(u, y)) }
    }
    #[inline(always)]
    unsafe fn flush(acc: &mut Acc16) {
        // SAFETY: register operations.
        unsafe {
            let w1 = _mm256_madd_epi16(acc.s1, _mm256_set1_epi16(4));
            let w4 = _mm256_madd_epi16(acc.s4, _mm256_set1_epi16(1));
            acc.a = _mm256_add_epi32(acc.a, _mm256_add_epi32(w1, w4));
            acc.s1 = _mm256_setzero_si256();
            acc.s4 = _mm256_setzero_si256();
        }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc16) -> __m256i {
        // SAFETY: register operations.
        unsafe { _mm256_srai_epi32::<2>(acc.a) }
    }
    #[inline(always)]
    unsafe fn scales(p: *const f16) -> __m256 {
        // SAFETY: the caller passes 8 readable fp16 values; F16C enabled by the caller.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn fzero() -> __m256 {
        // SAFETY: register operation.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn fstep(sumf: __m256, d: __m256, dy: f32, isum: __m256i) -> __m256 {
        // SAFETY: register operations; FMA enabled by the caller.
        unsafe { _mm256_fmadd_ps(_mm256_mul_ps(d, _mm256_set1_ps(dy)), _mm256_cvtepi32_ps(isum), sumf) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m256) {
        // SAFETY: the caller passes 8 writable floats.
        unsafe { _mm256_storeu_ps(p, v) }
    }
}

/// X16 x Q8_K, one column (decode), 16 rows per tile.
///
/// # Safety
/// AVX2, FMA and F16C available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemv_x16_16x1_q8_k_avx2(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx2, 2, 1>(job) }
}

/// X16 x Q8_K, several columns: 16 rows x 2 columns per tile (then 1).
///
/// # Safety
/// AVX2, FMA and F16C available; `job` validated by `gemm_raw`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm_x16_16x2_q8_k_avx2(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx2, 2, 2>(job) }
}

/// Runs `job` with the gemv (one column) or gemm kernel.
///
/// # Safety
/// As [`gemm_x16_16x2_q8_k_avx2`].
pub(crate) unsafe fn run(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe {
        if job.n_cols == 1 {
            gemv_x16_16x1_q8_k_avx2(&job)
        } else {
            gemm_x16_16x2_q8_k_avx2(&job)
        }
    }
}
