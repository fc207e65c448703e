//! The golden vectors of `tests/golden/` (made by the fork's own reference C code; what each file
//! holds and how it was made: tests/golden/README.md) must all pass bit for bit. Each test prints
//! how many cases of its set passed.

mod common;

use common::{level_names, levels_for, same_bytes, Golden, Rng};
use ggml_t2p::format::{as_bytes, BlockPq2_0, BlockPtq1_0, BlockQ8K, BlockT2p, BlockX16};
use ggml_t2p::reference::{
    dequantize_row_pq2_0, dequantize_row_ptq1_0, quantize_row_q8_k, vec_dot_pq2_0_q8_k, Contract,
};
use ggml_t2p::repack::{
    ptq1_0_to_pq2_0, repack_pq2_0_to_t2p, repack_pq2_0_to_x16, repacked_blocks, unpack_t2p_to_pq2_0, Layout,
};
use ggml_t2p::{kernels, PackedWeights};

fn report(set: &str, passed: usize, total: usize, failures: &[String]) {
    report_as(set, "bit-identical", passed, total, failures);
}

fn report_as(set: &str, what: &str, passed: usize, total: usize, failures: &[String]) {
    println!("golden {set}: {passed}/{total} cases {what}");
    assert!(
        failures.is_empty() && passed == total,
        "golden {set}: {} failed, first: {}",
        failures.len(),
        failures.join("\n")
    );
}

fn q8k_set(file: &str, contract: Contract) {
    let mut g = Golden::open(file, b"Q8KQ");
    let (mut passed, mut failures) = (0, Vec::new());
    for case in 0..g.count {
        let tag = g.u32();
        let n = g.u32() as usize;
        let x = g.f32s(n);
        let want: Vec<BlockQ8K> = g.blocks(n / 256);
        let mut got = vec![BlockQ8K::default(); n / 256];
        common::bytes_mut(&mut got).fill(0x5A); // the generator pre-filled its output like this
        quantize_row_q8_k(&x, &mut got, contract).unwrap();
        if same_bytes(&got, &want) {
            passed += 1;
        } else {
            failures.push(format!("case {case} (tag {tag:#x}, n {n}) differs"));
        }
    }
    g.finish();
    report(file, passed, g.count, &failures);
}

#[test]
fn q8k_quant_fma() {
    q8k_set("q8k_quant.fma.bin", Contract::Fused);
}

#[test]
fn q8k_quant_nofma() {
    q8k_set("q8k_quant.nofma.bin", Contract::Unfused);
}

