//! The compiled AMX code never relies on a tile configuration across a call.
//!
//! The x86-64 psABI makes the tile state caller-saved: a configuration loaded by `ldtilecfg` need
//! not survive a call (LLVM's own AMX code re-issues `ldtilecfg` after calls for this reason), and
//! rustc emits array zeroing and copies as `memset`/`memcpy` calls. So in every function of this
//! test binary that holds a tile instruction, each `tileloadd`, `tilestored`, `tilezero` and
//! `tdp*` must be reached, on every path through the function's control flow, from an
//! `ldtilecfg` with no call and no `tilerelease` in between.
//!
//! The control flow is read from the disassembly: fall-through, and the targets of direct jumps. A
//! call ends the configuration (whatever it calls: a call that never returns is followed by `ud2`
//! or a jump to one, which ends the path); an instruction that nothing jumps or falls to (a landing
//! pad, which only the unwinder reaches) starts unconfigured, as the entry does. An indirect jump
//! (a jump table) cannot be followed and fails the check, so that it never passes unseen.
//!
//! It runs on every x86-64 Linux machine, with or without AMX: it reads machine code (`objdump
//! -d` from binutils 2.34 or later, which knows the AMX instructions; gcc brings binutils), it does
//! not run it.

#![cfg(all(target_arch = "x86_64", target_os = "linux"))]

#[allow(dead_code)] // only the tdpbssd probe is used here
#[path = "../../benches/support/peak.rs"]
mod peak;

use std::collections::HashMap;
use std::process::Command;

/// Tile instructions that need the configuration.
const NEEDS_CONFIG: [&str; 4] = ["tileloadd", "tilestored", "tilezero", "tdp"];

/// One instruction: its address and its text (mnemonic and operands, as objdump prints them).
type Insn = (u64, String);

/// The functions of `dis` (objdump's output) that hold a tile instruction, each with its
/// instructions in address order.
fn tile_functions(dis: &str) -> Vec<(String, Vec<Insn>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<Insn>)> = None;
    for line in dis.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")).map(|(_, n)| n) {
            out.extend(cur.take());
            cur = Some((name.to_string(), Vec::new()));
        } else if let (Some((_, insns)), Some((addr, text))) = (cur.as_mut(), line.split_once(":\t")) {
            if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
                insns.push((a, text.trim().to_string()));
            }
        }
    }
    out.extend(cur);
    out.retain(|(_, insns)| insns.iter().any(|(_, i)| needs_config(i)));
    out
}

/// Instruction prefixes objdump prints before the mnemonic (`notrack jmp rax`, `addr32 call ...`,
/// `bnd ret`, `data16 cs nop ...`).
const PREFIXES: [&str; 16] = [
    "notrack", "bnd", "cs", "ds", "es", "ss", "fs", "gs", "repz", "repnz", "repe", "repne", "rep", "lock", "addr32",
    "data16",
];

/// The mnemonic and the first operand word of an instruction, after its prefixes.
fn parts(i: &str) -> (&str, Option<&str>) {
    let mut w = i.split_whitespace().skip_while(|w| PREFIXES.contains(w) || w.starts_with("rex"));
    (w.next().unwrap_or(""), w.next())
}

fn mnemonic(i: &str) -> &str {
    parts(i).0
}

fn needs_config(i: &str) -> bool {
    NEEDS_CONFIG.iter().any(|t| mnemonic(i).starts_with(t))
}

/// The places in one function where a tile instruction may run without a configuration loaded
/// since the last call or `tilerelease` on some path to it (a "must" data-flow over the control
/// flow graph, to a fixed point), or an indirect jump that the check cannot follow.
fn violations(insns: &[Insn]) -> Vec<String> {
    let n = insns.len();
    let index: HashMap<u64, usize> = insns.iter().enumerate().map(|(k, (a, _))| (*a, k)).collect();
    let mut bad = Vec::new();
    // successors of each instruction
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (k, (_, i)) in insns.iter().enumerate() {
        let (m, op) = parts(i);
        let target = op.and_then(|t| u64::from_str_radix(t, 16).ok());
        let falls = !matches!(m, "ret" | "ud2" | "int3" | "hlt" | "jmp");
        if falls && k + 1 < n {
            succ[k].push(k + 1);
        }
        if m.starts_with('j') || m.starts_with("loop") {
            match target {
                // a direct jump: to an instruction of this function, or out of it (a tail call)
                Some(t) => succ[k].extend(index.get(&t).copied()),
                None => bad.push(format!("`{i}`: an indirect jump, which this check cannot follow")),
            }
        }
    }
    let mut has_pred = vec![false; n];
    for s in succ.iter().flatten() {
        has_pred[*s] = true;
    }
    // configured on entry to each instruction: false at the entry and wherever nothing leads
    // (landing pads), else the meet (and) of the predecessors' exits, from an optimistic start
    // (alignment padding that nothing reaches only falls into what follows: it starts configured,
    // so that it does not poison a loop head)
    let padding = |i: &str| mnemonic(i) == "nop" || i.split_whitespace().collect::<Vec<_>>() == ["xchg", "ax,ax"];
    let mut entry: Vec<bool> = (0..n).map(|k| k != 0 && (has_pred[k] || padding(&insns[k].1))).collect();
    let exit = |k: usize, e: bool| -> bool {
        match mnemonic(&insns[k].1) {
            "ldtilecfg" => true,
            "tilerelease" => false,
            m if m.starts_with("call") => false,
            _ => e,
        }
    };
    let mut changed = true;
    while changed {
        changed = false;
        for k in 0..n {
            let out = exit(k, entry[k]);
            for &s in &succ[k] {
                if entry[s] && !out {
                    entry[s] = false;
                    changed = true;
                }
            }
        }
    }
    for (k, (_, i)) in insns.iter().enumerate() {
        if needs_config(i) && !entry[k] {
            // the nearest call or tilerelease before it in address order, to read against the source
            let near = insns[..k]
                .iter()
                .rev()
                .map(|(_, j)| j)
                .find(|j| matches!(mnemonic(j), "ldtilecfg" | "tilerelease") || mnemonic(j).starts_with("call"));
            bad.push(match near {
                Some(j) if mnemonic(j) != "ldtilecfg" => {
                    format!("`{i}` can run unconfigured (the nearest call or release before it: `{j}`)")
                }
                _ => format!("`{i}` can run unconfigured (some path reaches it without a fresh `ldtilecfg`)"),
            });
        }
    }
    bad
}

