#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| if let Err(e) = gateway::audit::verify::fuzz_verify(data) { panic!("{e}") });
