//! The X16 tile body shared by the three x86 levels ([`super::x86_avx2`] and the two VNNI widths
//! of [`super::x86_vnni`]). Each level implements [`Isa`] (a handful of `#[inline(always)]`
//! register operations) and instantiates [`gemm_x16`] inside its own `#[target_feature]` function,
//! so the whole body compiles to that level's instructions.
//!
//! ## The arithmetic (one 16-row X16 block against one activation column)
//! A 64-byte word `w` holds, per row lane, the codes `u = w + 1` of weights `16w .. 16w+16`, slot
//! `s` = 4-weight group `4w + s` (see [`crate::format::BlockX16`]). Shifts and masks give the slots
//! as unsigned bytes, each multiplied (`vpdpbusd`, or `vpmaddubsw` on AVX2) with its group's four
//! int8 activations broadcast to every lane. The VNNI levels take one shift and four masks:
//!
//! | operand | value per byte | group |
//! |---|---|---|
//! | `v & 0x03` | `u` (x1) | `4w` |
//! | `v & 0x0C` | `4u` (x4) | `4w + 1` |
//! | `(v >> 4) & 0x03` | `u` (x1) | `4w + 2` |
//! | `(v >> 4) & 0x0C` | `4u` (x4) | `4w + 3` |
//!
//! into an x1 and an x4 int32 sum per lane: `dot(u, y) = S1 + S4 / 4` (the x4 sum is an exact
//! multiple of 4). AVX2 shifts every slot down to `u` (three shifts, four masks) so that a single
//! int16 sum per lane holds the whole block (see [`super::x86_avx2`] for the bound). Then
//! `isum = dot(u, y) - sum(y)`, with `-sum(y)` from the pack ([`Q8Half::nysum`]). The float step is the reference's, per lane: `sumf = fma(fp32(d) * d_y,
//! (float) isum, sumf)` (`vcvtph2ps`, `vmulps`, `vcvtdq2ps`, `vfmadd231ps`), so every output has
//! the reference bits. Tiles of several columns share each decoded word.

use super::act_pack::Q8Half;
use super::features::CpuFeatures;
use super::operands::Job;
use crate::format::{BlockX16, X16_ROWS};
use half::f16;

/// The register operations a level provides. All methods are `#[inline(always)]` and only ever
/// run inside the level's `#[target_feature]` function.
pub(crate) trait Isa {
    /// Integer vector: `LANES` 32-bit lanes, one row each.
    type V: Copy;
    /// f32 vector of `LANES` lanes.
    type F: Copy;
    /// Per (vector of rows, column) integer accumulator state of one block.
    type Acc: Copy;
    /// Rows per vector: 8 (ymm) or 16 (zmm).
    const LANES: usize;
    /// Whether tiles of one or two columns keep a second accumulator per (vector of rows,
    /// column) for the odd words, merged by [`Isa::acc_merge`] before [`Isa::isum`]: for levels
    /// whose accumulate has a multi-cycle latency (`vpdpbusd`: 4-5 cycles), where one chain of
    /// 16 accumulates per block bounds a gemv below the memory's speed.
    const SPLIT_NARROW: bool = false;
    /// Blocks per row from which the level's gemv reads [`GEMV_STREAMS`] row tiles side by side
    /// ([`GEMV_STREAMS_MIN_BLOCKS`] unless the level measured otherwise).
    const STREAMS_MIN_BLOCKS: usize = GEMV_STREAMS_MIN_BLOCKS;

