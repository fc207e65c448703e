//! Decode from DRAM, side by side in one process: a plain read loop, the X16 gemv of every x86
//! level this CPU runs, and (on AVX-512 VNNI) a PTQ1_0-native gemv prototype that streams the
//! file's 1.75 bits per weight instead of X16's 2.125 (issue 16 item 4; issue 18 item 3).
//!
//! Usage: `cargo run --release --example dram -- [--rows N] [--k K] [--threads 1,2] [--reps N]
//! [--no-thp] [--cols 2,3,4]`
//!
//! - One PTQ1_0 matrix (random ternary digits, `rows x k`, default 131072 x 32768: 0.94 GB as
//!   PTQ1_0, 1.14 GB as X16, well beyond any last-level cache) is repacked by the library to X16
//!   and by this program to P16 (below). Both copies and the read loop's source are allocated
//!   with `madvise(MADV_HUGEPAGE)` on Linux unless `--no-thp` (the shim does so for its
//!   buffers only with `GGML_T2P_HUGE_PAGES=1`; see docs/results.md, "Decode from DRAM").
//! - Outputs first: the X16 gemv of every level and the P16 gemv must give the same bits as the
//!   library's reference `vec_dot_ptq1_0_q8_k` (checked on every row), or the run stops.
//! - Then each repetition times, per thread count, in turn: the read loop over the X16 bytes,
//!   the read loop over the P16 bytes, the X16 bytes read in the gemv's order (`read X16 4 str`:
//!   4 row tiles side by side, 64 bytes from each in turn, as the library's gemv reads rows of
//!   k >= 16384, and `avx2` rows of every length), every level's X16 gemv and the P16 gemv. With `T` threads
//!   each thread takes a contiguous share of the row tiles (as ggml's threads do) and the time is
//!   the wall time from the release of the already running threads to the last one's end; the
//!   read loops split their bytes the same way. Reports the best and median per call, bytes per second, weights
//!   per second (the figure that compares layouts of different size) and each gemv's share of
//!   the read loop over its own bytes (X16: the faster of the two X16 reads; on a Zen 3 the
//!   4-stream order read 14.7 GB/s where one stream read 10.9, so one stream alone is no
//!   ceiling there).
//!
//! - `--cols L`: also each level's X16 gemm of `n` columns (small batches: parallel sequences,
//!   drafted tokens) from the same matrix, each column with its own activations, checked column by
//!   column against the level's gemv of that column (itself checked against the reference), and
//!   timed as the gemv is; `x gemv` is its time over the same level's one-column time in the run.
//! - `X16 proto S str` rows (AVX-512 VNNI): a stand-alone copy of the avx512vnni gemv that walks
//!   `S` = 1, 2, 4, 8 row tiles side by side; how the library's `GEMV_STREAMS` was chosen.
//!
//! ## P16: the PTQ1_0-native x86 layout measured here (not shipped; see docs/ptq1_0.md)
//! Sixteen rows of one 128-weight block in 448 bytes (16 x 28, every file byte kept): the 16 fp16
//! scales, then six 64-byte words whose 32-bit lane `r` holds row `r`'s `qs[4w .. 4w+4]`, then the
//! 16 rows' two `qh` bytes. Digit `n` of a byte `q` is `(3 t_n) >> 8` with `t_n = q 3^n mod 256`
//! (docs/formats.md §2), so `256 digit_n = 3 t_n - t_(n+1)`: with `t_(n+1) = t_n + t_n + t_n` (two
//! byte adds) the digit dot of a word is `(3 * dot(t_n, y) - dot(t_(n+1), y)) / 256`, exactly, from
//! two `vpdpbusd` and no decoding at all. A block costs 68 `vpdpbusd` (X16: 32) for 18% fewer bytes.
use ggml_t2p::format::{BlockL64, BlockPtq1_0, BlockQ8K, BlockX16, QK};
use ggml_t2p::reference::{quantize_row_q8_k_padded, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{repack_ptq1_0_to_l64, repack_ptq1_0_to_x16, repacked_blocks, Layout};
use ggml_t2p::{kernels, Activations, KernelLevel, PackedWeights};
use half::f16;
use std::time::Instant;

#[path = "common/mod.rs"]
mod common;
use common::{bytes_of, read_sum, read_sum_streams, GEMV_STREAMS};

fn usage_error(usage: &str, why: &str) -> ! {
    common::usage_error("dram", usage, why)
}

#[path = "../tests/rust/common/rng.rs"]
mod rng;
use rng::Rng;

/// A zeroed vector of `n` `T`s whose pages are advised as transparent huge pages first (Linux,
/// when `thp`), so that the first touch faults 2 MiB pages where the kernel allows it.
fn alloc<T: Copy + Default>(n: usize, thp: bool) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    #[cfg(target_os = "linux")]
    if thp {
        extern "C" {
            fn madvise(addr: *mut u8, len: usize, advice: i32) -> i32;
        }
        const MADV_HUGEPAGE: i32 = 14;
        const HUGE: usize = 1 << 21;
        let p = v.as_mut_ptr() as usize;
        let (a, e) = ((p + HUGE - 1) & !(HUGE - 1), (p + n * std::mem::size_of::<T>()) & !(HUGE - 1));
        if e > a {
            // SAFETY: [a, e) lies inside the vector's allocation (whole 2 MiB pages of it);
            // MADV_HUGEPAGE changes no contents, only how the pages are backed.
            unsafe { madvise(a as *mut u8, e - a, MADV_HUGEPAGE) };
        }
    }
    v.resize(n, T::default());
    v
}

