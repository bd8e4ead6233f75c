#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::broker::tools::fs::worker::fuzz_frames(data));
