//! X16 kernels for AVX2 + FMA + F16C (Haswell, Zen 1 and later): `vpmaddubsw` products summed in
//! int16, widened once per block with `vpmaddwd`.
//!
//! ## The int16 bound that keeps it exact
//! Every slot is shifted down to the code itself (`v & 3`, `(v >> 2) & 3`, `(v >> 4) & 3`,
//! `(v >> 6) & 3`; 16-bit shifts, the mask keeps each byte's own two bits), so the unsigned
//! operand of `vpmaddubsw` is `u <= 3`. It multiplies that with the signed activations
//! (`|y| <= 128`) and adds adjacent pairs into int16 with saturation: one pair is at most
//! `2 * 3 * 128 = 768` in magnitude, so it never saturates. A block adds 32 such pairs into each
//! int16 lane of its sum (8 words x 4 slots, `vpaddw`, wrapping): at most `32 * 768 = 24576 <
//! 32767`, so no sum wraps either, and one `vpmaddwd` by 1 per block widens the lane pairs to the
//! row's int32 `dot(u, y)` exactly. `isum = dot(u, y) - sum(y)`.
//!
//! One int16 register per (8 rows, column) accumulator keeps tiles of 16 rows x 4 columns in the
//! 16 ymm registers (8 integer and 4 float accumulators).

use super::act_pack::Q8Half;
use super::operands::Job;
use super::x86::{gemm_x16, Isa};
use crate::format::BlockX16;
use core::arch::x86_64::*;
use half::f16;

/// The AVX2 level.
pub(crate) struct Avx2;

/// AVX2 accumulator: the int16 sums of a block (`-sum(y)` is added at the end, so that an
/// accumulator is one register).
#[derive(Clone, Copy)]
pub(crate) struct Acc16 {
    s: __m256i,
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
            let m = _mm256_set1_epi8(0x03);
            [
                _mm256_and_si256(v, m),
                _mm256_and_si256(_mm256_srli_epi16::<2>(v), m),
                _mm256_and_si256(_mm256_srli_epi16::<4>(v), m),
                _mm256_and_si256(_mm256_srli_epi16::<6>(v), m),
            ]
        }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const i8) -> __m256i {
        // SAFETY: the caller passes 4 readable bytes.
        unsafe { _mm256_set1_epi32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn acc_new(_: i32) -> Acc16 {
        // SAFETY: register operation.
        unsafe { Acc16 { s: _mm256_setzero_si256() } }
    }
    #[inline(always)]
    unsafe fn dot<const S: usize>(acc: &mut Acc16, u: __m256i, y: __m256i) {
        // SAFETY: register operations.
        unsafe { acc.s = _mm256_add_epi16(acc.s, _mm256_maddubs_epi16(u, y)) }
    }
    #[inline(always)]
    unsafe fn acc_merge(a: Acc16, b: Acc16) -> Acc16 {
        // SAFETY: register operation. int16 wrapping adds are associative, so the merged lanes
        // equal the one-chain lanes (which stay in range: see the module's bound).
        unsafe { Acc16 { s: _mm256_add_epi16(a.s, b.s) } }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc16, nysum: i32) -> __m256i {
        // SAFETY: register operations.
        unsafe { _mm256_add_epi32(_mm256_madd_epi16(acc.s, _mm256_set1_epi16(1)), _mm256_set1_epi32(nysum)) }
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

/// X16 x Q8_K, several columns: 16 rows x 4 columns per tile (then 2, 1).
///
/// # Safety
/// AVX2, FMA and F16C available; `job` validated by `gemm_raw`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) unsafe fn gemm_x16_16x4_q8_k_avx2(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx2, 2, 4>(job) }
}

/// Runs `job` with the gemv (one column) or gemm kernel.
///
/// # Safety
/// As [`gemm_x16_16x4_q8_k_avx2`].
pub(crate) unsafe fn run(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe {
        if job.n_cols == 1 {
            gemv_x16_16x1_q8_k_avx2(&job)
        } else {
            gemm_x16_16x4_q8_k_avx2(&job)
        }
    }
}
