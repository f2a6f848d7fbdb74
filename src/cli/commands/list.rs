//! `fencesim list`: the bundled scenarios and their expectations.

use fencesim::{bundled, exit};

pub(crate) fn list() -> u8 {
    for (file, text) in bundled::SCENARIOS {
        match fencesim::parse_scenario(text, file) {
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
                eprintln!("error: bundled scenario is invalid: {e}");
                return exit::SIM_FAILED;
            }
        }
    }
    exit::VALID
}
