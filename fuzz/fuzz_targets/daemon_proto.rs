#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::serve::proto::fuzz_decode(data));
