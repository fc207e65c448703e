//! T2P: four PQ2_0 rows of one 128-column block in 136 bytes, reordered so a slot of a 16-byte
//! word is a `sdot`/`smmla` operand after one `and` (docs/formats.md §5).

use super::{BlockPq2_0, BlockPtq1_0};
use core::mem::{offset_of, size_of};
use half::f16;

/// One T2P block: the four rows' fp16 scales, then `qs[pair][word][byte]`.
///
/// Byte `j` of word `w` of row pair `p` holds, in bits `2s..2s+1` (slot `s` = 0..4), the PQ2_0
/// code of row `2p + (j >= 8)`, weight `8 * (4w + s) + (j & 7)`. So slot `s` of a word, as 16
/// lanes, is `[row 2p: weights 8c..8c+8 | row 2p+1: the same weights]` for chunk `c = 4w + s`.
///
/// A repacked `n_rows x k` matrix stores these blocks row-group major: all `k/128` blocks of
/// rows 0..4, then rows 4..8, and so on; it has the same size as the PQ2_0 matrix.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockT2p {
    /// Scales of rows 0..4 (fp16), in row order.
    pub d: [f16; 4],
    /// `qs[pair][word][byte]`, see the type docs.
    pub qs: [[[u8; 16]; 4]; 2],
}

const _: () = assert!(size_of::<BlockT2p>() == 136);
const _: () = assert!(size_of::<BlockT2p>() == 4 * size_of::<BlockPq2_0>());
const _: () = assert!(offset_of!(BlockT2p, d) == 0);
const _: () = assert!(offset_of!(BlockT2p, qs) == 8);

/// Where a T2P code lives: (pair, word, byte, slot) of row `r` (0..4), weight `j` (0..128).
#[inline]
pub const fn t2p_position(r: usize, j: usize) -> (usize, usize, usize, usize) {
    let c = j / 8;
    (r / 2, c / 4, 8 * (r % 2) + j % 8, c % 4)
}

/// `SPREAD[b]` puts code `k` (bits `2k..2k+2` of `b`) into bits `8k..8k+2`: the four codes of a
/// PQ2_0 byte, one per output byte.
pub static SPREAD: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 4 {
            t[b] |= ((b as u32 >> (2 * k)) & 3) << (8 * k);
            k += 1;
        }
        b += 1;
    }
    t
};

impl BlockT2p {
    /// The 2-bit code of row `r` (0..4), weight `j` (0..128).
    ///
    /// # Panics
    /// If `r >= 4` or `j >= 128`.
    #[inline]
    pub fn code(&self, r: usize, j: usize) -> u8 {
        let (p, w, b, s) = t2p_position(r, j);
        (self.qs[p][w][b] >> (2 * s)) & 3
    }

    /// Packs four PQ2_0 blocks (rows 0..4 of one 128-column block).
    ///
    /// Weight `32w + 8s + e` of a row sits in PQ2_0 byte `8w + 2s + e/4`, so each 16-bit pair of
    /// source bytes holds one slot's eight codes; output byte `e` gathers code `e` of the four
    /// slots. [`SPREAD`] moves a source byte's four codes into four output bytes at once.
    pub fn from_rows(rows: [&BlockPq2_0; 4]) -> Self {
        let mut out = BlockT2p::default();
        for (r, src) in rows.iter().enumerate() {
            let (p, side) = (r / 2, 8 * (r % 2));
            out.d[r] = src.d;
            for w in 0..4 {
                let mut word = 0u64;
                for s in 0..4 {
                    let lo = u64::from(SPREAD[usize::from(src.qs[8 * w + 2 * s])]);
                    let hi = u64::from(SPREAD[usize::from(src.qs[8 * w + 2 * s + 1])]);
                    word |= (lo | hi << 32) << (2 * s);
                }
                out.qs[p][w][side..side + 8].copy_from_slice(&word.to_le_bytes());
            }
        }
        out
    }

