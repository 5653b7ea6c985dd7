//! Finding the shared test data and the external tools (tshark, python3 with scapy), and the
//! project-wide rule for missing prerequisites: with `CI=true` a missing prerequisite fails
//! the test; otherwise the test prints a loud SKIP message and returns.
use std::path::{Path, PathBuf};
use std::process::Command;

/// True when running under CI (`CI=true`).
pub fn in_ci() -> bool {
    std::env::var("CI").map(|v| v == "true").unwrap_or(false)
}

/// Applies the missing-prerequisite rule. Returns true when the prerequisite is there; when it
/// is not, panics under `CI=true` and otherwise prints a SKIP banner and returns false.
pub fn require(test: &str, what: &str, available: bool) -> bool {
    if available {
        return true;
    }
    if in_ci() {
        panic!(
            "{test}: prerequisite missing: {what} (CI=true: a missing prerequisite is a failure)"
        );
    }
    eprintln!();
    eprintln!("**********************************************************************");
    eprintln!("*** SKIP {test}: prerequisite missing: {what}");
    eprintln!("*** (under CI=true this is a failure)");
    eprintln!("**********************************************************************");
    eprintln!();
    false
}

/// The workspace root (the directory above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

/// The shared data directory: `$ROCE_SHARED_DIR`, else `<workspace root>/../shared`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("ROCE_SHARED_DIR") {
        Some(d) => PathBuf::from(d),
        None => workspace_root().join("..").join("shared"),
    }
}

/// The real captures: `$ROCE_SHARED_DIR/captures/real` (or `$ROCE_SHARED_DIR` itself when it
/// holds `SOURCES.md`), else `<workspace root>/../shared/captures/real`. `None` when absent.
pub fn captures_dir() -> Option<PathBuf> {
    let base = shared_dir();
    [base.join("captures").join("real"), base]
        .into_iter()
        .find(|d| d.join("SOURCES.md").is_file())
}

/// `tshark` when it runs.
pub fn tshark() -> Option<PathBuf> {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    ok.then(|| PathBuf::from("tshark"))
}

/// A Python interpreter that can `import scapy.contrib.roce`: `$ROCE_PYTHON`, `python3` on the
/// PATH, or the distribution's `/usr/bin/python3` (where Debian's python3-scapy installs).
pub fn python_with_scapy() -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(p) = std::env::var_os("ROCE_PYTHON") {
        candidates.push(PathBuf::from(p));
    }
    candidates.push(PathBuf::from("python3"));
    candidates.push(PathBuf::from("/usr/bin/python3"));
    candidates.into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import scapy.contrib.roce"])
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Decodes a hex string, ignoring whitespace. Panics on bad hex (test data only).
pub fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    assert!(s.len() & 1 == 0, "odd hex length");
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}
