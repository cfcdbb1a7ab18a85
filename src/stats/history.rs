//! The noise scale borrowed from history: the A/A pairs of `ratchet calibrate` and the residuals
//! of earlier experiments on the same benchmark command and host, kept in `.ratchet/noise.json`.
//! The estimate is pure (the simulation uses it unchanged); `load`/`record` are the only I/O.
//!
//! Each entry keeps one session's sum of squared residuals of the pairs' log-ratios (speed-up
//! terms) and its degrees of freedom, after setting aside gross outliers (more than 5 robust
//! sds from the median: one 3x slower run must not inflate a day's scale). The scale in use
//! pools the newest entries up to `MAX_DF` degrees of freedom, so old sessions are forgotten
//! as new ones come; fewer than `MIN_DF` degrees of freedom is no history at all.

use super::sequential::{median, NoiseScale};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Below this many degrees of freedom the history is not used (the experiment decides as if
/// there were none).
pub const MIN_DF: f64 = 10.0;
/// The pooled estimate stops at this many degrees of freedom, newest sessions first.
pub const MAX_DF: f64 = 60.0;
/// Entries kept per benchmark (older ones are dropped from the file).
pub const MAX_ENTRIES: usize = 30;
/// Residuals further than this many robust sds (1.4826 MAD) from the median are set aside.
const TRIM_K: f64 = 5.0;

/// One session's contribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub time: String,
    /// `calibrate` or `experiment <id>`.
    pub source: String,
    /// Pairs measured and pairs set aside as gross outliers.
    pub pairs: usize,
    #[serde(default)]
    pub trimmed: usize,
    /// Sum of squared residuals of the kept pairs' log-ratios around their batch means.
    pub ss: f64,
    pub df: f64,
}

impl Entry {
    pub fn sd(&self) -> f64 {
        (self.ss / self.df).sqrt()
    }
}

/// The kept pairs of one batch: those within `TRIM_K` robust sds of its median.
fn trim(d: &[f64]) -> Vec<f64> {
    if d.len() < 4 {
        return d.to_vec();
    }
    let med = median(d);
    let mad = median(&d.iter().map(|x| (x - med).abs()).collect::<Vec<_>>()) * 1.4826;
    if mad <= 0.0 {
        return d.to_vec();
    }
    d.iter().copied().filter(|x| (x - med).abs() <= TRIM_K * mad).collect()
}

/// An entry from one session's batches of log-ratios (each batch around its own mean: an
/// experiment's phases, or the A/A pairs of a calibration). `None` when nothing is left to
/// estimate a spread from.
pub fn entry(time: &str, source: &str, batches: &[&[f64]]) -> Option<Entry> {
    let (mut ss, mut df, mut pairs, mut trimmed) = (0.0, 0.0, 0, 0);
    for b in batches {
        let b: Vec<f64> = b.iter().copied().filter(|x| x.is_finite()).collect();
        let k = trim(&b);
        pairs += b.len();
        trimmed += b.len() - k.len();
        if k.len() < 2 {
            continue;
        }
        let m = k.iter().sum::<f64>() / k.len() as f64;
        ss += k.iter().map(|x| (x - m).powi(2)).sum::<f64>();
        df += (k.len() - 1) as f64;
    }
    (df > 0.0).then(|| Entry { time: time.to_string(), source: source.to_string(), pairs, trimmed, ss, df })
}

/// The scale in use: the entries (oldest first) pooled newest first up to `MAX_DF` degrees of
/// freedom; `None` below `MIN_DF`.
pub fn estimate(entries: &[Entry]) -> Option<NoiseScale> {
    let (mut ss, mut df) = (0.0, 0.0);
    for e in entries.iter().rev() {
        if df >= MAX_DF {
            break;
        }
        ss += e.ss;
        df += e.df;
    }
    (df >= MIN_DF && ss > 0.0).then(|| NoiseScale { sd: (ss / df).sqrt(), df })
}

/// The history of one benchmark command on one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    pub host: String,
    pub command: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    benchmarks: Vec<Benchmark>,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("noise.json")
}

