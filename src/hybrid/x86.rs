//! x86-64 paths of the hybrid's float ops: AVX-512F (a 16-lane sum in one zmm, the row, key and
//! query of a 128-wide head in 24 zmm) and AVX2 + FMA (a 16-lane sum in two ymm; the row goes
//! through L1 between its two halves). The operations and their order are [`super::reference`]'s.

use super::{ConvOut, ConvTile, Rows, MAX_CONV};
use core::arch::x86_64::*;

/// Prefetches the line holding `p` into L1 (any address: a prefetch reads nothing
/// architecturally and never faults).
#[inline]
pub(crate) fn prefetch(p: *const f32) {
    // SAFETY: see above.
    unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast::<i8>()) }
}

/// The 8 lanes of `v` summed as lane `l` plus `l + 4`, then `+ 2`, then `+ 1`.
#[inline]
#[target_feature(enable = "avx")]
fn reduce8(v: __m256) -> f32 {
    let s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps::<0x55>(s2, s2)))
}

/// The gated delta rule's rows with AVX-512F, 16 rows at a time (`r.n` is a multiple of 16).
///
/// # Safety
/// As [`super::reference::gdn_rows`]; the CPU has AVX-512F; `r.s` is 64, 128 or 256.
pub(crate) unsafe fn gdn_rows_avx512(r: &Rows) {
    // SAFETY: forwarded.
    unsafe {
        match r.s {
            64 => gdn_rows_512_flags::<1>(r),
            128 => gdn_rows_512_flags::<2>(r),
            _ => gdn_rows_512_flags::<4>(r),
        }
    }
}

/// [`gdn_rows_512`] for `r`'s `pre_scaled` and `e_next` (constants there).
///
/// # Safety
/// As [`gdn_rows_avx512`].
#[target_feature(enable = "avx512f")]
unsafe fn gdn_rows_512_flags<const C: usize>(r: &Rows) {
    // SAFETY: forwarded.
    unsafe {
        match (r.pre_scaled, r.e_next.is_some()) {
            (false, false) => gdn_rows_512::<C, false, false>(r),
            (false, true) => gdn_rows_512::<C, false, true>(r),
            (true, false) => gdn_rows_512::<C, true, false>(r),
            (true, true) => gdn_rows_512::<C, true, true>(r),
        }
    }
}

/// Sixteen rows' 16-lane sums `t[j]`, each reduced as [`super::reference::reduce16`] (lane `l`
/// plus `l + 8`, then `+ 4`, `+ 2`, `+ 1`), into one vector whose lane `j` is row `j`'s sum. The
/// rows share the shuffles: two rows per add in the first step, four, eight, then sixteen.
#[inline]
#[target_feature(enable = "avx512f")]
fn reduce16x16(t: &[__m512; 16]) -> __m512 {
    // l + 8: [A0-3 A4-7 B0-3 B4-7] + [A8-11 A12-15 B8-11 B12-15].
    let mut u = [_mm512_setzero_ps(); 8];
    for (p, x) in u.iter_mut().enumerate() {
        let (a, b) = (t[2 * p], t[2 * p + 1]);
        *x = _mm512_add_ps(_mm512_shuffle_f32x4::<0x44>(a, b), _mm512_shuffle_f32x4::<0xEE>(a, b));
    }
    // l + 4: chunk c of w[p] is row 4p + c's four partials.
    let mut w = [_mm512_setzero_ps(); 4];
    for (p, x) in w.iter_mut().enumerate() {
        let (a, b) = (u[2 * p], u[2 * p + 1]);
        *x = _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(a, b), _mm512_shuffle_f32x4::<0xDD>(a, b));
    }
    // l + 2: chunk c of z[p] is [row 8p + c: two partials, row 8p + 4 + c: two partials].
    let mut z = [_mm512_setzero_ps(); 2];
    for (p, x) in z.iter_mut().enumerate() {
        let (a, b) = (w[2 * p], w[2 * p + 1]);
        *x = _mm512_add_ps(_mm512_shuffle_ps::<0x44>(a, b), _mm512_shuffle_ps::<0xEE>(a, b));
    }
    // l + 1: lane 4c + m of f is row 4m + c.
    let f = _mm512_add_ps(_mm512_shuffle_ps::<0x88>(z[0], z[1]), _mm512_shuffle_ps::<0xDD>(z[0], z[1]));
    let idx = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(idx, f)
}

