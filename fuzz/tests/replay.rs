//! Replays every file of every target's corpus (`fuzz/corpus/<target>/`) and of its crash
//! artifacts (`fuzz/artifacts/<target>/`, when present) through the target bodies, so CI runs
//! them on stable Rust without a fuzzer.
use std::path::Path;

/// The `cabi` target's leak check counts live allocations through it.
#[global_allocator]
static ALLOC: roce_fuzz::cabi::CountingAlloc = roce_fuzz::cabi::CountingAlloc;

#[test]
fn replay_corpora() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut ran = 0;
    for target in roce_fuzz::TARGETS {
        for dir in [
            root.join("corpus").join(target),
            root.join("artifacts").join(target),
        ] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut paths: Vec<_> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
            paths.sort();
            for p in paths.iter().filter(|p| p.is_file()) {
                let data = std::fs::read(p).unwrap();
                let r = std::panic::catch_unwind(|| roce_fuzz::run(target, &data));
                assert!(r.is_ok(), "{target}: {} panics", p.display());
                ran += 1;
            }
        }
    }
    assert!(ran > 0, "no corpus files found under {}", root.display());
}