    /// The narrowest tile that prefetches its weights ([`PF_BLOCKS`]; [`PF_MIN_COLS`] unless the
    /// level measured otherwise).
    const PF_MIN_COLS: usize = PF_MIN_COLS;
    /// Whether the level's gemv runs differently on Intel (any CPU not reported as AMD): there it
    /// prefetches its weights [`PF_BLOCKS`] ahead and reads [`GEMV_STREAMS`] row tiles side by
    /// side at every k (default: no; AMD keeps [`Isa::STREAMS_MIN_BLOCKS`] and no prefetch, as
    /// measured on Zen 4). The VNNI levels do. Measured on an AMX Xeon (KVM, 2 cores;
    /// `docs/results.md`, section 9.4): `examples/levels --dram` (1 thread, k 32768, 1.14 GB), the
    /// `avx512vnni` gemv at 77-78% of a plain read loop without the prefetch and 99-101% with it
    /// (`avx2` 90-93%); the synthetic Bonsai 2 2B in llama.cpp (k 2048 and 6144), tg128 17.0 t/s
    /// at 1 thread and 30.7 at 2 before, 20.2-21.7 and 37.0-38.8 with the prefetch alone,
    /// 22.4-23.1 and 41.1-42.3 with four tiles at every k too (`avx2` 21.3-21.9 and 36.8-38.7).
    const INTEL_GEMV: bool = false;
    /// The most columns for which, on Intel ([`Isa::INTEL_GEMV`], not AMD), a gemm reads
    /// [`GEMV_STREAMS`] row tiles side by side with the prefetch, as the gemv does (batched
    /// decode and speculative drafts: 2 to this many columns, at most 7); 0: never (default).
    /// Measured for `avx512vnni` on an AMX Xeon (KVM, 1 thread; `docs/results.md`, section 9.6):
    /// the Bonsai 2 27B's four matrix shapes from DRAM, time against one column's, 2 / 3 / 4
    /// columns 1.36-1.47x / 1.60-1.69x / 1.33-1.50x before, 1.07-1.10x / 1.16-1.19x / 1.21-1.29x
    /// in this order; in cache 3 columns 1.15-1.3x faster (one pass instead of a 2- and a 1-column
    /// tile), 2 and 4 columns within +-9% (the noise between runs of one binary). 5 / 6 / 7
    /// columns (a 4-column pass, then the rest over the same row tiles from L2): from DRAM
    /// 1.74-1.83x / 1.97-2.07x / 2.28-2.45x -> 1.55-1.60x / 1.73-1.75x / 1.85-1.93x, in cache
    /// 10-14% / 4-13% slower at 5 / 6, 4-7% faster at 7; 8 columns stay one 8-column tile
    /// (1.75-1.79x against 1.98-2.06x this way, and 27-33% faster in cache). `avxvnni` (16 ymm
    /// registers) gained from DRAM too but lost 16-27% in cache (spills): 0 there. The `amx`
    /// level runs these kernels below its tiles' width.
    const STREAM_COLS_MAX: usize = 0;
    /// Whether the gemm's last 3 columns (a batch of 3, 7, 11, ... columns) go through one
    /// 3-column tile, which reads and decodes the weights once, instead of a 2- and a 1-column
    /// tile (twice); default: no (not measured for the level).
    const TAIL3: bool = false;