    /// [`BlockT2p::from_rows`] of four PTQ1_0 blocks' PQ2_0 forms (a digit is the code of the
    /// same weight, the scale the same fp16), built from [`BlockPtq1_0::t2p_words`].
    pub fn from_ptq1_0_rows(rows: [&BlockPtq1_0; 4]) -> Self {
        let mut out = BlockT2p::default();
        out.set_ptq1_0_rows(rows);
        out
    }

    /// [`BlockT2p::from_ptq1_0_rows`] written into `self` (every byte overwritten; no 136-byte
    /// temporary). A row pair's word `w` is one 16-byte vector `[row 2p | row 2p + 1]`: on x86-64
    /// (SSE2) and aarch64 (NEON), both baseline there, the digits are taken 16 at a time
    /// (`pair_words_sse2` / `pair_words_neon`, each compiled for its own target only); elsewhere
    /// row by row through [`BlockPtq1_0::t2p_words`] ([`pair_words_scalar`]). All give the same
    /// bytes (tests/rust/props.rs checks every byte value at every position, random rows against
    /// the PQ2_0 route, and the portable route against this target's).
    #[inline]
    pub fn set_ptq1_0_rows(&mut self, rows: [&BlockPtq1_0; 4]) {
        for (r, src) in rows.iter().enumerate() {
            self.d[r] = src.d;
        }
        for p in 0..2 {
            let (a, b) = (rows[2 * p], rows[2 * p + 1]);
            #[cfg(target_arch = "x86_64")]
            {
                self.qs[p] = pair_words_sse2(a, b);
            }
            #[cfg(target_arch = "aarch64")]
            {
                self.qs[p] = pair_words_neon(a, b);
            }
            #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
            {
                self.qs[p] = pair_words_scalar(a, b);
            }
        }
    }

    /// The exact inverse of [`BlockT2p::from_rows`]: row `r`'s PQ2_0 block.
    ///
    /// # Panics
    /// If `r >= 4`.
    pub fn row(&self, r: usize) -> BlockPq2_0 {
        let mut b = BlockPq2_0 { d: self.d[r], qs: [0; 32] };
        for j in 0..128 {
            b.set_code(j, self.code(r, j));
        }
        b
    }

    /// Scale of row `r` as f32 (exact).
    #[inline]
    pub fn d_f32(&self, r: usize) -> f32 {
        f16::to_f32(self.d[r])
    }
}

/// The T2P words of a row pair from [`BlockPtq1_0::t2p_words`], row by row (the portable route).
#[cfg_attr(any(target_arch = "x86_64", target_arch = "aarch64"), allow(dead_code))]
pub fn pair_words_scalar(a: &BlockPtq1_0, b: &BlockPtq1_0) -> [[u8; 16]; 4] {
    let (wa, wb) = (a.t2p_words(), b.t2p_words());
    core::array::from_fn(|w| {
        let mut v = [0u8; 16];
        v[..8].copy_from_slice(&wa[w].to_le_bytes());
        v[8..].copy_from_slice(&wb[w].to_le_bytes());
        v
    })
}

