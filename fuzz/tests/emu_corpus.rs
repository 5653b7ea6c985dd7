//! The seed corpora of the NIC targets (`responder`, `completer`, `model`), generated here
//! from fixed seeds: the targets read their input through `arbitrary::Unstructured`, so any
//! bytes are a valid scenario; the seeds mix a few shapes (all-zero = in-order basics, long
//! random, short random, bytes biased toward small choices) so the fuzzer starts from every
//! branch of the input decoder. `seeds_are_generated_by_code` checks the committed files match;
//! to (re)write them:
//!
//! ```text
//! ROCE_REGEN_CORPUS=1 cargo test -p roce-fuzz --test emu_corpus
//! ```
use std::path::Path;

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// `(target, name, bytes)` of every seed.
fn seeds() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for (t, target) in ["responder", "completer", "model"].into_iter().enumerate() {
        out.push((target, "zeros".to_string(), vec![0u8; 512]));
        out.push((target, "ones".to_string(), vec![0xFF; 256]));
        for i in 0..12u64 {
            let mut s = 0xC0FF_EE00 + 0x1000 * t as u64 + i;
            let len = [64usize, 256, 1024, 3000][i as usize % 4];
            let small = i % 3 == 2;
            let bytes = (0..len)
                .map(|_| {
                    let v = xorshift(&mut s) as u8;
                    if small {
                        v & 0x0F
                    } else {
                        v
                    }
                })
                .collect();
            out.push((target, format!("seed-{i:02}"), bytes));
        }
    }
    out
}

#[test]
fn seeds_are_generated_by_code() {
    let regen = std::env::var_os("ROCE_REGEN_CORPUS").is_some();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    for (target, name, bytes) in seeds() {
        let path = root.join(target).join(&name);
        if regen {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (regenerate: ROCE_REGEN_CORPUS=1)", path.display())
            });
            assert_eq!(committed, bytes, "{} is stale", path.display());
        }
        roce_fuzz::run(target, &bytes);
    }
}
