//! Tracked files whose writes the watcher cannot see: inotify raises no event for a write through
//! a shared memory mapping, nor for a write through a hard link whose name lies outside the
//! watched directories. These files are found when the watcher is armed and compared by content
//! after the runs.

use std::path::Path;
use std::thread::JoinHandle;

/// The files found when the watcher was armed: hard-linked ones at once, mapped ones by a
/// thread reading `/proc` while the benchmark runs (tens of ms of kernel time on a busy host,
/// kept off the experiment's path).
pub struct Blind {
    pub linked: Vec<String>,
    pub mapped: Option<JoinHandle<Vec<String>>>,
}

impl Blind {
    pub fn new(linked: Vec<String>) -> Blind {
        Blind { linked, mapped: None }
    }

    /// Start looking for mapped files (once): only an experiment about to run needs them, not
    /// every status pass.
    pub fn look_for_mappings(&mut self, root: &Path) {
        if self.mapped.is_none() {
            let root = root.to_path_buf();
            self.mapped = std::thread::Builder::new().name("ratchet-mappings".into()).spawn(move || mapped_writable(&root)).ok();
        }
    }

    /// Every path to compare by content, sorted: the mappings found when the runs started and
    /// those alive now, after them (a process that mapped a file meanwhile; one that mapped,
    /// wrote and unmapped in between changed the file's mtime, which the stat pass after the
    /// runs sees).
    pub fn paths(self, root: &Path) -> Vec<String> {
        let mut out = self.linked;
        if let Some(h) = self.mapped {
            out.extend(h.join().unwrap_or_default());
            out.extend(mapped_writable(root));
        }
        out.sort();
        out.dedup();
        out
    }
}

/// Files under `root` (repo-relative) that some process this user can inspect has mapped shared
/// and writable (`rw?s` in `/proc/PID/maps`): a write there changes the file without any event.
pub fn mapped_writable(root: &Path) -> Vec<String> {
    let mut out = vec![];
    let Some(prefix) = root.to_str().map(|r| format!("{}/", r.trim_end_matches('/'))) else { return out };
    let Ok(procs) = std::fs::read_dir("/proc") else { return out };
    for p in procs.flatten() {
        let name = p.file_name();
        if !name.to_str().is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit())) {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(p.path().join("maps")) else { continue };
        out.extend(parse_maps(&maps, &prefix));
    }
    out.sort();
    out.dedup();
    out
}

/// The repo-relative paths under `prefix` that `maps` (a `/proc/PID/maps` text) maps shared
/// and writable.
fn parse_maps(maps: &str, prefix: &str) -> Vec<String> {
    let mut out = vec![];
    for line in maps.lines() {
        let mut f = line.splitn(6, ' ');
        let perms = f.nth(1).unwrap_or("").as_bytes();
        if perms.len() < 4 || perms[1] != b'w' || perms[3] != b's' {
            continue;
        }
        let Some(path) = f.nth(3).map(str::trim_start) else { continue };
        if let Some(rel) = path.strip_prefix(prefix) {
            if !rel.ends_with(" (deleted)") {
                out.push(rel.to_string());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_shared_writable_mappings_under_the_root_count() {
        let maps = "7f0000000000-7f0000001000 rw-s 00000000 fd:01 1234                       /repo/data.txt\n\
                    7f0000001000-7f0000002000 r--s 00000000 fd:01 1235                       /repo/ro.txt\n\
                    7f0000002000-7f0000003000 rw-p 00000000 fd:01 1236                       /repo/private.txt\n\
                    7f0000003000-7f0000004000 rw-s 00000000 fd:01 1237                       /repo/sub/dir/k.py\n\
                    7f0000004000-7f0000005000 rw-s 00000000 fd:01 1238                       /repo2/other.txt\n\
                    7f0000005000-7f0000006000 rw-s 00000000 fd:01 1239                       /repo/gone.txt (deleted)\n\
                    7f0000006000-7f0000007000 rw-p 00000000 00:00 0 \n";
        assert_eq!(parse_maps(maps, "/repo/"), ["data.txt", "sub/dir/k.py"]);
    }
}