    /// Loads `4 * LANES` bytes (unaligned).
    unsafe fn load(p: *const u8) -> Self::V;
    /// The four slot operands of a word vector, slot `s` holding group `4w + s`: the codes, or
    /// the codes times a power of 2 that [`Isa::isum`] divides out again.
    unsafe fn slots(v: Self::V) -> [Self::V; 4];
    /// Words 0..8 of block `b` for all `R` vectors of rows x `NC` columns into `acc`: a level may
    /// replace [`words`] (the default) for some tile shapes with code of its own that makes the
    /// same integer sums.
    ///
    /// # Safety
    /// As [`word`] for every word and vector of rows.
    #[inline(always)]
    unsafe fn block_words<const R: usize, const NC: usize>(
        acc: &mut [[Self::Acc; NC]; R],
        b: &BlockX16,
        a: &[&Q8Half; NC],
    ) where
        Self: Sized,
    {
        // SAFETY: forwarded.
        unsafe { words::<Self, R, NC>(acc, b, a) }
    }
    /// Whether a gemv's [`GEMV_STREAMS`] row tiles go through [`Isa::block_words_s4`] together
    /// (default: [`Isa::block_words`] tile by tile).
    const SHARED_S4: bool = false;
    /// Block `b[j]` of each of four row tiles side by side (a gemv's streams) against one column
    /// into `acc[j]`: the same integer sums as [`Isa::block_words`] per tile (the default). A
    /// level may broadcast each activation group once for the four tiles ([`Isa::SHARED_S4`]).
    ///
    /// # Safety
    /// As [`Isa::block_words`] for each tile.
    #[inline(always)]
    unsafe fn block_words_s4<const R: usize>(acc: &mut [[[Self::Acc; 1]; R]; 4], b: [&BlockX16; 4], a: &Q8Half)
    where
        Self: Sized,
    {
        // SAFETY: forwarded.
        unsafe {
            for (x, b) in acc.iter_mut().zip(b) {
                Self::block_words::<R, 1>(x, b, &[a]);
            }
        }
    }
    /// Broadcasts the 4 bytes at `p` to every lane.
    unsafe fn bcast(p: *const i8) -> Self::V;
    /// A block's fresh accumulator; `nysum = -sum(y)` may seed it (or wait for [`Isa::isum`]).
    unsafe fn acc_new(nysum: i32) -> Self::Acc;
    /// Adds `u . y` per lane (4 byte products) for slot operand `S` (0..4) of [`Isa::slots`].
    unsafe fn dot<const S: usize>(acc: &mut Self::Acc, u: Self::V, y: Self::V);
    /// The sum of an accumulator made with `acc_new(nysum)` and one made with `acc_new(0)`,
    /// as one made with `acc_new(nysum)` that saw both's products (exact: integer adds).
    unsafe fn acc_merge(a: Self::Acc, b: Self::Acc) -> Self::Acc;
    /// The block's `isum` per lane (`nysum` as given to [`Isa::acc_new`]).
    unsafe fn isum(acc: Self::Acc, nysum: i32) -> Self::V;
    /// `LANES` fp16 scales at `p` as f32 (exact).
    unsafe fn scales(p: *const f16) -> Self::F;
    /// Zero.
    unsafe fn fzero() -> Self::F;
    /// `fma(d * dy, (float) isum, sumf)` per lane, the product rounded first.
    unsafe fn fstep(sumf: Self::F, d: Self::F, dy: f32, isum: Self::V) -> Self::F;
    /// Stores `LANES` floats at `p` (unaligned).
    unsafe fn store(p: *mut f32, v: Self::F);
}

/// Word `w` (0..8) of block `b` for its vector of rows `h`: decoded once, then every column's four
/// broadcast activation groups accumulated into that column's `row[c]`.
///
/// # Safety
/// As [`tiles`]: the level's features are available; `w < 8`, `h < 16 / LANES`, and every `a[c]`
/// is an element of the validated pack.
#[inline(always)]
unsafe fn word<I: Isa, const NC: usize>(row: &mut [I::Acc; NC], b: &BlockX16, a: &[&Q8Half; NC], w: usize, h: usize) {
    // SAFETY: the word's bytes lie inside block `b`, the activation groups inside `a[c]` (16 bytes
    // of word `w` of 128), by the caller's bounds.
    unsafe {
        let s = I::slots(I::load(b.qs[w].as_ptr().add(4 * I::LANES * h)));
        for (c, x) in row.iter_mut().enumerate() {
            let p = a[c].qs.as_ptr().add(16 * w);
            I::dot::<0>(x, s[0], I::bcast(p));
            I::dot::<1>(x, s[1], I::bcast(p.add(4)));
            I::dot::<2>(x, s[2], I::bcast(p.add(8)));
            I::dot::<3>(x, s[3], I::bcast(p.add(12)));
        }
    }
}

/// Words 0..8 of block `b` for all `R` vectors of rows x `NC` columns into `acc` (the generic
/// [`Isa::block_words`]).
///
/// # Safety
/// As [`word`] for every word and vector of rows.
#[inline(always)]
pub(crate) unsafe fn words<I: Isa, const R: usize, const NC: usize>(
    acc: &mut [[I::Acc; NC]; R],
    b: &BlockX16,
    a: &[&Q8Half; NC],
) {
    // SAFETY: every pointer below is inside block `b` or a column's element `a[c]`.
    unsafe {
        // Per word: each vector of rows is decoded once, then meets every column's four
        // broadcast activation groups. A real loop over the words (the opaque trip count
        // keeps it from being unrolled): unrolled, the scheduler hoists every word's
        // loads and decoding above the dot products and spills them, for tiles of
        // several columns. Narrow tiles of a SPLIT_NARROW level take words in pairs, the
        // odd word into a second accumulator: two independent chains where one would
        // wait on the latency; one column's (the gemv's) pairs are unrolled: it holds
        // few registers, and the unrolled loop kept four streams at the speed of a
        // stand-alone copy (examples/dram: 92-95% of the read loop, where the opaque
        // loop ran 3-11 points lower).
        if I::SPLIT_NARROW && NC <= 2 {
            let mut odd = [[I::acc_new(0); NC]; R];
            for wp in 0..(if NC == 1 { 4usize } else { core::hint::black_box(4usize) }) {
                for (h, (row, row_odd)) in acc.iter_mut().zip(odd.iter_mut()).enumerate() {
                    word::<I, NC>(row, b, a, 2 * wp, h);
                    word::<I, NC>(row_odd, b, a, 2 * wp + 1, h);
                }
            }
            for (row, row_odd) in acc.iter_mut().zip(odd.iter()) {
                for (x, y) in row.iter_mut().zip(row_odd.iter()) {
                    *x = I::acc_merge(*x, *y);
                }
            }
        } else {
            for w in 0..core::hint::black_box(8usize) {
                for (h, row) in acc.iter_mut().enumerate() {
                    word::<I, NC>(row, b, a, w, h);
                }
            }
        }
    }
}

