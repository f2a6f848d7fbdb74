#![no_main]
//! See fencesim_fuzz::history_edn.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fencesim_fuzz::history_edn(data));
