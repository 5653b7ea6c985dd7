//! Statistics files for `roce stat`: each running device rewrites
//! `<stat dir>/<name>-<ip>-<pid>.stat` every [`super::Config::stat_interval`] (atomically:
//! write to a temporary file, then rename) and removes it when the device closes.
//!
//! Format: `# key value` header lines (`name`, `ip`, `pid`, `mtu`, `time_ns`), then one
//! `counter value` line per counter.

use super::{default_stat_dir, Config, Stats};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The statistics file of a device with `cfg` in this process (`None` if the directory cannot
/// be created).
pub fn stat_path(cfg: &Config) -> Option<PathBuf> {
    let dir = cfg.stat_dir.clone().unwrap_or_else(default_stat_dir);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join(format!(
        "{}-{}-{}.stat",
        cfg.name,
        cfg.ip,
        std::process::id()
    )))
}

/// Writes `stats` to `path` atomically.
pub fn write(path: &Path, cfg: &Config, stats: &Stats) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut f = io::BufWriter::new(std::fs::File::create(&tmp)?);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    writeln!(f, "# name {}", cfg.name)?;
    writeln!(f, "# ip {}", cfg.ip)?;
    writeln!(f, "# pid {}", std::process::id())?;
    writeln!(f, "# mtu {}", cfg.mtu)?;
    writeln!(f, "# time_ns {t}")?;
    for (n, v) in &stats.counters {
        writeln!(f, "{n} {v}")?;
    }
    f.into_inner().map_err(|e| e.into_error())?.sync_data().ok();
    std::fs::rename(&tmp, path)
}

/// One statistics file as read back.
#[derive(Clone, Debug, Default)]
pub struct StatFile {
    /// Header values (`name`, `ip`, `pid`, `mtu`, `time_ns`).
    pub header: Vec<(String, String)>,
    /// Counters in file order.
    pub counters: Vec<(String, u64)>,
    /// Whether the writing process still runs.
    pub alive: bool,
    /// The file.
    pub path: PathBuf,
}

impl StatFile {
    /// A header value.
    pub fn get(&self, k: &str) -> Option<&str> {
        self.header
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, v)| v.as_str())
    }
}

/// Parses one statistics file.
pub fn read(path: &Path) -> io::Result<StatFile> {
    let text = std::fs::read_to_string(path)?;
    let mut s = StatFile {
        path: path.to_path_buf(),
        ..Default::default()
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ") {
            if let Some((k, v)) = h.split_once(' ') {
                s.header.push((k.to_string(), v.to_string()));
            }
        } else if let Some((k, v)) = line.split_once(' ') {
            if let Ok(v) = v.trim().parse() {
                s.counters.push((k.to_string(), v));
            }
        }
    }
    s.alive = s
        .get("pid")
        .is_some_and(|p| Path::new("/proc").join(p).exists());
    Ok(s)
}

/// Every statistics file in `dir` (default [`default_stat_dir`]), newest name order.
pub fn read_all(dir: Option<&Path>) -> Vec<StatFile> {
    let dir = dir.map(Path::to_path_buf).unwrap_or_else(default_stat_dir);
    let mut v: Vec<StatFile> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "stat"))
        .filter_map(|e| read(&e.path()).ok())
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}
