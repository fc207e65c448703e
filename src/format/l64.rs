//! L64: sixty-four ternary rows of one 128-weight block in 1792 bytes (64 x 28, the PTQ1_0 size:
//! 1.75 bits per weight), for x86's table-lookup gemv (`vpermi2b`, AVX-512 VBMI) and a cheap
//! expansion to X16 for the gemm (docs/formats.md §9).
//!
//! A row's 128 weights fall into 26 groups: groups 0..24 of five weights, groups 24 and 25 of
//! four ([`group_trits`], [`group_weight`]). A group's weights are the trits of one byte: with
//! `u = sum_i 3^i digit_i` (digit = code = weight + 1, `0..=2`) and `half = (3^n - 1) / 2` (121
//! for five trits, 40 for four), the byte is `u - half` when `u >= half`, else
//! `0x80 | (half - u)`: bits 0..6 are the index of the group's weights up to sign (the all-zero
//! group is index 0), bit 7 the sign. So a 128-entry table of the activations' partial sums,
//! looked up with the byte's low seven bits and negated where bit 7 is set, gives the group's
//! dot product (the gemv: `vpermi2b` ignores bit 7).
//!
//! Which weights: group `g`'s trits 0..4 are the four weights of X16 byte `g` (word `g / 4`,
//! lane byte `g % 4`, slot `i`: weight `16 (g / 4) + g % 4 + 4 i`), and its trit 4 (groups 0..24)
//! is slot `g % 4` of X16 byte `26 + g / 4`. So each byte's trits 0..4 decode (one 128-entry table
//! of 2-bit codes) to an X16 lane byte, and four groups' trit 4 make one more.
//!
//! Rows: byte `p` of a 64-byte group vector ("position" `p = 16 L + 4 m + i`) holds row
//! `16 m + 4 L + i` ([`position_row`], an involution), so that two rounds of byte and word
//! interleaves of four decoded vectors give the X16 words of the four 16-row tiles directly. The
//! 64 fp16 scales are stored in the order in which the gemv's sums come out
//! ([`scale_position`]).
//!
//! A repacked `n_rows x k` matrix stores these blocks row-tile major (all `k/128` blocks of rows
//! 0..64, then rows 64..128, ...); `n_rows` need only be a multiple of 4: the last tile is padded
//! with zero rows (scale +0, every weight 0), which no kernel stores.

use super::{ptq1_0_element_source, BlockPq2_0, BlockPtq1_0, TRITS};
use core::mem::{offset_of, size_of};
use half::f16;

/// Rows per L64 block.
pub const L64_ROWS: usize = 64;
/// Groups (bytes) per row and 128-weight block.
pub const L64_GROUPS: usize = 26;

/// One L64 block: the 64 rows' fp16 scales (in [`scale_position`] order), then one 64-byte
/// vector per group (byte `p` = the row at position `p`, [`position_row`]).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockL64 {
    /// Scales: `d[e]` is the scale of row `position_row(scale_position(e))`.
    pub d: [f16; L64_ROWS],
    /// `q[g][p]`: group `g`'s byte of the row at position `p`.
    pub q: [[u8; L64_ROWS]; L64_GROUPS],
}

const _: () = assert!(size_of::<BlockL64>() == 1792);
const _: () = assert!(size_of::<BlockL64>() == L64_ROWS * 28);
const _: () = assert!(offset_of!(BlockL64, q) == 128);

impl Default for BlockL64 {
    fn default() -> Self {
        BlockL64 { d: [f16::ZERO; L64_ROWS], q: [[0; L64_ROWS]; L64_GROUPS] }
    }
}

/// Trits of group `g` (0..26): 5, or 4 for groups 24 and 25.
#[inline]
pub const fn group_trits(g: usize) -> usize {
    if g < 24 {
        5
    } else {
        4
    }
}

/// `(3^n - 1) / 2` for a group of `n` trits: the index of the all-zero group.
#[inline]
pub const fn group_half(g: usize) -> u32 {
    trits_half(group_trits(g))
}

/// `(3^n - 1) / 2`: the all-zero group's index of an `n`-trit group (121 for five, 40 for four).
#[inline]
const fn trits_half(n: usize) -> u32 {
    (3u32.pow(n as u32) - 1) / 2
}

/// The digits (trit `i` at `[i]`, 0..=2) that index `c` (0..128, the byte's low seven bits) stands
/// for in a group of `n` trits, before the sign: those of `c + half` up to `half`, all 0 past it
/// (no encoding writes such an index); trits `n..5` are 1 (weight 0). The one rule behind
/// [`decode_group`], the activation tables' entries and the kernels' code tables.
#[inline]
pub const fn index_digits(n: usize, c: u32) -> [u8; 5] {
    let half = trits_half(n);
    let mut t = [1u8; 5];
    let mut u = c + half;
    let mut i = 0;
    while i < n {
        t[i] = if c > half { 0 } else { (u % 3) as u8 };
        u /= 3;
        i += 1;
    }
    t
}

