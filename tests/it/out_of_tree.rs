//! A crate outside this repository builds from the docs alone (issue 35): the files of
//! docs/designs.md's section "Your own crate, outside this repository" are taken from the page
//! itself, written to a crate in a temporary folder, and built with cargo; its binary (the docs'
//! `src/main.rs`, fencesim's command line) simulates a bundled scenario's seed and must print
//! the expected verdict.
//!
//! The crate is put where the docs' empty `[workspace]` matters: in a folder under another
//! Cargo workspace's root (a throwaway one beside it in the temporary folder, not this
//! repository's). That the table is needed there is checked too: without it cargo refuses the
//! crate with the error the docs quote.
//!
//! The build uses this repository's target folder (`CARGO_TARGET_DIR`), so the third-party
//! crates the workspace already built are reused: the docs' `[profile.dev.package."*"]` is
//! fencesim's own (its `incremental = false` changes nothing for registry crates, which cargo
//! never builds incrementally), and the docs' `Cargo.lock` is fencesim's. fencesim's own crates
//! are built again, optimized: outside the workspace they are dependencies, not members, and
//! cargo names their artifacts apart from the workspace's (on a two-core machine 77 s and about
//! 80 MB the first time; after that only when their sources change, otherwise under a second).
//! `cargo test` releases the target folder's lock before it runs the tests, so the build does
//! not wait for it. The build inherits this test's environment: a `RUSTFLAGS` that the
//! workspace was built with replaces the docs' `.cargo/config.toml` there too, as it must for
//! the built crates to be reused.
//!
//! Without a `cargo` (the `CARGO` that `cargo test` sets, or one on `PATH`) the test says it
//! skipped and passes, except under `CI`, where it fails. Run from a build other than a debug
//! one (`cargo test --release`), it says it skipped and passes: there is no debug build of the
//! dependencies to reuse, and building them would take minutes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support;

/// The section of docs/designs.md that holds the files.
const SECTION: &str = "## Your own crate, outside this repository";

/// The placeholder the docs' `Cargo.toml` has for fencesim's checkout.
const CHECKOUT: &str = "/path/to/fencesim";

/// The docs' package name, and this test's (so that its binary in the shared target folder
/// says where it came from).
const DOCS_NAME: &str = "my-lock";
const NAME: &str = "fencesim-out-of-tree";

/// The files of the section: each code block right after a line that is only a path in
/// backticks and a colon (`` `Cargo.toml`: ``), by that path.
fn docs_files() -> BTreeMap<String, String> {
    let page = std::fs::read_to_string(support::root().join("docs/designs.md")).unwrap();
    let start = page
        .find(&format!("\n{SECTION}\n"))
        .unwrap_or_else(|| panic!("docs/designs.md has no section {SECTION:?}"));
    let rest = &page[start + 1 + SECTION.len()..];
    let section = &rest[..rest.find("\n## ").unwrap_or(rest.len())];
    let lines: Vec<&str> = section.lines().collect();
    let mut files = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(path) = line
            .strip_prefix('`')
            .and_then(|l| l.strip_suffix("`:"))
            .filter(|p| !p.contains('`'))
        else {
            continue;
        };
        let fence = lines[i + 1..].iter().find(|l| !l.trim().is_empty());
        if !fence.is_some_and(|l| l.starts_with("```")) {
            continue;
        }
        let body: Vec<&str> = lines[i + 1..]
            .iter()
            .skip_while(|l| !l.starts_with("```"))
            .skip(1)
            .take_while(|l| !l.starts_with("```"))
            .copied()
            .collect();
        let previous = files.insert(path.to_owned(), body.join("\n") + "\n");
        assert!(previous.is_none(), "{SECTION:?} shows {path} twice");
    }
    files
}

/// The `cargo` to run: the one running this test, else the one on `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// This test binary's target folder, if it is a debug build's (`TARGET/debug/deps/it-...`):
/// the folder whose built dependencies the crate's build reuses.
fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile = exe.parent()?.parent()?;
    (profile.file_name()? == "debug").then(|| profile.parent().map(Path::to_path_buf))?
}

