//! Finding the capture behind a path: an `.xplane.pb` itself, a profiler log directory
//! (`LOG/plugins/profile/<session>/<host>.xplane.pb`, newest session wins), or a ratchet run
//! directory whose `ratchet-result.json` names the profile in its `trace` field.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use serde::Deserialize;

/// The directory XProf opens (`xprof --port=8791 LOGDIR`): the one holding
/// `plugins/profile/<session>/`. A run's `trace` is that directory, or a trace file under it.
pub fn xprof_logdir(trace: &Path) -> Option<PathBuf> {
    if trace.is_dir() {
        return Some(trace.to_path_buf());
    }
    trace.ancestors().find(|a| a.file_name().is_some_and(|n| n == "plugins")).and_then(|p| p.parent()).map(Path::to_path_buf)
}

/// The result file a benchmark writes into its run directory (see docs/protocol.md).
pub const RESULT_FILE: &str = "ratchet-result.json";

/// What kind of capture file was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptureFormat {
    /// `<host>.xplane.pb`: complete.
    Xplane,
    /// `<host>.trace.json.gz`: capped at 1,000,000 events by jax; a fallback only.
    TraceJson,
}

/// The figures of a run's result file that trace reading and `inspect` use. The strict
/// schema check of the result file belongs to the benchmark runner; unknown keys are
/// ignored here.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct RunInfo {
    pub trace: Option<String>,
    pub hlo: Option<String>,
    pub kernel: Option<String>,
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    pub min_bytes: Option<f64>,
    #[serde(default)]
    pub latencies_ms: Vec<f64>,
    pub backend: Option<String>,
    pub device: Option<String>,
    /// The Pallas kernels' bodies (TPU/GPU), tunables, and what the run was measured with.
    pub kernel_body: Option<String>,
    pub meta: Option<serde_json::Value>,
    pub environment: Option<std::collections::BTreeMap<String, serde_json::Value>>,
}

/// A located capture, with the run it belongs to when the path was a run directory.
#[derive(Debug, Clone)]
pub struct Located {
    pub capture: PathBuf,
    pub format: CaptureFormat,
    /// The run directory and its result file, when the path was one.
    pub run: Option<(PathBuf, RunInfo)>,
    pub warnings: Vec<String>,
}

fn format_of(path: &Path) -> Option<CaptureFormat> {
    let name = path.file_name()?.to_str()?;
    if name.ends_with(".xplane.pb") {
        Some(CaptureFormat::Xplane)
    } else if name.ends_with(".trace.json.gz") {
        Some(CaptureFormat::TraceJson)
    } else {
        None
    }
}

/// Reads the result file of a run directory.
pub fn read_run_info(dir: &Path) -> anyhow::Result<RunInfo> {
    let path = dir.join(RESULT_FILE);
    // Never a blocking open nor an unbounded read: the benchmark wrote this file.
    let text = crate::safe_read::read_text_capped(&path, crate::safe_read::MAX_RESULT_BYTES)?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))
}

/// Resolves a path from the result file: relative to the run directory unless absolute.
pub fn resolve_in_run(dir: &Path, p: &str) -> PathBuf {
    let p = Path::new(p);
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        dir.join(p)
    }
}

/// Finds the capture for `path` (a capture file, a profile log directory or a run directory).
pub fn locate(path: &Path) -> anyhow::Result<Located> {
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    if path.is_file() {
        let Some(format) = format_of(path) else {
            bail!("{} is neither an .xplane.pb nor a .trace.json.gz capture", path.display());
        };
        return Ok(Located { capture: path.to_path_buf(), format, run: None, warnings: Vec::new() });
    }
    if path.join(RESULT_FILE).is_file() {
        let info = read_run_info(path)?;
        let target = match &info.trace {
            Some(t) => resolve_in_run(path, t),
            None => path.to_path_buf(),
        };
        let mut found = if target == path {
            find_in_dir(path)
        } else {
            locate(&target).map_err(|e| {
                e.context(format!("the \"trace\" field of {} points at {}", path.join(RESULT_FILE).display(), target.display()))
            })
        }?;
        found.run = Some((path.to_path_buf(), info));
        return Ok(found);
    }
    find_in_dir(path)
}

/// Capture files directly in `dir`, xplane files first, sorted by name.
fn captures_in(dir: &Path) -> anyhow::Result<Vec<(PathBuf, CaptureFormat)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))? {
        let p = entry?.path();
        if let (true, Some(f)) = (p.is_file(), format_of(&p)) {
            out.push((p, f));
        }
    }
    out.sort_by(|a, b| (a.1 != CaptureFormat::Xplane, &a.0).cmp(&(b.1 != CaptureFormat::Xplane, &b.0)));
    Ok(out)
}

/// The newest session directory under `profile_dir` (`plugins/profile`). Session names are
/// timestamps (`2026_01_02_10_11_12`), so the largest name is the newest; ties of odd names
/// fall back to modification time.
fn newest_session(profile_dir: &Path) -> anyhow::Result<Option<PathBuf>> {
    let mut sessions: Vec<(std::time::SystemTime, String, PathBuf)> = Vec::new();
    for entry in std::fs::read_dir(profile_dir)? {
        let entry = entry?;
        let p = entry.path();
        if p.is_dir() {
            let mtime = entry.metadata().and_then(|m| m.modified()).unwrap_or(std::time::UNIX_EPOCH);
            sessions.push((mtime, entry.file_name().to_string_lossy().into_owned(), p));
        }
    }
    sessions.sort_by(|a, b| a.1.cmp(&b.1).then(a.0.cmp(&b.0)));
    Ok(sessions.pop().map(|s| s.2))
}

