//! libFuzzer entry for [`roce_fuzz::cabi::run`] (with the counting allocator its leak check
//! reads).
#![no_main]

#[global_allocator]
static ALLOC: roce_fuzz::cabi::CountingAlloc = roce_fuzz::cabi::CountingAlloc;

libfuzzer_sys::fuzz_target!(|data: &[u8]| roce_fuzz::cabi::run(data));
