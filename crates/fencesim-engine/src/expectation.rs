//! Whether a checked run meets its scenario's `[expect]`.

use fencesim_checker::{CheckResult, Verdict};
use fencesim_scenario::{Expectation, ExpectedVerdict};

/// `valid` is met by a valid verdict; `invalid` by an invalid verdict that includes every
/// listed violation kind (finding more kinds is allowed). Either way no kind listed in
/// `absent` may be found.
pub fn is_met(expect: &Expectation, result: &CheckResult) -> bool {
    let found = result.kinds();
    if expect.absent.iter().any(|k| found.contains(k)) {
        return false;
    }
    match expect.verdict {
        ExpectedVerdict::Valid => result.verdict == Verdict::Valid,
        ExpectedVerdict::Invalid => {
            let found = result.kinds();
            result.verdict == Verdict::Invalid
                && expect.violations.iter().all(|k| found.contains(k))
        }
    }
}
