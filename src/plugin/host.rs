//! The plugin a ggml host keeps ([`Plugin`], the C ABI's `ggml_t2p_plugin`): its settings from the
//! host's environment, the level and layouts ([`super::choose`]), the Q8_K quantizer that gives
//! the host's bits, the load accounting and its line, the sliced repack with the release of the
//! source's pages, the huge-page advice, and the per-matmul work (quantize and pack the
//! activations, run row chunks). The host ([`Host`]) only answers questions about itself: its
//! environment, its types, its own Q8_K quantizer, and where its log goes.

use super::load::{load_line, LineContext, LoadStats, SourceFate};
use super::pages::{self, Release};
use super::plan::{row_chunks, WorkPlan, WORK_ALIGN};
use super::{choose, q8k_probe_input, q8k_rounding_matching, source_block_bytes};
use crate::format::{check_k, BlockQ8K, QK_K};
use crate::hybrid::abi::{ggml_t2p_tensor_view, run_op, OP_CONCAT, OP_GATED_DELTA_NET, OP_GET_ROWS, OP_SSM_CONV};
use crate::kernels::act_pack::{self, ActFormat};
use crate::kernels::{quantize_q8_k, KernelLevel};
use crate::reference::Contract;
use crate::repack::{self, Layout, SourceType};
use crate::Error;
use std::time::Instant;

/// The level of a log line (the values of ggml's `GGML_LOG_LEVEL_INFO` and `_WARN`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum LogLevel {
    /// Information (the enabled, disabled and load lines).
    Info = 2,
    /// A warning (unknown values, fallbacks, a declining plugin, a host type that is not ours).
    Warn = 3,
}

/// What the host says about one of its type ids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostType {
    /// Weights per block.
    pub weights: i64,
    /// Bytes per block.
    pub bytes: usize,
    /// The type's name (`None`: the host has none).
    pub name: Option<Vec<u8>>,
}

/// The host of a plugin: a ggml build, through its shim (or a test).
pub trait Host: Send + Sync {
    /// The value of environment variable `name`; `None` when unset or empty.
    fn env(&self, name: &str) -> Option<Vec<u8>>;
    /// The host's type `id`; `None` when it has none of that id.
    fn host_type(&self, id: u32) -> Option<HostType>;
    /// The host's own Q8_K quantizer: `x.len() == 256 * y.len()`.
    fn quantize_q8k(&self, x: &[f32], y: &mut [BlockQ8K]);
    /// Logs one line (it starts with `ggml-t2p: ` and ends in `'\n'`).
    fn log(&self, level: LogLevel, line: &[u8]);
}

/// Source bytes per repack slice while the source is released ([`Plugin::repack`]).
pub const RELEASE_SLICE_BYTES: usize = 16 << 20;

/// A plugin that runs: its settings, its host and its load accounting.
pub struct Plugin {
    kernel: KernelLevel,
    pq2_layout: Option<Layout>,
    ptq1_layout: Option<Layout>,
    /// The rounding in which the library's Q8_K quantizer gives the host's bits; `None`: the
    /// host's own quantizer runs.
    rounding: Option<Contract>,
    release_source: bool,
    huge_pages: bool,
    /// `GGML_T2P_HYBRID`: the hybrid's float ops run here ([`Plugin::hybrid_op`]).
    hybrid: bool,
    /// `GGML_T2P_EMBED`: `GET_ROWS` on our weights ([`Plugin::get_rows`]), so a tied embedding
    /// is held once.
    embed: bool,
    /// Per hybrid op kind, whether a decline other than a shape stock must run was logged.
    hybrid_warned: [core::sync::atomic::AtomicBool; 4],
    host: Box<dyn Host>,
    stats: LoadStats,
}

impl core::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Plugin")
            .field("kernel", &self.kernel)
            .field("pq2_layout", &self.pq2_layout)
            .field("ptq1_layout", &self.ptq1_layout)
            .field("rounding", &self.rounding)
            .field("release_source", &self.release_source)
            .field("huge_pages", &self.huge_pages)
            .field("hybrid", &self.hybrid)
            .field("embed", &self.embed)
            .finish_non_exhaustive()
    }
}

/// `parts` joined: a log line of raw bytes (environment values are logged as they are).
fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

/// An on/off environment variable: false for 0/off/false/no, true for 1/on/true/yes; unset, empty
/// or anything else gives `def`, with a warning for the last.
fn switch(host: &dyn Host, name: &str, def: bool) -> bool {
    let Some(v) = host.env(name) else {
        return def;
    };
    match &v[..] {
        b"0" | b"off" | b"false" | b"no" => false,
        b"1" | b"on" | b"true" | b"yes" => true,
        _ => {
            let using = if def { b"1" } else { b"0" };
            let line =
                cat(&[b"ggml-t2p: unknown ", name.as_bytes(), b"=", &v, b" (expected 0 or 1), using ", using, b"\n"]);
            host.log(LogLevel::Warn, &line);
            def
        }
    }
}

/// Whether the host's type id of `src` is that ternary type (its block size and bytes,
/// [`source_block_bytes`]): an unrelated type that reuses the id, or an older meaning of it, is
/// left to stock code, with a warning.
fn host_has(host: &dyn Host, src: SourceType) -> bool {
    let (id, what) = match src {
        SourceType::Pq2_0 => (crate::format::GGML_TYPE_PQ2_0, "PQ2_0"),
        SourceType::Ptq1_0 => (crate::format::GGML_TYPE_PTQ1_0, "PTQ1_0"),
    };
    let Some(t) = host.host_type(id) else {
        return false;
    };
    let (weights, bytes) = source_block_bytes(src);
    if t.weights == weights as i64 && t.bytes == bytes {
        return true;
    }
    let name = t.name.as_deref().unwrap_or(b"(null)");
    let line = cat(&[
        format!("ggml-t2p: this ggml's type {id} is ").as_bytes(),
        name,
        format!(
            " (block {}, {} bytes), not {what} (block {weights}, {bytes} bytes): such weights stay on stock code\n",
            t.weights, t.bytes
        )
        .as_bytes(),
    ]);
    host.log(LogLevel::Warn, &line);
    false
}

/// Which rounding of the library's Q8_K quantizer at `kernel` gives the host's Q8_K bits: the
/// probe values ([`q8k_probe_input`]) go through the host's quantizer, and
/// [`q8k_rounding_matching`] compares.
fn probe_rounding(host: &dyn Host, kernel: KernelLevel) -> Option<Contract> {
    let x = q8k_probe_input();
    let fill = BlockQ8K { d: f32::from_bits(0x5a5a_5a5a), qs: [0x5a; QK_K], bsums: [0x5a5a; 16] };
    let mut blocks = vec![fill; x.len() / QK_K];
    host.quantize_q8k(&x, &mut blocks);
    q8k_rounding_matching(kernel, &x, &blocks).ok().flatten()
}

