//! X16 kernels for the two VNNI levels, one body generic over the vector width: AVX-VNNI (VEX
//! `vpdpbusd` on ymm: Alder Lake, Sapphire Rapids, Zen 5, with AVX2 + FMA + F16C for the rest) and
//! AVX-512 VNNI (EVEX `vpdpbusd` on zmm: Ice Lake, Sapphire Rapids, Zen 4/5, with AVX-512 F/BW/VL).
//! `Vnni` implements the tile body's `Isa` once over a `Width` (the register operations
//! whose intrinsics differ between ymm and zmm: `Ymm`, `Zmm`); each level then instantiates
//! `gemm_x16` in its own `#[target_feature]` function, so the body compiles to that level's
//! instructions. A wider level (AMX tiles) takes the same shape.
//!
//! `vpdpbusd` adds four unsigned x signed byte products per lane into int32 without saturation,
//! so the x1 and x4 sums need no widening: `isum = S1 + (S4 >> 2)` with `S1` seeded by `-sum(y)`.
//!
//! Tiles: ymm, 16 rows (two vectors) x 2 columns; zmm, 16 rows (one vector: a whole 64-byte X16
//! word; the activation groups are 32-bit broadcasts, `{1to16}` memory operands) x 8 columns
//! (then 4, 2, 1), the 32 zmm registers holding 16 integer and 8 float accumulators.

use super::act_pack::Q8Half;
use super::operands::Job;
use super::x86::{gemm_x16, Isa};
use crate::format::BlockX16;
use core::arch::x86_64::*;
use core::marker::PhantomData;
use half::f16;

