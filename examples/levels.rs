//! Side-by-side timing of every x86 level this CPU runs, on the same X16 matrices and activations,
//! for choosing [`KernelLevel::best`]'s order per CPU class (docs/architecture.md, "Kernel levels").
//!
//! Usage: `cargo run --release --example levels -- [--reps N] [--quick | --dram] [--cols LIST]`
//!
//! - Time is the calling thread's CPU time (`CLOCK_THREAD_CPUTIME_ID` on Linux; wall time
//!   elsewhere), so time the thread spent waiting for a core on a shared machine is not counted.
//! - Levels are interleaved: every repetition times each level once, in turn, so a change of
//!   clock or load during the run touches all of them alike.
//! - One thread, one call at a time; each timed batch is about 20 ms of calls. Reports the best
//!   and the median per call over the repetitions, the weights streamed per second (gemv), MACs
//!   per second (gemm), each level's time relative to the fastest level of its row, and for gemm
//!   the share of the level's issue limit (`benches/support/peak.rs`, timed the same way in this process,
//!   once per repetition beside the kernels; the best so far).
//! - Every level's outputs are compared bit for bit with the first level's before timing: a
//!   mismatch stops the run (the table is only worth something if the kernels agree).
//! - Where the `amx` level runs, batches that reach its tiles are also timed with the other
//!   arrangement of its tile chains (`amx 1x1`, [`kernels::amx::Blocking::OneByOne`], through
//!   `kernels::amx_model::gemm_native`; the level itself runs `kernels::amx::BLOCKING`), and
//!   batches of 2 or more columns with the narrow tiles (`amx narrow`, `Blocking::Narrow`, which
//!   the level runs from `AMX_MIN_COLS` to `AMX_WIDE_COLS` - 1 columns) and with their tile
//!   instructions left out (`narrow -tiles`, as `amx -tiles` for the 2x2 tiles: a timing floor,
//!   outputs not compared); `--cols` lists the batch widths to time, e.g. `--cols 4,5,8,12,16,32`
//!   for the widths from which `amx` tiles beat `avx512vnni` and the 2x2 tiles beat the narrow ones
//!   (`kernels::table::AMX_MIN_COLS`, `AMX_WIDE_COLS`).
use ggml_t2p::format::{BlockPq2_0, BlockQ8K, BlockX16, QK};
use ggml_t2p::kernels::act_pack::{ActFormat, ActPack, PackedActs};
#[path = "../benches/support/peak.rs"]
mod peak;

use ggml_t2p::kernels::amx::Blocking;
use ggml_t2p::kernels::table::AMX_MIN_COLS;
use ggml_t2p::reference::{quantize_row_q8_k_padded, Contract};
use ggml_t2p::repack::{repack_pq2_0_to_x16, repacked_blocks, Layout};
use ggml_t2p::{kernels, Activations, CpuFeatures, KernelLevel, PackedWeights};
use half::f16;
use peak::Probe;

#[path = "common/mod.rs"]
mod common;

/// A bad command line: the reason and the usage on stderr, exit status 2.
fn usage_error(usage: &str, why: &str) -> ! {
    common::usage_error("levels", usage, why)
}