/// Group `g`'s byte for `u = sum_i 3^i digit_i`: `u - half` if `u >= half`, else
/// `0x80 | (half - u)`.
#[inline]
const fn group_byte(g: usize, u: u32) -> u8 {
    let half = group_half(g);
    if u >= half {
        (u - half) as u8
    } else {
        0x80 | (half - u) as u8
    }
}

/// The weight (0..128) of trit `i` of group `g` (see the module docs).
#[inline]
pub const fn group_weight(g: usize, i: usize) -> usize {
    let (xb, s) = if i < 4 { (g, i) } else { (26 + g / 4, g % 4) };
    16 * (xb / 4) + xb % 4 + 4 * s
}

/// The row (0..64) whose byte sits at position `p` (0..64) of a group vector: `p = 16 L + 4 m + i`
/// holds row `16 m + 4 L + i` (an involution, so also the position of row `p`).
#[inline]
pub const fn position_row(p: usize) -> usize {
    16 * ((p / 4) % 4) + 4 * (p / 16) + p % 4
}

/// The position whose sum is element `e` (0..64) of the gemv's four sum vectors: the int16 sums of
/// a byte and word interleave of the looked-up low and high bytes, widened half by half.
#[inline]
pub const fn scale_position(e: usize) -> usize {
    let (v, j) = (e / 16, e % 16);
    16 * (2 * (v & 1) + j / 8) + 8 * (v >> 1) + j % 8
}

/// A group's byte from its digits (`digits[i]` = trit `i`, each 0..=2).
#[inline]
pub fn encode_group(g: usize, digits: &[u8]) -> u8 {
    let mut u = 0u32;
    let mut p = 1;
    for &t in &digits[..group_trits(g)] {
        u += p * u32::from(t);
        p *= 3;
    }
    group_byte(g, u)
}

/// A group's digits (trit `i` at `[i]`, 0..=2; unused trits 1) from its byte. Every byte decodes,
/// as every kernel reads it: index `c = byte & 0x7f` up to `half` gives the digits of
/// `c + half`, an index past `half` (no encoding writes one) all digits 0; bit 7 then turns each
/// digit `t` into `2 - t` (so `0x80` is the zero group, as `0x00`).
#[inline]
pub fn decode_group(g: usize, byte: u8) -> [u8; 5] {
    let n = group_trits(g);
    let mut out = index_digits(n, u32::from(byte & 0x7f));
    if byte & 0x80 != 0 {
        for t in out.iter_mut().take(n) {
            *t = 2 - *t;
        }
    }
    out
}

impl BlockL64 {
    /// Writes row `r` (0..64): its 128 codes (`0..=2`, the weight plus one) and scale.
    ///
    /// # Panics
    /// If `r >= 64`.
    pub fn set_row(&mut self, r: usize, d: f16, codes: &[u8; 128]) {
        let p = position_row(r);
        for g in 0..L64_GROUPS {
            let mut t = [1u8; 5];
            for (i, t) in t.iter_mut().enumerate().take(group_trits(g)) {
                *t = codes[group_weight(g, i)];
            }
            self.q[g][p] = encode_group(g, &t);
        }
        self.d[SCALE_OF_ROW[r]] = d;
    }

    /// Writes row `r` (0..64) from its PTQ1_0 block: [`BlockL64::set_row`] of its digits and
    /// scale, each group's trits read straight from the source bytes' digits (no 128-digit array).
    ///
    /// # Panics
    /// If `r >= 64`.
    pub fn set_ptq1_0_row(&mut self, r: usize, b: &BlockPtq1_0) {
        let p = position_row(r);
        let bytes: [u8; 26] = core::array::from_fn(|i| if i < 24 { b.qs[i] } else { b.qh[i - 24] });
        // trit i of group g: digit SOURCE[g][i].1 of source byte SOURCE[g][i].0 (five trits up to
        // group 23, four after: two loops of fixed length, which the compiler unrolls)
        let digit = |g: usize, i: usize| {
            let (byte, n) = SOURCE[g][i];
            u32::from(TRITS[usize::from(bytes[usize::from(byte)])][usize::from(n)])
        };
        for g in 0..24 {
            self.q[g][p] = group_byte(g, (0..5).map(|i| POW3[i] * digit(g, i)).sum());
        }
        for g in 24..L64_GROUPS {
            self.q[g][p] = group_byte(g, (0..4).map(|i| POW3[i] * digit(g, i)).sum());
        }
        self.d[SCALE_OF_ROW[r]] = b.d;
    }

    /// Row `r`'s codes (0..=2, through [`decode_group`]).
    ///
    /// # Panics
    /// If `r >= 64`.
    pub fn row_codes(&self, r: usize) -> [u8; 128] {
        let p = position_row(r);
        let mut out = [1u8; 128];
        for g in 0..L64_GROUPS {
            let t = decode_group(g, self.q[g][p]);
            for (i, &t) in t.iter().enumerate().take(group_trits(g)) {
                out[group_weight(g, i)] = t;
            }
        }
        out
    }