fn text(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// (name, version) of every `[[package]]` of a Cargo.lock.
fn locked(lock: &str) -> Vec<(String, String)> {
    let field = |block: &str, key: &str| {
        block
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{key} = \"")))
            .map(|v| v.trim_end_matches('"').to_owned())
    };
    lock.split("[[package]]")
        .skip(1)
        .map(|block| {
            (
                field(block, "name").expect("name"),
                field(block, "version").expect("version"),
            )
        })
        .collect()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn a_crate_outside_the_repository_builds_and_runs_from_the_docs_alone() {
    let files = docs_files();
    for needed in ["Cargo.toml", ".cargo/config.toml", "src/main.rs"] {
        assert!(
            files.contains_key(needed),
            "{SECTION:?} of docs/designs.md shows no `{needed}`: (found {:?})",
            files.keys().collect::<Vec<_>>()
        );
    }
    assert!(
        files["Cargo.toml"].matches(CHECKOUT).count() == 1
            && files["Cargo.toml"].contains(&format!("name = \"{DOCS_NAME}\"")),
        "the docs' Cargo.toml names the package {DOCS_NAME:?} and fencesim's checkout \
         {CHECKOUT:?} once:\n{}",
        files["Cargo.toml"]
    );

    // Whether it can run at all here, before anything is written.
    let Some(target) = target_dir() else {
        eprintln!(
            "skipped: this test builds a crate reusing the target folder of a debug build; \
             this binary is {:?}",
            std::env::current_exe()
        );
        return;
    };
    match cargo().arg("--version").output() {
        Ok(o) if o.status.success() => {}
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "no cargo to build the out-of-tree crate with: {other:?}"
            );
            eprintln!("skipped: no cargo to build the out-of-tree crate with ({other:?})");
            return;
        }
    }

    // A throwaway workspace in the temporary folder, with the docs' crate in a folder under it.
    let base = std::env::temp_dir().join(format!("fencesim-out-of-tree-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    write(
        &base.join("Cargo.toml"),
        "# Another project's workspace, of which the crate below is not a member.\n\
         [workspace]\nresolver = \"2\"\n",
    );
    let krate = base.join("my-lock");
    let checkout = support::root().canonicalize().unwrap();
    let as_named = |text: &str| {
        text.replace(CHECKOUT, checkout.to_str().unwrap())
            .replace(DOCS_NAME, NAME)
            .replace(&DOCS_NAME.replace('-', "_"), &NAME.replace('-', "_"))
    };
    for (path, text) in &files {
        if path != "src/lib.rs" {
            write(&krate.join(path), &as_named(text));
        }
    }
    // The user's own design is the user's: this library registers the built-in designs only.
    write(
        &krate.join("src/lib.rs"),
        "//! The design of the docs' crate would go here.\n\
         use fencesim::registry::Registry;\n\n\
         /// The designs of the crate's command line.\n\
         pub fn registry() -> Registry {\n    Registry::built_in()\n}\n",
    );
    let fencesim_lock = std::fs::read_to_string(checkout.join("Cargo.lock")).unwrap();
    write(&krate.join("Cargo.lock"), &fencesim_lock);

    // Cargo reads .cargo/config.toml from the folder it runs in: the docs say to run it there.
    // `cargo test` runs this test with what fencesim's build script sets for fencesim's crate
    // (`FENCESIM_GIT_COMMIT`), which no user's shell has: fencesim-engine reads it at compile
    // time, and with it the build would differ from a user's (and rebuild it when it changes).
    let cargo_in_crate = |args: &[&str]| {
        let out = cargo()
            .args(args)
            .current_dir(&krate)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("FENCESIM_GIT_COMMIT")
            .output()
            .expect("run cargo");
        (out.status.code(), text(&out))
    };

    // Without the empty [workspace], cargo refuses the crate, as the docs say.
    let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).unwrap();
    let without = manifest.replace("\n[workspace]\n", "\n");
    assert_ne!(
        without, manifest,
        "the docs' Cargo.toml has an empty [workspace] table"
    );
    write(&krate.join("Cargo.toml"), &without);
    let (code, out) = cargo_in_crate(&["metadata", "--offline", "--no-deps", "--format-version=1"]);
    assert!(
        code != Some(0) && out.contains("believes it's in a workspace when it's not"),
        "without [workspace], under another workspace's root, cargo should refuse:\n{out}"
    );
    write(&krate.join("Cargo.toml"), &manifest);

    // With it: build and run. `--offline`: the copied Cargo.lock names only crates the
    // workspace's own build already downloaded, so nothing needs the network.
    let (code, out) = cargo_in_crate(&[
        "run",
        "--offline",
        "--",
        "run",
        "pause-unfenced",
        "--seed",
        "0",
        "--out",
        base.join("reports").to_str().unwrap(),
    ]);
    assert!(
        code == Some(1)
            && out.contains("pause-unfenced seed 0: INVALID (1 violation: stale-write-accepted)"),
        "the out-of-tree crate in {} should build, and its binary find pause-unfenced's \
         violation (exit 1); cargo run exited {code:?}:\n{out}",
        krate.display()
    );
    eprintln!(
        "{}",
        out.lines()
            .filter(|l| l.trim_start().starts_with("Compiling") || l.contains("Finished"))
            .collect::<Vec<_>>()
            .join("\n")
    );

    // Cargo kept the versions of fencesim's Cargo.lock: it added the crate and dropped what the
    // crate does not use, and resolved nothing anew.
    let lock = std::fs::read_to_string(krate.join("Cargo.lock")).unwrap();
    let fencesim_locked = locked(&fencesim_lock);
    let new: Vec<_> = locked(&lock)
        .into_iter()
        .filter(|p| p.0 != NAME && !fencesim_locked.contains(p))
        .collect();
    assert!(
        new.is_empty(),
        "the crate's Cargo.lock has versions fencesim's has not: {new:?}"
    );

    std::fs::remove_dir_all(&base).unwrap();
}
