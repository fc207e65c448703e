//! The integer oracle: every kernel level this CPU runs, on every repacked layout, against the
//! reference dot of the original rows (`reference::vec_dot_*_q8_k`), bit for bit, over a fixed
//! class of shapes, batch widths and edge-case data; and row-range splits 1..8 ways.

mod common;

use common::{bytes_mut, level_names, levels_for, Rng};
use ggml_t2p::format::{BlockL64, BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK};
use ggml_t2p::kernels::{gemm, gemm_par, KernelLevel};
use ggml_t2p::reference::{vec_dot_pq2_0_q8_k, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{
    ptq1_0_to_pq2_0, repack_pq2_0_to_t2p, repack_pq2_0_to_x16, repack_ptq1_0_to_l64, repack_ptq1_0_to_t2p,
    repack_ptq1_0_to_x16, repack_ptq1_0_to_x4, repacked_blocks, Layout,
};
use ggml_t2p::{Activations, PackedWeights};
use half::f16;

/// Weight contents of a case.
#[derive(Clone, Copy, Debug)]
enum Weights {
    /// Random codes 0..=2 with some 3s.
    Ternary,
    /// Every code 1: all weights zero.
    AllZero,
    /// Every code 2 (+1).
    ConstPlus,
    /// Every code 0 (-1).
    ConstMinus,
    /// Every code 3 (+2), legal in the container though the fork never writes it.
    Code3,
}

/// fp16 scales of a case.
#[derive(Clone, Copy, Debug)]
enum Scales {
    Typical,
    /// +-65504.
    Max,
    /// Subnormal fp16 (2^-24 .. 2^-14).
    Subnormal,
    /// Negative typical values.
    Negative,
    /// A mix of all of the above and +-0.
    Mixed,
}

/// Activation contents of a case.
#[derive(Clone, Copy, Debug)]
enum Acts {
    /// The reference quantizer on random floats, every third 256-block all zero (d = 0, bsums
    /// left at 0x5A5A by the quantizer).
    Quantized,
    /// qs all +-127 (random signs), bsums consistent.
    Extreme,
    /// Random qs; every other block has d = 0, qs = 0 and random garbage bsums.
    ZeroBlocksGarbageBsums,
}

fn scale(rng: &mut Rng, s: Scales) -> f16 {
    fn typical(rng: &mut Rng) -> f32 {
        0.001 + 0.05 * rng.unit().abs()
    }
    match s {
        Scales::Typical => f16::from_f32(typical(rng)),
        Scales::Max => f16::from_bits(if rng.below(2) == 0 { 0x7BFF } else { 0xFBFF }),
        Scales::Subnormal => f16::from_bits((1 + rng.below(0x3FF) as u16) | if rng.below(2) == 0 { 0 } else { 0x8000 }),
        Scales::Negative => f16::from_f32(-typical(rng)),
        Scales::Mixed => {
            let pick = rng.below(6);
            match pick {
                0 => scale(rng, Scales::Max),
                1 => scale(rng, Scales::Subnormal),
                2 => scale(rng, Scales::Negative),
                3 => f16::from_bits(if rng.below(2) == 0 { 0 } else { 0x8000 }),
                _ => scale(rng, Scales::Typical),
            }
        }
    }
}

fn pq2_rows(rng: &mut Rng, n_rows: usize, k: usize, w: Weights, s: Scales) -> Vec<BlockPq2_0> {
    (0..n_rows * k / QK)
        .map(|_| {
            let codes: [u8; 128] = std::array::from_fn(|_| match w {
                Weights::Ternary => {
                    if rng.below(32) == 0 {
                        3
                    } else {
                        rng.below(3) as u8
                    }
                }
                Weights::AllZero => 1,
                Weights::ConstPlus => 2,
                Weights::ConstMinus => 0,
                Weights::Code3 => 3,
            });
            BlockPq2_0::from_codes(scale(rng, s), &codes)
        })
        .collect()
}

/// PTQ1_0 rows: random bytes (any byte decodes), or bytes whose digits are all 1 (0x79 = 121
/// encodes 11111 in base 3 -> all-zero weights), with the scales of `s`.
fn ptq1_rows(rng: &mut Rng, n_rows: usize, k: usize, zero: bool, s: Scales) -> Vec<BlockPtq1_0> {
    (0..n_rows * k / QK)
        .map(|_| {
            let mut b = BlockPtq1_0 { d: scale(rng, s), ..Default::default() };
            for q in b.qs.iter_mut().chain(b.qh.iter_mut()) {
                *q = if zero { 0 } else { rng.next() as u8 };
            }
            if zero {
                // the fork's all-zero block: every qs byte 0x80, qh 0x7F (golden README)
                b.qs = [0x80; 24];
                b.qh = [0x7F; 2];
            }
            b
        })
        .collect()
}

fn acts(rng: &mut Rng, n_cols: usize, k: usize, a: Acts) -> Vec<BlockQ8K> {
    let per = k.div_ceil(256);
    match a {
        Acts::Quantized => common::random_acts(rng, n_cols, k),
        Acts::Extreme | Acts::ZeroBlocksGarbageBsums => {
            let mut out = vec![BlockQ8K::default(); n_cols * per];
            for (i, b) in out.iter_mut().enumerate() {
                b.d = 0.001 + rng.unit().abs();
                for q in b.qs.iter_mut() {
                    *q = match a {
                        Acts::Extreme => {
                            if rng.below(2) == 0 {
                                127
                            } else {
                                -127
                            }
                        }
                        _ => (rng.below(255) as i32 - 127) as i8,
                    };
                }
                b.fill_bsums();
                if matches!(a, Acts::ZeroBlocksGarbageBsums) && i % 2 == 1 {
                    b.d = 0.0;
                    b.qs = [0; 256];
                    bytes_mut(std::slice::from_mut(b))[260..].iter_mut().for_each(|x| *x = rng.next() as u8);
                }
            }
            // a row of k = 128 * odd is zero-padded to 256 before quantizing
            if !k.is_multiple_of(256) {
                for j in 0..n_cols {
                    let b = &mut out[j * per + per - 1];
                    b.qs[128..].fill(0);
                    b.fill_bsums();
                }
            }
            out
        }
    }
}

/// One case: every layout (T2P, X16 and, for PTQ1_0 sources, PTQ1_0x4 and L64) on every level this CPU
/// runs it with, against the reference dot of the source rows. Returns the number of outputs
/// checked.
fn check_case(name: &str, n_rows: usize, k: usize, n_cols: usize, src: &Source, act: &[BlockQ8K]) -> usize {
    let nb = k / QK;
    let a = Activations::new(act, n_cols, k).unwrap();
    let want: Vec<u32> = (0..n_cols)
        .flat_map(|j| {
            (0..n_rows).map(move |r| {
                let col = a.col(j);
                match src {
                    Source::Pq2(w) => vec_dot_pq2_0_q8_k(&w[r * nb..(r + 1) * nb], col, Contract::Fused),
                    Source::Ptq1(w) => vec_dot_ptq1_0_q8_k(&w[r * nb..(r + 1) * nb], col, Contract::Fused),
                }
                .unwrap()
                .to_bits()
            })
        })
        .collect();
    let mut t2p = vec![BlockT2p::default(); n_rows / 4 * nb];
    let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
    let mut x4 = Vec::new();
    let mut l64 = Vec::new();
    match src {
        Source::Pq2(w) => {
            repack_pq2_0_to_t2p(w, n_rows, k, &mut t2p).unwrap();
            repack_pq2_0_to_x16(w, n_rows, k, &mut x16).unwrap();
        }
        Source::Ptq1(w) => {
            repack_ptq1_0_to_t2p(w, n_rows, k, &mut t2p).unwrap();
            repack_ptq1_0_to_x16(w, n_rows, k, &mut x16).unwrap();
            x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * nb];
            repack_ptq1_0_to_x4(w, n_rows, k, &mut x4).unwrap();
            l64 = vec![BlockL64::default(); repacked_blocks(Layout::L64, n_rows, k).unwrap()];
            repack_ptq1_0_to_l64(w, n_rows, k, &mut l64).unwrap();
        }
    }
    let mut mats = vec![PackedWeights::t2p(&t2p, n_rows, k).unwrap(), PackedWeights::x16(&x16, n_rows, k).unwrap()];
    if !x4.is_empty() {
        mats.push(PackedWeights::ptq1_0x4(&x4, n_rows, k).unwrap());
        mats.push(PackedWeights::l64(&l64, n_rows, k).unwrap());
    }
    let mut checked = 0;
    for pw in &mats {
        let layout = pw.layout().name();
        for level in levels_for(pw.layout()) {
            let mut y = vec![f32::NAN; n_rows * n_cols];
            gemm(level, pw, &a, &mut y, n_rows, 0..n_rows).unwrap();
            for (idx, (got, want)) in y.iter().zip(&want).enumerate() {
                assert_eq!(
                    got.to_bits(),
                    *want,
                    "{name}: {layout} {} rows {n_rows} k {k} cols {n_cols}: col {} row {}: {:e} vs reference {:e}",
                    level.name(),
                    idx / n_rows,
                    idx % n_rows,
                    got,
                    f32::from_bits(*want)
                );
            }
            checked += y.len();
        }
    }
    checked
}

