//! X16: sixteen PQ2_0 rows of one 128-weight block in 544 bytes, laid out for x86's `vpdpbusd`
//! (AVX-VNNI, AVX-512 VNNI) and `vpmaddubsw` (AVX2): every 32-bit lane of a 64-byte word belongs
//! to ONE row, so lane `r` of every product accumulates row `r` and no cross-lane reduction is
//! ever needed (docs/formats.md §7).

use super::{BlockPq2_0, BlockPtq1_0};
use core::mem::{offset_of, size_of};
use half::f16;

/// Rows per X16 block (one 32-bit lane of a 64-byte word each).
pub const X16_ROWS: usize = 16;

/// One X16 block: the sixteen rows' fp16 scales, then eight 64-byte words of codes.
///
/// Word `w` (0..8) covers weights `16w .. 16w+16` of every row. Bytes `4r .. 4r+4` of a word are
/// row `r`'s lane; bits `2s..2s+1` (slot `s` = 0..4) of lane byte `b` hold the PQ2_0 code of row
/// `r`, weight `16w + 4s + b`. So slot `s` of a word is, per lane, the four consecutive codes of
/// one 4-weight group `4w + s`, in byte order: masked with `0x03 << 2s` it is an unsigned `vpdpbusd`
/// operand (scaled by `4^s`) against the group's four int8 activations broadcast to every lane.
///
/// A repacked `n_rows x k` matrix stores these blocks row-tile major: all `k/128` blocks of rows
/// 0..16, then rows 16..32, and so on. `n_rows` need only be a multiple of 4: the last tile is
/// padded with zero rows (scale +0, every code 1 = weight 0), which no kernel ever stores. The
/// matrix has the PQ2_0 size when `n_rows % 16 == 0` (2.125 bits per weight).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockX16 {
    /// Scales of rows 0..16 (fp16), in row order.
    pub d: [f16; 16],
    /// `qs[word][4 * row + byte]`, see the type docs.
    pub qs: [[u8; 64]; 8],
}

const _: () = assert!(size_of::<BlockX16>() == 544);
const _: () = assert!(size_of::<BlockX16>() == X16_ROWS * size_of::<BlockPq2_0>());
const _: () = assert!(offset_of!(BlockX16, d) == 0);
const _: () = assert!(offset_of!(BlockX16, qs) == 32);

impl Default for BlockX16 {
    fn default() -> Self {
        BlockX16 { d: [f16::ZERO; 16], qs: [[0; 64]; 8] }
    }
}

/// Where an X16 code lives: (word, byte within the word, slot) of row `r` (0..16), weight `j`
/// (0..128).
#[inline]
pub const fn x16_position(r: usize, j: usize) -> (usize, usize, usize) {
    (j / 16, 4 * r + j % 4, (j % 16) / 4)
}

/// Transposes the 4x4 matrix of 2-bit fields of `x` whose field `(i, k)` sits at bit `8i + 2k`
/// (an involution). PQ2_0 bytes `4w .. 4w+4` of a row, read as one little-endian `u32`, have field
/// `(s, b)` = weight `16w + 4s + b`; the X16 lane holds field `(b, s)` = the same weight.
#[inline]
pub const fn transpose_2bit_4x4(x: u32) -> u32 {
    // swap the off-diagonal fields of each 2x2 sub-matrix (distance 6 bits) ...
    let t = (x ^ (x >> 6)) & 0x00CC_00CC;
    let x = x ^ t ^ (t << 6);
    // ... then the off-diagonal 2x2 sub-matrices (distance 12 bits)
    let t = (x ^ (x >> 12)) & 0x0000_F0F0;
    x ^ t ^ (t << 12)
}

/// The PQ2_0 block of a padding row: scale +0, every code 1 (weight 0).
pub const ZERO_ROW: BlockPq2_0 = BlockPq2_0 { d: f16::ZERO, qs: [0x55; 32] };

impl BlockX16 {
    /// The 2-bit code of row `r` (0..16), weight `j` (0..128).
    ///
    /// # Panics
    /// If `r >= 16` or `j >= 128`.
    #[inline]
    pub fn code(&self, r: usize, j: usize) -> u8 {
        let (w, b, s) = x16_position(r, j);
        (self.qs[w][b] >> (2 * s)) & 3
    }

    /// Packs sixteen PQ2_0 blocks (rows 0..16 of one 128-weight block): each row's 32 code bytes
    /// become its eight lanes, one 2-bit transpose ([`transpose_2bit_4x4`]) per lane.
    pub fn from_rows(rows: [&BlockPq2_0; X16_ROWS]) -> Self {
        let mut out = BlockX16::default();
        out.set_rows(rows);
        out
    }

    /// [`BlockX16::from_rows`] written into `self` (every byte overwritten).
    #[inline]
    pub fn set_rows(&mut self, rows: [&BlockPq2_0; X16_ROWS]) {
        for (r, src) in rows.iter().enumerate() {
            self.d[r] = src.d;
            for w in 0..8 {
                let x = u32::from_le_bytes([src.qs[4 * w], src.qs[4 * w + 1], src.qs[4 * w + 2], src.qs[4 * w + 3]]);
                self.qs[w][4 * r..4 * r + 4].copy_from_slice(&transpose_2bit_4x4(x).to_le_bytes());
            }
        }
    }

    /// Packs sixteen PTQ1_0 blocks (rows 0..16 of one 128-weight block): the same block as
    /// [`BlockX16::from_rows`] of their PQ2_0 forms (a digit is the code of the same weight, the
    /// scale the same fp16), each row's lanes built directly ([`BlockPtq1_0::x16_lanes`]).
    pub fn from_ptq1_0_rows(rows: [&BlockPtq1_0; X16_ROWS]) -> Self {
        let mut out = BlockX16::default();
        out.set_ptq1_0_rows(rows);
        out
    }

    /// [`BlockX16::from_ptq1_0_rows`] written into `self` (every byte overwritten).
    #[inline]
    pub fn set_ptq1_0_rows(&mut self, rows: [&BlockPtq1_0; X16_ROWS]) {
        for (r, src) in rows.iter().enumerate() {
            self.d[r] = src.d;
            for (w, lane) in src.x16_lanes().iter().enumerate() {
                self.qs[w][4 * r..4 * r + 4].copy_from_slice(&lane.to_le_bytes());
            }
        }
    }

    /// The exact inverse of [`BlockX16::from_rows`]: row `r`'s PQ2_0 block.
    ///
    /// # Panics
    /// If `r >= 16`.
    pub fn row(&self, r: usize) -> BlockPq2_0 {
        let mut b = BlockPq2_0 { d: self.d[r], qs: [0; 32] };
        for w in 0..8 {
            let lane = &self.qs[w][4 * r..4 * r + 4];
            let x = transpose_2bit_4x4(u32::from_le_bytes([lane[0], lane[1], lane[2], lane[3]]));
            b.qs[4 * w..4 * w + 4].copy_from_slice(&x.to_le_bytes());
        }
        b
    }

    /// Scale of row `r` as f32 (exact).
    #[inline]
    pub fn d_f32(&self, r: usize) -> f32 {
        f16::to_f32(self.d[r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transpose_moves_every_field() {
        for i in 0..4 {
            for k in 0..4 {
                for v in 1..4u32 {
                    let x = v << (8 * i + 2 * k);
                    assert_eq!(transpose_2bit_4x4(x), v << (8 * k + 2 * i), "field ({i}, {k})");
                }
            }
        }
    }
}