/// `S` row tiles side by side (`t0 .. t0 + S`; 16 rows, `R = 16 / LANES` vectors, each) x
/// columns `c0 .. c0 + NC`: block `i` of every one of the `S` tiles, then block `i + 1`, so that
/// `S` weight streams are read at once (see [`GEMV_STREAMS`]). The weights are prefetched
/// [`PF_BLOCKS`] ahead for tiles of [`Isa::PF_MIN_COLS`] or more columns, and for narrower ones
/// when `pf` (Intel: [`Isa::INTEL_GEMV`], [`Isa::STREAM_COLS_MAX`]).
///
/// # Safety
/// The level's features are available; `job` validated by `gemm_raw` (Halves pack);
/// `c0 + NC <= job.n_cols`; the job owns tiles `t0 .. t0 + S`.
#[inline(always)]
unsafe fn tiles<I: Isa, const R: usize, const NC: usize, const S: usize>(
    job: &Job<'_, BlockX16, Q8Half>,
    t0: usize,
    c0: usize,
    pf: bool,
) {
    debug_assert_eq!(R * I::LANES, X16_ROWS);
    let nb = job.nb;
    // SAFETY: register setup.
    let mut sumf = [[[unsafe { I::fzero() }; NC]; R]; S];
    let mut streams = [job.tile(t0); S];
    for (j, x) in streams.iter_mut().enumerate() {
        *x = job.tile(t0 + j);
    }
    // the job's weight blocks, for the prefetch past the end of a tile (never past the job's own)
    let job_blocks = &job.w[..job.tiles.end * nb];
    // No closures (`core::array::from_fn`) in here: they are not inlined into the caller's
    // `#[target_feature]` function, and every intrinsic in them would become a call.
    for i in 0..nb {
        let mut a = [&job.act[0]; NC];
        for (c, x) in a.iter_mut().enumerate() {
            *x = &job.act[(c0 + c) * nb + i];
        }
        if I::SHARED_S4 && NC == 1 && S == GEMV_STREAMS {
            // The four tiles' integer sums first (one broadcast per activation group), then each
            // tile's float step: per output the same block order as below. (`1 % S`, `2 % S` and
            // `3 % S` keep the indices in bounds where this branch is dead, S < 4.)
            // SAFETY: every pointer is inside block `i` of a stream tile or column 0's element
            // `a[0]`, as below.
            unsafe {
                let mut acc = [[[I::acc_new(a[0].nysum); 1]; R]; GEMV_STREAMS];
                let b = [&streams[0][i], &streams[1 % S][i], &streams[2 % S][i], &streams[3 % S][i]];
                I::block_words_s4::<R>(&mut acc, b, a[0]);
                for ((sumf, acc), b) in sumf.iter_mut().zip(acc.iter()).zip(b) {
                    for (h, row) in acc.iter().enumerate() {
                        let d = I::scales(b.d.as_ptr().add(I::LANES * h));
                        sumf[h][0] = I::fstep(sumf[h][0], d, a[0].d, I::isum(row[0], a[0].nysum));
                    }
                }
            }
            continue;
        }
        for (j, (sumf, blocks)) in sumf.iter_mut().zip(streams.iter()).enumerate() {
            let b = &blocks[i];
            if NC >= I::PF_MIN_COLS || pf {
                // the weights PF_BLOCKS blocks ahead, into the job's next tile at a tile's end
                if let Some(ahead) = job_blocks.get((t0 + j) * nb + i + PF_BLOCKS) {
                    prefetch_block(ahead);
                }
            }
            // SAFETY: every pointer below is inside block `b` or a column's element `a[c]`.
            unsafe {
                let mut acc = [[I::acc_new(0); NC]; R];
                for row in acc.iter_mut() {
                    for (c, x) in row.iter_mut().enumerate() {
                        *x = I::acc_new(a[c].nysum);
                    }
                }
                I::block_words::<R, NC>(&mut acc, b, &a);
                for (h, row) in acc.iter_mut().enumerate() {
                    let d = I::scales(b.d.as_ptr().add(I::LANES * h));
                    for (c, x) in row.iter_mut().enumerate() {
                        sumf[h][c] = I::fstep(sumf[h][c], d, a[c].d, I::isum(*x, a[c].nysum));
                    }
                }
            }
        }
    }
    for (j, sumf) in sumf.iter().enumerate() {
        let r0 = X16_ROWS * (t0 + j);
        let rows = X16_ROWS.min(job.n_rows - r0);
        for c in 0..NC {
            // SAFETY: the job owns rows r0 .. r0 + rows of every column (validated); a partial
            // tile goes through a local buffer so padding rows are never stored.
            unsafe {
                let dst = job.out.ptr.add((c0 + c) * job.out.col_stride + r0);
                if rows == X16_ROWS {
                    for (h, v) in sumf.iter().enumerate() {
                        I::store(dst.add(I::LANES * h), v[c]);
                    }
                } else {
                    let mut tmp = [0.0f32; X16_ROWS];
                    for (h, v) in sumf.iter().enumerate() {
                        I::store(tmp.as_mut_ptr().add(I::LANES * h), v[c]);
                    }
                    core::ptr::copy_nonoverlapping(tmp.as_ptr(), dst, rows);
                }
            }
        }
    }
}

