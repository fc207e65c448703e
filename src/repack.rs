//! Load-time repacking: PQ2_0 / PTQ1_0 -> T2P, PTQ1_0 -> PTQ1_0x4 (ARM), PQ2_0 / PTQ1_0 -> X16 and
//! PTQ1_0 -> L64 (x86-64), and the inverses (used by tests, by the RPC path and by anyone who wants
//! their original bytes back).
//!
//! Source matrices are ggml row-major: row `r`'s block `i` at index `r * k/128 + i`. Repacked
//! matrices are tile major (see [`crate::PackedWeights`]): all `k/128` blocks of the first tile of
//! rows (4 rows for T2P and PTQ1_0x4, 16 for X16, 64 for L64), then the next tile. T2P from PQ2_0
//! and PTQ1_0x4 keep the source size; T2P from PTQ1_0 is 136/112 of it; X16 is the PQ2_0 size of
//! `ceil(n_rows / 16) * 16` rows and L64 the PTQ1_0 size of `ceil(n_rows / 64) * 64` rows (the last
//! tile padded with zero rows).
//!
//! ## Threads
//! A repack runs on scoped threads that it starts and joins itself ([`std::thread::scope`]): no
//! thread outlives the call and no pool state is kept, so a repack after `fork()` (in the parent
//! or the child) behaves like the first one. The number of threads is at most
//! [`set_repack_threads`] (default: the available parallelism), and 1 for matrices under
//! [`PARALLEL_MIN_BYTES`].

use crate::error::Error;
use crate::format::{
    check_shape, BlockL64, BlockPq2_0, BlockPtq1_0, BlockPtq1_0x4, BlockT2p, BlockX16, GGML_TYPE_PQ2_0,
    GGML_TYPE_PTQ1_0, L64_ROWS, QK, X16_ROWS, ZERO_ROW,
};
use core::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The repacked layouts. The numeric values are the C header's `GGML_T2P_LAYOUT_*`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Layout {
    /// T2P (ARM: `sdot`/`smmla`; from PQ2_0, or from PTQ1_0 at 2.125 bits per weight).
    T2p = 1,
    /// PTQ1_0x4 (ARM; from PTQ1_0 only, 1.75 bits per weight kept).
    Ptq1_0x4 = 2,
    /// X16 (x86-64: `vpdpbusd`/`vpmaddubsw`; from PQ2_0 or PTQ1_0, 2.125 bits per weight).
    X16 = 3,
    /// L64 (x86-64 with AVX-512 VBMI: table-lookup gemv, gemm through X16; from PTQ1_0 only,
    /// 1.75 bits per weight kept).
    L64 = 4,
}

impl Layout {
    /// Every layout.
    pub const ALL: [Layout; 4] = [Layout::T2p, Layout::Ptq1_0x4, Layout::X16, Layout::L64];

    /// Parses the C value.
    pub fn from_i32(v: i32) -> Option<Self> {
        Self::ALL.into_iter().find(|l| *l as i32 == v)
    }

    /// Short name, as printed in logs (`T2P`, `PTQ1_0x4`, `X16`, `L64`).
    pub fn name(self) -> &'static str {
        match self {
            Layout::T2p => "T2P",
            Layout::Ptq1_0x4 => "PTQ1_0x4",
            Layout::X16 => "X16",
            Layout::L64 => "L64",
        }
    }

    /// Rows per block (the row tile): 4, 16 for X16, 64 for L64.
    pub fn tile_rows(self) -> usize {
        match self {
            Layout::T2p | Layout::Ptq1_0x4 => 4,
            Layout::X16 => X16_ROWS,
            Layout::L64 => L64_ROWS,
        }
    }

    /// Bytes of one block (`tile_rows` rows x 128 weights).
    pub fn block_size(self) -> usize {
        match self {
            Layout::T2p => size_of::<BlockT2p>(),
            Layout::Ptq1_0x4 => size_of::<BlockPtq1_0x4>(),
            Layout::X16 => size_of::<BlockX16>(),
            Layout::L64 => size_of::<BlockL64>(),
        }
    }

    /// Whether weights of `src` can be repacked into this layout (PTQ1_0x4 and L64 hold digits
    /// only: PTQ1_0).
    pub fn accepts(self, src: SourceType) -> bool {
        !(matches!(self, Layout::Ptq1_0x4 | Layout::L64) && src == SourceType::Pq2_0)
    }
}

