//! Float kernels for the Gated-DeltaNet hybrid's own ops: the fused gated delta rule
//! (`GGML_OP_GATED_DELTA_NET`) and the depthwise short convolution (`GGML_OP_SSM_CONV`) of the
//! linear-attention blocks in `qwen35` models (Bonsai 2), which ggml-cpu computes with generic code.
//!
//! # Numerics: the contract (docs/numerics.md, "The hybrid's float ops")
//! These are float ops, so "exact" means one fixed order of rounded operations, the same at every
//! kernel level ([`FloatPath`]), thread count and ubatch split; [`mod@reference`] writes it out in
//! scalar Rust and every SIMD path reproduces it bit for bit.
//!
//! **Gated delta rule**, per sequence `s`, value head `h` and token `t`, with the state `M` (`S x S`
//! floats, stored as ggml stores it: `M[j][i] = S[i][j]`, row `j` contiguous), `e = expf(g)` (the
//! host's `expf`, one scalar per head and token), `scale = 1 / sqrtf(S)`, for every row `j`:
//! ```text
//! r      = M[j] * e                       (elementwise, rounded)
//! d      = dot(r, k)                      (the fixed order below)
//! delta  = (v[j] - d) * beta
//! r      = fma(k, delta, r)               (elementwise, one rounding)
//! out[j] = dot(r, q) * scale;  M[j] = r
//! ```
//! `dot(x, y)` over `S` (a multiple of 64) elements: 16 lanes times 4 accumulators,
//! `acc[a][l] = fma(x[i], y[i], acc[a][l])` for `i = 64c + 16a + l`, `c = 0, 1, ..` in order from
//! `+0.0`; then `acc[0] + acc[2]`, `acc[1] + acc[3]`, their sum; then the 16 lanes as a tree,
//! lane `l` plus lane `l + 8`, then `+ 4`, `+ 2`, `+ 1`. That is the order of ggml-cpu's
//! `ggml_vec_dot_f32` when ggml is built with AVX-512 (`GGML_F32_STEP` 64, four 16-lane sums,
//! `GGML_F32x16_REDUCE`), and the rest is the order of ggml-cpu's `gated_delta_net` (its scale,
//! `ggml_vec_mad_f32` as an FMA, `expf`, `(v - sum) * beta`, `sum * scale`; fork `q2_0-prs`,
//! ggml-cpu/ops.cpp and vec.cpp): against stock built with AVX-512 the outputs are the same bits;
//! against stock built for AVX2 or NEON (8- or 4-lane sums) only the dot's order differs.
//! Rows are independent of each other, so a row's tokens run back to back while the rows of a
//! block stay in L1 (the state is read and written once per ubatch, not once per token). Between
//! two tokens of a ubatch a row is kept as `M[j] * e` of the next token, the product that token's
//! first step computes, so each element is multiplied once per token (the same rounded values;
//! the state written at the end of the ubatch is `M`).
//!
//! **Short conv**, per sequence, token `t` and channel `c`, kernel width `n` (`d_conv`):
//! `y[t][c] = fma(x[c][t+n-1], w[c][n-1], .. fma(x[c][t], w[c][0], +0.0))`: the taps in order, one
//! FMA each (ggml-cpu's loop `sumf += s * c` where GCC contracts it into FMAs, as in a native build
//! on Zen 5; where it vectorizes the products instead, as in a native build on an AMX Xeon, stock
//! rounds each product first: docs/numerics.md section 7).
//!
//! # What is declined (stock runs)
//! Anything but F32; a gate per element (`g` with `ne0 == S`, "KDA"); more than one state slot
//! (`K > 1`, kept snapshots); `S` not 64, 128 or 256; rows that are not contiguous; a destination
//! that overlaps a source; a conv wider than [`MAX_CONV`]. [`Error::Unsupported`] says "decline".

pub mod abi;
pub mod concat;
pub mod reference;
pub mod rows;

#[cfg(target_arch = "aarch64")]
mod neon;
#[cfg(target_arch = "x86_64")]
mod x86;