/// The reference dot, and (fused file) the same row through every layout and kernel level: the
/// case row is row 0 of a 4-row matrix (rows 1..3 random; in X16 the tile's rows 4..16 are
/// padding), repacked and run with gemv and with a 5-column gemm (the case's activations in
/// column 2).
fn dot_set(file: &str, contract: Contract, kernels_too: bool) {
    let mut g = Golden::open(file, b"PQDK");
    let mut rng = Rng(0xD07);
    let (mut passed, mut failures, mut kernel_checks) = (0, Vec::new(), 0usize);
    for case in 0..g.count {
        let tag = g.u32();
        let n = g.u32() as usize;
        let w: Vec<BlockPq2_0> = g.blocks(n / 128);
        let a: Vec<BlockQ8K> = g.blocks(n / 256);
        let want = g.u32();
        let got = vec_dot_pq2_0_q8_k(&w, &a, contract).unwrap().to_bits();
        let mut ok = got == want;
        if !ok {
            failures.push(format!("case {case} (tag {tag:#x}, n {n}): reference {got:#010x}, want {want:#010x}"));
        }
        if kernels_too {
            let mut rows = common::random_pq2_0(&mut rng, 4, n);
            rows[..n / 128].copy_from_slice(&w);
            let mut t2p = vec![BlockT2p::default(); repacked_blocks(Layout::T2p, 4, n).unwrap()];
            repack_pq2_0_to_t2p(&rows, 4, n, &mut t2p).unwrap();
            let mut x16 = vec![BlockX16::default(); repacked_blocks(Layout::X16, 4, n).unwrap()];
            repack_pq2_0_to_x16(&rows, 4, n, &mut x16).unwrap();
            let mats = [PackedWeights::t2p(&t2p, 4, n).unwrap(), PackedWeights::x16(&x16, 4, n).unwrap()];
            let mut acts = common::random_acts(&mut rng, 5, n);
            acts[2 * (n / 256)..3 * (n / 256)].copy_from_slice(&a);
            for pw in &mats {
                for level in levels_for(pw.layout()) {
                    let mut y = [f32::NAN; 4];
                    kernels::gemv(level, pw, &a, &mut y, 0..4).unwrap();
                    let mut ys = vec![f32::NAN; 5 * 4];
                    let act = ggml_t2p::Activations::new(&acts, 5, n).unwrap();
                    kernels::gemm(level, pw, &act, &mut ys, 4, 0..4).unwrap();
                    kernel_checks += 1;
                    for (what, v) in [("gemv", y[0]), ("gemm", ys[2 * 4])] {
                        if v.to_bits() != want {
                            ok = false;
                            failures.push(format!(
                                "case {case}: {} {} {what} {:#010x}, want {want:#010x}",
                                pw.layout().name(),
                                level.name(),
                                v.to_bits()
                            ));
                        }
                    }
                }
            }
        }
        if ok {
            passed += 1;
        }
    }
    g.finish();
    if kernels_too {
        println!(
            "golden {file}: {kernel_checks} (case, layout, kernel level) runs through gemv and gemm, {:?}",
            level_names()
        );
    }
    report(file, passed, g.count, &failures);
}

#[test]
fn pq2_0_dot_fma_reference_and_kernels() {
    dot_set("pq2_0_dot_q8k.fma.bin", Contract::Fused, true);
}

#[test]
fn pq2_0_dot_nofma_reference() {
    dot_set("pq2_0_dot_q8k.nofma.bin", Contract::Unfused, false);
}

#[test]
fn pq2_0_dequant() {
    let mut g = Golden::open("pq2_0_dequant.bin", b"PQDQ");
    let (mut passed, mut failures) = (0, Vec::new());
    for case in 0..g.count {
        let tag = g.u32();
        let b: Vec<BlockPq2_0> = g.blocks(1);
        let want = g.f32s(128);
        let mut got = vec![0.0f32; 128];
        dequantize_row_pq2_0(&b, &mut got).unwrap();
        if as_bytes(&got) == as_bytes(&want) {
            passed += 1;
        } else {
            failures.push(format!("case {case} (tag {tag:#x}) differs"));
        }
    }
    g.finish();
    report("pq2_0_dequant.bin", passed, g.count, &failures);
}

/// PTQ1_0 dequantization, directly and through the PTQ1_0 -> PQ2_0 code conversion that the
/// T2P repack of PTQ1_0 uses (the same bits both ways).
#[test]
fn ptq1_0_dequant() {
    let mut g = Golden::open("ptq1_0_dequant.bin", b"PTDQ");
    let (mut passed, mut failures) = (0, Vec::new());
    for case in 0..g.count {
        let tag = g.u32();
        let b: Vec<BlockPtq1_0> = g.blocks(1);
        let want = g.f32s(128);
        let mut got = vec![0.0f32; 128];
        dequantize_row_ptq1_0(&b, &mut got).unwrap();
        let mut via_pq2 = vec![0.0f32; 128];
        dequantize_row_pq2_0(&[ptq1_0_to_pq2_0(&b[0])], &mut via_pq2).unwrap();
        if as_bytes(&got) == as_bytes(&want) && as_bytes(&via_pq2) == as_bytes(&want) {
            passed += 1;
        } else {
            failures.push(format!("case {case} (tag {tag:#x}) differs"));
        }
    }
    g.finish();
    report("ptq1_0_dequant.bin", passed, g.count, &failures);
}