/// The register operations whose intrinsics differ between the VNNI widths. All are
/// `#[inline(always)]` and only ever run inside a `#[target_feature]` function of the level (which
/// enables their instructions).
pub(crate) trait Width {
    /// Integer vector of `LANES` 32-bit lanes.
    type V: Copy;
    /// f32 vector of `LANES` lanes.
    type F: Copy;
    /// Rows per vector.
    const LANES: usize;
    /// Loads `4 * LANES` bytes (unaligned).
    unsafe fn loadu(p: *const u8) -> Self::V;
    /// Every byte `b`.
    unsafe fn splat_i8(b: i8) -> Self::V;
    /// Every 32-bit lane `v`.
    unsafe fn splat_i32(v: i32) -> Self::V;
    /// Zero.
    unsafe fn zero() -> Self::V;
    /// Bitwise and.
    unsafe fn and(a: Self::V, b: Self::V) -> Self::V;
    /// Logical right shift of each 16-bit lane by 4.
    unsafe fn srli16_4(v: Self::V) -> Self::V;
    /// Arithmetic right shift of each 32-bit lane by 2.
    unsafe fn srai32_2(v: Self::V) -> Self::V;
    /// 32-bit lane add (wrapping).
    unsafe fn add32(a: Self::V, b: Self::V) -> Self::V;
    /// `acc + u . y` per 32-bit lane (`vpdpbusd`: 4 unsigned x signed byte products).
    unsafe fn dpbusd(acc: Self::V, u: Self::V, y: Self::V) -> Self::V;
    /// `LANES` fp16 values at `p` as f32 (exact).
    unsafe fn cvtph(p: *const f16) -> Self::F;
    /// Zero.
    unsafe fn fzero() -> Self::F;
    /// Every lane `x`.
    unsafe fn fsplat(x: f32) -> Self::F;
    /// `a * b`, rounded.
    unsafe fn fmul(a: Self::F, b: Self::F) -> Self::F;
    /// `fma(a, b, c)`, one rounding.
    unsafe fn fmadd(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    /// int32 -> f32 per lane (round to nearest).
    unsafe fn cvt_i32(v: Self::V) -> Self::F;
    /// Stores `LANES` floats at `p` (unaligned).
    unsafe fn storeu(p: *mut f32, v: Self::F);
}

/// ymm (AVX-VNNI, VEX encoding).
pub(crate) struct Ymm;
/// zmm (AVX-512 VNNI, EVEX encoding).
pub(crate) struct Zmm;

/// Implements [`Width`] with one intrinsic per operation (the two widths differ only in names).
macro_rules! width {
    ($w:ty, $v:ty, $f:ty, $lanes:expr,
     loadu $loadu:ident, set1_epi8 $set1_epi8:ident, set1_epi32 $set1_epi32:ident, zero $zero:ident,
     and $and:ident, srli $srli:ident, srai $srai:ident, add $add:ident, dpbusd $dpbusd:ident,
     cvtph $cvtph:ident, load_half $load_half:ident, fzero $fzero:ident, set1_ps $set1_ps:ident,
     mul $mul:ident, fmadd $fmadd:ident, cvtepi32 $cvtepi32:ident, storeu $storeu:ident) => {
        impl Width for $w {
            type V = $v;
            type F = $f;
            const LANES: usize = $lanes;
            #[inline(always)]
            unsafe fn loadu(p: *const u8) -> $v {
                // SAFETY: the caller passes 4 * LANES readable bytes.
                unsafe { $loadu(p.cast()) }
            }
            #[inline(always)]
            unsafe fn splat_i8(b: i8) -> $v {
                // SAFETY: register operation (the level's features enabled by the caller).
                unsafe { $set1_epi8(b) }
            }
            #[inline(always)]
            unsafe fn splat_i32(v: i32) -> $v {
                // SAFETY: register operation.
                unsafe { $set1_epi32(v) }
            }
            #[inline(always)]
            unsafe fn zero() -> $v {
                // SAFETY: register operation.
                unsafe { $zero() }
            }
            #[inline(always)]
            unsafe fn and(a: $v, b: $v) -> $v {
                // SAFETY: register operation.
                unsafe { $and(a, b) }
            }
            #[inline(always)]
            unsafe fn srli16_4(v: $v) -> $v {
                // SAFETY: register operation.
                unsafe { $srli::<4>(v) }
            }
            #[inline(always)]
            unsafe fn srai32_2(v: $v) -> $v {
                // SAFETY: register operation.
                unsafe { $srai::<2>(v) }
            }
            #[inline(always)]
            unsafe fn add32(a: $v, b: $v) -> $v {
                // SAFETY: register operation.
                unsafe { $add(a, b) }
            }
            #[inline(always)]
            unsafe fn dpbusd(acc: $v, u: $v, y: $v) -> $v {
                // SAFETY: register operation (the level's VNNI enabled by the caller).
                unsafe { $dpbusd(acc, u, y) }
            }
            #[inline(always)]
            unsafe fn cvtph(p: *const f16) -> $f {
                // SAFETY: the caller passes LANES readable fp16 values.
                unsafe { $cvtph($load_half(p.cast())) }
            }
            #[inline(always)]
            unsafe fn fzero() -> $f {
                // SAFETY: register operation.
                unsafe { $fzero() }
            }
            #[inline(always)]
            unsafe fn fsplat(x: f32) -> $f {
                // SAFETY: register operation.
                unsafe { $set1_ps(x) }
            }
            #[inline(always)]
            unsafe fn fmul(a: $f, b: $f) -> $f {
                // SAFETY: register operation.
                unsafe { $mul(a, b) }
            }
            #[inline(always)]
            unsafe fn fmadd(a: $f, b: $f, c: $f) -> $f {
                // SAFETY: register operation (FMA enabled by the caller).
                unsafe { $fmadd(a, b, c) }
            }
            #[inline(always)]
            unsafe fn cvt_i32(v: $v) -> $f {
                // SAFETY: register operation.
                unsafe { $cvtepi32(v) }
            }
            #[inline(always)]
            unsafe fn storeu(p: *mut f32, v: $f) {
                // SAFETY: the caller passes LANES writable floats.
                unsafe { $storeu(p, v) }
            }
        }
    };
}

width!(Ymm, __m256i, __m256, 8,
    loadu _mm256_loadu_si256, set1_epi8 _mm256_set1_epi8, set1_epi32 _mm256_set1_epi32,
    zero _mm256_setzero_si256, and _mm256_and_si256, srli _mm256_srli_epi16, srai _mm256_srai_epi32,
    add _mm256_add_epi32, dpbusd _mm256_dpbusd_avx_epi32, cvtph _mm256_cvtph_ps, load_half _mm_loadu_si128,
    fzero _mm256_setzero_ps, set1_ps _mm256_set1_ps, mul _mm256_mul_ps, fmadd _mm256_fmadd_ps,
    cvtepi32 _mm256_cvtepi32_ps, storeu _mm256_storeu_ps);

width!(Zmm, __m512i, __m512, 16,
    loadu _mm512_loadu_si512, set1_epi8 _mm512_set1_epi8, set1_epi32 _mm512_set1_epi32,
    zero _mm512_setzero_si512, and _mm512_and_si512, srli _mm512_srli_epi16, srai _mm512_srai_epi32,
    add _mm512_add_epi32, dpbusd _mm512_dpbusd_epi32, cvtph _mm512_cvtph_ps, load_half _mm256_loadu_si256,
    fzero _mm512_setzero_ps, set1_ps _mm512_set1_ps, mul _mm512_mul_ps, fmadd _mm512_fmadd_ps,
    cvtepi32 _mm512_cvtepi32_ps, storeu _mm512_storeu_ps);

/// A VNNI level at width `W`: the one body of both levels.
pub(crate) struct Vnni<W>(PhantomData<W>);

/// x1 and x4 int32 sums of one vector of rows.
#[derive(Clone, Copy)]
pub(crate) struct Acc<V> {
    s1: V,
    s4: V,
}

impl<W: Width> Isa for Vnni<W> {
    type V = W::V;
    type F = W::F;
    type Acc = Acc<W::V>;
    const LANES: usize = W::LANES;
    const SPLIT_NARROW: bool = true;
    const INTEL_GEMV: bool = true;
    const STREAM_COLS_MAX: usize = if W::LANES == 16 { 7 } else { 0 };