/// One P16 block: sixteen rows of one 128-weight PTQ1_0 block (see the module docs).
#[repr(C)]
#[derive(Clone, Copy)]
struct BlockP16 {
    d: [f16; 16],
    qs: [[u8; 64]; 6],
    qh: [u8; 32],
}
const _: () = assert!(std::mem::size_of::<BlockP16>() == 448);
impl Default for BlockP16 {
    fn default() -> Self {
        BlockP16 { d: [f16::ZERO; 16], qs: [[0; 64]; 6], qh: [0; 32] }
    }
}

/// The activations of one 128-block in P16 order: for word `w`, digit `n`, the four values at
/// `ys[4 (5w + n) ..]` meet lane bytes 0..4 of the word's digit `n`; for the `qh` digit `n`,
/// `ys[120 + 4n ..]` holds the values of `qh[0]`'s and `qh[1]`'s digit `n` and two zeros.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct ActP16 {
    ys: [i8; 136],
    d: f32,
    nysum: i32,
}
impl Default for ActP16 {
    fn default() -> Self {
        ActP16 { ys: [0; 136], d: 0.0, nysum: 0 }
    }
}

/// Element of byte `i` (0..26, `qs` then `qh`), digit `n` of a PTQ1_0 block (docs/formats.md §2).
fn element(i: usize, n: usize) -> usize {
    if i < 16 {
        16 * n + i
    } else if i < 24 {
        80 + 8 * n + (i - 16)
    } else {
        120 + 2 * n + (i - 24)
    }
}

/// Repacks a PTQ1_0 matrix (`rows % 16 == 0`) to P16, row-tile major like X16.
fn repack_p16(src: &[BlockPtq1_0], rows: usize, nb: usize, dst: &mut [BlockP16]) {
    for t in 0..rows / 16 {
        for i in 0..nb {
            let o = &mut dst[t * nb + i];
            for r in 0..16 {
                let b = &src[(16 * t + r) * nb + i];
                o.d[r] = b.d;
                for w in 0..6 {
                    o.qs[w][4 * r..4 * r + 4].copy_from_slice(&b.qs[4 * w..4 * w + 4]);
                }
                o.qh[2 * r..2 * r + 2].copy_from_slice(&b.qh);
            }
        }
    }
}

/// Packs one column's Q8_K row into P16 order.
fn pack_p16(act: &[BlockQ8K], nb: usize) -> Vec<ActP16> {
    (0..nb)
        .map(|i| {
            let blk = &act[i / 2];
            let y = &blk.qs[QK * (i % 2)..QK * (i % 2) + QK];
            let mut p = ActP16 { d: blk.d, nysum: -y.iter().map(|&v| i32::from(v)).sum::<i32>(), ..Default::default() };
            for w in 0..6 {
                for n in 0..5 {
                    for b in 0..4 {
                        p.ys[4 * (5 * w + n) + b] = y[element(4 * w + b, n)];
                    }
                }
            }
            for n in 0..4 {
                p.ys[120 + 4 * n] = y[element(24, n)];
                p.ys[120 + 4 * n + 1] = y[element(25, n)];
            }
            p
        })
        .collect()
}

