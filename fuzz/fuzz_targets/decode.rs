//! libFuzzer entry for [`roce_fuzz::decode`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::decode(data));