    #[inline(always)]
    unsafe fn load(p: *const u8) -> W::V {
        // SAFETY: the caller passes 4 * LANES readable bytes.
        unsafe { W::loadu(p) }
    }
    #[inline(always)]
    unsafe fn slots(v: W::V) -> [W::V; 4] {
        // SAFETY: register operations.
        unsafe {
            let (m1, m4) = (W::splat_i8(0x03), W::splat_i8(0x0C));
            let h = W::srli16_4(v);
            [W::and(v, m1), W::and(v, m4), W::and(h, m1), W::and(h, m4)]
        }
    }
    #[inline(always)]
    unsafe fn bcast(p: *const i8) -> W::V {
        // SAFETY: the caller passes 4 readable bytes.
        unsafe { W::splat_i32(p.cast::<i32>().read_unaligned()) }
    }
    #[inline(always)]
    unsafe fn acc_new(nysum: i32) -> Acc<W::V> {
        // SAFETY: register operations.
        unsafe { Acc { s1: W::splat_i32(nysum), s4: W::zero() } }
    }
    #[inline(always)]
    unsafe fn dot<const S: usize>(acc: &mut Acc<W::V>, u: W::V, y: W::V) {
        // SAFETY: VNNI enabled by the caller. Slots 0 and 2 are x1, 1 and 3 are x4.
        unsafe {
            if S.is_multiple_of(2) {
                acc.s1 = W::dpbusd(acc.s1, u, y)
            } else {
                acc.s4 = W::dpbusd(acc.s4, u, y)
            }
        }
    }
    #[inline(always)]
    unsafe fn acc_merge(a: Acc<W::V>, b: Acc<W::V>) -> Acc<W::V> {
        // SAFETY: register operations. Wrapping int32 adds: the merged sums are the one-chain
        // sums exactly (the block's sums are far inside int32).
        unsafe { Acc { s1: W::add32(a.s1, b.s1), s4: W::add32(a.s4, b.s4) } }
    }
    #[inline(always)]
    unsafe fn isum(acc: Acc<W::V>, _: i32) -> W::V {
        // SAFETY: register operations.
        unsafe { W::add32(acc.s1, W::srai32_2(acc.s4)) }
    }
    #[inline(always)]
    unsafe fn scales(p: *const f16) -> W::F {
        // SAFETY: the caller passes LANES readable fp16 values.
        unsafe { W::cvtph(p) }
    }
    #[inline(always)]
    unsafe fn fzero() -> W::F {
        // SAFETY: register operation.
        unsafe { W::fzero() }
    }
    #[inline(always)]
    unsafe fn fstep(sumf: W::F, d: W::F, dy: f32, isum: W::V) -> W::F {
        // SAFETY: register operations.
        unsafe { W::fmadd(W::fmul(d, W::fsplat(dy)), W::cvt_i32(isum), sumf) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: W::F) {
        // SAFETY: the caller passes LANES writable floats.
        unsafe { W::storeu(p, v) }
    }
}

/// Declares a level's gemv and gemm kernels: the one body at the level's width and tile (the
/// kernel table, `table.rs`, picks between them by the number of columns).
macro_rules! level {
    ($features:literal, $width:ty, $r:literal,
     $gemv:ident, $gemm:ident, $nc:literal, $doc_level:literal) => {
        #[doc = concat!("X16 x Q8_K, one column (decode), 16 rows per tile, ", $doc_level, ".")]
        ///
        /// # Safety
        #[doc = concat!($doc_level, " available (`", $features, "`); `job` validated by `gemm_raw` with one column.")]
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $gemv(job: Job<'_, BlockX16, Q8Half>) {
            // SAFETY: forwarded.
            unsafe { gemm_x16::<Vnni<$width>, $r, 1>(&job) }
        }

        #[doc = concat!("X16 x Q8_K, several columns: 16 rows x ", $nc, " columns per tile (then the smaller tiles; 2 to `STREAM_COLS_MAX` columns on Intel in the gemv's order, see `gemm_x16`), ", $doc_level, ".")]
        ///
        /// # Safety
        #[doc = concat!("As [`", stringify!($gemv), "`], any number of columns.")]
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $gemm(job: Job<'_, BlockX16, Q8Half>) {
            // SAFETY: forwarded.
            unsafe { gemm_x16::<Vnni<$width>, $r, $nc>(&job) }
        }
    };
}

level!("avx2,fma,f16c,avxvnni", Ymm, 2, gemv_x16_16x1_q8_k_avxvnni, gemm_x16_16x2_q8_k_avxvnni, 2, "AVX-VNNI");
level!(
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    Zmm,
    1,
    gemv_x16_16x1_q8_k_avx512vnni,
    gemm_x16_16x8_q8_k_avx512vnni,
    8,
    "AVX-512 VNNI"
);
