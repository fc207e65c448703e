//! The compiled AMX code never relies on a tile configuration across a call.
//!
//! The x86-64 psABI makes the tile state caller-saved: a configuration loaded by `ldtilecfg` need
//! not survive a call (LLVM's own AMX code re-issues `ldtilecfg` after calls for this reason), and
//! rustc emits array zeroing and copies as `memset`/`memcpy` calls. So in every function of this
//! test binary that holds a tile instruction, read in address order, each `tileloadd`,
//! `tilestored`, `tilezero` and `tdp*` must follow an `ldtilecfg` with no call in between other
//! than the calls that never return into the tile code (panics, `_Unwind_Resume`).
//!
//! The walk is in address order, not along the control flow: it holds for code whose loops load
//! the configuration at their head, as `amx::gemm_x16_tiles` does once per pass. A compiler that
//! lays out blocks differently may make it fail without a fault; the message names the function
//! and the instructions, to read against the source.
//!
//! It runs on every x86-64 Linux machine, with or without AMX: it reads machine code (`objdump
//! -d` from binutils, which gcc brings), it does not run it.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

use std::process::Command;

/// Tile instructions that need the configuration.
const NEEDS_CONFIG: [&str; 4] = ["tileloadd", "tilestored", "tilezero", "tdpb"];

/// A call that never returns into the function's tile code: a panic or the unwinder's resume.
fn never_returns(line: &str) -> bool {
    ["panic", "_Unwind_Resume", "slice_index_fail", "unwrap_failed", "expect_failed", "handle_alloc_error"]
        .iter()
        .any(|s| line.contains(s))
}

/// The functions of `dis` (objdump's output) that hold a tile instruction, each with the
/// instructions (text after the address) in address order.
fn tile_functions(dis: &str) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<String>)> = None;
    for line in dis.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n) {
            out.extend(cur.take());
            cur = Some((name.to_string(), Vec::new()));
        } else if let (Some((_, insns)), Some((_, text))) = (cur.as_mut(), line.split_once(":\t")) {
            insns.push(text.trim().to_string());
        }
    }
    out.extend(cur);
    out.retain(|(_, insns)| insns.iter().any(|i| NEEDS_CONFIG.iter().any(|t| i.starts_with(t))));
    out
}

/// The places in one function where a tile instruction needs a configuration that a call before
/// it (after the last `ldtilecfg`) may have lost, or that was never loaded.
fn violations(insns: &[String]) -> Vec<String> {
    let mut configured = false;
    let mut last_call: Option<&str> = None;
    let mut bad = Vec::new();
    for i in insns {
        let mnemonic = i.split_whitespace().next().unwrap_or("");
        if mnemonic == "ldtilecfg" {
            configured = true;
            last_call = None;
        } else if mnemonic == "tilerelease" {
            configured = false;
        } else if mnemonic.starts_with("call") && !never_returns(i) {
            if configured {
                last_call = Some(i);
            }
            configured = false;
        } else if NEEDS_CONFIG.iter().any(|t| mnemonic.starts_with(t)) && !configured {
            bad.push(match last_call {
                Some(c) => format!("`{i}` after `{c}` with no `ldtilecfg` in between"),
                None => format!("`{i}` with no `ldtilecfg` before it"),
            });
        }
    }
    bad
}

#[test]
fn no_call_between_ldtilecfg_and_tile_instructions() {
    // keep the native kernel and the issue-limit probe in this binary
    std::hint::black_box(ggml_t2p::kernels::amx::gemm_native as *const () as usize);
    std::hint::black_box(ggml_t2p::kernels::peak::Probe::run as *const () as usize);
    let exe = std::env::current_exe().unwrap();
    let out = Command::new("objdump")
        .args(["-d", "-C", "--no-show-raw-insn", "-M", "intel"])
        .arg(&exe)
        .output()
        .expect("objdump (binutils) is needed to read the compiled AMX code; install binutils");
    assert!(out.status.success(), "objdump -d failed: {}", String::from_utf8_lossy(&out.stderr));
    let dis = String::from_utf8_lossy(&out.stdout);
    let funcs = tile_functions(&dis);
    let names: Vec<&str> = funcs.iter().map(|(n, _)| n.as_str()).collect();
    // the check must see the code it is about
    assert!(
        names.iter().any(|n| n.contains("gemm_x16_16x16_q8_k_amx")),
        "the native tile kernel is not among the functions with tile instructions: {names:?}"
    );
    let mut report = Vec::new();
    for (name, insns) in &funcs {
        for v in violations(insns) {
            report.push(format!("{name}: {v}"));
        }
    }
    assert!(
        report.is_empty(),
        "{} tile instructions rely on a configuration across a call; the first ones:\n{}",
        report.len(),
        report[..report.len().min(8)].join("\n")
    );
    println!("amx_calls: {} functions with tile instructions checked: {}", funcs.len(), names.join(", "));
}

/// The walk itself, on hand-written listings: it must flag a call between the configuration and
/// a tile instruction, and accept a panic call there.
#[test]
fn walk_flags_calls_and_spares_panics() {
    let v = |s: &str| -> Vec<String> { s.lines().map(str::to_string).collect() };
    assert!(violations(&v("ldtilecfg [rax]\ntilezero tmm0\ntilerelease")).is_empty());
    assert_eq!(
        violations(&v("ldtilecfg [rax]\ncall QWORD PTR [rip+0x10] # <memset@GLIBC_2.2.5>\ntilezero tmm0")).len(),
        1
    );
    assert_eq!(violations(&v("tileloadd tmm6,[rcx+r14*1]\nldtilecfg [rax]")).len(), 1);
    assert!(violations(&v(
        "ldtilecfg [rax]\ncall QWORD PTR [rip+0x10] # <core::panicking::panic_bounds_check>\ntdpbssd tmm0,tmm4,tmm6"
    ))
    .is_empty());
    assert_eq!(violations(&v("ldtilecfg [rax]\ncall rbx\ntdpbssd tmm0,tmm4,tmm6")).len(), 1);
    assert_eq!(violations(&v("ldtilecfg [rax]\ntilerelease\ntilestored [rsi+r14*1],tmm0")).len(), 1);
}
