//! Random inputs through the NIC targets and `cabi` on stable Rust (a poor man's fuzzer that CI
//! runs): `ROCE_FUZZ_SMOKE=n` inputs per target (default 200 debug / 2000 release; a tenth of
//! that for `cabi`, whose inputs open a device each).

/// The `cabi` target's leak check counts live allocations through it.
#[global_allocator]
static ALLOC: roce_fuzz::cabi::CountingAlloc = roce_fuzz::cabi::CountingAlloc;
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

fn smoke(target: &str, max_len: usize) {
    let mut default = if cfg!(debug_assertions) { 200 } else { 2000 };
    if target == "cabi" {
        default /= 10;
    }
    let n: u64 = std::env::var("ROCE_FUZZ_SMOKE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    for i in 0..n {
        let mut s = 0x9E37_79B9_7F4A_7C15 ^ (i + 1).wrapping_mul(0x2545_F491_4F6C_DD1D);
        let len = (xorshift(&mut s) as usize) % max_len;
        let data: Vec<u8> = (0..len).map(|_| xorshift(&mut s) as u8).collect();
        let r = std::panic::catch_unwind(|| roce_fuzz::run(target, &data));
        if r.is_err() {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("artifacts")
                .join(target);
            std::fs::create_dir_all(&dir).unwrap();
            let p = dir.join(format!("smoke-{i}"));
            std::fs::write(&p, &data).unwrap();
            panic!("{target}: input {i} panics (saved as {})", p.display());
        }
    }
}

#[test]
fn responder_random_inputs() {
    smoke("responder", 4096);
}

#[test]
fn completer_random_inputs() {
    smoke("completer", 2048);
}

#[test]
fn model_random_inputs() {
    smoke("model", 1024);
}

#[test]
fn cabi_random_inputs() {
    smoke("cabi", 2048);
}
