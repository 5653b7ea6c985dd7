//! The seed corpus of the `cabi` target (`fuzz/corpus/cabi/`), generated here: hand-written
//! call sequences ([`roce_fuzz::cabi::Op`] scripts encoded with `cabi::encode`) that reach
//! posting and polling on every QP type, SRQs, completion channels, the EBUSY destroy orders,
//! NULL and destroyed handles, CQ overflow, RESET with WRs outstanding and two contexts; plus
//! pseudo-random byte strings. The scripts live in `cabi_corpus/` (op builders in `build.rs`, one
//! file per group of scripts). `cabi_seeds_are_generated_by_code` checks the committed files
//! match (other files in the directory, such as regression inputs, are left alone); to
//! (re)write them:
//!
//! ```text
//! ROCE_REGEN_CORPUS=1 cargo test -p roce-fuzz --test cabi_corpus
//! ```
use roce_fuzz::cabi::{self, Op};
use std::path::Path;

#[path = "cabi_corpus/build.rs"]
mod build;
#[path = "cabi_corpus/contexts.rs"]
mod contexts;
#[path = "cabi_corpus/data.rs"]
mod data;
#[path = "cabi_corpus/invalid.rs"]
mod invalid;
#[path = "cabi_corpus/states.rs"]
mod states;
#[path = "cabi_corpus/wr.rs"]
mod wr;

use build::pair;

#[global_allocator]
static ALLOC: cabi::CountingAlloc = cabi::CountingAlloc;

/// Every seed script, `(name, ops)`.
fn scripts() -> Vec<(&'static str, Vec<Op>)> {
    let mut v = Vec::new();
    data::scripts(&mut v);
    invalid::scripts(&mut v);
    states::scripts(&mut v);
    contexts::scripts(&mut v);
    wr::scripts(&mut v);
    v
}

fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

/// `(name, bytes)` of every seed.
fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = scripts()
        .into_iter()
        .map(|(n, ops)| (format!("script-{n}"), cabi::encode(&ops)))
        .collect();
    // the pair set-up followed by random bytes: random ops on connected QPs
    let base = cabi::encode(&pair(0));
    for i in 0..8u64 {
        let mut s = 0xCAB1_0000 + i;
        let mut b = base.clone();
        b.extend((0..[200usize, 600, 1500, 3000][i as usize % 4]).map(|_| xorshift(&mut s) as u8));
        out.push((format!("pair-random-{i:02}"), b));
    }
    out.push(("zeros".to_string(), vec![0u8; 256]));
    out.push(("ones".to_string(), vec![0xFF; 256]));
    for i in 0..8u64 {
        let mut s = 0xCAB1_1000 + i;
        let len = [64usize, 256, 1024, 3000][i as usize % 4];
        out.push((
            format!("random-{i:02}"),
            (0..len).map(|_| xorshift(&mut s) as u8).collect(),
        ));
    }
    out
}

#[test]
fn scripts_round_trip() {
    for (name, ops) in scripts() {
        assert_eq!(cabi::decode(&cabi::encode(&ops)), ops, "{name}");
    }
}

#[test]
fn cabi_seeds_are_generated_by_code() {
    let regen = std::env::var_os("ROCE_REGEN_CORPUS").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join("cabi");
    for (name, bytes) in seeds() {
        let path = dir.join(&name);
        if regen {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!("{}: {e} (regenerate: ROCE_REGEN_CORPUS=1)", path.display())
            });
            assert_eq!(committed, bytes, "{} is stale", path.display());
        }
        let st = cabi::run_stats(&bytes);
        eprintln!("{name}: {st:?}");
        if let Some(&(_, sent, received)) = MOVES_DATA.iter().find(|(n, ..)| name == *n) {
            assert!(
                st.sent >= sent && st.received >= received,
                "{name}: {st:?}, expected at least {sent} sends and {received} receives completed"
            );
        }
    }
}

/// Scripts whose data must move: (seed, successful send completions, receive completions).
const MOVES_DATA: &[(&str, usize, usize)] = &[
    ("script-rc-send-recv", 2, 2),
    ("script-rc-write-read-atomic", 4, 1),
    ("script-uc-write-imm-send", 2, 2),
    ("script-ud-send-ah", 1, 1),
    ("script-srq", 2, 2),
    ("script-comp-channel", 1, 1),
    ("script-inline", 2, 1),
    ("script-two-contexts", 2, 1),
    ("script-reset-and-err", 1, 1),
    ("script-wr-api", 7, 2),
];
