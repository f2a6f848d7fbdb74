//! The curated examples in reports/examples/ still come out the same: same verdict, same
//! violations, byte-identical history.

use crate::support;

use fencesim::run::{evaluate, RunOptions};

#[test]
fn every_curated_example_replays_to_the_same_verdict_and_history() {
    let root = support::root().join("reports/examples");
    let mut seen = 0;
    for scenario_dir in std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
    {
        for seed_dir in std::fs::read_dir(&scenario_dir)
            .unwrap()
            .map(|e| e.unwrap().path())
        {
            let stored = support::json(&seed_dir.join("report.json"));
            let name = stored["scenario"]["name"].as_str().unwrap();
            let seed = stored["seed"].as_u64().unwrap();
            let (_, text) =
                fencesim::bundled::find(name).expect("examples come from bundled scenarios");
            let scenario = crate::support::engine().parse_scenario(text, name).unwrap();
            let opts = RunOptions {
                out: support::unwritten_dir("examples"),
                scenario_arg: name.into(),
                check_determinism: false,
                swarm: false,
                cancel: Default::default(),
            };
            let fresh = evaluate(crate::support::engine(), &scenario, seed, &opts).unwrap();
            let fresh_json = serde_json::to_value(&fresh.report).unwrap();
            for field in ["verdict", "violations", "unsafe_exposure", "counts"] {
                assert_eq!(
                    fresh_json[field], stored[field],
                    "{name} seed {seed}: {field} changed"
                );
            }
            assert_eq!(
                fresh.report.history.sha256,
                stored["history"]["sha256"].as_str().unwrap(),
                "{name} seed {seed}: history changed"
            );
            let on_disk = std::fs::read(seed_dir.join("history.jsonl")).unwrap();
            assert_eq!(
                fresh.history, on_disk,
                "{name} seed {seed}: history.jsonl differs from the stored one"
            );
            seen += 1;
        }
    }
    assert_eq!(seen, 9, "the nine curated examples");
}
