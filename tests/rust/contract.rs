//! The contract's edges (lib.rs "Contract", the header's "NaN scales" and "Sizes"):
//! - NaN scales: at every level this machine runs, on every layout it runs, at gemv and gemm
//!   widths, an output whose formula meets a NaN scale (weight, activation, both; positive,
//!   negative, signalling payloads) is a NaN, and every other output has the reference bits.
//! - Sizes: every size query of the C ABI refuses a size past `isize::MAX` bytes with
//!   `GGML_T2P_ERR_SHAPE`, and answers OK up to it.

use ggml_t2p::ffi::{self, ggml_t2p_act_packed_size, ggml_t2p_repacked_size, ggml_t2p_supports};
use ggml_t2p::format::{BlockL64, BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK, QK_K};
use ggml_t2p::reference::{quantize_row_q8_k_padded, vec_dot_pq2_0_q8_k, vec_dot_ptq1_0_q8_k, Contract};
use ggml_t2p::repack::{self, repacked_blocks, Layout, SourceType};
use ggml_t2p::{kernels, Activations, Error, KernelLevel, PackedWeights};
use half::f16;

mod common;
use common::{levels, Rng};

/// A source matrix of either type, row major.
#[derive(Clone)]
enum Source {
    Pq2_0(Vec<BlockPq2_0>),
    Ptq1_0(Vec<BlockPtq1_0>),
}

impl Source {
    fn random(t: SourceType, rng: &mut Rng, n_rows: usize, k: usize) -> Source {
        let n = n_rows * k / QK;
        match t {
            SourceType::Pq2_0 => Source::Pq2_0(
                (0..n)
                    .map(|_| {
                        let codes: [u8; 128] = std::array::from_fn(|_| (rng.next() % 3) as u8);
                        BlockPq2_0::from_codes(f16::from_f32(rng.unit() * 0.05), &codes)
                    })
                    .collect(),
            ),
            SourceType::Ptq1_0 => Source::Ptq1_0(
                (0..n)
                    .map(|_| {
                        let mut b = BlockPtq1_0 { d: f16::from_f32(rng.unit() * 0.05), ..Default::default() };
                        b.qs.iter_mut().for_each(|q| *q = rng.next() as u8);
                        b.qh.iter_mut().for_each(|q| *q = rng.next() as u8);
                        b
                    })
                    .collect(),
            ),
        }
    }

    fn set_scale(&mut self, block: usize, d: f16) {
        match self {
            Source::Pq2_0(v) => v[block].d = d,
            Source::Ptq1_0(v) => v[block].d = d,
        }
    }

    /// The reference dot of row `r` (`nb` blocks) with one activation column.
    fn dot(&self, r: usize, nb: usize, col: &[BlockQ8K]) -> f32 {
        match self {
            Source::Pq2_0(v) => vec_dot_pq2_0_q8_k(&v[r * nb..(r + 1) * nb], col, Contract::Fused),
            Source::Ptq1_0(v) => vec_dot_ptq1_0_q8_k(&v[r * nb..(r + 1) * nb], col, Contract::Fused),
        }
        .unwrap()
    }
}

/// A repacked matrix, owning its blocks.
enum Packed {
    T2p(Vec<BlockT2p>),
    X4(Vec<BlockPtq1_0x4>),
    X16(Vec<BlockX16>),
    L64(Vec<BlockL64>),
}