/// Blocks ahead of the current one whose weights a tile of [`Isa::PF_MIN_COLS`] or more columns prefetches (software
/// prefetch, every cache line of the block; past the end of a row tile into the job's next tile).
/// Without it, tiles of 2 to 16 columns over a matrix that comes from DRAM ran at 36-74% of their
/// issue limit where the same tiles in cache ran at 88-90%: the next blocks' loads wait in the
/// out-of-order window behind a block's worth of multiply-adds, so few cache misses are in flight
/// (a gemv has little work per block and keeps enough loads in flight by itself on Zen 4; on Intel
/// the VNNI gemv prefetches too, [`Isa::INTEL_GEMV`]). Zen 4, 1 thread,
/// 17408 x 5120 and 5120 x 17408 (23.7 MB, from DRAM), `examples/levels` with 2..64 columns, share
/// of the issue limit. Prefetching within the tile only, two interleaved rounds, `avx512vnni` at
/// distance 0 / 2 / 4 / 8 blocks: 4 columns 46-52% / 53-69% / 65-75% / 68-79%, 8 columns
/// 59-68% / 79-82% / 73-88% / 79-84% (12 and 16 blocks no better than 8). Crossing into the next
/// tile at 8, two rounds: `avx512vnni` 2 / 4 / 8 / 16 / 64 columns 72-78% / 81-85% / 84-88% / 86% /
/// 87-89% (without prefetch 41-52% / 46-52% / 59-68% / 70-74% / 83-85%); `avx2` 47-48% / 58-60% /
/// 59-61% / 59-61% / 54-61% (without 32-42% / 37-42% / 48-50% / 53-56% / 59-61%).
pub(crate) const PF_BLOCKS: usize = 8;