impl Plugin {
    /// Reads the settings from `host`'s environment and chooses, logging through `host` as the
    /// shim always has: `GGML_T2P` (off: `disabled (GGML_T2P=...)`, `None`), the host's types 142
    /// and 143, `GGML_T2P_KERNEL` and `GGML_T2P_PTQ1` ([`choose`]: its warnings, or `declining:
    /// ...` and `None`), `GGML_T2P_RELEASE_SOURCE` (default on), `GGML_T2P_HUGE_PAGES` (default
    /// off), `GGML_T2P_QUANTIZE` (`auto`, the default: the library's quantizer when the probe
    /// finds the host's rounding; `ggml`: the host's own), then the `enabled (...)` line.
    pub fn new(host: Box<dyn Host>) -> Option<Plugin> {
        let h = &*host;
        if !switch(h, "GGML_T2P", true) {
            let v = h.env("GGML_T2P").unwrap_or_default();
            h.log(LogLevel::Info, &cat(&[b"ggml-t2p: disabled (GGML_T2P=", &v, b")\n"]));
            return None;
        }
        // (a type id this ggml uses for another type is said first: it is a fact about this ggml)
        let (pq2, ptq1) = (host_has(h, SourceType::Pq2_0), host_has(h, SourceType::Ptq1_0));
        let text = |name| h.env(name).map(|v| String::from_utf8_lossy(&v).into_owned());
        let c = choose(text("GGML_T2P_KERNEL").as_deref(), text("GGML_T2P_PTQ1").as_deref(), pq2, ptq1);
        for w in &c.warnings {
            h.log(LogLevel::Warn, format!("ggml-t2p: {w}\n").as_bytes());
        }
        if let Some(why) = &c.decline {
            h.log(LogLevel::Warn, format!("ggml-t2p: declining: {why}\n").as_bytes());
            return None;
        }
        let kernel = c.kernel?;
        let release_source = switch(h, "GGML_T2P_RELEASE_SOURCE", true);
        // Off by default: on the 8B model it made the repack 2.7 s slower (likely the kernel
        // compacting memory to fault huge pages; not profiled) and decode no faster beyond the
        // machine's noise.
        let huge_pages = switch(h, "GGML_T2P_HUGE_PAGES", false);
        let hybrid = switch(h, "GGML_T2P_HYBRID", true);
        let embed = switch(h, "GGML_T2P_EMBED", true);
        let (rounding, why) = match h.env("GGML_T2P_QUANTIZE") {
            Some(v) if v == b"ggml" => (None, "GGML_T2P_QUANTIZE=ggml"),
            v => {
                if let Some(v) = v.filter(|v| v != b"auto") {
                    let line =
                        cat(&[b"ggml-t2p: unknown GGML_T2P_QUANTIZE=", &v, b" (expected auto or ggml), using auto\n"]);
                    h.log(LogLevel::Warn, &line);
                }
                (probe_rounding(h, kernel), "the host's quantize_row_q8_K matches neither rounding")
            }
        };
        let taken = |l: Option<Layout>| l.map_or("not in this ggml".to_string(), |l| format!("-> {}", l.name()));
        let q8k = match rounding {
            None => format!("ggml ({why})"),
            Some(Contract::Fused) => "libggml_t2p, fused rounding as the host's".into(),
            Some(Contract::Unfused) => "libggml_t2p, unfused rounding as the host's".into(),
        };
        let hyb = if hybrid { "on" } else { "off (GGML_T2P_HYBRID=0)" };
        let emb = if embed { "on" } else { "off (GGML_T2P_EMBED=0)" };
        let line = format!(
            "ggml-t2p: enabled (libggml_t2p {}, kernel {}; PQ2_0 {}, PTQ1_0 {}; Q8_K by {q8k}; \
             GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS {hyb}; GET_ROWS on ternary weights {emb})\n",
            env!("CARGO_PKG_VERSION"),
            kernel.name(),
            taken(c.pq2_layout),
            taken(c.ptq1_layout)
        );
        h.log(LogLevel::Info, line.as_bytes());
        Some(Plugin {
            kernel,
            pq2_layout: c.pq2_layout,
            ptq1_layout: c.ptq1_layout,
            rounding,
            release_source,
            huge_pages,
            hybrid,
            embed,
            hybrid_warned: Default::default(),
            host,
            stats: LoadStats::default(),
        })
    }

    /// The kernel level every call runs.
    pub fn kernel(&self) -> KernelLevel {
        self.kernel
    }

    /// Thread `ith` of `nth`'s share of a hybrid float op (`GATED_DELTA_NET`, `SSM_CONV`, and the
    /// copies `CONCAT` and F32 `GET_ROWS`) on
    /// ggml's tensors ([`crate::hybrid::abi::run_op`] at this plugin's level).
    ///
    /// # Errors
    /// [`Error::Unsupported`] when `GGML_T2P_HYBRID` is off or the op is one stock must run
    /// (module docs of [`crate::hybrid`]); any other error is a malformed call, logged once per op
    /// kind. Nothing is written on an error, and every thread of one op gets the same answer.
    ///
    /// # Safety
    /// As [`crate::hybrid::abi::run_op`].
    pub unsafe fn hybrid_op(
        &self,
        op: i32,
        srcs: &[ggml_t2p_tensor_view],
        dst: &ggml_t2p_tensor_view,
        ith: i32,
        nth: i32,
    ) -> Result<(), Error> {
        if !self.hybrid {
            return Err(Error::Unsupported);
        }
        // SAFETY: the caller's contract.
        let r = unsafe { run_op(op, self.kernel as i32, srcs, dst, ith, nth) };
        if let Err(e) = r {
            // the op's slot in hybrid_warned (an unknown op shares SSM_CONV's) and its name
            let (kind, name) = match op {
                OP_SSM_CONV => (0, "SSM_CONV"),
                OP_GATED_DELTA_NET => (1, "GATED_DELTA_NET"),
                OP_CONCAT => (2, "CONCAT"),
                OP_GET_ROWS => (3, "GET_ROWS"),
                _ => (0, "an unknown op"),
            };
            if e != Error::Unsupported && !self.hybrid_warned[kind].swap(true, core::sync::atomic::Ordering::Relaxed) {
                let line = format!("ggml-t2p: {name} left to ggml: {e:?} ({} sources)\n", srcs.len());
                self.host.log(LogLevel::Warn, line.as_bytes());
            }
        }
        r
    }

    /// Whether `GET_ROWS` on an `n_rows x k` matrix of `type_id` runs here ([`Plugin::get_rows`]),
    /// so the matrix may live in our buffer type when an embedding lookup uses it.
    ///
    /// # Errors
    /// [`Error::Unsupported`] when `GGML_T2P_EMBED` is off; else as [`Plugin::supports`].
    pub fn get_rows_supported(&self, type_id: i32, n_rows: usize, k: usize) -> Result<(), Error> {
        if !self.embed {
            return Err(Error::Unsupported);
        }
        self.supports(type_id, n_rows, k)
    }

