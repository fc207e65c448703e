//! Kernel microbenchmarks (criterion). Throughput is reported in weight bytes and in weights
//! (elements; for gemm, weights x columns, i.e. multiply-adds).
//!
//! - `repack/*`: PQ2_0 -> T2P, PTQ1_0 -> T2P, PTQ1_0 -> PTQ1_0x4 on a 17408 x 5120 matrix, with
//!   1 thread and with all threads (portable: runs everywhere).
//! - `reference/*`: the scalar `_generic` kernels (portable; the slow exact twin).
//! - aarch64 only: `gemv_dram/*` (32768 x 8192, 71 MB of T2P weights streamed from DRAM, the
//!   seeds' test), `gemv/*` and `gemm4/*`, `gemm64/*` on the Bonsai 2 27B shapes (rows x k:
//!   5120 x 17408, 17408 x 5120, 5120 x 6144, 6144 x 5120), and `ptq1_0/*` native vs via T2P.
//!
//! Multi-threaded runs use one persistent rayon pool (`ThreadPool::install`), built once: the
//! seeds measured 282 instead of 391 Gweights/s when threads were spawned per iteration.
//! Set `GGML_T2P_BENCH_THREADS` to choose the pool size (default: all cores).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use ggml_t2p::format::{BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockQ8K, BlockT2p, QK};
use ggml_t2p::reference::{quantize_row_q8_k_padded, Contract};
use ggml_t2p::repack::{repack_pq2_0_to_t2p, repack_ptq1_0_to_t2p, repack_ptq1_0_to_x4};
use ggml_t2p::{kernels, Activations, KernelLevel, PackedWeights};
use half::f16;
use std::time::Duration;

/// Deterministic test data (splitmix64).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

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

fn t2p(n_rows: usize, k: usize) -> Vec<BlockT2p> {
    let mut out = vec![BlockT2p::default(); n_rows / 4 * k / QK];
    repack_pq2_0_to_t2p(&pq2_0(n_rows, k), n_rows, k, &mut out).unwrap();
    out
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

fn throughput(weight_bytes: usize, macs: usize) -> Throughput {
    Throughput::ElementsAndBytes { elements: macs as u64, bytes: weight_bytes as u64 }
}

fn bench_repack(c: &mut Criterion) {
    let (n_rows, k) = (17408, 5120);
    let src = pq2_0(n_rows, k);
    let src_t = ptq1_0(n_rows, k);
    let mut dst = vec![BlockT2p::default(); n_rows / 4 * k / QK];
    let mut dst_x4 = vec![BlockPtq1_0x4::default(); n_rows / 4 * k / QK];
    let mut g = c.benchmark_group("repack");
    g.sample_size(10).measurement_time(Duration::from_secs(4));
    let mut threads = vec![1];
    if all_threads() > 1 {
        threads.push(all_threads());
    }
    for &t in &threads {
        let p = pool(t);
        g.throughput(throughput(std::mem::size_of_val(src.as_slice()), n_rows * k));
        g.bench_function(BenchmarkId::new("pq2_0_to_t2p_17408x5120", format!("{t}t")), |b| {
            b.iter(|| p.install(|| repack_pq2_0_to_t2p(&src, n_rows, k, &mut dst).unwrap()))
        });
        g.throughput(throughput(std::mem::size_of_val(src_t.as_slice()), n_rows * k));
        g.bench_function(BenchmarkId::new("ptq1_0_to_t2p_17408x5120", format!("{t}t")), |b| {
            b.iter(|| p.install(|| repack_ptq1_0_to_t2p(&src_t, n_rows, k, &mut dst).unwrap()))
        });
        g.bench_function(BenchmarkId::new("ptq1_0_to_x4_17408x5120", format!("{t}t")), |b| {
            b.iter(|| p.install(|| repack_ptq1_0_to_x4(&src_t, n_rows, k, &mut dst_x4).unwrap()))
        });
    }
    g.finish();
}

/// One gemm (or gemv, `n_cols == 1`) benchmark over all rows on `threads` threads of a
/// persistent pool, split in `4 * threads` row ranges.
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
    let mut dst = vec![0.0f32; n_rows * n_cols];
    let p = pool(threads);
    g.throughput(throughput(weight_bytes, n_rows * k * n_cols));
    g.bench_function(
        BenchmarkId::new(format!("{name}_{}x{}", n_rows, k), format!("{}_{threads}t", level.name())),
        |b| b.iter(|| p.install(|| kernels::gemm_par(level, w, &a, &mut dst, n_rows, 4 * threads).unwrap())),
    );
}

