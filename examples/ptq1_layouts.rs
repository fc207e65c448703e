//! PTQ1_0 on x86: X16 (2.125 bits per weight) against L64 (1.75), side by side in one process, on
//! the same weights and activations, as a matrix multiplication runs inside llama.cpp: the
//! activation pack split over the threads by blocks (for L64's gemv that pack builds its tables),
//! then the rows split over the same threads (issue 37; docs/ptq1_0.md).
//!
//! Usage: `cargo run --release --example ptq1_layouts -- [--shapes LIST] [--cols LIST]
//! [--threads LIST] [--level NAME] [--reps N] [--dram-bytes N]`
//!
//! - Shapes default to the Bonsai 2 27B's matrices: 17408x5120 (ffn gate/up), 5120x17408
//!   (ffn_down), 10240x5120 (attention q and gate).
//! - For each shape, column count and thread count: X16 then L64 at the chosen level, in turn,
//!   `--reps` times; "cache" takes one copy of each matrix (for the larger shapes that is this
//!   VM's 480 MB L3, not L2), "dram" (gemv only) as many copies as pass `--dram-bytes` (default
//!   1.2 GB) per layout, taken in turn so that each call reads its weights from DRAM.
//! - Every output of L64 is compared bit for bit with X16's before timing, and a sample of rows
//!   with the reference dot: a mismatch stops the run.
//! - Threads are started per call (scoped), so at 2 or more threads a small matrix's time is mostly
//!   their start: compare such shapes at 1 thread.
//! - Reports the best and median wall time per call (pack + multiply, from the release of already
//!   running threads to the end of the last), weights per second, and L64's speed over X16's.
use ggml_t2p::format::{BlockL64, BlockPtq1_0, BlockQ8K, BlockX16, QK};
use ggml_t2p::kernels::act_pack::{pack_raw, packed_size, ActFormat, PackedActs};
use ggml_t2p::kernels::dispatch::gemm_raw;
use ggml_t2p::reference::{quantize_row_q8_k_padded, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{repack_ptq1_0_to_l64, repack_ptq1_0_to_x16, repacked_blocks, Layout};
use ggml_t2p::{KernelLevel, PackedWeights};
use half::f16;
use std::sync::{Barrier, Mutex};
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;
#[path = "../tests/rust/common/rng.rs"]
mod rng;
use rng::Rng;

const USAGE: &str = "usage: cargo run --release --example ptq1_layouts -- [--shapes LIST] [--cols LIST] [--threads LIST] [--level NAME] [--reps N] [--dram-bytes N]\n  \
     --shapes L      rows x k, comma-separated (default 17408x5120,5120x17408,10240x5120: the Bonsai 2 27B)\n  \
     --cols L        batch widths (default 1,64,512; DRAM copies for 1 column only)\n  \
     --threads L     thread counts (default 1 and all cores)\n  \
     --level NAME    avx512vnni or amx (default: the best level this CPU runs)\n  \
     --reps N        timed calls per case and layout (default 9)\n  \
     --dram-bytes N  bytes of copies per layout for the from-DRAM gemv (default 1200000000; 0: skip)";

/// Buffers that threads write disjoint parts of.
#[derive(Clone, Copy)]
struct Raw(*mut u8);
// SAFETY: every thread writes only its own pieces (disjoint pack pieces, disjoint row ranges).
unsafe impl Send for Raw {}
// SAFETY: as above.
unsafe impl Sync for Raw {}

/// 64 bytes aligned to 64: the packed activations' storage.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct A64([u8; 64]);

/// The bytes of `v`.
fn bytes(v: &mut [A64]) -> &mut [u8] {
    // SAFETY: plain bytes without padding; u8 has alignment 1.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), v.len() * 64) }
}

/// One matrix in both layouts.
struct Mats {
    x16: Vec<BlockX16>,
    l64: Vec<BlockL64>,
}

/// Pack + multiply of `w` on `nt` threads, as the plugin runs it: thread `ith` packs Q8_K blocks
/// `[nq ith / nt, nq (ith+1) / nt)` of every column, all wait, then each computes its share of
/// row tiles. Returns the wall time in ns from the release of the threads, and of it the time until
/// thread 0 passed the barrier after the pack.
#[allow(clippy::too_many_arguments)]
fn run(
    level: KernelLevel,
    w: &PackedWeights<'_>,
    fmt: ActFormat,
    act: &[BlockQ8K],
    n_cols: usize,
    k: usize,
    pack: &mut [u8],
    dst: &mut [f32],
    nt: usize,
) -> (f64, f64) {
    let (n_rows, nq) = (w.n_rows(), k.div_ceil(256));
    let tile = w.layout().tile_rows();
    let tiles = n_rows.div_ceil(tile);
    let (pp, plen, dp, dlen) = (Raw(pack.as_mut_ptr()), pack.len(), Raw(dst.as_mut_ptr().cast()), dst.len());
    let barrier = Barrier::new(nt);
    let start = Barrier::new(nt);
    let t0 = Mutex::new(Instant::now());
    let packed = Mutex::new(0.0f64);
    let body = |ith: usize| {
        let (pp, dp) = (pp, dp); // the whole wrappers (Sync), not their pointer fields
        start.wait();
        if ith == 0 {
            *t0.lock().unwrap() = Instant::now();
        }
        let (b0, b1) = (nq * ith / nt, nq * (ith + 1) / nt);
        for c in 0..n_cols {
            let (p, q) = (pp, &act[c * nq + b0..c * nq + b1]);
            // SAFETY: this thread's (column, blocks) piece of the pack buffer.
            unsafe { pack_raw(fmt, k, n_cols, c, b0..b1, q, p.0, plen).unwrap() };
        }
        barrier.wait();
        if ith == 0 {
            *packed.lock().unwrap() = t0.lock().unwrap().elapsed().as_nanos() as f64;
        }
        // SAFETY: the pack is complete (barrier) and only read from here on.
        let bytes = unsafe { std::slice::from_raw_parts(pp.0, plen) };
        let a = PackedActs::new(fmt, k, n_cols, bytes).unwrap();
        let rows = (tiles * ith / nt * tile).min(n_rows)..(tiles * (ith + 1) / nt * tile).min(n_rows);
        // SAFETY: disjoint row ranges of dst per thread.
        unsafe { gemm_raw(level, w, &a, dp.0.cast(), dlen, n_rows, rows).unwrap() };
    };
    std::thread::scope(|s| {
        for ith in 1..nt {
            let body = &body;
            s.spawn(move || body(ith));
        }
        body(0);
    });
    let t = *t0.lock().unwrap();
    (t.elapsed().as_nanos() as f64, packed.into_inner().unwrap())
}

fn parse_list<T: std::str::FromStr>(v: Option<String>, what: &str) -> Vec<T> {
    let v = v.unwrap_or_default();
    let out: Option<Vec<T>> = v.split(',').map(|s| s.trim().parse().ok()).collect();
    out.filter(|o| !o.is_empty()).unwrap_or_else(|| common::usage_error("ptq1_layouts", USAGE, &format!("bad {what}")))
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut shapes = vec![(17408usize, 5120usize), (5120, 17408), (10240, 5120)];
    let mut cols = vec![1usize, 64, 512];
    let mut threads = if cores > 1 { vec![1, cores] } else { vec![1] };
    let mut reps = 9usize;
    let mut dram_bytes = 1_200_000_000usize;
    let mut level = KernelLevel::best();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            "--shapes" => {
                shapes = parse_list::<String>(args.next(), "--shapes")
                    .iter()
                    .map(|s| {
                        let (r, k) = s.split_once('x').unwrap_or(("", ""));
                        match (r.parse::<usize>(), k.parse::<usize>()) {
                            (Ok(r), Ok(k)) if r % 64 == 0 && k % 256 == 0 && r > 0 && k > 0 => (r, k),
                            _ => common::usage_error(
                                "ptq1_layouts",
                                USAGE,
                                "shapes: ROWSxK, rows % 64 == 0, k % 256 == 0",
                            ),
                        }
                    })
                    .collect()
            }
            "--cols" => cols = parse_list(args.next(), "--cols"),
            "--threads" => threads = parse_list(args.next(), "--threads"),
            "--reps" => reps = parse_list::<usize>(args.next(), "--reps")[0].max(1),
            "--dram-bytes" => dram_bytes = parse_list(args.next(), "--dram-bytes")[0],
            "--level" => {
                level = args.next().and_then(|n| KernelLevel::from_name(&n));
                if level.is_none() {
                    common::usage_error("ptq1_layouts", USAGE, "--level: avx512vnni or amx");
                }
            }
            other => common::usage_error("ptq1_layouts", USAGE, &format!("unknown argument {other}")),
        }
    }
    let Some(level) = level.filter(|l| l.is_available() && l.runs(Layout::L64)) else {
        println!("ptq1_layouts: no level that runs L64 here (it needs AVX-512 VBMI); nothing to time");
        return;
    };
    println!("ptq1_layouts: level {}, threads {threads:?}, {reps} reps", level.name());
    let mut rng = Rng(37);
    for &(rows, k) in &shapes {
        let nb = k / QK;
        let src: Vec<BlockPtq1_0> = (0..rows * nb)
            .map(|_| {
                let mut b =
                    BlockPtq1_0 { d: f16::from_f32(0.01 + (rng.next() % 100) as f32 * 1e-4), ..Default::default() };
                for q in b.qs.iter_mut().chain(b.qh.iter_mut()) {
                    *q = ((rng.next() % 243) as u32 * 256).div_ceil(243) as u8; // the quantizer's bytes
                }
                b
            })
            .collect();
        let one = |src: &[BlockPtq1_0]| {
            let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, rows, k).unwrap()];
            repack_ptq1_0_to_x16(src, rows, k, &mut x16).unwrap();
            let mut l64 = vec![BlockL64::default(); repacked_blocks(Layout::L64, rows, k).unwrap()];
            repack_ptq1_0_to_l64(src, rows, k, &mut l64).unwrap();
            Mats { x16, l64 }
        };
        let x16_bytes = repacked_blocks(Layout::X16, rows, k).unwrap() * size_of::<BlockX16>();
        let l64_bytes = repacked_blocks(Layout::L64, rows, k).unwrap() * size_of::<BlockL64>();
        let n_dram = if dram_bytes == 0 { 0 } else { dram_bytes.div_ceil(l64_bytes).max(2) };
        let mut mats = vec![one(&src)];
        let max_cols = cols.iter().copied().max().unwrap_or(1);
        let kq = k.div_ceil(256);
        let mut act = vec![BlockQ8K::default(); max_cols * kq];
        for c in act.chunks_exact_mut(kq) {
            let x: Vec<f32> = (0..k).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
            quantize_row_q8_k_padded(&x, c, Contract::Fused).unwrap();
        }
        println!(
            "\n{rows} x {k}: X16 {:.1} MB, L64 {:.1} MB ({:.3}); dram copies {n_dram} per layout",
            x16_bytes as f64 / 1e6,
            l64_bytes as f64 / 1e6,
            l64_bytes as f64 / x16_bytes as f64
        );
        println!(
            "{:<22} {:>10} {:>10} {:>10} {:>10} {:>9} {:>11} {:>9}",
            "case", "X16 best", "X16 med", "L64 best", "L64 med", "Gw/s L64", "L64/X16", "L64 pack"
        );
        for &n_cols in &cols {
            let fx = ActFormat::for_kernel(Layout::X16, level, n_cols).unwrap();
            let fl = ActFormat::for_kernel(Layout::L64, level, n_cols).unwrap();
            let mut px = vec![A64([0; 64]); packed_size(fx, k, n_cols).unwrap().div_ceil(64)];
            let mut pl = vec![A64([0; 64]); packed_size(fl, k, n_cols).unwrap().div_ceil(64)];
            let (mut dx, mut dl) = (vec![0f32; rows * n_cols], vec![0f32; rows * n_cols]);
            let a = &act[..n_cols * kq];
            let (bx, bl) = (bytes(&mut px), bytes(&mut pl));
            // outputs first
            let wx = PackedWeights::x16(&mats[0].x16, rows, k).unwrap();
            let wl = PackedWeights::l64(&mats[0].l64, rows, k).unwrap();
            let nt = *threads.iter().max().unwrap();
            let _ = run(level, &wx, fx, a, n_cols, k, bx, &mut dx, nt);
            let _ = run(level, &wl, fl, a, n_cols, k, bl, &mut dl, 1);
            assert!(
                dx.iter().zip(&dl).all(|(x, y)| x.to_bits() == y.to_bits()),
                "L64 differs from X16 ({rows}x{k}, {n_cols} columns)"
            );
            for r in (0..rows).step_by(rows / 7 + 1) {
                let want = vec_dot_ptq1_0_q8_k(&src[r * nb..(r + 1) * nb], &a[..kq], Contract::Fused).unwrap();
                assert_eq!(dl[r].to_bits(), want.to_bits(), "L64 row {r} differs from the reference");
            }
            let places: &[&str] = if n_cols == 1 && n_dram > 0 { &["cache", "dram"] } else { &["cache"] };
            for &place in places {
                if place == "dram" {
                    while mats.len() < n_dram {
                        mats.push(one(&src));
                    }
                }
                for &nt in &threads {
                    let (mut tx, mut tl, mut pk) = (Vec::new(), Vec::new(), Vec::new());
                    for rep in 0..reps {
                        let m = if place == "dram" { &mats[rep % mats.len()] } else { &mats[0] };
                        let wx = PackedWeights::x16(&m.x16, rows, k).unwrap();
                        let wl = PackedWeights::l64(&m.l64, rows, k).unwrap();
                        tx.push(run(level, &wx, fx, a, n_cols, k, bx, &mut dx, nt).0);
                        let (t, p) = run(level, &wl, fl, a, n_cols, k, bl, &mut dl, nt);
                        tl.push(t);
                        pk.push(p);
                    }
                    tx.sort_by(f64::total_cmp);
                    tl.sort_by(f64::total_cmp);
                    pk.sort_by(f64::total_cmp);
                    let (bxt, mx, blt, ml) = (tx[0], tx[reps / 2], tl[0], tl[reps / 2]);
                    println!(
                        "{:<22} {:>8.0}us {:>8.0}us {:>8.0}us {:>8.0}us {:>9.1} {:>5.3}/{:.3} {:>7.0}us",
                        format!("{n_cols} col {place} {nt}t"),
                        bxt / 1e3,
                        mx / 1e3,
                        blt / 1e3,
                        ml / 1e3,
                        (rows * k * n_cols) as f64 / blt,
                        bxt / blt,
                        mx / ml,
                        pk[reps / 2] / 1e3
                    );
                }
            }
            mats.truncate(1);
        }
    }
}
