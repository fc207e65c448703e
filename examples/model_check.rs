//! Runs every ternary matrix of a GGUF model through the plugin path the ggml shim takes and
//! checks each output bit for bit against the reference formula: a model check that fails when
//! one matrix of the file would be left to stock code, or computed wrong.
//!
//! Usage: `cargo run --release --example model_check -- [OPTIONS] MODEL.gguf`
//!
//! - The file's header and tensor infos are read here (GGUF version 3: every metadata value type,
//!   arrays and strings included, is skipped; `general.alignment`, default 32, places the data).
//! - The plugin is [`Plugin`], the object the C ABI's `ggml_t2p_plugin_*` wraps, made with a host
//!   whose environment is this process's (`GGML_T2P_KERNEL=ref|avx2|avxvnni|avx512vnni|amx|...`
//!   picks the level, as in llama.cpp), whose types 142 and 143 are PQ2_0 and PTQ1_0, and whose
//!   own Q8_K quantizer is the reference in the rounding `--rounding` names.
//! - For every tensor of type 142 (PQ2_0) or 143 (PTQ1_0), an `n_rows x k` matrix (`k` = ne0, the
//!   row length; `n_rows` = the product of the other dimensions): `supports` (a refusal counts as
//!   declined: stock code would run it), `repack`, then, as the shim runs a `MUL_MAT`,
//!   `mul_mat_plan`, `act_prepare` on every thread, a barrier, and `mul_mat_rows` per row chunk
//!   handed out by a shared counter, for 1, 7 and 33 activation columns on 1 and 3 threads. Each
//!   output must equal `reference::vec_dot_pq2_0_q8_k` / `vec_dot_ptq1_0_q8_k` (fused, the
//!   fork's formula) of the source row with the column's Q8_K blocks
//!   (`reference::quantize_row_q8_k_padded` in the host's rounding), bit for bit.
//! - `token_embd.weight` is also a `GET_ROWS` source: `get_rows_supported`, then `get_rows` from
//!   the repacked copy for a handful of ids (the first and last row included) on 1 and 3 threads,
//!   against `reference::dequantize_row_pq2_0` / `dequantize_row_ptq1_0` of the source rows.
//!
//! Prints the plugin's log lines, one line per ternary tensor and a summary line,
//! `model_check: 26 ternary tensors: 26 taken, 0 declined, 0 wrong (kernel avx512vnni)`. Exit
//! status 0 when every ternary tensor is taken and every value equal; 1 when one is declined or
//! a value differs (each such tensor named in a `model_check: FAIL` line on stderr), or the file
//! has no ternary tensor; 2 for a bad command line or a file that cannot be read as GGUF.
//!
//! Fault injection, for the checks of the check: `--decline NAME` treats that tensor as declined
//! (as if the plugin had left it to stock code); `--corrupt NAME` flips one weight code (row 0,
//! weight 0) in its repacked bytes before the multiplications. Either makes the run fail.

use ggml_t2p::format::{
    cast_blocks, cast_blocks_mut, position_row, t2p_position, x16_position, BlockL64, BlockPq2_0, BlockPtq1_0,
    BlockPtq1_0x4, BlockQ8K, BlockT2p, BlockX16, QK,
};
use ggml_t2p::hybrid::abi::ggml_t2p_tensor_view;
use ggml_t2p::plugin::host::{Host, HostType, LogLevel};
use ggml_t2p::plugin::Plugin;
use ggml_t2p::reference::{self, Contract};
use ggml_t2p::repack::Layout;
use ggml_t2p::{Error, KernelLevel};
use std::io::Read;
use std::sync::atomic::{AtomicUsize, Ordering};

#[path = "common/mod.rs"]
mod common;

const USAGE: &str = "usage: cargo run --release --example model_check -- [OPTIONS] MODEL.gguf
  Runs every PQ2_0 (type 142) and PTQ1_0 (type 143) matrix of MODEL.gguf through the plugin
  (supports, repack, the shim's plan / act_prepare / mul_mat_rows for 1, 7 and 33 columns on
  1 and 3 threads; GET_ROWS for token_embd.weight) and compares every value bit for bit with
  the reference formula. The level is GGML_T2P_KERNEL's (default: the best this CPU runs).
  Exit status 0: every ternary tensor taken and exact; 1: one declined or wrong, or none in the
  file; 2: bad usage or a file that is not GGUF version 3.