/// The quantizer's blocks (we have no PTQ1_0 quantizer; the encoder is the fork's business) must
/// decode to the ternary value each input was rounded to: for tag 1 (pure ternary `t * s`) the
/// decoded weights equal the inputs exactly.
#[test]
fn ptq1_0_quant_blocks_decode() {
    let mut g = Golden::open("ptq1_0_quant.bin", b"PTQQ");
    let (mut passed, mut failures, mut exact, mut reencoded) = (0, Vec::new(), 0, 0);
    for case in 0..g.count {
        let tag = g.u32();
        let x = g.f32s(128);
        let b: Vec<BlockPtq1_0> = g.blocks(1);
        let mut y = vec![0.0f32; 128];
        dequantize_row_ptq1_0(&b, &mut y).unwrap();
        let d = b[0].d.to_f32();
        // Every decoded weight is -d, 0 or +d. Tag 1 inputs are exactly t * s (t in -1, 0, 1, one
        // s > 0 per block): the quantizer stores d = fp16(max |x|) = fp16(s), rounded to nearest
        // even, and each weight must decode to the bits of t * d, t being the sign of its input.
        // Bits, not a tolerance: the only rounding on the way is that of s to fp16, which the
        // first comparison reproduces exactly.
        let ternary = y.iter().all(|&v| v == -d || v == 0.0 || v == d);
        let matches_pure = tag != 1 || {
            let max_abs = x.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let sign = |v: f32| {
                if v > 0.0 {
                    1.0f32
                } else if v < 0.0 {
                    -1.0
                } else {
                    0.0
                }
            };
            b[0].d.to_bits() == half::f16::from_f32(max_abs).to_bits()
                && x.iter().zip(&y).all(|(&a, &v)| (sign(a) * d).to_bits() == v.to_bits())
        };
        if tag == 1 && matches_pure {
            exact += 1;
        }
        // our encoder (BlockPtq1_0::from_digits: unpacking a repacked PTQ1_0 tensor) writes the
        // quantizer's bytes for its digits
        let again = BlockPtq1_0::from_digits(b[0].d, &b[0].digits()).map(|e| as_bytes(&[e]).to_vec());
        let encodes = again.as_deref() == Some(as_bytes(&b));
        if encodes {
            reencoded += 1;
        }
        if ternary && matches_pure && encodes {
            passed += 1;
        } else {
            failures.push(format!("case {case} (tag {tag}) decodes wrong or re-encodes to other bytes"));
        }
    }
    g.finish();
    println!(
        "golden ptq1_0_quant.bin: {exact} pure-ternary (tag 1) cases decode bit for bit to sign(x) * fp16(max |x|); \
         {reencoded} re-encoded from their digits to the same bytes"
    );
    report_as(
        "ptq1_0_quant.bin",
        "decode to ternary values of their scale and re-encode to their bytes",
        passed,
        g.count,
        &failures,
    );
}

#[test]
fn t2p_pack() {
    let mut g = Golden::open("t2p_pack.bin", b"T2PK");
    let (mut passed, mut failures) = (0, Vec::new());
    for case in 0..g.count {
        let rows: Vec<BlockPq2_0> = g.blocks(4);
        let want: Vec<BlockT2p> = g.blocks(1);
        let mut got = vec![BlockT2p::default(); 1];
        repack_pq2_0_to_t2p(&rows, 4, 128, &mut got).unwrap();
        let mut back = vec![BlockPq2_0::default(); 4];
        unpack_t2p_to_pq2_0(&got, 4, 128, &mut back).unwrap();
        // the same rows through X16 (a padded tile) and back
        let mut x16 = vec![BlockX16::default(); 1];
        repack_pq2_0_to_x16(&rows, 4, 128, &mut x16).unwrap();
        let mut back16 = vec![BlockPq2_0::default(); 4];
        ggml_t2p::repack::unpack_x16_to_pq2_0(&x16, 4, 128, &mut back16).unwrap();
        if same_bytes(&got, &want) && same_bytes(&back, &rows) && same_bytes(&back16, &rows) {
            passed += 1;
        } else {
            failures.push(format!("case {case} differs"));
        }
    }
    g.finish();
    report("t2p_pack.bin", passed, g.count, &failures);
}
