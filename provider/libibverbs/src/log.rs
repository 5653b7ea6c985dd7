//! Diagnostics on stderr (never stdout: rdma-core removed provider output on stdout, #803).

#![forbid(unsafe_code)]

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::Mutex;

static WARNED: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

pub fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr(), "libibverbs (roce): {msg}");
}

/// Warns once per process that `verb` is not implemented (unless `ROCE_QUIET=1`).
pub fn unimplemented_once(verb: &'static str) {
    if std::env::var_os("ROCE_QUIET").is_some_and(|v| v == "1") {
        return;
    }
    let mut g = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if g.get_or_insert_with(HashSet::new).insert(verb) {
        let call = if verb.contains(' ') {
            verb.to_string()
        } else {
            format!("{verb}()")
        };
        warn(&format!(
            "{call} is not implemented by this emulated device; it returns an error"
        ));
    }
}

static MISUSE: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);

/// Warns once per process and `kind` about a program error (always shown: it explains an
/// error return the program is about to see).
pub fn misuse_once(kind: &'static str, msg: &str) {
    let mut g = MISUSE.lock().unwrap_or_else(|e| e.into_inner());
    if g.get_or_insert_with(HashSet::new).insert(kind) {
        warn(msg);
    }
}

static EXPLAINED: Mutex<Option<HashSet<String>>> = Mutex::new(None);

/// One `roce: <msg>.` line per process and message (unless `ROCE_QUIET=1`), as the runtime
/// explains the engine's diagnostics: why a verb the program called returned an error.
pub fn explain_once(msg: &str) {
    if std::env::var_os("ROCE_QUIET").is_some_and(|v| v == "1") {
        return;
    }
    let mut g = EXPLAINED.lock().unwrap_or_else(|e| e.into_inner());
    if g.get_or_insert_with(HashSet::new).insert(msg.to_string()) {
        let _ = writeln!(std::io::stderr(), "roce: {msg}.");
    }
}