    /// Row `r`'s scale.
    ///
    /// # Panics
    /// If `r >= 64`.
    pub fn row_d(&self, r: usize) -> f16 {
        self.d[SCALE_OF_ROW[r]]
    }

    /// Row `r` as a PQ2_0 block (codes as [`BlockL64::row_codes`]).
    ///
    /// # Panics
    /// If `r >= 64`.
    pub fn row(&self, r: usize) -> BlockPq2_0 {
        BlockPq2_0::from_codes(self.row_d(r), &self.row_codes(r))
    }
}

/// `3^i`.
const POW3: [u32; 5] = [1, 3, 9, 27, 81];

/// `SOURCE[g][i]`: the PTQ1_0 (byte over `qs` then `qh`, digit) of trit `i` of group `g`
/// ([`group_weight`] through [`ptq1_0_element_source`]); `(0, 0)` past the group's trits.
const SOURCE: [[(u8, u8); 5]; L64_GROUPS] = {
    let mut t = [[(0u8, 0u8); 5]; L64_GROUPS];
    let mut g = 0;
    while g < L64_GROUPS {
        let mut i = 0;
        while i < group_trits(g) {
            let (byte, digit) = ptq1_0_element_source(group_weight(g, i));
            t[g][i] = (byte as u8, digit as u8);
            i += 1;
        }
        g += 1;
    }
    t
};

/// `SCALE_OF_ROW[r]`: the index into [`BlockL64::d`] of row `r`'s scale.
pub const SCALE_OF_ROW: [usize; L64_ROWS] = {
    let mut t = [0usize; L64_ROWS];
    let mut e = 0;
    while e < L64_ROWS {
        t[position_row(scale_position(e))] = e;
        e += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_cover_every_weight_once() {
        let mut seen = [0u8; 128];
        for g in 0..L64_GROUPS {
            for i in 0..group_trits(g) {
                seen[group_weight(g, i)] += 1;
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "{seen:?}");
    }

    #[test]
    fn positions_and_scales_are_permutations() {
        let mut rows = [false; 64];
        let mut pos = [false; 64];
        for p in 0..64 {
            assert_eq!(position_row(position_row(p)), p);
            rows[position_row(p)] = true;
            pos[scale_position(p)] = true;
        }
        assert!(rows.iter().all(|&x| x) && pos.iter().all(|&x| x));
    }

    #[test]
    fn every_group_value_round_trips() {
        for g in [0, 23, 24, 25] {
            let n = group_trits(g);
            for u in 0..3u32.pow(n as u32) {
                let mut t = [1u8; 5];
                let mut v = u;
                for x in t.iter_mut().take(n) {
                    *x = (v % 3) as u8;
                    v /= 3;
                }
                let b = encode_group(g, &t);
                assert!(u32::from(b & 0x7f) <= group_half(g));
                assert_eq!(decode_group(g, b), t, "group {g} value {u}");
            }
        }
        // bytes no encoding writes
        assert_eq!(decode_group(0, 122), [0; 5]);
        assert_eq!(decode_group(0, 0xff), [2; 5]);
        assert_eq!(decode_group(0, 0x80), [1; 5]);
        assert_eq!(decode_group(24, 41), [0, 0, 0, 0, 1]);
    }

    #[test]
    fn ptq1_0_rows_as_their_digits() {
        let mut s = 0x1234_5678u32;
        let (mut a, mut b) = (BlockL64::default(), BlockL64::default());
        for r in 0..64 {
            let mut blk = BlockPtq1_0 { d: f16::from_f32(r as f32 + 0.5), ..Default::default() };
            for q in blk.qs.iter_mut().chain(blk.qh.iter_mut()) {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12345);
                *q = (s >> 16) as u8; // any byte, the quantizer's or not
            }
            a.set_ptq1_0_row(r, &blk);
            b.set_row(r, blk.d, &blk.digits());
        }
        assert_eq!(a.q, b.q);
        assert_eq!(a.d.map(f16::to_bits), b.d.map(f16::to_bits));
    }

    #[test]
    fn rows_round_trip() {
        let mut b = BlockL64::default();
        for r in 0..64 {
            let mut c = [0u8; 128];
            for (j, c) in c.iter_mut().enumerate() {
                *c = ((r * 7 + j * 13 + j / 5) % 3) as u8;
            }
            b.set_row(r, f16::from_f32(r as f32), &c);
        }
        for r in 0..64 {
            let c = b.row_codes(r);
            for (j, &c) in c.iter().enumerate() {
                assert_eq!(c, ((r * 7 + j * 13 + j / 5) % 3) as u8);
            }
            assert_eq!(b.row_d(r).to_f32(), r as f32);
        }
    }
}
