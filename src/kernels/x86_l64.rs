//! L64 kernels (AVX-512 VBMI on top of the `avx512vnni` level's features): the table-lookup gemv
//! and the gemm that expands each 64-row tile to X16 in a scratch buffer once and runs the
//! level's X16 gemm kernel on it.
//!
//! gemv: for each group of a 128-weight block, the column's two 128-byte tables (low and high
//! bytes of the group's possible dot products, [`LutHalf`]) sit in four zmm registers; a group's
//! 64 row bytes are one `vpermi2b` index vector each for the low and the high table (bit 7, the
//! sign, is ignored by `vpermi2b`); where bit 7 is set the looked-up bytes are complemented
//! (`0xff - b`, so the int16 is `-v - 1`) and the row's count of such groups goes up by one; a
//! byte and word interleave makes int16 sums, and at the block's end `sum + count` is the row's
//! exact `isum`. Each table is used for four 64-row tiles in turn (256 rows), and the block two
//! ahead of each tile is prefetched: one line per group and tile.
//!
//! Exact: `|sum| <= 26 * 641 < 2^15` (`docs/numerics.md`, section 3), and the float step is the reference's
//! `fma(d * d_y, (float) isum, sumf)` per block in order.

use super::act_lut::LutHalf;
use super::act_pack::{ActTile16, Q8Half};
use super::operands::{Job, OutPtr};
use crate::format::{
    index_digits, position_row, scale_position, BlockL64, BlockX16, L64_GROUPS, L64_ROWS, SCALE_OF_ROW,
};
use core::arch::x86_64::*;

/// Blocks ahead of the one in use that the gemv prefetches (measured on the AMX Xeon VM with a
/// stand-alone copy of this kernel before it moved into the library, 17408 x 5120 from DRAM, 1
/// thread, best of 48: no prefetch 1473 us, 1 block 1192, 2 blocks 1140, 4 blocks 1274, the X16
/// gemv 1650; docs/results.md, section 1.11).
const PF_BLOCKS: usize = 2;

/// Row of output element `e` of a tile's four sum vectors.
const OUT_ROW: [u8; L64_ROWS] = {
    let mut t = [0u8; L64_ROWS];
    let mut e = 0;
    while e < L64_ROWS {
        t[e] = position_row(scale_position(e)) as u8;
        e += 1;
    }
    t
};