use crate::error::Error;
use crate::kernels::KernelLevel;
use core::ops::Range;

/// Widest short conv ([`SsmConv`]) handled: `d_conv <= 8` (Bonsai 2: 4).
pub const MAX_CONV: usize = 8;
/// State rows per work unit of [`GatedDeltaNet`]: a 128-wide head's 32 rows are 16 KiB, so a unit's
/// rows stay in L1 while its tokens run.
pub const GDN_UNIT_ROWS: usize = 32;
/// How many tokens ahead [`GatedDeltaNet`] prefetches a token's key, query, values and outputs
/// (x86-64).
#[cfg(target_arch = "x86_64")]
const GDN_PF_TOKENS: usize = 4;
/// Channels per work unit of [`SsmConv`] (one 16-lane vector).
pub const CONV_UNIT_CHANNELS: usize = 16;
/// Tokens per tile of [`SsmConv`]: the inputs of 16 channels x (64 + 7) tokens are 4.5 KiB.
pub const CONV_TILE_TOKENS: usize = 64;
/// How many units ahead the AVX-512 conv prefetches the inputs and output lines of the 16 tokens
/// it is at.
#[cfg(target_arch = "x86_64")]
const CONV_PF_UNITS: usize = 4;

/// Which float SIMD code runs; every path gives the same bits (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FloatPath {
    /// Portable scalar Rust ([`mod@reference`]).
    Scalar,
    /// AVX2 + FMA (the `avx2` and `avxvnni` levels): a 16-lane sum is two ymm.
    Avx2,
    /// AVX-512F (the `avx512vnni` and `amx` levels): a 16-lane sum is one zmm.
    Avx512,
    /// NEON (the `dotprod` and `i8mm` levels): a 16-lane sum is four q registers.
    Neon,
}

impl FloatPath {
    /// The float path of a kernel level (its CPU features include the path's).
    pub fn for_level(level: KernelLevel) -> FloatPath {
        match level {
            KernelLevel::Reference => FloatPath::Scalar,
            KernelLevel::Avx2 | KernelLevel::AvxVnni => FloatPath::Avx2,
            KernelLevel::Avx512Vnni | KernelLevel::Amx => FloatPath::Avx512,
            KernelLevel::Dotprod | KernelLevel::I8mm => FloatPath::Neon,
        }
    }
}

/// A strided F32 tensor as ggml describes one: `ne` elements and `nb` byte strides per dimension.
#[derive(Clone, Copy, Debug)]
pub struct View {
    /// First element.
    pub data: *const f32,
    /// Elements per dimension (ggml's `ne`).
    pub ne: [usize; 4],
    /// Byte stride per dimension (ggml's `nb`); `nb[0]` must be 4 (contiguous rows).
    pub nb: [usize; 4],
}

impl View {
    /// A contiguous view of `ne` elements at `data`.
    pub fn contiguous(data: *const f32, ne: [usize; 4]) -> View {
        let nb = [4, 4 * ne[0], 4 * ne[0] * ne[1], 4 * ne[0] * ne[1] * ne[2]];
        View { data, ne, nb }
    }

    /// Elements in the view.
    fn len(&self) -> Option<usize> {
        self.ne.iter().try_fold(1usize, |a, &n| a.checked_mul(n))
    }

    /// Whether rows are contiguous, every stride is a whole number of floats, the data is aligned
    /// for `f32` and the view's extent fits the address space (a view that fails any of these is
    /// declined: ggml never makes one).
    fn rows_contiguous(&self) -> bool {
        self.nb[0] == 4 && self.floats_ok()
    }

    /// Whether every stride is a whole number of floats, the data is aligned for `f32` and the
    /// view's extent fits the address space, whatever the element stride (a transposed view
    /// passes).
    fn floats_ok(&self) -> bool {
        let extent_fits = self.len() == Some(0) || self.span().is_some();
        self.nb.iter().all(|&b| b % 4 == 0) && (self.data as usize).is_multiple_of(4) && extent_fits
    }