impl Packed {
    fn new(src: &Source, layout: Layout, n_rows: usize, k: usize) -> Packed {
        let n = repacked_blocks(layout, n_rows, k).unwrap();
        match (src, layout) {
            (Source::Pq2_0(s), Layout::T2p) => {
                let mut d = vec![BlockT2p::default(); n];
                repack::repack_pq2_0_to_t2p(s, n_rows, k, &mut d).unwrap();
                Packed::T2p(d)
            }
            (Source::Ptq1_0(s), Layout::T2p) => {
                let mut d = vec![BlockT2p::default(); n];
                repack::repack_ptq1_0_to_t2p(s, n_rows, k, &mut d).unwrap();
                Packed::T2p(d)
            }
            (Source::Ptq1_0(s), Layout::Ptq1_0x4) => {
                let mut d = vec![BlockPtq1_0x4::default(); n];
                repack::repack_ptq1_0_to_x4(s, n_rows, k, &mut d).unwrap();
                Packed::X4(d)
            }
            (Source::Pq2_0(s), Layout::X16) => {
                let mut d = vec![BlockX16::default(); n];
                repack::repack_pq2_0_to_x16(s, n_rows, k, &mut d).unwrap();
                Packed::X16(d)
            }
            (Source::Ptq1_0(s), Layout::X16) => {
                let mut d = vec![BlockX16::default(); n];
                repack::repack_ptq1_0_to_x16(s, n_rows, k, &mut d).unwrap();
                Packed::X16(d)
            }
            (Source::Ptq1_0(s), Layout::L64) => {
                let mut d = vec![BlockL64::default(); n];
                repack::repack_ptq1_0_to_l64(s, n_rows, k, &mut d).unwrap();
                Packed::L64(d)
            }
            (Source::Pq2_0(_), Layout::Ptq1_0x4 | Layout::L64) => unreachable!("PQ2_0 has no {layout:?} layout"),
        }
    }

    fn view(&self, n_rows: usize, k: usize) -> PackedWeights<'_> {
        match self {
            Packed::T2p(b) => PackedWeights::t2p(b, n_rows, k),
            Packed::X4(b) => PackedWeights::ptq1_0x4(b, n_rows, k),
            Packed::X16(b) => PackedWeights::x16(b, n_rows, k),
            Packed::L64(b) => PackedWeights::l64(b, n_rows, k),
        }
        .unwrap()
    }
}

fn acts(rng: &mut Rng, n_cols: usize, k: usize) -> Vec<BlockQ8K> {
    let per = k.div_ceil(QK_K);
    let mut out = vec![BlockQ8K::default(); n_cols * per];
    for j in 0..n_cols {
        let x: Vec<f32> = (0..k).map(|_| rng.unit() * 3.0).collect();
        quantize_row_q8_k_padded(&x, &mut out[j * per..(j + 1) * per], Contract::Fused).unwrap();
    }
    out
}

/// NaN payloads: fp16 for weight scales, f32 for activation scales (quiet, negative quiet,
/// signalling, negative with a payload).
const W_NANS: [u16; 4] = [0x7E00, 0xFE00, 0x7C01, 0xFD55];
const A_NANS: [u32; 4] = [0x7FC0_0000, 0xFFC0_0000, 0x7F80_0001, 0xFFAA_AAAA];

/// One case: where the NaN scales sit.
#[derive(Clone, Copy, Debug)]
struct Case {
    /// (row, block of that row, fp16 bits)
    weight: Option<(usize, usize, u16)>,
    /// (column, Q8_K block of that column, f32 bits)
    act: Option<(usize, usize, u32)>,
}

/// Runs `level` on `layout` with NaN scales placed as `case` and checks every output: NaN where
/// the formula meets a NaN scale, the reference bits elsewhere. Returns the number of NaN outputs.
#[allow(clippy::too_many_arguments)]
fn check_case(
    level: KernelLevel,
    t: SourceType,
    layout: Layout,
    n_rows: usize,
    k: usize,
    n_cols: usize,
    case: Case,
    seed: u64,
) -> usize {
    let mut rng = Rng(seed);
    let nb = k / QK;
    let per = k.div_ceil(QK_K);
    let mut src = Source::random(t, &mut rng, n_rows, k);
    let mut a = acts(&mut rng, n_cols, k);
    if let Some((r, b, bits)) = case.weight {
        src.set_scale(r * nb + b, f16::from_bits(bits));
    }
    if let Some((j, b, bits)) = case.act {
        a[j * per + b].d = f32::from_bits(bits);
    }
    let packed = Packed::new(&src, layout, n_rows, k);
    let w = packed.view(n_rows, k);
    let mut dst = vec![0.0f32; n_rows * n_cols];
    if n_cols == 1 {
        kernels::gemv(level, &w, &a, &mut dst, 0..n_rows).unwrap();
    } else {
        kernels::gemm(level, &w, &Activations::new(&a, n_cols, k).unwrap(), &mut dst, n_rows, 0..n_rows).unwrap();
    }
    let mut nans = 0;
    for j in 0..n_cols {
        let col = &a[j * per..(j + 1) * per];
        for r in 0..n_rows {
            let got = dst[j * n_rows + r];
            let want = src.dot(r, nb, col);
            let meets_nan = case.weight.is_some_and(|(wr, _, _)| wr == r) || case.act.is_some_and(|(aj, _, _)| aj == j);
            let at = format!(
                "{} {:?} {} {n_rows}x{k}, {n_cols} cols, {case:?}: row {r} col {j}",
                level.name(),
                t,
                layout.name()
            );
            if meets_nan {
                assert!(want.is_nan(), "reference not NaN at {at}: {want}");
                assert!(got.is_nan(), "not NaN at {at}: {got} ({:#x})", got.to_bits());
                nans += 1;
            } else {
                assert!(!want.is_nan(), "reference NaN without a NaN scale at {at}");
                assert_eq!(got.to_bits(), want.to_bits(), "bits differ at {at}: {got} vs {want}");
            }
        }
    }
    nans
}

