//! The SIMD Q8_K activation quantizers ([`kernels::quantize_q8_k`]) against the reference
//! quantizer, bit for bit (`d`, `qs` and `bsums`, and the untouched `bsums` of zero blocks), at
//! every level this machine runs (`GGML_T2P_TEST_LEVELS` narrows them), for both contracts: the
//! golden vectors, hand-made edge rows, and proptest rows. Each test prints what it compared.

mod common;

use common::{bytes_mut, levels, same_bytes, Golden, Rng};
use ggml_t2p::format::{BlockQ8K, QK_K};
use ggml_t2p::kernels::{self, quantize_q8_k, quantize_row_q8_k_fast};
use ggml_t2p::reference::{quantize_row_q8_k, Contract};
use ggml_t2p::{Error, KernelLevel};
use proptest::prelude::*;

const CONTRACTS: [Contract; 2] = [Contract::Fused, Contract::Unfused];

/// `n` blocks pre-filled with `fill` (the golden generator used 0x5A): a zero block keeps its
/// `bsums`, so both sides must start from the same bytes.
fn blocks_filled(n: usize, fill: u8) -> Vec<BlockQ8K> {
    let mut v = vec![BlockQ8K::default(); n];
    bytes_mut(&mut v).fill(fill);
    v
}

/// Quantizes `x` at `level` and with the reference, both outputs pre-filled with `fill`; the
/// first differing block as an error text.
fn compare(level: KernelLevel, x: &[f32], contract: Contract, fill: u8) -> Result<(), String> {
    let n = x.len() / QK_K;
    let mut want = blocks_filled(n, fill);
    let mut got = blocks_filled(n, fill);
    quantize_row_q8_k(x, &mut want, contract).unwrap();
    quantize_q8_k(level, x, &mut got, contract).unwrap();
    for (b, (g, w)) in got.iter().zip(&want).enumerate() {
        if !same_bytes(std::slice::from_ref(g), std::slice::from_ref(w)) {
            let q = (0..QK_K).find(|&j| g.qs[j] != w.qs[j]);
            return Err(format!(
                "{} {contract:?} block {b}: d {:#010x} vs {:#010x}, first qs diff {q:?}{}, bsums {:?} vs {:?}",
                level.name(),
                g.d.to_bits(),
                w.d.to_bits(),
                q.map(|j| format!(" ({} vs {}, x {:#010x})", g.qs[j], w.qs[j], x[b * QK_K + j].to_bits()))
                    .unwrap_or_default(),
                g.bsums,
                w.bsums
            ));
        }
    }
    Ok(())
}

#[test]
fn golden_vectors_every_level() {
    for (file, contract) in [("q8k_quant.fma.bin", Contract::Fused), ("q8k_quant.nofma.bin", Contract::Unfused)] {
        for level in levels() {
            let mut g = Golden::open(file, b"Q8KQ");
            let (mut cases, mut blocks) = (0, 0);
            for case in 0..g.count {
                let tag = g.u32();
                let n = g.u32() as usize;
                let x = g.f32s(n);
                let want: Vec<BlockQ8K> = g.blocks(n / QK_K);
                let mut got = blocks_filled(n / QK_K, 0x5A); // as the generator pre-filled
                quantize_q8_k(level, &x, &mut got, contract).unwrap();
                assert!(same_bytes(&got, &want), "{file} {}: case {case} (tag {tag:#x}, n {n}) differs", level.name());
                cases += 1;
                blocks += n / QK_K;
            }
            g.finish();
            println!("golden {file} {}: {cases}/{} cases, {blocks} blocks bit-identical", level.name(), g.count);
        }
    }
}