    /// Whether the view is dense (rows follow each other, no gaps): ggml's `ggml_is_contiguous`.
    fn dense(&self) -> bool {
        let mut want = 4usize;
        for d in 0..4 {
            if self.nb[d] != want {
                return false;
            }
            match want.checked_mul(self.ne[d]) {
                Some(w) => want = w,
                None => return d == 3,
            }
        }
        true
    }

    /// The bytes the view spans: `[start, end)` addresses, `None` for an empty view or overflow.
    fn span(&self) -> Option<(usize, usize)> {
        if self.len()? == 0 {
            return None;
        }
        let mut last = 0usize;
        for d in 0..4 {
            last = last.checked_add((self.ne[d] - 1).checked_mul(self.nb[d])?)?;
        }
        let start = self.data as usize;
        Some((start, start.checked_add(last)?.checked_add(4)?))
    }

    /// Float offset of element `(i0, i1, i2, i3)` (strides are whole floats).
    #[inline(always)]
    fn at(&self, i1: usize, i2: usize, i3: usize) -> usize {
        (i1 * self.nb[1] + i2 * self.nb[2] + i3 * self.nb[3]) / 4
    }
}

/// Whether two byte ranges overlap.
fn overlaps(a: Option<(usize, usize)>, b: Option<(usize, usize)>) -> bool {
    matches!((a, b), (Some((a0, a1)), Some((b0, b1))) if a0 < b1 && b0 < a1)
}

/// `[start, end)` of unit range `i` of `n` units split over `parts` parts (the first `n % parts`
/// parts take one more unit).
pub fn split(n: usize, parts: usize, i: usize) -> Range<usize> {
    let parts = parts.max(1);
    let (q, r) = (n / parts, n % parts);
    let start = i * q + i.min(r);
    start..(start + q + usize::from(i < r)).min(n)
}

/// One `GGML_OP_GATED_DELTA_NET` with its checked shapes: `q`, `k` (`S x H_k x T x n_q3`), `v`
/// (`S x H x T x n_seqs`), `g` and `beta` (`1 x H x T x n_seqs`, dense), `state`
/// (`S*S*H x 1 x n_seqs`, dense) and `dst` (`S*H*T*n_seqs` outputs, then `S*S*H*n_seqs` new state).
#[derive(Clone, Copy, Debug)]
pub struct GatedDeltaNet {
    q: View,
    k: View,
    v: View,
    g: View,
    beta: View,
    state: View,
    dst: *mut f32,
    s: usize,
    h: usize,
    n_tokens: usize,
    n_seqs: usize,
}

// SAFETY: the pointers are only read (sources) or written in disjoint ranges per work unit (dst);
// the caller of `new` promises they stay valid while the op runs.
unsafe impl Send for GatedDeltaNet {}
// SAFETY: as above.
unsafe impl Sync for GatedDeltaNet {}