/// The weight types we repack from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SourceType {
    /// ggml type 142.
    Pq2_0,
    /// ggml type 143.
    Ptq1_0,
}

impl SourceType {
    /// From a ggml type id.
    pub fn from_ggml(type_id: u32) -> Option<Self> {
        match type_id {
            GGML_TYPE_PQ2_0 => Some(SourceType::Pq2_0),
            GGML_TYPE_PTQ1_0 => Some(SourceType::Ptq1_0),
            _ => None,
        }
    }

    /// Bytes per 128-weight source block.
    pub fn block_size(self) -> usize {
        match self {
            SourceType::Pq2_0 => size_of::<BlockPq2_0>(),
            SourceType::Ptq1_0 => size_of::<BlockPtq1_0>(),
        }
    }
}

/// Bytes of the source matrix (`n_rows * k/128` blocks).
///
/// # Errors
/// [`Error::Shape`] for a shape outside [`check_shape`] or a size past `isize::MAX` bytes.
pub fn source_size(src: SourceType, n_rows: usize, k: usize) -> Result<usize, Error> {
    let nb = check_shape(n_rows, k)?;
    byte_size(n_rows * nb, src.block_size())
}

/// `blocks * block_size` bytes, refused ([`Error::Shape`]) past `isize::MAX`: no buffer is
/// larger (Rust's allocations and slices, C's `PTRDIFF_MAX`), so such a shape is never valid.
fn byte_size(blocks: usize, block_size: usize) -> Result<usize, Error> {
    blocks.checked_mul(block_size).filter(|&b| b <= isize::MAX as usize).ok_or(Error::Shape)
}

/// Blocks of a repacked `n_rows x k` matrix: `ceil(n_rows / tile_rows) * k/128`.
///
/// # Errors
/// [`Error::Shape`] as [`source_size`].
pub fn repacked_blocks(layout: Layout, n_rows: usize, k: usize) -> Result<usize, Error> {
    let nb = check_shape(n_rows, k)?;
    n_rows.div_ceil(layout.tile_rows()).checked_mul(nb).ok_or(Error::Shape)
}

/// Bytes of the repacked matrix ([`repacked_blocks`] blocks of the layout).
///
/// # Errors
/// [`Error::Shape`] as [`source_size`], for the source or the repacked size;
/// [`Error::Unsupported`] for PQ2_0 -> PTQ1_0x4 or L64.
pub fn repacked_size(src: SourceType, layout: Layout, n_rows: usize, k: usize) -> Result<usize, Error> {
    if !layout.accepts(src) {
        return Err(Error::Unsupported);
    }
    source_size(src, n_rows, k)?;
    byte_size(repacked_blocks(layout, n_rows, k)?, layout.block_size())
}

/// Matrices smaller than this (source bytes) are repacked on the calling thread alone.
pub const PARALLEL_MIN_BYTES: usize = 1 << 20;

