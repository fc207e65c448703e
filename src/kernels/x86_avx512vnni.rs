//! X16 kernels for AVX-512 VNNI (EVEX `vpdpbusd` on zmm: Ice Lake, Sapphire Rapids, Zen 4/5),
//! with AVX-512 F/BW/VL, FMA and F16C. One zmm vector holds a whole 64-byte X16 word, i.e. all 16
//! rows; the activation groups are 32-bit broadcasts (`{1to16}` memory operands). Arithmetic as
//! in [`super::x86_avxvnni`].
//!
//! Tiles: 16 rows x 8 columns (then 4, 2, 1); the 32 zmm registers hold 16 integer and 8 float
//! accumulators.

use super::act_pack::Q8Half;
use super::x86::{gemm_x16, Isa};
use super::Job;
use crate::format::BlockX16;
use core::arch::x86_64::*;
use half::f16;

/// The AVX-512 VNNI level.
pub(crate) struct Avx512Vnni;

/// x1 and x4 int32 sums of the 16 rows.
#[derive(Clone, Copy)]
pub(crate) struct Acc512 {
    s1: __m512i,
    s4: __m512i,
}

impl Isa for Avx512Vnni {
    type V = __m512i;
    type F = __m512;
    type Acc = Acc512;
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn load(p: *const u8) -> __m512i {
        // SAFETY: the caller passes 64 readable bytes.
        unsafe { _mm512_loadu_si512(p.cast()) }
    }
    #[inline(always)]
    unsafe fn slots(v: __m512i) -> [__m512i; 4] {
        // SAFETY: register operations.
        unsafe {
            let (m1, m4) = (_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C));
            let h = _mm512_srli_epi16::<4>(v);
            [_mm512_and_si512(v, m1), _mm512_and_si512(v, m4), _mm512_and_si512(h, m1), _mm512_and_si512(h, m4)]
        }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const i8) -> __m512i {
        // SAFETY: the caller passes 4 readable bytes.
        unsafe { _mm512_set1_epi32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn acc_new(nysum: i32) -> Acc512 {
        // SAFETY: register operations.
        unsafe { Acc512 { s1: _mm512_set1_epi32(nysum), s4: _mm512_setzero_si512() } }
    }
    #[inline(always)]
    unsafe fn dot<const S: usize>(acc: &mut Acc512, u: __m512i, y: __m512i) {
        // SAFETY: VNNI enabled by the caller. Slots 0 and 2 are x1, 1 and 3 are x4.
        unsafe {
            if S.is_multiple_of(2) {
                acc.s1 = _mm512_dpbusd_epi32(acc.s1, u, y)
            } else {
                acc.s4 = _mm512_dpbusd_epi32(acc.s4, u, y)
            }
        }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc512, _: i32) -> __m512i {
        // SAFETY: register operations.
        unsafe { _mm512_add_epi32(acc.s1, _mm512_srai_epi32::<2>(acc.s4)) }
    }
    #[inline(always)]
    unsafe fn scales(p: *const f16) -> __m512 {
        // SAFETY: the caller passes 16 readable fp16 values.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn fzero() -> __m512 {
        // SAFETY: register operation.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn fstep(sumf: __m512, d: __m512, dy: f32, isum: __m512i) -> __m512 {
        // SAFETY: register operations.
        unsafe { _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(dy)), _mm512_cvtepi32_ps(isum), sumf) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: __m512) {
        // SAFETY: the caller passes 16 writable floats.
        unsafe { _mm512_storeu_ps(p, v) }
    }
}

/// X16 x Q8_K, one column (decode), 16 rows per tile.
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI, FMA and F16C available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemv_x16_16x1_q8_k_avx512vnni(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx512Vnni, 1, 1>(job) }
}

/// X16 x Q8_K, several columns: 16 rows x 8 columns per tile (then 4, 2, 1).
///
/// # Safety
/// As [`gemv_x16_16x1_q8_k_avx512vnni`], any number of columns.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(crate) unsafe fn gemm_x16_16x8_q8_k_avx512vnni(job: &Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_x16::<Avx512Vnni, 1, 8>(job) }
}

/// Runs `job` with the gemv (one column) or gemm kernel.
///
/// # Safety
/// As [`gemm_x16_16x8_q8_k_avx512vnni`].
pub(crate) unsafe fn run(job: Job<'_, BlockX16, Q8Half>) {
    // SAFETY: forwarded.
    unsafe {
        if job.n_cols == 1 {
            gemv_x16_16x1_q8_k_avx512vnni(&job)
        } else {
            gemm_x16_16x8_q8_k_avx512vnni(&job)
        }
    }
}
