//! Builds the C programs of `tests/c/` with the `cc` crate against `include/ggml_t2p.h` and the
//! `libggml_t2p.a` that this `cargo test` just built, runs them, and requires exit status 0:
//! `abi_smoke.c` (the whole C ABI, bits and status codes), `fork_smoke.c` (load, fork, load),
//! `amx_smoke.c` (the amx level's hygiene: permission, threads, fork, a refused permission) and
//! `release_smoke.c` (the release of a repacked tensor's file pages: `ggml_t2p_release_source`,
//! and the plugin's sliced repack from a file mapping).
//!
//! On a cross target (aarch64 under qemu) the host cannot build and run the programs from inside
//! the test, so these tests fail there rather than pass without running anything:
//! `tools/qemu-test.py` leaves them out by name (`--skip`, reported as a skip) and links the same
//! programs statically for aarch64 and runs them under each qemu CPU instead.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The newest `libggml_t2p*.a` beside the test binary (cargo puts the package's staticlib in
/// `deps/` with a hash, and a copy one level up for plain builds).
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let mut found: Vec<(std::time::SystemTime, PathBuf)> = [deps, deps.parent().unwrap()]
        .iter()
        .flat_map(|d| std::fs::read_dir(d).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with("libggml_t2p") && n.ends_with(".a")
        })
        .map(|p| (std::fs::metadata(&p).unwrap().modified().unwrap(), p))
        .collect();
    found.sort();
    found.pop().expect("libggml_t2p.a not found beside the test binary").1
}

/// Compiles `tests/c/<name>.c` against the header and the staticlib; the executable's path. On a
/// cross target this fails (see the top of this file).
fn build_c_program(name: &str) -> PathBuf {
    let (target, host) = (env!("GGML_T2P_BUILD_TARGET"), env!("GGML_T2P_BUILD_HOST"));
    assert_eq!(
        target, host,
        "c abi: cross target {target}: this test cannot build and run {name}.c here; tools/qemu-test.py \
         skips it and runs the C programs as static {target} programs under qemu"
    );
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("c_{name}"));
    std::fs::create_dir_all(&out).unwrap();
    let objects = cc::Build::new()
        .target(target)
        .host(host)
        .opt_level(2)
        .out_dir(&out)
        .cargo_metadata(false)
        .warnings_into_errors(true)
        .flag("-std=c11")
        .define("_POSIX_C_SOURCE", "200809L")
        .include(root.join("include"))
        .file(root.join(format!("tests/c/{name}.c")))
        .compile_intermediates();
    let compiler = cc::Build::new().target(target).host(host).opt_level(2).cargo_metadata(false).get_compiler();
    let exe = out.join(name);
    let lib = staticlib();
    let status = compiler
        .to_command()
        .args(&objects)
        .arg(&lib)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .status()
        .expect("run the C compiler to link");
    assert!(status.success(), "linking {} failed", lib.display());
    println!("c abi: {name} linked against {}", lib.display());
    exe
}

#[test]
fn c_program_links_and_runs() {
    let exe = build_c_program("abi_smoke");
    let run = Command::new(&exe).output().expect("run abi_smoke");
    let stdout = String::from_utf8_lossy(&run.stdout);
    print!("{stdout}");
    assert!(run.status.success(), "abi_smoke failed: {stdout}{}", String::from_utf8_lossy(&run.stderr));
    assert!(stdout.contains("checks passed"), "abi_smoke printed no summary");
}

/// Load, fork, load again (issue 11): the child's repack returns with the parent's bytes, and no
/// library thread outlives a repack; for the T2P and X16 layouts. Natively the program's default
/// grace (1000 ms for the kernel to drop a joined thread from the count) applies.
#[test]
fn repack_survives_fork() {
    let exe = build_c_program("fork_smoke");
    for layout in ["1", "3"] {
        let run = Command::new(&exe).args([layout, "60"]).output().expect("run fork_smoke");
        let stdout = String::from_utf8_lossy(&run.stdout);
        print!("{stdout}");
        assert!(run.status.success(), "fork_smoke (layout {layout}) failed: {stdout}");
        assert!(stdout.contains("load, fork, load: PASS"), "fork_smoke printed no verdict");
    }
}

/// The source release: the whole pages inside a range of a read-only shared file mapping are
/// unmapped (smaps Rss falls, the bytes read back from the file); anonymous memory, private and
/// writable file mappings, ranges with a hole or an anonymous part and mlock'ed pages are kept with
/// their bytes and Rss; the plugin's repack of a matrix above 16 MiB from a file mapping, in
/// slices, drops every page of it and gives the bytes of one repack. Linux only; elsewhere the
/// program checks that nothing is done.
#[test]
fn source_release_drops_only_file_pages() {
    let exe = build_c_program("release_smoke");
    let run = Command::new(&exe).output().expect("run release_smoke");
    let stdout = String::from_utf8_lossy(&run.stdout);
    print!("{stdout}");
    assert!(run.status.success(), "release_smoke failed: {stdout}{}", String::from_utf8_lossy(&run.stderr));
    // it skips (keeps the source) only where there is no source release: off Linux
    let verdict = if cfg!(target_os = "linux") { "checks passed" } else { "skipped" };
    assert!(stdout.contains(verdict), "release_smoke: no '{verdict}' line");
}

/// The amx level through the C ABI (its hygiene checks), both forms of the program: as
/// the CPU and OS are (where they offer AMX: exact 40-column gemm on the main thread, a thread
/// created before the library's first call, a thread created after, a child after fork(), tiles
/// released after each call; elsewhere: the level refused) and with the tile-data permission
/// refused by a seccomp filter (the level refused, the best level still exact). Without AMX
/// hardware the first form runs natively only its refusal; tools/x86-emu-test.py runs both under
/// an emulated AMX CPU.
#[test]
fn amx_level_hygiene() {
    let exe = build_c_program("amx_smoke");
    for args in [&[][..], &["--deny"][..]] {
        let run = Command::new(&exe).args(args).output().expect("run amx_smoke");
        let stdout = String::from_utf8_lossy(&run.stdout);
        print!("{stdout}");
        assert!(run.status.success(), "amx_smoke {args:?} failed: {stdout}{}", String::from_utf8_lossy(&run.stderr));
        // it skips only off x86-64 Linux; there it checks the level or its refusal
        let verdict = if cfg!(all(target_os = "linux", target_arch = "x86_64")) { "checks passed" } else { "skipped" };
        assert!(stdout.contains(verdict), "amx_smoke {args:?}: no '{verdict}' line");
    }
}