static REPACK_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Caps the threads a repack may use (0: the available parallelism, the default; a larger cap
/// than the available parallelism is lowered to it). The C ABI's `ggml_t2p_set_threads` sets
/// this.
pub fn set_repack_threads(n: usize) {
    REPACK_THREADS.store(n, Ordering::Relaxed);
}

/// Threads a repack of `bytes` source bytes in `tiles` independent tiles will use.
pub fn repack_threads(bytes: usize, tiles: usize) -> usize {
    if bytes < PARALLEL_MIN_BYTES {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let cap = match REPACK_THREADS.load(Ordering::Relaxed) {
        0 => cores,
        n => n.min(cores),
    };
    cap.clamp(1, tiles.max(1))
}

/// Runs `f(first_tile_index, tiles)` over `dst` cut into tiles of `tile` elements, on up to
/// `threads` scoped threads (contiguous runs of tiles each; the calling thread takes the first).
/// Every thread is joined (`pthread_join`, not just waited for) before this returns, so the
/// process has no thread of ours left when a repack returns. A thread the host refuses to start
/// (thread limits) is no failure: the calling thread does that run itself.
fn for_tiles<D: Send>(dst: &mut [D], tile: usize, threads: usize, f: impl Fn(usize, &mut [D]) + Sync) {
    let n_tiles = dst.len() / tile;
    let threads = threads.clamp(1, n_tiles.max(1));
    if threads == 1 {
        f(0, dst);
        return;
    }
    std::thread::scope(|s| {
        let mut rest = dst;
        let mut first = 0;
        let mut mine = None;
        let mut handles = Vec::with_capacity(threads - 1);
        let f = &f;
        for t in 0..threads {
            let end = n_tiles * (t + 1) / threads;
            let (run, tail) = core::mem::take(&mut rest).split_at_mut((end - first) * tile);
            rest = tail;
            let start = first;
            first = end;
            if t == 0 {
                mine = Some((start, run));
                continue;
            }
            // The run goes to the thread through a channel, so that it stays here if the
            // thread cannot be started.
            let (tx, rx) = std::sync::mpsc::channel::<(usize, &mut [D])>();
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                if let Ok((start, run)) = rx.recv() {
                    f(start, run);
                }
            });
            match spawned {
                Ok(h) => {
                    tx.send((start, run)).expect("the worker waits for its run");
                    handles.push(h);
                }
                Err(_) => f(start, run),
            }
        }
        if let Some((start, run)) = mine {
            f(start, run);
        }
        for h in handles {
            if let Err(panic) = h.join() {
                std::panic::resume_unwind(panic);
            }
        }
    });
}

/// Checks lengths and returns blocks per row.
fn check(layout: Layout, n_rows: usize, k: usize, src_len: usize, dst_len: usize) -> Result<usize, Error> {
    let nb = check_shape(n_rows, k)?;
    if src_len < n_rows * nb || dst_len < repacked_blocks(layout, n_rows, k)? {
        return Err(Error::BufferSize);
    }
    Ok(nb)
}

/// Repacks `R`-row tiles: `pack(rows of tile t at block i, destination block)` for each of the
/// `nb` blocks of each tile, which must overwrite the whole destination block; rows past `n_rows`
/// are `pad`. (Writing in place, not returning the block, keeps a 544-byte X16 block out of a
/// temporary: a third of the PQ2_0 -> X16 time.)
fn repack_tiles<S: Sync, D: Send, const R: usize>(
    src: &[S],
    n_rows: usize,
    nb: usize,
    dst: &mut [D],
    pad: &S,
    pack: impl Fn([&S; R], &mut D) + Sync,
) {
    let threads = repack_threads(n_rows * nb * size_of::<S>(), dst.len() / nb);
    for_tiles(dst, nb, threads, |first, out| {
        for (t, tile) in out.chunks_mut(nb).enumerate() {
            let r0 = (first + t) * R;
            for (i, o) in tile.iter_mut().enumerate() {
                pack(core::array::from_fn(|r| if r0 + r < n_rows { &src[(r0 + r) * nb + i] } else { pad }), o);
            }
        }
    });
}

/// Scatters `R`-row tiles back: `unpack(block, r)` gives row `r`'s source block (padding rows are
/// dropped).
fn unpack_tiles<S: Sync, D: Send, const R: usize>(
    src: &[S],
    n_rows: usize,
    nb: usize,
    dst: &mut [D],
    unpack: impl Fn(&S, usize) -> D + Sync,
) {
    let threads = repack_threads(n_rows * nb * size_of::<D>(), n_rows);
    for_tiles(&mut dst[..n_rows * nb], nb, threads, |first_row, rows| {
        for (rr, row) in rows.chunks_mut(nb).enumerate() {
            let r = first_row + rr;
            for (i, o) in row.iter_mut().enumerate() {
                *o = unpack(&src[(r / R) * nb + i], r % R);
            }
        }
    });
}

