//! Build script. With the `abi-check` feature it runs bindgen on `include/ggml_t2p.h` so that
//! `ffi::abi_check` can prove, at compile time, that the header and the Rust exports agree.

fn main() {
    println!("cargo:rerun-if-changed=include/ggml_t2p.h");
    println!("cargo:rerun-if-changed=build.rs");
    // Tests that compile C against the staticlib need to know what they are building for.
    for var in ["TARGET", "HOST"] {
        println!("cargo:rustc-env=GGML_T2P_BUILD_{var}={}", std::env::var(var).unwrap_or_default());
    }
    #[cfg(feature = "abi-check")]
    {
        let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
        bindgen::Builder::default()
            .header("include/ggml_t2p.h")
            .allowlist_function("ggml_t2p_.*")
            .allowlist_var("GGML_T2P_.*")
            // the plugin's opaque type is the crate's own (ffi::abi_check names it)
            .blocklist_type("ggml_t2p_plugin")
            // so is the tensor view (its layout is asserted in ffi::abi_check)
            .blocklist_type("ggml_t2p_tensor_view")
            .default_macro_constant_type(bindgen::MacroTypeVariation::Signed)
            .use_core()
            .generate()
            .expect("bindgen could not parse include/ggml_t2p.h (libclang is needed for the abi-check feature)")
            .write_to_file(out.join("ggml_t2p_bindings.rs"))
            .expect("write bindings");
    }
}