options:
  --rounding fused|unfused  the host's Q8_K rounding (default unfused: the fork's
                            quantize_row_q8_K_ref built without FMA contraction, as
                            ggml-base is for x86's baseline ISA; fused: GCC with FMA)
  --decline NAME            fault injection: treat tensor NAME as declined by the plugin
  --corrupt NAME            fault injection: flip one weight code in NAME's repacked bytes
  --levels                  print the kernel levels this CPU runs (GGML_T2P_KERNEL values)
                            on one line and exit
  --help                    this text";

/// ggml's type id of PQ2_0.
const TYPE_PQ2_0: u32 = 142;
/// ggml's type id of PTQ1_0.
const TYPE_PTQ1_0: u32 = 143;
/// Activation columns of the multiplications (1: the gemv kernels; 7: the gemm kernels; 33: the
/// gemm kernels with a partial batch, on the `amx` level its tiles (`kernels::table::AMX_MIN_COLS`
/// columns and more)).
const COLS: [usize; 3] = [1, 7, 33];
/// Threads of the multiplications and lookups.
const THREADS: [usize; 2] = [1, 3];
/// ggml's type ids of F32 and I32 (`GET_ROWS`' destination and ids).
const GGML_TYPE_F32: i32 = 0;
const GGML_TYPE_I32: i32 = 26;
/// The embedding, checked with `GET_ROWS` too.
const EMBEDDING: &str = "token_embd.weight";

/// A bad command line: the reason and the usage on stderr, exit status 2.
fn usage_error(why: &str) -> ! {
    common::usage_error("model_check", USAGE, why)
}

/// A file that cannot be checked: the reason on stderr, exit status 2.
fn file_error(why: &str) -> ! {
    eprintln!("model_check: {why}");
    std::process::exit(2)
}

// ---------------------------------------------------------------------------------------------
// A 64-byte aligned byte buffer (ggml's buffers are aligned; the repack and kernels expect it)

/// One cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([u8; 64]);

/// `len` bytes at a 64-byte aligned address.
struct Aligned {
    lines: Vec<Line>,
    len: usize,
}

impl Aligned {
    /// `len` bytes of `fill`.
    fn new(len: usize, fill: u8) -> Self {
        Aligned { lines: vec![Line([fill; 64]); len.div_ceil(64)], len }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: the lines hold at least `len` initialized bytes; u8 has alignment 1.
        unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast::<u8>(), self.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and the borrow is unique.
        unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast::<u8>(), self.len) }
    }
}

// ---------------------------------------------------------------------------------------------
// GGUF: the header, the metadata (skipped but for general.alignment), the tensor infos

/// One tensor info of a GGUF file.
struct TensorInfo {
    name: String,
    /// `ne`, innermost (the row length) first.
    dims: Vec<u64>,
    ggml_type: u32,
    /// Bytes from the start of the data section.
    offset: u64,
}

/// A GGUF file read whole: its tensor infos and where the data section starts.
struct Gguf {
    file: Aligned,
    tensors: Vec<TensorInfo>,
    data_start: usize,
}

/// Reads little-endian GGUF fields from a byte slice, every read bounds-checked.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