impl GatedDeltaNet {
    /// Checks an op (ggml's sources in order `q, k, v, g, beta, state`) and the destination's
    /// `dst_len` floats. [`Error::Unsupported`]: a shape or layout stock must run (module docs);
    /// [`Error::Shape`]: the sources disagree; [`Error::Null`]: a null pointer.
    ///
    /// # Safety
    /// Every view must describe readable memory and `dst` `dst_len` writable floats, valid while
    /// [`GatedDeltaNet::run`] runs.
    pub unsafe fn new(srcs: [View; 6], dst: *mut f32, dst_len: usize) -> Result<Self, Error> {
        let [q, k, v, g, beta, state] = srcs;
        if srcs.iter().any(|x| x.data.is_null()) || dst.is_null() {
            return Err(Error::Null);
        }
        let [s, h, n_tokens, n_seqs] = v.ne;
        if !matches!(s, 64 | 128 | 256) || !srcs.iter().all(View::rows_contiguous) {
            return Err(Error::Unsupported);
        }
        if h == 0 || n_tokens == 0 || n_seqs == 0 {
            return Err(Error::Unsupported);
        }
        if g.ne[0] != 1 || !g.dense() || !beta.dense() || !state.dense() || state.ne[1] != 1 {
            return Err(Error::Unsupported); // KDA gates, kept snapshots (K > 1), gaps
        }
        for x in [q, k] {
            if x.ne[0] != s || x.ne[2] != n_tokens || x.ne[1] == 0 || x.ne[3] == 0 {
                return Err(Error::Shape);
            }
            if h % x.ne[1] != 0 || n_seqs % x.ne[3] != 0 {
                return Err(Error::Shape);
            }
        }
        if g.ne[1..] != [h, n_tokens, n_seqs] || beta.ne != [1, h, n_tokens, n_seqs] {
            return Err(Error::Shape);
        }
        let state_len = s.checked_mul(s).and_then(|x| x.checked_mul(h)).ok_or(Error::Shape)?;
        if state.ne != [state_len, 1, n_seqs, 1] {
            return Err(Error::Shape);
        }
        let out_len = [h, n_tokens, n_seqs].iter().try_fold(s, |a, &b| a.checked_mul(b)).ok_or(Error::Shape)?;
        let need = state_len.checked_mul(n_seqs).and_then(|x| x.checked_add(out_len)).ok_or(Error::Shape)?;
        if dst_len < need {
            return Err(Error::Shape);
        }
        let d = dst as usize;
        if !d.is_multiple_of(4) {
            return Err(Error::Unsupported);
        }
        let dspan = need.checked_mul(4).and_then(|b| d.checked_add(b)).map(|e| (d, e)).ok_or(Error::Shape)?;
        let dspan = Some(dspan);
        if srcs.iter().any(|x| overlaps(x.span(), dspan)) {
            return Err(Error::Unsupported);
        }
        Ok(GatedDeltaNet { q, k, v, g, beta, state, dst, s, h, n_tokens, n_seqs })
    }

    /// Work units: `n_seqs * H * S / 32` blocks of [`GDN_UNIT_ROWS`] state rows. Any split of
    /// them over threads gives the same bits.
    pub fn units(&self) -> usize {
        self.n_seqs * self.h * (self.s / GDN_UNIT_ROWS)
    }

    /// Runs work units `units` with `path` (which the CPU must run: the caller checked the level).
    pub fn run(&self, path: FloatPath, units: Range<usize>) {
        let per_head = self.s / GDN_UNIT_ROWS;
        for u in units.start..units.end.min(self.units()) {
            let (blk, hs) = (u % per_head, u / per_head);
            // SAFETY: `new` checked every shape against the views and the destination's length,
            // and units write disjoint rows.
            unsafe { self.unit(path, hs % self.h, hs / self.h, blk * GDN_UNIT_ROWS) };
        }
    }

