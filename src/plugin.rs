//! The plugin's policy: which kernel level and layouts a ggml host runs with, and why it declines;
//! which Q8_K rounding reproduces the host's quantizer; and the plugin object a ggml host keeps
//! ([`Plugin`], in [`host`]): its settings from the environment, the load accounting and its log
//! line ([`load`]), the sliced repack with the release of the source's file pages and the
//! huge-page advice ([`pages`]), and the per-matmul work plan and row split ([`plan`]). The ggml
//! shim (`ggml-glue/`) asks these through the C ABI ([`crate::ffi`]: `ggml_t2p_plugin_*`,
//! `ggml_t2p_choose`, `ggml_t2p_q8k_probe_*`) and only translates ggml's calls, so every decision is
//! made, and tested, here.
//!
//! Environment variables are read through the host (`None`: unset or empty); the names in
//! messages are the variables': `GGML_T2P`, `GGML_T2P_KERNEL`, `GGML_T2P_PTQ1`,
//! `GGML_T2P_RELEASE_SOURCE`, `GGML_T2P_HUGE_PAGES`, `GGML_T2P_QUANTIZE`, `GGML_T2P_HYBRID`,
//! `GGML_T2P_EMBED`.

mod embed;
pub mod host;
pub mod load;
pub mod pages;
pub mod plan;

pub use host::Plugin;

use crate::format::{as_bytes, BlockQ8K, QK_K};
use crate::kernels::{assume_kernel, quantize_q8_k, KernelLevel};
use crate::reference::Contract;
use crate::repack::{Layout, SourceType};

/// What the plugin runs with on this CPU, or why it declines.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The concrete level every call gets; `None` when the plugin declines.
    pub kernel: Option<KernelLevel>,
    /// The layout PQ2_0 weights are repacked into; `None`: the host has no PQ2_0, or declined.
    pub pq2_layout: Option<Layout>,
    /// The layout PTQ1_0 weights are repacked into; `None`: the host has no PTQ1_0, or declined.
    pub ptq1_layout: Option<Layout>,
    /// Lines the host should log as warnings (an unknown value, a fallback, an assumption), in
    /// order, without the `ggml-t2p: ` prefix.
    pub warnings: Vec<String>,
    /// Why the plugin declines (then stock code runs every weight), without the prefix.
    pub decline: Option<String>,
}

impl Choice {
    fn declined(warnings: Vec<String>, why: String) -> Self {
        Choice { kernel: None, pq2_layout: None, ptq1_layout: None, warnings, decline: Some(why) }
    }
}

/// Why `auto` finds no level on this architecture (the decline line names the missing feature).
fn no_level_reason() -> &'static str {
    if cfg!(target_arch = "aarch64") {
        "this CPU has no dotprod"
    } else if cfg!(target_arch = "x86_64") {
        "this CPU lacks AVX2, FMA or F16C"
    } else {
        "no ggml-t2p kernels for this architecture"
    }
}

/// Every level name `GGML_T2P_KERNEL` takes, for messages: `auto, ref, dotprod, ... or amx`.
fn level_names() -> String {
    let mut s = String::from("auto");
    for (i, l) in KernelLevel::ALL.iter().enumerate() {
        s.push_str(if i + 1 == KernelLevel::ALL.len() { " or " } else { ", " });
        s.push_str(l.name());
    }
    s
}

/// A value as messages quote it: at most 64 characters (a longer one is cut, with `...`).
fn quoted(v: &str) -> String {
    match v.char_indices().nth(64) {
        Some((at, _)) => format!("{}...", &v[..at]),
        None => v.to_string(),
    }
}

