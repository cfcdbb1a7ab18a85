//! ratchet's own list of what benchmarks wrote into the work tree (`.ratchet/outputs`, one path
//! a line, a directory as `dir/`): left out of every hypothesis, while the user's git (`git
//! status`, `git add -A`) still sees those files. It replaces lines older versions appended to
//! `.git/info/exclude`, which hid such files from the user for good and slowed every git command.

use crate::error::Result;
use std::collections::BTreeSet;
use std::path::Path;

pub const FILE: &str = "outputs";

/// The header older versions wrote above the benchmark's outputs in `.git/info/exclude`.
const OLD_OUTPUTS_HEADER: &str = "# written into the repo by the benchmark (ratchet keeps them out of hypotheses)";
/// The header older versions wrote above ratchet's own directories in `.git/info/exclude`.
const OLD_DIRS_HEADER: &str = "# ratchet's state and results: never part of a hypothesis";

/// The listed paths.
#[derive(Debug, Default, Clone)]
pub struct Outputs {
    paths: BTreeSet<String>,
}

impl Outputs {
    pub fn load(state_dir: &Path) -> Outputs {
        let text = std::fs::read_to_string(state_dir.join(FILE)).unwrap_or_default();
        Outputs { paths: text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(String::from).collect() }
    }

    pub fn is_empty(&self) -> bool {
        self.paths.is_empty()
    }

    /// Whether `path` (a file, or `dir/`) is listed, itself or through a listed directory above it.
    pub fn covers(&self, path: &str) -> bool {
        if self.paths.is_empty() {
            return false;
        }
        if self.paths.contains(path) {
            return true;
        }
        let mut end = 0;
        while let Some(i) = path[end..].find('/') {
            end += i + 1;
            if end < path.len() && self.paths.contains(&path[..end]) {
                return true;
            }
        }
        false
    }

    /// Add `new` and forget what is no longer on disk under `root` (so a path the user later
    /// deletes and writes again is theirs) or is tracked now (`tracked`); written atomically
    /// when anything changed.
    pub fn record(state_dir: &Path, root: &Path, new: &[String], tracked: impl Fn(&str) -> bool) -> Result<()> {
        let old = Outputs::load(state_dir);
        if old.paths.is_empty() && new.is_empty() {
            return Ok(());
        }
        let mut paths = old.paths.clone();
        paths.extend(new.iter().cloned());
        paths.retain(|p| !tracked(p) && std::fs::symlink_metadata(root.join(p.trim_end_matches('/'))).is_ok());
        if paths == old.paths && state_dir.join(FILE).exists() {
            return Ok(());
        }
        let mut text = String::from(
            "# Written into the work tree by the benchmark while an experiment ran: ratchet leaves these out of\n\
             # hypotheses (git add a file to make it part of the next one; delete a line to forget it).\n",
        );
        for p in &paths {
            text.push_str(p);
            text.push('\n');
        }
        std::fs::create_dir_all(state_dir)?;
        crate::fsutil::write_atomic(&state_dir.join(FILE), text.as_bytes())
    }
}

/// Take the lines older versions of ratchet wrote out of `.git/info/exclude` (each block starts
/// with its own header, followed by its `/path` lines), keeping every other line as it was.
/// Returns the benchmark outputs those lines named (repo-relative), or `None` when the file
/// held none of ratchet's lines.
pub fn strip_old_excludes(exclude: &Path) -> Result<Option<Vec<String>>> {
    let Ok(text) = std::fs::read_to_string(exclude) else { return Ok(None) };
    let (kept, outputs, found) = split_old_excludes(&text);
    if !found {
        return Ok(None);
    }
    crate::fsutil::write_atomic(exclude, kept.as_bytes())?;
    Ok(Some(outputs))
}

/// The text without ratchet's blocks, the outputs they named, and whether there was any.
fn split_old_excludes(text: &str) -> (String, Vec<String>, bool) {
    let mut kept = String::with_capacity(text.len());
    let mut outputs = vec![];
    let mut found = false;
    let mut block: Option<&str> = None;
    for line in text.lines() {
        let t = line.trim_end();
        if t == OLD_OUTPUTS_HEADER || t == OLD_DIRS_HEADER {
            block = Some(t);
            found = true;
            continue;
        }
        match block {
            Some(h) if t.starts_with('/') && !t.starts_with("//") => {
                if h == OLD_OUTPUTS_HEADER {
                    outputs.push(t[1..].to_string());
                } else if t != "/.ratchet/" && t != "/results/" {
                    // Not a line ratchet wrote under this header: the user's, kept.
                    kept.push_str(line);
                    kept.push('\n');
                }
                continue;
            }
            _ => block = None,
        }
        kept.push_str(line);
        kept.push('\n');
    }
    (kept, outputs, found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_files_and_what_is_below_a_listed_directory() {
        let o = Outputs { paths: ["out.json", "prof/", "a/b/"].iter().map(|s| s.to_string()).collect() };
        assert!(o.covers("out.json") && o.covers("prof/") && o.covers("prof/x/y.txt") && o.covers("a/b/c"));
        assert!(!o.covers("out.json.bak") && !o.covers("prof") && !o.covers("a/bc") && !o.covers("a/x"));
    }

    #[test]
    fn only_ratchets_own_blocks_leave_the_exclude_file() {
        let text = format!(
            "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp\n{OLD_DIRS_HEADER}\n/.ratchet/\n/results/\n\
             mine/\n{OLD_OUTPUTS_HEADER}\n/out.json\n/prof/\n# my own\n/local.cfg\n{OLD_OUTPUTS_HEADER}\n/run2.txt\n"
        );
        let (kept, outputs, found) = split_old_excludes(&text);
        assert!(found);
        assert_eq!(kept, "# git ls-files --others --exclude-from=.git/info/exclude\n*.swp\nmine/\n# my own\n/local.cfg\n");
        assert_eq!(outputs, ["out.json", "prof/", "run2.txt"]);
        assert!(!split_old_excludes("*.swp\n/x\n").2);
    }
}
