//! `fencesim list`: the bundled scenarios and their expectations; `--designs`: the lock
//! designs and resources of the registry in use, with their knobs.

use fencesim::design::Designs;
use fencesim::{bundled, exit, Engine};

/// `fencesim list`'s arguments.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The designs (`[lock_service] kind`) and resources (`[resource] mode`) instead.
    #[arg(long)]
    designs: bool,
}

/// `fencesim list`: the bundled scenarios, or with `--designs` the designs and resources.
pub(crate) fn exec(engine: &Engine, args: &Args) -> u8 {
    match args.designs {
        false => list(engine),
        true => designs(engine),
    }
}

fn list(engine: &Engine) -> u8 {
    for (file, text) in bundled::SCENARIOS {
        match engine.parse_scenario(text, file) {
            Ok(s) => {
                let mut expect = format!("{:?}", s.expect.verdict).to_lowercase();
                if !s.expect.violations.is_empty() {
                    let kinds: Vec<_> = s.expect.violations.iter().map(|k| k.as_str()).collect();
                    expect = format!("{expect} ({})", kinds.join(", "));
                }
                let flat = s.description.replace('\n', " ");
                let summary = flat.split(". ").next().unwrap_or("");
                say!(
                    "{:<32} seeds {}..{:<5} expect {expect}\n    scenarios/{file}: {summary}.",
                    s.name,
                    s.seeds.start,
                    s.seeds.end
                );
            }
            Err(e) => {
                complain!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        }
    }
    exit::VALID
}

/// Every design and resource a scenario may name, as `kind: about` and its knobs.
fn designs(engine: &Engine) -> u8 {
    let active = engine.registry();
    say!("[lock_service] kind:");
    for d in active.all() {
        say!("  {:<16} {}", d.kind(), d.about());
        say!("  {:<16} knobs: {}", "", names(d.knob_names()));
        if !d.client_knob_names().is_empty() {
            say!(
                "  {:<16} client knobs: {}",
                "",
                names(d.client_knob_names())
            );
        }
        // The design's own safepoints, as its default knobs declare them (a scenario may
        // name them in `after` and `before`).
        let resolved = d.resolve(&mut fencesim_design::Knobs::default(), 10_000);
        if let Ok((shape, _)) = resolved {
            for point in shape.safepoints {
                let side = match point.side {
                    fencesim_design::SafepointSide::Client => "client",
                    fencesim_design::SafepointSide::Service => "service",
                };
                say!(
                    "  {:<16} safepoint {:?} ({side}): {}",
                    "",
                    point.name,
                    point.about
                );
            }
        }
    }
    say!("[resource] mode:");
    for r in active.all_resources() {
        say!("  {:<16} {}", r.mode(), r.about());
        say!("  {:<16} knobs: {}", "", names(r.knob_names()));
    }
    exit::VALID
}

/// Knob names as a list, or `none`.
fn names(knobs: &[&str]) -> String {
    match knobs {
        [] => "none".to_owned(),
        _ => knobs.join(", "),
    }
}