enum Source {
    Pq2(Vec<BlockPq2_0>),
    Ptq1(Vec<BlockPtq1_0>),
}

#[test]
fn oracle_class() {
    let mut rng = Rng(0x0AC1E);
    let widths_all: &[usize] = &[1, 2, 3, 4, 5, 6, 7, 8, 13, 24, 28, 31, 64, 65];
    // (rows, k, widths): every width on small shapes, a spread on the large ones
    let shapes: &[(usize, usize, &[usize])] = &[
        (4, 256, widths_all),
        (8, 512, widths_all),
        (12, 1024, widths_all),
        (4, 384, &[1, 3, 8, 13]),
        (20, 896, &[1, 2, 3, 9, 17]),
        (48, 640, &[1, 5, 8, 11]),
        (8, 5120, &[1, 2, 5, 8, 13]),
        (4, 17408, &[1, 4, 7, 65]),
        (4100, 256, &[1, 3, 8, 13]),
        // long rows: the x86 gemv reads four row tiles side by side (the VNNI levels from
        // k >= 16384, avx2 at every k), then the leftover tiles (7 = 4 + 3, the last one partial)
        // one by one
        (100, 16384, &[1, 2, 9]),
        // the avx2 gemv's four row tiles side by side on random weights (the shapes above that
        // reach them at avx2 draw constant weights): 8 tiles, two groups of four, the last tile
        // partial (116 = 7 * 16 + 4); and the same order for 2 to 4 columns on Intel
        // (avx512vnni's STREAM_COLS_MAX)
        (116, 640, &[1, 2, 3, 4, 5, 6, 7, 8]),
    ];
    let weights = [Weights::Ternary, Weights::AllZero, Weights::ConstPlus, Weights::ConstMinus, Weights::Code3];
    let scales = [Scales::Typical, Scales::Max, Scales::Subnormal, Scales::Negative, Scales::Mixed];
    let act_kinds = [Acts::Quantized, Acts::Extreme, Acts::ZeroBlocksGarbageBsums];
    let (mut cases, mut outputs) = (0usize, 0usize);
    for (si, &(n_rows, k, widths)) in shapes.iter().enumerate() {
        for (wi, &n_cols) in widths.iter().enumerate() {
            // rotate through the data kinds so every shape meets every kind
            let w = weights[(si + wi) % weights.len()];
            let s = scales[(si + 2 * wi) % scales.len()];
            let ak = act_kinds[(si + wi) % act_kinds.len()];
            let act = acts(&mut rng, n_cols, k, ak);
            let src = Source::Pq2(pq2_rows(&mut rng, n_rows, k, w, s));
            outputs += check_case(&format!("pq2_0 {w:?} {s:?} {ak:?}"), n_rows, k, n_cols, &src, &act);
            cases += 1;
            if n_rows * k <= 16 * 5120 {
                let zero = matches!(w, Weights::AllZero);
                let src = Source::Ptq1(ptq1_rows(&mut rng, n_rows, k, zero, s));
                outputs += check_case(&format!("ptq1_0 zero={zero} {s:?} {ak:?}"), n_rows, k, n_cols, &src, &act);
                cases += 1;
            }
        }
    }
    // random PQ2_0 weights through tiles of 2 and 3 columns (avx2: `block_16x2`, `block_16x3`,
    // and a 3-column tile for the last columns of 7 = 4 + 3; the rotation above meets 3 and 7
    // columns with random PTQ1_0 weights, but PQ2_0 ones only constant): 3 row tiles, the last
    // one partial
    for n_cols in [2usize, 3, 7] {
        let act = acts(&mut rng, n_cols, 640, Acts::Quantized);
        let src = Source::Pq2(pq2_rows(&mut rng, 36, 640, Weights::Ternary, Scales::Mixed));
        outputs += check_case("pq2_0 Ternary Mixed Quantized", 36, 640, n_cols, &src, &act);
        cases += 1;
    }
    // PTQ1_0 through every batch width class of the L64 gemm (expanded to X16: the avx512vnni
    // gemm, AMX narrow tiles 5..15, 2x2 tiles from 16, a partial 16-column group), 196 rows: three
    // whole L64 tiles and a padded one, k = 128 * odd
    for n_cols in [2usize, 4, 5, 15, 16, 17, 33] {
        let act = acts(&mut rng, n_cols, 384, Acts::Quantized);
        let src = Source::Ptq1(ptq1_rows(&mut rng, 196, 384, false, Scales::Mixed));
        outputs += check_case("ptq1_0 wide batches", 196, 384, n_cols, &src, &act);
        cases += 1;
    }
    // every weight kind x every scale kind x every activation kind on one small shape
    for w in weights {
        for s in scales {
            for ak in act_kinds {
                let act = acts(&mut rng, 5, 512, ak);
                let src = Source::Pq2(pq2_rows(&mut rng, 8, 512, w, s));
                outputs += check_case(&format!("pq2_0 {w:?} {s:?} {ak:?}"), 8, 512, 5, &src, &act);
                cases += 1;
            }
        }
    }
    println!("oracle: {cases} cases, {outputs} outputs bit-identical to the reference dot, {:?}", level_names());
}