/// Chooses the kernel level and layouts from the requests and this CPU.
///
/// - `kernel_request`: `GGML_T2P_KERNEL` (`None` or `auto`: the best level this CPU has; a level
///   name: that level). An unknown name warns and means `auto`. A forced level the CPU lacks
///   declines, except: `amx` where the CPU or OS refuses AMX falls back to the best other level
///   (with a warning; the VNNI levels need no OS permission); a level whose feature the OS cannot
///   report either way (i8mm on older Windows on ARM) is assumed, with a warning.
/// - `ptq1_request`: `GGML_T2P_PTQ1` (`t2p`: the 2.125-bit layouts, T2P or X16; `native`: keep
///   1.75 bits per weight where a layout for that exists: PTQ1_0x4 on ARM, L64 on x86 with AVX-512
///   VBMI; `None`: the default, `native` where the CPU has VBMI and the level is `avx512vnni`,
///   `amx` or `ref` (`layout_for`'s L64; decode measured 1.2-1.3x X16's
///   on an AMX Xeon VM, the only VBMI machine measured so far: docs/ptq1_0.md), else `t2p`);
///   anything else warns and means the default.
/// - `host_pq2`, `host_ptq1`: whether the host's type ids 142 and 143 are PQ2_0 and PTQ1_0 (block
///   of 128 weights, [`source_block_bytes`] bytes); a type the host lacks gets no layout, and a
///   host with neither declines.
pub fn choose(kernel_request: Option<&str>, ptq1_request: Option<&str>, host_pq2: bool, host_ptq1: bool) -> Choice {
    let mut warnings = Vec::new();
    let mut requested = match kernel_request {
        None | Some("auto") => None,
        Some(name) => match KernelLevel::from_name(name) {
            Some(level) => Some(level),
            None => {
                warnings.push(format!(
                    "unknown GGML_T2P_KERNEL={} (expected {}, lower case), using auto",
                    quoted(name),
                    level_names()
                ));
                None
            }
        },
    };
    if requested == Some(KernelLevel::Amx) && !KernelLevel::Amx.is_available() {
        // AMX needs the CPU's AMX-INT8 and, on Linux, the tile-data permission, which a container or
        // seccomp policy may refuse. The VNNI levels need neither: run the best of them instead of
        // handing the weights back to stock.
        let Some(best) = KernelLevel::best() else {
            return Choice::declined(
                warnings,
                "GGML_T2P_KERNEL=amx is not usable here and this CPU has no other level".into(),
            );
        };
        warnings.push(format!(
            "GGML_T2P_KERNEL=amx is not usable here (the CPU lacks AMX-INT8, the OS does not enable the tile \
             state, or it refused the tile-data permission); using {}",
            best.name()
        ));
        requested = Some(best);
    }
    let kernel = match requested {
        None => match KernelLevel::best() {
            Some(level) => level,
            None => {
                let why =
                    format!("{}; stock code runs (GGML_T2P_KERNEL=ref forces the scalar kernels)", no_level_reason());
                return Choice::declined(warnings, why);
            }
        },
        Some(level) if level.is_available() => level,
        Some(level) => {
            // An explicit level the OS cannot confirm is the user's promise; one the OS reports
            // absent is declined.
            if assume_kernel(level).is_err() || !level.is_available() {
                return Choice::declined(warnings, format!("this CPU cannot run GGML_T2P_KERNEL={}", level.name()));
            }
            warnings.push(format!(
                "GGML_T2P_KERNEL={}: the OS cannot tell whether this CPU has it; assuming it does, as requested \
                 (a CPU without it stops with an illegal instruction)",
                level.name()
            ));
            level
        }
    };
    // x86 levels that run L64 keep PTQ1_0 at 1.75 bits by default; ARM's PTQ1_0x4 stays opt-in
    let l64 = cfg!(target_arch = "x86_64") && kernel.layout_for(SourceType::Ptq1_0, true) == Layout::L64;
    let default_name = if l64 { "native" } else { "t2p" };
    let compact = match ptq1_request {
        None => l64,
        Some("t2p") => false,
        Some("native") => {
            if cfg!(target_arch = "x86_64") && !l64 && host_ptq1 {
                warnings.push(format!(
                    "GGML_T2P_PTQ1=native: kernel {} has no 1.75-bit PTQ1_0 layout here (L64 needs AVX-512 VBMI \
                     and the avx512vnni or amx level); PTQ1_0 -> X16",
                    kernel.name()
                ));
            }
            true
        }
        Some(other) => {
            warnings.push(format!(
                "unknown GGML_T2P_PTQ1={} (expected t2p or native), using {default_name}",
                quoted(other)
            ));
            l64
        }
    };
    let pq2_layout = host_pq2.then(|| kernel.layout_for(SourceType::Pq2_0, false));
    let ptq1_layout = host_ptq1.then(|| kernel.layout_for(SourceType::Ptq1_0, compact));
    if pq2_layout.is_none() && ptq1_layout.is_none() {
        return Choice::declined(
            warnings,
            "this ggml has neither PQ2_0 (type 142) nor PTQ1_0 (type 143); stock code runs".into(),
        );
    }
    Choice { kernel: Some(kernel), pq2_layout, ptq1_layout, warnings, decline: None }
}

