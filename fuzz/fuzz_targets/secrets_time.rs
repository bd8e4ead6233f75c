#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::secrets::fuzz_time_budget(data));
