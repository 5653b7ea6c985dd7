//! libFuzzer entry for [`roce_fuzz::responder::run`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::responder::run(data));
