#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| if let Err(e) = gateway::broker::tools::fs::fuzz_edit_undo(data) { panic!("{e}") });