/// GGUF metadata value types (`gguf_type`).
const GGUF_STRING: u32 = 8;
const GGUF_ARRAY: u32 = 9;

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or_else(|| format!("truncated at byte {} (needs {n} more)", self.pos))?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    /// A length or count that must fit this machine's `usize`.
    fn count(&mut self) -> Result<usize, String> {
        let at = self.pos;
        usize::try_from(self.u64()?).map_err(|_| format!("count too large at byte {at}"))
    }

    fn string(&mut self) -> Result<String, String> {
        let n = self.count()?;
        let at = self.pos;
        let s = self.take(n)?;
        String::from_utf8(s.to_vec()).map_err(|_| format!("a string that is not UTF-8 at byte {at}"))
    }

    /// Bytes of one value of a fixed-size type; `None` for strings and arrays.
    fn fixed_size(vt: u32) -> Result<Option<usize>, String> {
        Ok(Some(match vt {
            0 | 1 | 7 => 1, // u8, i8, bool
            2 | 3 => 2,     // u16, i16
            4..=6 => 4,     // u32, i32, f32
            10..=12 => 8,   // u64, i64, f64
            GGUF_STRING | GGUF_ARRAY => return Ok(None),
            _ => return Err(format!("unknown metadata value type {vt}")),
        }))
    }

    /// Skips one value of type `vt` (arrays of arrays included, to a depth of 8).
    fn skip_value(&mut self, vt: u32, depth: usize) -> Result<(), String> {
        match (vt, Self::fixed_size(vt)?) {
            (_, Some(n)) => self.take(n).map(|_| ()),
            (GGUF_STRING, None) => {
                let n = self.count()?; // (not decoded: a value need not be UTF-8 to be skipped)
                self.take(n).map(|_| ())
            }
            _ => {
                if depth >= 8 {
                    return Err("metadata arrays nested deeper than 8".into());
                }
                let et = self.u32()?;
                let n = self.count()?;
                match Self::fixed_size(et)? {
                    Some(size) => {
                        let bytes = n.checked_mul(size).ok_or("an array too large")?;
                        self.take(bytes).map(|_| ())
                    }
                    None => (0..n).try_for_each(|_| self.skip_value(et, depth + 1)),
                }
            }
        }
    }

    /// An unsigned integer value of type `vt` (u8, u16, u32 or u64), else `None` (skipped).
    fn unsigned(&mut self, vt: u32) -> Result<Option<u64>, String> {
        Ok(Some(match vt {
            0 => u64::from(self.take(1)?[0]),
            2 => u64::from(u16::from_le_bytes(self.take(2)?.try_into().unwrap())),
            4 => u64::from(self.u32()?),
            10 => self.u64()?,
            _ => {
                self.skip_value(vt, 0)?;
                return Ok(None);
            }
        }))
    }
}

impl Gguf {
    /// Reads `path` whole and parses its header.
    fn open(path: &str) -> Result<Gguf, String> {
        let mut f = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        let len = f.metadata().map_err(|e| format!("{path}: {e}"))?.len();
        let len = usize::try_from(len).map_err(|_| format!("{path}: too large"))?;
        let mut file = Aligned::new(len, 0);
        f.read_exact(file.bytes_mut()).map_err(|e| format!("{path}: {e}"))?;
        let (tensors, data_start) = Self::parse(file.bytes()).map_err(|e| format!("{path}: not a GGUF file: {e}"))?;
        Ok(Gguf { file, tensors, data_start })
    }

    /// The tensor infos and the data section's start.
    fn parse(b: &[u8]) -> Result<(Vec<TensorInfo>, usize), String> {
        let mut c = Cursor { b, pos: 0 };
        if c.take(4)? != b"GGUF" {
            return Err("no GGUF magic".into());
        }
        let version = c.u32()?;
        if version != 3 {
            return Err(format!("GGUF version {version} (this reader reads version 3)"));
        }
        let n_tensors = c.count()?;
        let n_kv = c.count()?;
        let mut alignment = 32u64;
        for _ in 0..n_kv {
            let key = c.string()?;
            let vt = c.u32()?;
            if key == "general.alignment" {
                match c.unsigned(vt)? {
                    Some(a) if a > 0 && a.is_power_of_two() => alignment = a,
                    _ => return Err("general.alignment is not a power of two of an unsigned type".into()),
                }
            } else {
                c.skip_value(vt, 0)?;
            }
        }
        let mut tensors = Vec::new();
        for _ in 0..n_tensors {
            let name = c.string()?;
            let n_dims = c.u32()?;
            if !(1..=4).contains(&n_dims) {
                return Err(format!("tensor {name}: {n_dims} dimensions"));
            }
            let dims = (0..n_dims).map(|_| c.u64()).collect::<Result<Vec<_>, _>>()?;
            let ggml_type = c.u32()?;
            let offset = c.u64()?;
            tensors.push(TensorInfo { name, dims, ggml_type, offset });
        }
        let start = (c.pos as u64).div_ceil(alignment) * alignment;
        let data_start = usize::try_from(start).ok().filter(|&s| s <= b.len()).ok_or("no data section")?;
        Ok((tensors, data_start))
    }
}

// ---------------------------------------------------------------------------------------------
// The host: this process's environment, types 142 and 143 as the fork has them, the reference
// Q8_K quantizer in the chosen rounding, and the log on stdout

struct ProcessHost {
    rounding: Contract,
}