/// The narrowest tile that prefetches ([`PF_BLOCKS`]) unless a level measured otherwise
/// ([`Isa::PF_MIN_COLS`]). In llama.cpp (`llama-batched-bench`, the
/// synthetic 8B, 32 generated tokens per sequence, interleaved rounds against the same build
/// without the prefetch, tokens/s of generation) 4 parallel sequences (4-column tiles) gained
/// 38-49% (1 thread 16.1, 16.1 -> 22.4, 22.0; 2 threads 26.6, 26.0, 25.5, 26.8 -> 35.8, 39.1, 38.1,
/// 36.2) and 8 sequences 10-22% (2 threads 34.5, 34.9, 33.8, 36.8 -> 39.9, 41.5, 41.2, 40.5), while
/// 2 sequences showed no gain: 1 thread 18.2, 16.6 -> 18.2, 18.9; 2 threads 27.9, 29.4 -> 25.7,
/// 26.4 with the prefetch at 2 columns, inside this host's noise (builds that differ only in tiles
/// of 4 or more columns gave 24.8, 23.3 and 27.3, 26.8 there). So 2-column tiles do not prefetch at
/// the VNNI levels (`avx2`'s own value, measured with its `asm!` tiles of 2 and 3 columns, is 2),
/// except in `avx512vnni`'s Intel order for 2 to 4 columns ([`Isa::STREAM_COLS_MAX`]), where they
/// read four row tiles side by side as the gemv does.
pub(crate) const PF_MIN_COLS: usize = 4;

/// Prefetches the 544 bytes of `b` into L1 (`prefetcht0`, a hint: never faults).
#[inline(always)]
pub(crate) fn prefetch_block(b: &BlockX16) {
    let p = (b as *const BlockX16).cast::<i8>();
    for line in 0..core::mem::size_of::<BlockX16>().div_ceil(64) {
        // SAFETY: the address is inside `b` (offsets 0, 64, .., 512 of its 544 bytes); a prefetch
        // reads nothing architecturally and never faults.
        unsafe { core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.add(64 * line)) }
    }
}

/// Row tiles a gemv (one column) reads side by side when its rows are long (see
/// [`GEMV_STREAMS_MIN_BLOCKS`]). With one tile at a time, the weights read between two uses of
/// an activation block are a whole tile (544 bytes per block); the explanation that fits the
/// measurements below (this VM has no cache counters to confirm it) is that once a tile and the
/// activation row pass the 32 KiB L1, the activations come from L2 for every block, and four
/// tiles side by side use each activation block four times in a row. Zen 4, 1 thread, about 0.57 GB from DRAM (`examples/dram --k K`), share of
/// a plain read loop over the same bytes, one stream -> four: k 4096 98% -> 65%, 5120 97% -> 69%,
/// 6144 91% -> 73%, 8192 88% -> 79%, 12288 79-87% -> 81-84%, 17408 74% -> 86%, 24576 80% -> 96%,
/// 32768 73% -> 96% (two and eight streams were worse than four at every k). Tiles of several
/// columns are compute-bound and keep one stream.
pub(crate) const GEMV_STREAMS: usize = 4;
// Isa::block_words_s4 takes exactly GEMV_STREAMS tiles.
const _: () = assert!(GEMV_STREAMS == 4);

/// Blocks per row (k / 128) from which a gemv reads [`GEMV_STREAMS`] row tiles side by side:
/// k >= 16384 (the measurements at [`GEMV_STREAMS`]); shorter rows read one tile at a time. The
/// VNNI levels' value ([`Isa::STREAMS_MIN_BLOCKS`]) on AMD (on Intel they read four at every k:
/// [`Isa::INTEL_GEMV`]); `avx2` reads four tiles at every k (see `Avx2`'s value in
/// [`super::x86_avx2`]).
pub(crate) const GEMV_STREAMS_MIN_BLOCKS: usize = 128;

