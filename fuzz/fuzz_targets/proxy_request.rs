#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| gateway::net::fuzz_proxy_request(data));