/// [`pair_words_scalar`] with SSE2: each source byte in a 16-bit lane, `w = v + 2v` gives the
/// digit in the high byte and the next `v` in the low byte (as [`super::digits_swar`]); a word is
/// four digits shifted into place, and `packus` puts the two rows' words side by side.
#[cfg(target_arch = "x86_64")]
pub fn pair_words_sse2(a: &BlockPtq1_0, b: &BlockPtq1_0) -> [[u8; 16]; 4] {
    use core::arch::x86_64::*;
    // SAFETY: SSE2 is part of the x86-64 baseline; every load reads 8 bytes inside a block's
    // 24-byte `qs` (or of a local `u64`), every store writes 16 bytes of `out`.
    unsafe {
        let low = _mm_set1_epi16(0xFF);
        // eight bytes from P, one per 16-bit lane
        let widen = |p: *const u8| _mm_unpacklo_epi8(_mm_loadl_epi64(p.cast()), _mm_setzero_si128());
        // the digits of one row: d[n][g], lanes e = 0..8 of bytes 8g + e
        let row = |blk: &BlockPtq1_0| {
            let q = blk.qs.as_ptr();
            let mut v: [__m128i; 3] = core::array::from_fn(|g| widen(q.add(8 * g)));
            let mut d = [[_mm_setzero_si128(); 3]; 5];
            for dn in &mut d {
                for (g, x) in v.iter_mut().enumerate() {
                    let w = _mm_add_epi16(*x, _mm_slli_epi16::<1>(*x));
                    dn[g] = _mm_srli_epi16::<8>(w);
                    *x = _mm_and_si128(w, low);
                }
            }
            let word = |s0: __m128i, s1: __m128i, s2: __m128i, s3: __m128i| {
                _mm_or_si128(
                    _mm_or_si128(s0, _mm_slli_epi16::<2>(s1)),
                    _mm_or_si128(_mm_slli_epi16::<4>(s2), _mm_slli_epi16::<6>(s3)),
                )
            };
            let q15 = blk.t2p_chunk15().to_le_bytes();
            [
                word(d[0][0], d[0][1], d[1][0], d[1][1]),
                word(d[2][0], d[2][1], d[3][0], d[3][1]),
                word(d[4][0], d[4][1], d[0][2], d[1][2]),
                word(d[2][2], d[3][2], d[4][2], widen(q15.as_ptr())),
            ]
        };
        let (wa, wb) = (row(a), row(b));
        let mut out = [[0u8; 16]; 4];
        for (w, o) in out.iter_mut().enumerate() {
            _mm_storeu_si128(o.as_mut_ptr().cast(), _mm_packus_epi16(wa[w], wb[w]));
        }
        out
    }
}

/// [`pair_words_scalar`] with NEON, both rows in one 16-byte vector: digit `n` of a byte `q` is
/// `(v >= 86) + (v >= 171)` for `v = q * 3^n mod 256` (docs/formats.md section 2; the form the
/// NEON kernels use), so each digit is one multiply, two compares and two adds per 16 bytes.
#[cfg(target_arch = "aarch64")]
pub fn pair_words_neon(a: &BlockPtq1_0, b: &BlockPtq1_0) -> [[u8; 16]; 4] {
    use core::arch::aarch64::*;
    // SAFETY: NEON is part of the aarch64 baseline; every load reads 8 bytes inside a block's
    // 24-byte `qs`, every store writes 16 bytes of `out`.
    unsafe {
        let (qa, qb) = (a.qs.as_ptr(), b.qs.as_ptr());
        let x: [uint8x16_t; 3] = core::array::from_fn(|g| vcombine_u8(vld1_u8(qa.add(8 * g)), vld1_u8(qb.add(8 * g))));
        let (t1, t2) = (vdupq_n_u8(86), vdupq_n_u8(171));
        let mut d = [[vdupq_n_u8(0); 3]; 5];
        let mut pow = 1u8;
        for dn in &mut d {
            for (g, xg) in x.iter().enumerate() {
                let v = vmulq_u8(*xg, vdupq_n_u8(pow));
                // each compare is 0 or 0xFF (-1): the digit is minus their sum
                dn[g] = vreinterpretq_u8_s8(vnegq_s8(vreinterpretq_s8_u8(vaddq_u8(vcgeq_u8(v, t1), vcgeq_u8(v, t2)))));
            }
            pow = pow.wrapping_mul(3);
        }
        let word = |s0: uint8x16_t, s1: uint8x16_t, s2: uint8x16_t, s3: uint8x16_t| {
            vorrq_u8(vorrq_u8(s0, vshlq_n_u8::<2>(s1)), vorrq_u8(vshlq_n_u8::<4>(s2), vshlq_n_u8::<6>(s3)))
        };
        let q15 = vcombine_u8(vcreate_u8(a.t2p_chunk15()), vcreate_u8(b.t2p_chunk15()));
        let words = [
            word(d[0][0], d[0][1], d[1][0], d[1][1]),
            word(d[2][0], d[2][1], d[3][0], d[3][1]),
            word(d[4][0], d[4][1], d[0][2], d[1][2]),
            word(d[2][2], d[3][2], d[4][2], q15),
        ];
        let mut out = [[0u8; 16]; 4];
        for (o, w) in out.iter_mut().zip(words) {
            vst1q_u8(o.as_mut_ptr(), w);
        }
        out
    }
}