/// Every (source type, layout) pair `level` runs: the layout the level picks, and on ARM also
/// PTQ1_0x4 for PTQ1_0 (prefer_compact).
fn layouts(level: KernelLevel) -> Vec<(SourceType, Layout)> {
    let mut v = Vec::new();
    for t in [SourceType::Pq2_0, SourceType::Ptq1_0] {
        for compact in [false, true] {
            let lay = level.layout_for(t, compact);
            if level.runs(lay) && lay.accepts(t) && !v.contains(&(t, lay)) {
                v.push((t, lay));
            }
        }
    }
    if level == KernelLevel::Reference {
        // the reference runs every layout
        for t in [SourceType::Pq2_0, SourceType::Ptq1_0] {
            for lay in Layout::ALL.into_iter().filter(|l| l.accepts(t)) {
                if !v.contains(&(t, lay)) {
                    v.push((t, lay));
                }
            }
        }
    }
    v
}

#[test]
fn nan_scales_give_nan_outputs_at_every_level() {
    // 20 rows: an X16 tile and a padded one; k = 512: 4 weight blocks, 2 Q8_K blocks per column.
    let (n_rows, k) = (20usize, 512usize);
    let mut ran = Vec::new();
    let mut total_nans = 0;
    for level in levels() {
        for (t, layout) in layouts(level) {
            for n_cols in [1usize, 2, 3, 4, 5, 8, 9, 16, 17] {
                let last = n_cols - 1;
                let mut cases = Vec::new();
                for (i, (&wn, &an)) in W_NANS.iter().zip(&A_NANS).enumerate() {
                    // weight only (a row in the padded X16 tile, then one in the first), activation
                    // only (the last column: the leftover of every gemm tile), both in one block
                    // (weight block 2 meets Q8_K block 1), both in different places
                    cases.push(Case { weight: Some((17 - 16 * (i % 2), i, wn)), act: None });
                    cases.push(Case { weight: None, act: Some((last, i % 2, an)) });
                    cases.push(Case { weight: Some((3 + 4 * i, 2, wn)), act: Some((last, 1, an)) });
                    cases.push(Case { weight: Some((19 - i, 0, wn)), act: Some((i.min(last), 1, an)) });
                }
                for (c, case) in cases.into_iter().enumerate() {
                    let seed = 1000 * n_cols as u64 + c as u64;
                    let nans = check_case(level, t, layout, n_rows, k, n_cols, case, seed);
                    assert!(nans > 0, "{case:?} produced no NaN output to check");
                    total_nans += nans;
                }
            }
            ran.push(format!("{}/{}/{:?}", level.name(), layout.name(), t));
        }
    }
    // every level of this run checked something: all this CPU runs (the reference level among
    // them), or those GGML_T2P_TEST_LEVELS names
    for level in levels() {
        let prefix = format!("{}/", level.name());
        assert!(ran.iter().any(|r| r.starts_with(&prefix)), "level {} checked no layout", level.name());
    }
    assert!(
        common::levels_narrowed() || ran.iter().any(|r| r.starts_with("ref/")),
        "the reference level runs unless GGML_T2P_TEST_LEVELS narrows the levels"
    );
    println!(
        "NaN contract held on {} ({total_nans} NaN outputs checked, every other output bit-exact)",
        ran.join(", ")
    );
}

