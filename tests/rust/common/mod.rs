//! Shared test helpers: golden-file reading, deterministic data, and running every kernel level
//! the machine has.
#![allow(dead_code)]

use ggml_t2p::format::{as_bytes, cast_blocks, BlockPq2_0, BlockPtq1_0, BlockQ8K, Pod, QK};
use ggml_t2p::reference::{quantize_row_q8_k_padded, Contract};
use ggml_t2p::repack::Layout;
use ggml_t2p::KernelLevel;
use half::f16;
use std::path::PathBuf;

/// The golden vectors: `tests/golden/` of this repository, or `$GGML_T2P_GOLDEN_DIR` when set
/// (another copy, e.g. inside an emulator). Missing is a failure.
pub fn golden_dir() -> PathBuf {
    let dir = match std::env::var_os("GGML_T2P_GOLDEN_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden"),
    };
    assert!(dir.is_dir(), "golden vector directory {} is missing (set GGML_T2P_GOLDEN_DIR)", dir.display());
    dir
}

/// A little-endian cursor over a golden file, after checking its header.
pub struct Golden {
    bytes: Vec<u8>,
    pos: usize,
    pub count: usize,
    pub name: String,
}

impl Golden {
    pub fn open(name: &str, magic: &[u8; 4]) -> Golden {
        let path = golden_dir().join(name);
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        assert!(bytes.len() >= 12, "{name}: truncated header");
        assert_eq!(&bytes[0..4], magic, "{name}: bad magic");
        let version = u32::from_le_bytes(bytes[4..8].try_into().unwrap());
        assert_eq!(version, 1, "{name}: unknown version");
        let count = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        Golden { bytes, pos: 12, count, name: name.to_string() }
    }
    pub fn take(&mut self, n: usize) -> &[u8] {
        assert!(self.pos + n <= self.bytes.len(), "{}: truncated at byte {}", self.name, self.pos);
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        s
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take(4).try_into().unwrap())
    }
    pub fn f32s(&mut self, n: usize) -> Vec<f32> {
        self.take(4 * n).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }
    /// `n` blocks of `T`, copied into aligned storage.
    pub fn blocks<T: Pod + Default>(&mut self, n: usize) -> Vec<T> {
        let raw = self.take(n * std::mem::size_of::<T>()).to_vec();
        let mut v = vec![T::default(); n];
        bytes_mut(&mut v).copy_from_slice(&raw);
        v
    }
    pub fn finish(&self) {
        assert_eq!(self.pos, self.bytes.len(), "{}: trailing bytes", self.name);
    }
}

/// Mutable bytes of Pod blocks.
pub fn bytes_mut<T: Pod>(v: &mut [T]) -> &mut [u8] {
    let len = std::mem::size_of_val(v);
    // SAFETY: Pod blocks have no padding and accept any bit pattern.
    unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), len) }
}

/// A block viewed from bytes, for comparisons.
pub fn same_bytes<T: Pod>(a: &[T], b: &[T]) -> bool {
    as_bytes(a) == as_bytes(b)
}

/// Every kernel level this machine can run, portable first; `GGML_T2P_TEST_LEVELS=a,b` (level
/// names) narrows that to the named ones (for slow emulators: the reference *formula* is still
/// what every output is held against). A named level the CPU lacks is a failure, not a skip.
pub fn levels() -> Vec<KernelLevel> {
    let all: Vec<KernelLevel> = KernelLevel::ALL.into_iter().filter(|l| l.is_available()).collect();
    match narrowing() {
        Some(names) => names
            .split(',')
            .map(|n| {
                let l = KernelLevel::from_name(n.trim())
                    .unwrap_or_else(|| panic!("GGML_T2P_TEST_LEVELS: unknown level {n}"));
                assert!(l.is_available(), "GGML_T2P_TEST_LEVELS: this CPU cannot run {n}");
                l
            })
            .collect(),
        None => all,
    }
}

/// The level names of `GGML_T2P_TEST_LEVELS` when it is set and not empty (it then narrows
/// [`levels`]).
fn narrowing() -> Option<String> {
    std::env::var("GGML_T2P_TEST_LEVELS").ok().filter(|v| !v.is_empty())
}

/// Whether `GGML_T2P_TEST_LEVELS` narrows [`levels`] (so the reference level may be left out).
pub fn levels_narrowed() -> bool {
    narrowing().is_some()
}

/// Every kernel level this machine can run on `layout`, portable first.
pub fn levels_for(layout: Layout) -> Vec<KernelLevel> {
    levels().into_iter().filter(|l| l.runs(layout)).collect()
}

/// Names of the (layout, level) pairs this machine runs, for the summary lines.
pub fn level_names() -> Vec<String> {
    Layout::ALL
        .iter()
        .flat_map(|&lay| levels_for(lay).into_iter().map(move |l| format!("{}/{}", lay.name(), l.name())))
        .collect()
}

mod rng;
pub use rng::Rng;

/// Random PQ2_0 rows: codes 0..=3 (weighted toward ternary), scales around 2^-6.
pub fn random_pq2_0(rng: &mut Rng, n_rows: usize, k: usize) -> Vec<BlockPq2_0> {
    (0..n_rows * k / QK)
        .map(|_| {
            let codes: [u8; 128] = std::array::from_fn(|_| if rng.below(16) == 0 { 3 } else { rng.below(3) as u8 });
            BlockPq2_0::from_codes(f16::from_f32(rng.unit() * 0.05), &codes)
        })
        .collect()
}

/// Random PTQ1_0 blocks: any bytes (every byte decodes to digits 0..=2), scales around 2^-6.
pub fn random_ptq1_0(rng: &mut Rng, n_rows: usize, k: usize) -> Vec<BlockPtq1_0> {
    (0..n_rows * k / QK)
        .map(|_| {
            let mut b = BlockPtq1_0 { d: f16::from_f32(rng.unit() * 0.05), ..Default::default() };
            b.qs.iter_mut().for_each(|q| *q = rng.next() as u8);
            b.qh.iter_mut().for_each(|q| *q = rng.next() as u8);
            b
        })
        .collect()
}

/// `n_cols` activation rows of length `k`, quantized with the reference quantizer (fused), with
/// every third 256-block zeroed so some blocks have `d = 0` and stale `bsums` (0x5A5A).
pub fn random_acts(rng: &mut Rng, n_cols: usize, k: usize) -> Vec<BlockQ8K> {
    let per = k.div_ceil(256);
    let mut out = vec![BlockQ8K::default(); n_cols * per];
    bytes_mut(&mut out).fill(0x5A);
    for j in 0..n_cols {
        let mut x: Vec<f32> = (0..k).map(|_| rng.unit() * 3.0).collect();
        for (b, chunk) in x.chunks_mut(256).enumerate() {
            if (j + b) % 3 == 2 {
                chunk.fill(0.0);
            }
        }
        quantize_row_q8_k_padded(&x, &mut out[j * per..(j + 1) * per], Contract::Fused).unwrap();
    }
    out
}

/// View helper re-export so tests can cast byte files.
pub fn view<T: Pod>(b: &[u8]) -> &[T] {
    cast_blocks(b).unwrap()
}
