//! Property tests of the foundation: lossless repacks, kernels equal to the reference dot bit for
//! bit, gemm equal to gemv per column, and the PTQ1_0 digit decode over every byte and position.

mod common;

use common::{levels_for, same_bytes, Rng};
use ggml_t2p::format::{
    pair_words_scalar, ptq1_0_digit, BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK,
};
use ggml_t2p::kernels::{gemm, gemv};
use ggml_t2p::reference::{vec_dot_pq2_0_q8_k, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{
    ptq1_0_to_pq2_0, repack_pq2_0_to_t2p, repack_pq2_0_to_x16, repack_ptq1_0_to_t2p, repack_ptq1_0_to_x16,
    repack_ptq1_0_to_x4, repacked_blocks, unpack_t2p_to_pq2_0, unpack_x16_to_pq2_0, unpack_x4_to_ptq1_0, Layout,
};
use ggml_t2p::{Activations, PackedWeights};
use half::f16;
use proptest::prelude::*;

/// Raw PQ2_0 blocks from arbitrary bytes: every code 0..=3 and any fp16 bit pattern but NaN/Inf.
fn pq2_blocks(n: usize) -> impl Strategy<Value = Vec<BlockPq2_0>> {
    prop::collection::vec((any::<u16>(), prop::array::uniform32(any::<u8>())), n).prop_map(|v| {
        v.into_iter()
            .map(|(d, qs)| BlockPq2_0 { d: f16::from_bits(if d & 0x7C00 == 0x7C00 { d & 0x83FF } else { d }), qs })
            .collect()
    })
}

/// Rows 4..=40 (X16 tiles full and padded, T2P groups), k = 128..=768.
fn shape() -> impl Strategy<Value = (usize, usize)> {
    (1usize..=10, 1usize..=6).prop_map(|(g, b)| (4 * g, QK * b))
}

/// The most blocks a `shape()` matrix has.
const MAX_BLOCKS: usize = 40 * 6;

/// T2P and X16 repacks of the same PQ2_0 rows.
fn pq2_mats(src: &[BlockPq2_0], n_rows: usize, k: usize) -> (Vec<BlockT2p>, Vec<BlockX16>) {
    let mut t2p = vec![BlockT2p::default(); n_rows / 4 * k / QK];
    repack_pq2_0_to_t2p(src, n_rows, k, &mut t2p).unwrap();
    let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
    repack_pq2_0_to_x16(src, n_rows, k, &mut x16).unwrap();
    (t2p, x16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn t2p_repack_is_lossless((n_rows, k) in shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        // random bytes, so code 3 (+2) appears about a quarter of the time
        let src: Vec<BlockPq2_0> = (0..n_rows * k / QK).map(|_| {
            let qs: [u8; 32] = std::array::from_fn(|_| rng.next() as u8);
            BlockPq2_0 { d: f16::from_bits(rng.next() as u16 & 0x7BFF), qs }
        }).collect();
        let mut t2p = vec![BlockT2p::default(); n_rows / 4 * k / QK];
        repack_pq2_0_to_t2p(&src, n_rows, k, &mut t2p).unwrap();
        // every code sits where docs/formats.md §5 says
        let nb = k / QK;
        for r in 0..n_rows {
            for i in 0..nb {
                let blk = &t2p[(r / 4) * nb + i];
                prop_assert_eq!(blk.d[r % 4].to_bits(), src[r * nb + i].d.to_bits());
                for j in 0..QK {
                    prop_assert_eq!(blk.code(r % 4, j), src[r * nb + i].code(j));
                }
            }
        }
        let mut back = vec![BlockPq2_0::default(); src.len()];
        unpack_t2p_to_pq2_0(&t2p, n_rows, k, &mut back).unwrap();
        prop_assert!(same_bytes(&back, &src));
    }

    #[test]
    fn x16_repack_is_lossless((n_rows, k) in shape(), seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let src: Vec<BlockPq2_0> = (0..n_rows * k / QK).map(|_| {
            let qs: [u8; 32] = std::array::from_fn(|_| rng.next() as u8);
            BlockPq2_0 { d: f16::from_bits(rng.next() as u16 & 0x7BFF), qs }
        }).collect();
        let (_, x16) = pq2_mats(&src, n_rows, k);
        // every code sits where format::BlockX16 says: word j/16, byte 4r + j%4, slot (j%16)/4
        let nb = k / QK;
        for r in 0..n_rows.next_multiple_of(16) {
            for i in 0..nb {
                let blk = &x16[(r / 16) * nb + i];
                let (d, codes) = if r < n_rows { (src[r * nb + i].d, src[r * nb + i].codes()) } else { (f16::ZERO, [1; 128]) };
                prop_assert_eq!(blk.d[r % 16].to_bits(), d.to_bits());
                for (j, &code) in codes.iter().enumerate() {
                    let byte = blk.qs[j / 16][4 * (r % 16) + j % 4];
                    prop_assert_eq!((byte >> (2 * ((j % 16) / 4))) & 3, code, "row {} weight {}", r, j);
                }
            }
        }
        let mut back = vec![BlockPq2_0::default(); src.len()];
        unpack_x16_to_pq2_0(&x16, n_rows, k, &mut back).unwrap();
        prop_assert!(same_bytes(&back, &src));
        // PTQ1_0 rows land as their PQ2_0 codes
        let t = common::random_ptq1_0(&mut rng, n_rows, k);
        let mut tx = vec![BlockX16::default(); x16.len()];
        repack_ptq1_0_to_x16(&t, n_rows, k, &mut tx).unwrap();
        unpack_x16_to_pq2_0(&tx, n_rows, k, &mut back).unwrap();
        let want: Vec<BlockPq2_0> = t.iter().map(ptq1_0_to_pq2_0).collect();
        prop_assert!(same_bytes(&back, &want));
        // and into T2P (the direct digit decode): the same PQ2_0 rows back, the same bytes by the
        // portable route as by this target's SIMD one
        for (i, blk) in t.chunks(2).enumerate().take(64) {
            if let [a, b] = blk {
                let mut want = BlockT2p::default();
                want.set_ptq1_0_rows([a, b, a, b]);
                prop_assert_eq!(pair_words_scalar(a, b), want.qs[0], "pair {}", i);
            }
        }
        let mut tt = vec![BlockT2p::default(); n_rows / 4 * k / QK];
        repack_ptq1_0_to_t2p(&t, n_rows, k, &mut tt).unwrap();
        unpack_t2p_to_pq2_0(&tt, n_rows, k, &mut back).unwrap();
        prop_assert!(same_bytes(&back, &want));
    }

    #[test]
    fn ptq1_0_x4_repack_is_lossless((n_rows, k) in shape(), seed in any::<u64>()) {
        let src = common::random_ptq1_0(&mut Rng(seed), n_rows, k);
        let mut x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * k / QK];
        repack_ptq1_0_to_x4(&src, n_rows, k, &mut x4).unwrap();
        let mut back = vec![BlockPtq1_0::default(); src.len()];
        unpack_x4_to_ptq1_0(&x4, n_rows, k, &mut back).unwrap();
        prop_assert!(same_bytes(&back, &src));
    }

    /// Every kernel level's gemv equals the reference dot of each PQ2_0 row, bit for bit.
    #[test]
    fn gemv_equals_reference_dot((n_rows, k) in shape(), w in pq2_blocks(MAX_BLOCKS), seed in any::<u64>()) {
        let src = &w[..n_rows * k / QK];
        let mut rng = Rng(seed);
        let act = common::random_acts(&mut rng, 1, k);
        let (t2p, x16) = pq2_mats(src, n_rows, k);
        let nb = k / QK;
        for pw in [PackedWeights::t2p(&t2p, n_rows, k).unwrap(), PackedWeights::x16(&x16, n_rows, k).unwrap()] {
            for level in levels_for(pw.layout()) {
                let mut y = vec![f32::NAN; n_rows + 1];
                gemv(level, &pw, &act, &mut y, 0..n_rows).unwrap();
                for r in 0..n_rows {
                    let want = vec_dot_pq2_0_q8_k(&src[r * nb..(r + 1) * nb], &act, Contract::Fused).unwrap();
                    prop_assert_eq!(y[r].to_bits(), want.to_bits(), "{} {} row {}", pw.layout().name(), level.name(), r);
                }
                prop_assert!(y[n_rows].is_nan(), "a padding row was stored");
            }
        }
    }

    /// gemm equals gemv per column, bit for bit, on every level and every layout.
    #[test]
    fn gemm_equals_gemv_per_column((n_rows, k) in shape(), n_cols in 1usize..=9, seed in any::<u64>()) {
        let mut rng = Rng(seed);
        let src = common::random_ptq1_0(&mut rng, n_rows, k);
        let acts = common::random_acts(&mut rng, n_cols, k);
        let a = Activations::new(&acts, n_cols, k).unwrap();
        let mut t2p = vec![BlockT2p::default(); n_rows / 4 * k / QK];
        repack_ptq1_0_to_t2p(&src, n_rows, k, &mut t2p).unwrap();
        let mut x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * k / QK];
        repack_ptq1_0_to_x4(&src, n_rows, k, &mut x4).unwrap();
        let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
        repack_ptq1_0_to_x16(&src, n_rows, k, &mut x16).unwrap();
        let mats = [
            PackedWeights::t2p(&t2p, n_rows, k).unwrap(),
            PackedWeights::ptq1_0x4(&x4, n_rows, k).unwrap(),
            PackedWeights::x16(&x16, n_rows, k).unwrap(),
        ];
        let nb = k / QK;
        for pw in &mats {
            for level in levels_for(pw.layout()) {
                let stride = n_rows + 3;
                let mut ys = vec![f32::NAN; stride * n_cols];
                gemm(level, pw, &a, &mut ys, stride, 0..n_rows).unwrap();
                for j in 0..n_cols {
                    let mut y = vec![f32::NAN; n_rows];
                    gemv(level, pw, a.col(j), &mut y, 0..n_rows).unwrap();
                    for r in 0..n_rows {
                        prop_assert_eq!(ys[j * stride + r].to_bits(), y[r].to_bits(), "{} col {} row {}", level.name(), j, r);
                        let want = vec_dot_ptq1_0_q8_k(&src[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap();
                        prop_assert_eq!(y[r].to_bits(), want.to_bits());
                    }
                    // the padding between columns is never written
                    prop_assert!(ys[j * stride + n_rows..(j + 1) * stride].iter().all(|v| v.is_nan()));
                }
            }
        }
    }
}

/// Digit `n` of every byte value at every qs/qh position decodes by the formula of docs/formats.md §2,
/// both as written (`((q * 3^n mod 256) * 3) >> 8`) and in compare form (`(v >= 86) + (v >= 171)`),
/// through the block's element map, the PTQ1_0x4 rearrangement, the PQ2_0 code conversion and the
/// direct PTQ1_0 -> X16 lanes.
#[test]
fn ptq1_0_digits_all_bytes_all_positions() {
    let mut checked = 0usize;
    for q in 0..=255u8 {
        for n in 0..5u32 {
            let v = q.wrapping_mul(3u8.pow(n));
            let formula = ((u32::from(v) * 3) >> 8) as u8;
            let compare = u8::from(v >= 86) + u8::from(v >= 171);
            assert_eq!(ptq1_0_digit(q, n), formula);
            assert_eq!(formula, compare, "q {q} n {n}");
        }
        for pos in 0..26 {
            let mut b = BlockPtq1_0::default();
            if pos < 24 {
                b.qs[pos] = q
            } else {
                b.qh[pos - 24] = q
            }
            let digits = b.digits();
            let pq2 = ptq1_0_to_pq2_0(&b);
            let x4 = BlockPtq1_0x4::from_rows([&b, &b, &b, &b]);
            // the X16 repack's own decode (lanes straight from the digits, no PQ2_0 step)
            let x16 = BlockX16::from_ptq1_0_rows([&b; 16]);
            // and the T2P repack's (words straight from the digits, eight bytes at a time)
            let t2p = BlockT2p::from_ptq1_0_rows([&b; 4]);
            // (the portable route gives the same bytes as the SSE2 / NEON one)
            assert_eq!(pair_words_scalar(&b, &b), t2p.qs[0], "byte {q} position {pos}");
            let values: Vec<[i8; 128]> =
                (0..4).map(|r| ggml_t2p::kernels::scalar::ptq1_0x4_row_values(&x4, r)).collect();
            let ndig = if pos < 24 { 5 } else { 4 };
            for n in 0..ndig {
                let e = if pos < 16 {
                    16 * n + pos
                } else if pos < 24 {
                    80 + 8 * n + (pos - 16)
                } else {
                    120 + 2 * n + (pos - 24)
                };
                let want = ptq1_0_digit(q, n as u32);
                assert_eq!(digits[e], want, "byte {q} position {pos} digit {n} element {e}");
                assert_eq!(pq2.code(e), want);
                for r in 0..16 {
                    assert_eq!(x16.code(r, e), want, "X16 row {r}");
                }
                for r in 0..4 {
                    assert_eq!(t2p.code(r, e), want, "T2P row {r}");
                }
                for vals in &values {
                    assert_eq!(vals[e], want as i8 - 1);
                }
                checked += 1;
            }
        }
    }
    println!("ptq1_0 digits: {checked} (byte value, position, digit) triples decode by the formula");
    assert_eq!(checked, 256 * (24 * 5 + 2 * 4));
}

/// All-zero activation blocks carry `d = 0` and stale `bsums`; whatever the bsums hold (even in
/// a block with `d != 0`), every level returns the reference bits.
#[test]
fn zero_activation_blocks_ignore_garbage_bsums() {
    let (n_rows, k) = (8, 1024);
    let mut rng = Rng(7);
    let src = common::random_pq2_0(&mut rng, n_rows, k);
    let (t2p, x16) = pq2_mats(&src, n_rows, k);
    let mut act = common::random_acts(&mut rng, 1, k);
    act[1] = BlockQ8K { d: 0.0, qs: [0; 256], bsums: [i16::MIN; 16] };
    act[3] = BlockQ8K { d: 0.0, qs: [0; 256], bsums: [i16::MAX; 16] };
    // a block whose bsums lie although d != 0: the kernels sum the values themselves
    act[2].bsums = [1234; 16];
    for pw in [PackedWeights::t2p(&t2p, n_rows, k).unwrap(), PackedWeights::x16(&x16, n_rows, k).unwrap()] {
        for level in levels_for(pw.layout()) {
            let mut y = vec![0.0f32; n_rows];
            gemv(level, &pw, &act, &mut y, 0..n_rows).unwrap();
            for r in 0..n_rows {
                let want = vec_dot_pq2_0_q8_k(&src[r * 8..(r + 1) * 8], &act, Contract::Fused).unwrap();
                assert_eq!(y[r].to_bits(), want.to_bits(), "{} {} row {r}", pw.layout().name(), level.name());
            }
        }
    }
}
