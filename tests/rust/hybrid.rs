//! The hybrid's float ops (`ggml_t2p::hybrid`): every level and work split gives the scalar
//! contract's bits; the contract is the stock op's arithmetic in stock's order (checked against a
//! second, literal transcription of ggml-cpu's loop structure); a ubatch split gives the same bits
//! as one ubatch; what we do not handle is declined.

mod common;

use common::Rng;
use ggml_t2p::hybrid::concat::Concat;
use ggml_t2p::hybrid::{reference, split, FloatPath, GatedDeltaNet, SsmConv, View};
use ggml_t2p::reference::fma_f32;
use ggml_t2p::Error;

/// Floats in [-1, 1), with some exact zeros and negative zeros (signs of zero must agree too).
fn randv(rng: &mut Rng, n: usize) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.below(50) {
            0 => 0.0,
            1 => -0.0,
            _ => rng.unit(),
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The float paths of every level under test.
fn paths() -> Vec<(String, FloatPath)> {
    common::levels().into_iter().map(|l| (l.name().to_string(), FloatPath::for_level(l))).collect()
}

/// A gated-delta-net problem in ggml's layout: q, k (S x Hk x T x nq3), v (S x H x T x n), g and
/// beta (1 x H x T x n), state (S*S*H x 1 x n).
struct Gdn {
    s: usize,
    h: usize,
    hk: usize,
    t: usize,
    n: usize,
    nq3: usize,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    g: Vec<f32>,
    beta: Vec<f32>,
    state: Vec<f32>,
}

impl Gdn {
    fn new(rng: &mut Rng, s: usize, h: usize, hk: usize, t: usize, n: usize, nq3: usize) -> Gdn {
        // L2-normalized-ish keys and queries keep the state bounded as in the model.
        let norm = 1.0 / (s as f32).sqrt();
        let mut kq = |len| randv(rng, len).into_iter().map(|x| x * norm).collect::<Vec<_>>();
        let q = kq(s * hk * t * nq3);
        let k = kq(s * hk * t * nq3);
        let v = randv(rng, s * h * t * n);
        let g = (0..h * t * n).map(|_| -rng.unit().abs() * 2.0).collect();
        let beta = (0..h * t * n).map(|_| 0.5 + 0.5 * rng.unit()).collect();
        let state = randv(rng, s * s * h * n);
        Gdn { s, h, hk, t, n, nq3, q, k, v, g, beta, state }
    }

    fn out_len(&self) -> usize {
        self.s * self.h * self.t * self.n + self.s * self.s * self.h * self.n
    }

    fn views(&self) -> [View; 6] {
        let (s, h, hk, t, n, nq3) = (self.s, self.h, self.hk, self.t, self.n, self.nq3);
        [
            View::contiguous(self.q.as_ptr(), [s, hk, t, nq3]),
            View::contiguous(self.k.as_ptr(), [s, hk, t, nq3]),
            View::contiguous(self.v.as_ptr(), [s, h, t, n]),
            View::contiguous(self.g.as_ptr(), [1, h, t, n]),
            View::contiguous(self.beta.as_ptr(), [1, h, t, n]),
            View::contiguous(self.state.as_ptr(), [s * s * h, 1, n, 1]),
        ]
    }

    /// Runs with `path`, its units split over `parts` "threads" (run one after another, in an
    /// order that is not theirs).
    fn run(&self, path: FloatPath, parts: usize) -> Vec<f32> {
        let mut dst = vec![f32::NAN; self.out_len()];
        // SAFETY: the views describe this problem's vectors, dst has out_len floats.
        let op = unsafe { GatedDeltaNet::new(self.views(), dst.as_mut_ptr(), dst.len()) }.expect("handled");
        for i in (0..parts).rev() {
            op.run(path, split(op.units(), parts, i));
        }
        dst
    }

    /// ggml-cpu's loop literally: the whole state scaled, then every delta, then every update,
    /// then every output (ops.cpp, `gated_delta_net_one_chunk`), with the contract's dot.
    fn stock_order(&self) -> Vec<f32> {
        let (s, h, t_n) = (self.s, self.h, self.t);
        let mut dst = vec![0f32; self.out_len()];
        let out_len = s * h * t_n * self.n;
        let scale = 1.0 / (s as f32).sqrt();
        for sq in 0..self.n {
            for hv in 0..h {
                let mut m = self.state[(sq * h + hv) * s * s..][..s * s].to_vec();
                let (iq1, iq3) = (hv % self.hk, sq / (self.n / self.nq3));
                for t in 0..t_n {
                    let kq = ((iq3 * t_n + t) * self.hk + iq1) * s;
                    let (k, q) = (&self.k[kq..kq + s], &self.q[kq..kq + s]);
                    let v = &self.v[((sq * t_n + t) * h + hv) * s..][..s];
                    let gi = (sq * t_n + t) * h + hv;
                    let e = self.g[gi].exp();
                    m.iter_mut().for_each(|x| *x *= e);
                    let delta: Vec<f32> =
                        (0..s).map(|j| (v[j] - reference::dot(&m[j * s..][..s], k)) * self.beta[gi]).collect();
                    for j in 0..s {
                        for i in 0..s {
                            m[j * s + i] = fma_f32(k[i], delta[j], m[j * s + i]);
                        }
                    }
                    for j in 0..s {
                        dst[((sq * t_n + t) * h + hv) * s + j] = reference::dot(&m[j * s..][..s], q) * scale;
                    }
                }
                dst[out_len + (sq * h + hv) * s * s..][..s * s].copy_from_slice(&m);
            }
        }
        dst
    }
}

#[test]
fn gdn_contract_is_stock_order() {
    let mut rng = Rng(11);
    for &(s, h, hk, t, n, nq3) in
        &[(64, 2, 2, 3, 1, 1), (128, 4, 2, 5, 2, 1), (128, 2, 1, 1, 2, 2), (256, 1, 1, 2, 1, 1)]
    {
        let p = Gdn::new(&mut rng, s, h, hk, t, n, nq3);
        let want = p.stock_order();
        assert_eq!(bits(&p.run(FloatPath::Scalar, 1)), bits(&want), "S {s} H {h} Hk {hk} T {t} n {n}");
    }
}

#[test]
fn gdn_every_level_and_split_same_bits() {
    let mut rng = Rng(12);
    for &(s, h, hk, t, n, nq3) in
        &[(128, 4, 2, 7, 2, 1), (64, 3, 3, 2, 1, 1), (256, 2, 1, 3, 2, 2), (128, 16, 16, 1, 1, 1)]
    {
        let p = Gdn::new(&mut rng, s, h, hk, t, n, nq3);
        let want = bits(&p.run(FloatPath::Scalar, 1));
        assert!(p.run(FloatPath::Scalar, 1).iter().all(|x| x.is_finite()));
        for (name, path) in paths() {
            for parts in [1, 2, 3, 16, 1000] {
                assert_eq!(bits(&p.run(path, parts)), want, "{name} parts {parts} S {s} H {h} T {t}");
            }
        }
    }
}

#[test]
fn gdn_ubatch_split_same_bits() {
    let mut rng = Rng(13);
    let (s, h, t) = (128, 4, 9);
    let whole = Gdn::new(&mut rng, s, h, h, t, 1, 1);
    for (name, path) in paths() {
        let want = whole.run(path, 2);
        for cut in [1, 4, 8] {
            // First ubatch: tokens 0..cut from the initial state; second: the rest from its state.
            let part = |t0: usize, t1: usize, state: &[f32]| {
                let take = |x: &[f32], w: usize| x[t0 * w * h..t1 * w * h].to_vec();
                let p = Gdn {
                    s,
                    h,
                    hk: h,
                    t: t1 - t0,
                    n: 1,
                    nq3: 1,
                    q: take(&whole.q, s),
                    k: take(&whole.k, s),
                    v: take(&whole.v, s),
                    g: take(&whole.g, 1),
                    beta: take(&whole.beta, 1),
                    state: state.to_vec(),
                };
                p.run(path, 3)
            };
            let a = part(0, cut, &whole.state);
            let b = part(cut, t, &a[s * h * cut..]);
            let mut got = a[..s * h * cut].to_vec();
            got.extend_from_slice(&b);
            assert_eq!(bits(&got), bits(&want), "{name} cut {cut}");
        }
    }
}

#[test]
fn gdn_declines_what_stock_must_run() {
    let mut rng = Rng(14);
    let p = Gdn::new(&mut rng, 128, 2, 2, 2, 1, 1);
    let mut dst = vec![0f32; p.out_len()];
    let try_views = |v: [View; 6], dst: &mut [f32]| unsafe { GatedDeltaNet::new(v, dst.as_mut_ptr(), dst.len()) }.err();
    assert_eq!(try_views(p.views(), &mut dst), None);
    // A gate per element (KDA).
    let g_kda = vec![0f32; 128 * 2 * 2];
    let mut v = p.views();
    v[3] = View::contiguous(g_kda.as_ptr(), [128, 2, 2, 1]);
    assert_eq!(try_views(v, &mut dst), Some(Error::Unsupported));
    // Two state slots (K > 1).
    let st2 = vec![0f32; 128 * 128 * 2 * 2];
    let mut v = p.views();
    v[5] = View::contiguous(st2.as_ptr(), [128 * 128 * 2, 2, 1, 1]);
    assert_eq!(try_views(v, &mut dst), Some(Error::Unsupported));
    // A head size that is not a multiple of 64.
    let p96 = Gdn::new(&mut rng, 96, 1, 1, 1, 1, 1);
    let mut d96 = vec![0f32; p96.out_len()];
    assert_eq!(try_views(p96.views(), &mut d96), Some(Error::Unsupported));
    // Strided rows.
    let mut v = p.views();
    v[0].nb[0] = 8;
    assert_eq!(try_views(v, &mut dst), Some(Error::Unsupported));
    // A destination too small, and one that overlaps a source.
    assert_eq!(try_views(p.views(), &mut dst[1..]), Some(Error::Shape));
    let mut big = vec![0f32; p.out_len() + p.state.len()];
    let mut v = p.views();
    v[5] = View::contiguous(big[p.out_len()..].as_ptr(), [128 * 128 * 2, 1, 1, 1]);
    assert_eq!(try_views(v, &mut big[..p.out_len()]), None);
    v[5] = View::contiguous(big[p.out_len() - 4..].as_ptr(), [128 * 128 * 2, 1, 1, 1]);
    assert_eq!(try_views(v, &mut big[..p.out_len()]), Some(Error::Unsupported));
    // Shapes that disagree.
    let mut v = p.views();
    v[4] = View::contiguous(p.beta.as_ptr(), [1, 1, 2, 1]);
    assert_eq!(try_views(v, &mut dst), Some(Error::Shape));
    let mut v = p.views();
    v[0].ne[1] = 3;
    assert_eq!(try_views(v, &mut dst), Some(Error::Shape));
    // Null.
    let mut v = p.views();
    v[2].data = core::ptr::null();
    assert_eq!(try_views(v, &mut dst), Some(Error::Null));
}

/// The short conv: x (n - 1 + T) x ch x seqs, w n x ch, dst ch x T x seqs.
#[allow(clippy::too_many_arguments)]
fn conv_run(
    path: FloatPath,
    x: &[f32],
    w: &[f32],
    n: usize,
    ch: usize,
    t: usize,
    seqs: usize,
    parts: usize,
) -> Vec<f32> {
    let mut dst = vec![f32::NAN; ch * t * seqs];
    let xv = View::contiguous(x.as_ptr(), [n - 1 + t, ch, seqs, 1]);
    let wv = View::contiguous(w.as_ptr(), [n, ch, 1, 1]);
    let dv = View::contiguous(dst.as_mut_ptr().cast_const(), [ch, t, seqs, 1]);
    // SAFETY: the views describe these vectors.
    let op = unsafe { SsmConv::new(xv, wv, dv) }.expect("handled");
    for i in 0..parts {
        op.run(path, split(op.units(), parts, i));
    }
    dst
}

#[test]
fn conv_every_level_and_split_is_the_contract() {
    let mut rng = Rng(21);
    for &(n, ch, t, seqs) in &[
        (4, 48, 1, 1),
        (4, 20, 3, 2),
        (4, 37, 64, 1),
        (4, 32, 130, 2),
        (3, 16, 65, 1),
        (8, 17, 9, 1),
        (1, 5, 2, 1),
        (4, 101, 40, 1), // more whole 16-channel units than the AVX-512 path prefetches ahead, a tail of each
    ] {
        let x = randv(&mut rng, (n - 1 + t) * ch * seqs);
        let w = randv(&mut rng, n * ch);
        // ggml-cpu's loop, with its sum contracted to FMAs.
        let mut want = vec![0f32; ch * t * seqs];
        for sq in 0..seqs {
            for tt in 0..t {
                for c in 0..ch {
                    let xr = &x[(sq * ch + c) * (n - 1 + t) + tt..][..n];
                    want[(sq * t + tt) * ch + c] = reference::conv(xr, &w[c * n..][..n]);
                }
            }
        }
        for (name, path) in paths() {
            for parts in [1, 2, 5] {
                assert_eq!(
                    bits(&conv_run(path, &x, &w, n, ch, t, seqs, parts)),
                    bits(&want),
                    "{name} n {n} ch {ch} T {t}"
                );
            }
        }
    }
}

#[test]
fn conv_declines_what_stock_must_run() {
    let x = [0f32; 12 * 4];
    let w = [0f32; 9 * 4];
    let dst = [0f32; 4 * 4];
    // SAFETY: every view lies inside its vector.
    let make = |xv, wv, dv| unsafe { SsmConv::new(xv, wv, dv) }.err();
    let ok = make(
        View::contiguous(x.as_ptr(), [7, 4, 1, 1]),
        View::contiguous(w.as_ptr(), [4, 4, 1, 1]),
        View::contiguous(dst.as_ptr(), [4, 4, 1, 1]),
    );
    assert_eq!(ok, None);
    // Nine taps: wider than MAX_CONV.
    let wide = make(
        View::contiguous(x.as_ptr(), [12, 4, 1, 1]),
        View::contiguous(w.as_ptr(), [9, 4, 1, 1]),
        View::contiguous(dst.as_ptr(), [4, 4, 1, 1]),
    );
    assert_eq!(wide, Some(Error::Unsupported));
    // Tokens that disagree with the window.
    let bad = make(
        View::contiguous(x.as_ptr(), [8, 4, 1, 1]),
        View::contiguous(w.as_ptr(), [4, 4, 1, 1]),
        View::contiguous(dst.as_ptr(), [4, 4, 1, 1]),
    );
    assert_eq!(bad, Some(Error::Shape));
    // Output on top of the input.
    let over = make(
        View::contiguous(x.as_ptr(), [7, 4, 1, 1]),
        View::contiguous(w.as_ptr(), [4, 4, 1, 1]),
        View::contiguous(x.as_ptr(), [4, 4, 1, 1]),
    );
    assert_eq!(over, Some(Error::Unsupported));
}

#[test]
fn gdn_strided_and_seq_broadcast() {
    let mut rng = Rng(99);
    let (s, h, hk, t_n, n, nq3) = (128usize, 4usize, 2usize, 3usize, 4usize, 2usize);
    // q/k: rows of s floats, nb1 = (s + 32) floats, nb2 = hk*(s+32)+64, nb3 = t_n*nb2 + 128
    let kq_nb = [4, 4 * (s + 32), 4 * (hk * (s + 32) + 64), 4 * (t_n * (hk * (s + 32) + 64) + 128)];
    let kq_len = kq_nb[3] / 4 * nq3;
    let norm = 1.0 / (s as f32).sqrt();
    let q: Vec<f32> = randv(&mut rng, kq_len).iter().map(|x| x * norm).collect();
    let k: Vec<f32> = randv(&mut rng, kq_len).iter().map(|x| x * norm).collect();
    // v: like qwen35: nb1 = s, nb2 = (3*h*s) (qkv row), nb3 = t_n * nb2
    let v_nb = [4, 4 * s, 4 * 3 * h * s, 4 * 3 * h * s * t_n];
    let v = randv(&mut rng, v_nb[3] / 4 * n);
    let g: Vec<f32> = (0..h * t_n * n).map(|_| -rng.unit().abs()).collect();
    let beta: Vec<f32> = (0..h * t_n * n).map(|_| 0.5 + 0.5 * rng.unit()).collect();
    let state = randv(&mut rng, s * s * h * n);
    let views = [
        View { data: q.as_ptr(), ne: [s, hk, t_n, nq3], nb: kq_nb },
        View { data: k.as_ptr(), ne: [s, hk, t_n, nq3], nb: kq_nb },
        View { data: v.as_ptr(), ne: [s, h, t_n, n], nb: v_nb },
        View::contiguous(g.as_ptr(), [1, h, t_n, n]),
        View::contiguous(beta.as_ptr(), [1, h, t_n, n]),
        View::contiguous(state.as_ptr(), [s * s * h, 1, n, 1]),
    ];
    let out_len = s * h * t_n * n;
    // stock, literally (ops.cpp), with the contract's dot
    let mut want = vec![0f32; out_len + s * s * h * n];
    let scale = 1.0 / (s as f32).sqrt();
    for sq in 0..n {
        for hv in 0..h {
            let (iq1, iq3) = (hv % hk, sq / (n / nq3));
            let mut m = state[(sq * h + hv) * s * s..][..s * s].to_vec();
            for t in 0..t_n {
                let o = (iq3 * kq_nb[3] + t * kq_nb[2] + iq1 * kq_nb[1]) / 4;
                let (kk, qq) = (&k[o..o + s], &q[o..o + s]);
                let vo = (sq * v_nb[3] + t * v_nb[2] + hv * v_nb[1]) / 4;
                let vv = &v[vo..vo + s];
                let gi = (sq * t_n + t) * h + hv;
                let e = g[gi].exp();
                m.iter_mut().for_each(|x| *x *= e);
                let d: Vec<f32> = (0..s).map(|j| (vv[j] - reference::dot(&m[j * s..][..s], kk)) * beta[gi]).collect();
                for j in 0..s {
                    for i in 0..s {
                        m[j * s + i] = fma_f32(kk[i], d[j], m[j * s + i]);
                    }
                }
                for j in 0..s {
                    want[((sq * t_n + t) * h + hv) * s + j] = reference::dot(&m[j * s..][..s], qq) * scale;
                }
            }
            want[out_len + (sq * h + hv) * s * s..][..s * s].copy_from_slice(&m);
        }
    }
    for l in common::levels() {
        let path = FloatPath::for_level(l);
        for parts in [1, 3, 7] {
            let mut dst = vec![f32::NAN; want.len()];
            // SAFETY: the views describe the vectors above, dst has out_len + state floats.
            let op = unsafe { GatedDeltaNet::new(views, dst.as_mut_ptr(), dst.len()) }.expect("handled");
            for i in 0..parts {
                op.run(path, split(op.units(), parts, i));
            }
            let a: Vec<u32> = dst.iter().map(|x| x.to_bits()).collect();
            let b: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
            assert!(a == b, "{} parts {parts}", l.name());
        }
    }
}

#[test]
fn conv_strided_x_and_dst() {
    let mut rng = Rng(7);
    let (n, ch, t_n, seqs) = (4usize, 37usize, 35usize, 3usize);
    let x_nb = [4, 4 * (n - 1 + t_n), 4 * ((n - 1 + t_n) * ch + 40), 0];
    let x = randv(&mut rng, x_nb[2] / 4 * seqs);
    let w = randv(&mut rng, n * ch);
    let d_nb = [4, 4 * (ch + 11), 4 * ((ch + 11) * t_n + 5), 0];
    let mut dst = vec![f32::NAN; d_nb[2] / 4 * seqs];
    let xv = View { data: x.as_ptr(), ne: [n - 1 + t_n, ch, seqs, 1], nb: [x_nb[0], x_nb[1], x_nb[2], x_nb[2] * seqs] };
    let wv = View::contiguous(w.as_ptr(), [n, ch, 1, 1]);
    for l in common::levels() {
        dst.iter_mut().for_each(|x| *x = f32::NAN);
        let dv = View {
            data: dst.as_mut_ptr().cast_const(),
            ne: [ch, t_n, seqs, 1],
            nb: [d_nb[0], d_nb[1], d_nb[2], d_nb[2] * seqs],
        };
        // SAFETY: the views lie inside x, w and dst.
        let op = unsafe { SsmConv::new(xv, wv, dv) }.expect("handled");
        for i in 0..2 {
            op.run(FloatPath::for_level(l), split(op.units(), 2, i));
        }
        for sq in 0..seqs {
            for t in 0..t_n {
                for c in 0..ch {
                    let xo = (sq * x_nb[2] + c * x_nb[1]) / 4 + t;
                    let want = reference::conv(&x[xo..xo + n], &w[c * n..][..n]);
                    let got = dst[(sq * d_nb[2] + t * d_nb[1]) / 4 + c];
                    assert_eq!(got.to_bits(), want.to_bits(), "{} sq {sq} t {t} c {c}", l.name());
                }
            }
        }
    }
}

/// ggml-cpu's `ggml_vec_dot_f32` as its AVX-512 build computes it (GGML_F32_STEP 64, four 16-lane
/// sums, GGML_F32x16_REDUCE, then GCC's `_mm512_reduce_add_ps`: 256-bit halves, 128-bit halves,
/// shuffle {2,3,0,1}, shuffle {1,0,1,0}), written out here independently of `reference::dot`.
fn ggml_avx512_dot(x: &[f32], y: &[f32]) -> f32 {
    let mut sum = [[0f32; 16]; 4];
    for i in (0..x.len()).step_by(64) {
        for (j, acc) in sum.iter_mut().enumerate() {
            for (l, a) in acc.iter_mut().enumerate() {
                *a = fma_f32(x[i + 16 * j + l], y[i + 16 * j + l], *a);
            }
        }
    }
    let add = |a: [f32; 16], b: [f32; 16]| -> [f32; 16] { core::array::from_fn(|l| a[l] + b[l]) };
    let x01 = add(add(sum[0], sum[2]), add(sum[1], sum[3]));
    let t3: [f32; 8] = core::array::from_fn(|l| x01[8 + l] + x01[l]);
    let t6: [f32; 4] = core::array::from_fn(|l| t3[4 + l] + t3[l]);
    let t8 = [t6[0] + t6[2], t6[1] + t6[3]];
    t8[0] + t8[1]
}

#[test]
fn contract_dot_is_ggml_avx512_order() {
    let mut rng = Rng(31);
    for n in [64, 128, 256] {
        for _ in 0..2000 {
            let (x, y) = (randv(&mut rng, n), randv(&mut rng, n));
            assert_eq!(reference::dot(&x, &y).to_bits(), ggml_avx512_dot(&x, &y).to_bits(), "n {n}");
        }
    }
}

#[test]
fn declines_sources_that_disagree_or_overlap() {
    let mut rng = Rng(41);
    let p = Gdn::new(&mut rng, 128, 2, 2, 3, 1, 1);
    let mut dst = vec![0f32; p.out_len()];
    // q and k for fewer tokens than v: Shape (they would be read past their end).
    let mut v = p.views();
    v[0].ne[2] = 2;
    // SAFETY: nothing is read on a decline.
    assert_eq!(unsafe { GatedDeltaNet::new(v, dst.as_mut_ptr(), dst.len()) }.err(), Some(Error::Shape));
    // A misaligned source: declined.
    let mut v = p.views();
    v[2].data = (v[2].data as usize + 2) as *const f32;
    // SAFETY: as above.
    assert_eq!(unsafe { GatedDeltaNet::new(v, dst.as_mut_ptr(), dst.len()) }.err(), Some(Error::Unsupported));
    // A conv whose output overlaps its weights, or whose output rows overlap each other.
    let x = [0f32; 7 * 4];
    let mut w = [0f32; 4 * 4 + 16];
    let wv = View::contiguous(w.as_ptr(), [4, 4, 1, 1]);
    let over = View::contiguous(w[8..].as_mut_ptr().cast_const(), [4, 4, 1, 1]);
    let xv = View::contiguous(x.as_ptr(), [7, 4, 1, 1]);
    // SAFETY: as above.
    assert_eq!(unsafe { SsmConv::new(xv, wv, over) }.err(), Some(Error::Unsupported));
    let mut out = [0f32; 64];
    let mut rows = View::contiguous(out.as_mut_ptr().cast_const(), [4, 4, 1, 1]);
    rows.nb[1] = 8;
    // SAFETY: as above.
    assert_eq!(unsafe { SsmConv::new(xv, wv, rows) }.err(), Some(Error::Unsupported));
}

/// ggml's CONCAT, literally: every destination element from `a` inside its shape, else from `b`
/// shifted along `dim` (the element loop of ggml-cpu's `concat_f32`).
fn naive_concat(a: &View, b: &View, ne: [usize; 4], dim: usize) -> Vec<u32> {
    let mut out = Vec::with_capacity(ne.iter().product());
    for i3 in 0..ne[3] {
        for i2 in 0..ne[2] {
            for i1 in 0..ne[1] {
                for i0 in 0..ne[0] {
                    let i = [i0, i1, i2, i3];
                    let (src, mut j) = if (0..4).all(|d| i[d] < a.ne[d]) { (a, i) } else { (b, i) };
                    if !core::ptr::eq(src, a) {
                        j[dim] -= a.ne[dim];
                    }
                    let off: usize = (0..4).map(|d| j[d] * src.nb[d]).sum();
                    // SAFETY: j is inside src's shape; the test's buffers hold the views.
                    out.push(unsafe { *src.data.byte_add(off) }.to_bits());
                }
            }
        }
    }
    out
}

/// CONCAT along every dimension, with the second source a transposed view (as the
/// Gated-DeltaNet conv input's new tokens) or contiguous, split over 1..=4 threads in every
/// order: ggml's element loop, bit for bit, and nothing written past the destination.
#[test]
fn concat_every_dim_and_split_is_ggml_copy() {
    let mut rng = Rng(0xCA7);
    // (a.ne, b.ne) per case; dst = a then b along the dimension where they differ
    let cases: [([usize; 4], [usize; 4]); 7] = [
        ([3, 40, 1, 1], [37, 40, 1, 1]),  // the conv input: 3 kept + 37 tokens, 40 channels
        ([3, 32, 2, 1], [20, 32, 2, 1]),  // two sequences of whole 16-row units
        ([3, 33, 2, 1], [1, 33, 2, 1]),   // one token, two sequences
        ([5, 7, 2, 1], [5, 9, 2, 1]),     // dim 1
        ([4, 3, 2, 2], [4, 3, 5, 2]),     // dim 2
        ([6, 5, 3, 1], [6, 5, 3, 2]),     // dim 3
        ([1, 18, 1, 1], [130, 18, 1, 1]), // rows longer than a unit's
    ];
    let mut checked = 0;
    for (ci, (ane, bne)) in cases.into_iter().enumerate() {
        let dim = (0..4).find(|&d| ane[d] != bne[d]).unwrap();
        let mut ne = ane;
        ne[dim] += bne[dim];
        let av = randv(&mut rng, ane.iter().product());
        let a = View::contiguous(av.as_ptr(), ane);
        let bn: usize = bne.iter().product();
        let bv = randv(&mut rng, bn);
        for transposed in [false, true] {
            // transposed: b's elements stored with dims 0 and 1 swapped (ggml_transpose of a
            // contiguous [ne1, ne0] tensor)
            let b = if transposed {
                let nb = [4 * bne[1], 4, 4 * bne[0] * bne[1], 4 * bne[0] * bne[1] * bne[2]];
                View { data: bv.as_ptr(), ne: bne, nb }
            } else {
                View::contiguous(bv.as_ptr(), bne)
            };
            let want = naive_concat(&a, &b, ne, dim);
            let len = want.len();
            for (name, path) in paths() {
                for nth in 1..=4 {
                    let mut out = vec![f32::from_bits(0x7FC0_BEEF); len + 8];
                    let d = View::contiguous(out.as_mut_ptr(), ne);
                    // SAFETY: the views describe the vectors above, which outlive the op.
                    let cat = unsafe { Concat::new(a, b, d) }.unwrap();
                    assert_eq!(cat.dim(), dim);
                    for ith in (0..nth).rev() {
                        cat.run_with(path, split(cat.units(), nth, ith));
                    }
                    assert_eq!(bits(&out[..len]), want, "case {ci} {name} transposed {transposed} nth {nth}");
                    assert!(out[len..].iter().all(|x| x.to_bits() == 0x7FC0_BEEF), "case {ci}: written past dst");
                    checked += len;
                }
            }
        }
    }
    println!(
        "concat: {checked} floats, every dim, transposed and contiguous sources, 1..=4 threads, every level: ggml's copy"
    );
}

/// CONCAT declines what ggml must run, and refuses what does not fit, writing nothing.
#[test]
fn concat_declines_what_stock_must_run() {
    let av = [1.0f32; 3 * 8];
    let bv = [2.0f32; 5 * 8];
    let mut out = vec![0.0f32; 8 * 8 + 8];
    let a = View::contiguous(av.as_ptr(), [3, 8, 1, 1]);
    let b = View::contiguous(bv.as_ptr(), [5, 8, 1, 1]);
    let d = View::contiguous(out.as_mut_ptr(), [8, 8, 1, 1]);
    let new = |a: View, b: View, d: View| unsafe { Concat::new(a, b, d) }.map(|c| c.dim());
    assert_eq!(new(a, b, d), Ok(0));
    // sizes that add up nowhere, or disagree in another dimension
    assert_eq!(new(a, b, View::contiguous(d.data, [9, 8, 1, 1])), Err(Error::Shape));
    assert_eq!(
        new(a, View::contiguous(bv.as_ptr(), [5, 7, 1, 1]), View::contiguous(d.data, [8, 7, 1, 1])),
        Err(Error::Shape)
    );
    // a destination with gaps between rows, an empty source, a misaligned source
    assert_eq!(new(a, b, View { nb: [4, 36, 288, 288], ..d }), Err(Error::Unsupported));
    assert_eq!(new(View { ne: [0, 8, 1, 1], ..a }, View { ne: [8, 8, 1, 1], ..b }, d), Err(Error::Unsupported));
    let mis = View { data: av.as_ptr().cast::<u8>().wrapping_add(2).cast(), ..a };
    assert_eq!(new(mis, b, d), Err(Error::Unsupported));
    // a destination overlapping a source, and null pointers
    assert_eq!(new(View::contiguous(out.as_ptr().wrapping_add(4), [3, 8, 1, 1]), b, d), Err(Error::Unsupported));
    assert_eq!(new(View { data: core::ptr::null(), ..a }, b, d), Err(Error::Null));
    // a destination whose dense size overflows is not dense (declined, no overflow)
    let huge = View { ne: [1 << 62, 8, 1, 1], nb: [0, 0, 0, 0], ..d };
    assert_eq!(
        new(View { ne: [1 << 61, 8, 1, 1], nb: [0; 4], ..a }, View { ne: [1 << 61, 8, 1, 1], nb: [0; 4], ..b }, huge),
        Err(Error::Unsupported)
    );
}
