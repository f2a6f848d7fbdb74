#![no_main]
//! See fencesim_fuzz::scenario.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fencesim_fuzz::scenario(data));