    /// State rows `j0 .. j0 + 32` of head `h`, sequence `sq`, over every token.
    ///
    /// # Safety
    /// `self` was checked by `new`; no other thread writes these rows.
    unsafe fn unit(&self, path: FloatPath, h: usize, sq: usize, j0: usize) {
        let (s, t_n) = (self.s, self.n_tokens);
        let (iq1, ik1) = (h % self.q.ne[1], h % self.k.ne[1]);
        let (iq3, ik3) = (sq / (self.n_seqs / self.q.ne[3]), sq / (self.n_seqs / self.k.ne[3]));
        let head = (sq * self.h + h) * s * s + j0 * s;
        let out_len = s * self.h * t_n * self.n_seqs;
        // SAFETY: all pointer arithmetic below gives offsets of elements inside the checked views.
        unsafe {
            let s_in = self.state.data.add(head);
            let s_out = self.dst.add(out_len + head);
            let scale = 1.0f32 / (s as f32).sqrt();
            let gate = |t: usize| (*self.g.data.add(self.g.at(h, t, sq))).exp();
            let mut e = gate(0);
            for t in 0..t_n {
                let qt = self.q.data.add(self.q.at(iq1, t, iq3));
                let kt = self.k.data.add(self.k.at(ik1, t, ik3));
                let vt = self.v.data.add(self.v.at(h, t, sq) + j0);
                let e_next = if t + 1 < t_n { Some(gate(t + 1)) } else { None };
                let beta = *self.beta.data.add(self.beta.at(h, t, sq));
                let out = self.dst.add(((sq * t_n + t) * self.h + h) * s + j0);
                // After the first token the rows in `s_out` are already scaled by this token's `e`
                // (the previous token stored `r * e_next`); the last token stores `r` itself.
                let (src, pre_scaled) = if t == 0 { (s_in, false) } else { (s_out as *const f32, true) };
                #[cfg(target_arch = "x86_64")]
                if t + GDN_PF_TOKENS < t_n {
                    // The key, query, values and outputs of a token a few ahead: each is a short
                    // piece of a row H (or H_k) heads long, one row per token, out of the hardware
                    // prefetchers' reach.
                    let ta = t + GDN_PF_TOKENS;
                    let qa = self.q.data.add(self.q.at(iq1, ta, iq3));
                    let ka = self.k.data.add(self.k.at(ik1, ta, ik3));
                    for l in (0..s).step_by(16) {
                        x86::prefetch(qa.add(l));
                        x86::prefetch(ka.add(l));
                    }
                    let va = self.v.data.add(self.v.at(h, ta, sq) + j0);
                    let oa = self.dst.add(((sq * t_n + ta) * self.h + h) * s + j0);
                    for l in (0..GDN_UNIT_ROWS).step_by(16) {
                        x86::prefetch(va.add(l));
                        x86::prefetch(oa.add(l));
                    }
                }
                let rows = Rows {
                    s,
                    n: GDN_UNIT_ROWS,
                    src,
                    dst: s_out,
                    k: kt,
                    q: qt,
                    v: vt,
                    e,
                    beta,
                    scale,
                    out,
                    pre_scaled,
                    e_next,
                };
                rows.run(path);
                e = e_next.unwrap_or(e);
            }
        }
    }
}

/// One token's update of `n` state rows (see the module docs): the inner loop every path runs.
#[derive(Clone, Copy)]
pub(crate) struct Rows {
    /// Row length (64, 128 or 256).
    pub s: usize,
    /// Rows.
    pub n: usize,
    /// Rows before the token (`n * s` floats; may equal `dst`).
    pub src: *const f32,
    /// Rows after the token.
    pub dst: *mut f32,
    /// The token's key (`s` floats).
    pub k: *const f32,
    /// The token's query (`s` floats).
    pub q: *const f32,
    /// The token's values of these rows (`n` floats).
    pub v: *const f32,
    /// `expf(g)`.
    pub e: f32,
    /// `beta`.
    pub beta: f32,
    /// `1 / sqrtf(s)`.
    pub scale: f32,
    /// The token's outputs of these rows (`n` floats).
    pub out: *mut f32,
    /// `src` holds the rows already scaled by `e` (`M[j] * e`, as the previous token stored them),
    /// so no path multiplies them again.
    pub pre_scaled: bool,
    /// `Some(e')`: store each updated row scaled by the next token's `e'` (`r * e'`, the rounded
    /// product that token's first step would compute) instead of `r`, so that the next token
    /// reads its scaled rows (`pre_scaled`) and multiplies each element once, not once per pass.
    /// The last token of a ubatch stores `r` (the state ggml keeps).
    pub e_next: Option<f32>,
}

impl Rows {
    /// Runs the rows with `path`.
    ///
    /// # Safety
    /// The pointers are valid for the sizes in the field docs; the CPU runs `path`.
    unsafe fn run(&self, path: FloatPath) {
        // SAFETY: forwarded.
        unsafe {
            match path {
                #[cfg(target_arch = "x86_64")]
                FloatPath::Avx512 => x86::gdn_rows_avx512(self),
                #[cfg(target_arch = "x86_64")]
                FloatPath::Avx2 => x86::gdn_rows_avx2(self),
                #[cfg(target_arch = "aarch64")]
                FloatPath::Neon => neon::gdn_rows(self),
                _ => reference::gdn_rows(self),
            }
        }
    }
}

