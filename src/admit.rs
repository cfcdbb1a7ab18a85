//! What goes into a hypothesis commit: the changed paths are listed with their sizes; the
//! benchmark helper's own output (`profile_data/`, a nested `.ratchet/`, `__pycache__/`) is
//! left out; files with merge-conflict markers are refused, and so are large or binary
//! untracked files unless allowed (asked through [`crate::events::Events::ask`], which the
//! command line answers from a terminal; refused with the fix where nobody can answer).

use crate::error::{Error, Result};
use crate::events::Question;
use crate::vcs::Repo;
use std::io::Read;
use std::path::Path;

/// Untracked files larger than this need `--allow-large` (or a yes on a terminal).
pub const LARGE_BYTES: u64 = 1 << 20;

/// Files larger than this are not scanned for conflict markers.
const SCAN_BYTES: u64 = 8 << 20;

/// Directories written by running the benchmark or Python by hand, at any depth: never part of
/// a hypothesis unless already tracked. `profile_data` is ratchet_bench's output directory when
/// run without ratchet (python/ratchet_bench.py `DEFAULT_OUT`); `.ratchet` its compilation cache.
pub const OUTPUT_DIRS: &[&str] = &["profile_data", ".ratchet", "__pycache__"];

/// One path of the hypothesis, as listed before the commit.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub path: String,
    /// Size in bytes; `None` for a deletion.
    pub size: Option<u64>,
    pub untracked: bool,
}

/// Whether `path` lies in one of the helper's output directories.
pub fn in_output_dir(path: &str) -> bool {
    let mut parts: Vec<&str> = path.trim_end_matches('/').split('/').collect();
    parts.pop(); // the file name itself
    parts.iter().any(|p| OUTPUT_DIRS.contains(p))
}

/// The output directory `path` lies in, as "examples/fa/profile_data/".
fn output_dir_of(path: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').collect();
    let k = parts[..parts.len().saturating_sub(1)].iter().position(|p| OUTPUT_DIRS.contains(p))?;
    Some(format!("{}/", parts[..=k].join("/")))
}

/// Whether `text` holds a merge conflict: a `<<<<<<< ` line and a `>>>>>>> ` line.
pub fn has_conflict_markers(text: &[u8]) -> bool {
    let mut open = false;
    for line in text.split(|&b| b == b'\n') {
        if line.starts_with(b"<<<<<<< ") || line == b"<<<<<<<" {
            open = true;
        } else if open && (line.starts_with(b">>>>>>> ") || line == b">>>>>>>") {
            return true;
        }
    }
    false
}

/// Whether the file's first 8 KiB hold a NUL byte (git's own test for binary content).
fn looks_binary(path: &Path) -> bool {
    let mut buf = [0u8; 8192];
    let n = crate::safe_read::open_regular(path).ok().and_then(|mut f| f.read(&mut buf).ok()).unwrap_or(0);
    buf[..n].contains(&0)
}

/// Bytes as "812 B", "4.2 KB", "5.5 MB".
pub fn human(bytes: u64) -> String {
    let b = bytes as f64;
    if b < 1000.0 {
        format!("{bytes} B")
    } else if b < 1e6 {
        format!("{:.1} KB", b / 1e3)
    } else if b < 1e9 {
        format!("{:.1} MB", b / 1e6)
    } else {
        format!("{:.2} GB", b / 1e9)
    }
}

