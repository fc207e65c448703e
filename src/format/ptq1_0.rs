//! PTQ1_0: 128 ternary weights in 28 bytes, five base-3 digits (trits) per byte
//! (docs/formats.md §2; ggml type 143 in PrismML's newer fork), and PTQ1_0x4, our load-time
//! rearrangement of four rows' blocks that keeps every byte (1.75 bits per weight).

use core::mem::{offset_of, size_of};
use half::f16;

/// Digit `n` (0..=4) of a PTQ1_0 byte `q`: `((uint8)(q * 3^n) * 3) >> 8`, a value 0..=2.
///
/// Equivalently, for `v = q * 3^n mod 256`, the digit is `(v >= 86) + (v >= 171)` (the form the
/// NEON kernels use). Source: docs/formats.md §2, checked against the fork's `dequantize_row_ptq1_0` by the
/// golden vectors.
#[inline]
pub const fn ptq1_0_digit(q: u8, n: u32) -> u8 {
    let v = q.wrapping_mul(3u8.pow(n));
    ((v as u16 * 3) >> 8) as u8
}

/// `TRITS[q][n]` = [`ptq1_0_digit`]`(q, n)` for every byte and digit 0..5.
pub static TRITS: [[u8; 5]; 256] = {
    let mut t = [[0u8; 5]; 256];
    let mut q = 0;
    while q < 256 {
        let mut n = 0;
        while n < 5 {
            t[q][n] = ptq1_0_digit(q as u8, n as u32);
            n += 1;
        }
        q += 1;
    }
    t
};

/// `TRIT_BYTES[q]`: [`TRITS`]`[q]` as one `u64`, digit `n` in byte `n` (bytes 5..8 zero).
/// Shifting entries by `2s` and OR-ing four of them packs four digits into each byte, as 2-bit
/// codes: the load-time repacks ([`BlockPtq1_0::pq2_0_qs`], [`BlockPtq1_0::x16_lanes`]) build
/// eight or more code bytes per lookup this way.
pub static TRIT_BYTES: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut q = 0;
    while q < 256 {
        let d = TRITS[q];
        t[q] = u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], 0, 0, 0]);
        q += 1;
    }
    t
};

/// The five base-3 digits of eight bytes at once: byte `e` of `out[n]` is [`ptq1_0_digit`]`(byte
/// e of x, n)`.
///
/// Each byte works in a 16-bit lane (even bytes, then odd): with `v` = `q * 3^n mod 256`,
/// `w = 3v` (at most 765, so the lane never carries) has the digit in its high byte and
/// `v * 3 mod 256`, the next digit's `v`, in its low byte. Shifts, adds and masks only, so four
/// rows vectorise on any SIMD (NEON has no 64-bit lane multiply; none is used).
#[inline]
pub fn digits_swar(x: u64) -> [u64; 5] {
    const M: u64 = 0x00FF_00FF_00FF_00FF;
    let (mut ve, mut vo) = (x & M, (x >> 8) & M);
    let mut out = [0u64; 5];
    for d in &mut out {
        let (we, wo) = (ve + (ve << 1), vo + (vo << 1));
        *d = ((we >> 8) & M) | (wo & !M);
        (ve, vo) = (we & M, wo & M);
    }
    out
}

/// One PTQ1_0 block: `qs[24]`, `qh[2]`, then the fp16 scale `d` last.
///
/// Weight `e` (0..128) is `(digit - 1) * d`, the digit taken as follows (docs/formats.md §2):
/// - `e < 80`: digit `e / 16` of `qs[e % 16]`;
/// - `80 <= e < 120`: digit `(e - 80) / 8` of `qs[16 + (e - 80) % 8]`;
/// - `120 <= e`: digit `(e - 120) / 2` of `qh[(e - 120) % 2]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockPtq1_0 {
    /// Five digits per byte (elements 0..120).
    pub qs: [u8; 24],
    /// Four digits per byte (elements 120..128).
    pub qh: [u8; 2],
    /// Scale (fp16), stored last.
    pub d: f16,
}

