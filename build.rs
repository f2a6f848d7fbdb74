//! Records the git commit the binary is built from, for report.json (absent outside a checkout).
//! (It cannot refuse a build without `--cfg madsim` early: cargo builds madsim, which fails
//! first without the flag, before it runs this script. README says what that failure means.)
use std::process::Command;

fn main() {
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
