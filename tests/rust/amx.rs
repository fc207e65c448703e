//! The AMX level's tile kernel ([`ggml_t2p::kernels::amx`]) under the scalar tile model
//! ([`ggml_t2p::kernels::amx_model`], feature `testing`, on through the dev-dependency), on every
//! machine: bit for bit against the reference dot for every batch width 1..=40 (padded column
//! tiles), row ranges, rows of k = 128 * odd, thread splits, both sources. Where the CPU has AMX
//! (and the OS permits it), the native kernel runs in `oracle.rs` like every other level and is
//! held against the model here too.

mod common;

use common::{random_acts, random_pq2_0, random_ptq1_0, Rng};
use ggml_t2p::format::{BlockQ8K, BlockX16, QK};
use ggml_t2p::kernels::act_pack::{ActFormat, ActPack};
use ggml_t2p::kernels::amx::{pass_groups, Blocking, PASS_TILES};
use ggml_t2p::kernels::amx_model::{
    gemm_model, gemm_native, gemm_without_tiles, model_dpbssd_counts, model_rows_loaded,
};
use ggml_t2p::kernels::table::{AMX_MIN_COLS, AMX_WIDE_COLS};
use ggml_t2p::reference::{vec_dot_pq2_0_q8_k, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{repack_pq2_0_to_x16, repack_ptq1_0_to_x16, repacked_blocks, Layout};
use ggml_t2p::{Activations, Error, KernelLevel, PackedWeights};

/// A matrix: its X16 repack and the reference outputs, `want[j * n_rows + r]` as bits.
struct Case {
    n_rows: usize,
    k: usize,
    n_cols: usize,
    x16: Vec<BlockX16>,
    act: Vec<BlockQ8K>,
    want: Vec<u32>,
}

/// Every arrangement of the tile chains (the same bits by construction; each is checked).
const BLOCKINGS: [Blocking; 3] = [Blocking::TwoByTwo, Blocking::OneByOne, Blocking::Narrow];

/// The float steps to run the model kernel with: the scalar one, and the native kernel's AVX-512
/// one where the CPU has it (elsewhere it must be refused).
fn steps() -> Vec<bool> {
    let simd = KernelLevel::Avx512Vnni.is_available();
    if !simd {
        let c = case(1, 16, 128, 16, false);
        let mut y = vec![0.0f32; 256];
        for b in BLOCKINGS {
            assert_eq!(gemm_model(&c.weights(), &c.pack().view(), &mut y, 16, 0..16, true, b), Err(Error::Unsupported));
        }
    }
    if simd {
        vec![false, true]
    } else {
        vec![false]
    }
}

/// Every (float step, blocking) the model kernel runs with here: [`steps`] x [`BLOCKINGS`].
fn variants() -> Vec<(bool, Blocking)> {
    steps().into_iter().flat_map(|s| BLOCKINGS.into_iter().map(move |b| (s, b))).collect()
}

/// The `tdpbssd` per `C` tile that `blocking` runs for the row tiles of `rows` (16 each, the last
/// maybe partial) and `n_cols` columns of k = `k`: two per (row tile, column group of 16, block).
/// `OneByOne`: all on `tmm0`. `TwoByTwo`: row tiles in pairs, the last one alone if their count
/// is odd; column groups in passes of `pass_groups` (even, so only the last pass can end on a lone
/// group); within a pass, groups in pairs and the last alone if odd; 2x2 on `tmm0..tmm3`,
/// 2x1 on `tmm0`/`tmm1`, 1x2 on `tmm0`/`tmm2`, 1x1 on `tmm0`. `Narrow`: per column group, row
/// tiles in pairs on `tmm0`/`tmm1`, the last one alone on `tmm0` if their count is odd. The
/// blockings give the same bits, so this is what tells them apart.
fn expected_dpbssd(rows: &core::ops::Range<usize>, k: usize, n_cols: usize, blocking: Blocking) -> [u64; 8] {
    let mut c = [0u64; 8];
    if rows.is_empty() || n_cols == 0 {
        return c;
    }
    let (tiles, groups, per) = (rows.end.div_ceil(16) - rows.start / 16, n_cols.div_ceil(16), 2 * (k / QK) as u64);
    match blocking {
        Blocking::OneByOne => c[0] = per * (tiles * groups) as u64,
        Blocking::Narrow => {
            c[0] = per * (tiles.div_ceil(2) * groups) as u64;
            c[1] = per * (tiles / 2 * groups) as u64;
        }
        Blocking::TwoByTwo => {
            let lone = (tiles % 2 == 1).then_some(1);
            for nr in std::iter::repeat_n(2, tiles / 2).chain(lone) {
                let mut g0 = 0;
                while g0 < groups {
                    let ng = (PASS_TILES / nr).min(groups - g0);
                    let (pair, single): (&[usize], &[usize]) =
                        if nr == 2 { (&[0, 1, 2, 3], &[0, 1]) } else { (&[0, 2], &[0]) };
                    for (ts, n) in [(pair, ng / 2), (single, ng % 2)] {
                        for &t in ts {
                            c[t] += per * n as u64;
                        }
                    }
                    g0 += ng;
                }
            }
        }
    }
    c
}

/// `model_dpbssd_counts()` of this thread now minus `before`.
fn dpbssd_since(before: [u64; 8]) -> [u64; 8] {
    let now = model_dpbssd_counts();
    core::array::from_fn(|t| now[t] - before[t])
}

fn case(seed: u64, n_rows: usize, k: usize, n_cols: usize, ptq1: bool) -> Case {
    let mut rng = Rng(seed);
    let nb = k / QK;
    let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
    let act = random_acts(&mut rng, n_cols, k);
    let a = Activations::new(&act, n_cols, k).unwrap();
    let want: Vec<u32> = if ptq1 {
        let w = random_ptq1_0(&mut rng, n_rows, k);
        repack_ptq1_0_to_x16(&w, n_rows, k, &mut x16).unwrap();
        (0..n_cols)
            .flat_map(|j| (0..n_rows).map(move |r| (r, j)))
            .map(|(r, j)| vec_dot_ptq1_0_q8_k(&w[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap().to_bits())
            .collect()
    } else {
        let w = random_pq2_0(&mut rng, n_rows, k);
        repack_pq2_0_to_x16(&w, n_rows, k, &mut x16).unwrap();
        (0..n_cols)
            .flat_map(|j| (0..n_rows).map(move |r| (r, j)))
            .map(|(r, j)| vec_dot_pq2_0_q8_k(&w[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap().to_bits())
            .collect()
    };
    Case { n_rows, k, n_cols, x16, act, want }
}

impl Case {
    fn pack(&self) -> ActPack {
        ActPack::new(ActFormat::T16, self.k, self.n_cols, &self.act).unwrap()
    }

    fn weights(&self) -> PackedWeights<'_> {
        PackedWeights::x16(&self.x16, self.n_rows, self.k).unwrap()
    }

    /// Runs the model kernel on `rows` with a column stride of `n_rows + pad` with each float
    /// step this CPU has ([`steps`]), then checks every output of `rows` against the reference
    /// and that nothing else was written, nor the 16 columns past the last one (a padding column
    /// of the last group stored would land there, inside the buffer). Returns the outputs checked.
    fn check(&self, rows: core::ops::Range<usize>, pad: usize, what: &str) -> usize {
        let stride = self.n_rows + pad;
        let sentinel = f32::from_bits(0x7FC0_1234);
        let mut checked = 0;
        for (simd, b) in variants() {
            let mut y = vec![sentinel; stride * (self.n_cols + 16)];
            let before = model_dpbssd_counts();
            gemm_model(&self.weights(), &self.pack().view(), &mut y, stride, rows.clone(), simd, b).unwrap();
            assert_eq!(
                dpbssd_since(before),
                expected_dpbssd(&rows, self.k, self.n_cols, b),
                "{what} (simd step {simd}, {b:?}): tdpbssd per C tile, rows {rows:?} of {}, {} columns",
                self.n_rows,
                self.n_cols
            );
            checked += self.compare(&y, stride, &rows, &format!("{what} (simd step {simd}, {b:?})"));
            let past = y[stride * self.n_cols..].iter().position(|v| v.to_bits() != sentinel.to_bits());
            assert_eq!(past, None, "{what} (simd step {simd}, {b:?}): written past the last column");
        }
        checked
    }

    fn compare(&self, y: &[f32], stride: usize, rows: &core::ops::Range<usize>, what: &str) -> usize {
        let mut checked = 0;
        for j in 0..self.n_cols {
            for r in 0..stride {
                let got = y[j * stride + r].to_bits();
                if rows.contains(&r) {
                    let want = self.want[j * self.n_rows + r];
                    assert_eq!(
                        got,
                        want,
                        "{what}: rows {} k {} cols {}: col {j} row {r}: {:e} vs reference {:e}",
                        self.n_rows,
                        self.k,
                        self.n_cols,
                        f32::from_bits(got),
                        f32::from_bits(want)
                    );
                    checked += 1;
                } else {
                    assert_eq!(got, 0x7FC0_1234, "{what}: col {j} row {r} outside {rows:?} was written");
                }
            }
        }
        checked
    }
}

/// Every batch width 1..=40 (full tiles, 1..15 leftover columns, several column groups: pairs and
/// a leftover group), 5 row tiles (two pairs and a leftover) with a last row tile of 4 rows
/// (padding rows never stored), k = 384 (three 128-blocks: the last Q8_K block
/// half padded), a column stride past `n_rows`.
#[test]
fn model_kernel_every_width_bit_exact() {
    let mut checked = 0;
    for n_cols in 1..=40 {
        let c = case(0xA3A0 + n_cols as u64, 68, 384, n_cols, false);
        checked += c.check(0..68, 3, &format!("PQ2_0 width {n_cols}"));
    }
    assert_eq!(checked, variants().len() * 68 * (1..=40).sum::<usize>());
    println!("amx model: {checked} outputs, widths 1..=40, float steps {:?}, bit-identical to the reference", steps());
}

/// The narrow tiles load their `A` tiles (`tmm4`, `tmm5`) with one row per column of the group:
/// per (row-tile pair or lone tile, block) one load of each half, `m` rows for a group of `m`
/// columns, so over a batch the rows loaded are the number of such sets x blocks x columns (a
/// configuration of 16-row `A` tiles would load 16 per group). The 2x2 tiles load 16 rows per group.
#[test]
fn narrow_tiles_load_one_row_per_column() {
    for n_cols in [1, 5, 15, 16, 20, 33] {
        let c = case(0xB0B0 + n_cols as u64, 68, 384, n_cols, false);
        let mut y = vec![0.0f32; 68 * n_cols];
        let (sets, nb) = (68usize.div_ceil(16).div_ceil(2) as u64, 3u64);
        let before = model_rows_loaded();
        gemm_model(&c.weights(), &c.pack().view(), &mut y, 68, 0..68, false, Blocking::Narrow).unwrap();
        let after = model_rows_loaded();
        let a_rows = [after[4] - before[4], after[5] - before[5]];
        assert_eq!(a_rows, [sets * nb * n_cols as u64; 2], "narrow, {n_cols} columns: A rows loaded");
        let before = model_rows_loaded();
        gemm_model(&c.weights(), &c.pack().view(), &mut y, 68, 0..68, false, Blocking::TwoByTwo).unwrap();
        let after = model_rows_loaded();
        // 2x2: every A tile it loads is a whole 16-row tile, padding columns included
        let a2 = [after[4] - before[4], after[5] - before[5]];
        assert!(a2.iter().all(|&r| r > 0 && r % 16 == 0), "2x2, {n_cols} columns: A rows {a2:?}");
    }
}

/// Shapes: k = 128 (one block, odd), 256, 640; rows a multiple of 16 and not; both sources; 300
/// columns (passes of `PASS_TILES` accumulators) on a pair of row tiles and on a pair and a lone
/// one; k = 16000 (passes of two groups: the activation budget) on a pair and a lone row tile.
#[test]
fn model_kernel_shapes_and_sources() {
    let mut checked = 0;
    let shapes = [
        (16, 128, 16),
        (20, 256, 17),
        (64, 640, 33),
        (4, 128, 5),
        (36, 1152, 48),
        (96, 384, 31),
        (20, 256, 300),
        (36, 256, 300),
        // k = 16000: passes of 2 column groups (`pass_groups`), 5 groups with the last padded
        (48, 16000, 67),
    ];
    assert_eq!(pass_groups(16000 / QK, 2), 2, "the large-k shape must split the columns into passes of two");
    for (i, &(n_rows, k, n_cols)) in shapes.iter().enumerate() {
        for ptq1 in [false, true] {
            let c = case(0xB0B0 + i as u64 * 2 + u64::from(ptq1), n_rows, k, n_cols, ptq1);
            checked += c.check(0..n_rows, 0, if ptq1 { "PTQ1_0" } else { "PQ2_0" });
        }
    }
    println!("amx model: {checked} outputs over {} shapes, bit-identical", 2 * shapes.len());
}

/// Row ranges on the 16-row tile: each computes exactly its rows; ranges off the tile grid are
/// refused (`Range`), as for every level.
#[test]
fn model_kernel_row_ranges() {
    let c = case(0xC0C0, 84, 256, 21, false);
    let mut checked = 0;
    for rows in [0..16, 16..84, 32..48, 64..84, 80..84, 0..84, 48..48] {
        checked += c.check(rows.clone(), 1, &format!("rows {rows:?}"));
    }
    assert_eq!(checked, variants().len() * 21 * (16 + 68 + 16 + 20 + 4 + 84));
    let mut y = vec![0.0f32; 84 * 21];
    for bad in [8..16, 0..20, 16..90] {
        for b in BLOCKINGS {
            let r = gemm_model(&c.weights(), &c.pack().view(), &mut y, 84, bad.clone(), false, b);
            assert_eq!(r, Err(Error::Range), "{bad:?}");
        }
    }
}

/// Row tiles split over threads (each with its own tile model, as each ggml thread has its own
/// tile unit): the merged result is the one-call result, bit for bit, for every split count.
#[test]
fn model_kernel_thread_splits() {
    let c = case(0xD0D0, 100, 384, 37, true);
    let tiles = c.n_rows.div_ceil(16);
    for (n_splits, simd, b) in
        [1, 2, 3, 7].into_iter().flat_map(|n| variants().into_iter().map(move |(s, b)| (n, s, b)))
    {
        let parts: Vec<(core::ops::Range<usize>, Vec<f32>)> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n_splits)
                .map(|i| {
                    let c = &c;
                    s.spawn(move || {
                        let rows = 16 * (tiles * i / n_splits)..(16 * (tiles * (i + 1) / n_splits)).min(c.n_rows);
                        let mut y = vec![f32::from_bits(0x7FC0_1234); c.n_rows * c.n_cols];
                        let before = model_dpbssd_counts();
                        gemm_model(&c.weights(), &c.pack().view(), &mut y, c.n_rows, rows.clone(), simd, b).unwrap();
                        let want = expected_dpbssd(&rows, c.k, c.n_cols, b);
                        assert_eq!(dpbssd_since(before), want, "split {n_splits}, {b:?}, rows {rows:?}");
                        (rows, y)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut y = vec![f32::from_bits(0x7FC0_1234); c.n_rows * c.n_cols];
        for (rows, part) in parts {
            c.compare(&part, c.n_rows, &rows, &format!("split {n_splits}"));
            for j in 0..c.n_cols {
                for r in rows.clone() {
                    y[j * c.n_rows + r] = part[j * c.n_rows + r];
                }
            }
        }
        c.compare(&y, c.n_rows, &(0..c.n_rows), &format!("{n_splits} splits merged"));
    }
}

/// The pack as a C caller fills it: column by column, in pieces of Q8_K blocks, in reverse, into a
/// buffer full of garbage. (The pack writes the padding columns of the last group too, but the
/// result does not depend on them: each `A` tile row is one column, whose outputs are dropped;
/// breaking the padding left this test passing, as it should.)
#[test]
fn model_kernel_on_a_garbage_buffer_pack() {
    use ggml_t2p::kernels::act_pack::{pack_raw, packed_size, ActTile16, PackedActs};
    for n_cols in [16, 21, 35] {
        let c = case(0x6A6A + n_cols as u64, 32, 640, n_cols, false);
        let len = packed_size(ActFormat::T16, c.k, n_cols).unwrap();
        let mut buf = vec![ActTile16::default(); len / std::mem::size_of::<ActTile16>()];
        common::bytes_mut(&mut buf).fill(0xC3);
        let per = c.k.div_ceil(256);
        for col in (0..n_cols).rev() {
            for blocks in [0..1, 1..per] {
                let q = &c.act[col * per + blocks.start..col * per + blocks.end];
                // SAFETY: our buffer of `len` bytes, 16-byte aligned; one thread.
                unsafe { pack_raw(ActFormat::T16, c.k, n_cols, col, blocks, q, buf.as_mut_ptr().cast(), len) }.unwrap();
            }
        }
        let view = PackedActs::new(ActFormat::T16, c.k, n_cols, &common::bytes_mut(&mut buf)[..len]).unwrap();
        for (simd, b) in variants() {
            let mut y = vec![f32::from_bits(0x7FC0_1234); c.n_rows * n_cols];
            gemm_model(&c.weights(), &view, &mut y, c.n_rows, 0..c.n_rows, simd, b).unwrap();
            c.compare(&y, c.n_rows, &(0..c.n_rows), &format!("C-style pack, {n_cols} columns, {b:?}"));
        }
    }
}

/// Largest magnitudes: every weight code 3 (+2) or 0 (-1) against activations of +-127: exact
/// int32 tile sums, no saturation anywhere.
#[test]
fn model_kernel_extremes() {
    use ggml_t2p::format::BlockPq2_0;
    use half::f16;
    let (n_rows, k, n_cols) = (32, 256, 18);
    let nb = k / QK;
    let w: Vec<BlockPq2_0> = (0..n_rows * nb)
        .map(|i| BlockPq2_0::from_codes(f16::from_f32(0.03 * (1.0 + i as f32)), &[if i % 3 == 0 { 0 } else { 3 }; 128]))
        .collect();
    let mut act = vec![BlockQ8K::default(); n_cols];
    for (j, b) in act.iter_mut().enumerate() {
        b.d = 0.5 + j as f32;
        for (e, q) in b.qs.iter_mut().enumerate() {
            *q = if (e + j) % 5 == 0 { -127 } else { 127 };
        }
        b.fill_bsums();
    }
    let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, n_rows, k).unwrap()];
    repack_pq2_0_to_x16(&w, n_rows, k, &mut x16).unwrap();
    let a = Activations::new(&act, n_cols, k).unwrap();
    let want: Vec<u32> = (0..n_cols)
        .flat_map(|j| (0..n_rows).map(move |r| (r, j)))
        .map(|(r, j)| vec_dot_pq2_0_q8_k(&w[r * nb..(r + 1) * nb], a.col(j), Contract::Fused).unwrap().to_bits())
        .collect();
    let c = Case { n_rows, k, n_cols, x16, act, want };
    assert_eq!(c.check(0..n_rows, 0, "extremes"), variants().len() * n_rows * n_cols);
}

/// The level's plumbing: its name and C value, the pack format by batch width (tiles from
/// `AMX_MIN_COLS` columns), `auto`'s first choice where usable, and refused where the CPU or OS lacks AMX.
#[test]
fn amx_level_plumbing() {
    let amx = KernelLevel::Amx;
    assert_eq!(amx as i32, 7);
    assert_eq!(KernelLevel::from_name("amx"), Some(amx));
    assert_eq!(KernelLevel::from_i32(7), Some(amx));
    assert!(amx.runs(Layout::X16) && !amx.runs(Layout::T2p));
    for n in [1, 2, AMX_MIN_COLS - 1] {
        assert_eq!(ActFormat::for_kernel(Layout::X16, amx, n), Ok(ActFormat::Halves), "{n} columns");
    }
    for n in [AMX_MIN_COLS, AMX_MIN_COLS + 1, 512] {
        assert_eq!(ActFormat::for_kernel(Layout::X16, amx, n), Ok(ActFormat::T16), "{n} columns");
    }
    assert_eq!(ActFormat::for_kernel(Layout::X16, KernelLevel::Avx512Vnni, 64), Ok(ActFormat::Halves));
    let req = amx.required();
    assert!(req.amx_tile && req.amx_int8 && req.avx512vnni && req.avx2);
    assert_eq!(KernelLevel::best_on(req), if cfg!(target_arch = "x86_64") { Some(amx) } else { None });
    // auto takes amx where this process may use the tiles, else the best other level
    let best = KernelLevel::best();
    if amx.is_available() {
        assert_eq!(best, Some(amx));
    } else {
        assert_ne!(best, Some(amx));
        if KernelLevel::Avx512Vnni.is_available() {
            assert_eq!(best, Some(KernelLevel::Avx512Vnni), "no tiles here: the best other level");
        }
    }
    assert_eq!(amx.is_available_on(req), cfg!(target_arch = "x86_64"));
    let no_int8 = ggml_t2p::CpuFeatures { amx_int8: false, ..req };
    assert!(!amx.is_available_on(no_int8));

    // A T16 pack is refused by the other levels' kernels, and by the model for other formats.
    let c = case(0xE0E0, 16, 128, 16, false);
    let mut y = vec![0.0f32; 16 * 16];
    let halves = ActPack::new(ActFormat::Halves, 128, 16, &c.act).unwrap();
    assert_eq!(
        gemm_model(&c.weights(), &halves.view(), &mut y, 16, 0..16, false, Blocking::TwoByTwo),
        Err(Error::InvalidArgument)
    );
    if KernelLevel::Avx512Vnni.is_available() {
        let r =
            ggml_t2p::kernels::gemm_packed(KernelLevel::Avx512Vnni, &c.weights(), &c.pack().view(), &mut y, 16, 0..16);
        assert_eq!(r, Err(Error::InvalidArgument));
    }
    if !amx.is_available() {
        let a = Activations::new(&c.act, 16, 128).unwrap();
        assert_eq!(ggml_t2p::kernels::gemm(amx, &c.weights(), &a, &mut y, 16, 0..16), Err(Error::Unsupported));
        assert_eq!(ggml_t2p::kernels::assume_kernel(amx), Err(Error::Unsupported), "x86 features are never assumed");
    }
}

/// Where the CPU runs AMX: the native tile kernel equals the model kernel (and so the reference)
/// for widths around the crossover and leftovers, and one (300) that takes three passes of
/// [`PASS_TILES`](ggml_t2p::kernels::amx::PASS_TILES) accumulators, on 5 row tiles (pairs and a
/// leftover), through the level (its [`BLOCKING`](ggml_t2p::kernels::amx::BLOCKING)) and
/// through [`gemm_native`] with each blocking. Elsewhere `gemm_native` is refused and there is
/// nothing native to compare; the test says so in its output.
#[test]
fn native_equals_model_where_available() {
    if !KernelLevel::Amx.is_available() {
        let c = case(0xF0F0, 16, 128, 16, false);
        let mut y = vec![0.0f32; 256];
        for b in BLOCKINGS {
            assert_eq!(gemm_native(&c.weights(), &c.pack().view(), &mut y, 16, 0..16, b), Err(Error::Unsupported));
        }
        println!("amx: not available on this CPU/OS; the native tile kernel was not run");
        return;
    }
    let mut checked = 0;
    let widths = [1, AMX_MIN_COLS - 1, AMX_MIN_COLS, 8, 15, 16, 17, 31, 32, 40, 64, 100, 300];
    let calls = || BLOCKINGS.map(ggml_t2p::kernels::amx_model::native_tile_calls);
    let calls_before = calls();
    for n_cols in widths {
        let c = case(0xF0F0 + n_cols as u64, 68, 384, n_cols, false);
        let a = Activations::new(&c.act, n_cols, c.k).unwrap();
        let mut y = vec![f32::from_bits(0x7FC0_1234); c.n_rows * n_cols];
        ggml_t2p::kernels::gemm(KernelLevel::Amx, &c.weights(), &a, &mut y, c.n_rows, 0..c.n_rows).unwrap();
        checked += c.compare(&y, c.n_rows, &(0..c.n_rows), &format!("native amx width {n_cols}"));
        let mut par = vec![f32::from_bits(0x7FC0_1234); c.n_rows * n_cols];
        ggml_t2p::kernels::gemm_par(KernelLevel::Amx, &c.weights(), &a, &mut par, c.n_rows, 3).unwrap();
        assert!(par.iter().zip(&y).all(|(p, q)| p.to_bits() == q.to_bits()), "native amx split, width {n_cols}");
        if n_cols >= AMX_MIN_COLS {
            for b in BLOCKINGS {
                for rows in [0..c.n_rows, 16..c.n_rows, 32..48] {
                    let mut z = vec![f32::from_bits(0x7FC0_1234); c.n_rows * n_cols];
                    gemm_native(&c.weights(), &c.pack().view(), &mut z, c.n_rows, rows.clone(), b).unwrap();
                    checked += c.compare(&z, c.n_rows, &rows, &format!("native {b:?} width {n_cols} rows {rows:?}"));
                }
            }
        }
    }
    // the tile kernel itself ran (the model gives the same bits), with each blocking (they give
    // the same bits too): per gemm of AMX_MIN_COLS+ columns one call with the blocking the level
    // runs at that width (Narrow below AMX_WIDE_COLS, BLOCKING from there), at least one more for
    // its split run, and 3 through gemm_native with each blocking (no other test runs the native
    // kernel, so these are exact for a blocking the level runs at none of the widths)
    let tiled = widths.iter().filter(|&&n| n >= AMX_MIN_COLS).count() as u64;
    let level_runs = |b: Blocking| {
        let narrow = widths.iter().filter(|&&n| (AMX_MIN_COLS..AMX_WIDE_COLS).contains(&n)).count() as u64;
        match b {
            Blocking::Narrow => narrow,
            b if b == ggml_t2p::kernels::amx::BLOCKING => tiled - narrow,
            _ => 0,
        }
    };
    let after = calls();
    let calls: [u64; 3] = core::array::from_fn(|i| after[i] - calls_before[i]);
    for (b, n) in BLOCKINGS.into_iter().zip(calls) {
        let (lvl, direct) = (level_runs(b), 3 * tiled);
        if lvl > 0 {
            assert!(
                n >= direct + 2 * lvl,
                "the native tile kernel ran {n} times with {b:?}, want at least {}",
                direct + 2 * lvl
            );
        } else {
            assert_eq!(n, direct, "the native tile kernel ran {n} times with {b:?}, want {direct}");
        }
    }
    println!(
        "amx native: {checked} outputs bit-identical (native tile-kernel calls {calls:?} with blockings {BLOCKINGS:?})"
    );
}

/// The timing floor (`gemm_without_tiles`: the native kernel minus its tile instructions) runs
/// on any AVX-512 CPU without executing a tile instruction (on a CPU without AMX one would raise
/// SIGILL), writes exactly its rows and, its `C` buffer never filled, writes +0.0 there; it is
/// refused without AVX-512.
#[test]
fn without_tiles_writes_its_rows_only() {
    let c = case(0x5A5A, 68, 384, 40, false);
    if !KernelLevel::Avx512Vnni.is_available() {
        let mut y = vec![0.0f32; 68 * 40];
        let r = gemm_without_tiles(&c.weights(), &c.pack().view(), &mut y, 68, 0..68, Blocking::TwoByTwo);
        assert_eq!(r, Err(Error::Unsupported));
        return;
    }
    for b in BLOCKINGS {
        for rows in [0..68, 16..68, 32..48] {
            let mut y = vec![f32::from_bits(0x7FC0_1234); 68 * 40];
            gemm_without_tiles(&c.weights(), &c.pack().view(), &mut y, 68, rows.clone(), b).unwrap();
            for j in 0..40 {
                for r in 0..68 {
                    let want = if rows.contains(&r) { 0 } else { 0x7FC0_1234 };
                    assert_eq!(y[j * 68 + r].to_bits(), want, "{b:?} rows {rows:?}: col {j} row {r}");
                }
            }
        }
    }
}
