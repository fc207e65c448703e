//! PQ2_0: 128 ternary weights in 34 bytes (docs/formats.md §1; ggml type 142).

use core::mem::{offset_of, size_of};
use half::f16;

/// One PQ2_0 block: an fp16 scale `d`, then 128 2-bit codes.
///
/// Weight `j` (0..128) is the code at bits `2*(j%4)` of `qs[j/4]`, low bits first; its value is
/// `(code - 1) * d`, so codes 0, 1, 2, 3 mean -1, 0, +1, +2. The fork's quantizer emits only
/// codes 0..2, but code 3 is legal in the container and every path here computes it exactly.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct BlockPq2_0 {
    /// Scale (fp16).
    pub d: f16,
    /// Four 2-bit codes per byte, weight `4*i + s` in bits `2s..2s+1` of `qs[i]`.
    pub qs: [u8; 32],
}

const _: () = assert!(size_of::<BlockPq2_0>() == 34);
const _: () = assert!(offset_of!(BlockPq2_0, d) == 0);
const _: () = assert!(offset_of!(BlockPq2_0, qs) == 2);

impl BlockPq2_0 {
    /// The 2-bit code (0..=3) of weight `j` (0..128).
    ///
    /// # Panics
    /// If `j >= 128`.
    #[inline]
    pub fn code(&self, j: usize) -> u8 {
        (self.qs[j / 4] >> (2 * (j % 4))) & 3
    }

    /// Sets the 2-bit code of weight `j` (0..128) to `code & 3`.
    ///
    /// # Panics
    /// If `j >= 128`.
    #[inline]
    pub fn set_code(&mut self, j: usize, code: u8) {
        let shift = 2 * (j % 4);
        let byte = &mut self.qs[j / 4];
        *byte = (*byte & !(3 << shift)) | ((code & 3) << shift);
    }

    /// All 128 codes in weight order.
    pub fn codes(&self) -> [u8; 128] {
        core::array::from_fn(|j| self.code(j))
    }

    /// Builds a block from a scale and 128 codes (each taken `& 3`).
    pub fn from_codes(d: f16, codes: &[u8; 128]) -> Self {
        let qs = core::array::from_fn(|i| {
            let c = &codes[4 * i..4 * i + 4];
            (c[0] & 3) | (c[1] & 3) << 2 | (c[2] & 3) << 4 | (c[3] & 3) << 6
        });
        BlockPq2_0 { d, qs }
    }
}