    /// Thread `ith` of `nth`'s share of `GET_ROWS` on an `n_rows x k` matrix of `type_id` repacked
    /// at `w` (`w_size` bytes) by [`Plugin::repack`]: row `i` of `dst` is row `ids[i]` as ggml's
    /// `to_float` of the source type gives it, bit for bit (see `ggml_t2p_plugin_get_rows`).
    ///
    /// # Errors
    /// As [`Plugin::get_rows_supported`], then the checks of the header (nothing written by this
    /// thread on an error).
    ///
    /// # Safety
    /// `w` valid for reads of `w_size` bytes; `ids` and `dst` describe memory valid for their
    /// shapes during the call, this thread's rows of `dst` written by no one else.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn get_rows(
        &self,
        type_id: i32,
        w: *const core::ffi::c_void,
        w_size: usize,
        n_rows: usize,
        k: usize,
        ids: &ggml_t2p_tensor_view,
        dst: &ggml_t2p_tensor_view,
        ith: usize,
        nth: usize,
    ) -> Result<(), Error> {
        self.get_rows_supported(type_id, n_rows, k)?;
        let (st, lay) = self.layout(type_id)?;
        // SAFETY: the caller's contract.
        unsafe { super::embed::get_rows(st, lay, w, w_size, n_rows, k, ids, dst, ith, nth) }
    }

    /// The bytes of the source format of an `n_rows x k` matrix of `type_id` that
    /// [`Plugin::repack`] wrote at `w` (`w_size` bytes), written to `dst` (`dst_size` bytes), as
    /// `ggml_t2p_plugin_unpack` says (the crate's `checked::unpack_checked`).
    ///
    /// # Errors
    /// As [`Plugin::layout`], then as `ggml_t2p_plugin_unpack`.
    ///
    /// # Safety
    /// `w` valid for reads of `w_size` bytes, `dst` for writes of `dst_size` bytes, not aliased.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn unpack(
        &self,
        type_id: i32,
        w: *const core::ffi::c_void,
        w_size: usize,
        n_rows: usize,
        k: usize,
        dst: *mut core::ffi::c_void,
        dst_size: usize,
    ) -> Result<(), Error> {
        let (st, lay) = self.layout(type_id)?;
        // SAFETY: the caller's contract.
        unsafe { crate::checked::unpack_checked(st, lay, w, w_size, n_rows, k, dst, dst_size) }
    }

    /// The layout weights of ggml type `type_id` are repacked into.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a type the plugin does not take (any other id included).
    pub fn layout(&self, type_id: i32) -> Result<(SourceType, Layout), Error> {
        let src = u32::try_from(type_id).ok().and_then(SourceType::from_ggml).ok_or(Error::Unsupported)?;
        let lay = match src {
            SourceType::Pq2_0 => self.pq2_layout,
            SourceType::Ptq1_0 => self.ptq1_layout,
        };
        lay.map(|l| (src, l)).ok_or(Error::Unsupported)
    }

    /// Whether an `n_rows x k` matrix of `type_id` can be repacked and run.
    ///
    /// # Errors
    /// As [`Plugin::layout`] and [`repack::repacked_size`].
    pub fn supports(&self, type_id: i32, n_rows: usize, k: usize) -> Result<(), Error> {
        self.repacked_size(type_id, n_rows, k).map(|_| ())
    }

    /// Bytes of the repacked `n_rows x k` matrix of `type_id`.
    ///
    /// # Errors
    /// As [`Plugin::supports`].
    pub fn repacked_size(&self, type_id: i32, n_rows: usize, k: usize) -> Result<usize, Error> {
        let (src, lay) = self.layout(type_id)?;
        repack::repacked_size(src, lay, n_rows, k)
    }

    /// Repacks a whole matrix and counts it; with the source release on, a source above
    /// [`RELEASE_SLICE_BYTES`] is repacked in slices of whole row tiles, each slice's source pages
    /// released ([`pages::release_source`]) before the next (rows `[r0, r1)` alone give the bytes
    /// at `repacked_size(r0 rows)` of the whole repack: the header's row-tile order), so the
    /// source and its copy are never both resident for more than one slice.
    ///
    /// # Errors
    /// As [`Plugin::layout`] and `ggml_t2p_repack`.
    ///
    /// # Safety
    /// As `ggml_t2p_repack`, and the source must stay mapped and unchanged during the call.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn repack(
        &self,
        type_id: i32,
        src: *const u8,
        src_size: usize,
        n_rows: usize,
        k: usize,
        dst: *mut u8,
        dst_size: usize,
    ) -> Result<(), Error> {
        // SAFETY: the caller's contract.
        unsafe { self.repack_sliced(type_id, src, src_size, n_rows, k, dst, dst_size, RELEASE_SLICE_BYTES) }
    }

    /// [`Plugin::repack`] with slices of `slice_bytes` of source.
    ///
    /// # Safety
    /// As [`Plugin::repack`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn repack_sliced(
        &self,
        type_id: i32,
        src: *const u8,
        src_size: usize,
        n_rows: usize,
        k: usize,
        dst: *mut u8,
        dst_size: usize,
        slice_bytes: usize,
    ) -> Result<(), Error> {
        let (st, lay) = self.layout(type_id)?;
        let total = repack::repacked_size(st, lay, n_rows, k)?;
        let source_bytes = repack::source_size(st, n_rows, k)?;
        if src.is_null() || dst.is_null() {
            return Err(Error::Null);
        }
        if src_size < source_bytes || dst_size < total {
            return Err(Error::BufferSize);
        }
        let row_bytes = source_bytes / n_rows;
        let mut slice = n_rows;
        if self.release_source && source_bytes > slice_bytes {
            let tile = lay.tile_rows();
            slice = tile.max(slice_bytes / row_bytes / tile * tile);
        }
        let (mut nanos, mut release_nanos) = (0u64, 0u64);
        let mut fate = if self.release_source { SourceFate::Kept(Release::TooSmall, 0) } else { SourceFate::Off };
        let mut release = self.release_source; // off after a refusal: the rest is the same memory
        let mut kept = 0; // the source from here on is not released yet
        for r0 in (0..n_rows).step_by(slice) {
            let r1 = n_rows.min(r0 + slice);
            let off = if r0 > 0 { repack::repacked_size(st, lay, r0, k)? } else { 0 };
            let len = repack::repacked_size(st, lay, r1 - r0, k)?;
            if off > total || len > total - off {
                return Err(Error::BufferSize); // (not reached: the row-tile order)
            }
            let t0 = Instant::now();
            // SAFETY: rows [r0, r1) of the source and bytes [off, off + len) of dst lie in the
            // caller's buffers (checked against the whole matrix's sizes above).
            unsafe {
                crate::checked::repack_checked(
                    st,
                    lay,
                    src.add(r0 * row_bytes).cast(),
                    (r1 - r0) * row_bytes,
                    r1 - r0,
                    k,
                    dst.add(off).cast(),
                    len,
                )?;
            }
            let t1 = Instant::now();
            nanos += (t1 - t0).as_nanos() as u64;
            // The source up to here is never read again through this tensor: where it is a
            // read-only shared file mapping (llama.cpp's mmap), its whole pages leave this
            // process's resident set (they refault from the file if the host reads them);
            // anything else is left alone.
            if release {
                let end = r1 * row_bytes;
                // SAFETY: [kept, end) is part of the caller's source, mapped during the call.
                let r = unsafe { pages::release_source(src.add(kept), end - kept) };
                if r.status == Release::Done {
                    kept = r.until - src as usize; // the page around `end` goes with the next slice
                }
                release = fate.add(r);
                release_nanos += t1.elapsed().as_nanos() as u64;
            }
        }
        self.stats.add_tensor(st, total, nanos, release_nanos, fate);
        Ok(())
    }

    /// A new buffer of the plugin: with `GGML_T2P_HUGE_PAGES` on, advised as transparent huge
    /// pages ([`pages::advise_huge_pages`]) before the repack writes it, and counted.
    ///
    /// # Safety
    /// `[base, base + size)` must be memory of this process (or `base` NULL).
    pub unsafe fn new_buffer(&self, base: *mut u8, size: usize) {
        if self.huge_pages {
            // SAFETY: the caller's contract.
            self.stats.add_huge_advice(unsafe { pages::advise_huge_pages(base, size) });
        }
    }

    /// The load line ([`load_line`]) as it stands.
    pub fn load_line(&self) -> String {
        let name = |l: Option<Layout>| l.map_or("unknown", Layout::name);
        let x = LineContext {
            kernel: self.kernel.name(),
            pq2_layout: name(self.pq2_layout),
            ptq1_layout: name(self.ptq1_layout),
            release_source: self.release_source,
            huge_pages: self.huge_pages,
            linux: cfg!(any(target_os = "linux", target_os = "android")),
        };
        load_line(&self.stats.snapshot(), &x, &pages::error_text)
    }

    /// Logs the load line, the first time only (thread-safe).
    pub fn report(&self) {
        if self.stats.first_report() {
            self.host.log(LogLevel::Info, self.load_line().as_bytes());
        }
    }

    /// The work plan of `n_cols` activation columns of length `k` against `type_id` weights.
    fn work_plan(&self, type_id: i32, k: usize, n_cols: usize) -> Result<(Layout, ActFormat, WorkPlan), Error> {
        let (_, lay) = self.layout(type_id)?;
        check_k(k)?;
        let fmt = ActFormat::for_kernel(lay, self.kernel, n_cols)?;
        let packed = act_pack::packed_size(fmt, k, n_cols)?;
        Ok((lay, fmt, WorkPlan::new(k, packed)?))
    }

    /// The plan of one matrix multiplication: `(work_size, n_chunks, chunk_rows)`: the bytes of
    /// work buffer for `n_threads` threads and the row split ([`row_chunks`]).
    ///
    /// # Errors
    /// As [`Plugin::supports`]; [`Error::InvalidArgument`] for no threads.
    pub fn mul_mat_plan(
        &self,
        type_id: i32,
        n_rows: usize,
        k: usize,
        n_cols: usize,
        n_threads: usize,
        numa: bool,
    ) -> Result<(usize, usize, usize), Error> {
        self.supports(type_id, n_rows, k)?;
        let (lay, _, plan) = self.work_plan(type_id, k, n_cols)?;
        let (n_chunks, chunk_rows) = row_chunks(n_rows, lay.tile_rows(), n_threads, numa)?;
        Ok((plan.work_size(n_threads)?, n_chunks, chunk_rows))
    }

    /// Quantizes `n` values (a multiple of 256) to Q8_K: the library's quantizer in the host's
    /// rounding (the same bits as the host's), or the host's own.
    fn quantize(&self, x: &[f32], y: &mut [BlockQ8K]) -> Result<(), Error> {
        match self.rounding {
            Some(contract) => quantize_q8_k(self.kernel, x, y, contract),
            None => {
                self.host.quantize_q8k(x, y);
                Ok(())
            }
        }
    }

    /// Quantizes Q8_K blocks `[b0, b1)` of one row of `k` values into `q8` (those blocks only),
    /// the last block of a row whose `k % 256 != 0` through the zero-padded `pad`.
    fn quantize_blocks(
        &self,
        row: &[f32],
        b0: usize,
        b1: usize,
        q8: &mut [BlockQ8K],
        pad: &mut [f32],
    ) -> Result<(), Error> {
        let full = row.len() / QK_K; // blocks with 256 real values
        let b_full = b1.min(full);
        if b0 < b_full {
            self.quantize(&row[b0 * QK_K..b_full * QK_K], &mut q8[..b_full - b0])?;
        }
        if b1 > full && b0 <= full {
            // the padded block, index `full`
            let tail = row.len() - full * QK_K;
            pad[..tail].copy_from_slice(&row[full * QK_K..]);
            pad[tail..].fill(0.0);
            self.quantize(pad, &mut q8[full - b0..full - b0 + 1])?;
        }
        Ok(())
    }

    /// Thread `ith` of `nth` quantizes and packs its share of the activations into `work`: one
    /// column split by Q8_K block over the threads, or whole columns dealt out (`ith`, `ith + nth`,
    /// ...). `n_cols = ne[0] * ne[1] * ne[2]` columns of `k` floats; column `c = i1 + ne[0] * (i2 +
    /// ne[1] * i3)` starts at `act + i1 * nb[0] + i2 * nb[1] + i3 * nb[2]` bytes.
    ///
    /// # Errors
    /// As [`Plugin::mul_mat_plan`]; [`Error::BufferSize`] for a work buffer smaller than the
    /// plan's for `nth` threads; [`Error::InvalidArgument`] for `ith >= nth`; [`Error::Null`] /
    /// [`Error::Misaligned`] for a column that is NULL or not aligned for floats.
    ///
    /// # Safety
    /// The columns must be valid for reads of `k` floats each; `work` valid for writes of
    /// `work_size` bytes, of which no other thread touches this thread's scratch and pieces
    /// during the call (the threads of one multiplication share `work` this way).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn act_prepare(
        &self,
        type_id: i32,
        k: usize,
        act: *const f32,
        ne: [usize; 3],
        nb: [usize; 3],
        ith: usize,
        nth: usize,
        work: *mut u8,
        work_size: usize,
    ) -> Result<(), Error> {
        let n_cols = ne[0].checked_mul(ne[1]).and_then(|n| n.checked_mul(ne[2])).ok_or(Error::Shape)?;
        let (_, fmt, plan) = self.work_plan(type_id, k, n_cols)?;
        if ith >= nth {
            return Err(Error::InvalidArgument);
        }
        if n_cols == 0 {
            return Ok(());
        }
        if work_size < plan.work_size(nth)? {
            return Err(Error::BufferSize);
        }
        if work.is_null() {
            return Err(Error::Null);
        }
        // SAFETY: inside work (work_size covers the alignment slack and nth scratches).
        let base = unsafe { work.add(work.align_offset(WORK_ALIGN)) };
        // SAFETY: as above; this thread's scratch (64-byte aligned), written by no other thread.
        let scratch = unsafe { base.add(plan.scratch_offset(ith)?) };
        // SAFETY: nq blocks of Q8_K (aligned) at the start of the scratch.
        let q8 = unsafe { core::slice::from_raw_parts_mut(scratch.cast::<BlockQ8K>(), plan.nq) };
        let pad: &mut [f32] = if plan.padded {
            // SAFETY: 256 floats after the Q8_K blocks, inside the scratch (64-byte aligned).
            unsafe { core::slice::from_raw_parts_mut(scratch.add(plan.pad_offset()).cast(), QK_K) }
        } else {
            &mut []
        };
        let mut pack = |c: usize, b0: usize, b1: usize| -> Result<(), Error> {
            let (i1, i2, i3) = (c % ne[0], (c / ne[0]) % ne[1], c / (ne[0] * ne[1]));
            let offset = [(i1, nb[0]), (i2, nb[1]), (i3, nb[2])]
                .iter()
                .try_fold(0usize, |s, &(i, n)| i.checked_mul(n).and_then(|b| s.checked_add(b)))
                .ok_or(Error::Shape)?;
            let row_ptr = act.cast::<u8>().wrapping_add(offset).cast::<f32>();
            // SAFETY: the caller's contract on the columns (floats checks null and alignment).
            let row = unsafe { crate::checked::floats(row_ptr, k)? };
            self.quantize_blocks(row, b0, b1, q8, pad)?;
            // SAFETY: the packed activations at base (plan.packed bytes, 64-byte aligned); this
            // call writes only its own (column, blocks) piece (pack_raw's contract).
            unsafe { act_pack::pack_raw(fmt, k, n_cols, c, b0..b1, &q8[..b1 - b0], base, plan.packed) }
        };
        if n_cols == 1 {
            let (b0, b1) = (plan.nq * ith / nth, plan.nq * (ith + 1) / nth);
            if b0 < b1 {
                pack(0, b0, b1)?;
            }
        } else {
            for c in (ith..n_cols).step_by(nth) {
                pack(c, 0, plan.nq)?;
            }
        }
        Ok(())
    }

    /// Rows `[row_begin, row_end)` of `dst = W . act` for the activations packed into `work`
    /// ([`Plugin::act_prepare`] by every thread, then a barrier): the gemv kernel for one column,
    /// the gemm kernel for more (`dst_col_stride` floats between columns).
    ///
    /// # Errors
    /// As `ggml_t2p_gemm`; [`Error::BufferSize`] for a work buffer without the packed
    /// activations.
    ///
    /// # Safety
    /// `w` valid for reads of [`Plugin::repacked_size`] bytes, `work` of `work_size` bytes (not
    /// written by any thread during the call), `dst` for writes of `dst_len` floats, of which no
    /// other thread touches these rows.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn mul_mat_rows(
        &self,
        type_id: i32,
        w: *const u8,
        n_rows: usize,
        k: usize,
        n_cols: usize,
        work: *const u8,
        work_size: usize,
        dst: *mut f32,
        dst_len: usize,
        dst_col_stride: usize,
        rows: core::ops::Range<usize>,
    ) -> Result<(), Error> {
        let w_size = self.repacked_size(type_id, n_rows, k)?;
        let (lay, _, plan) = self.work_plan(type_id, k, n_cols)?;
        if work.is_null() {
            return Err(Error::Null);
        }
        let off = work.align_offset(WORK_ALIGN);
        if work_size < off.saturating_add(plan.packed) {
            return Err(Error::BufferSize);
        }
        let stride = if n_cols == 1 { 0 } else { dst_col_stride };
        // SAFETY: the caller's contract; the packed activations lie at the aligned start of work.
        unsafe {
            crate::checked::gemm_checked(
                lay,
                self.kernel,
                w.cast(),
                w_size,
                n_rows,
                k,
                work.add(off).cast(),
                plan.packed,
                n_cols,
                dst,
                dst_len,
                stride,
                rows,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{as_bytes, BlockPq2_0, BlockPtq1_0};
    use crate::reference::{quantize_row_q8_k, quantize_row_q8_k_padded, vec_dot_pq2_0_q8_k};
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};

    type Lines = Arc<Mutex<Vec<(LogLevel, Vec<u8>)>>>;

    /// A host: its environment, its types 142/143 (`None`: absent), its quantizer's rounding
    /// (`None`: one of its own that matches neither), and the lines it logged.
    struct Fake {
        env: HashMap<String, Vec<u8>>,
        types: [Option<HostType>; 2],
        rounding: Option<Contract>,
        lines: Lines,
    }

    impl Host for Fake {
        fn env(&self, name: &str) -> Option<Vec<u8>> {
            self.env.get(name).filter(|v| !v.is_empty()).cloned()
        }
        fn host_type(&self, id: u32) -> Option<HostType> {
            self.types[(id as usize).checked_sub(142)?].clone()
        }
        fn quantize_q8k(&self, x: &[f32], y: &mut [BlockQ8K]) {
            quantize_row_q8_k(x, y, self.rounding.unwrap_or(Contract::Fused)).unwrap();
            if self.rounding.is_none() {
                y[0].qs[1] = y[0].qs[1].wrapping_add(1); // not the library's bits
            }
        }
        fn log(&self, level: LogLevel, line: &[u8]) {
            self.lines.lock().unwrap().push((level, line.to_vec()));
        }
    }

    fn ours(id: u32) -> HostType {
        let (weights, bytes) = source_block_bytes(SourceType::from_ggml(id).unwrap());
        HostType {
            weights: weights as i64,
            bytes,
            name: Some(if id == 142 { b"pq2_0".to_vec() } else { b"ptq1_0".to_vec() }),
        }
    }

    fn fake(env: &[(&str, &[u8])]) -> Fake {
        Fake {
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect(),
            types: [Some(ours(142)), Some(ours(143))],
            rounding: Some(Contract::Unfused),
            lines: Lines::default(),
        }
    }

    /// Makes the plugin; its log as text lines, `W:` before warnings.
    fn make(host: Fake) -> (Option<Plugin>, Vec<String>) {
        let lines = host.lines.clone();
        let p = Plugin::new(Box::new(host));
        let text = lines
            .lock()
            .unwrap()
            .iter()
            .map(|(l, t)| format!("{}{}", if *l == LogLevel::Warn { "W:" } else { "" }, String::from_utf8_lossy(t)))
            .collect();
        (p, text)
    }

    fn enabled(pq2: &str, ptq1: &str, q8k: &str) -> String {
        format!(
            "ggml-t2p: enabled (libggml_t2p {}, kernel ref; PQ2_0 {pq2}, PTQ1_0 {ptq1}; Q8_K by {q8k}; \
             GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS on; GET_ROWS on ternary weights on)\n",
            env!("CARGO_PKG_VERSION")
        )
    }

    /// The ref level's layout of `src` with GGML_T2P_PTQ1 unset (PTQ1_0: L64 where this CPU's
    /// best level runs it).
    fn layout_of(src: SourceType) -> String {
        let l64 = cfg!(target_arch = "x86_64") && KernelLevel::Reference.layout_for(src, true) == Layout::L64;
        format!("-> {}", KernelLevel::Reference.layout_for(src, l64).name())
    }

    const UNFUSED: &str = "libggml_t2p, unfused rounding as the host's";

    #[test]
    fn the_settings_and_their_lines() {
        let (pq2, ptq1) = (layout_of(SourceType::Pq2_0), layout_of(SourceType::Ptq1_0));
        let (p, lines) = make(fake(&[("GGML_T2P_KERNEL", b"ref")]));
        let p = p.unwrap();
        assert_eq!(lines, [enabled(&pq2, &ptq1, UNFUSED)]);
        assert!(p.release_source && !p.huge_pages && p.rounding == Some(Contract::Unfused));
        assert_eq!(p.layout(142).map(|l| l.1), Ok(KernelLevel::Reference.layout_for(SourceType::Pq2_0, false)));
        assert_eq!(p.layout(0), Err(Error::Unsupported));
        assert_eq!(p.layout(-1), Err(Error::Unsupported));

        for off in [&b"0"[..], b"off", b"false", b"no"] {
            let (p, lines) = make(fake(&[("GGML_T2P", off)]));
            assert!(p.is_none());
            assert_eq!(lines, [format!("ggml-t2p: disabled (GGML_T2P={})\n", String::from_utf8_lossy(off))]);
        }
        // unknown on/off values warn and keep the default; in this order, raw bytes included
        let ptq1_default = if ptq1 == "-> L64" { "native" } else { "t2p" };
        let (p, lines) = make(fake(&[
            ("GGML_T2P", b"maybe\xff"),
            ("GGML_T2P_KERNEL", b"ref"),
            ("GGML_T2P_RELEASE_SOURCE", b"2"),
            ("GGML_T2P_HUGE_PAGES", b"yes please"),
            ("GGML_T2P_QUANTIZE", b"fast"),
            ("GGML_T2P_PTQ1", b"dense"),
        ]));
        let p = p.unwrap();
        assert!(p.release_source && !p.huge_pages);
        assert_eq!(
            lines,
            [
                "W:ggml-t2p: unknown GGML_T2P=maybe\u{fffd} (expected 0 or 1), using 1\n".to_string(),
                format!("W:ggml-t2p: unknown GGML_T2P_PTQ1=dense (expected t2p or native), using {ptq1_default}\n"),
                "W:ggml-t2p: unknown GGML_T2P_RELEASE_SOURCE=2 (expected 0 or 1), using 1\n".into(),
                "W:ggml-t2p: unknown GGML_T2P_HUGE_PAGES=yes please (expected 0 or 1), using 0\n".into(),
                "W:ggml-t2p: unknown GGML_T2P_QUANTIZE=fast (expected auto or ggml), using auto\n".into(),
                enabled(&pq2, &ptq1, UNFUSED),
            ]
        );
        let host = fake(&[("GGML_T2P", b"maybe\xff")]);
        let lines = host.lines.clone();
        Plugin::new(Box::new(host));
        assert_eq!(lines.lock().unwrap()[0].1, b"ggml-t2p: unknown GGML_T2P=maybe\xff (expected 0 or 1), using 1\n");

        // the toggles; the host's quantizer in each rounding, one of its own, and ggml's on request
        let (p, _) = make(fake(&[
            ("GGML_T2P_KERNEL", b"ref"),
            ("GGML_T2P_RELEASE_SOURCE", b"off"),
            ("GGML_T2P_HUGE_PAGES", b"1"),
        ]));
        let p = p.unwrap();
        assert!(!p.release_source && p.huge_pages && p.hybrid);
        let (p, lines) = make(fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_HYBRID", b"0")]));
        assert!(!p.unwrap().hybrid);
        assert!(
            lines[0].ends_with("; GATED_DELTA_NET, SSM_CONV, CONCAT and F32 GET_ROWS off (GGML_T2P_HYBRID=0); GET_ROWS on ternary weights on)\n"),
            "{lines:?}"
        );
        let (p, lines) = make(fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_EMBED", b"off")]));
        let p = p.unwrap();
        assert!(!p.embed && p.hybrid);
        assert!(
            lines[0].ends_with(" and F32 GET_ROWS on; GET_ROWS on ternary weights off (GGML_T2P_EMBED=0))\n"),
            "{lines:?}"
        );
        assert_eq!(p.get_rows_supported(142, 16, 256), Err(Error::Unsupported));
        let (p, _) = make(fake(&[("GGML_T2P_KERNEL", b"ref")]));
        let p = p.unwrap();
        assert_eq!(p.get_rows_supported(142, 16, 256), Ok(()));
        assert_eq!(p.get_rows_supported(143, 16, 256), Ok(()));
        assert_eq!(p.get_rows_supported(142, 16, 200), Err(Error::Shape));
        assert_eq!(p.get_rows_supported(2, 16, 256), Err(Error::Unsupported));
        let mut host = fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_QUANTIZE", b"auto")]);
        host.rounding = Some(Contract::Fused);
        let (p, lines) = make(host);
        assert_eq!(p.unwrap().rounding, Some(Contract::Fused));
        assert_eq!(lines, [enabled(&pq2, &ptq1, "libggml_t2p, fused rounding as the host's")]);
        let mut host = fake(&[("GGML_T2P_KERNEL", b"ref")]);
        host.rounding = None;
        let (p, lines) = make(host);
        assert_eq!(p.unwrap().rounding, None);
        assert_eq!(lines, [enabled(&pq2, &ptq1, "ggml (the host's quantize_row_q8_K matches neither rounding)")]);
        let (p, lines) = make(fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_QUANTIZE", b"ggml")]));
        assert_eq!(p.unwrap().rounding, None);
        assert_eq!(lines, [enabled(&pq2, &ptq1, "ggml (GGML_T2P_QUANTIZE=ggml)")]);
    }

    #[test]
    fn the_host_types() {
        let (pq2, ptq1) = (layout_of(SourceType::Pq2_0), layout_of(SourceType::Ptq1_0));
        // type 142 is another type here, 143 absent: PQ2_0 stays on stock code, with a warning
        let mut host = fake(&[("GGML_T2P_KERNEL", b"ref")]);
        host.types = [Some(HostType { weights: 256, bytes: 84, name: Some(b"q2_K".to_vec()) }), None];
        let (p, lines) = make(host);
        assert!(p.is_none());
        assert_eq!(
            lines,
            [
                "W:ggml-t2p: this ggml's type 142 is q2_K (block 256, 84 bytes), not PQ2_0 (block 128, 34 bytes): such \
                 weights stay on stock code\n",
                "W:ggml-t2p: declining: this ggml has neither PQ2_0 (type 142) nor PTQ1_0 (type 143); stock code runs\n",
            ]
        );
        let mut host = fake(&[("GGML_T2P_KERNEL", b"ref")]);
        host.types[1] = Some(HostType { weights: 128, bytes: 34, name: None });
        let (p, lines) = make(host);
        let p = p.unwrap();
        assert_eq!(lines[0], "W:ggml-t2p: this ggml's type 143 is (null) (block 128, 34 bytes), not PTQ1_0 (block 128, 28 bytes): such weights stay on stock code\n");
        assert_eq!(lines[1], enabled(&pq2, "not in this ggml", UNFUSED));
        assert_eq!(p.layout(143), Err(Error::Unsupported));
        assert_eq!(p.supports(143, 16, 256), Err(Error::Unsupported));
        let mut host = fake(&[("GGML_T2P_KERNEL", b"ref")]);
        host.types[0] = None;
        assert_eq!(make(host).1, [enabled("not in this ggml", &ptq1, UNFUSED)]);
    }

    /// Deterministic bytes.
    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 24) as u8
            })
            .collect()
    }

    fn pq2_matrix(n_rows: usize, k: usize, seed: u64) -> Vec<BlockPq2_0> {
        let raw = bytes(n_rows * k / 128 * 32, seed);
        raw.chunks(32)
            .enumerate()
            .map(|(i, q)| BlockPq2_0 {
                d: half::f16::from_f32(0.01 + (i % 7) as f32 * 0.003),
                qs: q.try_into().unwrap(),
            })
            .collect()
    }

    fn has_whole_page(b: &[u8]) -> bool {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        let page = pages::os::page_size();
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        let page = 0; // no release: nothing is looked at
        pages::page_interior(b.as_ptr() as usize, b.len(), page).is_some()
    }

    fn ref_plugin(env: &[(&str, &[u8])]) -> (Plugin, Lines) {
        let mut all = vec![("GGML_T2P_KERNEL", &b"ref"[..])];
        all.extend_from_slice(env);
        let host = fake(&all);
        let lines = host.lines.clone();
        (Plugin::new(Box::new(host)).unwrap(), lines)
    }

    /// Every (source, layout) pair the library repacks comes back through `unpack_checked`:
    /// PQ2_0 byte for byte (codes 0..=3, padding tiles included); PTQ1_0 byte for byte where its
    /// bytes are the quantizer's encoding, and any PTQ1_0 bytes back to the same digits and
    /// scales; then through the plugin (`Plugin::unpack`), and its refusals.
    #[test]
    fn unpack_gives_the_source_back() {
        use crate::format::BlockPtq1_0;
        let (p, _) = ref_plugin(&[]);
        for (n_rows, k) in [(4, 128), (20, 384), (36, 1024)] {
            let pq2 = pq2_matrix(n_rows, k, (n_rows + k) as u64);
            let raw = bytes(n_rows * k / 128 * 26, (3 * n_rows + k) as u64);
            let any_ptq1: Vec<BlockPtq1_0> = raw
                .chunks(26)
                .map(|q| BlockPtq1_0 {
                    qs: q[..24].try_into().unwrap(),
                    qh: [q[24], q[25]],
                    d: half::f16::from_f32(0.5),
                })
                .collect();
            let canon: Vec<BlockPtq1_0> =
                any_ptq1.iter().map(|b| BlockPtq1_0::from_digits(b.d, &b.digits()).unwrap()).collect();
            let cases: [(SourceType, &[u8], &[u8]); 3] = [
                (SourceType::Pq2_0, as_bytes(&pq2), as_bytes(&pq2)),
                (SourceType::Ptq1_0, as_bytes(&canon), as_bytes(&canon)),
                (SourceType::Ptq1_0, as_bytes(&any_ptq1), as_bytes(&canon)),
            ];
            for (st, src, want) in cases {
                for lay in Layout::ALL {
                    let Ok(size) = repack::repacked_size(st, lay, n_rows, k) else {
                        assert!(!lay.accepts(st), "{st:?} -> {lay:?}");
                        continue;
                    };
                    let mut w = vec![0u8; size];
                    let mut back = vec![0u8; src.len()];
                    // SAFETY: buffers of the stated sizes.
                    let r = unsafe {
                        crate::checked::repack_checked(
                            st,
                            lay,
                            src.as_ptr().cast(),
                            src.len(),
                            n_rows,
                            k,
                            w.as_mut_ptr().cast(),
                            size,
                        )
                        .and_then(|()| {
                            crate::checked::unpack_checked(
                                st,
                                lay,
                                w.as_ptr().cast(),
                                size,
                                n_rows,
                                k,
                                back.as_mut_ptr().cast(),
                                back.len(),
                            )
                        })
                    };
                    if (st, lay) == (SourceType::Pq2_0, Layout::Ptq1_0x4) {
                        assert_eq!(r, Err(Error::Unsupported));
                        continue;
                    }
                    r.unwrap();
                    // PTQ1_0x4 keeps the file's bytes; the other layouts give the quantizer's
                    let want = if lay == Layout::Ptq1_0x4 { src } else { want };
                    assert_eq!(&back[..], want, "{st:?} -> {lay:?}, {n_rows} x {k}");
                }
            }
            // through the plugin (its own layout), and too small a destination
            let size = p.repacked_size(142, n_rows, k).unwrap();
            let mut w = vec![0u8; size];
            let mut back = vec![0u8; as_bytes(&pq2).len()];
            // SAFETY: buffers of the stated sizes.
            unsafe {
                let src = as_bytes(&pq2);
                p.repack(142, src.as_ptr(), src.len(), n_rows, k, w.as_mut_ptr(), size).unwrap();
                p.unpack(142, w.as_ptr().cast(), size, n_rows, k, back.as_mut_ptr().cast(), back.len()).unwrap();
                assert_eq!(&back[..], as_bytes(&pq2));
                let r = p.unpack(142, w.as_ptr().cast(), size, n_rows, k, back.as_mut_ptr().cast(), back.len() - 1);
                assert_eq!(r, Err(Error::BufferSize));
                let r = p.unpack(142, w.as_ptr().cast(), size - 1, n_rows, k, back.as_mut_ptr().cast(), back.len());
                assert_eq!(r, Err(Error::BufferSize));
                let r = p.unpack(15, w.as_ptr().cast(), size, n_rows, k, back.as_mut_ptr().cast(), back.len());
                assert_eq!(r, Err(Error::Unsupported));
            }
        }
    }

    #[test]
    fn a_sliced_repack_gives_the_whole_repack_s_bytes() {
        let (p, lines) = ref_plugin(&[]);
        let (off, _) = ref_plugin(&[("GGML_T2P_RELEASE_SOURCE", b"0")]);
        let (mut n_tensors, mut n_paged) = (0, 0);
        for (n_rows, k) in [(4, 128), (20, 384), (100, 640), (36, 1024)] {
            let w = pq2_matrix(n_rows, k, (n_rows * k) as u64);
            let src = as_bytes(&w);
            let total = p.repacked_size(142, n_rows, k).unwrap();
            let mut whole = vec![0u8; total];
            // SAFETY: buffers of the stated sizes.
            unsafe {
                crate::checked::repack_checked(
                    SourceType::Pq2_0,
                    p.layout(142).unwrap().1,
                    src.as_ptr().cast(),
                    src.len(),
                    n_rows,
                    k,
                    whole.as_mut_ptr().cast(),
                    total,
                )
            }
            .unwrap();
            // slices of one tile up to the whole matrix, and past it
            for slice_bytes in [1, src.len() / n_rows * 7, src.len() / 3, src.len() - 1, src.len(), usize::MAX] {
                for plugin in [&p, &off] {
                    let mut dst = vec![0xA5u8; total + 7];
                    // SAFETY: buffers of the stated sizes.
                    unsafe {
                        plugin.repack_sliced(
                            142,
                            src.as_ptr(),
                            src.len(),
                            n_rows,
                            k,
                            dst.as_mut_ptr(),
                            dst.len(),
                            slice_bytes,
                        )
                    }
                    .unwrap();
                    assert_eq!(&dst[..total], &whole[..], "{n_rows} x {k}, slices of {slice_bytes} bytes");
                    assert!(dst[total..].iter().all(|&b| b == 0xA5));
                }
                n_tensors += 1;
                // a source with a whole page inside is looked at (and kept: not a file mapping)
                n_paged += usize::from(has_whole_page(src));
            }
            let mut small = vec![0u8; total - 1];
            // SAFETY: buffers of the stated sizes.
            let short = unsafe { p.repack(142, src.as_ptr(), src.len(), n_rows, k, small.as_mut_ptr(), small.len()) };
            assert_eq!(short, Err(Error::BufferSize));
            // SAFETY: as above.
            let short = unsafe { p.repack(142, src.as_ptr(), src.len() - 1, n_rows, k, whole.as_mut_ptr(), total) };
            assert_eq!(short, Err(Error::BufferSize));
        }
        // SAFETY: NULL is refused.
        let null = unsafe { p.repack(142, core::ptr::null(), 34, 4, 128, core::ptr::null_mut(), 136) };
        assert_eq!(null, Err(Error::Null));
        // SAFETY: a type the plugin does not take is refused before any pointer is read.
        let other = unsafe { p.repack(1, core::ptr::null(), 0, 4, 128, core::ptr::null_mut(), 0) };
        assert_eq!(other, Err(Error::Unsupported));
        // the load line: tensors, and (Linux) kept: anonymous memory is not a file mapping
        let line = p.load_line();
        let layout = p.layout(142).unwrap().1.name();
        assert!(
            line.starts_with(&format!("ggml-t2p: {n_tensors} tensors repacked ({n_tensors} PQ2_0 -> {layout}; ")),
            "{line}"
        );
        if cfg!(target_os = "linux") {
            assert!(line.contains("; kernel ref; released 0.0 MiB of file-mapped source (0 tensors) in "), "{line}");
            assert!(n_paged > 0 && n_paged < n_tensors);
            assert!(
                line.ends_with(&format!(" s (tensors kept: {n_paged} not in a read-only shared file mapping)\n")),
                "{line}"
            );
        } else {
            assert!(line.ends_with("; kernel ref; source pages kept (not supported on this OS)\n"), "{line}");
        }
        assert!(off.load_line().ends_with("; kernel ref; source pages kept (GGML_T2P_RELEASE_SOURCE=0)\n"));
        // reported once
        let before = lines.lock().unwrap().len();
        p.report();
        p.report();
        let after = lines.lock().unwrap();
        assert_eq!(after.len(), before + 1);
        assert_eq!(after[before], (LogLevel::Info, line.into_bytes()));
    }

    /// The shim's flow: plan, every thread prepares its share, then every chunk runs.
    #[test]
    fn a_multiplication_through_the_plan_gives_the_reference_bits() {
        let (p, _) = ref_plugin(&[]);
        let (own, _) = {
            let mut host = fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_QUANTIZE", b"ggml")]);
            host.rounding = Some(Contract::Unfused);
            let lines = host.lines.clone();
            (Plugin::new(Box::new(host)).unwrap(), lines)
        };
        let best = KernelLevel::best().map(|_| {
            let host = fake(&[]);
            Plugin::new(Box::new(host)).unwrap()
        });
        let (n_rows, seed) = (36, 7);
        for k in [384, 512] {
            let w = pq2_matrix(n_rows, k, seed + k as u64);
            // columns in a 3-D view with gaps: ne = [2, 3, 2] (12 columns) or one column
            for ne in [[1, 1, 1], [3, 1, 1], [2, 3, 2], [17, 1, 1]] {
                let n_cols = ne[0] * ne[1] * ne[2];
                let nb = [(k + 5) * 4, ne[0] * (k + 5) * 4 + 12, ne[0] * ne[1] * (k + 5) * 4 + 40];
                let x: Vec<f32> =
                    bytes(nb[2] * ne[2], k as u64).iter().map(|&b| (b as f32 - 127.5) / 37.0).collect::<Vec<_>>();
                let x = &x[..nb[2] * ne[2] / 4];
                let col = |c: usize| {
                    let (i1, i2, i3) = (c % ne[0], (c / ne[0]) % ne[1], c / (ne[0] * ne[1]));
                    let at = (i1 * nb[0] + i2 * nb[1] + i3 * nb[2]) / 4;
                    &x[at..at + k]
                };
                // the expected bits: each column quantized in the host's rounding, zero-padded
                let nq = k.div_ceil(QK_K);
                let mut want = vec![0f32; n_cols * n_rows];
                for c in 0..n_cols {
                    let mut q = vec![BlockQ8K::default(); nq];
                    quantize_row_q8_k_padded(col(c), &mut q, Contract::Unfused).unwrap();
                    for r in 0..n_rows {
                        let row = &w[r * k / 128..(r + 1) * k / 128];
                        want[c * n_rows + r] = vec_dot_pq2_0_q8_k(row, &q, Contract::Fused).unwrap();
                    }
                }
                for plugin in [Some(&p), Some(&own), best.as_ref()].into_iter().flatten() {
                    let size = plugin.repacked_size(142, n_rows, k).unwrap();
                    let mut wr = vec![0u8; size];
                    // SAFETY: buffers of the stated sizes.
                    unsafe {
                        plugin.repack(142, as_bytes(&w).as_ptr(), size_of_val(&w[..]), n_rows, k, wr.as_mut_ptr(), size)
                    }
                    .unwrap();
                    for nth in [1, 2, 3, 5] {
                        let (work_size, n_chunks, chunk_rows) =
                            plugin.mul_mat_plan(142, n_rows, k, n_cols, nth, false).unwrap();
                        let mut work = vec![0x77u8; work_size + 1];
                        let work = &mut work[1..]; // not 64-byte aligned
                        for ith in 0..nth {
                            // SAFETY: the columns lie in x; work has the plan's size.
                            unsafe {
                                plugin.act_prepare(142, k, x.as_ptr(), ne, nb, ith, nth, work.as_mut_ptr(), work_size)
                            }
                            .unwrap();
                        }
                        let mut dst = vec![f32::NAN; n_cols * n_rows];
                        for chunk in 0..n_chunks {
                            let rows = chunk * chunk_rows..n_rows.min((chunk + 1) * chunk_rows);
                            // SAFETY: as above; dst holds n_cols columns of n_rows.
                            unsafe {
                                plugin.mul_mat_rows(
                                    142,
                                    wr.as_ptr(),
                                    n_rows,
                                    k,
                                    n_cols,
                                    work.as_ptr(),
                                    work_size,
                                    dst.as_mut_ptr(),
                                    dst.len(),
                                    n_rows,
                                    rows,
                                )
                            }
                            .unwrap();
                        }
                        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&dst), bits(&want), "k {k}, ne {ne:?}, {nth} threads, {:?}", plugin.kernel());
                    }
                }
            }
        }
        // a work buffer short of the plan, a thread past nth, a column not aligned for floats
        let (size, _, _) = p.mul_mat_plan(142, 16, 256, 2, 2, false).unwrap();
        let work = vec![0u8; size];
        let x = vec![1f32; 600];
        let call = |x: *const f32, ith, nth, size| {
            // SAFETY: x holds 2 columns of 256 (or NULL); work has `size` bytes.
            unsafe {
                p.act_prepare(142, 256, x, [2, 1, 1], [1024, 2048, 2048], ith, nth, work.as_ptr().cast_mut(), size)
            }
        };
        assert_eq!(call(x.as_ptr(), 0, 2, size), Ok(()));
        assert_eq!(call(x.as_ptr(), 0, 2, size - 1), Err(Error::BufferSize));
        assert_eq!(call(x.as_ptr(), 2, 2, size), Err(Error::InvalidArgument));
        assert_eq!(call(x.as_ptr().cast::<u8>().wrapping_add(2).cast(), 1, 2, size), Err(Error::Misaligned));
        assert_eq!(call(core::ptr::null(), 0, 2, size), Err(Error::Null));
        assert_eq!(p.mul_mat_plan(142, 16, 256, 2, 0, false), Err(Error::InvalidArgument));
        assert_eq!(p.mul_mat_plan(142, 16, 200, 2, 1, false), Err(Error::Shape));
        let _ = BlockPtq1_0::default();
    }

    /// A tensor view of `v` with ggml's dense strides.
    fn tv(v: &mut [f32], ne: [i64; 4]) -> ggml_t2p_tensor_view {
        let nb = [4, 4 * ne[0], 4 * ne[0] * ne[1], 4 * ne[0] * ne[1] * ne[2]].map(|x| x as u64);
        ggml_t2p_tensor_view { data: v.as_mut_ptr().cast(), type_: 0, ne, nb }
    }

    #[test]
    fn the_hybrid_ops() {
        use crate::hybrid::{split, FloatPath, SsmConv, View};
        let (p, _) = make(fake(&[("GGML_T2P_KERNEL", b"ref")]));
        let p = p.unwrap();
        // A short conv: 4 taps, 20 channels, 3 tokens, as the scalar contract computes it.
        let mut x: Vec<f32> = (0..6 * 20).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut w: Vec<f32> = (0..4 * 20).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut got = vec![f32::NAN; 20 * 3];
        let srcs = [tv(&mut x, [6, 20, 1, 1]), tv(&mut w, [4, 20, 1, 1])];
        let dst = tv(&mut got, [20, 3, 1, 1]);
        for ith in 0..3 {
            // SAFETY: the views describe the vectors above.
            assert_eq!(unsafe { p.hybrid_op(OP_SSM_CONV, &srcs, &dst, ith, 3) }, Ok(()));
        }
        let mut want = vec![0f32; 20 * 3];
        // SAFETY: as above.
        let conv = unsafe {
            SsmConv::new(
                View::contiguous(x.as_ptr(), [6, 20, 1, 1]),
                View::contiguous(w.as_ptr(), [4, 20, 1, 1]),
                View::contiguous(want.as_mut_ptr().cast_const(), [20, 3, 1, 1]),
            )
        }
        .unwrap();
        conv.run(FloatPath::Scalar, split(conv.units(), 1, 0));
        assert_eq!(
            got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            want.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );

        // Declines and malformed calls: nothing written; one warning per op kind for a malformed one.
        let mut f64_dst = tv(&mut got, [20, 3, 1, 1]);
        f64_dst.type_ = 1;
        // SAFETY: as above (nothing is read on these paths).
        unsafe {
            assert_eq!(p.hybrid_op(OP_SSM_CONV, &srcs, &f64_dst, 0, 1), Err(Error::Unsupported));
            assert_eq!(p.hybrid_op(OP_SSM_CONV, &srcs[..1], &dst, 0, 1), Err(Error::InvalidArgument));
            assert_eq!(p.hybrid_op(OP_SSM_CONV, &srcs[..1], &dst, 0, 1), Err(Error::InvalidArgument));
            assert_eq!(p.hybrid_op(OP_SSM_CONV, &srcs, &dst, 3, 3), Err(Error::Range));
            assert_eq!(p.hybrid_op(7, &srcs, &dst, 0, 1), Err(Error::InvalidArgument));
        }
        let host = fake(&[("GGML_T2P_KERNEL", b"ref")]);
        let lines = host.lines.clone();
        let p = Plugin::new(Box::new(host)).unwrap();
        // SAFETY: as above.
        unsafe {
            let _ = p.hybrid_op(OP_SSM_CONV, &srcs[..1], &dst, 0, 1);
            let _ = p.hybrid_op(OP_SSM_CONV, &srcs[..1], &dst, 0, 1);
            let _ = p.hybrid_op(OP_SSM_CONV, &srcs, &f64_dst, 0, 1);
        }
        let warned: Vec<_> =
            lines.lock().unwrap().iter().filter(|(l, _)| *l == LogLevel::Warn).map(|(_, t)| t.clone()).collect();
        assert_eq!(warned, [b"ggml-t2p: SSM_CONV left to ggml: InvalidArgument (1 sources)\n".to_vec()]);

        // GGML_T2P_HYBRID=0: every op declined.
        let (p, _) = make(fake(&[("GGML_T2P_KERNEL", b"ref"), ("GGML_T2P_HYBRID", b"0")]));
        // SAFETY: as above.
        assert_eq!(unsafe { p.unwrap().hybrid_op(OP_SSM_CONV, &srcs, &dst, 0, 1) }, Err(Error::Unsupported));
    }
}
