//! The distance from our hybrid float ops to stock ggml-cpu's where stock is built for another
//! ISA (docs/numerics.md section 7, "Distance to stock" and "The bound, and why it is the right
//! one").
//!
//! Our contract is stock's arithmetic as ggml builds it with AVX-512 (tests/rust/hybrid.rs checks
//! that bit for bit). A stock build for AVX2 (8-lane vectors) or NEON (4 lanes) performs the same
//! elementwise operations on the same values, and differs only in the order of the two dot
//! products per state row and token (ggml-cpu's `ggml_vec_dot_f32`, written out here for each
//! build). For the short conv, a stock build may round each product before adding it (GCC's
//! vectorized `sumf += s * c`) where ours fuses it.
//!
//! **The bound the tests enforce**, per dot product or conv output: every order of a sum in which
//! no term goes through more than `h` roundings is within `gamma(h) * sum |x_i * y_i|` of the
//! exact value (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1 and
//! eq. 3.5), `gamma(h) = h u / (1 - h u)`, `u = 2^-24`. Two orders are therefore within the sum of
//! their two bounds of each other, and no smaller bound holds for every input (cancellation makes
//! the relative distance unbounded, so the bound is absolute, in units of `sum |x_i y_i|`). The
//! depths `h` for S = 128: ours 8 (2 FMAs per lane, 2 adds to combine the four accumulators, 4 to
//! reduce 16 lanes), AVX2 9 (4 + 2 + 3), NEON 12 (8 + 2 + 2); the conv 4 both ways.
//!
//! **What is measured, not bounded**: the whole gated delta rule over 64 tokens (the state carries
//! each token's rounding into the next), as distances printed in the test log (`distance:` lines)
//! and checked only for the property that matters to a user: ours is no farther from the exact
//! (f64) result than stock's own AVX2 and NEON orders are, within a factor of 2.

mod common;

use common::Rng;
use ggml_t2p::hybrid::reference;
use ggml_t2p::reference::fma_f32;

const U: f64 = 1.0 / (1u64 << 24) as f64;

fn gamma(h: usize) -> f64 {
    let hu = h as f64 * U;
    hu / (1.0 - hu)
}

/// ggml-cpu's `ggml_vec_dot_f32` as a build with `epr`-lane vectors computes it
/// (ggml-cpu/vec.cpp and simd-mappings.h): four vectors (`GGML_F32_STEP = 4 * epr`), element `i`
/// into vector `(i / epr) % 4`, lane `i % epr`, by FMA from `+0.0`; the vectors combined as
/// `(0 + 2) + (1 + 3)`; then the lanes. AVX (`epr` 8, `GGML_F32x8_REDUCE`): lane `l` plus `l + 4`,
/// then `_mm_hadd_ps` twice, `(0 + 1) + (2 + 3)`. NEON (`epr` 4, `GGML_F32x4_REDUCE` with
/// `vaddvq_f32`, two pairwise adds): `(0 + 1) + (2 + 3)`.
fn ggml_dot(x: &[f32], y: &[f32], epr: usize) -> f32 {
    assert!(epr == 8 || epr == 4);
    let step = 4 * epr;
    assert_eq!(x.len() % step, 0);
    let mut sum = [[0f32; 8]; 4];
    for i in (0..x.len()).step_by(step) {
        for (j, acc) in sum.iter_mut().enumerate() {
            for (l, a) in acc.iter_mut().enumerate().take(epr) {
                *a = fma_f32(x[i + epr * j + l], y[i + epr * j + l], *a);
            }
        }
    }
    let v: [f32; 8] = core::array::from_fn(|l| (sum[0][l] + sum[2][l]) + (sum[1][l] + sum[3][l]));
    let t: [f32; 4] = if epr == 8 { core::array::from_fn(|l| v[l] + v[l + 4]) } else { [v[0], v[1], v[2], v[3]] };
    (t[0] + t[1]) + (t[2] + t[3])
}

