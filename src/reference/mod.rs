//! The scalar reference: the definitions every kernel in this crate must equal bit for bit.
//!
//! These functions follow the fork's reference C code (docs/formats.md, docs/numerics.md; the golden vectors in
//! `tests/golden/` (see its README) were produced by that code and are checked against these in `tests/rust/golden.rs`).
//! They favour obviousness over speed and work on the original (not repacked) formats.

use crate::error::Error;
use crate::format::{BlockPq2_0, BlockPtq1_0, BlockQ8K, QK, QK_K};

/// How a multiply followed by an add is rounded.
///
/// GCC (the fork's usual compiler) contracts `a * b + c` into one fused multiply-add on ARM and on
/// x86 with FMA, both in the Q8_K quantizer and in the PQ2_0 x Q8_K dot. [`Contract::Fused`] is
/// what a GCC-built fork computes on ARM (golden `*.fma.bin`); [`Contract::Unfused`] rounds the
/// product first (golden `*.nofma.bin`, e.g. `-ffp-contract=off`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Contract {
    /// One rounding: `fma(a, b, c)`.
    #[default]
    Fused,
    /// Two roundings: `(a * b) + c`.
    Unfused,
}

impl Contract {
    #[inline]
    fn mul_add(self, a: f32, b: f32, c: f32) -> f32 {
        match self {
            Contract::Fused => fma_f32(a, b, c),
            Contract::Unfused => a * b + c,
        }
    }
}

/// `fma(a, b, c)` for `f32`, rounded once, without the C library's `fmaf` (which `f32::mul_add`
/// calls on targets without the FMA instruction): MinGW-w64's `fmaf` rounds twice, so on
/// `x86_64-pc-windows-gnu` `mul_add` gave other bits than on Linux for about 29% of random inputs.
/// The product of two `f32` is exact in `f64`; the sum is rounded to `f64` and its exact error
/// found with 2Sum; an inexact sum is rounded to odd (truncated toward zero, last bit set), and an
/// odd-rounded value with 29 more bits than `f32` rounds to `f32` as the exact value would.
#[inline]
pub fn fma_f32(a: f32, b: f32, c: f32) -> f32 {
    let (xy, z) = (f64::from(a) * f64::from(b), f64::from(c));
    let s = xy + z;
    if !s.is_finite() {
        return s as f32;
    }
    let bv = s - xy;
    let err = (xy - (s - bv)) + (z - bv);
    if err == 0.0 {
        return s as f32;
    }
    let mut bits = s.to_bits();
    if (err < 0.0) != (s < 0.0) {
        bits -= 1;
    }
    f64::from_bits(bits | 1) as f32
}

/// The rounding magic `1.5 * 2^23 = 12582912.0` (bits `0x4B40_0000`), the one definition used
/// by every file of the crate. Adding it to an `f32` `v` with `|v| < 2^22` leaves `round(v)`
/// (to nearest, ties to even) in the low 23 mantissa bits, offset by `2^22` (ggml's `nearest_int`,
/// [`nearest_int_scaled`], the Q8_K quantizers); conversely an int32 `isum` with `|isum| < 2^22`
/// added to its bits reads as the float `12582912 + isum`, so one subtraction gives
/// `(float) isum` (the ARM kernels' accumulator seeds, `kernels::act_pack::MAGIC`).
pub const ROUNDING_MAGIC: f32 = 12_582_912.0;