/// One `GGML_OP_SSM_CONV` with its checked shapes: `x` (`n - 1 + T` x channels x `n_seqs`, rows
/// contiguous), `w` (`n` x channels) and `dst` (channels x `T` x `n_seqs`).
#[derive(Clone, Copy, Debug)]
pub struct SsmConv {
    x: View,
    w: View,
    dst: View,
}

// SAFETY: as for GatedDeltaNet: sources read, destination written in disjoint units.
unsafe impl Send for SsmConv {}
// SAFETY: as above.
unsafe impl Sync for SsmConv {}

impl SsmConv {
    /// Checks an op (ggml's sources `conv_x`, `conv1d.weight` and `dst`); errors as
    /// [`GatedDeltaNet::new`].
    ///
    /// # Safety
    /// The views must describe readable memory (`dst` writable), valid while `run` runs.
    pub unsafe fn new(x: View, w: View, dst: View) -> Result<Self, Error> {
        if x.data.is_null() || w.data.is_null() || dst.data.is_null() {
            return Err(Error::Null);
        }
        if ![x, w, dst].iter().all(View::rows_contiguous) || x.nb[1] != 4 * x.ne[0] || w.nb[1] != 4 * w.ne[0] {
            return Err(Error::Unsupported);
        }
        let (n, ch, t_n, seqs) = (w.ne[0], x.ne[1], dst.ne[1], dst.ne[2]);
        if n == 0 || n > MAX_CONV || ch == 0 || t_n == 0 || seqs == 0 {
            return Err(Error::Unsupported);
        }
        if x.ne[0] != n - 1 + t_n || w.ne[1] != ch || dst.ne[0] != ch || x.ne[2] != seqs {
            return Err(Error::Shape);
        }
        if x.ne[3] != 1 || w.ne[2] != 1 || w.ne[3] != 1 || dst.ne[3] != 1 {
            return Err(Error::Unsupported);
        }
        if overlaps(dst.span(), x.span()) || overlaps(dst.span(), w.span()) {
            return Err(Error::Unsupported);
        }
        // Output rows (tokens, then sequences) must not share floats: units write them in parallel.
        let row = ch.checked_mul(4).ok_or(Error::Shape)?;
        if dst.nb[1] < row || (seqs > 1 && dst.nb[2] < dst.nb[1].checked_mul(t_n).ok_or(Error::Shape)?) {
            return Err(Error::Unsupported);
        }
        Ok(SsmConv { x, w, dst })
    }

    /// Work units: `n_seqs` x blocks of [`CONV_UNIT_CHANNELS`] channels.
    pub fn units(&self) -> usize {
        self.dst.ne[2] * self.x.ne[1].div_ceil(CONV_UNIT_CHANNELS)
    }

    /// Runs work units `units` with `path` (which the CPU must run).
    pub fn run(&self, path: FloatPath, units: Range<usize>) {
        let blocks = self.x.ne[1].div_ceil(CONV_UNIT_CHANNELS);
        let units = units.start..units.end.min(self.units());
        // SAFETY: `new` checked the shapes; units write disjoint channels.
        let t_start = unsafe { self.blocks16(path, units.clone()) };
        // One tile for all units (zeroed once: a unit overwrites what it reads).
        let mut tile: ConvTile = [[0f32; CONV_UNIT_CHANNELS]; CONV_TILE_TOKENS + MAX_CONV - 1];
        let mut out: ConvOut = [[0f32; CONV_UNIT_CHANNELS]; CONV_TILE_TOKENS];
        for u in units {
            let (sq, c0) = (u / blocks, (u % blocks) * CONV_UNIT_CHANNELS);
            let t0 = if self.x.ne[1] - c0 >= CONV_UNIT_CHANNELS { t_start } else { 0 };
            // SAFETY: as above.
            unsafe { self.unit(path, sq, c0, t0, &mut tile, &mut out) };
        }
    }

