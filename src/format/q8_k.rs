//! Q8_K: ggml's activation block, 256 int8 values with one f32 scale and 16 partial sums
//! (docs/formats.md §3; ggml type 15).

use core::mem::{offset_of, size_of};

/// One Q8_K block: value `j` is `qs[j] * d`; `bsums[i] = sum(qs[16i .. 16i+16])`.
///
/// The reference quantizer leaves `bsums` unwritten when a block is all zero (`d = +0`, `qs = 0`),
/// so `bsums` is only meaningful when `d != 0`. Every kernel here returns the reference bits for
/// such blocks whatever their `bsums` hold, because their products carry a factor `d = 0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BlockQ8K {
    /// Scale (f32).
    pub d: f32,
    /// Quantized values.
    pub qs: [i8; 256],
    /// Sums of each run of 16 `qs`.
    pub bsums: [i16; 16],
}

const _: () = assert!(size_of::<BlockQ8K>() == 292);
const _: () = assert!(offset_of!(BlockQ8K, d) == 0);
const _: () = assert!(offset_of!(BlockQ8K, qs) == 4);
const _: () = assert!(offset_of!(BlockQ8K, bsums) == 260);

impl Default for BlockQ8K {
    fn default() -> Self {
        BlockQ8K { d: 0.0, qs: [0; 256], bsums: [0; 16] }
    }
}

impl BlockQ8K {
    /// Sum of the 128 values of half `h` (0 or 1) of this block, from `bsums`.
    ///
    /// Only meaningful when `d != 0` (see the type's docs).
    #[inline]
    pub fn half_sum(&self, h: usize) -> i32 {
        self.bsums[8 * h..8 * h + 8].iter().map(|&b| i32::from(b)).sum()
    }

    /// Recomputes `bsums` from `qs`.
    pub fn fill_bsums(&mut self) {
        for (i, b) in self.bsums.iter_mut().enumerate() {
            *b = self.qs[16 * i..16 * i + 16].iter().map(|&q| i16::from(q)).sum();
        }
    }
}