/// Weights per block and bytes per block of a source type, as the host ggml must report them for
/// its type id to be taken (128 weights; PQ2_0 34 bytes, PTQ1_0 28): an unrelated type that
/// reuses the id, or an older meaning of it, stays on stock code.
pub fn source_block_bytes(src: SourceType) -> (usize, usize) {
    (crate::format::QK, src.block_size())
}

/// Values of the Q8_K rounding probe: two blocks of 256.
pub const Q8K_PROBE_VALUES: usize = 2 * QK_K;

/// The Q8_K rounding probe's input: two blocks of near-ties.
///
/// The fork's `quantize_row_q8_K_ref` computes `nearest_int(iscale * x)` as
/// `iscale * x + 1.5 * 2^23`; a compiler may fuse that into one FMA (GCC wherever the ISA has FMA)
/// or round the product first (x86 builds for the baseline ISA, clang, MSVC). The two differ only
/// near .5 ties, so each value here is `(k + 0.5) / iscale` moved a few ulps (`iscale * x` lands
/// within ulps of a tie), with the block's largest magnitude (1.7 and -0.0123) placed once.
pub fn q8k_probe_input() -> [f32; Q8K_PROBE_VALUES] {
    let mut x = [0.0f32; Q8K_PROBE_VALUES];
    for (b, m) in [1.7f32, -0.0123].into_iter().enumerate() {
        let iscale = -127.0f32 / m;
        for j in 0..QK_K {
            let t = ((j % 253) as f32 - 126.0 + 0.5) / iscale;
            x[QK_K * b + j] = f32::from_bits((t.to_bits() as i32 + (j as i32 * 5) % 7 - 3) as u32);
        }
        x[QK_K * b + 17] = m;
    }
    x
}