fn bench_reference(c: &mut Criterion) {
    let (n_rows, k) = (1024, 5120);
    let w = t2p(n_rows, k);
    let pw = PackedWeights::t2p(&w, n_rows, k).unwrap();
    let mut g = c.benchmark_group("reference");
    g.sample_size(10).measurement_time(Duration::from_secs(3));
    for n_cols in [1, 4] {
        run_gemm(
            &mut g,
            &format!("t2p_{n_cols}col"),
            KernelLevel::Reference,
            &pw,
            std::mem::size_of_val(w.as_slice()),
            n_cols,
            1,
        );
    }
    g.finish();
}

#[cfg(target_arch = "aarch64")]
fn bench_arm(c: &mut Criterion) {
    let Some(best) = KernelLevel::best() else {
        eprintln!("this CPU has no dotprod: the ARM kernels decline, only the portable benchmarks run");
        return;
    };
    let threads = all_threads();
    let mut thread_counts = vec![1];
    if threads > 1 {
        thread_counts.push(threads);
    }

    // the seeds' DRAM test: 32768 x 8192, 71 MB of T2P weights
    {
        let (n_rows, k) = (32768, 8192);
        let w = t2p(n_rows, k);
        let pw = PackedWeights::t2p(&w, n_rows, k).unwrap();
        let mut g = c.benchmark_group("gemv_dram");
        g.sample_size(20);
        for &t in &thread_counts {
            run_gemm(&mut g, "t2p", best, &pw, std::mem::size_of_val(w.as_slice()), 1, t);
        }
        g.finish();
    }

    // Bonsai 2 27B matmul shapes (rows x k)
    let shapes = [(5120, 17408), (17408, 5120), (5120, 6144), (6144, 5120)];
    for (group, n_cols) in [("gemv", 1usize), ("gemm4", 4), ("gemm64", 64)] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        for (n_rows, k) in shapes {
            let w = t2p(n_rows, k);
            let pw = PackedWeights::t2p(&w, n_rows, k).unwrap();
            for level in [KernelLevel::Dotprod, KernelLevel::I8mm] {
                if !level.is_available() || (n_cols == 1 && level == KernelLevel::I8mm) {
                    continue; // gemv is the sdot kernel on both levels
                }
                run_gemm(&mut g, "t2p", level, &pw, std::mem::size_of_val(w.as_slice()), n_cols, threads);
            }
        }
        g.finish();
    }

    // PTQ1_0: native (1.75 bits per weight) vs repacked to T2P (2.125)
    {
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
            run_gemm(
                &mut g,
                &format!("native_{n_cols}col"),
                best,
                &native,
                std::mem::size_of_val(x4.as_slice()),
                n_cols,
                threads,
            );
            run_gemm(
                &mut g,
                &format!("via_t2p_{n_cols}col"),
                best,
                &via_t2p,
                std::mem::size_of_val(t.as_slice()),
                n_cols,
                threads,
            );
        }
        g.finish();
    }
}

#[cfg(not(target_arch = "aarch64"))]
fn bench_arm(_: &mut Criterion) {
    eprintln!("not aarch64: the NEON benchmarks are compiled out; repack and reference run");
}

criterion_group!(benches, bench_repack, bench_reference, bench_arm);
criterion_main!(benches);
