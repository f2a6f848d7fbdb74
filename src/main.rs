//! The `fencesim` binary: the command line ([`fencesim::cli::main`]) with the built-in designs.

use std::process::ExitCode;

/// mimalloc instead of the system allocator. A simulation allocates and frees small objects
/// (messages, records, tasks) all the time, on a fresh thread per seed; glibc's allocator gave
/// each seed about 350 page faults and cost fencesim a quarter of its time per message
/// (docs/performance.md). The library crates leave the choice to their users.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    fencesim::cli::main(fencesim::registry::Registry::built_in())
}