fn pick(dir: &Path, files: Vec<(PathBuf, CaptureFormat)>) -> anyhow::Result<Located> {
    let mut warnings = Vec::new();
    let Some((capture, format)) = files.first().cloned() else {
        bail!("no .xplane.pb or .trace.json.gz in {}", dir.display());
    };
    let xplanes = files.iter().filter(|f| f.1 == CaptureFormat::Xplane).count();
    if xplanes > 1 {
        warnings.push(format!("{xplanes} host captures in {}; reading {}", dir.display(), capture.display()));
    }
    if format == CaptureFormat::TraceJson {
        warnings.push(format!(
            "no .xplane.pb in {}; falling back to {} (jax caps it at 1,000,000 events)",
            dir.display(),
            capture.display()
        ));
    }
    Ok(Located { capture, format, run: None, warnings })
}

/// Finds a capture in a directory: the directory itself (a session), its
/// `plugins/profile/<newest session>`, a `plugins/profile` directory, or the newest session
/// found by a bounded search below it (a run directory holding a profile log dir).
fn find_in_dir(dir: &Path) -> anyhow::Result<Located> {
    let here = captures_in(dir)?;
    if !here.is_empty() {
        return pick(dir, here);
    }
    let profile = dir.join("plugins").join("profile");
    let profile_dir = if profile.is_dir() {
        Some(profile)
    } else if dir.ends_with("plugins/profile") {
        Some(dir.to_path_buf())
    } else {
        None
    };
    if let Some(pd) = profile_dir {
        let Some(session) = newest_session(&pd)? else {
            bail!("{} holds no profiling session", pd.display());
        };
        let mut located = pick(&session, captures_in(&session)?)?;
        let sessions = std::fs::read_dir(&pd)?.filter(|e| e.as_ref().is_ok_and(|e| e.path().is_dir())).count();
        if sessions > 1 {
            located.warnings.push(format!("{sessions} profiling sessions in {}; reading the newest, {}", pd.display(), session.display()));
        }
        return Ok(located);
    }
    // A run directory whose profile sits in a subdirectory (RATCHET_OUT/profile/...).
    let mut stack = vec![(dir.to_path_buf(), 0u32)];
    while let Some((d, depth)) = stack.pop() {
        if d.join("plugins").join("profile").is_dir() {
            return find_in_dir(&d);
        }
        if depth < 3 {
            if let Ok(rd) = std::fs::read_dir(&d) {
                let mut subdirs: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.is_dir()).collect();
                subdirs.sort();
                stack.extend(subdirs.into_iter().rev().map(|p| (p, depth + 1)));
            }
        }
    }
    bail!(
        "no profile found in {}: expected an .xplane.pb, a profile log directory \
         (LOG/plugins/profile/<session>/<host>.xplane.pb) or a run directory with {RESULT_FILE}",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    #[test]
    fn log_dir_newest_session_and_run_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let log = tmp.path().join("profile");
        touch(&log.join("plugins/profile/2026_01_01_10_00_00/host.xplane.pb"));
        touch(&log.join("plugins/profile/2026_01_02_09_00_00/host.xplane.pb"));
        touch(&log.join("plugins/profile/2026_01_02_09_00_00/host.trace.json.gz"));
        let l = locate(&log).unwrap();
        assert!(l.capture.ends_with("2026_01_02_09_00_00/host.xplane.pb"));
        assert_eq!(l.format, CaptureFormat::Xplane);
        assert!(l.warnings[0].contains("2 profiling sessions"));

        std::fs::write(tmp.path().join(RESULT_FILE), r#"{"version":1,"latencies_ms":[1.0],"trace":"profile","kernel":"attn","flops":2e9}"#)
            .unwrap();
        let l = locate(tmp.path()).unwrap();
        assert!(l.capture.ends_with("2026_01_02_09_00_00/host.xplane.pb"));
        let (dir, info) = l.run.unwrap();
        assert_eq!(dir, tmp.path());
        assert_eq!(info.kernel.as_deref(), Some("attn"));
        assert_eq!(info.flops, Some(2e9));
    }

    #[test]
    fn json_fallback_and_errors() {
        let tmp = tempfile::tempdir().unwrap();
        let s = tmp.path().join("plugins/profile/s1/h.trace.json.gz");
        touch(&s);
        let l = locate(tmp.path()).unwrap();
        assert_eq!(l.format, CaptureFormat::TraceJson);
        assert!(l.warnings[0].contains("falling back"));
        let other = tmp.path().join("x.txt");
        touch(&other);
        assert!(locate(&other).unwrap_err().to_string().contains("neither"));
        let empty = tempfile::tempdir().unwrap();
        assert!(locate(empty.path()).unwrap_err().to_string().contains("no profile found"));
        std::fs::write(empty.path().join(RESULT_FILE), r#"{"version":1,"latencies_ms":[1.0],"trace":"missing"}"#).unwrap();
        let err = format!("{:#}", locate(empty.path()).unwrap_err());
        assert!(err.contains("\"trace\" field"), "{err}");
    }
}