const SHAPE: i32 = -2;
const PQ2_0: i32 = ggml_t2p::format::GGML_TYPE_PQ2_0 as i32;
const PTQ1_0: i32 = ggml_t2p::format::GGML_TYPE_PTQ1_0 as i32;
const REF: i32 = KernelLevel::Reference as i32;
const MAX: u64 = isize::MAX as u64;

fn repacked_size(t: i32, layout: Layout, n_rows: i64, k: i64) -> Result<usize, i32> {
    let mut out = usize::MAX;
    // SAFETY: out_size points at a live usize.
    let s = unsafe { ggml_t2p_repacked_size(t, layout as i32, n_rows, k, &mut out) };
    if s == 0 {
        Ok(out)
    } else {
        Err(s)
    }
}

fn act_packed_size(layout: Layout, k: i64, n_cols: i64) -> Result<usize, i32> {
    let mut out = usize::MAX;
    // SAFETY: out_size points at a live usize.
    let s = unsafe { ggml_t2p_act_packed_size(layout as i32, REF, k, n_cols, &mut out) };
    if s == 0 {
        Ok(out)
    } else {
        Err(s)
    }
}

/// The largest k (a multiple of 128) for which a matrix of `bytes_per_128` bytes per 128 columns
/// fits in isize::MAX bytes.
fn k_max(bytes_per_128: u64) -> i64 {
    (MAX / bytes_per_128 * 128) as i64
}

#[test]
fn size_queries_refuse_sizes_past_isize_max() {
    assert_eq!(ffi::status(Error::Shape), SHAPE);
    // The fuzzer's case: 4 rows x (2^63 - 128) weights, 136 * (2^56 - 1) bytes of T2P.
    let k = i64::MAX - 127;
    assert_eq!(repacked_size(PQ2_0, Layout::T2p, 4, k), Err(SHAPE));
    assert_eq!(ggml_t2p_supports(PQ2_0, Layout::T2p as i32, REF, 4, k), SHAPE);
    assert_eq!(repacked_size(PTQ1_0, Layout::T2p, 4, k), Err(SHAPE));
    assert_eq!(ggml_t2p_supports(PTQ1_0, Layout::T2p as i32, REF, 4, k), SHAPE);
    // PTQ1_0x4 keeps 28 bytes per row block: 112 * (2^56 - 1) bytes still fit.
    assert_eq!(repacked_size(PTQ1_0, Layout::Ptq1_0x4, 4, k), Ok(112 * ((1usize << 56) - 1)));
    assert_eq!(ggml_t2p_supports(PTQ1_0, Layout::Ptq1_0x4 as i32, REF, 4, k), 0);

    // Each layout at the edge: the largest fitting k answers OK with a size <= isize::MAX, the
    // next multiple of 128 answers SHAPE, in all three queries.
    for (t, layout, rows, bytes_per_128) in [
        (PQ2_0, Layout::T2p, 4i64, 136u64), // 4 rows x 34 B (source and T2P alike)
        (PTQ1_0, Layout::T2p, 4, 136),      // T2P 136 B > source 112 B
        (PTQ1_0, Layout::Ptq1_0x4, 8, 224), // 8 rows x 28 B (at 4 rows no k reaches the edge)
        (PQ2_0, Layout::X16, 16, 544),      // 16 rows x 34 B
        (PQ2_0, Layout::X16, 4, 544),       // 4 rows padded to an X16 tile: 544 B > source 136 B
        (PTQ1_0, Layout::X16, 4, 544),
        (PTQ1_0, Layout::L64, 64, 1792), // 64 rows x 28 B
        (PTQ1_0, Layout::L64, 4, 1792),  // 4 rows padded to an L64 tile
    ] {
        let km = k_max(bytes_per_128);
        let size = repacked_size(t, layout, rows, km).unwrap_or_else(|e| panic!("{layout:?} rows {rows} k {km}: {e}"));
        assert!(size as u64 <= MAX && size as u64 > MAX - bytes_per_128, "{layout:?}: {size}");
        assert_eq!(ggml_t2p_supports(t, layout as i32, REF, rows, km), 0, "{layout:?} rows {rows}");
        assert_eq!(repacked_size(t, layout, rows, km + 128), Err(SHAPE), "{layout:?} rows {rows}");
        assert_eq!(ggml_t2p_supports(t, layout as i32, REF, rows, km + 128), SHAPE, "{layout:?} rows {rows}");
    }

    // Activation pack: the same rule (it held already; kept here beside the others).
    for layout in Layout::ALL {
        assert_eq!(act_packed_size(layout, 1 << 40, 1 << 40), Err(SHAPE), "{layout:?}");
        assert_eq!(act_packed_size(layout, k, 1), Err(SHAPE), "{layout:?}");
        assert!(act_packed_size(layout, 1 << 20, 4).is_ok(), "{layout:?}");
    }
}