/// `S` row tiles from `t0` of the gemv, every block.
///
/// # Safety
/// AVX-512 F/BW/VBMI, F16C, FMA available; tiles `t0 .. t0 + S` exist in `job` (validated by
/// `gemm_raw`); the job's rows are the caller's.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vbmi")]
unsafe fn gemv_tiles<const S: usize>(job: &Job<'_, BlockL64, LutHalf>, t0: usize) {
    // SAFETY: the features are the caller's; every load reads inside the validated job's blocks and
    // elements (tiles t0..t0+S, blocks 0..nb), a prefetch never faults, and the stores are to the
    // local array and to the job's rows.
    unsafe {
        let nb = job.nb;
        let ff = _mm512_set1_epi8(-1);
        let one = _mm512_set1_epi8(1);
        let z = _mm512_setzero_si512();
        let mut sumf = [[_mm512_setzero_ps(); 4]; S];
        let tiles: [&[BlockL64]; S] = core::array::from_fn(|s| job.tile(t0 + s));
        for i in 0..nb {
            let tb = &job.act[i];
            let mut acc_a = [z; S];
            let mut acc_b = [z; S];
            let mut cnt = [z; S];
            for g in 0..L64_GROUPS {
                let t = &tb.t[g];
                // SAFETY (every load): inside the element and the blocks (validated job).
                let tl0 = _mm512_loadu_si512(t[0].as_ptr().cast());
                let tl1 = _mm512_loadu_si512(t[0].as_ptr().add(64).cast());
                let th0 = _mm512_loadu_si512(t[1].as_ptr().cast());
                let th1 = _mm512_loadu_si512(t[1].as_ptr().add(64).cast());
                for s in 0..S {
                    // a prefetch never faults: the address may lie past the tile's end
                    let pb = tiles[s].as_ptr().wrapping_add(i + PF_BLOCKS).cast::<i8>();
                    _mm_prefetch::<_MM_HINT_T0>(pb.wrapping_add(128 + 64 * g));
                    if g < 2 {
                        _mm_prefetch::<_MM_HINT_T0>(pb.wrapping_add(64 * g));
                    }
                    let idx = _mm512_loadu_si512(tiles[s][i].q[g].as_ptr().cast());
                    let k = _mm512_movepi8_mask(idx);
                    let lo = _mm512_permutex2var_epi8(tl0, idx, tl1);
                    let hi = _mm512_permutex2var_epi8(th0, idx, th1);
                    let lo = _mm512_mask_sub_epi8(lo, k, ff, lo);
                    let hi = _mm512_mask_sub_epi8(hi, k, ff, hi);
                    cnt[s] = _mm512_mask_add_epi8(cnt[s], k, cnt[s], one);
                    acc_a[s] = _mm512_add_epi16(acc_a[s], _mm512_unpacklo_epi8(lo, hi));
                    acc_b[s] = _mm512_add_epi16(acc_b[s], _mm512_unpackhi_epi8(lo, hi));
                }
            }
            let dy = _mm512_set1_ps(tb.d);
            for s in 0..S {
                let b = &tiles[s][i];
                let ia = _mm512_add_epi16(acc_a[s], _mm512_unpacklo_epi8(cnt[s], z));
                let ib = _mm512_add_epi16(acc_b[s], _mm512_unpackhi_epi8(cnt[s], z));
                let iv = [
                    _mm512_cvtepi16_epi32(_mm512_castsi512_si256(ia)),
                    _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64::<1>(ia)),
                    _mm512_cvtepi16_epi32(_mm512_castsi512_si256(ib)),
                    _mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64::<1>(ib)),
                ];
                for (v, iv) in iv.into_iter().enumerate() {
                    let d = _mm512_cvtph_ps(_mm256_loadu_si256(b.d.as_ptr().add(16 * v).cast()));
                    sumf[s][v] = _mm512_fmadd_ps(_mm512_mul_ps(d, dy), _mm512_cvtepi32_ps(iv), sumf[s][v]);
                }
            }
        }
        for (s, sumf) in sumf.iter().enumerate() {
            let mut out = [0f32; L64_ROWS];
            for (v, x) in sumf.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(16 * v), *x);
            }
            let r0 = L64_ROWS * (t0 + s);
            for (e, &v) in out.iter().enumerate() {
                let r = r0 + usize::from(OUT_ROW[e]);
                if r < job.n_rows {
                    // SAFETY: a row of the job (validated), the caller's.
                    job.out.write(r, 0, v);
                }
            }
        }
    }
}

/// L64 x Q8_K gemv (one column, [`LutHalf`] tables): four 64-row tiles at a time, then one.
///
/// # Safety
/// AVX-512 F/BW/VL/VBMI, F16C, FMA available; `job` validated by `gemm_raw` with one column.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vbmi")]
pub(crate) unsafe fn gemv_l64_64x1_q8_k_avx512vbmi(job: Job<'_, BlockL64, LutHalf>) {
    let mut t = job.tiles.start;
    while t + 4 <= job.tiles.end {
        // SAFETY: forwarded; tiles t..t+4 in the job.
        unsafe { gemv_tiles::<4>(&job, t) };
        t += 4;
    }
    while t < job.tiles.end {
        // SAFETY: as above.
        unsafe { gemv_tiles::<1>(&job, t) };
        t += 1;
    }
}

/// A 128-byte `vpermi2b` table as two halves.
#[repr(C, align(64))]
struct Table([u8; 128]);

