//! The scenarios shipped in `scenarios/`, compiled into the binary so `fencesim list` and
//! `fencesim run <name>` work from any directory. A test checks this list against the folder.

/// (file name, TOML text) of every bundled scenario, in catalogue order.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "pause-unfenced.toml",
        include_str!("../scenarios/pause-unfenced.toml"),
    ),
    (
        "pause-fenced.toml",
        include_str!("../scenarios/pause-fenced.toml"),
    ),
    (
        "delayed-write-unfenced.toml",
        include_str!("../scenarios/delayed-write-unfenced.toml"),
    ),
    (
        "delayed-write-fenced.toml",
        include_str!("../scenarios/delayed-write-fenced.toml"),
    ),
];

/// The bundled scenario called `name` (with or without `.toml`), as (file name, text).
pub fn find(name: &str) -> Option<(&'static str, &'static str)> {
    let file = if name.ends_with(".toml") {
        name.to_owned()
    } else {
        format!("{name}.toml")
    };
    SCENARIOS.iter().copied().find(|(f, _)| *f == file)
}
