//! T2P: four PQ2_0 rows of one 128-column block in 136 bytes, reordered so a slot of a 16-byte
//! word is a `sdot`/`smmla` operand after one `and` (docs/formats.md §5).

use super::BlockPq2_0;
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