/// `TA[five][c]`: trits 0..4 of group index `c` as X16 codes (code of trit `i` at bits `2i`), for
/// five-trit groups (`five` 1) and four-trit ones (0); `TB[c]`: trit 4's code (five-trit
/// groups). Indices past `half` (no repack writes them) give code 0, as
/// [`crate::format::decode_group`] reads them.
static TA: [Table; 2] = [Table(codes_table(4, 0)), Table(codes_table(5, 0))];
static TB: Table = Table(codes_table(5, 4));

/// The table, for groups of `n` trits, of trits 0..4 as packed codes (`from == 0`) or of trit 4
/// alone (`from == 4`), through [`index_digits`].
const fn codes_table(n: usize, from: usize) -> [u8; 128] {
    let mut t = [0u8; 128];
    let mut c = 0u32;
    while c < 128 {
        let d = index_digits(n, c);
        t[c as usize] = if from == 4 { d[4] } else { d[0] | d[1] << 2 | d[2] << 4 | d[3] << 6 };
        c += 1;
    }
    t
}

/// `SCALE_OF_ROW` as the `vpermt2w` indices of the X16 tiles' scales: tiles 0 and 1, then 2 and 3.
static SCALE_IDX: [[u16; 32]; 2] = {
    let mut t = [[0u16; 32]; 2];
    let mut r = 0;
    while r < L64_ROWS {
        t[r / 32][r % 32] = SCALE_OF_ROW[r] as u16;
        r += 1;
    }
    t
};

