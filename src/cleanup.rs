//! Recovery's sweep of temporary files: an atomic write (`.<name>.tmp.<pid>`, then rename) that
//! was killed before its rename leaves its temporary file behind; the next ratchet removes it.

use std::path::Path;

/// Remove, in each of `dirs` (not recursively), the temporary files of atomic writes by a
/// process other than this one; the caller holds the repo's lock, so no other ratchet is
/// writing. Returns how many were removed.
pub fn remove_stale_temp_files(dirs: &[&Path]) -> usize {
    let me = std::process::id().to_string();
    let mut removed = 0;
    for dir in dirs {
        let Ok(rd) = std::fs::read_dir(dir) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if is_stale_temp(&name, &me) && e.file_type().is_ok_and(|t| t.is_file()) && std::fs::remove_file(e.path()).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// Remove the scratch directories (`checkout.tmp.<pid>` under the state directory) of rollbacks
/// by a process other than this one, killed before they finished; their files were never
/// renamed into the work tree, or were and are gone from here. Returns how many were removed.
pub fn remove_stale_checkouts(state_dir: &Path) -> usize {
    let me = std::process::id().to_string();
    let Ok(rd) = std::fs::read_dir(state_dir) else { return 0 };
    rd.flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name.strip_prefix(crate::vcs::CHECKOUT_SCRATCH);
            pid.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p != me)
                && e.file_type().is_ok_and(|t| t.is_dir())
                && std::fs::remove_dir_all(e.path()).is_ok()
        })
        .count()
}

/// `.<name>.tmp.<pid>` of another pid, or the executor's `run.pgid.tmp`.
fn is_stale_temp(name: &str, me: &str) -> bool {
    if name == "run.pgid.tmp" {
        return true;
    }
    match name.strip_prefix('.').and_then(|n| n.rsplit_once(".tmp.")) {
        Some((base, pid)) => !base.is_empty() && !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && pid != me,
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_other_processes_temp_files_go() {
        let d = tempfile::tempdir().unwrap();
        let me = std::process::id();
        for name in [
            ".results.csv.tmp.12345",
            ".journal.json.tmp.7",
            "run.pgid.tmp",
            &format!(".state.json.tmp.{me}"),
            "results.csv",
            ".tmp.1",
            "x.tmp.5",
        ] {
            std::fs::write(d.path().join(name), "x").unwrap();
        }
        assert_eq!(remove_stale_temp_files(&[d.path()]), 3);
        let mut left: Vec<String> =
            std::fs::read_dir(d.path()).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect();
        left.sort();
        assert_eq!(left, vec![format!(".state.json.tmp.{me}"), ".tmp.1".into(), "results.csv".into(), "x.tmp.5".into()]);
    }
}