/// PQ2_0 (`n_rows x k`, row-major) -> T2P (row-group major). Codes, code 3 included, and scales
/// are kept bit for bit; [`unpack_t2p_to_pq2_0`] is the exact inverse.
///
/// # Errors
/// [`Error::Shape`] for a shape we do not handle; [`Error::BufferSize`] if `src` has fewer than
/// `n_rows * k/128` blocks or `dst` fewer than [`repacked_blocks`].
pub fn repack_pq2_0_to_t2p(src: &[BlockPq2_0], n_rows: usize, k: usize, dst: &mut [BlockT2p]) -> Result<(), Error> {
    let nb = check(Layout::T2p, n_rows, k, src.len(), dst.len())?;
    repack_tiles::<_, _, 4>(src, n_rows, nb, &mut dst[..n_rows / 4 * nb], &ZERO_ROW, |rows, o| {
        *o = BlockT2p::from_rows(rows)
    });
    Ok(())
}

/// T2P -> PQ2_0, the inverse of [`repack_pq2_0_to_t2p`].
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`] with the roles of the buffers swapped.
pub fn unpack_t2p_to_pq2_0(src: &[BlockT2p], n_rows: usize, k: usize, dst: &mut [BlockPq2_0]) -> Result<(), Error> {
    let nb = check(Layout::T2p, n_rows, k, dst.len(), src.len())?;
    unpack_tiles::<_, _, 4>(src, n_rows, nb, dst, BlockT2p::row);
    Ok(())
}

/// The PTQ1_0 block of a padding row, as the fork's quantizer writes an all-zero block: scale +0,
/// every `qs` byte 0x80 and `qh` byte 0x7F (every digit 1, weight 0).
pub const PTQ1_0_ZERO_ROW: BlockPtq1_0 = BlockPtq1_0 { qs: [0x80; 24], qh: [0x7F; 2], d: half::f16::ZERO };

/// One PTQ1_0 block as a PQ2_0 block: a trit digit (0..=2) is already the 2-bit code of the
/// same weight (`value = (digit - 1) * d`), and the scale is the same fp16.
pub fn ptq1_0_to_pq2_0(b: &BlockPtq1_0) -> BlockPq2_0 {
    BlockPq2_0 { d: b.d, qs: b.pq2_0_qs() }
}

/// PTQ1_0 -> T2P (2.125 bits per weight), so a PTQ1_0 file runs on the T2P kernels with the
/// same results as the native PTQ1_0 kernels.
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`].
pub fn repack_ptq1_0_to_t2p(src: &[BlockPtq1_0], n_rows: usize, k: usize, dst: &mut [BlockT2p]) -> Result<(), Error> {
    let nb = check(Layout::T2p, n_rows, k, src.len(), dst.len())?;
    repack_tiles::<_, _, 4>(src, n_rows, nb, &mut dst[..n_rows / 4 * nb], &PTQ1_0_ZERO_ROW, |rows, o| {
        o.set_ptq1_0_rows(rows)
    });
    Ok(())
}

/// PTQ1_0 -> PTQ1_0x4 (1.75 bits per weight kept; bytes only move).
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`].
pub fn repack_ptq1_0_to_x4(
    src: &[BlockPtq1_0],
    n_rows: usize,
    k: usize,
    dst: &mut [BlockPtq1_0x4],
) -> Result<(), Error> {
    let nb = check(Layout::Ptq1_0x4, n_rows, k, src.len(), dst.len())?;
    repack_tiles::<_, _, 4>(src, n_rows, nb, &mut dst[..n_rows / 4 * nb], &PTQ1_0_ZERO_ROW, |rows, o| {
        *o = BlockPtq1_0x4::from_rows(rows)
    });
    Ok(())
}

/// PTQ1_0x4 -> PTQ1_0, the inverse of [`repack_ptq1_0_to_x4`].
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`] with the roles of the buffers swapped.
pub fn unpack_x4_to_ptq1_0(
    src: &[BlockPtq1_0x4],
    n_rows: usize,
    k: usize,
    dst: &mut [BlockPtq1_0],
) -> Result<(), Error> {
    let nb = check(Layout::Ptq1_0x4, n_rows, k, dst.len(), src.len())?;
    unpack_tiles::<_, _, 4>(src, n_rows, nb, dst, BlockPtq1_0x4::row);
    Ok(())
}

