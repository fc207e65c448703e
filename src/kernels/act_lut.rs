//! The L64 gemv's activation format ([`ActFormat::Lut`](super::act_pack::ActFormat::Lut)): for
//! each 128-value half block of the single column, one 128-entry table per L64 group of the
//! group's possible dot products with its activations ([`LutHalf`]), built once per matrix
//! multiplication and split over the threads like every pack.
//!
//! Entry `c` of group `g`'s table is `sum_i (t_i - 1) * y[group_weight(g, i)]` for the digits
//! `t_i` of index `c` ([`crate::format::index_digits`]: those of `u = c + half`, `u = sum_i 3^i
//! t_i`, for `c <= half`; past `half`, which no L64 byte indexes, all digits 0: every weight -1).
//! `|entry| <= 5 * 128 = 640` (Q8_K values through the C ABI may hold -128), so an entry
//! is an int16, stored as its low byte (`t[g][0][c]`) and high byte (`t[g][1][c]`): two
//! 128-byte `vpermi2b` tables.

use crate::format::{group_trits, group_weight, index_digits, L64_GROUPS, QK};
use core::mem::size_of;

/// One column's tables for one 128-weight block, and the Q8_K scale.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct LutHalf {
    /// `t[g][0]`: the low bytes of group `g`'s 128 entries; `t[g][1]`: the high bytes.
    pub t: [[[u8; 128]; 2]; L64_GROUPS],
    /// The Q8_K block's `d`.
    pub d: f32,
    _pad: [u32; 3],
}

const _: () = assert!(size_of::<LutHalf>() == L64_GROUPS * 256 + 16);

impl Default for LutHalf {
    fn default() -> Self {
        LutHalf { t: [[[0; 128]; 2]; L64_GROUPS], d: 0.0, _pad: [0; 3] }
    }
}

impl LutHalf {
    /// Entry `c` of group `g`'s table as an int16.
    #[inline]
    pub fn entry(&self, g: usize, c: usize) -> i16 {
        i16::from_le_bytes([self.t[g][0][c], self.t[g][1][c]])
    }
}

/// Builds `out`'s tables from one half block's 128 values `y` and scale `d`, the obvious way.
pub fn build_scalar(y: &[i8], d: f32, out: &mut LutHalf) {
    assert_eq!(y.len(), QK);
    out.d = d;
    for g in 0..L64_GROUPS {
        for c in 0..128u32 {
            let t = index_digits(group_trits(g), c);
            let e: i32 = (0..group_trits(g)).map(|i| (i32::from(t[i]) - 1) * i32::from(y[group_weight(g, i)])).sum();
            let [lo, hi] = (e as i16).to_le_bytes();
            out.t[g][0][c as usize] = lo;
            out.t[g][1][c as usize] = hi;
        }
    }
}