/// Expands the L64 blocks of one 64-row tile into the four X16 tiles of its rows: `out[m][i]` =
/// rows `16 m .. 16 m + 16` of block `i` (the same codes and scales; padding rows stay padding
/// rows: code 1, scale +0). Per group, one `vpermi2b` gives the X16 lane byte of trits 0..4 and
/// one more trit 4 (shifted into its slot of the byte that four groups share); a negative group
/// turns each code `c` into `2 - c` (`0xAA - x`: the 2-bit fields never borrow); two rounds of
/// byte and word interleaves give the X16 words (the positions' row order makes that so); the
/// scales move with two `vpermt2w`.
///
/// # Safety
/// AVX-512 F/BW/VBMI available; every `out[m]` at least as long as `tile`.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vbmi")]
unsafe fn expand_tile(tile: &[BlockL64], out: [&mut [BlockX16]; 4]) {
    debug_assert!(out.iter().all(|o| o.len() >= tile.len()));
    // SAFETY: the caller's features; loads read the tables and the tile's blocks, stores write
    // block i of each out[m] (i < tile.len() <= out[m].len()).
    unsafe {
        let load =
            |t: &Table| (_mm512_loadu_si512(t.0.as_ptr().cast()), _mm512_loadu_si512(t.0.as_ptr().add(64).cast()));
        let (a5, a4, tb) = (load(&TA[1]), load(&TA[0]), load(&TB));
        let aa = _mm512_set1_epi8(0xAAu8 as i8);
        let two = _mm512_set1_epi8(2);
        let sidx = [_mm512_loadu_si512(SCALE_IDX[0].as_ptr().cast()), _mm512_loadu_si512(SCALE_IDX[1].as_ptr().cast())];
        let [o0, o1, o2, o3] = out;
        let (p0, p1, p2, p3) = (o0.as_mut_ptr(), o1.as_mut_ptr(), o2.as_mut_ptr(), o3.as_mut_ptr());
        for (i, b) in tile.iter().enumerate() {
            let (q0, q1, q2, q3) = (&mut *p0.add(i), &mut *p1.add(i), &mut *p2.add(i), &mut *p3.add(i));
            let mut words = |w: usize, v: [__m512i; 4]| {
                let t0 = _mm512_unpacklo_epi8(v[0], v[1]);
                let t1 = _mm512_unpackhi_epi8(v[0], v[1]);
                let t2 = _mm512_unpacklo_epi8(v[2], v[3]);
                let t3 = _mm512_unpackhi_epi8(v[2], v[3]);
                _mm512_storeu_si512(q0.qs[w].as_mut_ptr().cast(), _mm512_unpacklo_epi16(t0, t2));
                _mm512_storeu_si512(q1.qs[w].as_mut_ptr().cast(), _mm512_unpackhi_epi16(t0, t2));
                _mm512_storeu_si512(q2.qs[w].as_mut_ptr().cast(), _mm512_unpacklo_epi16(t1, t3));
                _mm512_storeu_si512(q3.qs[w].as_mut_ptr().cast(), _mm512_unpackhi_epi16(t1, t3));
            };
            // every group written out (the group index a constant): a loop kept the vectors on
            // the stack (about 240 ns per block; docs/results.md, section 1.11)
            macro_rules! group {
                ($g:expr, $ta:expr) => {{
                    let idx = _mm512_loadu_si512(b.q[$g].as_ptr().cast());
                    let k = _mm512_movepi8_mask(idx);
                    let a = _mm512_permutex2var_epi8($ta.0, idx, $ta.1);
                    (_mm512_mask_sub_epi8(a, k, aa, a), idx, k)
                }};
            }
            // trit 4 of a five-trit group, its code in the low bits of each byte
            let trit4 = |idx: __m512i, k: __mmask64| {
                let t = _mm512_permutex2var_epi8(tb.0, idx, tb.1);
                _mm512_mask_sub_epi8(t, k, two, t)
            };
            // groups 4w .. 4w + 4: X16 word w, and the byte of their trits 4 (slot g % 4; codes <= 2
            // shifted by <= 6 stay inside their byte, so a 16-bit shift is a byte shift)
            macro_rules! quad {
                ($w:literal) => {{
                    let (v0, i0, k0) = group!(4 * $w, a5);
                    let (v1, i1, k1) = group!(4 * $w + 1, a5);
                    let (v2, i2, k2) = group!(4 * $w + 2, a5);
                    let (v3, i3, k3) = group!(4 * $w + 3, a5);
                    words($w, [v0, v1, v2, v3]);
                    let lo = _mm512_or_si512(trit4(i0, k0), _mm512_slli_epi16::<2>(trit4(i1, k1)));
                    let hi =
                        _mm512_or_si512(_mm512_slli_epi16::<4>(trit4(i2, k2)), _mm512_slli_epi16::<6>(trit4(i3, k3)));
                    _mm512_or_si512(lo, hi)
                }};
            }
            let (s0, s1, s2, s3, s4, s5) = (quad!(0), quad!(1), quad!(2), quad!(3), quad!(4), quad!(5));
            let (v24, _, _) = group!(24, a4);
            let (v25, _, _) = group!(25, a4);
            // word 6: X16 bytes 24, 25 (groups 24, 25) and 26, 27; word 7: bytes 28..32
            words(6, [v24, v25, s0, s1]);
            words(7, [s2, s3, s4, s5]);
            let d0 = _mm512_loadu_si512(b.d.as_ptr().cast());
            let d1 = _mm512_loadu_si512(b.d.as_ptr().add(32).cast());
            let s01 = _mm512_permutex2var_epi16(d0, sidx[0], d1);
            let s23 = _mm512_permutex2var_epi16(d0, sidx[1], d1);
            _mm256_storeu_si256(q0.d.as_mut_ptr().cast(), _mm512_castsi512_si256(s01));
            _mm256_storeu_si256(q1.d.as_mut_ptr().cast(), _mm512_extracti64x4_epi64::<1>(s01));
            _mm256_storeu_si256(q2.d.as_mut_ptr().cast(), _mm512_castsi512_si256(s23));
            _mm256_storeu_si256(q3.d.as_mut_ptr().cast(), _mm512_extracti64x4_epi64::<1>(s23));
        }
    }
}

/// Bytes of X16 scratch the gemm expands at a time (whole 64-row tiles, at least one): the X16
/// kernel then runs over all of them, so that its column passes (the `amx` level keeps a pass's
/// activations in L2 while the rows stream) see many rows per call. With one 64-row tile per call
/// the AMX gemm of 5120 x 17408 at 512 columns took 1.23x X16's time (its activations, 8.9 MB,
/// streamed once per 64 rows).
const SPAN_BYTES: usize = 1 << 20;

