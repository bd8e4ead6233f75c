#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::fsops::text::fuzz_edit(data));