/// Builds `out`'s tables with the fastest code this CPU runs (AVX-512 BW on x86-64 where
/// available, else [`build_scalar`]); the same bytes either way.
pub fn build(y: &[i8], d: f32, out: &mut LutHalf) {
    assert_eq!(y.len(), QK);
    out._pad = [0; 3]; // every byte of the element written (it may be built in a caller's buffer)
    #[cfg(target_arch = "x86_64")]
    if super::features::CpuFeatures::detect().avx512vnni {
        // SAFETY: AVX-512 F/BW (part of avx512vnni's features) available; y has 128 values.
        unsafe { x86::build_avx512(y, d, out) };
        return;
    }
    build_scalar(y, d, out);
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86 {
    use super::LutHalf;
    use crate::format::{group_trits, group_weight, index_digits, L64_GROUPS, QK};
    use core::arch::x86_64::*;

    /// `DIGITS[five][pair][c]`: the `vpmaddubsw` operand of entry `c` (int16 lane `c % 32` of
    /// vector `c / 32`): bytes `(t_2pair, t_2pair+1)` of index `c`'s digits (trit 5 and the
    /// digits past `half` are 0), for the five-trit groups (`five` 1) and the four-trit ones (0).
    static DIGITS: [[[[u8; 2]; 128]; 3]; 2] = {
        let mut t = [[[[0u8; 2]; 128]; 3]; 2];
        let mut f = 0;
        while f < 2 {
            let n = 4 + f;
            let mut c = 0u32;
            while c < 128 {
                let d = index_digits(n, c);
                // trits past n (and the sixth) multiply nothing: 0
                let mut p = 0;
                while p < 3 {
                    let (a, b) = (2 * p, 2 * p + 1);
                    t[f][p][c as usize] = [if a < n { d[a] } else { 0 }, if b < n { d[b] } else { 0 }];
                    p += 1;
                }
                c += 1;
            }
            f += 1;
        }
        t
    };

    /// [`super::build_scalar`] with `vpmaddubsw`: entry = `sum_pairs (t_a, t_b) . (y_a, y_b) -
    /// sum(y)` in int16 (exact: each pair sum `<= 2 * 2 * 128`, no saturation; `|entry| <= 640`),
    /// then the low and high bytes gathered
    /// by `vpackuswb` of the masked and shifted words, its lane order fixed with `vpermq`.
    ///
    /// # Safety
    /// AVX-512 F and BW available; `y.len() == 128`.
    #[target_feature(enable = "avx512f,avx512bw")]
    pub(crate) unsafe fn build_avx512(y: &[i8], d: f32, out: &mut LutHalf) {
        // SAFETY: AVX-512 F/BW available (the caller's contract); every load reads DIGITS inside
        // its 128 entries (32 j + 32 <= 128), every store writes `out`'s own tables (64 h + 64 <=
        // 128).
        unsafe {
            debug_assert_eq!(y.len(), QK);
            out.d = d;
            let m00ff = _mm512_set1_epi16(0x00ff);
            // vpackuswb interleaves 128-bit lanes of its two sources: qword order 0 2 4 6 1 3 5 7
            let fix = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
            for g in 0..L64_GROUPS {
                let n = group_trits(g);
                let f = usize::from(n == 5);
                let yv = |i: usize| if i < n { y[group_weight(g, i)] } else { 0 };
                let pair = |p: usize| {
                    let (a, b) = (yv(2 * p) as u8, yv(2 * p + 1) as u8);
                    _mm512_set1_epi16(i16::from_le_bytes([a, b]))
                };
                let (y01, y23, y45) = (pair(0), pair(1), pair(2));
                let s: i32 = (0..n).map(|i| i32::from(yv(i))).sum();
                let sv = _mm512_set1_epi16(s as i16);
                let dp = DIGITS[f].as_ptr();
                let mut e = [_mm512_setzero_si512(); 4];
                for (j, e) in e.iter_mut().enumerate() {
                    // SAFETY: DIGITS[f][p] holds 128 entries of 2 bytes: 32 entries from 32 j.
                    let ld = |p: usize| _mm512_loadu_si512((*dp.add(p)).as_ptr().add(32 * j).cast());
                    let mut v = _mm512_maddubs_epi16(ld(0), y01);
                    v = _mm512_add_epi16(v, _mm512_maddubs_epi16(ld(1), y23));
                    if n == 5 {
                        v = _mm512_add_epi16(v, _mm512_maddubs_epi16(ld(2), y45));
                    }
                    *e = _mm512_sub_epi16(v, sv);
                }
                for h in 0..2 {
                    let (a, b) = (e[2 * h], e[2 * h + 1]);
                    let lo = _mm512_packus_epi16(_mm512_and_si512(a, m00ff), _mm512_and_si512(b, m00ff));
                    let hi = _mm512_packus_epi16(_mm512_srli_epi16::<8>(a), _mm512_srli_epi16::<8>(b));
                    let lo = _mm512_permutexvar_epi64(fix, lo);
                    let hi = _mm512_permutexvar_epi64(fix, hi);
                    _mm512_storeu_si512(out.t[g][0].as_mut_ptr().add(64 * h).cast(), lo);
                    _mm512_storeu_si512(out.t[g][1].as_mut_ptr().add(64 * h).cast(), hi);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_the_group_dots() {
        let y: Vec<i8> = (0..128).map(|i| ((i * 37 + 11) % 255) as i8).collect();
        let mut t = LutHalf::default();
        build_scalar(&y, 0.5, &mut t);
        // group 3, the weights +1, 0, -1, +1, -1 (trits 2, 1, 0, 2, 0: u = 2 + 1 * 3 + 2 * 27)
        let u = 2 + 3 + 54;
        let c = u - 121i32;
        let want = -i32::from(y[group_weight(3, 4)]) + i32::from(y[group_weight(3, 0)])
            - i32::from(y[group_weight(3, 2)])
            + i32::from(y[group_weight(3, 3)]);
        assert!(c < 0);
        // the negative index's positive twin: weights -1, 0, +1, -1, +1
        assert_eq!(i32::from(t.entry(3, (-c) as usize)), -want);
    }

    #[test]
    fn fast_build_matches() {
        for seed in 0..20u32 {
            let y: Vec<i8> = (0..128u32)
                .map(|i| match seed {
                    0 => 127,
                    1 => -128,
                    2 => -127,
                    _ => (i.wrapping_mul(2654435761).wrapping_add(seed * 977) >> 13) as i8,
                })
                .collect();
            let (mut a, mut b) = (LutHalf::default(), LutHalf::default());
            build_scalar(&y, 1.0, &mut a);
            build(&y, 1.0, &mut b);
            assert_eq!(a.t, b.t, "seed {seed}");
            // the AVX-512 builder itself, where the CPU has it (build() may have taken the scalar one)
            #[cfg(target_arch = "x86_64")]
            if crate::kernels::features::CpuFeatures::detect().avx512vnni {
                let mut c = LutHalf::default();
                // SAFETY: AVX-512 F/BW (avx512vnni's features) checked; 128 values.
                unsafe { x86::build_avx512(&y, 1.0, &mut c) };
                assert_eq!(a.t, c.t, "seed {seed} (AVX-512)");
            }
        }
    }
}