/// Check and list what the hypothesis would commit; returns the paths to commit. `changes`
/// are the working tree's changed paths ([`Repo::changes`]).
pub fn admit(
    repo: &Repo,
    changes: Vec<String>,
    allow_large: bool,
    allow_empty: bool,
    fx: &mut crate::events::Effects,
) -> Result<Vec<String>> {
    let untracked = untracked_of(repo.root(), &changes)?;
    let (left_out, kept): (Vec<String>, Vec<String>) = changes.into_iter().partition(|p| untracked.contains(p) && in_output_dir(p));
    if !left_out.is_empty() {
        let dirs: std::collections::BTreeSet<String> = left_out.iter().filter_map(|p| output_dir_of(p)).collect();
        fx.note(format!(
            "left out of the hypothesis: {} untracked file{} in {} (benchmark output; commit them yourself if they belong to the kernel)",
            left_out.len(),
            if left_out.len() == 1 { "" } else { "s" },
            dirs.into_iter().take(3).collect::<Vec<_>>().join(", ")
        ));
    }
    if kept.is_empty() && !left_out.is_empty() && !allow_empty {
        return Err(Error::repo("nothing to test: the only changes are benchmark output")
            .hint("edit the kernel first, or pass --allow-empty to re-measure HEAD as it is"));
    }
    let mut entries = vec![];
    let mut conflicted = vec![];
    let mut heavy = vec![];
    for p in &kept {
        let full = repo.root().join(p);
        let meta = std::fs::symlink_metadata(&full).ok();
        let size = meta.as_ref().map(|m| m.len());
        if meta.as_ref().is_some_and(|m| m.is_file()) {
            // Conflict markers are looked for in text-sized files only (a huge data file is not
            // read into memory for it).
            if size.unwrap_or(0) <= SCAN_BYTES && crate::safe_read::read_capped(&full, SCAN_BYTES).is_ok_and(|t| has_conflict_markers(&t)) {
                conflicted.push(p.clone());
            }
            let is_new = untracked.contains(p);
            if is_new {
                let binary = looks_binary(&full);
                if size.unwrap_or(0) > LARGE_BYTES || binary {
                    heavy.push(format!("{p} ({}{})", human(size.unwrap_or(0)), if binary { ", binary" } else { "" }));
                }
            }
        }
        entries.push(Entry { path: p.clone(), size, untracked: untracked.contains(p) });
    }
    if !conflicted.is_empty() {
        return Err(Error::repo(format!("merge-conflict markers (<<<<<<< ... >>>>>>>) in {}", conflicted.join(", ")))
            .hint("resolve the conflict first; nothing was committed"));
    }
    // Asked through the command line's face (a terminal answers); nobody to ask means no.
    if !heavy.is_empty() && !allow_large && fx.ask(&Question::CommitLargeFiles { files: heavy.clone() }) != Some(true) {
        return Err(Error::repo(format!(
            "untracked large or binary files would enter the hypothesis: {} (over {} or binary)",
            heavy.join(", "),
            human(LARGE_BYTES)
        ))
        .hint("pass --allow-large to commit them, or move them out / list them in .gitignore; nothing was committed"));
    }
    fx.emit(crate::events::Event::Hypothesis { listing: listing(&entries) });
    Ok(kept)
}

/// Which of `changes` are untracked: not in the index. Index lookups, not a second status walk
/// (a large repository pays for one walk only).
fn untracked_of(root: &Path, changes: &[String]) -> Result<std::collections::HashSet<String>> {
    let index = git2::Repository::open(root)?.index()?;
    Ok(changes.iter().filter(|p| index.get_path(Path::new(p.as_str()), 0).is_none()).cloned().collect())
}

/// "hypothesis: kernel.py (2.1 KB), new helper.py (812 B), deleted old.py".
pub fn listing(entries: &[Entry]) -> String {
    if entries.is_empty() {
        return "hypothesis: no file changed (an empty commit re-measures HEAD)".into();
    }
    let total: u64 = entries.iter().filter_map(|e| e.size).sum();
    let shown: Vec<String> = entries
        .iter()
        .take(12)
        .map(|e| match e.size {
            None => format!("deleted {}", e.path),
            Some(s) if e.untracked => format!("new {} ({})", e.path, human(s)),
            Some(s) => format!("{} ({})", e.path, human(s)),
        })
        .collect();
    let more = if entries.len() > 12 { format!(" and {} more", entries.len() - 12) } else { String::new() };
    format!("hypothesis: {} file{}, {}: {}{more}", entries.len(), if entries.len() == 1 { "" } else { "s" }, human(total), shown.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_dirs_at_any_depth() {
        assert!(in_output_dir("profile_data/profile/x.xplane.pb"));
        assert!(in_output_dir("examples/fa/profile_data/kernel.hlo.txt"));
        assert!(in_output_dir("sub/.ratchet/cache/jax/abc"));
        assert!(in_output_dir("__pycache__/kernel.cpython-311.pyc"));
        assert!(!in_output_dir("profile_data"), "a file named so is not a directory");
        assert!(!in_output_dir("kernel.py"));
        assert!(!in_output_dir("my_profile_data/x"));
    }

    #[test]
    fn conflict_markers_need_both_ends() {
        assert!(has_conflict_markers(b"a\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> branch\n"));
        assert!(!has_conflict_markers(b"# <<<<<<< in a comment\nx = 1\n"));
        assert!(!has_conflict_markers(b">>>>>>> before\n<<<<<<< after\n"));
    }

    #[test]
    fn the_listing_names_paths_and_sizes() {
        let e = |p: &str, s: Option<u64>, u: bool| Entry { path: p.into(), size: s, untracked: u };
        let l = listing(&[e("kernel.py", Some(2100), false), e("helper.py", Some(812), true), e("old.py", None, false)]);
        assert_eq!(l, "hypothesis: 3 files, 2.9 KB: kernel.py (2.1 KB), new helper.py (812 B), deleted old.py");
        assert_eq!(human(5_500_000), "5.5 MB");
    }
}