/// Splitting the rows 1..8 ways (uneven, on 4-row boundaries, in parallel) gives the bits of one
/// call, for gemv and gemm, on every level and both layouts.
#[test]
fn row_range_splits() {
    let mut rng = Rng(0x5B117);
    let (n_rows, k) = (4100, 640);
    let src = ptq1_rows(&mut rng, n_rows, k, false, Scales::Mixed);
    let nb = k / QK;
    let mut t2p = vec![BlockT2p::default(); n_rows / 4 * nb];
    repack_ptq1_0_to_t2p(&src, n_rows, k, &mut t2p).unwrap();
    let mut x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * nb];
    repack_ptq1_0_to_x4(&src, n_rows, k, &mut x4).unwrap();
    let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
    repack_ptq1_0_to_x16(&src, n_rows, k, &mut x16).unwrap();
    let mut l64 = vec![BlockL64::default(); repacked_blocks(Layout::L64, n_rows, k).unwrap()];
    repack_ptq1_0_to_l64(&src, n_rows, k, &mut l64).unwrap();
    let mats = [
        PackedWeights::t2p(&t2p, n_rows, k).unwrap(),
        PackedWeights::ptq1_0x4(&x4, n_rows, k).unwrap(),
        PackedWeights::x16(&x16, n_rows, k).unwrap(),
        PackedWeights::l64(&l64, n_rows, k).unwrap(),
    ];
    let mut runs = 0;
    // 3 and 7 columns end in a 3-column tile at avx2 (`Isa::TAIL3`)
    for n_cols in [1usize, 3, 6, 7, 9] {
        let act = acts(&mut rng, n_cols, k, Acts::Quantized);
        let a = Activations::new(&act, n_cols, k).unwrap();
        for pw in &mats {
            for level in levels_for(pw.layout()) {
                let mut one = vec![0.0f32; n_rows * n_cols];
                gemm(level, pw, &a, &mut one, n_rows, 0..n_rows).unwrap();
                for splits in 1..=8 {
                    let mut y = vec![f32::NAN; n_rows * n_cols];
                    gemm_par(level, pw, &a, &mut y, n_rows, splits).unwrap();
                    assert!(
                        y.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "{} {} {splits} splits, {n_cols} columns",
                        pw.layout().name(),
                        level.name()
                    );
                    runs += 1;
                }
            }
        }
    }
    // the PTQ1_0 sources' own reference agrees with the T2P view of the same rows
    let pq2: Vec<BlockPq2_0> = src.iter().map(ptq1_0_to_pq2_0).collect();
    let act = acts(&mut rng, 1, k, Acts::Quantized);
    for r in (0..n_rows).step_by(97) {
        let a = vec_dot_ptq1_0_q8_k(&src[r * nb..(r + 1) * nb], &act, Contract::Fused).unwrap();
        let b = vec_dot_pq2_0_q8_k(&pq2[r * nb..(r + 1) * nb], &act, Contract::Fused).unwrap();
        assert_eq!(a.to_bits(), b.to_bits());
    }
    println!("split: {runs} split runs (1..8 ways) bit-identical to one call, {:?}", level_names());
}

