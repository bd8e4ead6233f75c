#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::policy::fuzz_shell(data));