/// The depth `h` of each order for `n` terms (see the module docs).
fn depth(order: Order, n: usize) -> usize {
    match order {
        Order::Ours => n / 64 + 2 + 4,
        Order::Avx2 => n / 32 + 2 + 3,
        Order::Neon => n / 16 + 2 + 2,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Order {
    /// The contract: ggml built with AVX-512.
    Ours,
    /// ggml built for AVX2 (`-mavx2 -mfma`, no AVX-512).
    Avx2,
    /// ggml built for NEON (no SVE).
    Neon,
}

fn dot(order: Order, x: &[f32], y: &[f32]) -> f32 {
    match order {
        Order::Ours => reference::dot(x, y),
        Order::Avx2 => ggml_dot(x, y, 8),
        Order::Neon => ggml_dot(x, y, 4),
    }
}

/// The exact dot (f32 products are exact in f64) and `sum |x_i y_i|`, each with an f64 rounding
/// error below `n * 2^-53 * sum |x_i y_i|`.
fn exact_dot(x: &[f32], y: &[f32]) -> (f64, f64) {
    x.iter().zip(y).fold((0.0, 0.0), |(s, a), (&p, &q)| {
        let t = p as f64 * q as f64;
        (s + t, a + t.abs())
    })
}

fn unit(rng: &mut Rng) -> f32 {
    rng.unit()
}

/// Vector pairs of the kinds the model makes (normalized keys against state rows) and harder
/// ones: cancellation (`y` is `x` on one half and `-x` on the other) and wide magnitude ranges.
fn pairs(rng: &mut Rng, n: usize, count: usize) -> Vec<(Vec<f32>, Vec<f32>)> {
    (0..count)
        .map(|c| {
            let x: Vec<f32> = (0..n).map(|_| unit(rng)).collect();
            let y: Vec<f32> = match c % 3 {
                0 => (0..n).map(|_| unit(rng) / (n as f32).sqrt()).collect(),
                // y_i = x_i for the first half and -x_i for the second, plus noise: the sum is a
                // difference of two sums of squares, a small fraction of sum |x y|.
                1 => (0..n)
                    .map(|i| {
                        let s = if i < n / 2 { 1.0 } else { -1.0 };
                        s * x[i] + 1e-3 * unit(rng)
                    })
                    .collect(),
                _ => (0..n).map(|i| unit(rng) * f32::powi(2.0, (i % 24) as i32 - 12)).collect(),
            };
            (x, y)
        })
        .collect()
}

#[test]
fn every_dot_order_is_within_its_bound_so_ours_and_stocks_are_within_the_sum() {
    let mut rng = Rng(77);
    for n in [64, 128, 256] {
        let mut worst = [0f64; 3]; // distance / bound: ours-AVX2, ours-NEON, and the largest own error / bound
        let mut rel = [0f64; 2]; // the largest relative distance where |exact| > 1e-3 sum |xy|
        for (x, y) in pairs(&mut rng, n, 3000) {
            let (exact, abs) = exact_dot(&x, &y);
            let slack = n as f64 * f64::EPSILON * abs;
            let mut got = [0f32; 3];
            for (i, order) in [Order::Ours, Order::Avx2, Order::Neon].into_iter().enumerate() {
                got[i] = dot(order, &x, &y);
                let err = (got[i] as f64 - exact).abs();
                let bound = gamma(depth(order, n)) * abs + slack;
                assert!(err <= bound, "{order:?} n {n}: error {err:e} above its bound {bound:e}");
                worst[2] = worst[2].max(err / bound);
            }
            for (i, other) in [Order::Avx2, Order::Neon].into_iter().enumerate() {
                let dist = (got[0] as f64 - got[i + 1] as f64).abs();
                let bound = (gamma(depth(Order::Ours, n)) + gamma(depth(other, n))) * abs + 2.0 * slack;
                assert!(dist <= bound, "ours vs {other:?} n {n}: {dist:e} above {bound:e}");
                worst[i] = worst[i].max(dist / bound);
                if exact.abs() > 1e-3 * abs {
                    rel[i] = rel[i].max(dist / got[i + 1].abs() as f64);
                }
            }
        }
        println!(
            "distance: dot n {n}, 3000 pairs: ours vs AVX2 build at most {:.3} of the bound (relative {:.2e}), \
             vs NEON build {:.3} (relative {:.2e}); the largest own error {:.3} of its bound",
            worst[0], rel[0], worst[1], rel[1], worst[2]
        );
    }
}

#[test]
fn conv_fused_and_unfused_are_within_their_bounds() {
    let mut rng = Rng(78);
    let mut worst = 0f64;
    let mut rel = 0f64;
    for _ in 0..200_000 {
        let x: [f32; 4] = core::array::from_fn(|_| unit(&mut rng));
        let w: [f32; 4] = core::array::from_fn(|_| unit(&mut rng));
        let ours = reference::conv(&x, &w);
        // A stock build that vectorizes the products: each rounded, then added in order from 0.
        let stock = x.iter().zip(&w).fold(0.0f32, |acc, (&a, &b)| acc + a * b);
        let (exact, abs) = exact_dot(&x, &w);
        let slack = 4.0 * f64::EPSILON * abs;
        for (name, got) in [("fused", ours), ("unfused", stock)] {
            let err = (got as f64 - exact).abs();
            assert!(err <= gamma(4) * abs + slack, "{name}: {err:e} for {x:?} {w:?}");
        }
        let dist = (ours as f64 - stock as f64).abs();
        let bound = 2.0 * gamma(4) * abs + 2.0 * slack;
        assert!(dist <= bound);
        worst = worst.max(dist / bound);
        if exact.abs() > 1e-3 * abs {
            rel = rel.max(dist / stock.abs() as f64);
        }
    }
    println!(
        "distance: conv 4 taps, 200000 outputs: ours (fused) vs stock unfused at most {worst:.3} of the bound, \
         relative {rel:.2e}"
    );
}

/// One 128-wide head over `t` tokens in the contract's operations, with `dot` in the given order
/// (f32) or exactly (`None`: every operation in f64 from the same f32 inputs and `e`).
fn gdn_head(order: Option<Order>, state: &[f32], k: &[f32], q: &[f32], v: &[f32], e: &[f32], beta: &[f32]) -> Vec<f64> {
    let s = 128;
    let t = e.len();
    let scale = 1.0 / (s as f32).sqrt();
    let mut out = Vec::with_capacity(s * t + s * s);
    match order {
        Some(order) => {
            let mut m = state.to_vec();
            for tt in 0..t {
                let (kt, qt) = (&k[tt * s..][..s], &q[tt * s..][..s]);
                let mut o = vec![0f32; s];
                for j in 0..s {
                    let row = &mut m[j * s..][..s];
                    row.iter_mut().for_each(|x| *x *= e[tt]);
                    let delta = (v[tt * s + j] - dot(order, row, kt)) * beta[tt];
                    for (x, &ki) in row.iter_mut().zip(kt) {
                        *x = fma_f32(ki, delta, *x);
                    }
                    o[j] = dot(order, row, qt) * scale;
                }
                out.extend(o.iter().map(|&x| x as f64));
            }
            out.extend(m.iter().map(|&x| x as f64));
        }
        None => {
            let mut m: Vec<f64> = state.iter().map(|&x| x as f64).collect();
            let d = |a: &[f64], b: &[f32]| a.iter().zip(b).map(|(&x, &y)| x * y as f64).sum::<f64>();
            for tt in 0..t {
                let (kt, qt) = (&k[tt * s..][..s], &q[tt * s..][..s]);
                for j in 0..s {
                    let row = &mut m[j * s..][..s];
                    row.iter_mut().for_each(|x| *x *= e[tt] as f64);
                    let delta = (v[tt * s + j] as f64 - d(row, kt)) * beta[tt] as f64;
                    for (x, &ki) in row.iter_mut().zip(kt) {
                        *x += ki as f64 * delta;
                    }
                    out.push(d(row, qt) * scale as f64);
                }
            }
            out.extend(m);
        }
    }
    out
}

#[test]
fn gdn_over_64_tokens_ours_is_as_close_to_exact_as_stocks_other_builds() {
    let (s, t) = (128, 64);
    let mut rng = Rng(79);
    let mut worst_rel = [0f64; 2];
    for head in 0..4 {
        // As in the model: L2-normalized keys and queries, gates in (0, 1], beta in (0, 1).
        let normed = |rng: &mut Rng| {
            let mut x: Vec<f32> = (0..s).map(|_| unit(rng)).collect();
            let n = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            x.iter_mut().for_each(|a| *a /= n);
            x
        };
        let k: Vec<f32> = (0..t).flat_map(|_| normed(&mut rng)).collect();
        let q: Vec<f32> = (0..t).flat_map(|_| normed(&mut rng)).collect();
        let v: Vec<f32> = (0..s * t).map(|_| unit(&mut rng)).collect();
        let e: Vec<f32> = (0..t).map(|_| (-0.5 * unit(&mut rng).abs()).exp()).collect();
        let beta: Vec<f32> = (0..t).map(|_| 0.5 + 0.5 * unit(&mut rng)).collect();
        let state: Vec<f32> = (0..s * s).map(|_| unit(&mut rng) * 0.1).collect();
        let exact = gdn_head(None, &state, &k, &q, &v, &e, &beta);
        let norm = |a: &[f64], b: &[f64]| -> f64 {
            let top = b.iter().fold(0f64, |m, x| m.max(x.abs()));
            a.iter().zip(b).fold(0f64, |m, (x, y)| m.max((x - y).abs())) / top
        };
        let runs: Vec<Vec<f64>> = [Order::Ours, Order::Avx2, Order::Neon]
            .iter()
            .map(|&o| gdn_head(Some(o), &state, &k, &q, &v, &e, &beta))
            .collect();
        let outs = s * t;
        let mut line =
            format!("distance: gated delta rule, head {head}, S 128, 64 tokens (normwise, outputs / state):");
        for (name, r) in ["ours", "AVX2 build", "NEON build"].iter().zip(&runs) {
            line += &format!(
                " {name} vs exact {:.2e} / {:.2e};",
                norm(&r[..outs], &exact[..outs]),
                norm(&r[outs..], &exact[outs..])
            );
        }
        for (i, name) in ["AVX2", "NEON"].iter().enumerate() {
            let other = &runs[i + 1];
            line += &format!(
                " ours vs {name} build {:.2e} / {:.2e};",
                norm(&runs[0][..outs], &other[..outs]),
                norm(&runs[0][outs..], &other[outs..])
            );
            // Ours is no farther from exact than that build is (within 2x), on outputs and state.
            for range in [0..outs, outs..runs[0].len()] {
                let ours = norm(&runs[0][range.clone()], &exact[range.clone()]);
                let theirs = norm(&other[range.clone()], &exact[range.clone()]);
                assert!(ours <= 2.0 * theirs, "head {head}: ours {ours:e} vs exact, {name} build {theirs:e}");
            }
            // The largest elementwise relative distance over outputs of at least 1e-3 of the largest.
            let top = exact[..outs].iter().fold(0f64, |m, x| m.max(x.abs()));
            for j in 0..outs {
                if exact[j].abs() >= 1e-3 * top {
                    worst_rel[i] = worst_rel[i].max((runs[0][j] - other[j]).abs() / other[j].abs());
                }
            }
        }
        println!("{line}");
    }
    println!(
        "distance: gated delta rule, 4 heads x 64 tokens: the largest relative distance of an output (|x| >= 1e-3 of \
         the largest) ours vs AVX2 build {:.2e}, vs NEON build {:.2e}",
        worst_rel[0], worst_rel[1]
    );
}
