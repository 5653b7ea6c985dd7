//! libFuzzer entry for [`roce_fuzz::model::run`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::model::run(data));
