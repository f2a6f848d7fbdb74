//! Records the git commit the engine is built from, for report.json's `tool.git_commit`
//! (`report::tool`). It lives in the crate that reads it: a build script's environment reaches
//! its own crate only (when it sat at the root, every report said `null`).
//!
//! The commit is read again when the checkout's HEAD or branches move. Outside a checkout (a
//! git dependency's sources, a tarball) there is nothing to watch, and the script runs once.
//! (It cannot refuse a build without `--cfg madsim` early: cargo builds madsim, which fails
//! first without the flag, before it runs this script. README says what that failure means.)
use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    for watched in ["../../.git/HEAD", "../../.git/refs/heads"] {
        // A missing path would count as changed on every build, rebuilding the engine each time.
        if Path::new(watched).exists() {
            println!("cargo:rerun-if-changed={watched}");
        }
    }
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
