//! The AMX level's test entry points, compiled only with the feature `testing` (which the
//! crate's tests, benchmarks and examples turn on through their dev-dependency on the crate
//! itself; the library that users link has none of this):
//! - [`TileModel`], a scalar model of the tile unit, exact per the instructions' pseudo-code and
//!   strict about every condition under which the hardware faults, with [`ScalarOps`], the
//!   kernel's vector work in plain Rust;
//! - [`gemm_model`]: the level's tile kernel ([`super::amx`]) under the model, on any machine;
//! - [`gemm_native`] and [`gemm_without_tiles`]: the native kernel with a chosen [`Blocking`], and
//!   without its tile instructions (a timing floor), for `examples/levels` and the tests;
//! - [`native_tile_calls`] and [`model_dpbssd_counts`]: how often the native kernel ran (per
//!   blocking) and how many `tdpbssd` the model ran (per `C` tile), since equal bits alone cannot
//!   tell which code ran.

use super::act_pack::{ActFormat, ActTile16, PackedActs};
use super::amx::{gemm_x16_tiles, BTiles, Blocking, TileConfig, Tiles, VectorOps};
use super::operands::{validate, Job, OutPtr, PackedWeights};
use super::table::KernelLevel;
use crate::error::Error;
use crate::format::{BlockX16, QK, X16_ROWS};
use core::ops::Range;

/// A scalar model of the tile unit (palette 1: 8 tiles of up to 16 rows x 64 bytes), exact per
/// the instructions' pseudo-code, and strict: every condition under which the hardware raises
/// `#UD` or `#GP` (no configuration, an unconfigured tile, shapes that disagree, a reserved
/// field set) panics instead, so the model also checks the kernel's configuration.
#[derive(Clone, Debug)]
pub struct TileModel {
    cfg: Option<TileConfig>,
    t: [[[u8; 64]; 16]; 8],
}

impl Default for TileModel {
    fn default() -> Self {
        TileModel { cfg: None, t: [[[0; 64]; 16]; 8] }
    }
}

impl TileModel {
    /// A model in the init state (no configuration).
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether a configuration is loaded (false after [`Tiles::release`]).
    pub fn configured(&self) -> bool {
        self.cfg.is_some()
    }

    /// `(rows, bytes per row)` of configured tile `t`; panics where the hardware faults.
    fn shape(&self, t: u8) -> (usize, usize) {
        let cfg = self.cfg.as_ref().expect("tile instruction without a configuration (#UD)");
        let t = usize::from(t);
        assert!(t < 8, "tile {t} does not exist");
        let (rows, colsb) = (usize::from(cfg.rows[t]), usize::from(cfg.colsb[t]));
        assert!(rows > 0 && colsb > 0, "tile {t} is not configured (#UD)");
        (rows, colsb)
    }

    /// Tile `t`'s row `r` as int32 lanes.
    fn dword(&self, t: u8, r: usize, i: usize) -> i32 {
        let b = &self.t[usize::from(t)][r][4 * i..4 * i + 4];
        i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    }
}

impl Tiles for TileModel {
    unsafe fn config(&mut self, cfg: &'static TileConfig) {
        assert_eq!(cfg.palette, 1, "only palette 1 is modelled");
        assert_eq!(cfg.start_row, 0);
        assert!(cfg.reserved.iter().all(|&b| b == 0), "reserved bytes set (#GP)");
        for t in 0..16 {
            let (rows, colsb) = (cfg.rows[t], cfg.colsb[t]);
            if t >= 8 {
                assert!(rows == 0 && colsb == 0, "tile {t} does not exist in palette 1 (#GP)");
            }
            assert!(rows <= 16 && colsb <= 64, "tile {t} too large (#GP)");
            assert_eq!(rows == 0, colsb == 0, "tile {t} half configured (#GP)");
        }
        self.cfg = Some(*cfg);
        self.t = [[[0; 64]; 16]; 8];
    }

    unsafe fn zero<const T: u8>(&mut self) {
        self.shape(T);
        self.t[usize::from(T)] = [[0; 64]; 16];
    }