/// ggml's `nearest_int`: round to nearest, ties to even, for `|v| <= 4194303`, by adding
/// `1.5 * 2^23` ([`ROUNDING_MAGIC`]) and reading the mantissa bits. Outside that range it returns the same garbage the
/// C code does (the fork asserts only in debug builds), e.g. `-4194304` for an infinity.
///
/// `fused` selects whether `scale * x + 12582912.0` is one fused operation (GCC's contraction).
#[inline]
pub fn nearest_int_scaled(scale: f32, x: f32, contract: Contract) -> i32 {
    let v = contract.mul_add(scale, x, ROUNDING_MAGIC);
    (v.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// Dequantizes PQ2_0 blocks: `y[128 i + j] = (code_ij - 1) * fp32(d_i)`.
///
/// Shapes: `y.len() == 128 * x.len()`. A zero code times a negative `d` gives `-0.0`, as in C.
/// Source: the fork's `dequantize_row_pq2_0` (docs/formats.md §1).
///
/// # Errors
/// [`Error::Shape`] if the lengths disagree.
pub fn dequantize_row_pq2_0(x: &[BlockPq2_0], y: &mut [f32]) -> Result<(), Error> {
    if y.len() != x.len() * QK {
        return Err(Error::Shape);
    }
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (j, v) in out.iter_mut().enumerate() {
            *v = (i32::from(b.code(j)) - 1) as f32 * d;
        }
    }
    Ok(())
}

/// Dequantizes PTQ1_0 blocks: `y[128 i + e] = (digit_ie - 1) * fp32(d_i)`.
///
/// Shapes: `y.len() == 128 * x.len()`. Source: the fork's `dequantize_row_ptq1_0` and the digit
/// formula and element order of docs/formats.md §2.
///
/// # Errors
/// [`Error::Shape`] if the lengths disagree.
pub fn dequantize_row_ptq1_0(x: &[BlockPtq1_0], y: &mut [f32]) -> Result<(), Error> {
    if y.len() != x.len() * QK {
        return Err(Error::Shape);
    }
    for (b, out) in x.iter().zip(y.chunks_exact_mut(QK)) {
        let d = b.d.to_f32();
        for (e, v) in out.iter_mut().enumerate() {
            *v = (i32::from(b.digit(e)) - 1) as f32 * d;
        }
    }
    Ok(())
}

/// Quantizes one row of `k = 256 * y.len()` floats to Q8_K exactly as the fork's
/// `quantize_row_q8_K_ref` does (docs/formats.md §3):
///
/// - `max` is the first element with the largest `|x|` (sign kept);
/// - if that `|x|` is 0, the block gets `d = +0`, `qs = 0`, and its `bsums` are **left as they
///   were** (the C code does not write them);
/// - else `iscale = -127 / max`, `qs[j] = min(127, nearest_int(iscale * x[j]))` (stored as int8,
///   wrapping like C), `bsums` the 16-element sums, `d = 1 / iscale`.
///
/// With `max` below about 2^-121, `iscale` is infinite: every `qs` is 0, `bsums` 0 and
/// `d = -0.0`. `contract` picks GCC's fused `iscale * x + 1.5*2^23` ([`Contract::Fused`], what
/// the fork does on ARM) or the unfused form.
///
/// # Errors
/// [`Error::Shape`] if `x.len() != 256 * y.len()`.
pub fn quantize_row_q8_k(x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    if x.len() != y.len() * QK_K {
        return Err(Error::Shape);
    }
    for (xb, yb) in x.chunks_exact(QK_K).zip(y.iter_mut()) {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in xb {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        if amax == 0.0 {
            yb.d = 0.0;
            yb.qs = [0; QK_K];
            continue;
        }
        let iscale = -127.0f32 / max;
        for (q, &v) in yb.qs.iter_mut().zip(xb) {
            *q = nearest_int_scaled(iscale, v, contract).min(127) as i8;
        }
        yb.fill_bsums();
        yb.d = 1.0 / iscale;
    }
    Ok(())
}

/// Quantizes one activation row whose length `k` is a multiple of 128 to `ceil(k/256)` Q8_K
/// blocks, zero-padding the row to a multiple of 256 first (the padded zeros change no scale).
/// This is how rows of width 128 * odd (e.g. 896) are defined throughout the crate.
///
/// # Errors
/// [`Error::Shape`] if `x.len() % 128 != 0` or `y.len() != ceil(x.len() / 256)`.
pub fn quantize_row_q8_k_padded(x: &[f32], y: &mut [BlockQ8K], contract: Contract) -> Result<(), Error> {
    if !x.len().is_multiple_of(QK) || y.len() != x.len().div_ceil(QK_K) {
        return Err(Error::Shape);
    }
    let full = x.len() / QK_K;
    quantize_row_q8_k(&x[..full * QK_K], &mut y[..full], contract)?;
    if full < y.len() {
        let mut tail = [0.0f32; QK_K];
        tail[..QK].copy_from_slice(&x[full * QK_K..]);
        quantize_row_q8_k(&tail, &mut y[full..], contract)?;
    }
    Ok(())
}

/// Exact integer dot of 128 weight digits/codes `u` (value `u - 1`) with 128 int8 activations.
/// The largest magnitude is `128 * 2 * 127`, far inside i32.
#[inline]
pub fn ternary_isum(u: &[u8; 128], q: &[i8]) -> i32 {
    u.iter().zip(q).map(|(&c, &y)| (i32::from(c) - 1) * i32::from(y)).sum()
}

/// The 128 activations that weight block `i` meets: half `i % 2` of Q8_K block `i / 2`.
#[inline]
pub fn q8k_half(a: &[BlockQ8K], i: usize) -> (&[i8], f32) {
    let blk = &a[i / 2];
    (&blk.qs[QK * (i % 2)..QK * (i % 2) + QK], blk.d)
}

/// Accumulates one 128-weight block into `sumf` with the stock formula (docs/numerics.md §1):
/// `sumf = fma(fp32(d) * d_y, (float) isum, sumf)`, the product `d * d_y` rounded first.
#[inline]
pub fn accumulate_block(sumf: f32, d: f32, dy: f32, isum: i32, contract: Contract) -> f32 {
    contract.mul_add(d * dy, isum as f32, sumf)
}

fn check_dot_shape(n_blocks: usize, a: &[BlockQ8K]) -> Result<(), Error> {
    if a.len() != n_blocks.div_ceil(2) {
        return Err(Error::Shape);
    }
    Ok(())
}

/// The PQ2_0 x Q8_K dot of one weight row with one activation row: the definition of every
/// T2P kernel's output.
///
/// Shapes: `w` holds `k/128` blocks, `a` holds `ceil(k/256)` blocks (the activation row
/// zero-padded to a multiple of 256, see [`quantize_row_q8_k_padded`]). For each block `i`,
/// `isum = sum_j (code_ij - 1) * q8_j` over half `i % 2` of Q8_K block `i / 2`, then
/// `sumf = fma(fp32(d_i) * d_y, (float) isum, sumf)` in block order from `sumf = +0`.
/// Source: the fork's `ggml_vec_dot_pq2_0_q8_K_generic` (docs/numerics.md §1); `contract` as in
/// [`Contract`] (the fork on ARM is `Fused`).
///
/// # Errors
/// [`Error::Shape`] if `a.len() != ceil(w.len() / 2)`.
pub fn vec_dot_pq2_0_q8_k(w: &[BlockPq2_0], a: &[BlockQ8K], contract: Contract) -> Result<f32, Error> {
    check_dot_shape(w.len(), a)?;
    let mut sumf = 0.0f32;
    for (i, b) in w.iter().enumerate() {
        let (q, dy) = q8k_half(a, i);
        let isum = ternary_isum(&b.codes(), q);
        sumf = accumulate_block(sumf, b.d.to_f32(), dy, isum, contract);
    }
    Ok(sumf)
}

/// The PTQ1_0 x Q8_K dot of one row: the same per-128 formula as [`vec_dot_pq2_0_q8_k`] with
/// the PTQ1_0 block's digits and scale (the definition of the PTQ1_0 kernels).
///
/// # Errors
/// [`Error::Shape`] if `a.len() != ceil(w.len() / 2)`.
pub fn vec_dot_ptq1_0_q8_k(w: &[BlockPtq1_0], a: &[BlockQ8K], contract: Contract) -> Result<f32, Error> {
    check_dot_shape(w.len(), a)?;
    let mut sumf = 0.0f32;
    for (i, b) in w.iter().enumerate() {
        let (q, dy) = q8k_half(a, i);
        let isum = ternary_isum(&b.digits(), q);
        sumf = accumulate_block(sumf, b.d.to_f32(), dy, isum, contract);
    }
    Ok(sumf)
}

#[cfg(test)]
mod fma_tests {
    use super::fma_f32;

    /// SplitMix64 bits, biased towards the cases a double-rounding `fmaf` gets wrong: products
    /// and addends of close magnitude, subnormals, and the special values.
    fn cases() -> impl Iterator<Item = (f32, f32, f32)> {
        let mut s = 0x0F3A_u64;
        let mut next = move || {
            s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        };
        let special = [0.0f32, -0.0, 1.0, -1.0, f32::MIN_POSITIVE, 1e-45, f32::MAX, f32::INFINITY, f32::NAN];
        (0..500_000).map(move |i| {
            let r = next();
            let a = f32::from_bits(r as u32);
            let b = f32::from_bits((r >> 32) as u32);
            let c = match i % 5 {
                0 => f32::from_bits(next() as u32),
                // a*b an exact f32 midpoint (two odd 13-bit significands make 25 bits, odd) and an
                // addend far below its f64 ulp: one rounding goes c's way, two roundings tie to even
                4 => {
                    let odd13 = |r: u64| ((1u64 << 12) | (r & 0xFFF) | 1) as f32;
                    let (x, y) = (odd13(next()), odd13(next()));
                    let sign = if next() & 1 == 0 { 1.0 } else { -1.0 };
                    let tiny = x * y * sign * 2f32.powi(-60 - (next() % 40) as i32);
                    return (x, y, tiny);
                }
                // an addend near -a*b: cancellation, where one rounding vs two shows
                1 => -(a * b) * (1.0 + (next() % 64) as f32 * f32::EPSILON),
                2 => special[(next() % special.len() as u64) as usize],
                _ => f32::from_bits((next() as u32) & 0x807F_FFFF), // subnormal
            };
            (a, b, c)
        })
    }

    /// Bits equal to the C library's `fmaf` where that is correct (glibc on Linux; the FMA
    /// instruction on aarch64): not run on Windows GNU, whose `fmaf` is the reason for `fma_f32`.
    #[test]
    #[cfg(not(all(windows, target_env = "gnu")))]
    fn fma_f32_matches_a_correct_fmaf() {
        let mut n = 0;
        for (a, b, c) in cases() {
            let (want, got) = (a.mul_add(b, c), fma_f32(a, b, c));
            let same = want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan());
            assert!(
                same,
                "fma({a:e}, {b:e}, {c:e}): fmaf {want:e} ({:#x}), ours {got:e} ({:#x})",
                want.to_bits(),
                got.to_bits()
            );
            n += 1;
        }
        assert_eq!(n, 500_000);
    }
}
