//! Driver of the outside-loop line of `tools/cycle-model.py` (an example, not a test): one
//! thread's share of one matrix multiplication as the ggml shim runs it on `T2P_OL_THREADS`
//! threads, between two marker calls. The tool runs it under `qemu-aarch64-static -d
//! in_asm,exec,nochain` and counts the instructions executed between the markers inside and outside
//! the kernels' block loops.
//!
//! The share, as in `ggml-glue` (thread 0): its part of the activation pack (one column: Q8_K blocks
//! `nq * ith / nth ..`; several columns: columns `ith, ith + nth, ..`), then its row chunks (`4 *
//! nth` chunks of whole 4-row tiles, chunks `ith, ith + nth, ..`), each one `gemm_raw` call. The
//! data are zeros: the kernels have no data-dependent branches, so the counts do not depend on it.
//!
//! Environment: `T2P_OL_ROWS`, `T2P_OL_K`, `T2P_OL_COLS`, `T2P_OL_THREADS`, `T2P_OL_LEVEL`
//! (`dotprod` or `i8mm`).

use ggml_t2p::format::{cast_blocks, BlockQ8K, BlockT2p, QK};
use ggml_t2p::kernels::act_pack::{pack_raw, packed_size, ActFormat, PackedActs};
use ggml_t2p::kernels::{gemm_raw, KernelLevel, PackedWeights};
use ggml_t2p::repack::{repacked_blocks, Layout};

fn env(name: &str) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("set {name} to a number"))
}

/// A zeroed, 16-byte aligned byte buffer (calloc'ed: no writes, cheap under an instruction log).
fn zeroed(bytes: usize) -> Vec<u128> {
    vec![0u128; bytes.div_ceil(16)]
}

fn as_bytes(v: &[u128]) -> &[u8] {
    // SAFETY: u128 has no padding; any byte view of it is valid.
    unsafe { core::slice::from_raw_parts(v.as_ptr().cast(), core::mem::size_of_val(v)) }
}

// Two markers with different bodies (identical ones would be merged into one function).
#[inline(never)]
fn ol_begin() -> u32 {
    std::hint::black_box(0x0b)
}

#[inline(never)]
fn ol_end() -> u64 {
    std::hint::black_box(0xe0d)
}

fn main() {
    let (rows, k, cols, nth) = (env("T2P_OL_ROWS"), env("T2P_OL_K"), env("T2P_OL_COLS"), env("T2P_OL_THREADS"));
    let level = KernelLevel::from_name(&std::env::var("T2P_OL_LEVEL").expect("set T2P_OL_LEVEL")).expect("a level");
    if !level.is_available() {
        eprintln!("outside_loop: level {} not available on this CPU", level.name());
        std::process::exit(1);
    }
    let layout = Layout::T2p;
    let nq = k.div_ceil(2 * QK);
    let wbytes = repacked_blocks(layout, rows, k).unwrap() * core::mem::size_of::<BlockT2p>();
    let wbuf = zeroed(wbytes);
    let w: &[BlockT2p] = cast_blocks(&as_bytes(&wbuf)[..wbytes]).unwrap();
    let weights = PackedWeights::t2p(w, rows, k).unwrap();
    let q8 = vec![BlockQ8K::default(); nq];
    let format = ActFormat::for_kernel(layout, level, cols).unwrap();
    let plen = packed_size(format, k, cols).unwrap();
    let mut pbuf = zeroed(plen);
    let mut dst = vec![0f32; rows * cols];
    let ith = 0;
    let n_tiles = rows / 4;
    let n_chunks = if nth == 1 { 1 } else { 4 * nth }.min(n_tiles);
    let per = n_tiles.div_ceil(n_chunks);
    let n_chunks = n_tiles.div_ceil(per);

    std::hint::black_box(ol_begin());
    let p = pbuf.as_mut_ptr().cast::<u8>();
    if cols == 1 {
        let (b0, b1) = (nq * ith / nth, nq * (ith + 1) / nth);
        if b0 < b1 {
            // SAFETY: p is a live buffer of plen bytes, aligned to 16.
            unsafe { pack_raw(format, k, 1, 0, b0..b1, &q8[b0..b1], p, plen) }.unwrap();
        }
    } else {
        for c in (ith..cols).step_by(nth) {
            // SAFETY: as above.
            unsafe { pack_raw(format, k, cols, c, 0..nq, &q8, p, plen) }.unwrap();
        }
    }
    let acts = PackedActs::new(format, k, cols, &as_bytes(&pbuf)[..plen]).unwrap();
    for chunk in (ith..n_chunks).step_by(nth) {
        let r0 = chunk * per * 4;
        let r1 = (r0 + per * 4).min(rows);
        // SAFETY: dst is a live buffer of rows * cols floats; this thread owns rows r0..r1.
        unsafe { gemm_raw(level, &weights, &acts, dst.as_mut_ptr(), dst.len(), rows, r0..r1) }.unwrap();
    }
    std::hint::black_box(ol_end());
    std::hint::black_box(&dst);
}
