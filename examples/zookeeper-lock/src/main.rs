//! fencesim's command line, with the ZooKeeper design beside the built-in ones: every command
//! (`run`, `explore`, `shrink`, `replay`, `check`, `list --designs`) knows `kind = "zookeeper"`.

use std::process::ExitCode;

fn main() -> ExitCode {
    fencesim::cli::main(zookeeper_lock::registry())
}
