//! Refuses at once a build without `--cfg madsim`, and records the git commit the binary is
//! built from, for report.json (absent outside a checkout).
use std::process::Command;

fn main() {
    // A RUSTFLAGS variable replaces .cargo/config.toml's `--cfg madsim`; madsim then builds
    // its non-simulated half and the build fails minutes later deep inside it. This script
    // runs within seconds of the start, so the user learns why before waiting for that.
    if std::env::var_os("CARGO_CFG_MADSIM").is_none() {
        eprintln!(
            "error: fencesim builds only under `--cfg madsim` (madsim's simulated runtime). \
             The repository's .cargo/config.toml sets it, but a RUSTFLAGS environment variable \
             replaces that setting: unset RUSTFLAGS, or include the flag: \
             RUSTFLAGS=\"$RUSTFLAGS --cfg madsim\""
        );
        std::process::exit(1);
    }
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok());
    if let Some(commit) = commit {
        println!("cargo:rustc-env=FENCESIM_GIT_COMMIT={}", commit.trim());
    }
}