/// PQ2_0 (`n_rows x k`, row-major) -> X16 (16-row tiles; the last tile padded with zero rows when
/// `n_rows % 16 != 0`). Codes, code 3 included, and scales are kept bit for bit;
/// [`unpack_x16_to_pq2_0`] is the exact inverse.
///
/// # Errors
/// As [`repack_pq2_0_to_t2p`] (`dst` needs [`repacked_blocks`]`(X16, ..)` blocks).
pub fn repack_pq2_0_to_x16(src: &[BlockPq2_0], n_rows: usize, k: usize, dst: &mut [BlockX16]) -> Result<(), Error> {
    let nb = check(Layout::X16, n_rows, k, src.len(), dst.len())?;
    let n = repacked_blocks(Layout::X16, n_rows, k)?;
    repack_tiles::<_, _, X16_ROWS>(src, n_rows, nb, &mut dst[..n], &ZERO_ROW, |rows, o| o.set_rows(rows));
    Ok(())
}

/// PTQ1_0 -> X16 (2.125 bits per weight): each trit digit becomes the PQ2_0 code of the same
/// weight (the bytes of [`ptq1_0_to_pq2_0`] repacked, built directly by
/// [`BlockX16::from_ptq1_0_rows`]), so the X16 kernels compute the PTQ1_0 reference dot. The inverse,
/// [`unpack_x16_to_pq2_0`], gives those PQ2_0 rows (the same weights and scales).
///
/// # Errors
/// As [`repack_pq2_0_to_x16`].
pub fn repack_ptq1_0_to_x16(src: &[BlockPtq1_0], n_rows: usize, k: usize, dst: &mut [BlockX16]) -> Result<(), Error> {
    let nb = check(Layout::X16, n_rows, k, src.len(), dst.len())?;
    let n = repacked_blocks(Layout::X16, n_rows, k)?;
    repack_tiles::<_, _, X16_ROWS>(src, n_rows, nb, &mut dst[..n], &PTQ1_0_ZERO_ROW, |rows, o| o.set_ptq1_0_rows(rows));
    Ok(())
}

/// PTQ1_0 -> L64 (1.75 bits per weight: every byte of a row becomes one byte of L64, the 64 rows'
/// bytes of a group side by side; docs/formats.md §9). [`unpack_l64_to_pq2_0`] gives the PQ2_0
/// rows of the same weights and scales.
///
/// # Errors
/// As [`repack_pq2_0_to_x16`] (`dst` needs [`repacked_blocks`]`(L64, ..)` blocks).
pub fn repack_ptq1_0_to_l64(src: &[BlockPtq1_0], n_rows: usize, k: usize, dst: &mut [BlockL64]) -> Result<(), Error> {
    let nb = check(Layout::L64, n_rows, k, src.len(), dst.len())?;
    let n = repacked_blocks(Layout::L64, n_rows, k)?;
    let dst = &mut dst[..n];
    let threads = repack_threads(n_rows * nb * size_of::<BlockPtq1_0>(), dst.len() / nb);
    // Row by row within a tile (each source row read in order, the tile's blocks written in L2),
    // not block by block: 64 source rows a block apart touch 64 pages (the 9B on 2 threads: 3.50 s
    // block by block, 3.09-3.26 s row by row; docs/results.md, section 1.11).
    for_tiles(dst, nb, threads, |first, out| {
        for (t, tile) in out.chunks_mut(nb).enumerate() {
            let r0 = (first + t) * L64_ROWS;
            for r in 0..L64_ROWS {
                let row = if r0 + r < n_rows { Some(&src[(r0 + r) * nb..(r0 + r + 1) * nb]) } else { None };
                for (i, o) in tile.iter_mut().enumerate() {
                    o.set_ptq1_0_row(r, row.map_or(&PTQ1_0_ZERO_ROW, |row| &row[i]));
                }
            }
        }
    });
    Ok(())
}