/// [`gdn_rows_avx512`] for rows of `64 * C` floats: per 16 rows, a first pass for the 16 key
/// dots (reduced together), then a second that scales each row again (the same bits), updates and
/// stores it and takes the 16 query dots. `PRE`: the rows come in scaled (no multiply in either
/// pass); `NEXT`: they go out scaled by `e_next`.
#[target_feature(enable = "avx512f")]
unsafe fn gdn_rows_512<const C: usize, const PRE: bool, const NEXT: bool>(r: &Rows) {
    let zero = _mm512_setzero_ps();
    let e = _mm512_set1_ps(r.e);
    let en = _mm512_set1_ps(r.e_next.unwrap_or(1.0));
    let scaled = |x: __m512| if PRE { x } else { _mm512_mul_ps(x, e) };
    let mut k = [[zero; 4]; C];
    let mut q = [[zero; 4]; C];
    for c in 0..C {
        for a in 0..4 {
            // SAFETY: k and q hold 64 * C floats.
            unsafe {
                k[c][a] = _mm512_loadu_ps(r.k.add(64 * c + 16 * a));
                q[c][a] = _mm512_loadu_ps(r.q.add(64 * c + 16 * a));
            }
        }
    }
    let comb = |acc: [__m512; 4]| _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
    for jb in (0..r.n).step_by(16) {
        let mut t = [zero; 16];
        for (i, ti) in t.iter_mut().enumerate() {
            let mut acc = [zero; 4];
            // SAFETY: row jb + i of n rows of 64 * C floats.
            let src = unsafe { r.src.add((jb + i) * 64 * C) };
            for (c, kc) in k.iter().enumerate() {
                for a in 0..4 {
                    // SAFETY: inside the row.
                    let x = scaled(unsafe { _mm512_loadu_ps(src.add(64 * c + 16 * a)) });
                    acc[a] = _mm512_fmadd_ps(x, kc[a], acc[a]);
                }
            }
            *ti = comb(acc);
        }
        let mut delta = [0f32; 16];
        // SAFETY: v holds the n rows' values; delta 16 floats.
        unsafe {
            let d = _mm512_sub_ps(_mm512_loadu_ps(r.v.add(jb)), reduce16x16(&t));
            _mm512_storeu_ps(delta.as_mut_ptr(), _mm512_mul_ps(d, _mm512_set1_ps(r.beta)));
        }
        for (i, ti) in t.iter_mut().enumerate() {
            let mut acc = [zero; 4];
            let dv = _mm512_set1_ps(delta[i]);
            // SAFETY: row jb + i; each vector is read before it is written (src may be dst).
            unsafe {
                let src = r.src.add((jb + i) * 64 * C);
                let dst = r.dst.add((jb + i) * 64 * C);
                for c in 0..C {
                    for a in 0..4 {
                        let x = scaled(_mm512_loadu_ps(src.add(64 * c + 16 * a)));
                        let y = _mm512_fmadd_ps(k[c][a], dv, x);
                        _mm512_storeu_ps(dst.add(64 * c + 16 * a), if NEXT { _mm512_mul_ps(y, en) } else { y });
                        acc[a] = _mm512_fmadd_ps(y, q[c][a], acc[a]);
                    }
                }
            }
            *ti = comb(acc);
        }
        // SAFETY: out holds the n rows' outputs.
        unsafe { _mm512_storeu_ps(r.out.add(jb), _mm512_mul_ps(reduce16x16(&t), _mm512_set1_ps(r.scale))) };
    }
}

/// Lanes 0-7 and 8-15 of the combined accumulators `(a0 + a2) + (a1 + a3)`, summed as
/// [`super::reference::reduce16`].
#[inline]
#[target_feature(enable = "avx2,fma")]
fn reduce_acc_avx2(acc: &[[__m256; 2]; 4]) -> f32 {
    let half = |h: usize| _mm256_add_ps(_mm256_add_ps(acc[0][h], acc[2][h]), _mm256_add_ps(acc[1][h], acc[3][h]));
    reduce8(_mm256_add_ps(half(0), half(1)))
}

/// The gated delta rule's rows with AVX2 + FMA: unless the rows come in scaled, the first pass
/// stores the scaled row and the second reads it back (16 ymm would hold one row and nothing
/// else).
///
/// # Safety
/// As [`super::reference::gdn_rows`]; the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn gdn_rows_avx2(r: &Rows) {
    // SAFETY: forwarded.
    unsafe {
        match (r.pre_scaled, r.e_next.is_some()) {
            (false, false) => gdn_rows_256::<false, false>(r),
            (false, true) => gdn_rows_256::<false, true>(r),
            (true, false) => gdn_rows_256::<true, false>(r),
            (true, true) => gdn_rows_256::<true, true>(r),
        }
    }
}