impl Host for ProcessHost {
    fn env(&self, name: &str) -> Option<Vec<u8>> {
        let v = std::env::var_os(name)?;
        Some(v.into_encoded_bytes()).filter(|v| !v.is_empty())
    }

    fn host_type(&self, id: u32) -> Option<HostType> {
        let (bytes, name) = match id {
            TYPE_PQ2_0 => (size_of::<BlockPq2_0>(), "pq2_0"),
            TYPE_PTQ1_0 => (size_of::<BlockPtq1_0>(), "ptq1_0"),
            _ => return None,
        };
        Some(HostType { weights: QK as i64, bytes, name: Some(name.as_bytes().to_vec()) })
    }

    fn quantize_q8k(&self, x: &[f32], y: &mut [BlockQ8K]) {
        reference::quantize_row_q8_k(x, y, self.rounding).expect("x.len() == 256 * y.len()");
    }

    fn log(&self, _level: LogLevel, line: &[u8]) {
        print!("{}", String::from_utf8_lossy(line));
    }
}

// ---------------------------------------------------------------------------------------------
// One tensor

/// A ternary matrix of the file.
struct Matrix<'a> {
    name: &'a str,
    type_id: u32,
    n_rows: usize,
    k: usize,
    /// The source bytes (`n_rows * k / 128` blocks), aligned as ggml's data (at least 32).
    src: &'a [u8],
}

impl Matrix<'_> {
    fn type_name(&self) -> &'static str {
        if self.type_id == TYPE_PQ2_0 {
            "PQ2_0"
        } else {
            "PTQ1_0"
        }
    }

    /// Bytes of one source block.
    fn block_bytes(&self) -> usize {
        if self.type_id == TYPE_PQ2_0 {
            size_of::<BlockPq2_0>()
        } else {
            size_of::<BlockPtq1_0>()
        }
    }

    /// The reference dot of row `r` with the Q8_K blocks `q` of one column.
    fn dot(&self, r: usize, q: &[BlockQ8K]) -> f32 {
        let row = &self.src[r * self.row_bytes()..(r + 1) * self.row_bytes()];
        let v = if self.type_id == TYPE_PQ2_0 {
            reference::vec_dot_pq2_0_q8_k(cast_blocks(row).unwrap(), q, Contract::Fused)
        } else {
            reference::vec_dot_ptq1_0_q8_k(cast_blocks(row).unwrap(), q, Contract::Fused)
        };
        v.unwrap()
    }

    /// Row `r` as ggml's `to_float` gives it.
    fn dequantize(&self, r: usize, out: &mut [f32]) {
        let row = &self.src[r * self.row_bytes()..(r + 1) * self.row_bytes()];
        if self.type_id == TYPE_PQ2_0 {
            reference::dequantize_row_pq2_0(cast_blocks(row).unwrap(), out).unwrap()
        } else {
            reference::dequantize_row_ptq1_0(cast_blocks(row).unwrap(), out).unwrap()
        }
    }

    fn row_bytes(&self) -> usize {
        self.k / QK * self.block_bytes()
    }
}

/// A pointer handed to the worker threads (each writes only its own part, as in ggml).
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: the threads below write disjoint parts (their scratch and pieces of the work buffer,
// their rows of dst) and read what no thread writes at the same time: ggml's own sharing.
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

impl<T> Shared<T> {
    /// The pointer (a method, so that a closure captures the whole `Shared`, not its field).
    fn get(self) -> *mut T {
        self.0
    }
}

/// Runs `f(ith)` for `ith` in `0..nth`, on `nth` threads (the calling thread alone for one),
/// and returns the first error.
fn on_threads(nth: usize, f: impl Fn(usize) -> Result<(), Error> + Sync) -> Result<(), Error> {
    if nth == 1 {
        return f(0);
    }
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..nth).map(|ith| s.spawn(move || f(ith))).collect();
        handles.into_iter().try_for_each(|h| h.join().expect("a worker thread panicked"))
    })
}

/// Deterministic activations: `n` floats in about [-1.5, 1.5) from `seed` (xorshift64*).
fn activations(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            let u = (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32;
            (u - 0.5) * 3.0
        })
        .collect()
}

/// A 64-bit hash of a name (FNV-1a), for per-tensor seeds.
fn seed_of(name: &str) -> u64 {
    name.bytes().fold(0xCBF2_9CE4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01B3))
}

