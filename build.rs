//! Build script: links the C++ runtime that Vectorscan (the `vectorscan` feature) is written
//! against. hyperscan-sys links `libhs` as pkg-config describes it, which names no C++ runtime;
//! the gateway is a static executable (see .cargo/config.toml), so the linker takes `libhs.a`
//! and needs `libstdc++.a` beside it.
fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if cfg!(feature = "vectorscan") {
        println!("cargo::rustc-link-lib=stdc++");
    }
}