/// [`gdn_rows_avx2`] with `r`'s flags as constants. `PRE`: the rows come in scaled, so the first
/// pass only reads them and the second reads them from `src`; otherwise the first pass stores
/// the scaled row in `dst` for the second. `NEXT`: the rows go out scaled by `e_next`.
#[target_feature(enable = "avx2,fma")]
unsafe fn gdn_rows_256<const PRE: bool, const NEXT: bool>(r: &Rows) {
    let zero = _mm256_setzero_ps();
    let e = _mm256_set1_ps(r.e);
    let en = _mm256_set1_ps(r.e_next.unwrap_or(1.0));
    for j in 0..r.n {
        // SAFETY: row j of n rows of s floats; k and q hold s floats; each vector of the row is
        // read before it is written.
        unsafe {
            let src = r.src.add(j * r.s);
            let dst = r.dst.add(j * r.s);
            let mut acc = [[zero; 2]; 4];
            for c in 0..r.s / 64 {
                for (a, lanes) in acc.iter_mut().enumerate() {
                    for (h, s) in lanes.iter_mut().enumerate() {
                        let o = 64 * c + 16 * a + 8 * h;
                        let x = if PRE {
                            _mm256_loadu_ps(src.add(o))
                        } else {
                            let x = _mm256_mul_ps(_mm256_loadu_ps(src.add(o)), e);
                            _mm256_storeu_ps(dst.add(o), x);
                            x
                        };
                        *s = _mm256_fmadd_ps(x, _mm256_loadu_ps(r.k.add(o)), *s);
                    }
                }
            }
            let d = reduce_acc_avx2(&acc);
            let delta = _mm256_set1_ps((*r.v.add(j) - d) * r.beta);
            let mut acc = [[zero; 2]; 4];
            for c in 0..r.s / 64 {
                for (a, lanes) in acc.iter_mut().enumerate() {
                    for (h, s) in lanes.iter_mut().enumerate() {
                        let o = 64 * c + 16 * a + 8 * h;
                        let x = _mm256_loadu_ps(if PRE { src.add(o) } else { dst.add(o) });
                        let y = _mm256_fmadd_ps(_mm256_loadu_ps(r.k.add(o)), delta, x);
                        _mm256_storeu_ps(dst.add(o), if NEXT { _mm256_mul_ps(y, en) } else { y });
                        *s = _mm256_fmadd_ps(y, _mm256_loadu_ps(r.q.add(o)), *s);
                    }
                }
            }
            *r.out.add(j) = reduce_acc_avx2(&acc) * r.scale;
        }
    }
}

/// A conv tile with AVX2 + FMA: two ymm per token (also the AVX-512 path's, for the tokens
/// after its whole 16 x 16 blocks).
///
/// # Safety
/// The CPU has AVX2 and FMA (`n` and `tb` are asserted).
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn conv_tile_avx2(
    tile: &ConvTile,
    w: &[[f32; 16]; MAX_CONV],
    n: usize,
    tb: usize,
    out: &mut ConvOut,
) {
    assert!(n <= MAX_CONV && tb + n - 1 <= tile.len() && tb <= out.len());
    for h in 0..2 {
        let mut wv = [_mm256_setzero_ps(); MAX_CONV];
        for i in 0..n {
            // SAFETY: 8 floats of a 16-float row.
            wv[i] = unsafe { _mm256_loadu_ps(w[i].as_ptr().add(8 * h)) };
        }
        for t in 0..tb {
            let mut acc = _mm256_setzero_ps();
            for i in 0..n {
                // SAFETY: t + i < tb + n - 1 rows; 8 floats of 16.
                acc = _mm256_fmadd_ps(unsafe { _mm256_loadu_ps(tile[t + i].as_ptr().add(8 * h)) }, wv[i], acc);
            }
            // SAFETY: 8 floats of an output row.
            unsafe { _mm256_storeu_ps(out[t].as_mut_ptr().add(8 * h), acc) };
        }
    }
}