/// Which rounding of our Q8_K quantizer at `level` reproduces `host`, the host's own Q8_K blocks
/// of `x` (the probe input, [`q8k_probe_input`], or any values whose roundings differ): `Some`
/// when exactly one matches bit for bit, `None` when neither does (a host quantizer of its own:
/// then the host's keeps running, so the matmuls always see stock's activations) or when the two
/// roundings agree on `x` (the probe cannot tell).
///
/// # Errors
/// As [`quantize_q8_k`]: `x.len()` not `host.len() * 256`, or `level` not available.
pub fn q8k_rounding_matching(
    level: KernelLevel,
    x: &[f32],
    host: &[BlockQ8K],
) -> Result<Option<Contract>, crate::Error> {
    let mut fused = vec![BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; 16] }; host.len()];
    let mut unfused = fused.clone();
    quantize_q8_k(level, x, &mut fused, Contract::Fused)?;
    quantize_q8_k(level, x, &mut unfused, Contract::Unfused)?;
    let same = |a: &[BlockQ8K], b: &[BlockQ8K]| as_bytes(a) == as_bytes(b);
    if same(&fused, &unfused) {
        return Ok(None);
    }
    Ok(if same(host, &fused) {
        Some(Contract::Fused)
    } else if same(host, &unfused) {
        Some(Contract::Unfused)
    } else {
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::quantize_row_q8_k;

    #[test]
    fn auto_takes_the_best_level_and_both_types() {
        let c = choose(None, None, true, true);
        match KernelLevel::best() {
            Some(best) => {
                assert_eq!(c.kernel, Some(best));
                assert_eq!(c.pq2_layout, Some(best.layout_for(SourceType::Pq2_0, false)));
                // PTQ1_0: L64 by default where the level runs it (x86 with VBMI), else the fast layout
                let l64 = best.layout_for(SourceType::Ptq1_0, true) == Layout::L64;
                assert_eq!(l64, cfg!(target_arch = "x86_64") && best.runs(Layout::L64));
                assert_eq!(c.ptq1_layout, Some(best.layout_for(SourceType::Ptq1_0, l64)));
                assert!(c.warnings.is_empty() && c.decline.is_none());
                let forced = choose(Some("auto"), Some(if l64 { "native" } else { "t2p" }), true, true);
                assert_eq!(forced, c);
                let other = choose(None, Some(if l64 { "t2p" } else { "native" }), true, true);
                assert_eq!(other.pq2_layout, c.pq2_layout);
                if l64 {
                    assert_eq!(other.ptq1_layout, Some(Layout::X16));
                }
            }
            None => assert!(c.decline.as_deref().unwrap().starts_with(no_level_reason())),
        }
    }

    #[test]
    fn unknown_values_warn_and_keep_the_default() {
        let c = choose(Some("AVX2"), Some("tiny"), true, false);
        assert_eq!(c.warnings.len(), if c.decline.is_some() { 1 } else { 2 });
        assert!(c.warnings[0].contains("unknown GGML_T2P_KERNEL=AVX2") && c.warnings[0].contains("amx"));
        if c.decline.is_none() {
            assert!(c.warnings[1].contains("unknown GGML_T2P_PTQ1=tiny"));
            assert_eq!(c.kernel, KernelLevel::best());
            assert_eq!(c.ptq1_layout, None);
            let d = choose(None, Some("tiny"), false, true);
            assert_eq!(d.ptq1_layout, choose(None, None, false, true).ptq1_layout);
        }
    }

    #[test]
    fn long_values_are_cut_in_messages() {
        let long = "x".repeat(5000);
        let c = choose(Some(&long), Some(&long), true, true);
        assert!(c.warnings.iter().all(|w| w.len() < 200), "{:?}", c.warnings);
        assert!(c.warnings[0].contains(&format!("{}...", "x".repeat(64))));
    }

    #[test]
    fn ref_runs_anywhere_and_a_host_without_the_types_declines() {
        let c = choose(Some("ref"), Some("native"), false, true);
        assert_eq!(c.kernel, Some(KernelLevel::Reference));
        assert_eq!(c.pq2_layout, None);
        assert_eq!(c.ptq1_layout, Some(KernelLevel::Reference.layout_for(SourceType::Ptq1_0, true)));
        let none = choose(Some("ref"), None, false, false);
        assert!(none.kernel.is_none() && none.decline.unwrap().contains("neither PQ2_0"));
    }

    #[test]
    fn a_forced_level_runs_when_available_and_declines_otherwise() {
        for level in KernelLevel::ALL {
            let c = choose(Some(level.name()), None, true, true);
            if level.is_available() {
                assert_eq!(c.kernel, Some(level), "{level:?}");
                assert!(c.decline.is_none());
            } else if level == KernelLevel::Amx {
                // falls back to the best other level, or declines when there is none
                assert_eq!(c.kernel, KernelLevel::best());
                assert!(c.warnings.iter().any(|w| w.contains("amx is not usable")) || c.decline.is_some());
            } else if let Some(why) = &c.decline {
                assert!(why.contains(level.name()), "{level:?}: {why}");
            } else {
                // only a feature the OS cannot report is assumed
                assert!(c.warnings.iter().any(|w| w.contains("assuming it does")), "{level:?}");
            }
        }
    }

    #[test]
    fn the_probe_tells_the_roundings_apart_and_names_the_host_s() {
        let x = q8k_probe_input();
        let level = KernelLevel::best().unwrap_or(KernelLevel::Reference);
        let blank = BlockQ8K { d: 0.0, qs: [0; QK_K], bsums: [0; 16] };
        for contract in [Contract::Fused, Contract::Unfused] {
            let mut host = vec![blank; 2];
            quantize_row_q8_k(&x, &mut host, contract).unwrap();
            assert_eq!(q8k_rounding_matching(level, &x, &host), Ok(Some(contract)));
        }
        // a host quantizer of its own (here: one value off) matches neither
        let mut host = vec![blank; 2];
        quantize_row_q8_k(&x, &mut host, Contract::Fused).unwrap();
        host[1].qs[3] = host[1].qs[3].wrapping_add(1);
        assert_eq!(q8k_rounding_matching(level, &x, &host), Ok(None));
        assert!(q8k_rounding_matching(level, &x[..256], &host).is_err());
    }
}
