#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::audit::verify::fuzz_verify(data));