/// Hand-made blocks of one kind each (`kind` 0..KINDS), from `rng`.
const KINDS: u64 = 22;
fn edge_block(kind: u64, rng: &mut Rng) -> Vec<f32> {
    let e = |rng: &mut Rng, lo: i32, hi: i32| 2f32.powi(lo + rng.below((hi - lo + 1) as u64) as i32);
    let mut x: Vec<f32> = (0..QK_K).map(|_| rng.unit()).collect();
    let pos = rng.below(QK_K as u64) as usize;
    let pos2 = (pos + 1 + rng.below(QK_K as u64 - 1) as usize) % QK_K;
    let m = e(rng, -20, 20);
    match kind {
        0 => {}                                                                  // uniform in [-1, 1)
        1 => x.iter_mut().for_each(|v| *v = (*v + rng.unit() + rng.unit()) * m), // gaussian-like
        2 => x.fill(0.0),
        3 => x.iter_mut().for_each(|v| *v = if *v < 0.0 { -0.0 } else { 0.0 }),
        4 => x.fill(m * if rng.below(2) == 0 { 1.0 } else { -1.0 }), // all equal
        5 => {
            // exact .5 ties: integers / 2 with max = +-127 * 2^e, so iscale = -+2^-e exactly
            x.iter_mut().for_each(|v| *v = (rng.below(255) as f32 - 127.0) * 0.5 * m);
            x[pos] = 127.0 * m * if rng.below(2) == 0 { 1.0 } else { -1.0 };
        }
        6 => {
            // near-ties: iscale * x within a few ulps of k + 0.5 (where fused and unfused differ)
            let mx = 1.0 + rng.unit().abs();
            let iscale = -127.0f32 / mx;
            x.iter_mut().for_each(|v| {
                let k = rng.below(250) as f32 - 125.0 + 0.5;
                let t = k / iscale;
                *v = f32::from_bits((t.to_bits() as i32 + rng.below(7) as i32 - 3) as u32);
            });
            x[pos] = mx;
        }
        7 => x.iter_mut().for_each(|v| *v *= f32::MIN_POSITIVE), // half subnormal
        8 => x.iter_mut().for_each(|v| *v = f32::from_bits(rng.below(0x0080_0000) as u32) * v.signum()), // subnormal
        9 => x.iter_mut().for_each(|v| *v *= e(rng, -125, -122)), // -127/max overflows to inf
        10 => x.iter_mut().for_each(|v| *v *= e(rng, -120, -100)),
        11 => x.iter_mut().for_each(|v| *v *= 1e30),
        12 => {
            x.iter_mut().for_each(|v| *v *= f32::MAX);
            x[pos] = if rng.below(2) == 0 { f32::MAX } else { -f32::MAX };
        }
        13 => {
            // +M and -M both present: the first one wins
            x.iter_mut().for_each(|v| *v *= m);
            let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
            x[pos] = s * 1.5 * m;
            x[pos2] = -s * 1.5 * m;
        }
        14 => {
            // one-hot / sparse
            x.iter_mut().for_each(|v| *v = if rng.below(16) == 0 { *v * m } else { 0.0 });
            x[pos] = m;
        }
        15 => x.iter_mut().for_each(|v| *v *= e(rng, -40, 40)), // per-element exponents
        16 => {
            // infinities (iscale = -+0: inf * 0 is NaN)
            x[pos] = if rng.below(2) == 0 { f32::INFINITY } else { f32::NEG_INFINITY };
            if rng.below(2) == 0 {
                x[pos2] = -x[pos];
            }
        }
        17 => {
            // NaNs of several payloads and signs beside ordinary values: skipped by amax, their
            // qs from the payload as in C
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(QK_K as u64) as usize;
                x[i] = f32::from_bits(0x7f80_0001 | (rng.next() as u32 & 0x807f_ffff));
            }
        }
        18 => x.fill(f32::from_bits(0x7fc0_0000 | (rng.next() as u32 & 0x803f_ffff))), // NaNs only
        19 => {
            // NaNs and zeros only: amax 0
            x.iter_mut().for_each(|v| *v = if *v < 0.0 { f32::NAN } else { -0.0 });
        }
        20 => x.iter_mut().for_each(|v| *v = f32::from_bits(rng.next() as u32)), // any bits
        _ => {
            // the magnitude tie at many positions, mixed signs
            x.iter_mut().for_each(|v| *v = if rng.below(4) == 0 { m * v.signum() } else { *v * m });
        }
    }
    x
}

#[test]
fn edge_rows_every_level() {
    let mut rng = Rng(0x51AB);
    let mut rows = Vec::new();
    for r in 0..600u64 {
        let nb = 1 + rng.below(4) as usize;
        let x: Vec<f32> = (0..nb).flat_map(|b| edge_block((r + b as u64 * 7) % KINDS, &mut rng)).collect();
        rows.push(x);
    }
    // The near-tie rows must tell the contracts apart, or a contract mix-up would go unseen.
    let differ = rows
        .iter()
        .filter(|x| {
            let (mut a, mut b) = (blocks_filled(x.len() / QK_K, 0), blocks_filled(x.len() / QK_K, 0));
            quantize_row_q8_k(x, &mut a, Contract::Fused).unwrap();
            quantize_row_q8_k(x, &mut b, Contract::Unfused).unwrap();
            !same_bytes(&a, &b)
        })
        .count();
    assert!(differ >= 20, "only {differ} rows where fused and unfused differ");
    let blocks: usize = rows.iter().map(|x| x.len() / QK_K).sum();
    for level in levels() {
        for contract in CONTRACTS {
            for (i, x) in rows.iter().enumerate() {
                let fill = (i * 37) as u8;
                compare(level, x, contract, fill).unwrap_or_else(|e| panic!("row {i}: {e}"));
            }
        }
        println!(
            "edge rows {}: {} rows, {blocks} blocks x 2 contracts bit-identical ({differ} rows differ between contracts)",
            level.name(),
            rows.len()
        );
    }
}