    unsafe fn load<const T: u8>(&mut self, p: *const u8, stride: usize) {
        let (rows, colsb) = self.shape(T);
        MODEL_ROWS_LOADED.with(|n| {
            let mut v = n.get();
            v[usize::from(T)] += rows as u64;
            n.set(v);
        });
        let tile = &mut self.t[usize::from(T)];
        *tile = [[0; 64]; 16];
        for (r, row) in tile.iter_mut().enumerate().take(rows) {
            // SAFETY: the caller passes rows x colsb readable bytes at `stride` (trait contract).
            unsafe { core::ptr::copy_nonoverlapping(p.add(r * stride), row.as_mut_ptr(), colsb) };
        }
    }

    unsafe fn dpbssd<const C: u8, const A: u8, const B: u8>(&mut self) {
        let (c_rows, c_colsb) = self.shape(C);
        let (a_rows, a_colsb) = self.shape(A);
        let (b_rows, b_colsb) = self.shape(B);
        assert!(C != A && C != B && A != B, "tdpbssd needs three different tiles (#UD)");
        assert!(c_colsb % 4 == 0 && a_colsb % 4 == 0 && b_colsb % 4 == 0, "colsb not a multiple of 4 (#UD)");
        assert_eq!(a_colsb / 4, b_rows, "A's K/4 != B's rows (#UD)");
        assert_eq!(c_colsb, b_colsb, "C and B column bytes differ (#UD)");
        assert_eq!(c_rows, a_rows, "C and A rows differ (#UD)");
        MODEL_DPBSSD.with(|n| {
            let mut v = n.get();
            v[usize::from(C)] += 1;
            n.set(v);
        });
        for m in 0..c_rows {
            let mut tmp = [0i32; 16];
            for (n, v) in tmp.iter_mut().enumerate().take(c_colsb / 4) {
                *v = self.dword(C, m, n);
            }
            for k in 0..a_colsb / 4 {
                for (n, v) in tmp.iter_mut().enumerate().take(c_colsb / 4) {
                    let a = &self.t[usize::from(A)][m][4 * k..4 * k + 4];
                    let b = &self.t[usize::from(B)][k][4 * n..4 * n + 4];
                    // DPBD: four products of sign-extended bytes (each exact in 16 bits), added
                    // to the dword with 32-bit wrap-around.
                    let p: i32 = (0..4).map(|e| i32::from(a[e] as i8) * i32::from(b[e] as i8)).sum();
                    *v = v.wrapping_add(p);
                }
            }
            let row = &mut self.t[usize::from(C)][m];
            *row = [0; 64];
            for (n, v) in tmp.iter().enumerate().take(c_colsb / 4) {
                row[4 * n..4 * n + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    unsafe fn store<const T: u8>(&mut self, p: *mut u8, stride: usize) {
        let (rows, colsb) = self.shape(T);
        for (r, row) in self.t[usize::from(T)].iter().enumerate().take(rows) {
            // SAFETY: the caller passes rows x colsb writable bytes at `stride` (trait contract).
            unsafe { core::ptr::copy_nonoverlapping(row.as_ptr(), p.add(r * stride), colsb) };
        }
    }

    unsafe fn release(&mut self) {
        self.cfg = None;
        self.t = [[[0; 64]; 16]; 8];
    }
}

std::thread_local! {
    /// `tdpbssd` run by this thread's [`TileModel`]s, by `C` tile ([`model_dpbssd_counts`]).
    static MODEL_DPBSSD: core::cell::Cell<[u64; 8]> = const { core::cell::Cell::new([0; 8]) };
    /// Rows loaded by this thread's [`TileModel`]s, by tile ([`model_rows_loaded`]).
    static MODEL_ROWS_LOADED: core::cell::Cell<[u64; 8]> = const { core::cell::Cell::new([0; 8]) };
}

/// How many rows the [`TileModel`]s of the calling thread have loaded (`tileloadd`), by tile,
/// since the thread started: the configured rows of each load. For tests: it tells the
/// configuration a kernel ran with (e.g. [`Blocking::Narrow`]'s `A` tiles of one row per column).
pub fn model_rows_loaded() -> [u64; 8] {
    MODEL_ROWS_LOADED.with(|n| n.get())
}

/// How many `tdpbssd` the [`TileModel`]s of the calling thread have run, by `C` tile
/// (`tmm0..tmm7`), since the thread started. For tests: the [`Blocking`]s give the same bits, so
/// only this tells which arrangement of the chains ran (in [`gemm_model`]'s model).
pub fn model_dpbssd_counts() -> [u64; 8] {
    MODEL_DPBSSD.with(|n| n.get())
}

/// [`VectorOps`] in plain Rust (`f32::mul_add`: one rounding, as the reference's
/// [`Contract::Fused`](crate::reference::Contract)).
pub struct ScalarOps;

impl VectorOps for ScalarOps {
    #[inline(always)]
    unsafe fn expand(blk: &BlockX16, b: &mut BTiles) {
        expand(blk, b)
    }
    #[inline(always)]
    unsafe fn scales(d: &[half::f16; 16]) -> [f32; 16] {
        let mut out = [0.0f32; 16];
        for (o, h) in out.iter_mut().zip(d.iter()) {
            *o = h.to_f32();
        }
        out
    }
    #[inline(always)]
    unsafe fn step(acc: &mut [f32; 16], isum: &[i32; 16], dw: &[f32; 16], dy: f32) {
        for ((a, &i), &d) in acc.iter_mut().zip(isum.iter()).zip(dw.iter()) {
            *a = (d * dy).mul_add(i as f32, *a);
        }
    }
    #[inline(always)]
    fn prefetch(_: &BlockX16) {}
}

/// Expands an X16 block into the two `B` tiles: `b[4w + s][j] = ((qs[w][j] >> 2s) & 3) - 1`
/// ([`ScalarOps`]; the tests' statement of the layout).
#[inline(always)]
fn expand(blk: &BlockX16, b: &mut BTiles) {
    for (w, word) in blk.qs.iter().enumerate() {
        for s in 0..4 {
            let row = &mut b[4 * w + s];
            for (dst, &x) in row.iter_mut().zip(word.iter()) {
                *dst = ((x >> (2 * s)) & 3) as i8 - 1;
            }
        }
    }
}

/// Checks a call of [`gemm_model`] or [`gemm_native`] and builds its job; `None` when there is
/// nothing to compute.
fn tile_job<'a>(
    w: &PackedWeights<'a>,
    a: &PackedActs<'a>,
    dst: &mut [f32],
    col_stride: usize,
    rows: &Range<usize>,
) -> Result<Option<Job<'a, BlockX16, ActTile16>>, Error> {
    let PackedWeights::X16 { blocks, n_rows, k } = *w else {
        return Err(Error::InvalidArgument);
    };
    if a.format != ActFormat::T16 {
        return Err(Error::InvalidArgument);
    }
    validate(w, a, dst.len(), col_stride, rows)?;
    if rows.is_empty() || a.n_cols == 0 {
        return Ok(None);
    }
    let tiles = rows.start / X16_ROWS..rows.end.div_ceil(X16_ROWS);
    let out = OutPtr { ptr: dst.as_mut_ptr(), col_stride };
    Ok(Some(Job { w: blocks, nb: k / QK, n_rows, act: a.elements(), n_cols: a.n_cols, out, tiles }))
}

/// The tile kernel under [`TileModel`], on any machine: rows `rows` of `dst = W x A` from X16
/// weights and a [`ActFormat::T16`] pack, element (row `r`, column `j`) at
/// `dst[j * col_stride + r]`, with the tile chains arranged as `blocking` says. What
/// `GGML_T2P_KERNEL=amx` computes natively for batches of [`AMX_MIN_COLS`](super::table::AMX_MIN_COLS)
/// or more columns (with [`Blocking::Narrow`] below [`AMX_WIDE_COLS`](super::table::AMX_WIDE_COLS),
/// [`BLOCKING`](super::amx::BLOCKING) from there), for tests.
///
/// With `simd_step`, the expansion, scale conversion and float step are the native kernel's AVX-512 code
/// (x86-64 with AVX-512 VNNI only: [`Error::Unsupported`] elsewhere), so on such a CPU everything
/// but the tile instructions is the native kernel's machine code; else [`ScalarOps`].
///
/// # Errors
/// [`Error::InvalidArgument`] unless `w` is X16 and `a` is a T16 pack; otherwise as
/// [`gemm_raw`](super::dispatch::gemm_raw) (shape, range, buffer checks).
pub fn gemm_model(
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    simd_step: bool,
    blocking: Blocking,
) -> Result<(), Error> {
    let Some(job) = tile_job(w, a, dst, col_stride, &rows)? else {
        return Ok(());
    };
    let mut model = TileModel::new();
    #[cfg(target_arch = "x86_64")]
    if simd_step {
        if !KernelLevel::Avx512Vnni.is_available() {
            return Err(Error::Unsupported);
        }
        // SAFETY: validated above; AVX-512 available (checked); dst is uniquely borrowed.
        unsafe { super::x86_amx::gemm_x16_tiles_avx512(&mut model, &job, blocking) };
        return Ok(());
    }
    if simd_step {
        return Err(Error::Unsupported);
    }
    // SAFETY: validated above; the model needs no hardware; dst is uniquely borrowed.
    unsafe { gemm_x16_tiles::<_, ScalarOps>(&mut model, &job, blocking) };
    debug_assert!(!model.configured());
    Ok(())
}

/// The native tile kernel with the chains arranged as `blocking` says, on one thread: what the
/// `amx` level runs for batches of [`AMX_MIN_COLS`](super::table::AMX_MIN_COLS) or more columns
/// (the blocking by width as for [`gemm_model`]); arguments as [`gemm_model`].
/// For comparing blockings on AMX hardware (`examples/levels`) and for tests; counts in
/// [`native_tile_calls`].
///
/// # Errors
/// [`Error::Unsupported`] unless the `amx` level is available (CPU, OS, permission); otherwise
/// as [`gemm_model`].
pub fn gemm_native(
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    gemm_x86(true, w, a, dst, col_stride, rows, blocking)
}

/// The native kernel with its tile instructions left out (`x86_amx::NoTiles`: the loads,
/// `tdpbssd` and stores of tiles do nothing), on one thread: its expansion, float step and loop
/// exactly as the `amx` level compiles them, on any CPU with AVX-512 VNNI, for timing the floor
/// under the tile kernel's time (`examples/levels`: `amx -tiles`). Arguments as [`gemm_native`].
/// The outputs are NOT products: the float step reads whatever the `C` buffer holds (zeros).
///
/// # Errors
/// [`Error::Unsupported`] unless the `avx512vnni` level is available (x86-64 only); otherwise as
/// [`gemm_model`].
pub fn gemm_without_tiles(
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    gemm_x86(false, w, a, dst, col_stride, rows, blocking)
}

/// [`gemm_native`] (`tiles`) or [`gemm_without_tiles`]: checks the level each needs (`amx`, or
/// `avx512vnni` for the kernel that runs no tile instruction), then runs the job.
fn gemm_x86(
    tiles: bool,
    w: &PackedWeights<'_>,
    a: &PackedActs<'_>,
    dst: &mut [f32],
    col_stride: usize,
    rows: Range<usize>,
    blocking: Blocking,
) -> Result<(), Error> {
    let need = if tiles { KernelLevel::Amx } else { KernelLevel::Avx512Vnni };
    if !need.is_available() {
        return Err(Error::Unsupported);
    }
    let Some(job) = tile_job(w, a, dst, col_stride, &rows)? else {
        return Ok(());
    };
    #[cfg(target_arch = "x86_64")]
    // SAFETY: validated above; the level each kernel needs is available (checked); dst is
    // uniquely borrowed.
    unsafe {
        if tiles {
            super::x86_amx::gemm_x16_16x16_q8_k_amx(&job, blocking)
        } else {
            super::x86_amx::gemm_x16_tiles_avx512(&mut super::x86_amx::NoTiles, &job, blocking)
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (job, blocking);
    Ok(())
}

/// How many times the native AMX tile kernel (`tdpbssd` through `asm!`) has run in this process
/// with `blocking`: one per job of a gemm on the `amx` level with at least
/// [`AMX_MIN_COLS`](super::table::AMX_MIN_COLS) columns (the blocking it runs at that width), and
/// one per [`gemm_native`] call; 0
/// where the level never ran (and on other architectures). For tests: the scalar model gives the
/// same bits, and so do the blockings, so only this tells that the tile instructions themselves
/// ran, and with which blocking.
pub fn native_tile_calls(blocking: Blocking) -> u64 {
    #[cfg(target_arch = "x86_64")]
    return super::x86_amx::NATIVE_CALLS[blocking as usize].load(core::sync::atomic::Ordering::Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = blocking;
        0
    }
}

#[cfg(test)]
mod tests {
    use super::super::amx::X16_TILE_CONFIG;
    use super::*;

    /// A deterministic byte stream.
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    /// The model's `tdpbssd` against the formula written out directly, from a C tile that starts
    /// next to the int32 limits so that the adds wrap both ways.
    #[test]
    fn model_tdpbssd_is_the_formula_with_wrapping() {
        let a = bytes(1, 16 * 64);
        let mut bb = bytes(2, 16 * 64);
        bb[0..4].copy_from_slice(&[0x80; 4]); // -128 x A: large products
        let mut c0 = vec![0u8; 16 * 64];
        for m in 0..16 {
            for n in 0..16 {
                let v: i32 = match (m + n) % 3 {
                    0 => i32::MAX - 1000,
                    1 => i32::MIN + 1000,
                    _ => (m * 1000 + n) as i32 - 5000,
                };
                c0[64 * m + 4 * n..64 * m + 4 * n + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
        let mut t = TileModel::new();
        let mut out = vec![0u8; 16 * 64];
        // SAFETY: the model; every buffer is 16 x 64 bytes.
        unsafe {
            t.config(&X16_TILE_CONFIG);
            t.load::<0>(c0.as_ptr(), 64);
            t.load::<1>(a.as_ptr(), 64);
            t.load::<3>(bb.as_ptr(), 64);
            t.dpbssd::<0, 1, 3>();
            t.store::<0>(out.as_mut_ptr(), 64);
            t.release();
        }
        assert!(!t.configured());
        let mut wrapped = 0;
        for m in 0..16 {
            for n in 0..16 {
                let start = i64::from(i32::from_le_bytes(c0[64 * m + 4 * n..][..4].try_into().unwrap()));
                let mut exact = start;
                for k in 0..16 {
                    for e in 0..4 {
                        exact += i64::from(a[64 * m + 4 * k + e] as i8) * i64::from(bb[64 * k + 4 * n + e] as i8);
                    }
                }
                let want = exact as i32; // two's complement wrap-around
                wrapped += usize::from(i64::from(want) != exact);
                let got = i32::from_le_bytes(out[64 * m + 4 * n..][..4].try_into().unwrap());
                assert_eq!(got, want, "C[{m}][{n}]");
            }
        }
        assert!(wrapped > 0, "the test data must make some sums wrap");
    }

    /// Loads honour the stride and zero the columns past the configured width; stores write only
    /// the configured bytes.
    #[test]
    fn model_load_store_stride() {
        static NARROW: TileConfig = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
            rows: [3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        };
        let src: Vec<u8> = (0..100).collect();
        let mut dst = vec![0xFFu8; 60];
        let mut t = TileModel::new();
        // SAFETY: the model; 3 rows of 8 bytes at strides 20 and 16 fit both buffers.
        unsafe {
            t.config(&NARROW);
            t.load::<0>(src.as_ptr().add(1), 20);
            t.store::<0>(dst.as_mut_ptr(), 16);
        }
        for r in 0..3 {
            assert_eq!(&dst[16 * r..16 * r + 8], &src[1 + 20 * r..1 + 20 * r + 8]);
            assert!(dst[16 * r + 8..16 * r + 16].iter().all(|&b| b == 0xFF), "bytes past colsb untouched");
        }
        assert!(t.t[0][0][8..].iter().all(|&b| b == 0) && t.t[0][3].iter().all(|&b| b == 0));
    }

    /// The model refuses what the hardware refuses.
    #[test]
    #[should_panic(expected = "without a configuration")]
    fn model_needs_a_configuration() {
        let mut t = TileModel::new();
        // SAFETY: the model (it panics, as the hardware would fault).
        unsafe { t.zero::<0>() };
    }

    /// Expansion: B row `4w + s`, byte `4n + e` is row `n`'s weight `16w + 4s + e`, i.e. `A`'s
    /// value index `4k + e` for B row `k` (checked against the layout's own accessor).
    #[test]
    fn expansion_is_the_x16_layout() {
        let raw = bytes(7, 512);
        let mut blk = BlockX16::default();
        for (w, word) in blk.qs.iter_mut().enumerate() {
            word.copy_from_slice(&raw[64 * w..64 * w + 64]);
        }
        let mut b = [[0i8; 64]; 32];
        expand(&blk, &mut b);
        for n in 0..16 {
            for j in 0..128 {
                let (k, e) = (j / 4, j % 4);
                assert_eq!(i32::from(b[k][4 * n + e]), i32::from(blk.code(n, j)) - 1, "row {n} weight {j}");
            }
        }
    }
}