/// P16 gemv of row tiles `tiles` (AVX-512 VNNI): `dst[16 t + r]` for every row of those tiles.
///
/// # Safety
/// AVX-512 F/BW/VL/VNNI and F16C available; `w` holds `n_tiles * nb` blocks, `a` `nb`, and `dst`
/// `16 * tiles.end` floats.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")]
unsafe fn gemv_p16(w: &[BlockP16], a: &[ActP16], nb: usize, tiles: std::ops::Range<usize>, dst: *mut f32) {
    // four row tiles side by side where they are there, as the library's X16 gemv does
    let mut t = tiles.start;
    while t + 4 <= tiles.end {
        gemv_p16_streams::<4>(w, a, nb, t, dst);
        t += 4;
    }
    while t < tiles.end {
        gemv_p16_streams::<1>(w, a, nb, t, dst);
        t += 1;
    }
}

/// [`gemv_p16`] on row tiles `t0 .. t0 + S`, block `i` of each in turn.
///
/// # Safety
/// As [`gemv_p16`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")]
unsafe fn gemv_p16_streams<const S: usize>(w: &[BlockP16], a: &[ActP16], nb: usize, t0: usize, dst: *mut f32) {
    use core::arch::x86_64::*;
    let mut sumf = [_mm512_setzero_ps(); S];
    for i in 0..nb {
        for (j, sumf) in sumf.iter_mut().enumerate() {
            let b = &w[(t0 + j) * nb + i];
            let y = &a[i];
            let yp = y.ys.as_ptr();
            // two chains per sum (even and odd words): one chain of 34 accumulates per block
            // would wait on their latency
            let (mut sa, mut sb) = ([_mm512_setzero_si512(); 2], [_mm512_setzero_si512(); 2]);
            macro_rules! word {
                ($wd:expr, $ch:expr) => {{
                    let mut tv = _mm512_loadu_si512(b.qs[$wd].as_ptr().cast());
                    for n in 0..5 {
                        let yv = _mm512_set1_epi32(yp.add(4 * (5 * $wd + n)).cast::<i32>().read_unaligned());
                        sa[$ch] = _mm512_dpbusd_epi32(sa[$ch], tv, yv);
                        tv = times3(tv);
                        sb[$ch] = _mm512_dpbusd_epi32(sb[$ch], tv, yv);
                    }
                }};
            }
            word!(0, 0);
            word!(1, 1);
            word!(2, 0);
            word!(3, 1);
            word!(4, 0);
            word!(5, 1);
            let mut hv = _mm512_cvtepu16_epi32(_mm256_loadu_si256(b.qh.as_ptr().cast()));
            for n in 0..4 {
                let yv = _mm512_set1_epi32(yp.add(120 + 4 * n).cast::<i32>().read_unaligned());
                sa[n % 2] = _mm512_dpbusd_epi32(sa[n % 2], hv, yv);
                hv = times3(hv);
                sb[n % 2] = _mm512_dpbusd_epi32(sb[n % 2], hv, yv);
            }
            let a3 = _mm512_add_epi32(sa[0], sa[1]);
            let b3 = _mm512_add_epi32(sb[0], sb[1]);
            // 256 * (digit dot) = 3 A - B, exactly; then isum = digit dot - sum(y)
            let dd = _mm512_srai_epi32::<8>(_mm512_sub_epi32(_mm512_add_epi32(a3, _mm512_add_epi32(a3, a3)), b3));
            let isum = _mm512_add_epi32(dd, _mm512_set1_epi32(y.nysum));
            let d = _mm512_cvtph_ps(_mm256_loadu_si256(b.d.as_ptr().cast()));
            let ddy = _mm512_mul_ps(d, _mm512_set1_ps(y.d));
            *sumf = _mm512_fmadd_ps(ddy, _mm512_cvtepi32_ps(isum), *sumf);
        }
    }
    for (j, v) in sumf.iter().enumerate() {
        _mm512_storeu_ps(dst.add(16 * (t0 + j)), *v);
    }
}

/// `3 v` per byte (mod 256) as two `vpaddb`, in `asm!` so that the compiler does not fold the
/// chain of them into a byte multiply by `3^n` (which x86 lacks: it emulates it with several
/// 16-bit multiplies).
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn times3(v: core::arch::x86_64::__m512i) -> core::arch::x86_64::__m512i {
    let out;
    // SAFETY: register-only AVX-512BW instructions; the caller's target features enable them.
    unsafe {
        core::arch::asm!("vpaddb {t}, {v}, {v}", "vpaddb {o}, {t}, {v}", v = in(zmm_reg) v, t = out(zmm_reg) _,
            o = lateout(zmm_reg) out, options(pure, nomem, nostack));
    }
    out
}

/// One column's 128 activations of a block in natural order (X16's slot `s` of word `w` meets
/// values `16w + 4s ..`), with the Q8_K scale and `-sum`.
#[repr(C, align(64))]
#[derive(Clone, Copy)]
struct ActX16 {
    ys: [i8; 128],
    d: f32,
    nysum: i32,
}

