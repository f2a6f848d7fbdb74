#![no_main]
//! See fencesim_fuzz::history_jsonl.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| fencesim_fuzz::history_jsonl(data));