/// A CPU without any SIMD level (ARM without dotprod, x86 without AVX2+FMA+F16C) has no kernel
/// level but the reference: callers must decline, and the C-level "auto" request reports
/// unsupported. On a CPU with one, the library's layout choice matches its ISA.
#[test]
fn decline_without_simd() {
    use ggml_t2p::ffi::{ggml_t2p_best_kernel, ggml_t2p_layout_for, ggml_t2p_supports};
    let f = ggml_t2p::CpuFeatures::detect();
    let best = KernelLevel::best();
    println!("kernels: cpu features {f:?}, best level {:?}", best.map(|l| l.name()));
    let mut lay = -1;
    match best {
        None => {
            assert!(!f.dotprod && !f.avx2, "a CPU with a SIMD level must get a kernel");
            assert!(KernelLevel::ALL[1..].iter().all(|l| !l.is_available()));
            assert_eq!(ggml_t2p_best_kernel(), 0);
            let st = ggml_t2p_supports(142, 1, 0, 4, 256);
            assert_eq!(st, -6, "auto on a CPU without a SIMD level must be unsupported");
            // SAFETY: a valid out pointer.
            assert_eq!(unsafe { ggml_t2p_layout_for(142, 0, 0, &mut lay) }, -6);
            println!("kernels: no SIMD level -> declined (ggml_t2p_supports = {st})");
        }
        Some(level) => {
            assert_eq!(ggml_t2p_best_kernel(), level as i32);
            // SAFETY: a valid out pointer.
            assert_eq!(unsafe { ggml_t2p_layout_for(142, 0, 0, &mut lay) }, 0);
            let want = if cfg!(target_arch = "x86_64") { Layout::X16 } else { Layout::T2p };
            assert_eq!(lay, want as i32);
            assert_eq!(ggml_t2p_supports(142, lay, 0, 4, 256), 0);
            if cfg!(target_arch = "aarch64") {
                assert_eq!(level == KernelLevel::I8mm, f.i8mm);
            } else {
                assert_eq!(level == KernelLevel::Avx2, !f.avxvnni && !f.avx512vnni);
            }
        }
    }
    assert_eq!(ggml_t2p_supports(142, 1, 1, 4, 256), 0, "the reference level is always available");
    assert_eq!(ggml_t2p_supports(142, 3, 1, 4, 256), 0, "the reference level runs every layout");
}