    /// The taps of channels `c0 .. c0 + 16` (fewer at the end; the rest zero), tap-major.
    fn taps(&self, c0: usize) -> [[f32; CONV_UNIT_CHANNELS]; MAX_CONV] {
        let n = self.w.ne[0];
        let cw = (self.x.ne[1] - c0).min(CONV_UNIT_CHANNELS);
        let mut wt = [[0f32; CONV_UNIT_CHANNELS]; MAX_CONV];
        for c in 0..cw {
            // SAFETY: channel c0 + c < channels <= w.ne[1], tap i < n (checked by `new`).
            let wr = unsafe { self.w.data.add(self.w.at(c0 + c, 0, 0)) };
            for (i, tap) in wt.iter_mut().enumerate().take(n) {
                // SAFETY: as above.
                tap[c] = unsafe { *wr.add(i) };
            }
        }
        wt
    }

    /// The whole blocks of 16 tokens of the units' whole 16-channel blocks, on the AVX-512F path
    /// (without a tile); returns the tokens done (0 on other paths), after which `unit` takes the
    /// rest in tiles. Token blocks are the outer loop and the units the inner one, so that each
    /// output row (a token) is written in one pass along its channels, and the inputs and output
    /// lines of the unit [`CONV_PF_UNITS`] ahead are prefetched (`prefetcht0`; `prefetchw` for the
    /// outputs measured slower: 4.7-4.9 ms against 3.7-3.9 from memory): a unit
    /// at a time over all tokens read 16 channel rows 2 KiB apart and wrote one 64-byte piece of
    /// every output row, 24 KiB apart at the 2B's 6144 channels, none of which the hardware
    /// prefetchers follow. One 512-token op of the 2B on the AMX Xeon VM, its data evicted from
    /// the caches first, took 8.2-9.3 ms that way, 3.7-4.4 ms now (in cache 2.4-2.6 and 1.7-2.2).
    ///
    /// # Safety
    /// As `run`.
    #[allow(unused_variables)]
    unsafe fn blocks16(&self, path: FloatPath, units: Range<usize>) -> usize {
        #[cfg(target_arch = "x86_64")]
        if path == FloatPath::Avx512 {
            let (n, t_n, ch) = (self.w.ne[0], self.dst.ne[1], self.x.ne[1]);
            let blocks = ch.div_ceil(CONV_UNIT_CHANNELS);
            let done = t_n / 16 * 16;
            if done == 0 {
                return 0;
            }
            let whole: Vec<(usize, usize, [[f32; CONV_UNIT_CHANNELS]; MAX_CONV])> = units
                .map(|u| (u / blocks, (u % blocks) * CONV_UNIT_CHANNELS))
                .filter(|&(_, c0)| ch - c0 >= CONV_UNIT_CHANNELS)
                .map(|(sq, c0)| (sq, c0, self.taps(c0)))
                .collect();
            if whole.is_empty() {
                return 0;
            }
            for t0 in (0..done).step_by(16) {
                for (i, (sq, c0, wt)) in whole.iter().enumerate() {
                    if let Some(&(psq, pc0, _)) = whole.get(i + CONV_PF_UNITS) {
                        for c in 0..16 {
                            let p = self.x.data.wrapping_add(self.x.at(pc0 + c, psq, 0) + t0);
                            x86::prefetch(p);
                            x86::prefetch(p.wrapping_add(n + 14));
                            let d = self.dst.data.wrapping_add(self.dst.at(t0 + c, psq, 0) + pc0);
                            x86::prefetch(d);
                        }
                    }
                    // SAFETY: channel rows hold n - 1 + T floats, so tokens t0 .. t0 + 16 (t0 + 16
                    // <= T) read n + 15 of them; dst rows t0 .. t0 + 16 hold channels c0 .. c0 + 16.
                    unsafe {
                        let x: [*const f32; 16] =
                            core::array::from_fn(|c| self.x.data.add(self.x.at(c0 + c, *sq, 0) + t0));
                        let d = (self.dst.data as *mut f32).add(self.dst.at(t0, *sq, 0) + c0);
                        x86::conv_block_avx512(&x, wt, n, d, self.dst.nb[1] / 4);
                    }
                }
            }
            return done;
        }
        0
    }

