//! Statistics files for `roce stat`: each running device rewrites
//! `<stat dir>/<name>-<ip>-<pid>.stat` every [`super::Config::stat_interval`] (atomically:
//! write to a temporary file, then rename) and removes it when the device closes.
//!
//! Format: `# key value` header lines (`name`, `ip`, `pid`, `start_time`, `mtu`, `time_ns`), then
//! one `counter value` line per counter.
//!
//! A file outlives a killed process. It counts as a running device only while a process with
//! its `pid` runs *and* started at its `start_time` (field 22 of `/proc/<pid>/stat`, clock ticks
//! since boot), so a pid the kernel gave to another process does not revive it; `roce stat
//! --stale` shows the others, marked `(exited)`.

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

/// The connection manager's counters under their `roce stat` names (the runtime's CM and the
/// steering helper's, which answers the MADs no process owns).
pub(crate) fn cm_counters(c: &roce_cm::Counters) -> [(&'static str, u64); 14] {
    [
        ("cm_mads_received", c.mads_received),
        ("cm_mads_sent", c.mads_sent),
        ("cm_malformed", c.malformed),
        ("cm_not_cm", c.not_cm),
        ("cm_unknown_attribute", c.unknown_attribute),
        ("cm_unknown_comm_id", c.unknown_comm_id),
        ("cm_no_listener", c.no_listener),
        ("cm_bad_cma_hdr", c.bad_cma_hdr),
        ("cm_stale", c.stale),
        ("cm_duplicates", c.duplicates),
        ("cm_retransmits", c.retransmits),
        ("cm_timeouts", c.timeouts),
        ("cm_backlog_drops", c.backlog_drops),
        ("cm_unexpected", c.unexpected),
    ]
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
    if let Some(t) = start_time("self") {
        writeln!(f, "# start_time {t}")?;
    }
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
    /// Header values (`name`, `ip`, `pid`, `start_time`, `mtu`, `time_ns`).
    pub header: Vec<(String, String)>,
    /// Counters in file order.
    pub counters: Vec<(String, u64)>,
    /// Whether the writing process still runs (its pid with its start time).
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
    s.alive = s.get("pid").is_some_and(|p| {
        match (start_time(p), s.get("start_time")) {
            (Some(now), Some(then)) => then.parse() == Ok(now),
            // A file from before start times were written: the pid is all there is.
            (Some(_), None) => true,
            (None, _) => false,
        }
    });
    Ok(s)
}

/// When process `pid` (a number or `self`) started: field 22 of `/proc/<pid>/stat`, in clock
/// ticks since boot. `None` when no such process runs.
pub fn start_time(pid: &str) -> Option<u64> {
    if pid != "self" && !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let text = std::fs::read_to_string(Path::new("/proc").join(pid).join("stat")).ok()?;
    // Field 2 is the command in parentheses and may hold spaces or ')': count from the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn file(dir: &Path, name: &str, pid: u32, start: Option<u64>) -> StatFile {
        let p = dir.join(name);
        let mut t = format!("# name rxe0\n# ip 10.0.0.1\n# pid {pid}\n");
        if let Some(s) = start {
            t += &format!("# start_time {s}\n");
        }
        std::fs::write(&p, t + "# mtu 1024\nrcvd_pkts 3\n").unwrap();
        read(&p).unwrap()
    }

    /// A file whose pid runs but started at another time is a killed device whose pid was
    /// reused; one whose pid runs with its start time is alive; one whose pid is gone is not.
    #[test]
    fn liveness_survives_pid_reuse() {
        let dir = std::env::temp_dir().join(format!("roce-stat-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id();
        let started = start_time("self").expect("/proc/self/stat");
        assert_eq!(start_time(&me.to_string()), Some(started));
        assert!(file(&dir, "a.stat", me, Some(started)).alive);
        assert!(!file(&dir, "b.stat", me, Some(started + 1)).alive);
        assert!(file(&dir, "c.stat", me, None).alive);
        // pid_max is at most 2^22: this pid never runs.
        assert!(!file(&dir, "d.stat", (1 << 22) + 1, Some(started)).alive);
        assert_eq!(start_time("../self"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// What a device writes reads back as alive, with its start time.
    #[test]
    fn written_file_is_alive() {
        let dir = std::env::temp_dir().join(format!("roce-stat-w-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = Config::from_env();
        let p = dir.join("x.stat");
        write(&p, &cfg, &Stats::default()).unwrap();
        let f = read(&p).unwrap();
        assert!(f.alive);
        assert_eq!(
            f.get("start_time"),
            start_time("self").map(|t| t.to_string()).as_deref()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
