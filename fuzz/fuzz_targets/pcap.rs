//! libFuzzer entry for [`roce_fuzz::pcap`].
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::pcap(data));