const _: () = assert!(size_of::<BlockPtq1_0>() == 28);
const _: () = assert!(offset_of!(BlockPtq1_0, qs) == 0);
const _: () = assert!(offset_of!(BlockPtq1_0, qh) == 24);
const _: () = assert!(offset_of!(BlockPtq1_0, d) == 26);

/// Where element `e` of a PTQ1_0 block lives: (byte index 0..26 over `qs` then `qh`, digit).
#[inline]
pub const fn ptq1_0_element_source(e: usize) -> (usize, u32) {
    if e < 80 {
        (e % 16, (e / 16) as u32)
    } else if e < 120 {
        (16 + (e - 80) % 8, ((e - 80) / 8) as u32)
    } else {
        (24 + (e - 120) % 2, ((e - 120) / 2) as u32)
    }
}

impl BlockPtq1_0 {
    /// Byte `i` of `qs` followed by `qh` (i < 26).
    #[inline]
    fn byte(&self, i: usize) -> u8 {
        if i < 24 {
            self.qs[i]
        } else {
            self.qh[i - 24]
        }
    }

    /// The digit (0..=2) of element `e` (0..128); the weight is `(digit - 1) * d`.
    ///
    /// # Panics
    /// If `e >= 128`.
    #[inline]
    pub fn digit(&self, e: usize) -> u8 {
        assert!(e < 128);
        let (i, n) = ptq1_0_element_source(e);
        ptq1_0_digit(self.byte(i), n)
    }

    /// The 32 PQ2_0 code bytes of this block's 128 weights (a digit is the PQ2_0 code of the same
    /// weight; weight `j` at bits `2 * (j % 4)` of byte `j / 4`): `BlockPq2_0::from_codes(d,
    /// &self.digits()).qs`, built 8 and 16 bytes at a time through [`TRIT_BYTES`].
    ///
    /// Byte `m` of `qs[0..16]` holds weights `16n + m` (digit `n`), so the four bytes `4g..4g+4`
    /// give code byte `4n + g` for each `n`; byte `m` of `qs[16..24]` holds weights `80 + 8n + m`,
    /// so bytes `16 + 4g..+4` give code byte `20 + 2n + g`; `qh[h]` holds weights `120 + 2n + h`
    /// (code bytes 30 and 31).
    #[inline]
    pub fn pq2_0_qs(&self) -> [u8; 32] {
        let t = |q: u8| TRIT_BYTES[usize::from(q)];
        let quad = |b: &[u8]| t(b[0]) | t(b[1]) << 2 | t(b[2]) << 4 | t(b[3]) << 6;
        let mut out = [0u8; 32];
        for g in 0..4 {
            let acc = quad(&self.qs[4 * g..4 * g + 4]);
            for n in 0..5 {
                out[4 * n + g] = (acc >> (8 * n)) as u8;
            }
        }
        for g in 0..2 {
            let acc = quad(&self.qs[16 + 4 * g..20 + 4 * g]);
            for n in 0..5 {
                out[20 + 2 * n + g] = (acc >> (8 * n)) as u8;
            }
        }
        // byte n of u: digit n of qh[0] | digit n of qh[1] << 2; code byte 30 = digits 0 and 1,
        // 31 = digits 2 and 3 (u | u >> 4 puts byte n + 1 in the high half of byte n)
        let u = t(self.qh[0]) | t(self.qh[1]) << 2;
        let u = u | u >> 4;
        out[30] = u as u8;
        out[31] = (u >> 16) as u8;
        out
    }

