//! Kernel microbenchmarks (criterion). Throughput is reported in weight bytes and in weights
//! (elements; for gemm, weights x columns, i.e. multiply-adds). `tools/bench-report.py` turns a
//! run's results into one table, gemv as a share of the read bandwidth and gemm as a share of its
//! level's issue limit, both measured in the same run.
//!
//! - `call/*`: per-call overhead: `CpuFeatures::detect` and the smallest gemv (one row tile).
//! - `read_bw/*`: the machine's plain read bandwidth (a sum over 256 MiB), 1 thread and all
//!   threads: the ceiling a DRAM-streamed gemv is held against.
//! - `issue_limit/*`: the peak MAC rate of each level's instruction (`vpdpbusd` zmm, AVX-VNNI
//!   `vpdpbusd` ymm, `vpmaddubsw` ymm, AMX `tdpbssd`) on this machine, where the CPU has it, 1
//!   thread and all threads: the ceiling each level's gemm is held against.
//! - `repack/*`: PQ2_0 -> T2P, PQ2_0 -> X16, PTQ1_0 -> T2P, PTQ1_0 -> PTQ1_0x4 on a 17408 x 5120
//!   matrix, with 1 thread and with all threads (portable: runs everywhere).
//! - `reference/*`: the scalar `_generic` kernels (portable; the slow exact twin).
//! - `quantize/*`: Q8_K activation quantization of a 4096- and a 17408-value row, the reference
//!   quantizer and the SIMD one of each level this CPU has, both roundings.
//! - With a SIMD level (aarch64: dotprod/i8mm on T2P; x86-64: AVX2/AVX-VNNI/AVX-512 VNNI on X16),
//!   for every level this CPU has: `gemv_dram/*` (131072 x 32768, 1.14 GB of weights streamed
//!   from DRAM), `gemv/*`, `gemm2/*`, `gemm3/*`, `gemm4/*`, `gemm64/*` on the Bonsai 2 27B shapes (rows x k:
//!   5120 x 17408, 17408 x 5120, 5120 x 6144, 6144 x 5120), gemv on 1 thread and on all threads,
//!   gemm on all threads; and (aarch64) `ptq1_0/*` native vs via T2P.
//!
//! - `hybrid/*`: the Gated-DeltaNet hybrid's float ops at the Bonsai 2 2B shapes, one thread, the
//!   scalar contract and each float path this CPU has: the gated delta rule (`gdn`: head size 128,
//!   16 heads, one token and a 512-token ubatch) and the short conv (`ssm_conv`: 6144 channels, 4
//!   taps, 1 and 512 tokens). Throughput in elements: state values per token (`gdn`), outputs
//!   (`ssm_conv`).
//!
//! Activations are packed once per benchmark, outside the timed loop (ggml packs once per
//! MUL_MAT; the pack is a few microseconds against milliseconds of weights). Multi-threaded runs
//! use one persistent rayon pool (`ThreadPool::install`), built once: the seeds measured 282
//! instead of 391 Gweights/s when threads were spawned per iteration. Set
//! `GGML_T2P_BENCH_THREADS` to choose the pool size (default: all cores). Weights are typical
//! scales (0.01..0.02) and activations of magnitude ~1: no denormal products, which would make
//! the float step ~16x slower and say nothing about the kernels.

#[path = "support/peak.rs"]
mod peak;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml_t2p::format::{BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK};
use ggml_t2p::reference::{quantize_row_q8_k_padded, Contract};
use ggml_t2p::repack::{
    repack_pq2_0_to_t2p, repack_pq2_0_to_x16, repack_ptq1_0_to_t2p, repack_ptq1_0_to_x16, repack_ptq1_0_to_x4,
    repacked_blocks, Layout, SourceType,
};
use ggml_t2p::{kernels, Activations, KernelLevel, PackedWeights};
use half::f16;
use std::time::Duration;

#[path = "../examples/common/mod.rs"]
mod common;
#[path = "../tests/rust/common/rng.rs"]
mod rng;
use rng::Rng;

