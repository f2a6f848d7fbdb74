//! Compiles fencesim's clock shim (`crates/fencesim-clockshim/src/lib.rs`, a file that needs no
//! crate) with rustc alone into this build's output folder, so that the crate embeds it
//! (`redis_server::EMBEDDED_SHIM`) and an installed fencesim has everything live mode's clock
//! faults need: `cargo install` installs binaries, never a library. On a target the shim is
//! not written for, or if rustc fails, nothing is embedded (the cfg stays unset) and live
//! mode looks for the shim by `FENCESIM_CLOCKSHIM` or for libfaketime, as it says.
use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(fencesim_embedded_clockshim)");
    let source = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"))
        .join("../fencesim-clockshim/src/lib.rs");
    println!("cargo:rerun-if-changed={}", source.display());
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if os != "linux" || !matches!(arch.as_str(), "x86_64" | "aarch64") || !source.exists() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo"))
        .join("libfencesim_clockshim.so");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let target = std::env::var("TARGET").expect("set by cargo");
    let built = Command::new(rustc)
        .args([
            "--crate-name",
            "fencesim_clockshim",
            "--crate-type",
            "cdylib",
        ])
        .args([
            "--edition",
            "2021",
            "-C",
            "opt-level=2",
            "-C",
            "strip=symbols",
        ])
        .args(["--cap-lints", "allow", "--target", &target, "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .is_ok_and(|s| s.success());
    if built {
        println!("cargo:rustc-cfg=fencesim_embedded_clockshim");
    } else {
        println!(
            "cargo:warning=fencesim's clock shim did not build; live clock faults will need \
             FENCESIM_CLOCKSHIM or libfaketime"
        );
    }
}