/// This machine's name (the history is per machine).
pub fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn read(state_dir: &Path) -> File {
    std::fs::read_to_string(path(state_dir)).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// The history of `command` on this host (empty when there is none, or the file is unreadable:
/// a lost history only costs runs, never validity).
pub fn load(state_dir: &Path, command: &str) -> Benchmark {
    let h = host();
    read(state_dir).benchmarks.into_iter().find(|b| b.host == h && b.command == command).unwrap_or(Benchmark {
        host: h,
        command: command.to_string(),
        entries: vec![],
    })
}

/// Append an entry to the history of `command` on this host (atomically; the oldest entries
/// beyond `MAX_ENTRIES` are dropped).
pub fn record(state_dir: &Path, command: &str, e: Entry) -> Result<()> {
    let mut f = read(state_dir);
    f.version = 1;
    let h = host();
    let i = match f.benchmarks.iter().position(|b| b.host == h && b.command == command) {
        Some(i) => i,
        None => {
            f.benchmarks.push(Benchmark { host: h, command: command.to_string(), entries: vec![] });
            f.benchmarks.len() - 1
        }
    };
    let entries = &mut f.benchmarks[i].entries;
    entries.push(e);
    if entries.len() > MAX_ENTRIES {
        entries.drain(..entries.len() - MAX_ENTRIES);
    }
    let bytes = serde_json::to_vec_pretty(&f).expect("history serializes");
    crate::fsutil::write_atomic(&path(state_dir), &bytes)
}

/// One line for people: the scale in use and where it comes from.
pub fn describe(b: &Benchmark) -> String {
    match estimate(&b.entries) {
        Some(s) => {
            let used = b.entries.iter().rev().scan(0.0, |df, e| (*df < MAX_DF).then(|| *df += e.df)).count();
            format!(
                "noise scale {:.2}% per pair (one run's CV about {:.2}%, speed-up terms) from {used} session{} ({:.0} df) of history on {}; decisions borrow it (x{} safety)",
                s.sd * 100.0,
                s.sd / 2f64.sqrt() * 100.0,
                if used == 1 { "" } else { "s" },
                s.df,
                b.host,
                super::sequential::SAFETY
            )
        }
        None => {
            let df: f64 = b.entries.iter().map(|e| e.df).sum();
            format!(
                "noise scale: no usable history yet ({df:.0} of {MIN_DF:.0} df on {}); decisions use each experiment's own t-test (run `ratchet calibrate` to build it)",
                b.host
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_pools_batches_around_their_own_means() {
        // Two batches with different means: residuals around each, df = (3 - 1) + (2 - 1).
        let e = entry("t", "x", &[&[0.1, 0.2, 0.3], &[1.0, 1.2]]).unwrap();
        assert!((e.ss - (0.02 + 0.02)).abs() < 1e-12, "{e:?}");
        assert_eq!(e.df, 3.0);
        assert!(entry("t", "x", &[&[0.5]]).is_none());
    }

    #[test]
    fn a_gross_outlier_does_not_inflate_the_scale() {
        let clean = [0.01, -0.012, 0.004, -0.003, 0.008, -0.009, 0.0, 0.011, -0.006, 0.002];
        let mut dirty = clean.to_vec();
        dirty.push(1.1); // one run 3x slower
        let (a, b) = (entry("t", "x", &[&clean]).unwrap(), entry("t", "x", &[&dirty]).unwrap());
        assert_eq!(b.trimmed, 1);
        assert!((a.sd() - b.sd()).abs() < 1e-12);
    }

    #[test]
    fn estimate_needs_enough_df_and_forgets_old_sessions() {
        let e = |sd: f64, df: f64| Entry { time: "t".into(), source: "x".into(), pairs: df as usize + 1, trimmed: 0, ss: sd * sd * df, df };
        assert!(estimate(&[e(0.01, 5.0)]).is_none(), "below MIN_DF");
        let s = estimate(&[e(0.01, 5.0), e(0.01, 7.0)]).unwrap();
        assert!((s.sd - 0.01).abs() < 1e-12 && s.df == 12.0);
        // An old noisy era is forgotten once 60 df of newer sessions exist.
        let mut v = vec![e(0.05, 30.0)];
        v.extend((0..4).map(|_| e(0.01, 15.0)));
        let s = estimate(&v).unwrap();
        assert!((s.sd - 0.01).abs() < 1e-12 && s.df == 60.0, "{s:?}");
    }

    #[test]
    fn record_and_load_round_trip_per_command() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path(), "python3 a.py").entries.is_empty());
        for i in 0..(MAX_ENTRIES + 3) {
            record(d.path(), "python3 a.py", entry("t", &format!("experiment {i}"), &[&[0.01, 0.02, 0.0]]).unwrap()).unwrap();
        }
        record(d.path(), "python3 b.py", entry("t", "calibrate", &[&[0.01, 0.03]]).unwrap()).unwrap();
        let a = load(d.path(), "python3 a.py");
        assert_eq!(a.entries.len(), MAX_ENTRIES);
        assert_eq!(a.entries.last().unwrap().source, format!("experiment {}", MAX_ENTRIES + 2));
        assert_eq!(load(d.path(), "python3 b.py").entries.len(), 1);
        assert!(describe(&a).contains("noise scale 1.00%"), "{}", describe(&a));
    }
}