fn pack_x16(act: &[BlockQ8K], nb: usize) -> Vec<ActX16> {
    (0..nb)
        .map(|i| {
            let blk = &act[i / 2];
            let y = &blk.qs[QK * (i % 2)..QK * (i % 2) + QK];
            let mut ys = [0i8; 128];
            ys.copy_from_slice(y);
            ActX16 { ys, d: blk.d, nysum: -y.iter().map(|&v| i32::from(v)).sum::<i32>() }
        })
        .collect()
}

/// X16 gemv prototype that walks `S` row tiles side by side (block `i` of each in turn), so that
/// `S` weight streams are in flight at once; otherwise the library's avx512vnni gemv (one shift,
/// four masks, x1 and x4 sums, two chains).
///
/// # Safety
/// As [`gemv_p16`], with `w` X16 blocks; `tiles` a multiple of `S` long.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")]
unsafe fn gemv_x16_streams<const S: usize>(
    w: &[BlockX16],
    a: &[ActX16],
    nb: usize,
    tiles: std::ops::Range<usize>,
    dst: *mut f32,
) {
    use core::arch::x86_64::*;
    let (m1, m4) = (_mm512_set1_epi8(3), _mm512_set1_epi8(12));
    let mut t = tiles.start;
    while t + S <= tiles.end {
        let mut sumf = [_mm512_setzero_ps(); S];
        for i in 0..nb {
            let y = &a[i];
            let yp = y.ys.as_ptr();
            for j in 0..S {
                let b = &w[(t + j) * nb + i];
                let mut s1 = [_mm512_set1_epi32(y.nysum), _mm512_setzero_si512()];
                let mut s4 = [_mm512_setzero_si512(); 2];
                for wd in 0..8 {
                    let v = _mm512_loadu_si512(b.qs[wd].as_ptr().cast());
                    let h = _mm512_srli_epi16::<4>(v);
                    let c = wd % 2;
                    let g = |k: usize| _mm512_set1_epi32(yp.add(16 * wd + 4 * k).cast::<i32>().read_unaligned());
                    s1[c] = _mm512_dpbusd_epi32(s1[c], _mm512_and_si512(v, m1), g(0));
                    s4[c] = _mm512_dpbusd_epi32(s4[c], _mm512_and_si512(v, m4), g(1));
                    s1[c] = _mm512_dpbusd_epi32(s1[c], _mm512_and_si512(h, m1), g(2));
                    s4[c] = _mm512_dpbusd_epi32(s4[c], _mm512_and_si512(h, m4), g(3));
                }
                let isum = _mm512_add_epi32(
                    _mm512_add_epi32(s1[0], s1[1]),
                    _mm512_srai_epi32::<2>(_mm512_add_epi32(s4[0], s4[1])),
                );
                let d = _mm512_cvtph_ps(_mm256_loadu_si256(b.d.as_ptr().cast()));
                sumf[j] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_set1_ps(y.d)), _mm512_cvtepi32_ps(isum), sumf[j]);
            }
        }
        for (j, v) in sumf.iter().enumerate() {
            _mm512_storeu_ps(dst.add(16 * (t + j)), *v);
        }
        t += S;
    }
}

/// A raw output pointer that threads write disjoint ranges of.
#[derive(Clone, Copy)]
struct Out(*mut f32);
// SAFETY: every thread writes its own rows only (contiguous tile shares).
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

/// Runs `f(share)` on `threads` threads over `0..n` split into contiguous shares (multiples of
/// `align`), and returns the wall time from the start of the work to the end of the last share.
/// The helper threads are started first and spin until every one of them runs, then the calling
/// thread (which takes share 0) starts the clock and releases them: a thread that has only just
/// been created may wait for a scheduler tick (4 ms here) before it runs, which would be timed.
fn timed_split(threads: usize, n: usize, align: usize, f: &(dyn Fn(std::ops::Range<usize>) + Sync)) -> f64 {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    let units = n / align;
    let share = |j: usize| units * j / threads * align..units * (j + 1) / threads * align;
    let (ready, go) = (AtomicUsize::new(0), AtomicBool::new(false));
    let mut t0 = Instant::now();
    std::thread::scope(|s| {
        for j in 1..threads {
            let (ready, go, r) = (&ready, &go, share(j));
            s.spawn(move || {
                ready.fetch_add(1, Ordering::AcqRel);
                while !go.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                f(r);
            });
        }
        while ready.load(Ordering::Acquire) < threads - 1 {
            std::hint::spin_loop();
        }
        t0 = Instant::now();
        go.store(true, Ordering::Release);
        f(share(0));
    });
    t0.elapsed().as_nanos() as f64
}