    /// This block as the row's eight X16 lanes, one little-endian `u32` per word (`BlockX16` word
    /// `w`, bytes `4r..4r+4` for row `r`): lane byte `b`, bits `2s..2s+1` hold the code of weight
    /// `16w + 4s + b`. The same bytes as the X16 repack of [`BlockPtq1_0::pq2_0_qs`], built
    /// without the PQ2_0 step.
    ///
    /// Words 0..5 are digit `w` of `qs[0..16]` (byte `m` = weight `16w + m`); words 5, 6 and 7
    /// take digits 0-1, 2-3 and 4 of `qs[16..24]` (weights `80 + 8n + m`), word 7's high half the
    /// four digits of `qh` (weights `120 + 2n + h`).
    #[inline]
    pub fn x16_lanes(&self) -> [u32; 8] {
        let t = |q: u8| TRIT_BYTES[usize::from(q)];
        let q = &self.qs;
        // lo[b], byte n: lane byte b of word n (n < 5); hi[b], bytes 0, 2, 4: of words 5, 6, 7
        let lo: [u64; 4] = core::array::from_fn(|b| t(q[b]) | t(q[4 + b]) << 2 | t(q[8 + b]) << 4 | t(q[12 + b]) << 6);
        let hi: [u64; 4] = core::array::from_fn(|b| {
            // byte n: digit n of qs[16 + b] | of qs[20 + b] << 2; a | a >> 4 pairs digits 0-1,
            // 2-3 and 4 into bytes 0, 2 and 4
            let a = t(q[16 + b]) | t(q[20 + b]) << 2;
            a | a >> 4
        });
        let byte = |x: u64, n: usize| ((x >> (8 * n)) & 0xFF) as u32;
        let lane = |x: &[u64; 4], n: usize| (0..4).fold(0, |l, b| l | byte(x[b], n) << (8 * b));
        let mut l = [0u32; 8];
        for (n, w) in l[..5].iter_mut().enumerate() {
            *w = lane(&lo, n);
        }
        for (n, w) in l[5..].iter_mut().enumerate() {
            *w = lane(&hi, 2 * n);
        }
        // weight 120 + 2n + h is word 7's slot 2 + n / 2 of lane byte 2 * (n % 2) + h
        let (h0, h1) = (t(self.qh[0]), t(self.qh[1]));
        let pair = |d: u64, x: usize, y: usize| byte(d, x) << 4 | byte(d, y) << 6;
        l[7] |= pair(h0, 0, 2) | pair(h1, 0, 2) << 8 | pair(h0, 1, 3) << 16 | pair(h1, 1, 3) << 24;
        l
    }

    /// This block as the row's four T2P words (`BlockT2p::qs[pair][w][side..side + 8]` as a
    /// little-endian `u64` for `w` = 0..4): byte `e` of word `w`, bits `2s..2s+1`, holds the code of
    /// weight `8 * (4w + s) + e`. The same bytes as the T2P repack of [`BlockPtq1_0::pq2_0_qs`],
    /// built without the PQ2_0 step and without tables.
    ///
    /// Chunk `c` (weights `8c..8c+8`) of a word is one digit of eight consecutive source bytes,
    /// each in its own byte: chunks `2n` and `2n + 1` are digit `n` of `qs[0..8]` and `qs[8..16]`,
    /// chunk `10 + n` digit `n` of `qs[16..24]`, and byte `e` of chunk 15 digit `e / 2` of
    /// `qh[e % 2]`. [`digits_swar`] takes the digits of eight bytes at once.
    #[inline]
    pub fn t2p_words(&self) -> [u64; 4] {
        let ld = |i: usize| u64::from_le_bytes(self.qs[i..i + 8].try_into().expect("8 bytes"));
        let (a, b, c) = (digits_swar(ld(0)), digits_swar(ld(8)), digits_swar(ld(16)));
        let q15 = self.t2p_chunk15();
        let word = |s0: u64, s1: u64, s2: u64, s3: u64| s0 | s1 << 2 | s2 << 4 | s3 << 6;
        [
            word(a[0], b[0], a[1], b[1]),
            word(a[2], b[2], a[3], b[3]),
            word(a[4], b[4], c[0], c[1]),
            word(c[2], c[3], c[4], q15),
        ]
    }