fn pq2_0(n_rows: usize, k: usize) -> Vec<BlockPq2_0> {
    let mut rng = Rng(1);
    (0..n_rows * k / QK)
        .map(|_| {
            let codes: [u8; 128] = std::array::from_fn(|_| (rng.next() % 3) as u8);
            BlockPq2_0::from_codes(f16::from_f32(0.01 + (rng.next() % 100) as f32 * 1e-4), &codes)
        })
        .collect()
}

fn ptq1_0(n_rows: usize, k: usize) -> Vec<BlockPtq1_0> {
    let mut rng = Rng(2);
    (0..n_rows * k / QK)
        .map(|_| {
            let mut b = BlockPtq1_0 { d: f16::from_f32(0.02), ..Default::default() };
            b.qs.iter_mut().chain(b.qh.iter_mut()).for_each(|q| *q = rng.next() as u8);
            b
        })
        .collect()
}

fn acts(n_cols: usize, k: usize) -> Vec<BlockQ8K> {
    let mut rng = Rng(3);
    let per = k.div_ceil(256);
    let mut out = vec![BlockQ8K::default(); n_cols * per];
    for j in 0..n_cols {
        let x: Vec<f32> = (0..k).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
        quantize_row_q8_k_padded(&x, &mut out[j * per..(j + 1) * per], Contract::Fused).unwrap();
    }
    out
}

/// A repacked PQ2_0 matrix in one of the layouts, owning its blocks.
enum Matrix {
    T2p(Vec<BlockT2p>, usize, usize),
    X16(Vec<BlockX16>, usize, usize),
}

impl Matrix {
    fn new(layout: Layout, n_rows: usize, k: usize) -> Matrix {
        let src = pq2_0(n_rows, k);
        match layout {
            Layout::X16 => {
                let mut out = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
                repack_pq2_0_to_x16(&src, n_rows, k, &mut out).unwrap();
                Matrix::X16(out, n_rows, k)
            }
            _ => {
                let mut out = vec![BlockT2p::default(); n_rows / 4 * k / QK];
                repack_pq2_0_to_t2p(&src, n_rows, k, &mut out).unwrap();
                Matrix::T2p(out, n_rows, k)
            }
        }
    }
    fn view(&self) -> PackedWeights<'_> {
        match self {
            Matrix::T2p(b, n, k) => PackedWeights::t2p(b, *n, *k).unwrap(),
            Matrix::X16(b, n, k) => PackedWeights::x16(b, *n, *k).unwrap(),
        }
    }
    fn bytes(&self) -> usize {
        match self {
            Matrix::T2p(b, ..) => std::mem::size_of_val(b.as_slice()),
            Matrix::X16(b, ..) => std::mem::size_of_val(b.as_slice()),
        }
    }
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool")
}

