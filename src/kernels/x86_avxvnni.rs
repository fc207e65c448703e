//! X16 kernels for AVX-VNNI (VEX `vpdpbusd` on ymm: Alder Lake, Sapphire Rapids, Zen 5), with
//! AVX2 + FMA + F16C for the rest. `vpdpbusd` adds four unsigned x signed byte products per lane
//! into int32 without saturation, so the x1 and x4 sums need no widening: `isum = S1 + (S4 >> 2)`
//! with `S1` seeded by `-sum(y)`.
//!
//! Tiles: 16 rows (two ymm vectors) x 2 columns.

use super::act_pack::Q8Half;
use super::x86::{gemm_x16, Isa};
use super::Job;
use crate::format::BlockX16;
use core::arch::x86_64::*;
use half::f16;

/// The AVX-VNNI level.
pub(crate) struct AvxVnni;

/// x1 and x4 int32 sums of one vector of rows.
#[derive(Clone, Copy)]
pub(crate) struct Acc32 {
    s1: __m256i,
    s4: __m256i,
}

impl Isa for AvxVnni {
    type V = __m256i;
    type F = __m256;
    type Acc = Acc32;
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m256i {
        // SAFETY: the caller passes 32 readable bytes.
        unsafe { _mm256_loadu_si256(p.cast()) }
    }
    #[inline(always)]
    unsafe fn slots(v: __m256i) -> [__m256i; 4] {
        // SAFETY: register operations.
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
    unsafe fn acc_new(nysum: i32) -> Acc32 {
        // SAFETY: register operations.
        unsafe { Acc32 { s1: _mm256_set1_epi32(nysum), s4: _mm256_setzero_si256() } }
    }
    #[inline(always)]
    unsafe fn dot<const S: usize>(acc: &mut Acc32, u: __m256i, y: __m256i) {
        // SAFETY: VNNI enabled by the caller. Slots 0 and 2 are x1, 1 and 3 are x4.
        unsafe {
            if S.is_multiple_of(2) {
                acc.s1 = _mm256_dpbusd_avx_epi32(acc.s1, u, y)
            } else {
                acc.s4 = _mm256_dpbusd_avx_epi32(acc.s4, u, y)
            }
        }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc32, _: i32) -> __m256i {
        // SAFETY: register operations.
        unsafe { _mm256_add_epi32(acc.s1, _mm256_srai_epi32::<2>(acc.s4)) }
    }
    #[inline(always)]
    unsafe fn scales(p: *const f16) -> __m256 {
        // SAFETY: the caller passes 8 readable fp16 values.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn fzero() -> __m256 {
        // SAFETY: register operation.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn fstep(sumf: __m256, d: __m256, dy: f32, isum: __m256i) -> __m256 {
        // SAFETY: register operations.
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
/// AVX-VNNI, AVX2, FMA and F16C available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(crate) unsafe fn gemv_x16_16x1_q8_k_avxvnni(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<AvxVnni, 2, 1>(job) }
}

/// X16 x Q8_K, several columns: 16 rows x 2 columns per tile (then 1).
///
/// # Safety
/// As [`gemv_x16_16x1_q8_k_avxvnni`], any number of columns.
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
pub(crate) unsafe fn gemm_x16_16x2_q8_k_avxvnni(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<AvxVnni, 2, 2>(job) }
}

/// Runs `job` with the gemv (one column) or gemm kernel.
///
/// # Safety
/// As [`gemm_x16_16x2_q8_k_avxvnni`].
pub(crate) unsafe fn run(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe {
        if job.n_cols == 1 {
            gemv_x16_16x1_q8_k_avxvnni(&job)
        } else {
            gemm_x16_16x2_q8_k_avxvnni(&job)
        }
    }
}