#[test]
fn fast_is_the_reference() {
    let mut rng = Rng(7);
    for contract in CONTRACTS {
        for nb in [1usize, 16, 68] {
            let x: Vec<f32> = (0..nb * QK_K).map(|_| rng.unit() * 3.0).collect();
            let (mut a, mut b) = (blocks_filled(nb, 1), blocks_filled(nb, 1));
            quantize_row_q8_k(&x, &mut a, contract).unwrap();
            quantize_row_q8_k_fast(&x, &mut b, contract).unwrap();
            assert!(same_bytes(&a, &b), "{contract:?} {nb} blocks");
        }
    }
    let best = KernelLevel::best().map_or("ref", |l| l.name());
    println!("quantize_row_q8_k_fast runs the {best} level here");
}

#[test]
fn shapes_and_levels_refused() {
    let x = vec![1.0f32; 512];
    let mut y = blocks_filled(3, 0);
    for level in levels() {
        assert_eq!(quantize_q8_k(level, &x, &mut y, Contract::Fused), Err(Error::Shape), "{}", level.name());
        assert_eq!(quantize_q8_k(level, &x[..300], &mut y[..1], Contract::Fused), Err(Error::Shape));
        assert_eq!(quantize_q8_k(level, &[], &mut [], Contract::Fused), Ok(()));
    }
    for level in KernelLevel::ALL.into_iter().filter(|l| !l.is_available()) {
        assert_eq!(kernels::quantize_q8_k(level, &x, &mut y[..2], Contract::Fused), Err(Error::Unsupported));
    }
    assert_eq!(quantize_row_q8_k_fast(&x, &mut y, Contract::Fused), Err(Error::Shape));
}

/// One float: any bit pattern, or a value drawn to hit the interesting cases.
fn float() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -1.0f32..1.0,
        2 => any::<u32>().prop_map(f32::from_bits),
        1 => Just(0.0f32),
        1 => Just(-0.0f32),
        1 => (0u32..0x0080_0000).prop_map(f32::from_bits),
        1 => prop::sample::select(vec![1.0f32, -1.0, 127.0, -127.0, 63.5, -63.5, f32::MAX, -f32::MAX]),
    ]
}

/// A row of 1..=4 blocks; blocks are scaled by a power of two, and some are made all-equal,
/// zero, or given a +-max tie.
fn row() -> impl Strategy<Value = Vec<f32>> {
    (1usize..=4)
        .prop_flat_map(|nb| {
            (prop::collection::vec(float(), nb * QK_K), prop::collection::vec((0u8..6, -130i32..128, 0usize..QK_K), nb))
        })
        .prop_map(|(mut x, blocks)| {
            for (b, (kind, exp, pos)) in blocks.into_iter().enumerate() {
                let xb = &mut x[b * QK_K..(b + 1) * QK_K];
                let s = 2f32.powi(exp);
                match kind {
                    0 => {}
                    1 => xb.iter_mut().for_each(|v| *v *= s),
                    2 => xb.fill(xb[pos]),
                    3 => xb.fill(0.0),
                    4 => {
                        let m = xb.iter().fold(0.0f32, |a, v| if v.abs() > a { v.abs() } else { a });
                        xb[pos] = -m;
                        xb[(pos + 97) % QK_K] = m;
                    }
                    _ => xb.iter_mut().for_each(|v| *v = (*v * 127.0).round() * s),
                }
            }
            x
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn random_rows_every_level(x in row(), fill in any::<u8>()) {
        for level in levels() {
            for contract in CONTRACTS {
                if let Err(e) = compare(level, &x, contract, fill) {
                    prop_assert!(false, "{}", e);
                }
            }
        }
    }
}

/// The shim's start-up probe (`ggml_t2p_q8k_probe_input`, [`ggml_t2p::plugin::q8k_probe_input`])
/// must tell the two roundings apart, or it would always fall back to ggml's own quantizer: two
/// blocks of near-ties, at every level's quantizer.
#[test]
fn shim_probe_rows_tell_the_roundings_apart() {
    let x = ggml_t2p::plugin::q8k_probe_input();
    let (mut f, mut u) = (blocks_filled(2, 0x5A), blocks_filled(2, 0x5A));
    quantize_row_q8_k(&x, &mut f, Contract::Fused).unwrap();
    quantize_row_q8_k(&x, &mut u, Contract::Unfused).unwrap();
    let differ: usize = (0..2).map(|b| (0..QK_K).filter(|&j| f[b].qs[j] != u[b].qs[j]).count()).sum();
    println!("shim probe: {differ} of 512 qs differ between the roundings");
    assert!(differ > 0);
    for level in levels() {
        for (host, contract) in [(&f, Contract::Fused), (&u, Contract::Unfused)] {
            assert_eq!(ggml_t2p::plugin::q8k_rounding_matching(level, &x, host), Ok(Some(contract)), "{level:?}");
        }
    }
}