/// The X16 gemm and gemv. One column (gemv): [`GEMV_STREAMS`] row tiles side by side when rows
/// have at least [`Isa::STREAMS_MIN_BLOCKS`] blocks (every row, with the prefetch, on Intel for a
/// level with [`Isa::INTEL_GEMV`]), then the job's last tiles (all of them for shorter rows) one by
/// one. 2 to [`Isa::STREAM_COLS_MAX`] columns on Intel: the same order, the columns in tiles of
/// at most 4 per group of row tiles ([`narrow_streams`]). Several columns otherwise: for each row tile, columns in tiles of
/// `NC`, then 4, 3 (where [`Isa::TAIL3`]), 2, 1 for the rest (each smaller tile only when `NC` is
/// larger).
///
/// # Safety
/// As [`tiles`] for every tile of the job.
#[inline(always)]
pub(crate) unsafe fn gemm_x16<I: Isa, const R: usize, const NC: usize>(job: &Job<'_, BlockX16, Q8Half>) {
    if job.n_cols == 1 {
        // gemv: long rows GEMV_STREAMS tiles side by side, then the rest one by one; on Intel,
        // for a level that says so, every row with the prefetch (Isa::INTEL_GEMV)
        let intel = I::INTEL_GEMV && !CpuFeatures::detect().amd;
        let min_blocks = if intel { 0 } else { I::STREAMS_MIN_BLOCKS };
        let mut t = job.tiles.start;
        // SAFETY: (each call) one column, c0 = 0 < n_cols; the tiles are the job's.
        unsafe {
            while job.nb >= min_blocks && t + GEMV_STREAMS <= job.tiles.end {
                tiles::<I, R, 1, GEMV_STREAMS>(job, t, 0, intel);
                t += GEMV_STREAMS;
            }
            while t < job.tiles.end {
                tiles::<I, R, 1, 1>(job, t, 0, intel);
                t += 1;
            }
        }
        return;
    }
    if (2..=I::STREAM_COLS_MAX).contains(&job.n_cols) && I::INTEL_GEMV && !CpuFeatures::detect().amd {
        // SAFETY: forwarded.
        unsafe { narrow_streams::<I, R>(job) };
        return;
    }
    for t in job.tiles.clone() {
        let mut c0 = 0;
        // SAFETY: (each call) c0 + width <= n_cols by the loop conditions; the rest is forwarded.
        unsafe {
            while c0 + NC <= job.n_cols {
                tiles::<I, R, NC, 1>(job, t, c0, false);
                c0 += NC;
            }
            if NC > 4 && c0 + 4 <= job.n_cols {
                tiles::<I, R, 4, 1>(job, t, c0, false);
                c0 += 4;
            }
            if I::TAIL3 && NC > 3 && c0 + 3 <= job.n_cols {
                tiles::<I, R, 3, 1>(job, t, c0, false);
                c0 += 3;
            }
            if NC > 2 && c0 + 2 <= job.n_cols {
                tiles::<I, R, 2, 1>(job, t, c0, false);
                c0 += 2;
            }
            if NC > 1 && c0 < job.n_cols {
                tiles::<I, R, 1, 1>(job, t, c0, false);
            }
        }
    }
}

/// A gemm of 2 to [`Isa::STREAM_COLS_MAX`] columns on Intel: [`GEMV_STREAMS`] row tiles side by
/// side with the prefetch (the gemv's order), then the job's last tiles one by one; per group of
/// row tiles the columns in tiles of at most 4 (5 to 7 columns: a second pass over the group's
/// weights, from L2). The same integer sums and float steps per output as any other tiling.
///
/// # Safety
/// As [`tiles`] for every tile of the job.
#[inline(always)]
unsafe fn narrow_streams<I: Isa, const R: usize>(job: &Job<'_, BlockX16, Q8Half>) {
    let mut t = job.tiles.start;
    // SAFETY: (each call) the tiles are the job's.
    unsafe {
        while t + GEMV_STREAMS <= job.tiles.end {
            column_passes::<I, R, GEMV_STREAMS>(job, t);
            t += GEMV_STREAMS;
        }
        while t < job.tiles.end {
            column_passes::<I, R, 1>(job, t);
            t += 1;
        }
    }
}

/// Every column of the job over `S` row tiles from `t`: [`tiles`] of at most 4 columns, with the
/// prefetch.
///
/// # Safety
/// As [`tiles`] for tiles `t .. t + S`.
#[inline(always)]
unsafe fn column_passes<I: Isa, const R: usize, const S: usize>(job: &Job<'_, BlockX16, Q8Half>, t: usize) {
    let mut c0 = 0;
    // SAFETY: (each call) the columns [c0, c0 + width) lie in 0..n_cols; the rest is forwarded.
    unsafe {
        while c0 < job.n_cols {
            let width = (job.n_cols - c0).min(4);
            match width {
                1 => tiles::<I, R, 1, S>(job, t, c0, true),
                2 => tiles::<I, R, 2, S>(job, t, c0, true),
                3 => tiles::<I, R, 3, S>(job, t, c0, true),
                _ => tiles::<I, R, 4, S>(job, t, c0, true),
            }
            c0 += width;
        }
    }
}