    /// T2P chunk 15 of this row (weights 120..128): byte `e` is digit `e / 2` of `qh[e % 2]`
    /// (0..=2), as a little-endian `u64`. Every T2P route takes the `qh` digits this way.
    #[inline]
    pub fn t2p_chunk15(&self) -> u64 {
        // byte n of TRIT_BYTES[q] (n < 4) to byte 2n
        let spread = |q: u8| {
            let x = TRIT_BYTES[usize::from(q)] & 0xFFFF_FFFF;
            let x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
            (x | x << 8) & 0x00FF_00FF_00FF_00FF
        };
        spread(self.qh[0]) | spread(self.qh[1]) << 8
    }

    /// The block with scale `d` whose digits are `digits` (element order, each 0..=2; `None` if one
    /// is not), every byte in the encoding the fork's quantizer writes: `ceil(v * 256 / 243)` of
    /// the byte's base-3 value `v` (digit `n` the `3^(4 - n)` place; a `qh` byte's four digits in
    /// the places of digits 0..4, i.e. its base-3 value times 3). Source: docs/formats.md §2
    /// (NOTES.md, PTQ1_0); each byte decodes back to its digits through [`ptq1_0_digit`], and the
    /// fork's quantized blocks (the golden vectors) are reproduced byte for byte. A file may
    /// hold another byte with the same digits (256 bytes, 243 digit tuples): this gives the one
    /// the quantizer writes.
    pub fn from_digits(d: f16, digits: &[u8; 128]) -> Option<Self> {
        if digits.iter().any(|&t| t > 2) {
            return None;
        }
        let mut bytes = [0u8; 26];
        for (i, b) in bytes.iter_mut().enumerate() {
            let n_digits = if i < 24 { 5 } else { 4 };
            let mut v = 0u32;
            for n in 0..5 {
                // the element at digit n of byte i (the inverse of ptq1_0_element_source)
                let t = match i {
                    _ if n >= n_digits => 0,
                    0..16 => digits[16 * n + i],
                    16..24 => digits[80 + 8 * n + (i - 16)],
                    _ => digits[120 + 2 * n + (i - 24)],
                };
                v = 3 * v + u32::from(t);
            }
            *b = ((v * 256).div_ceil(243)) as u8;
        }
        let mut qs = [0u8; 24];
        qs.copy_from_slice(&bytes[..24]);
        Some(BlockPtq1_0 { qs, qh: [bytes[24], bytes[25]], d })
    }

    /// All 128 digits in element order (through [`TRITS`]; the same as [`BlockPtq1_0::digit`]
    /// for each element). A digit is also the PQ2_0 code of the same weight.
    pub fn digits(&self) -> [u8; 128] {
        let mut out = [0u8; 128];
        for (m, &q) in self.qs[..16].iter().enumerate() {
            for (n, &t) in TRITS[usize::from(q)].iter().enumerate() {
                out[16 * n + m] = t;
            }
        }
        for (m, &q) in self.qs[16..].iter().enumerate() {
            for (n, &t) in TRITS[usize::from(q)].iter().enumerate() {
                out[80 + 8 * n + m] = t;
            }
        }
        for (h, &q) in self.qh.iter().enumerate() {
            for (n, &t) in TRITS[usize::from(q)][..4].iter().enumerate() {
                out[120 + 2 * n + h] = t;
            }
        }
        out
    }
}