/// Copies `n` columns of a transposed source into 16 destination rows: `src` is the first of 16
/// adjacent floats (one per row) of column 0, `stride` floats between columns; row `r` gets
/// `src[r + j * stride]` at `dst[r][j]`. Blocks of 16 columns go through [`transpose16`] (16
/// loads, 16 stores), the source 32 columns ahead prefetched; the last `n % 16` columns one
/// float at a time. A copy: the same bits.
///
/// # Safety
/// The CPU has AVX-512F; the 16 floats at `src + j * stride` are readable for `j < n`, and each
/// `dst[r]` has room for `n` floats, overlapping nothing read.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_copy_avx512(src: *const f32, stride: usize, n: usize, dst: &[*mut f32; 16]) {
    let mut j = 0;
    while j + 16 <= n {
        for k in 0..16 {
            // A prefetch never faults: the column 32 on, both lines its 16 floats may touch.
            let p = src.wrapping_add((j + 32 + k) * stride);
            prefetch(p);
            prefetch(p.wrapping_add(15));
        }
        // SAFETY: columns j .. j + 16 < n hold 16 readable floats each; rows have room for n.
        unsafe {
            let mut r: [__m512; 16] = core::array::from_fn(|k| _mm512_loadu_ps(src.add((j + k) * stride)));
            transpose16(&mut r);
            for (row, v) in dst.iter().zip(r) {
                _mm512_storeu_ps(row.add(j), v);
            }
        }
        j += 16;
    }
    for jj in j..n {
        for (r, row) in dst.iter().enumerate() {
            // SAFETY: as above.
            unsafe { *row.add(jj) = *src.add(jj * stride + r) };
        }
    }
}

/// Transposes 16 rows of 16 floats in place (row `i` lane `j` becomes row `j` lane `i`): 32-bit
/// and 64-bit interleaves within 128-bit lanes, then two 128-bit shuffles.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose16(r: &mut [__m512; 16]) {
    let zero = _mm512_setzero_ps();
    let mut t = [zero; 16];
    for k in 0..8 {
        t[2 * k] = _mm512_unpacklo_ps(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_ps(r[2 * k], r[2 * k + 1]);
    }
    // u[4k + m], 128-bit lane L: column 4L + m of rows 4k .. 4k + 3.
    let mut u = [zero; 16];
    for k in 0..4 {
        let d = |i: usize| _mm512_castps_pd(t[4 * k + i]);
        u[4 * k] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(0), d(2)));
        u[4 * k + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(0), d(2)));
        u[4 * k + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(1), d(3)));
        u[4 * k + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(1), d(3)));
    }
    for m in 0..4 {
        let a = _mm512_shuffle_f32x4::<0x88>(u[m], u[4 + m]);
        let b = _mm512_shuffle_f32x4::<0xDD>(u[m], u[4 + m]);
        let c = _mm512_shuffle_f32x4::<0x88>(u[8 + m], u[12 + m]);
        let d = _mm512_shuffle_f32x4::<0xDD>(u[8 + m], u[12 + m]);
        r[m] = _mm512_shuffle_f32x4::<0x88>(a, c);
        r[4 + m] = _mm512_shuffle_f32x4::<0x88>(b, d);
        r[8 + m] = _mm512_shuffle_f32x4::<0xDD>(a, c);
        r[12 + m] = _mm512_shuffle_f32x4::<0xDD>(b, d);
    }
}

/// 16 channels x 16 tokens of the short conv with AVX-512F, without a tile: each channel's 16
/// outputs as one vector over tokens (`n` FMAs on shifted loads of its own row), then a 16 x 16
/// transpose and 16 stores of 16 channels. `x[c]` points at channel `c`'s input at the first
/// token (`n + 15` floats readable), `dst` at the first token's output of the first channel,
/// `stride` floats between tokens.
///
/// # Safety
/// The pointers are valid as stated; the CPU has AVX-512F; `n <= MAX_CONV`.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn conv_block_avx512(
    x: &[*const f32; 16],
    w: &[[f32; 16]; MAX_CONV],
    n: usize,
    dst: *mut f32,
    stride: usize,
) {
    let mut r = [_mm512_setzero_ps(); 16];
    for (c, rc) in r.iter_mut().enumerate() {
        let mut acc = _mm512_setzero_ps();
        for (i, wi) in w.iter().enumerate().take(n) {
            // SAFETY: n + 15 floats of channel c's row are readable.
            acc = _mm512_fmadd_ps(unsafe { _mm512_loadu_ps(x[c].add(i)) }, _mm512_set1_ps(wi[c]), acc);
        }
        *rc = acc;
    }
    transpose16(&mut r);
    for (t, rt) in r.iter().enumerate() {
        // SAFETY: 16 channels of token t's output row.
        unsafe { _mm512_storeu_ps(dst.add(t * stride), *rt) };
    }
}