fn all_threads() -> usize {
    std::env::var("GGML_T2P_BENCH_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn thread_counts() -> Vec<usize> {
    let mut t = vec![1];
    if all_threads() > 1 {
        t.push(all_threads());
    }
    t
}

fn throughput(weight_bytes: usize, macs: usize) -> Throughput {
    Throughput::ElementsAndBytes { elements: macs as u64, bytes: weight_bytes as u64 }
}

/// Plain read bandwidth: the sum of a 256 MiB buffer of u64, split over the pool's threads.
fn bench_read_bw(c: &mut Criterion) {
    let words = (256usize << 20) / 8;
    let buf: Vec<u64> = (0..words as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
    let mut g = c.benchmark_group("read_bw");
    g.sample_size(20).throughput(Throughput::Bytes((words * 8) as u64));
    for t in thread_counts() {
        let p = pool(t);
        g.bench_function(BenchmarkId::new("sum_256MiB", format!("{t}t")), |b| {
            b.iter(|| {
                p.install(|| {
                    use rayon::prelude::*;
                    buf.par_chunks(words / (4 * t))
                        // SAFETY: u64 words have no padding.
                        .map(|ch| common::read_sum(unsafe { common::bytes_of(ch) }))
                        .reduce(|| 0, u64::wrapping_add)
                })
            })
        });
    }
    g.finish();
}

/// Issue limits: the peak MAC rate of `vpdpbusd` zmm / ymm (VEX), `vpmaddubsw` ymm and AMX
/// `tdpbssd` on this machine (`support/peak.rs`), 1 thread and all threads, so that
/// `tools/bench-report.py` can give each gemm as a share of its level's limit from the same run.
fn bench_issue_limit(c: &mut Criterion) {
    use peak::Probe;
    let mut g = c.benchmark_group("issue_limit");
    g.sample_size(20);
    for probe in Probe::ALL {
        if !probe.is_available() {
            eprintln!("issue_limit/{}: not on this CPU", probe.name());
            continue;
        }
        // about 10 ms per call at 100 GMAC/s on one thread
        let iters = 1_000_000_000 / probe.macs_per_round();
        for t in thread_counts() {
            let p = pool(t);
            g.throughput(Throughput::Elements(t as u64 * iters * probe.macs_per_round()));
            g.bench_function(BenchmarkId::new(probe.name(), format!("{}_{t}t", probe.level().name())), |b| {
                b.iter(|| p.broadcast(|_| probe.run(iters).expect("probe available")))
            });
        }
    }
    g.finish();
}

fn bench_repack(c: &mut Criterion) {
    let (n_rows, k) = (17408, 5120);
    let src = pq2_0(n_rows, k);
    let src_t = ptq1_0(n_rows, k);
    let mut dst = vec![BlockT2p::default(); n_rows / 4 * k / QK];
    let mut dst16 = vec![BlockX16::default(); n_rows / 16 * k / QK];
    let mut dst_x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * k / QK];
    let mut g = c.benchmark_group("repack");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    for t in thread_counts() {
        ggml_t2p::repack::set_repack_threads(t);
        g.throughput(throughput(std::mem::size_of_val(src.as_slice()), n_rows * k));
        g.bench_function(BenchmarkId::new("pq2_0_to_t2p_17408x5120", format!("{t}t")), |b| {
            b.iter(|| repack_pq2_0_to_t2p(&src, n_rows, k, &mut dst).unwrap())
        });
        g.bench_function(BenchmarkId::new("pq2_0_to_x16_17408x5120", format!("{t}t")), |b| {
            b.iter(|| repack_pq2_0_to_x16(&src, n_rows, k, &mut dst16).unwrap())
        });
        g.throughput(throughput(std::mem::size_of_val(src_t.as_slice()), n_rows * k));
        g.bench_function(BenchmarkId::new("ptq1_0_to_t2p_17408x5120", format!("{t}t")), |b| {
            b.iter(|| repack_ptq1_0_to_t2p(&src_t, n_rows, k, &mut dst).unwrap())
        });
        g.bench_function(BenchmarkId::new("ptq1_0_to_x4_17408x5120", format!("{t}t")), |b| {
            b.iter(|| repack_ptq1_0_to_x4(&src_t, n_rows, k, &mut dst_x4).unwrap())
        });
        g.bench_function(BenchmarkId::new("ptq1_0_to_x16_17408x5120", format!("{t}t")), |b| {
            b.iter(|| repack_ptq1_0_to_x16(&src_t, n_rows, k, &mut dst16).unwrap())
        });
    }
    ggml_t2p::repack::set_repack_threads(0);
    g.finish();
}

/// One gemm (or gemv, `n_cols == 1`) benchmark over all rows on `threads` threads of a
/// persistent pool, split in `4 * threads` row ranges; activations packed once, outside the loop.
fn run_gemm(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    level: KernelLevel,
    w: &PackedWeights<'_>,
    weight_bytes: usize,
    n_cols: usize,
    threads: usize,
) {
    let k = w.k();
    let n_rows = w.n_rows();
    let act = acts(n_cols, k);
    let a = Activations::new(&act, n_cols, k).unwrap();
    let pack = a.pack(w.layout(), level).unwrap();
    let packed = pack.view();
    let mut dst = vec![0.0f32; n_rows * n_cols];
    let p = pool(threads);
    g.throughput(throughput(weight_bytes, n_rows * k * n_cols));
    g.bench_function(
        BenchmarkId::new(format!("{name}_{}x{}", n_rows, k), format!("{}_{threads}t", level.name())),
        |b| {
            b.iter(|| p.install(|| kernels::gemm_par_packed(level, w, &packed, &mut dst, n_rows, 4 * threads).unwrap()))
        },
    );
}

/// Per-call overhead: CPU feature detection, and the smallest gemv (16 rows x 256 weights at the
/// best level), whose call costs about as much as its arithmetic.
fn bench_call(c: &mut Criterion) {
    let mut g = c.benchmark_group("call");
    g.bench_function("cpu_features_detect", |b| b.iter(|| std::hint::black_box(ggml_t2p::CpuFeatures::detect())));
    if let Some(level) = KernelLevel::best() {
        let layout = level.layout_for(SourceType::Pq2_0, false);
        let (n_rows, k) = (16, 256);
        let m = Matrix::new(layout, n_rows, k);
        let w = m.view();
        let act = acts(1, k);
        let pack = Activations::new(&act, 1, k).unwrap().pack(layout, level).unwrap();
        let packed = pack.view();
        let mut dst = vec![0.0f32; n_rows];
        g.bench_function(BenchmarkId::new(format!("gemv_{n_rows}x{k}"), level.name()), |b| {
            b.iter(|| kernels::gemm_packed(level, &w, &packed, &mut dst, n_rows, 0..n_rows).unwrap())
        });
    }
    g.finish();
}

/// Q8_K activation quantization of one row (4096 and 17408 values, the Bonsai 27B widths), the
/// reference and every SIMD level this CPU runs, in the unfused rounding (what an x86 host ggml
/// computes) and the fused one. Throughput in values.
fn bench_quantize(c: &mut Criterion) {
    let mut g = c.benchmark_group("quantize");
    let mut rng = Rng(3);
    let levels: Vec<KernelLevel> =
        [KernelLevel::Reference, KernelLevel::Avx2, KernelLevel::Avx512Vnni, KernelLevel::Dotprod]
            .into_iter()
            .filter(|l| l.is_available())
            .collect();
    for n in [4096usize, 17408] {
        let x: Vec<f32> = (0..n).map(|_| ((rng.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * 3.0).collect();
        let mut y = vec![BlockQ8K::default(); n / 256];
        g.throughput(Throughput::Elements(n as u64));
        for &level in &levels {
            for (contract, cname) in [(Contract::Unfused, "unfused"), (Contract::Fused, "fused")] {
                g.bench_function(BenchmarkId::new(format!("{n}_{cname}"), level.name()), |b| {
                    b.iter(|| kernels::quantize_q8_k(level, std::hint::black_box(&x), &mut y, contract).unwrap())
                });
            }
        }
    }
    g.finish();
}

fn bench_reference(c: &mut Criterion) {
    let (n_rows, k) = (1024, 5120);
    let layout = KernelLevel::Reference.layout_for(SourceType::Pq2_0, false);
    let m = Matrix::new(layout, n_rows, k);
    let mut g = c.benchmark_group("reference");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for n_cols in [1, 4] {
        let name = format!("{}_{n_cols}col", layout.name().to_lowercase());
        run_gemm(&mut g, &name, KernelLevel::Reference, &m.view(), m.bytes(), n_cols, 1);
    }
    g.finish();
}

/// The SIMD levels this CPU has, with the layout each runs on.
fn simd_levels() -> Vec<(KernelLevel, Layout)> {
    KernelLevel::ALL[1..]
        .iter()
        .filter(|l| l.is_available())
        .map(|&l| (l, l.layout_for(SourceType::Pq2_0, false)))
        .collect()
}

fn bench_simd(c: &mut Criterion) {
    let levels = simd_levels();
    if levels.is_empty() {
        eprintln!("this CPU has no SIMD level (dotprod / AVX2+FMA+F16C): only the portable benchmarks run");
        return;
    }
    let threads = all_threads();
    let layouts: Vec<Layout> = {
        let mut v: Vec<Layout> = levels.iter().map(|l| l.1).collect();
        v.dedup();
        v
    };

    // from DRAM: 131072 x 32768, 1.14 GB of weights (X16), well beyond any last-level cache
    // (the seeds' 71 MB test fits in the L3 of large server parts)
    {
        let (n_rows, k) = (131072, 32768);
        let mut g = c.benchmark_group("gemv_dram");
        g.sample_size(20);
        for &layout in &layouts {
            let m = Matrix::new(layout, n_rows, k);
            for &(level, _) in levels.iter().filter(|l| l.1 == layout) {
                if level == KernelLevel::I8mm {
                    continue; // gemv is the sdot kernel on both ARM levels
                }
                for t in thread_counts() {
                    run_gemm(&mut g, &layout.name().to_lowercase(), level, &m.view(), m.bytes(), 1, t);
                }
            }
        }
        g.finish();
    }

    // Bonsai 2 27B matmul shapes (rows x k)
    let shapes = [(5120, 17408), (17408, 5120), (5120, 6144), (6144, 5120)];
    // gemm2/gemm3: small batches (2 or 3 sequences, short speculative drafts; on avx2 their own
    // tiles, docs/results.md "Small batches on `avx2`")
    for (group, n_cols) in [("gemv", 1usize), ("gemm2", 2), ("gemm3", 3), ("gemm4", 4), ("gemm64", 64)] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        for &layout in &layouts {
            for (n_rows, k) in shapes {
                let m = Matrix::new(layout, n_rows, k);
                for &(level, _) in levels.iter().filter(|l| l.1 == layout) {
                    if n_cols == 1 && level == KernelLevel::I8mm {
                        continue;
                    }
                    let counts = if n_cols == 1 { thread_counts() } else { vec![threads] };
                    for t in counts {
                        run_gemm(&mut g, &layout.name().to_lowercase(), level, &m.view(), m.bytes(), n_cols, t);
                    }
                }
            }
        }
        g.finish();
    }
    bench_ptq1_0(c, &levels);
}

#[cfg(target_arch = "aarch64")]
fn bench_ptq1_0(c: &mut Criterion, levels: &[(KernelLevel, Layout)]) {
    // PTQ1_0: native (1.75 bits per weight) vs repacked to T2P (2.125)
    let best = levels.last().expect("a level").0;
    let threads = all_threads();
    let (n_rows, k) = (17408, 5120);
    let src = ptq1_0(n_rows, k);
    let mut x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * k / QK];
    repack_ptq1_0_to_x4(&src, n_rows, k, &mut x4).unwrap();
    let mut t = vec![BlockT2p::default(); n_rows / 4 * k / QK];
    repack_ptq1_0_to_t2p(&src, n_rows, k, &mut t).unwrap();
    let native = PackedWeights::ptq1_0x4(&x4, n_rows, k).unwrap();
    let via_t2p = PackedWeights::t2p(&t, n_rows, k).unwrap();
    let mut g = c.benchmark_group("ptq1_0");
    g.sample_size(10);
    for n_cols in [1, 4] {
        let (nb, tb) = (std::mem::size_of_val(x4.as_slice()), std::mem::size_of_val(t.as_slice()));
        run_gemm(&mut g, &format!("native_{n_cols}col"), best, &native, nb, n_cols, threads);
        run_gemm(&mut g, &format!("via_t2p_{n_cols}col"), best, &via_t2p, tb, n_cols, threads);
    }
    g.finish();
}

#[cfg(not(target_arch = "aarch64"))]
fn bench_ptq1_0(_: &mut Criterion, _: &[(KernelLevel, Layout)]) {
    // on x86 PTQ1_0 runs as X16 (the same kernels and bytes as PQ2_0)
    let _ = (ptq1_0 as fn(usize, usize) -> Vec<BlockPtq1_0>, BlockPq2_0::default());
}

/// The hybrid's float ops (see the module docs), each float path once.
fn bench_hybrid(c: &mut Criterion) {
    use ggml_t2p::hybrid::{FloatPath, GatedDeltaNet, SsmConv, View};
    let mut paths: Vec<(&str, FloatPath)> = vec![("scalar", FloatPath::Scalar)];
    for level in KernelLevel::ALL.into_iter().filter(|l| l.is_available()) {
        let p = FloatPath::for_level(level);
        if !paths.iter().any(|&(_, q)| q == p) {
            paths.push((level.name(), p));
        }
    }
    let mut rng = Rng(5);
    let mut randv = |n: usize, m: f32| (0..n).map(|_| rng.unit() * m).collect::<Vec<f32>>();
    let (s, h) = (128usize, 16usize);
    let mut g = c.benchmark_group("hybrid");
    g.sample_size(10).warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(2));
    for t in [1usize, 512] {
        let (q, k) = (randv(s * h * t, 0.088), randv(s * h * t, 0.088));
        let v = randv(s * h * t, 1.0);
        let gate: Vec<f32> = randv(h * t, 1.0).iter().map(|x| -x.abs()).collect();
        let beta: Vec<f32> = randv(h * t, 0.5).iter().map(|x| 0.5 + x).collect();
        let state = randv(s * s * h, 0.1);
        let mut dst = vec![0f32; s * h * t + s * s * h];
        let views = [
            View::contiguous(q.as_ptr(), [s, h, t, 1]),
            View::contiguous(k.as_ptr(), [s, h, t, 1]),
            View::contiguous(v.as_ptr(), [s, h, t, 1]),
            View::contiguous(gate.as_ptr(), [1, h, t, 1]),
            View::contiguous(beta.as_ptr(), [1, h, t, 1]),
            View::contiguous(state.as_ptr(), [s * s * h, 1, 1, 1]),
        ];
        // SAFETY: the views describe the vectors above, dst has room for outputs and state.
        let op = unsafe { GatedDeltaNet::new(views, dst.as_mut_ptr(), dst.len()) }.expect("handled");
        g.throughput(Throughput::Elements((s * s * h * t) as u64));
        for &(name, path) in &paths {
            if path == FloatPath::Scalar && t > 1 {
                continue;
            }
            g.bench_function(BenchmarkId::new(format!("gdn_t{t}"), name), |b| b.iter(|| op.run(path, 0..op.units())));
        }
        let (ch, n) = (6144usize, 4usize);
        let x = randv((n - 1 + t) * ch, 1.0);
        let w = randv(n * ch, 0.5);
        let mut out = vec![0f32; ch * t];
        // SAFETY: as above.
        let conv = unsafe {
            SsmConv::new(
                View::contiguous(x.as_ptr(), [n - 1 + t, ch, 1, 1]),
                View::contiguous(w.as_ptr(), [n, ch, 1, 1]),
                View::contiguous(out.as_mut_ptr().cast_const(), [ch, t, 1, 1]),
            )
        }
        .expect("handled");
        g.throughput(Throughput::Elements((ch * t) as u64));
        for &(name, path) in &paths {
            g.bench_function(BenchmarkId::new(format!("ssm_conv_t{t}"), name), |b| {
                b.iter(|| conv.run(path, 0..conv.units()))
            });
        }
    }
    g.finish();
}

criterion_group!(
    benches,
    bench_hybrid,
    bench_call,
    bench_quantize,
    bench_read_bw,
    bench_issue_limit,
    bench_repack,
    bench_reference,
    bench_simd
);
criterion_main!(benches);