/// L64 -> PQ2_0 (the codes are the digits: the same weights and scales; padding rows dropped).
/// A byte no repack writes reads as the kernels read it ([`crate::format::decode_group`]).
///
/// # Errors
/// As [`repack_ptq1_0_to_l64`] with the roles of the buffers swapped.
pub fn unpack_l64_to_pq2_0(src: &[BlockL64], n_rows: usize, k: usize, dst: &mut [BlockPq2_0]) -> Result<(), Error> {
    let nb = check(Layout::L64, n_rows, k, dst.len(), src.len())?;
    unpack_tiles::<_, _, L64_ROWS>(src, n_rows, nb, dst, BlockL64::row);
    Ok(())
}

/// A repacked block that gives back one of its rows as floats (for `GET_ROWS` on a repacked
/// matrix: [`dequantize_repacked_row`]).
pub trait RowBlock: Copy {
    /// Rows per block (the layout's row tile).
    const ROWS: usize;
    /// Row `r` (`< ROWS`) of the block's 128 weights as floats (`out`: 128 of them), exactly as ggml's `to_float` of
    /// the source type: `(code - 1) * d`, `d` the row's fp16 scale as f32.
    fn dequantize(&self, r: usize, out: &mut [f32]);
}

impl RowBlock for BlockX16 {
    const ROWS: usize = X16_ROWS;
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        // (the PQ2_0 block of a PTQ1_0 row has its digits as codes and its scale: the same values)
        let done = crate::reference::dequantize_row_pq2_0(&[self.row(r)], out);
        debug_assert_eq!(done, Ok(()));
    }
}

impl RowBlock for BlockL64 {
    const ROWS: usize = L64_ROWS;
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        let done = crate::reference::dequantize_row_pq2_0(&[self.row(r)], out);
        debug_assert_eq!(done, Ok(()));
    }
}

impl RowBlock for BlockT2p {
    const ROWS: usize = 4;
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        let done = crate::reference::dequantize_row_pq2_0(&[self.row(r)], out);
        debug_assert_eq!(done, Ok(()));
    }
}

impl RowBlock for BlockPtq1_0x4 {
    const ROWS: usize = 4;
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        let done = crate::reference::dequantize_row_ptq1_0(&[self.row(r)], out);
        debug_assert_eq!(done, Ok(()));
    }
}

/// Row `r` of an `n_rows x k` matrix repacked into `w` (tile major, any layout), dequantized into
/// `out` (`k` floats): the values ggml's `to_float` gives for the source row (the reference's
/// [`dequantize_row_pq2_0`](crate::reference::dequantize_row_pq2_0) /
/// [`dequantize_row_ptq1_0`](crate::reference::dequantize_row_ptq1_0)), bit for bit.
///
/// # Errors
/// [`Error::Shape`] for a shape outside [`check_shape`] or `out.len() != k`;
/// [`Error::BufferSize`] if `w` has fewer than [`repacked_blocks`]; [`Error::Range`] for
/// `r >= n_rows`.
pub fn dequantize_repacked_row<B: RowBlock>(
    w: &[B],
    n_rows: usize,
    k: usize,
    r: usize,
    out: &mut [f32],
) -> Result<(), Error> {
    let nb = check_shape(n_rows, k)?;
    if out.len() != k {
        return Err(Error::Shape);
    }
    if w.len() < n_rows.div_ceil(B::ROWS) * nb {
        return Err(Error::BufferSize);
    }
    if r >= n_rows {
        return Err(Error::Range);
    }
    let tile = &w[(r / B::ROWS) * nb..][..nb];
    for (b, o) in tile.iter().zip(out.chunks_exact_mut(QK)) {
        b.dequantize(r % B::ROWS, o);
    }
    Ok(())
}

/// X16 -> PQ2_0, the inverse of [`repack_pq2_0_to_x16`] (padding rows dropped).
///
/// # Errors
/// As [`repack_pq2_0_to_x16`] with the roles of the buffers swapped.
pub fn unpack_x16_to_pq2_0(src: &[BlockX16], n_rows: usize, k: usize, dst: &mut [BlockPq2_0]) -> Result<(), Error> {
    let nb = check(Layout::X16, n_rows, k, dst.len(), src.len())?;
    unpack_tiles::<_, _, X16_ROWS>(src, n_rows, nb, dst, BlockX16::row);
    Ok(())
}