/// Flips the code of row 0, weight 0 of the first block of a matrix repacked into `lay`: `Ok`
/// with the layout's old and new value of that weight (codes or digits 0..3).
fn corrupt(lay: Layout, w: &mut [u8]) -> Result<(u8, u8), String> {
    match lay {
        Layout::X16 => {
            let b = &mut cast_blocks_mut::<BlockX16>(&mut w[..size_of::<BlockX16>()]).unwrap()[0];
            let old = b.code(0, 0);
            let (word, byte, slot) = x16_position(0, 0);
            b.qs[word][byte] ^= 1 << (2 * slot);
            Ok((old, b.code(0, 0)))
        }
        Layout::T2p => {
            let b = &mut cast_blocks_mut::<BlockT2p>(&mut w[..size_of::<BlockT2p>()]).unwrap()[0];
            let old = b.code(0, 0);
            let (pair, word, byte, slot) = t2p_position(0, 0);
            b.qs[pair][word][byte] ^= 1 << (2 * slot);
            Ok((old, b.code(0, 0)))
        }
        Layout::Ptq1_0x4 => {
            // element 0 is digit 0 of source byte qs[0] of row 0 (lo[0][0][0]): flip the bits of
            // that byte, one at a time, until the digit changes
            let b = &mut cast_blocks_mut::<BlockPtq1_0x4>(&mut w[..size_of::<BlockPtq1_0x4>()]).unwrap()[0];
            let old = b.row(0).digit(0);
            for bit in (0..8).rev() {
                b.lo[0][0][0] ^= 1 << bit;
                if b.row(0).digit(0) != old {
                    return Ok((old, b.row(0).digit(0)));
                }
                b.lo[0][0][0] ^= 1 << bit;
            }
            Err("no single bit of the first byte changes weight 0".into())
        }
        Layout::L64 => {
            // weight 0 is trit 0 of row 0's group 0 byte: flip its bits until that trit changes
            let b = &mut cast_blocks_mut::<BlockL64>(&mut w[..size_of::<BlockL64>()]).unwrap()[0];
            let old = b.row_codes(0)[0];
            let p = position_row(0);
            for bit in 0..8 {
                b.q[0][p] ^= 1 << bit;
                if b.row_codes(0)[0] != old {
                    return Ok((old, b.row_codes(0)[0]));
                }
                b.q[0][p] ^= 1 << bit;
            }
            Err("no single bit of the first byte changes weight 0".into())
        }
    }
}

/// What became of one tensor.
enum Outcome {
    /// Taken and exact: a description of what was checked.
    Taken(String),
    /// Left to stock code: why.
    Declined(String),
    /// Taken, and some value differs (or a call failed): what.
    Wrong(String),
}