/// The choice between the levels for each feature set (no CPU needed): on x86 for each vendor,
/// on aarch64 i8mm over dotprod; features of the other architecture never give a level.
#[test]
fn best_level_choice() {
    use ggml_t2p::CpuFeatures;
    use KernelLevel::*;
    let base = CpuFeatures { avx2: true, ..CpuFeatures::default() };
    let neon = CpuFeatures { neon: true, ..CpuFeatures::default() };
    let x86_cases = [
        (CpuFeatures::default(), None),
        (base, Some(Avx2)),
        (CpuFeatures { avxvnni: true, ..base }, Some(AvxVnni)),
        (CpuFeatures { avx512vnni: true, ..base }, Some(Avx512Vnni)),
        (CpuFeatures { avxvnni: true, avx512vnni: true, ..base }, Some(Avx512Vnni)),
        (CpuFeatures { avxvnni: true, avx512vnni: true, amd: true, ..base }, Some(Avx512Vnni)),
        (CpuFeatures { avxvnni: true, amd: true, ..base }, Some(AvxVnni)),
        // AMX first where the CPU has it (best() also needs the OS's tile permission)
        (CpuFeatures { avxvnni: true, avx512vnni: true, amx_tile: true, amx_int8: true, ..base }, Some(Amx)),
        (CpuFeatures { avx512vnni: true, amx_tile: true, ..base }, Some(Avx512Vnni)),
    ];
    let arm_cases = [
        (CpuFeatures::default(), None),
        (neon, None),
        (CpuFeatures { dotprod: true, ..neon }, Some(Dotprod)),
        (CpuFeatures { dotprod: true, i8mm: true, ..neon }, Some(I8mm)),
        (CpuFeatures { i8mm: true, ..neon }, None), // i8mm without dotprod is no level of ours
    ];
    let (mine, other, arch) = if cfg!(target_arch = "x86_64") {
        (&x86_cases[..], &arm_cases[..], "x86_64")
    } else if cfg!(target_arch = "aarch64") {
        (&arm_cases[..], &x86_cases[..], "aarch64")
    } else {
        (&[][..], &[][..], "other")
    };
    for &(f, want) in mine {
        assert_eq!(KernelLevel::best_on(f), want, "{arch}: {f:?}");
    }
    for &(f, _) in other {
        assert_eq!(KernelLevel::best_on(f), None, "{arch} with the other architecture's features {f:?}");
    }
    // on an architecture with no SIMD level of ours only the x86 and ARM cases above decline
    assert!(arch != "other" || x86_cases.iter().chain(&arm_cases).all(|&(f, _)| KernelLevel::best_on(f).is_none()));
    println!(
        "kernels: level choice checked for {} {arch} feature sets ({} of the other architecture)",
        mine.len(),
        other.len()
    );
}

