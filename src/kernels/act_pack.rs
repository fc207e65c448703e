//! Activation packing done once per kernel call, in per-thread scratch that is reused.
//!
//! - [`ActDup`]: one column's 128-value half block with each 8-value chunk duplicated into a
//!   16-byte `sdot` operand `[y | y]`, plus the Q8_K scale and the negated sum of the 128 values
//!   (from `bsums`), for the gemv kernels: they load operands with plain `ldp` instead of 16
//!   `ld1r` (and their address arithmetic) per block, for every row group.
//! - [`ActBlockX4`] ("Q8_Kx4"): four columns interleaved in 8-byte chunks, the `smmla` right
//!   operand as is (and, with `ld4r`, the duplicated `sdot` operands), plus their scales and sums.
//!   Columns past `n_cols` are zero (scale 0, sum 0), so a batch that is not a multiple of the tile
//!   width runs as one padded pass whose extra outputs are dropped.
//!
//! A half whose Q8_K scale is 0 gets sum 0: the reference quantizer leaves such blocks' `bsums`
//! unwritten, and their contribution is `0 * anything` either way.

use crate::format::BlockQ8K;
use crate::reference::q8k_half;
use core::cell::RefCell;

/// Scale and value sum of one 128-value half of a Q8_K block.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ActHalf {
    /// The Q8_K block's `d`.
    pub d: f32,
    /// `sum(qs)` over the half (0 when `d == 0`).
    pub ysum: i32,
}

/// One column's 128-value half block prepared for `sdot`: chunk `c` (values `8c..8c+8`)
/// duplicated into both halves of `qs[c]`.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct ActDup {
    /// `qs[c] = [y(8c..8c+8) | y(8c..8c+8)]`.
    pub qs: [[i8; 16]; 16],
    /// The Q8_K block's `d`.
    pub d: f32,
    /// `-sum(y)` over the half (0 when `d == 0`).
    pub nysum: i32,
    _pad: [u32; 2],
}

const _: () = assert!(core::mem::size_of::<ActDup>() == 272);

impl Default for ActDup {
    fn default() -> Self {
        ActDup { qs: [[0; 16]; 16], d: 0.0, nysum: 0, _pad: [0; 2] }
    }
}

/// Four columns' 128-value halves: `qs[(4c + j) * 8 + e]` is column `j`, value `8c + e`
/// (c = 0..16 chunks), i.e. chunk `c` of columns 0,1 then 2,3 as two 16-byte `smmla` operands.
///
/// Scales and sums are stored per column pair `q` in the lane order of a `smmla` result
/// (`[row a . col 2q, row a . col 2q+1, row b . col 2q, row b . col 2q+1]`), so the kernels load
/// them as they are: `yd[q] = [d(2q), d(2q+1), d(2q), d(2q+1)]`, `nysum[p][q]` likewise with the
/// negated value sums and `ysum[p][q]` with the sums. The sums are stored once per row pair `p`
/// (two identical copies): the `smmla` accumulators of both row pairs start from them, and two
/// loads are free where one load and a register copy would cost a SIMD instruction.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(16))]
pub struct ActBlockX4 {
    /// Scales, per column pair, in `smmla` lane order.
    pub yd: [[f32; 4]; 2],
    /// Negated value sums (0 where the scale is 0), `[row pair][column pair]`, `smmla` lane order.
    pub nysum: [[[i32; 4]; 2]; 2],
    /// Value sums, the same way.
    pub ysum: [[[i32; 4]; 2]; 2],
    /// Interleaved values.
    pub qs: [i8; 512],
}

const _: () = assert!(core::mem::size_of::<ActBlockX4>() == 672);

impl Default for ActBlockX4 {
    fn default() -> Self {
        ActBlockX4 { yd: [[0.0; 4]; 2], nysum: [[[0; 4]; 2]; 2], ysum: [[[0; 4]; 2]; 2], qs: [0; 512] }
    }
}

impl ActBlockX4 {
    /// Scale of column `j` (0..4).
    #[inline]
    pub fn d(&self, j: usize) -> f32 {
        self.yd[j / 2][j % 2]
    }
    /// Value sum of column `j` (0..4).
    #[inline]
    pub fn ysum(&self, j: usize) -> i32 {
        self.ysum[0][j / 2][j % 2]
    }
}

/// Scale and sum of half `h` of `b`.
#[inline]
pub fn act_half(b: &BlockQ8K, h: usize) -> ActHalf {
    ActHalf { d: b.d, ysum: if b.d == 0.0 { 0 } else { b.half_sum(h) } }
}

thread_local! {
    static DUP: RefCell<Vec<ActDup>> = const { RefCell::new(Vec::new()) };
    static X4: RefCell<Vec<ActBlockX4>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` on the `nb` [`ActDup`] blocks of one activation column (`ceil(nb/2)` Q8_K blocks).
pub fn with_dup<R>(col: &[BlockQ8K], nb: usize, f: impl FnOnce(&[ActDup]) -> R) -> R {
    DUP.with(|cell| {
        let mut v = cell.borrow_mut();
        v.clear();
        v.extend((0..nb).map(|i| {
            let half = act_half(&col[i / 2], i % 2);
            let (src, _) = q8k_half(col, i);
            let mut out = ActDup { d: half.d, nysum: -half.ysum, ..Default::default() };
            for (c, dst) in out.qs.iter_mut().enumerate() {
                dst[..8].copy_from_slice(&src[8 * c..8 * c + 8]);
                dst[8..].copy_from_slice(&src[8 * c..8 * c + 8]);
            }
            out
        }));
        f(&v)
    })
}

/// Packs `n_cols` columns (column `j` = `act[j*stride..]`, `stride = ceil(nb/2)` blocks) into
/// `ceil(n_cols/4)` groups of `nb` [`ActBlockX4`], group-major (`[group * nb + i]`), padding the
/// last group with zero columns, then runs `f` on them.
pub fn with_x4<R>(act: &[BlockQ8K], n_cols: usize, nb: usize, f: impl FnOnce(&[ActBlockX4]) -> R) -> R {
    let stride = nb.div_ceil(2);
    let groups = n_cols.div_ceil(4);
    X4.with(|cell| {
        let mut v = cell.borrow_mut();
        v.clear();
        v.resize(groups * nb, ActBlockX4::default());
        for j in 0..n_cols {
            let (grp, lane) = (j / 4, j % 4);
            let col = &act[j * stride..(j + 1) * stride];
            for i in 0..nb {
                let half = act_half(&col[i / 2], i % 2);
                let dst = &mut v[grp * nb + i];
                for slot in [lane % 2, lane % 2 + 2] {
                    dst.yd[lane / 2][slot] = half.d;
                    for p in 0..2 {
                        dst.nysum[p][lane / 2][slot] = -half.ysum;
                        dst.ysum[p][lane / 2][slot] = half.ysum;
                    }
                }
                let (src, _) = q8k_half(col, i);
                for c in 0..16 {
                    dst.qs[(4 * c + lane) * 8..(4 * c + lane) * 8 + 8].copy_from_slice(&src[8 * c..8 * c + 8]);
                }
            }
        }
        f(&v)
    })
}