#[test]
fn no_call_between_ldtilecfg_and_tile_instructions() {
    // keep the native kernel and the issue-limit probe in this binary
    std::hint::black_box(ggml_t2p::kernels::amx_model::gemm_native as *const () as usize);
    std::hint::black_box(peak::Probe::run as *const () as usize); // (its tdpbssd loop)
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
        "the native tile kernel is not among the functions with tile instructions: {names:?} (objdump \
         older than binutils 2.34 prints `(bad)` for AMX instructions)"
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

/// The analysis itself, on hand-written listings (`address:\tinstruction`).
#[test]
fn analysis_flags_calls_on_any_path() {
    let v = |s: &str| -> Vec<Insn> {
        s.lines()
            .map(|l| {
                let (a, t) = l.split_once(':').unwrap();
                (u64::from_str_radix(a, 16).unwrap(), t.trim().to_string())
            })
            .collect()
    };
    // straight line: configured, then a call before the tile instruction
    assert!(violations(&v("0: ldtilecfg [rax]\n4: tilezero tmm0\n8: tilerelease\nc: ret")).is_empty());
    assert_eq!(violations(&v("0: ldtilecfg [rax]\n4: call 100 <memset@plt>\n8: tilezero tmm0\nc: ret")).len(), 1);
    assert_eq!(violations(&v("0: tileloadd tmm6,[rcx+r14*1]\n4: ldtilecfg [rax]\n8: ret")).len(), 1);
    assert_eq!(violations(&v("0: ldtilecfg [rax]\n4: tilerelease\n8: tilestored [rsi+r14*1],tmm0\nc: ret")).len(), 1);
    // a loop whose back edge follows a call: the call comes after the tile code in address
    // order, but the next iteration's tile instruction runs after it
    let looped = "0: ldtilecfg [rax]\n4: tdpbssd tmm0,tmm4,tmm6\n8: call rbx\nc: jne 4 <f+0x4>\n10: ret";
    assert_eq!(violations(&v(looped)).len(), 1);
    // the same loop reloading the configuration at its head is fine
    let reloaded =
        "0: call rbx\n4: ldtilecfg [rax]\n8: tdpbssd tmm0,tmm4,tmm6\nc: call rbx\n10: jne 4 <f+0x4>\n14: ret";
    assert!(violations(&v(reloaded)).is_empty());
    // a call that never returns (ud2 after it) ends its path
    let panics =
        "0: ldtilecfg [rax]\n4: je 10 <f+0x10>\n8: call 200 <panic>\nc: ud2\n10: tdpbssd tmm0,tmm4,tmm6\n14: ret";
    assert!(violations(&v(panics)).is_empty());
    // a landing pad that nothing jumps to starts unconfigured
    assert_eq!(violations(&v("0: ldtilecfg [rax]\n4: ret\n8: tilezero tmm0\nc: ret")).len(), 1);
    // an indirect jump cannot be followed
    assert!(violations(&v("0: ldtilecfg [rax]\n4: jmp rax\n8: tilezero tmm0\nc: ret"))
        .iter()
        .any(|x| x.contains("indirect")));
    // prefixed forms are still calls and jumps
    assert_eq!(violations(&v("0: ldtilecfg [rax]\n4: addr32 call 100 <memset>\n8: tilezero tmm0\nc: ret")).len(), 1);
    assert!(violations(&v("0: ldtilecfg [rax]\n4: notrack jmp rax\n8: tilezero tmm0\nc: ret"))
        .iter()
        .any(|x| x.contains("indirect")));
    assert_eq!(violations(&v("0: ldtilecfg [rax]\n4: bnd ret\n8: tilezero tmm0\nc: ret")).len(), 1);
    // padding that nothing reaches does not poison the loop head it falls into
    let padded = "0: ldtilecfg [rax]\n4: jmp c <f+0xc>\n8: nop DWORD PTR [rax+0x0]\nc: tdpbssd tmm0,tmm4,tmm6\n10: jne c <f+0xc>\n14: ret";
    assert!(violations(&v(padded)).is_empty());
}