/// Four rows' PTQ1_0 blocks of one 128-column block, rearranged for `sdot`/`smmla` (112 bytes,
/// still 1.75 bits per weight).
///
/// Every source byte is kept; only the order changes so that each digit of a 16-byte vector is a
/// `[row a: 8 weights | row b: the same 8 weights]` operand, as in T2P (row pair `p` = rows
/// `2p`, `2p+1`):
/// - `lo[p][h]` = `[row 2p: qs[8h..8h+8] | row 2p+1: qs[8h..8h+8]]`; digit `n` of it holds
///   elements `16n + 8h .. +8`, i.e. 8-weight chunk `c = 2n + h` (c = 0..10);
/// - `hi[p]` = `[row 2p: qs[16..24] | row 2p+1: qs[16..24]]`; digit `n` holds elements
///   `80 + 8n .. +8`, chunk `c = 10 + n`;
/// - `qh[r]` = row `r`'s two `qh` bytes (elements 120..128, chunk 15), expanded in registers.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockPtq1_0x4 {
    /// Scales of rows 0..4 (fp16).
    pub d: [f16; 4],
    /// `lo[pair][half]`, see the type docs.
    pub lo: [[[u8; 16]; 2]; 2],
    /// `hi[pair]`, see the type docs.
    pub hi: [[u8; 16]; 2],
    /// `qh[row]`.
    pub qh: [[u8; 2]; 4],
}

const _: () = assert!(size_of::<BlockPtq1_0x4>() == 112);
const _: () = assert!(size_of::<BlockPtq1_0x4>() == 4 * size_of::<BlockPtq1_0>());
const _: () = assert!(offset_of!(BlockPtq1_0x4, d) == 0);
const _: () = assert!(offset_of!(BlockPtq1_0x4, lo) == 8);
const _: () = assert!(offset_of!(BlockPtq1_0x4, hi) == 72);
const _: () = assert!(offset_of!(BlockPtq1_0x4, qh) == 104);

impl BlockPtq1_0x4 {
    /// Interleaves four rows' blocks (rows 0..4 of one 128-column block).
    pub fn from_rows(rows: [&BlockPtq1_0; 4]) -> Self {
        let mut out = BlockPtq1_0x4::default();
        for (r, b) in rows.iter().enumerate() {
            let (p, side) = (r / 2, 8 * (r % 2));
            out.d[r] = b.d;
            for h in 0..2 {
                out.lo[p][h][side..side + 8].copy_from_slice(&b.qs[8 * h..8 * h + 8]);
            }
            out.hi[p][side..side + 8].copy_from_slice(&b.qs[16..24]);
            out.qh[r] = b.qh;
        }
        out
    }

    /// The exact inverse of [`BlockPtq1_0x4::from_rows`]: row `r`'s original block.
    ///
    /// # Panics
    /// If `r >= 4`.
    pub fn row(&self, r: usize) -> BlockPtq1_0 {
        let (p, side) = (r / 2, 8 * (r % 2));
        let mut b = BlockPtq1_0 { d: self.d[r], qh: self.qh[r], ..Default::default() };
        for h in 0..2 {
            b.qs[8 * h..8 * h + 8].copy_from_slice(&self.lo[p][h][side..side + 8]);
        }
        b.qs[16..24].copy_from_slice(&self.hi[p][side..side + 8]);
        b
    }
}

#[cfg(test)]
mod from_digits_tests {
    use super::*;

    /// `from_digits` inverts `digits` for every digit tuple of a byte (all 3^5 in every `qs` byte
    /// position and all 3^4 in every `qh` position), and rejects a digit above 2.
    #[test]
    fn from_digits_inverts_digits() {
        for i in 0..26usize {
            let n_digits = if i < 24 { 5 } else { 4 };
            for v in 0..3u32.pow(n_digits) {
                let mut digits = [1u8; 128];
                let mut x = v;
                for n in (0..n_digits as usize).rev() {
                    let e = (0..128).find(|&e| ptq1_0_element_source(e) == (i, n as u32)).unwrap();
                    digits[e] = (x % 3) as u8;
                    x /= 3;
                }
                let b = BlockPtq1_0::from_digits(f16::ONE, &digits).unwrap();
                assert_eq!(b.digits(), digits, "byte {i}, value {v}");
            }
        }
        let mut bad = [0u8; 128];
        bad[77] = 3;
        assert!(BlockPtq1_0::from_digits(f16::ONE, &bad).is_none());
    }
}