/// An empty batch (ggml hands the last layer zero columns when no output is kept) is valid on
/// every level and writes nothing.
#[test]
fn empty_batch_is_a_no_op() {
    let mut rng = Rng(0xE);
    let src = pq2_rows(&mut rng, 8, 384, Weights::Ternary, Scales::Typical);
    let mut t2p = vec![BlockT2p::default(); 2 * 3];
    repack_pq2_0_to_t2p(&src, 8, 384, &mut t2p).unwrap();
    let mut x16 = vec![BlockX16::default(); 3];
    repack_pq2_0_to_x16(&src, 8, 384, &mut x16).unwrap();
    let a = Activations::new(&[], 0, 384).unwrap();
    for pw in [PackedWeights::t2p(&t2p, 8, 384).unwrap(), PackedWeights::x16(&x16, 8, 384).unwrap()] {
        for level in levels_for(pw.layout()) {
            let mut y = vec![f32::NAN; 8];
            gemm(level, &pw, &a, &mut y, 8, 0..8).unwrap();
            gemm_par(level, &pw, &a, &mut y, 8, 3).unwrap();
            assert!(y.iter().all(|v| v.is_nan()), "{}", level.name());
        }
    }
}

/// L64 bytes that no repack writes (group indices past their half, the sign on them and on the zero
/// group) and random scales: every level that runs L64 gives the `ref` level's bits, for the gemv
/// and gemm widths of every kernel class (the AMX tiles included), and the scalar reference reads
/// them as `decode_group` does (checked through `BlockL64::row` against the PQ2_0 reference).
#[test]
fn l64_any_byte() {
    let mut rng = Rng(0x1_64B);
    let (n_rows, k) = (132usize, 640usize); // two whole L64 tiles and a padded one
    let nb = k / QK;
    let blocks = repacked_blocks(Layout::L64, n_rows, k).unwrap();
    let w: Vec<BlockL64> = (0..blocks)
        .map(|_| {
            let mut b = BlockL64::default();
            for d in b.d.iter_mut() {
                *d = f16::from_f32((rng.next() % 200) as f32 * 1e-3 - 0.1);
            }
            for q in b.q.iter_mut().flatten() {
                *q = rng.next() as u8; // any byte: indices 0..=127, either sign
            }
            b
        })
        .collect();
    let pw = PackedWeights::l64(&w, n_rows, k).unwrap();
    // the same weights as PQ2_0 rows, for the reference dot
    let pq2: Vec<BlockPq2_0> =
        (0..n_rows).flat_map(|r| (0..nb).map(move |i| (r, i))).map(|(r, i)| w[(r / 64) * nb + i].row(r % 64)).collect();
    let mut outputs = 0;
    for n_cols in [1usize, 2, 5, 16, 17] {
        let act = acts(&mut rng, n_cols, k, Acts::Quantized);
        let a = Activations::new(&act, n_cols, k).unwrap();
        let mut want = vec![0.0f32; n_rows * n_cols];
        gemm(KernelLevel::Reference, &pw, &a, &mut want, n_rows, 0..n_rows).unwrap();
        for j in 0..n_cols {
            for r in 0..n_rows {
                let d = vec_dot_pq2_0_q8_k(&pq2[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap();
                assert_eq!(want[j * n_rows + r].to_bits(), d.to_bits(), "ref: row {r} col {j}");
            }
        }
        for level in levels_for(Layout::L64) {
            let mut y = vec![f32::NAN; n_rows * n_cols];
            gemm(level, &pw, &a, &mut y, n_rows, 0..n_rows).unwrap();
            assert!(
                y.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                "L64 {} with any bytes, {n_cols} columns",
                level.name()
            );
            outputs += y.len();
        }
    }
    println!("l64 any byte: {outputs} outputs equal to ref, {:?}", levels_for(Layout::L64));
}

/// The L64 gemm expands 64-row tiles a span (1 MiB of X16) at a time: a job of more tiles than one
/// span (300 rows of k = 16384: 5 tiles, the last padded, spans of 3) gives the reference's bits at
/// every width (and the gemv of such long rows, every row).
#[test]
fn l64_gemm_across_spans() {
    let mut rng = Rng(0x5_9A45);
    let (n_rows, k) = (300usize, 16384usize);
    let nb = k / QK;
    let src = ptq1_rows(&mut rng, n_rows, k, false, Scales::Mixed);
    let mut l64 = vec![BlockL64::default(); repacked_blocks(Layout::L64, n_rows, k).unwrap()];
    repack_ptq1_0_to_l64(&src, n_rows, k, &mut l64).unwrap();
    let pw = PackedWeights::l64(&l64, n_rows, k).unwrap();
    for n_cols in [1usize, 2, 5, 17] {
        let act = acts(&mut rng, n_cols, k, Acts::Quantized);
        let a = Activations::new(&act, n_cols, k).unwrap();
        for level in levels_for(Layout::L64) {
            let mut y = vec![f32::NAN; n_rows * n_cols];
            gemm(level, &pw, &a, &mut y, n_rows, 0..n_rows).unwrap();
            for j in 0..n_cols {
                for r in (0..n_rows).step_by(if n_cols == 1 { 1 } else { 7 }) {
                    let d = vec_dot_ptq1_0_q8_k(&src[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap();
                    assert_eq!(y[j * n_rows + r].to_bits(), d.to_bits(), "{} row {r} col {j}", level.name());
                }
            }
        }
    }
}
