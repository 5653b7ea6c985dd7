//! libFuzzer entry for [`roce_fuzz::completer::run`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::completer::run(data));