#[cfg(target_os = "linux")]
fn cpu_ns() -> u64 {
    #[repr(C)]
    struct Timespec {
        s: i64,
        ns: i64,
    }
    extern "C" {
        fn clock_gettime(clk: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_THREAD_CPUTIME_ID: i32 = 3;
    let mut t = Timespec { s: 0, ns: 0 };
    // SAFETY: `t` is a valid, writable timespec (two i64 on x86-64 Linux) for the call.
    let rc = unsafe { clock_gettime(CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    t.s as u64 * 1_000_000_000 + t.ns as u64
}

#[cfg(not(target_os = "linux"))]
fn cpu_ns() -> u64 {
    use std::sync::OnceLock;
    static T0: OnceLock<std::time::Instant> = OnceLock::new();
    T0.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
}

#[path = "../tests/rust/common/rng.rs"]
mod rng;
use rng::Rng;

/// The ternary matrices of Bonsai 2 (rows x k): 9B attention and FFN (4096, 12288), 27B FFN and
/// linear attention (17408, 5120, 10240), and the LM heads of the 2B and 9B (vocab 248320).
const BONSAI2_SHAPES: [(usize, usize); 8] = [
    (4096, 4096),
    (12288, 4096),
    (4096, 12288),
    (17408, 5120),
    (5120, 17408),
    (10240, 5120),
    (248320, 2048),
    (248320, 4096),
];

/// `ROWSxK` with rows a multiple of 16 and k of 256; `None` otherwise.
fn parse_shape(s: &str) -> Option<(usize, usize)> {
    let (r, k) = s.trim().split_once('x')?;
    let (r, k) = (r.parse::<usize>().ok()?, k.parse::<usize>().ok()?);
    (r > 0 && k > 0 && r % 16 == 0 && k % 256 == 0).then_some((r, k))
}

fn main() {
    const USAGE: &str =
        "usage: cargo run --release --example levels -- [--reps N] [--quick | --dram | --shapes LIST] [--cols LIST] [--levels LIST]\n  \
         --reps N   timed batches per level and case (N >= 1, default 9)\n  \
         --quick    one shape (4096x4096) instead of three\n  \
         --shapes L rows x k of each matrix, comma-separated (e.g. 12288x4096,248320x2048; rows a multiple of\n             \
         16, k of 256); 'bonsai2' for the Bonsai 2 matrices: 4096x4096, 12288x4096, 4096x12288,\n             \
         17408x5120, 5120x17408, 10240x5120 and the LM heads 248320x2048, 248320x4096\n  \
         --levels L the levels to time, comma-separated (default: every x86 level this CPU runs)\n  \
         --cols L   batch widths to time, comma-separated (default 1,4,64,512; not with --dram)\n  \
         --dram     gemv only, on a 131072x32768 matrix (1.14 GB, beyond any last-level cache), beside\n             \
         the faster of two plain read loops over the same bytes (one stream; four row tiles side by side,\n             \
         the gemv's order), timed in turn with the levels\n  \
         --from-dram  with --shapes: every call reads its weights from DRAM, as a model's matrices stream at\n             \
         decode: each matrix is copied until the copies pass 1 GiB and successive calls take them in turn;\n             \
         each width is also given against the same level's 1-column time (list 1 first in --cols)";
    let (mut reps, mut quick, mut dram, mut from_dram) = (9usize, false, false, false);
    let mut cols: Option<Vec<usize>> = None;
    let mut custom: Option<Vec<(usize, usize)>> = None;
    let mut only: Option<Vec<KernelLevel>> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            "--quick" => quick = true,
            "--dram" => dram = true,
            "--from-dram" => from_dram = true,
            "--cols" => match args
                .next()
                .map(|v| v.split(',').map(|c| c.trim().parse::<usize>()).collect::<Result<Vec<_>, _>>())
            {
                Some(Ok(v)) if !v.is_empty() && !v.contains(&0) => cols = Some(v),
                _ => usage_error(USAGE, "--cols takes batch widths of 1 or more, comma-separated (e.g. 8,16,32)"),
            },
            "--levels" => match args
                .next()
                .map(|v| v.split(',').map(|n| KernelLevel::from_name(n.trim())).collect::<Option<Vec<_>>>())
            {
                Some(Some(v)) if !v.is_empty() => only = Some(v),
                _ => usage_error(USAGE, "--levels takes level names, comma-separated (e.g. avx512vnni,amx)"),
            },
            "--shapes" => match args.next().as_deref() {
                Some("bonsai2") => custom = Some(BONSAI2_SHAPES.to_vec()),
                Some(v) => match v.split(',').map(parse_shape).collect::<Option<Vec<_>>>() {
                    Some(s) if !s.is_empty() => custom = Some(s),
                    _ => {
                        usage_error(USAGE, "--shapes takes ROWSxK pairs (rows a multiple of 16, k of 256), or bonsai2")
                    }
                },
                None => usage_error(USAGE, "--shapes takes ROWSxK pairs, comma-separated, or bonsai2"),
            },
            "--reps" => match args.next().and_then(|v| v.parse::<usize>().ok()).filter(|&n| n >= 1) {
                Some(n) => reps = n,
                None => usage_error(USAGE, "--reps takes a whole number of 1 or more"),
            },
            other => usage_error(USAGE, &format!("unknown argument {other}")),
        }
    }
    let levels: Vec<KernelLevel> = [KernelLevel::Avx2, KernelLevel::AvxVnni, KernelLevel::Avx512Vnni, KernelLevel::Amx]
        .into_iter()
        .filter(|l| l.is_available() && only.as_ref().is_none_or(|o| o.contains(l)))
        .collect();
    if levels.is_empty() {
        usage_error(USAGE, "none of the levels asked for is an x86 level this CPU runs");
    }
    if dram && cols.is_some() {
        usage_error(USAGE, "--dram times gemv only: no --cols");
    }
    // what is timed: every level as dispatch runs it, and where amx runs, its tiles with the
    // other blocking (rows only for batches that reach the tiles)
    let mut arms: Vec<Arm> = levels.iter().map(|&l| Arm::Level(l)).collect();
    if levels.contains(&KernelLevel::Amx) {
        arms.push(Arm::Amx(other_blocking()));
        arms.push(Arm::Amx(Blocking::Narrow));
    }
    if levels.contains(&KernelLevel::Avx512Vnni) {
        arms.push(Arm::NoTiles(kernels::amx::BLOCKING));
        if levels.contains(&KernelLevel::Amx) {
            arms.push(Arm::NoTiles(Blocking::Narrow));
        }
    }
    let f = CpuFeatures::detect();
    println!(
        "levels: cpu {:?}; runs {}; auto picks {}",
        f,
        levels.iter().map(|l| l.name()).collect::<Vec<_>>().join(", "),
        KernelLevel::best().map_or("none (declines)", |l| l.name())
    );
    if levels.is_empty() {
        println!("levels: no x86 level runs on this CPU; nothing to time");
        return;
    }
    // each level's issue limit (support/peak.rs), timed the same way in this process: once here for
    // the log line, then once more per repetition beside the kernels (best of all), so that a
    // change of clock during the run moves both sides of the share alike
    let probes: Vec<Option<Probe>> =
        levels.iter().map(|&l| Probe::ALL.into_iter().find(|p| p.level() == l && p.is_available())).collect();
    let time_probe = |p: Probe| -> f64 {
        let iters = 400_000_000 / p.macs_per_round();
        let t = cpu_ns();
        let macs = p.run(iters).unwrap_or(0) as f64;
        macs / (cpu_ns() - t).max(1) as f64
    };
    let mut peak: Vec<Option<f64>> = probes.iter().map(|p| p.map(time_probe)).collect();
    for (l, (p, g)) in levels.iter().zip(probes.iter().zip(&peak)) {
        if let (Some(p), Some(g)) = (p, g) {
            println!("levels: {} issue limit ({}): {:.0} GMAC/s (first timing)", l.name(), p.name(), g);
        }
    }
    // the issue limit an arm's share is of: its level's (none for the kernel without tiles)
    let limit_of = |arm: Arm| match arm {
        Arm::NoTiles(_) => None,
        _ => levels.iter().position(|&l| l == arm.level()),
    };
    if from_dram && custom.is_none() {
        usage_error(USAGE, "--from-dram needs --shapes");
    }
    if custom.is_some() && (dram || quick) {
        usage_error(USAGE, "--shapes replaces --quick and --dram's shapes: give one of them");
    }
    let shapes: &[(usize, usize)] = if let Some(s) = &custom {
        s
    } else if dram {
        &[(131072, 32768)]
    } else if quick {
        &[(4096, 4096)]
    } else {
        &[(4096, 4096), (17408, 5120), (5120, 17408)]
    };
    let col_counts: &[usize] = match (&cols, dram) {
        (_, true) => &[1],
        (Some(v), false) => v,
        (None, false) => &[1, 4, 64, 512],
    };
    println!(
        "{:<12} {:>4} {:>11} {:>11} {:>11} {:>12} {:>6} {:>6}",
        "shape", "cols", "level", "best us", "median us", "rate", "rel", "issue"
    );
    let mut rng = Rng(1);
    for &(n_rows, k) in shapes {
        let src: Vec<BlockPq2_0> = (0..n_rows * k / QK)
            .map(|_| {
                let codes: [u8; 128] = std::array::from_fn(|_| (rng.next() % 3) as u8);
                BlockPq2_0::from_codes(f16::from_f32(0.01 + (rng.next() % 100) as f32 * 1e-4), &codes)
            })
            .collect();
        let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
        repack_pq2_0_to_x16(&src, n_rows, k, &mut x16).unwrap();
        drop(src);
        let w = PackedWeights::x16(&x16, n_rows, k).unwrap();
        let weight_bytes = std::mem::size_of_val(x16.as_slice()) as f64;
        // --from-dram: copies past 1 GiB, taken in turn by successive calls (the first is x16)
        let n_copies = if from_dram { ((1u64 << 30) as f64 / weight_bytes).ceil().max(2.0) as usize } else { 1 };
        let copies: Vec<Vec<BlockX16>> = (1..n_copies).map(|_| x16.clone()).collect();
        let ws: Vec<PackedWeights> =
            core::iter::once(w).chain(copies.iter().map(|c| PackedWeights::x16(c, n_rows, k).unwrap())).collect();
        if from_dram {
            println!(
                "levels: {n_rows}x{k}: {n_copies} copies of {:.1} MB ({:.2} GB), one per call in turn",
                weight_bytes / 1e6,
                weight_bytes * n_copies as f64 / 1e9
            );
        }
        // per arm name, the best 1-column time of this shape (--from-dram's "x 1 col")
        let mut one_col: Vec<(String, f64)> = Vec::new();
        let mut turn = 0usize;
        for &n_cols in col_counts {
            let per = k.div_ceil(256);
            let mut act = vec![BlockQ8K::default(); n_cols * per];
            for j in 0..n_cols {
                let x: Vec<f32> = (0..k).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
                quantize_row_q8_k_padded(&x, &mut act[j * per..(j + 1) * per], Contract::Fused).unwrap();
            }
            let a = Activations::new(&act, n_cols, k).unwrap();
            // the arms of this width (amx's other blocking and the kernel without tiles only where
            // the batch reaches the tiles; the narrow tiles from 2 columns, on a T16 pack)
            let arms: Vec<Arm> = arms
                .iter()
                .copied()
                .filter(|a| match a {
                    Arm::Level(_) => true,
                    Arm::Amx(Blocking::Narrow) | Arm::NoTiles(Blocking::Narrow) => n_cols >= 2,
                    _ => n_cols >= AMX_MIN_COLS,
                })
                .collect();
            let packs: Vec<_> = arms
                .iter()
                .map(|arm| match arm {
                    Arm::Amx(_) | Arm::NoTiles(_) => ActPack::new(ActFormat::T16, k, n_cols, &act).unwrap(),
                    _ => a.pack(Layout::X16, arm.level()).unwrap(),
                })
                .collect();
            let mut dst: Vec<Vec<f32>> = arms.iter().map(|_| vec![0.0f32; n_rows * n_cols]).collect();
            // outputs first: the same bits at every level, or no table
            for (i, arm) in arms.iter().enumerate() {
                arm.run(&ws[0], &packs[i].view(), &mut dst[i], n_rows);
                if matches!(arm, Arm::NoTiles(_)) {
                    continue;
                }
                let same = dst[i].iter().zip(&dst[0]).all(|(x, y)| x.to_bits() == y.to_bits());
                assert!(same, "{} and {} outputs differ at {n_rows}x{k}, {n_cols} columns", arm.name(), arms[0].name());
            }
            // calls per batch: about 20 ms of the slowest level
            let mut calls = 10_000usize;
            for (i, arm) in arms.iter().enumerate() {
                let t0 = cpu_ns();
                arm.run(&ws[0], &packs[i].view(), &mut dst[i], n_rows);
                let one = (cpu_ns() - t0).max(1);
                calls = calls.min((20_000_000 / one).clamp(1, 10_000) as usize);
            }
            let mut per_call: Vec<Vec<f64>> = arms.iter().map(|_| Vec::with_capacity(reps)).collect();
            let mut read_ns: Vec<f64> = Vec::new();
            for _ in 0..reps {
                for (pk, p) in peak.iter_mut().zip(&probes) {
                    if let (Some(v), Some(p)) = (pk.as_mut(), p) {
                        *v = v.max(time_probe(*p));
                    }
                }
                if dram {
                    // the faster of one stream and the gemv's own order (four row tiles side by
                    // side, as examples/dram): one stream is no ceiling on every CPU (Zen 3)
                    // SAFETY: X16 blocks are plain old data without padding.
                    let bytes = unsafe { common::bytes_of(&x16) };
                    let t = cpu_ns();
                    std::hint::black_box(common::read_sum(bytes));
                    let one = (cpu_ns() - t) as f64;
                    let t = cpu_ns();
                    let tile = k / QK * std::mem::size_of::<BlockX16>();
                    std::hint::black_box(common::read_sum_streams(bytes, tile, common::GEMV_STREAMS));
                    read_ns.push(one.min((cpu_ns() - t) as f64));
                }
                for (i, arm) in arms.iter().enumerate() {
                    let p = packs[i].view();
                    let t = cpu_ns();
                    for _ in 0..calls {
                        turn = (turn + 1) % ws.len();
                        arm.run(&ws[turn], &p, &mut dst[i], n_rows);
                    }
                    per_call[i].push((cpu_ns() - t) as f64 / calls as f64);
                }
            }
            let mut best = Vec::new();
            for v in per_call.iter_mut() {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                best.push(v[0]);
            }
            // relative to the fastest kernel that computes the product (not the one without tiles)
            let fastest = best
                .iter()
                .zip(&arms)
                .filter(|(_, a)| !matches!(a, Arm::NoTiles(_)))
                .map(|(b, _)| *b)
                .fold(f64::INFINITY, f64::min);
            let read_best = read_ns.iter().copied().fold(f64::INFINITY, f64::min);
            if dram {
                println!(
                    "{:<12} {:>4} {:>11} {:>11.1} {:>11} {:>12}",
                    format!("{n_rows}x{k}"),
                    "",
                    "read loop",
                    read_best / 1e3,
                    "",
                    format!("{:.1} GB/s", weight_bytes / read_best)
                );
            }
            for (i, arm) in arms.iter().enumerate() {
                let ns = best[i];
                let gmacs = (n_rows * k * n_cols) as f64 / ns;
                let rate =
                    if n_cols == 1 { format!("{:.1} GB/s", weight_bytes / ns) } else { format!("{:.0} GMAC/s", gmacs) };
                if from_dram && n_cols == 1 {
                    one_col.push((arm.name(), ns));
                }
                let vs_one = one_col.iter().find(|(n, _)| *n == arm.name()).map(|(_, t)| ns / t);
                let issue = match limit_of(*arm).and_then(|j| peak[j]) {
                    _ if from_dram && n_cols > 1 && vs_one.is_some() => format!("{:.2}x 1col", vs_one.unwrap_or(0.0)),
                    Some(p) if n_cols > 1 => format!("{:.0}%", 100.0 * gmacs / p),
                    _ if dram => format!("{:.0}% rd", 100.0 * read_best / ns),
                    _ => String::new(),
                };
                println!(
                    "{:<12} {:>4} {:>11} {:>11.1} {:>11.1} {:>12} {:>5.2}x {:>6}",
                    format!("{n_rows}x{k}"),
                    n_cols,
                    arm.name(),
                    ns / 1e3,
                    per_call[i][reps / 2] / 1e3,
                    rate,
                    ns / fastest,
                    issue
                );
            }
        }
    }
}

/// One timed kernel: a level as the dispatch runs it, the `amx` tiles with a given arrangement
/// of their chains, or the `amx` kernel without its tile instructions.
#[derive(Clone, Copy, PartialEq)]
enum Arm {
    Level(KernelLevel),
    Amx(Blocking),
    /// `kernels::amx_model::gemm_without_tiles` with the level's blocking: its outputs are not
    /// products, so they are not compared.
    NoTiles(Blocking),
}

/// The `amx` blocking that the level does not run.
fn other_blocking() -> Blocking {
    match kernels::amx::BLOCKING {
        Blocking::TwoByTwo | Blocking::Narrow => Blocking::OneByOne,
        Blocking::OneByOne => Blocking::TwoByTwo,
    }
}

impl Arm {
    /// The level whose activation pack and issue limit the arm uses.
    fn level(&self) -> KernelLevel {
        match self {
            Arm::Level(l) => *l,
            Arm::Amx(_) | Arm::NoTiles(_) => KernelLevel::Amx,
        }
    }

    fn name(&self) -> String {
        match self {
            Arm::Level(l) => l.name().to_string(),
            Arm::Amx(Blocking::OneByOne) => "amx 1x1".into(),
            Arm::Amx(Blocking::TwoByTwo) => "amx 2x2".into(),
            Arm::Amx(Blocking::Narrow) => "amx narrow".into(),
            Arm::NoTiles(Blocking::Narrow) => "narrow -tiles".into(),
            Arm::NoTiles(_) => "amx -tiles".into(),
        }
    }

    /// All rows of `dst = W x A`; panics on an error (the arms were chosen to run here).
    fn run(&self, w: &PackedWeights<'_>, p: &PackedActs<'_>, dst: &mut [f32], n_rows: usize) {
        match self {
            Arm::Level(l) => kernels::gemm_packed(*l, w, p, dst, n_rows, 0..n_rows),
            Arm::Amx(b) => kernels::amx_model::gemm_native(w, p, dst, n_rows, 0..n_rows, *b),
            Arm::NoTiles(b) => kernels::amx_model::gemm_without_tiles(w, p, dst, n_rows, 0..n_rows, *b),
        }
        .unwrap()
    }
}
