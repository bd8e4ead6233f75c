#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::broker::fs::fuzz_edit_undo(data));