/// `"s"` unless `n == 1`.
fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// Bits of the first difference between `got` and `want` (column-major, `n_rows` per column),
/// and how many values differ.
fn compare(got: &[f32], want: &[f32], n_rows: usize) -> Option<String> {
    let diff: Vec<usize> = (0..want.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    let &first = diff.first()?;
    Some(format!(
        "{} of {} values differ, first column {} row {}: {:e} (0x{:08x}), want {:e} (0x{:08x})",
        diff.len(),
        want.len(),
        first / n_rows,
        first % n_rows,
        got[first],
        got[first].to_bits(),
        want[first],
        want[first].to_bits()
    ))
}

/// The multiplications of one repacked matrix: every column count and thread count.
fn check_mul_mat(p: &Plugin, m: &Matrix, w: &Aligned, rounding: Contract) -> Result<Option<String>, String> {
    let (id, n_rows, k) = (m.type_id as i32, m.n_rows, m.k);
    let max_cols = *COLS.iter().max().unwrap();
    let mut x = activations(max_cols * k, seed_of(m.name));
    if max_cols > 5 {
        x[5 * k..5 * k + 256.min(k)].fill(0.0); // a Q8_K block of zeros (d = 0, bsums unwritten)
    }
    // the expected values: each column quantized in the host's rounding, each row's reference dot
    let nq = k.div_ceil(256);
    let mut want = vec![0f32; max_cols * n_rows];
    let mut q = vec![BlockQ8K::default(); nq];
    for c in 0..max_cols {
        reference::quantize_row_q8_k_padded(&x[c * k..(c + 1) * k], &mut q, rounding).unwrap();
        for r in 0..n_rows {
            want[c * n_rows + r] = m.dot(r, &q);
        }
    }
    for n_cols in COLS {
        for nth in THREADS {
            let batch = format!("{n_cols} column{} on {nth} thread{}", plural(n_cols), plural(nth));
            let at = |what: &str, e: Error| format!("{what} ({batch}): {e:?}");
            let (work_size, n_chunks, chunk_rows) =
                p.mul_mat_plan(id, n_rows, k, n_cols, nth, false).map_err(|e| at("mul_mat_plan", e))?;
            let mut work = Aligned::new(work_size, 0x77);
            let mut dst = vec![f32::NAN; n_cols * n_rows];
            let (wp, dp) = (Shared(work.bytes_mut().as_mut_ptr()), Shared(dst.as_mut_ptr()));
            let xp = Shared(x.as_ptr().cast_mut());
            let ne = [n_cols, 1, 1];
            let nb = [4 * k, 4 * k * n_cols, 4 * k * n_cols];
            // every thread quantizes and packs its share, then (the barrier: the threads join)
            // takes row chunks from a shared counter, as the shim does with ggml's
            // SAFETY: x holds n_cols columns of k floats; work has the plan's size for nth threads
            // and each thread writes only its own share (act_prepare's contract).
            on_threads(nth, |ith| unsafe {
                p.act_prepare(id, k, xp.get().cast_const(), ne, nb, ith, nth, wp.get(), work_size)
            })
            .map_err(|e| at("act_prepare", e))?;
            let next = AtomicUsize::new(0);
            on_threads(nth, |_| loop {
                let chunk = next.fetch_add(1, Ordering::Relaxed);
                if chunk >= n_chunks {
                    return Ok(());
                }
                let rows = chunk * chunk_rows..n_rows.min((chunk + 1) * chunk_rows);
                // SAFETY: w is the repacked matrix; work is no longer written; this chunk's rows
                // of dst (n_cols columns of n_rows) are written by this thread alone.
                unsafe {
                    p.mul_mat_rows(
                        id,
                        w.bytes().as_ptr(),
                        n_rows,
                        k,
                        n_cols,
                        wp.get().cast_const(),
                        work_size,
                        dp.get(),
                        n_cols * n_rows,
                        n_rows,
                        rows,
                    )?
                }
            })
            .map_err(|e| at("mul_mat_rows", e))?;
            if let Some(d) = compare(&dst, &want[..n_cols * n_rows], n_rows) {
                return Ok(Some(format!("MUL_MAT of {batch}: {d}")));
            }
        }
    }
    Ok(None)
}

/// `GET_ROWS` from the repacked matrix against the reference dequantization of the source rows.
fn check_get_rows(p: &Plugin, m: &Matrix, w: &Aligned) -> Result<Option<String>, String> {
    let (id, n_rows, k) = (m.type_id as i32, m.n_rows, m.k);
    let mut ids: Vec<i32> = [0, n_rows - 1, 1, n_rows / 2, 17 % n_rows, n_rows - 2, 0]
        .iter()
        .map(|&r| i32::try_from(r).map_err(|_| "more rows than I32 ids reach".to_string()))
        .collect::<Result<_, _>>()?;
    ids.dedup();
    let n = ids.len();
    let mut want = vec![0f32; n * k];
    for (i, &r) in ids.iter().enumerate() {
        m.dequantize(r as usize, &mut want[i * k..(i + 1) * k]);
    }
    for nth in THREADS {
        let mut dst = vec![f32::NAN; n * k];
        let (ip, dp) = (Shared(ids.as_mut_ptr()), Shared(dst.as_mut_ptr()));
        let (n64, row) = (n as u64, 4 * k as u64);
        let wb = w.bytes();
        on_threads(nth, |ith| {
            let ids = ggml_t2p_tensor_view {
                data: ip.get().cast(),
                type_: GGML_TYPE_I32,
                ne: [n as i64, 1, 1, 1],
                nb: [4, 4 * n64, 4 * n64, 4 * n64],
            };
            let dst = ggml_t2p_tensor_view {
                data: dp.get().cast(),
                type_: GGML_TYPE_F32,
                ne: [k as i64, n as i64, 1, 1],
                nb: [4, row, row * n64, row * n64],
            };
            // SAFETY: the views describe `ids` and `dst` above (alive until the threads join); w
            // is the repacked matrix; each thread writes only its own ids' rows of dst.
            unsafe { p.get_rows(id, wb.as_ptr().cast(), wb.len(), n_rows, k, &ids, &dst, ith, nth) }
        })
        .map_err(|e| format!("get_rows (on {nth} thread{}): {e:?}", plural(nth)))?;
        if let Some(d) = compare(&dst, &want, k) {
            // (columns here are ids, rows the k values of each)
            let on = format!("on {nth} thread{}", plural(nth));
            return Ok(Some(format!("GET_ROWS of ids {ids:?} {on}: {d} (column = id index, row = element)")));
        }
    }
    Ok(None)
}

/// Checks one ternary matrix.
fn check(p: Option<&Plugin>, m: &Matrix, args: &Args) -> Outcome {
    let Some(p) = p else {
        return Outcome::Declined("the plugin declined every weight".into());
    };
    if args.decline.as_deref() == Some(m.name) {
        return Outcome::Declined("--decline".into());
    }
    let id = m.type_id as i32;
    if let Err(e) = p.supports(id, m.n_rows, m.k) {
        return Outcome::Declined(format!("supports: {e:?}"));
    }
    let embedding = m.name == EMBEDDING;
    if embedding {
        if let Err(e) = p.get_rows_supported(id, m.n_rows, m.k) {
            return Outcome::Declined(format!("get_rows_supported: {e:?}"));
        }
    }
    let lay = p.layout(id).expect("supported").1;
    let size = p.repacked_size(id, m.n_rows, m.k).expect("supported");
    let mut w = Aligned::new(size, 0xA5);
    // SAFETY: the source holds the matrix (m.src, sized from the tensor info); w has `size` bytes.
    let r = unsafe { p.repack(id, m.src.as_ptr(), m.src.len(), m.n_rows, m.k, w.bytes_mut().as_mut_ptr(), size) };
    if let Err(e) = r {
        return Outcome::Wrong(format!("repack: {e:?}"));
    }
    let mut what = format!("-> {}", lay.name());
    if args.corrupt.as_deref() == Some(m.name) {
        match corrupt(lay, w.bytes_mut()) {
            Ok((old, new)) => what.push_str(&format!(", corrupted (--corrupt: row 0, weight 0: {old} -> {new})")),
            Err(e) => return Outcome::Wrong(format!("--corrupt: {e}")),
        }
    }
    // the embedding's lookup first, so that --corrupt on it is found by GET_ROWS's own check
    let mut rows_ok = "";
    if embedding {
        match check_get_rows(p, m, &w) {
            Ok(None) => rows_ok = "; GET_ROWS exact",
            Ok(Some(d)) => return Outcome::Wrong(d),
            Err(e) => return Outcome::Wrong(e),
        }
    }
    match check_mul_mat(p, m, &w, args.rounding) {
        Ok(None) => {}
        Ok(Some(d)) => return Outcome::Wrong(d),
        Err(e) => return Outcome::Wrong(e),
    }
    what.push_str(&format!("; MUL_MAT exact ({COLS:?} columns x {THREADS:?} threads){rows_ok}"));
    Outcome::Taken(what)
}

// ---------------------------------------------------------------------------------------------

struct Args {
    path: String,
    rounding: Contract,
    decline: Option<String>,
    corrupt: Option<String>,
}

fn parse_args() -> Args {
    let mut it = std::env::args().skip(1);
    let (mut path, mut rounding, mut decline, mut corrupt) = (None, Contract::Unfused, None, None);
    while let Some(a) = it.next() {
        let mut value = |opt: &str| it.next().unwrap_or_else(|| usage_error(&format!("{opt} needs a value")));
        match a.as_str() {
            "--help" | "-h" => {
                println!("{USAGE}");
                std::process::exit(0)
            }
            "--levels" => {
                let names: Vec<_> = KernelLevel::ALL.iter().filter(|l| l.is_available()).map(|l| l.name()).collect();
                println!("{}", names.join(" "));
                std::process::exit(0)
            }
            "--rounding" => {
                rounding = match value("--rounding").as_str() {
                    "fused" => Contract::Fused,
                    "unfused" => Contract::Unfused,
                    v => usage_error(&format!("--rounding {v}: expected fused or unfused")),
                }
            }
            "--decline" => decline = Some(value("--decline")),
            "--corrupt" => corrupt = Some(value("--corrupt")),
            _ if a.starts_with('-') => usage_error(&format!("unknown option {a}")),
            _ if path.is_some() => usage_error("one model file only"),
            _ => path = Some(a),
        }
    }
    let path = path.unwrap_or_else(|| usage_error("no model file"));
    Args { path, rounding, decline, corrupt }
}

fn main() {
    let args = parse_args();
    let gguf = Gguf::open(&args.path).unwrap_or_else(|e| file_error(&e));
    let data = &gguf.file.bytes()[gguf.data_start..];
    let mut matrices = Vec::new();
    for t in gguf.tensors.iter().filter(|t| t.ggml_type == TYPE_PQ2_0 || t.ggml_type == TYPE_PTQ1_0) {
        let bad = |why: &str| -> ! { file_error(&format!("{}: tensor {}: {why}", args.path, t.name)) };
        let k = usize::try_from(t.dims[0]).unwrap_or_else(|_| bad("ne0 too large"));
        if k == 0 || !k.is_multiple_of(QK) {
            bad(&format!("ne0 = {k} is not a multiple of {QK}"));
        }
        let n_rows = t.dims[1..]
            .iter()
            .try_fold(1usize, |n, &d| usize::try_from(d).ok().and_then(|d| n.checked_mul(d)))
            .unwrap_or_else(|| bad("too many rows"));
        let block = if t.ggml_type == TYPE_PQ2_0 { size_of::<BlockPq2_0>() } else { size_of::<BlockPtq1_0>() };
        let bytes = (k / QK).checked_mul(block).and_then(|b| b.checked_mul(n_rows)).unwrap_or_else(|| bad("too large"));
        let start = usize::try_from(t.offset).unwrap_or_else(|_| bad("offset too large"));
        let src = start
            .checked_add(bytes)
            .and_then(|end| data.get(start..end))
            .unwrap_or_else(|| bad(&format!("{bytes} bytes at data offset {start} run past the end of the file")));
        if !(src.as_ptr() as usize).is_multiple_of(align_of::<BlockPq2_0>()) {
            bad(&format!("data offset {start} is not aligned for its blocks"));
        }
        matrices.push(Matrix { name: &t.name, type_id: t.ggml_type, n_rows, k, src });
    }
    for (opt, name) in [("--decline", &args.decline), ("--corrupt", &args.corrupt)] {
        if let Some(n) = name {
            if !matrices.iter().any(|m| m.name == n.as_str()) {
                usage_error(&format!("{opt} {n}: {} has no ternary tensor of that name", args.path));
            }
        }
    }
    println!("model_check: {}: {} tensors, {} ternary", args.path, gguf.tensors.len(), matrices.len());
    let plugin = Plugin::new(Box::new(ProcessHost { rounding: args.rounding }));
    let (mut taken, mut declined, mut wrong) = (0, 0, 0);
    let mut failures = Vec::new();
    for m in &matrices {
        let head = format!("{} {} {} x {}", m.name, m.type_name(), m.n_rows, m.k);
        match check(plugin.as_ref(), m, &args) {
            Outcome::Taken(what) => {
                taken += 1;
                println!("  {head}: taken {what}");
            }
            Outcome::Declined(why) => {
                declined += 1;
                println!("  {head}: DECLINED ({why})");
                failures.push(format!("{} declined ({why}): stock code would run it", m.name));
            }
            Outcome::Wrong(why) => {
                wrong += 1;
                println!("  {head}: WRONG: {why}");
                failures.push(format!("{} wrong: {why}", m.name));
            }
        }
    }
    let level = plugin.as_ref().map_or("none: the plugin declined".to_string(), |p| p.kernel().name().to_string());
    let q8k = if args.rounding == Contract::Fused { "fused" } else { "unfused" };
    println!(
        "model_check: {} ternary tensors: {taken} taken, {declined} declined, {wrong} wrong (kernel {level}; host \
         Q8_K rounding {q8k})",
        matrices.len()
    );
    for f in &failures {
        eprintln!("model_check: FAIL: {f}");
    }
    if matrices.is_empty() {
        eprintln!("model_check: FAIL: {} has no PQ2_0 or PTQ1_0 tensor", args.path);
    }
    if !failures.is_empty() || matrices.is_empty() {
        std::process::exit(1);
    }
}