fn main() {
    const USAGE: &str =
        "usage: cargo run --release --example dram -- [--rows N] [--k K] [--threads 1,2] [--reps N] [--no-thp] [--cols 2,3,4]\n  \
         --rows N      weight rows (a multiple of 128; default 131072)\n  \
         --k K         weights per row (a multiple of 256; default 32768)\n  \
         --threads L   comma-separated thread counts (default 1 and all cores)\n  \
         --reps N      repetitions, each timing every case once in turn (default 7)\n  \
         --no-thp      do not advise transparent huge pages\n  \
         --cols L      also time each level's X16 gemm of these column counts (2 or more)";
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (mut rows, mut k, mut reps, mut thp) = (131072usize, 32768usize, 7usize, true);
    let mut threads: Vec<usize> = if cores > 1 { vec![1, cores] } else { vec![1] };
    let mut cols: Vec<usize> = Vec::new();
    let mut args = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> usize {
        v.and_then(|v| v.parse::<usize>().ok())
            .filter(|&n| n >= 1)
            .unwrap_or_else(|| usage_error(USAGE, &format!("{what} takes a whole number of 1 or more")))
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            "--rows" => rows = num(args.next(), "--rows"),
            "--k" => k = num(args.next(), "--k"),
            "--reps" => reps = num(args.next(), "--reps"),
            "--no-thp" => thp = false,
            "--threads" => {
                let v = args.next().unwrap_or_default();
                threads = v.split(',').map(|s| num(Some(s.to_string()), "--threads")).collect();
            }
            "--cols" => {
                let v = args.next().unwrap_or_default();
                cols = v.split(',').map(|s| num(Some(s.to_string()), "--cols")).collect();
                if cols.iter().any(|&n| n < 2) {
                    usage_error(USAGE, "--cols takes column counts of 2 or more (the gemv always runs)");
                }
            }
            other => usage_error(USAGE, &format!("unknown argument {other}")),
        }
    }
    // 128: the 8-stream prototype covers whole groups of 8 row tiles only
    if rows % 128 != 0 || k % 256 != 0 {
        usage_error(USAGE, "--rows must be a multiple of 128 and --k of 256");
    }
    let levels: Vec<KernelLevel> = [KernelLevel::Avx2, KernelLevel::AvxVnni, KernelLevel::Avx512Vnni]
        .into_iter()
        .filter(|l| l.is_available())
        .collect();
    let p16_runs = cfg!(target_arch = "x86_64") && KernelLevel::Avx512Vnni.is_available();
    if levels.is_empty() {
        println!("dram: no x86 level runs on this CPU; nothing to time");
        return;
    }
    let nb = k / QK;
    let mut rng = Rng(7);
    let mut src: Vec<BlockPtq1_0> = Vec::with_capacity(rows * nb);
    for _ in 0..rows * nb {
        let mut b = BlockPtq1_0 { d: f16::from_f32(0.01 + (rng.next() % 100) as f32 * 1e-4), ..Default::default() };
        for q in b.qs.iter_mut().chain(b.qh.iter_mut()) {
            *q = rng.next() as u8; // every byte is a valid PTQ1_0 byte (digits of any byte are 0..=2)
        }
        src.push(b);
    }
    let mut x16: Vec<BlockX16> = alloc(repacked_blocks(Layout::X16, rows, k).unwrap(), thp);
    repack_ptq1_0_to_x16(&src, rows, k, &mut x16).unwrap();
    let mut p16: Vec<BlockP16> = alloc(rows / 16 * nb, thp);
    repack_p16(&src, rows, nb, &mut p16);
    // L64, the library's 1.75-bit layout (where a level runs it: AVX-512 VBMI)
    let l64_level = [KernelLevel::Avx512Vnni].into_iter().find(|l| l.is_available() && l.runs(Layout::L64));
    let mut l64: Vec<BlockL64> =
        alloc(if l64_level.is_some() { repacked_blocks(Layout::L64, rows, k).unwrap() } else { 0 }, thp);
    if l64_level.is_some() {
        repack_ptq1_0_to_l64(&src, rows, k, &mut l64).unwrap();
    }
    let mut xq: Vec<f32> = (0..k).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
    xq[0] = 1.0;
    let mut act = vec![BlockQ8K::default(); k / 256];
    quantize_row_q8_k_padded(&xq, &mut act, Contract::Fused).unwrap();
    let a = Activations::new(&act, 1, k).unwrap();
    let packs: Vec<_> = levels.iter().map(|&l| a.pack(Layout::X16, l).unwrap()).collect();
    // --cols: n columns of their own activations per count, and their packs per level
    let kb = k / 256;
    let mut multi_acts: Vec<Vec<BlockQ8K>> = Vec::new();
    for &n in &cols {
        let mut acts = vec![BlockQ8K::default(); n * kb];
        for col in acts.chunks_exact_mut(kb) {
            let x: Vec<f32> = (0..k).map(|_| (rng.next() % 2001) as f32 / 1000.0 - 1.0).collect();
            quantize_row_q8_k_padded(&x, col, Contract::Fused).unwrap();
        }
        multi_acts.push(acts);
    }
    let multi: Vec<Activations<'_>> =
        cols.iter().zip(&multi_acts).map(|(&n, acts)| Activations::new(acts, n, k).unwrap()).collect();
    // multi_packs[c][i]: column count cols[c] at levels[i]
    let multi_packs: Vec<Vec<_>> =
        multi.iter().map(|a| levels.iter().map(|&l| a.pack(Layout::X16, l).unwrap()).collect()).collect();
    let ap16 = pack_p16(&act, nb);
    let l64_pack = l64_level.map(|l| a.pack(Layout::L64, l).unwrap());
    let wl = PackedWeights::l64(&l64, rows, k);
    let ax16 = pack_x16(&act, nb);
    let w = PackedWeights::x16(&x16, rows, k).unwrap();
    let bytes = |v: &[u8]| v.len() as f64;
    // SAFETY: both are plain old data (bytes and fp16) without padding.
    let (x16_bytes, p16_bytes, l64_bytes) = unsafe { (bytes_of(&x16), bytes_of(&p16), bytes_of(&l64)) };
    #[cfg(target_os = "linux")]
    if let Ok(t) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        if let Some(l) = t.lines().find(|l| l.starts_with("AnonHugePages")) {
            println!("dram: {} (thp advised: {thp})", l.split_whitespace().collect::<Vec<_>>().join(" "));
        }
    }
    println!(
        "dram: {rows} x {k}; X16 {:.1} MB, P16 {:.1} MB; levels {}; P16 gemv {}",
        bytes(x16_bytes) / 1e6,
        bytes(p16_bytes) / 1e6,
        levels.iter().map(|l| l.name()).collect::<Vec<_>>().join(", "),
        if p16_runs { "runs (avx512vnni)" } else { "skipped (no AVX-512 VNNI)" }
    );

    // outputs first: every kernel against the reference, bit for bit, every row
    let reference: Vec<f32> =
        (0..rows).map(|r| vec_dot_ptq1_0_q8_k(&src[r * nb..(r + 1) * nb], &act, Contract::Fused).unwrap()).collect();
    drop(src);
    let mut dst = vec![0.0f32; rows];
    let same = |d: &[f32]| d.iter().zip(&reference).all(|(x, y)| x.to_bits() == y.to_bits());
    for (i, &l) in levels.iter().enumerate() {
        kernels::gemm_packed(l, &w, &packs[i].view(), &mut dst, rows, 0..rows).unwrap();
        assert!(same(&dst), "X16 {} differs from the reference", l.name());
    }
    #[cfg(target_arch = "x86_64")]
    if p16_runs {
        dst.fill(0.0);
        // SAFETY: AVX-512 VNNI checked (p16_runs); sizes as built above.
        unsafe { gemv_p16(&p16, &ap16, nb, 0..rows / 16, dst.as_mut_ptr()) };
        assert!(same(&dst), "P16 differs from the reference");
        if let (Some(l), Some(p), Ok(wl)) = (l64_level, &l64_pack, &wl) {
            dst.fill(0.0);
            kernels::gemm_packed(l, wl, &p.view(), &mut dst, rows, 0..rows).unwrap();
            assert!(same(&dst), "L64 differs from the reference");
        }
        for streams in [1usize, 2, 4, 8] {
            dst.fill(0.0);
            // SAFETY: as above; rows / 16 is a multiple of 8 (rows % 128 == 0 checked).
            unsafe {
                match streams {
                    1 => gemv_x16_streams::<1>(&x16, &ax16, nb, 0..rows / 16, dst.as_mut_ptr()),
                    2 => gemv_x16_streams::<2>(&x16, &ax16, nb, 0..rows / 16, dst.as_mut_ptr()),
                    4 => gemv_x16_streams::<4>(&x16, &ax16, nb, 0..rows / 16, dst.as_mut_ptr()),
                    _ => gemv_x16_streams::<8>(&x16, &ax16, nb, 0..rows / 16, dst.as_mut_ptr()),
                }
            }
            assert!(same(&dst), "X16 prototype with {streams} streams differs from the reference");
        }
    }
    // --cols: every column of each gemm against the same level's gemv of that column alone
    let max_cols = cols.iter().copied().max().unwrap_or(1);
    let mut dst_n = vec![0.0f32; rows * max_cols];
    for (c, &n) in cols.iter().enumerate() {
        for (i, &l) in levels.iter().enumerate() {
            kernels::gemm_packed(l, &w, &multi_packs[c][i].view(), &mut dst_n[..rows * n], rows, 0..rows).unwrap();
            for (j, col) in multi_acts[c].chunks_exact(kb).enumerate() {
                let one = Activations::new(col, 1, k).unwrap().pack(Layout::X16, l).unwrap();
                kernels::gemm_packed(l, &w, &one.view(), &mut dst, rows, 0..rows).unwrap();
                let got = &dst_n[j * rows..(j + 1) * rows];
                assert!(
                    got.iter().zip(&dst).all(|(x, y)| x.to_bits() == y.to_bits()),
                    "X16 {} with {n} columns: column {j} differs from its gemv",
                    l.name()
                );
            }
        }
    }
    if !cols.is_empty() {
        println!("dram: every column of the {cols:?}-column gemms bit-identical to its gemv (X16 every level)");
    }
    println!(
        "dram: outputs bit-identical to the reference on all {rows} rows (X16 every level{})",
        if p16_runs { ", P16" } else { "" }
    );
    if l64_level.is_some() {
        println!("dram: L64 {:.1} MB, gemv bit-identical to the reference", bytes(l64_bytes) / 1e6);
    }

    // the read in the gemv's order reads every byte once: the same wrapping sum of u64 words
    let tile = nb * std::mem::size_of::<BlockX16>();
    assert_eq!(read_sum_streams(x16_bytes, tile, GEMV_STREAMS), read_sum(x16_bytes), "read X16 4 str misses bytes");

    let out = Out(dst.as_mut_ptr());
    for &nt in &threads {
        let mut names: Vec<String> =
            vec!["read X16 bytes".into(), "read P16 bytes".into(), format!("read X16 {GEMV_STREAMS} str")];
        names.extend(levels.iter().map(|l| format!("X16 {}", l.name())));
        // the --cols gemms follow the levels' gemvs: name `X16 LEVEL Nc`
        for &n in &cols {
            names.extend(levels.iter().map(|l| format!("X16 {} {n}c", l.name())));
        }
        if l64_level.is_some() {
            names.push("read L64 bytes".into());
            names.push("L64 avx512vbmi".into());
        }
        if p16_runs {
            names.push("P16 avx512vnni".into());
            names.extend([
                "X16 proto 1 str".into(),
                "X16 proto 2 str".into(),
                "X16 proto 4 str".into(),
                "X16 proto 8 str".into(),
            ]);
        }
        let mut times: Vec<Vec<f64>> = names.iter().map(|_| Vec::new()).collect();
        for _ in 0..reps {
            let mut c = 0;
            let sink = std::sync::atomic::AtomicU64::new(0);
            for buf in [x16_bytes, p16_bytes] {
                times[c].push(timed_split(nt, buf.len(), 4096, &|r| {
                    sink.fetch_add(read_sum(&buf[r]), std::sync::atomic::Ordering::Relaxed);
                }));
                c += 1;
            }
            // the X16 bytes in the gemv's order: GEMV_STREAMS row tiles side by side; shares are
            // whole groups of tiles
            times[c].push(timed_split(nt, rows / 16, GEMV_STREAMS, &|r| {
                let buf = &x16_bytes[r.start * tile..r.end * tile];
                sink.fetch_add(read_sum_streams(buf, tile, GEMV_STREAMS), std::sync::atomic::Ordering::Relaxed);
            }));
            c += 1;
            for (i, &l) in levels.iter().enumerate() {
                let p = packs[i].view();
                times[c].push(timed_split(nt, rows, 16, &|r| {
                    let o = out;
                    // SAFETY: each thread writes its own rows of dst (disjoint tile shares).
                    unsafe { kernels::dispatch::gemm_raw(l, &w, &p, o.0, rows, rows, r).unwrap() };
                }));
                c += 1;
            }
            for (cc, &n) in cols.iter().enumerate() {
                for (i, &l) in levels.iter().enumerate() {
                    let p = multi_packs[cc][i].view();
                    let out_n = Out(dst_n.as_mut_ptr());
                    times[c].push(timed_split(nt, rows, 16, &|r| {
                        let o = out_n;
                        // SAFETY: each thread writes its own rows of each of the n columns of
                        // dst_n (disjoint tile shares; column stride `rows`).
                        unsafe { kernels::dispatch::gemm_raw(l, &w, &p, o.0, rows * n, rows, r).unwrap() };
                    }));
                    c += 1;
                }
            }
            if let (Some(l), Some(p), Ok(wl)) = (l64_level, &l64_pack, &wl) {
                times[c].push(timed_split(nt, l64_bytes.len(), 4096, &|r| {
                    sink.fetch_add(read_sum(&l64_bytes[r]), std::sync::atomic::Ordering::Relaxed);
                }));
                c += 1;
                let p = p.view();
                times[c].push(timed_split(nt, rows, 64, &|r| {
                    let o = out;
                    // SAFETY: each thread writes its own rows of dst (disjoint 64-row tile shares).
                    unsafe { kernels::dispatch::gemm_raw(l, wl, &p, o.0, rows, rows, r).unwrap() };
                }));
                c += 1;
            }
            #[cfg(target_arch = "x86_64")]
            if p16_runs {
                times[c].push(timed_split(nt, rows / 16, 1, &|r| {
                    let o = out;
                    // SAFETY: AVX-512 VNNI checked; each thread writes its own tiles' rows.
                    unsafe { gemv_p16(&p16, &ap16, nb, r, o.0) };
                }));
                c += 1;
                for streams in [1usize, 2, 4, 8] {
                    times[c].push(timed_split(nt, rows / 16, 8, &|r| {
                        let o = out;
                        // SAFETY: AVX-512 VNNI checked; each thread writes its own tiles' rows
                        // (shares are multiples of 8 tiles).
                        unsafe {
                            match streams {
                                1 => gemv_x16_streams::<1>(&x16, &ax16, nb, r, o.0),
                                2 => gemv_x16_streams::<2>(&x16, &ax16, nb, r, o.0),
                                4 => gemv_x16_streams::<4>(&x16, &ax16, nb, r, o.0),
                                _ => gemv_x16_streams::<8>(&x16, &ax16, nb, r, o.0),
                            }
                        }
                    }));
                    c += 1;
                }
            }
            std::hint::black_box(sink.into_inner());
        }
        println!("\nthreads {nt} ({} reps, wall time per call)", reps);
        println!(
            "{:<16} {:>10} {:>10} {:>10} {:>12} {:>9}",
            "case", "best ms", "median ms", "GB/s", "Gweights/s", "of read"
        );
        let best: Vec<f64> = times.iter().map(|v| v.iter().copied().fold(f64::INFINITY, f64::min)).collect();
        let median = |c: usize| {
            let mut v = times[c].clone();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        for (c, name) in names.iter().enumerate() {
            let l64_read = names.iter().position(|n| n == "read L64 bytes");
            let (b, read) = if name.starts_with("P16") || name == "read P16 bytes" {
                (bytes(p16_bytes), best[1])
            } else if name.starts_with("L64") || name == "read L64 bytes" {
                (bytes(l64_bytes), best[l64_read.unwrap()])
            } else {
                // X16 cases against the faster of the two X16 reads (one stream, the gemv's order)
                (bytes(x16_bytes), best[0].min(best[2]))
            };
            let share =
                if name.starts_with("read") { String::new() } else { format!("{:.0}%", 100.0 * read / best[c]) };
            println!(
                "{:<16} {:>10.2} {:>10.2} {:>10.1} {:>12.1} {:>9}",
                name,
                best[c] / 1e6,
                median(c) / 1e6,
                b / best[c],
                (rows * k) as f64 / best[c],
                share
            );
        }
        if !cols.is_empty() {
            // time of n columns over the same level's gemv, best and median against best and median
            println!("\nthreads {nt}: n columns against one (x gemv: best / median)");
            for l in &levels {
                let gemv = names.iter().position(|x| *x == format!("X16 {}", l.name())).unwrap();
                let cells: Vec<String> = cols
                    .iter()
                    .map(|&n| {
                        let c = names.iter().position(|x| *x == format!("X16 {} {n}c", l.name())).unwrap();
                        format!("{n}c {:.2}x / {:.2}x", best[c] / best[gemv], median(c) / median(gemv))
                    })
                    .collect();
                println!("{:<12} {}", l.name(), cells.join("   "));
            }
        }
    }
    std::hint::black_box(&dst);
}