/// Row-tile order (the header's ggml_t2p_repack): rows `[r0, r1)` with `r0` a multiple of the
/// layout's row tile, repacked alone, give bytes `[repacked_size(r0), repacked_size(r0) +
/// repacked_size(r1 - r0))` of the whole matrix's repack, for every (source type, layout) pair,
/// slices of one tile, several tiles, and ending in the padded last tile. The shim relies on it to
/// repack a large tensor in slices and release each slice's source pages as it goes.
#[test]
fn row_tile_slices_repack_to_slices_of_the_whole() {
    let mut rng = Rng(0x5_11ce);
    let k = 512usize; // 4 blocks per row
    let mut checked = 0;
    for t in [SourceType::Pq2_0, SourceType::Ptq1_0] {
        for layout in Layout::ALL.into_iter().filter(|l| l.accepts(t)) {
            let tile = layout.tile_rows();
            // rows come in fours; X16 and L64 pad a last partial tile (here 4 of its rows)
            let n_rows = if matches!(layout, Layout::X16 | Layout::L64) { 5 * tile + 4 } else { 5 * tile };
            let src = Source::random(t, &mut rng, n_rows, k);
            let (src_ptr, src_len, type_id) = match &src {
                Source::Pq2_0(v) => (v.as_ptr() as *const u8, std::mem::size_of_val(v.as_slice()), PQ2_0),
                Source::Ptq1_0(v) => (v.as_ptr() as *const u8, std::mem::size_of_val(v.as_slice()), PTQ1_0),
            };
            let row_bytes = src_len / n_rows;
            let repack = |r0: usize, r1: usize| -> Vec<u8> {
                let size = repacked_size(type_id, layout, (r1 - r0) as i64, k as i64).unwrap();
                // u16 storage: the C ABI wants 2-byte aligned buffers
                let mut out = vec![0u16; size.div_ceil(2)];
                // SAFETY: src_ptr + r0 * row_bytes is valid for (r1 - r0) rows; out holds size bytes.
                let s = unsafe {
                    ffi::ggml_t2p_repack(
                        type_id,
                        layout as i32,
                        src_ptr.add(r0 * row_bytes).cast(),
                        (r1 - r0) * row_bytes,
                        (r1 - r0) as i64,
                        k as i64,
                        out.as_mut_ptr().cast(),
                        size,
                    )
                };
                assert_eq!(s, 0, "repack of rows {r0}..{r1} ({t:?} -> {})", layout.name());
                // SAFETY: out holds at least size initialised bytes.
                unsafe { std::slice::from_raw_parts(out.as_ptr().cast::<u8>(), size) }.to_vec()
            };
            let whole = repack(0, n_rows);
            for (r0, r1) in [(0, tile), (tile, 3 * tile), (2 * tile, n_rows), (4 * tile, n_rows), (0, n_rows)] {
                let off = if r0 == 0 { 0 } else { repacked_size(type_id, layout, r0 as i64, k as i64).unwrap() };
                let part = repack(r0, r1);
                assert!(
                    whole[off..off + part.len()] == part[..],
                    "{t:?} -> {}: rows {r0}..{r1} repacked alone differ from bytes {off}.. of the whole",
                    layout.name()
                );
                checked += 1;
            }
        }
    }
    println!("row-tile slices: {checked} slices equal to the whole matrix's bytes");
}