    /// Channels `c0 ..` (up to 16) of sequence `sq`, tokens `t_start ..`, in tiles of
    /// [`CONV_TILE_TOKENS`]: the inputs are transposed into a stack tile (16 channels per token),
    /// then each output vector is `n` FMAs.
    ///
    /// # Safety
    /// As `run`.
    unsafe fn unit(
        &self,
        path: FloatPath,
        sq: usize,
        c0: usize,
        t_start: usize,
        tile: &mut ConvTile,
        out: &mut ConvOut,
    ) {
        let n = self.w.ne[0];
        let cw = (self.x.ne[1] - c0).min(CONV_UNIT_CHANNELS);
        let t_n = self.dst.ne[1];
        if t_start >= t_n {
            return;
        }
        let wt = self.taps(c0);
        for t0 in (t_start..t_n).step_by(CONV_TILE_TOKENS) {
            let tb = (t_n - t0).min(CONV_TILE_TOKENS);
            for c in 0..cw {
                // SAFETY: tokens t0 .. t0 + tb + n - 1 <= x.ne[0] of channel c0 + c.
                let xr = unsafe { self.x.data.add(self.x.at(c0 + c, sq, 0) + t0) };
                for (tt, row) in tile.iter_mut().enumerate().take(tb + n - 1) {
                    // SAFETY: as above.
                    row[c] = unsafe { *xr.add(tt) };
                }
            }
            // SAFETY: the tiles hold tb + n - 1 rows and tb outputs; the CPU runs path.
            unsafe { conv_tile(path, tile, &wt, n, tb, out) };
            for (tt, o) in out.iter().enumerate().take(tb) {
                // SAFETY: token t0 + tt < T, channels c0 .. c0 + cw of dst's row.
                unsafe {
                    let d = (self.dst.data as *mut f32).add(self.dst.at(t0 + tt, sq, 0) + c0);
                    core::ptr::copy_nonoverlapping(o.as_ptr(), d, cw);
                }
            }
        }
    }
}

/// A tile of 16 channels: `out[t] = fma-chain over taps i of tile[t + i] * w[i]` for `t < tb`.
type ConvTile = [[f32; CONV_UNIT_CHANNELS]; CONV_TILE_TOKENS + MAX_CONV - 1];
/// The tile's outputs.
type ConvOut = [[f32; CONV_UNIT_CHANNELS]; CONV_TILE_TOKENS];

/// Runs one conv tile with `path`.
///
/// # Safety
/// `n <= MAX_CONV`, `tb <= CONV_TILE_TOKENS`; the CPU runs `path`.
unsafe fn conv_tile(
    path: FloatPath,
    tile: &ConvTile,
    w: &[[f32; 16]; MAX_CONV],
    n: usize,
    tb: usize,
    out: &mut ConvOut,
) {
    // SAFETY: forwarded.
    unsafe {
        match path {
            #[cfg(target_arch = "x86_64")]
            FloatPath::Avx512 | FloatPath::Avx2 => x86::conv_tile_avx2(tile, w, n, tb, out),
            #[cfg(target_arch = "aarch64")]
            FloatPath::Neon => neon::conv_tile(tile, w, n, tb, out),
            _ => reference::conv_tile(tile, w, n, tb, out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn split_covers_every_unit_once() {
        for n in 0..40 {
            for parts in 1..9 {
                let mut next = 0;
                for i in 0..parts {
                    let r = split(n, parts, i);
                    assert_eq!(r.start, next, "n {n} parts {parts} i {i}");
                    next = r.end;
                }
                assert_eq!(next, n);
            }
        }
    }
}
