//! Issue 10, git work at scale: a status walk refreshes the index's stat cache of files whose
//! stat data changed but whose content did not, so later walks compare stat data instead of
//! re-reading and re-hashing every such file (the cost figures are in docs/git.md, from
//! `cargo run --release --example git_scale`).

mod support;

use std::time::{Duration, SystemTime};
use support::TestRepo;

fn index_mtime(dir: &std::path::Path, rel: &str) -> (i32, git2::Oid) {
    let repo = git2::Repository::open(dir).unwrap();
    let index = repo.index().unwrap();
    let e = index.get_path(std::path::Path::new(rel), 0).unwrap();
    (e.mtime.seconds(), e.id)
}

#[test]
fn a_status_walk_refreshes_the_stat_cache_of_touched_files() {
    let t = TestRepo::new();
    t.git(&["status", "--porcelain"]);
    let (_, id) = index_mtime(t.path(), "kernel.py");
    // Touched (as a build or a checkout does): new mtime, same content.
    let when = SystemTime::now() - Duration::from_secs(3600);
    std::fs::File::options().write(true).open(t.path().join("kernel.py")).unwrap().set_modified(when).unwrap();
    let file_mtime = when.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i32;
    assert_ne!(index_mtime(t.path(), "kernel.py").0, file_mtime);
    let repo = ratchet::vcs::Repo::discover(t.path()).unwrap();
    assert!(repo.changes().unwrap().is_empty(), "a touched file is no change");
    assert_eq!(index_mtime(t.path(), "kernel.py"), (file_mtime, id), "the walk refreshed the entry's stat data, not its content");

    // The walk after the runs does the same.
    let when = when - Duration::from_secs(60);
    std::fs::File::options().write(true).open(t.path().join("fake.env")).unwrap().set_modified(when).unwrap();
    let scan = repo.after_run_scan().unwrap();
    assert!(scan.edited.is_empty() && scan.untracked.is_empty());
    let file_mtime = when.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs() as i32;
    assert_eq!(index_mtime(t.path(), "fake.env").0, file_mtime);

    // A real edit is still an edit, and its index entry keeps the committed content.
    t.write("kernel.py", "BQ = 64\n");
    assert_eq!(repo.changes().unwrap(), vec!["kernel.py".to_string()]);
    assert_eq!(index_mtime(t.path(), "kernel.py").1, id);
}