/// The L64 gemm: the job's 64-row tiles expanded to X16 ([`expand_tile`]) a span of
/// [`SPAN_BYTES`] at a time into a scratch buffer, then `x16` (the level's X16 kernel for this
/// batch) on the span, writing its rows.
///
/// # Safety
/// AVX-512 F/BW/VBMI available, and `x16`'s features; `job` validated by `gemm_raw` (in the
/// format `x16` reads).
pub(crate) unsafe fn gemm_l64_via_x16<A>(job: Job<'_, BlockL64, A>, x16: unsafe fn(Job<'_, BlockX16, A>)) {
    let nb = job.nb;
    let per_tile = 4 * nb * core::mem::size_of::<BlockX16>();
    let span = (SPAN_BYTES / per_tile).clamp(1, job.tiles.len().max(1));
    // every block of the scratch a span uses is written by expand_tile before x16 reads it
    let mut scratch = vec![BlockX16::default(); 4 * nb * span];
    let mut t0 = job.tiles.start;
    while t0 < job.tiles.end {
        let n = span.min(job.tiles.end - t0);
        for (j, t) in (t0..t0 + n).enumerate() {
            // X16 tile 4 j + m (m = 0..4) of the span: rows 16 m .. of L64 tile t
            let part = &mut scratch[4 * nb * j..4 * nb * (j + 1)];
            let (a, rest) = part.split_at_mut(nb);
            let (b, rest) = rest.split_at_mut(nb);
            let (c, d) = rest.split_at_mut(nb);
            // SAFETY: the caller's features; each part holds nb blocks, the tile nb.
            unsafe { expand_tile(job.tile(t), [a, b, c, d]) };
        }
        let r0 = L64_ROWS * t0;
        let rows = (job.n_rows - r0).min(L64_ROWS * n);
        // SAFETY: the span's rows shifted to row 0: rows r0 .. r0 + rows of the output.
        let out = OutPtr { ptr: unsafe { job.out.ptr.add(r0) }, col_stride: job.out.col_stride };
        let sub =
            Job { w: &scratch, nb, n_rows: rows, act: job.act, n_cols: job.n_cols, out, tiles: 0..rows.div_ceil(16) };
        // SAFETY: the sub-job's blocks, activations and rows are inside the validated job's.
        unsafe { x16(sub) };
        t0 += n;
    }
}

/// L64 x Q8_K, 2 or more columns (below the `amx` level's tiles): [`gemm_l64_via_x16`] with the
/// AVX-512 VNNI X16 gemm.
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI/VBMI, F16C, FMA available; `job` validated by `gemm_raw`.
pub(crate) unsafe fn gemm_l64_64x8_q8_k_avx512vbmi(job: Job<'_, BlockL64, Q8Half>) {
    // SAFETY: forwarded.
    unsafe { gemm_l64_via_x16(job, super::x86_vnni::gemm_x16_16x8_q8_k_avx512vnni) }
}

/// L64 x Q8_K on AMX narrow tiles ([`gemm_l64_via_x16`] with the `amx` level's narrow kernel).
///
/// # Safety
/// As [`gemm_l64_64x8_q8_k_avx512vbmi`], and AMX usable with the tile permission.
pub(crate) unsafe fn gemm_l64_narrow_q8_k_amx(job: Job<'_, BlockL64, ActTile16>) {
    // SAFETY: forwarded.
    unsafe { gemm_l64_via_x16(job, super::x86_amx::gemm_x16_narrow_q8_k_amx_level) }
}

/// L64 x Q8_K on AMX 2x2 tiles ([`gemm_l64_via_x16`] with the `amx` level's wide kernel).
///
/// # Safety
/// As [`gemm_l64_narrow_q8_k_amx`].
pub(crate) unsafe fn gemm_l64_64x16_q8_k_amx(job: Job<'_, BlockL64, ActTile16>) {
    // SAFETY: forwarded.
    unsafe { gemm_l64_via_x16(job, super::x86_amx::gemm_x16_16x16_q8_k_amx_level) }
}
