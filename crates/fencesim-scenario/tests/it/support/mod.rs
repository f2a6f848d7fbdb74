//! The built-in designs and resources, from the one list the `fencesim` crate's registry is
//! built from (`fencesim_builtin`), for parsing.

use fencesim_scenario::Catalog;

/// Every built-in design and resource.
pub fn designs() -> Catalog {
    fencesim_builtin::catalog()
}
