//! Git work at scale: a status walk refreshes the index's stat cache of files whose
//! stat data changed but whose content did not, so later walks compare stat data instead of
//! re-reading and re-hashing every such file (the cost figures are in docs/git.md, from
//! `cargo bench --bench git_scale`).

use crate::support;

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

/// Tree of `files` (path -> (content, mode)) built in `repo`; a path that a longer one uses as a
/// directory is dropped (a tree cannot hold both).
fn tree_of(repo: &git2::Repository, files: &std::collections::BTreeMap<String, (u8, u8)>) -> git2::Oid {
    use git2::FileMode;
    let empty = repo.treebuilder(None).unwrap().write().unwrap();
    let mut b = git2::build::TreeUpdateBuilder::new();
    for (p, &(content, mode)) in files {
        if files.keys().any(|q| q.starts_with(&format!("{p}/"))) {
            continue;
        }
        let mode = [FileMode::Blob, FileMode::BlobExecutable, FileMode::Link, FileMode::Commit][mode as usize % 4];
        let id = match mode {
            FileMode::Commit => git2::Oid::from_bytes(&[content.max(1); 20]).unwrap(),
            _ => repo.blob(&[b'p' + content]).unwrap(),
        };
        b.upsert(p.as_str(), id, mode);
    }
    b.create_updated(repo, &repo.find_tree(empty).unwrap()).unwrap()
}

fn arb_files() -> impl proptest::strategy::Strategy<Value = std::collections::BTreeMap<String, (u8, u8)>> {
    use proptest::prelude::*;
    let name = prop::sample::select(vec!["a", "b", "c"]);
    let path = prop::collection::vec(name, 1..4).prop_map(|v| v.join("/"));
    prop::collection::btree_map(path, (0u8..3, 0u8..4), 0..12)
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(120))]
    /// The pruning tree diff behind keep and revert finds exactly the paths libgit2's full
    /// tree-to-tree diff finds: content, mode, symlink and gitlink changes, additions, deletions,
    /// and a file turning into a directory or back.
    #[test]
    fn changed_paths_matches_libgit2s_diff(old in arb_files(), new in arb_files()) {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init_bare(dir.path()).unwrap();
        let (a, b) = (repo.find_tree(tree_of(&repo, &old)).unwrap(), repo.find_tree(tree_of(&repo, &new)).unwrap());
        let diff = repo.diff_tree_to_tree(Some(&a), Some(&b), None).unwrap();
        let mut want: Vec<String> = diff
            .deltas()
            .flat_map(|d| [d.old_file().path(), d.new_file().path()])
            .flatten()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        want.sort();
        want.dedup();
        proptest::prop_assert_eq!(ratchet::vcs::changed_paths(&repo, &a, &b).unwrap(), want);
    }
}

/// A change made to a work tree while ratchet looks away: the cases the stat pass and the
/// watcher must see exactly as a whole-tree status walk does.
#[derive(Debug, Clone)]
enum Op {
    Modify(usize, bool),
    Touch(usize),
    Chmod(usize),
    Delete(usize),
    DeleteDir(usize),
    Create(usize, u8),
    CreateIgnored(usize),
    FileToDir(usize),
    DirToFile(usize),
    DirToSymlink(usize),
    Stage(usize),
    Rename(usize),
}

const FILES: [&str; 7] = ["a.txt", "b.sh", "link", "d1/x.txt", "d1/y.txt", "d1/sub/z.txt", "d2/w.txt"];
const DIRS: [&str; 8] = ["", "d1", "d1/sub", "d2", "empty", "objs", "ign", "fresh"];

fn arb_ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
    use proptest::prelude::*;
    let f = 0..FILES.len();
    let d = 0..DIRS.len();
    let op = prop_oneof![
        (f.clone(), any::<bool>()).prop_map(|(i, s)| Op::Modify(i, s)),
        f.clone().prop_map(Op::Touch),
        f.clone().prop_map(Op::Chmod),
        f.clone().prop_map(Op::Delete),
        d.clone().prop_map(Op::DeleteDir),
        (d.clone(), 0u8..3).prop_map(|(i, n)| Op::Create(i, n)),
        d.clone().prop_map(Op::CreateIgnored),
        f.clone().prop_map(Op::FileToDir),
        d.clone().prop_map(Op::DirToFile),
        d.clone().prop_map(Op::DirToSymlink),
        f.clone().prop_map(Op::Stage),
        f.prop_map(Op::Rename),
    ];
    prop::collection::vec(op, 0..5)
}

/// A committed tree with a symlink, an executable, nested directories and ignore rules, plus
/// what lives untracked beside it: an empty directory, one holding ignored files only, an
/// ignored directory, an ignored file among tracked ones.
fn scan_repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git").args(args).current_dir(d).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    for (p, text) in [
        ("a.txt", "a\n"),
        ("b.sh", "echo b\n"),
        ("d1/x.txt", "x\n"),
        ("d1/y.txt", "y\n"),
        ("d1/sub/z.txt", "z\n"),
        ("d2/w.txt", "w\n"),
        (".gitignore", "*.o\nign/\n"),
    ] {
        std::fs::create_dir_all(d.join(p).parent().unwrap()).unwrap();
        std::fs::write(d.join(p), text).unwrap();
    }
    std::fs::set_permissions(d.join("b.sh"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", d.join("link")).unwrap();
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "base"]);
    std::fs::create_dir_all(d.join("empty")).unwrap();
    std::fs::create_dir_all(d.join("objs")).unwrap();
    std::fs::write(d.join("objs/k.o"), "k").unwrap();
    std::fs::create_dir_all(d.join("ign")).unwrap();
    std::fs::write(d.join("ign/q.txt"), "q").unwrap();
    std::fs::write(d.join("d1/m.o"), "m").unwrap();
    tmp
}

fn apply(d: &std::path::Path, ops: &[Op]) {
    use std::fs;
    let git = |args: &[&str]| {
        let _ = std::process::Command::new("git").args(args).current_dir(d).output();
    };
    for op in ops {
        let _ = match op {
            Op::Modify(i, same) => fs::write(d.join(FILES[*i]), if *same { "Q\n" } else { "a longer text\n" }),
            Op::Touch(i) => fs::File::options()
                .write(true)
                .open(d.join(FILES[*i]))
                .and_then(|f| f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))),
            Op::Chmod(i) => fs::set_permissions(d.join(FILES[*i]), std::os::unix::fs::PermissionsExt::from_mode(0o700)),
            Op::Delete(i) => fs::remove_file(d.join(FILES[*i])),
            Op::DeleteDir(i) if !DIRS[*i].is_empty() => fs::remove_dir_all(d.join(DIRS[*i])),
            Op::DeleteDir(_) => Ok(()),
            Op::Create(i, n) => {
                fs::create_dir_all(d.join(DIRS[*i])).and_then(|_| fs::write(d.join(DIRS[*i]).join(format!("new{n}.txt")), "n\n"))
            }
            Op::CreateIgnored(i) => fs::create_dir_all(d.join(DIRS[*i])).and_then(|_| fs::write(d.join(DIRS[*i]).join("gen.o"), "o")),
            Op::FileToDir(i) => fs::remove_file(d.join(FILES[*i]))
                .and_then(|_| fs::create_dir(d.join(FILES[*i])))
                .and_then(|_| fs::write(d.join(FILES[*i]).join("inner.txt"), "i\n")),
            Op::DirToFile(i) if !DIRS[*i].is_empty() => {
                fs::remove_dir_all(d.join(DIRS[*i])).and_then(|_| fs::write(d.join(DIRS[*i]), "f\n"))
            }
            Op::DirToSymlink(i) if !DIRS[*i].is_empty() && d.join("d2").is_dir() => {
                fs::remove_dir_all(d.join(DIRS[*i])).and_then(|_| std::os::unix::fs::symlink(d.join("d2"), d.join(DIRS[*i])))
            }
            Op::DirToFile(_) | Op::DirToSymlink(_) => Ok(()),
            Op::Stage(i) => fs::write(d.join(FILES[*i]), "staged\n").map(|_| git(&["add", "--", FILES[*i]])),
            Op::Rename(i) => fs::rename(d.join(FILES[*i]), d.join(format!("{}.moved", FILES[*i]))),
        };
    }
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
    /// The stat pass (with libgit2 settling only the paths it cannot) finds exactly the
    /// hypothesis a whole-tree status walk finds, whatever was changed.
    #[test]
    fn the_stat_pass_finds_what_a_full_walk_finds(ops in arb_ops()) {
        let tmp = scan_repo();
        apply(tmp.path(), &ops);
        let fast = ratchet::vcs::Repo::discover(tmp.path()).unwrap();
        let full = ratchet::vcs::Repo::discover(tmp.path()).unwrap();
        full.set_full_scan(true);
        let got = sorted(fast.changes().unwrap());
        proptest::prop_assert_eq!(got, sorted(full.changes().unwrap()));
    }

    /// After the runs, the watcher armed by the walk before the commit sees every untracked
    /// entry and every edit that a whole-tree walk sees.
    #[test]
    fn the_watcher_sees_what_a_full_walk_after_the_runs_sees(ops in arb_ops()) {
        let tmp = scan_repo();
        let fast = ratchet::vcs::Repo::discover(tmp.path()).unwrap();
        proptest::prop_assert_eq!(fast.changes().unwrap(), Vec::<String>::new());
        apply(tmp.path(), &ops);
        let full = ratchet::vcs::Repo::discover(tmp.path()).unwrap();
        full.set_full_scan(true);
        let (a, b) = (fast.after_run_scan().unwrap(), full.after_run_scan().unwrap());
        proptest::prop_assert_eq!(sorted(a.untracked), sorted(b.untracked));
        proptest::prop_assert_eq!(sorted(a.edited), sorted(b.edited));
    }
}

/// What a directory holds, as (path, content or link target, executable), `.git` left out.
fn listing(root: &std::path::Path) -> Vec<(String, Vec<u8>, bool)> {
    fn walk(root: &std::path::Path, dir: &std::path::Path, out: &mut Vec<(String, Vec<u8>, bool)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if rel == ".git" {
                continue;
            }
            let md = std::fs::symlink_metadata(&p).unwrap();
            if md.file_type().is_symlink() {
                out.push((rel, std::fs::read_link(&p).unwrap().into_os_string().into_encoded_bytes(), false));
            } else if md.is_dir() {
                walk(root, &p, out);
            } else {
                use std::os::unix::fs::PermissionsExt;
                out.push((rel, std::fs::read(&p).unwrap(), md.permissions().mode() & 0o100 != 0));
            }
        }
    }
    let mut out = vec![];
    walk(root, root, &mut out);
    out.sort();
    out
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(40))]
    /// The incumbent checkout moved along the changed paths holds exactly the new incumbent's
    /// tree: contents, symlinks, executable bits, and nothing left of the old one.
    #[test]
    fn the_incumbent_checkout_moves_to_exactly_the_new_tree(first in arb_files(), second in arb_files()) {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path();
        let repo = git2::Repository::init(d).unwrap();
        let sig = git2::Signature::now("t", "t@e").unwrap();
        // Gitlinks need a submodule set-up; the other modes are what a kernel repository holds.
        let plain = |f: &std::collections::BTreeMap<String, (u8, u8)>| f.iter().map(|(k, &(c, m))| (k.clone(), (c, m % 3))).collect();
        let (first, second) = (plain(&first), plain(&second));
        let t1 = repo.find_tree(tree_of(&repo, &first)).unwrap();
        let c1 = repo.commit(Some("HEAD"), &sig, &sig, "one", &t1, &[]).unwrap();
        let t2 = repo.find_tree(tree_of(&repo, &second)).unwrap();
        let c2 = repo.commit(None, &sig, &sig, "two", &t2, &[&repo.find_commit(c1).unwrap()]).unwrap();
        let ours = ratchet::vcs::Repo::discover(d).unwrap();
        let wt = ours.incumbent_worktree(c1).unwrap();
        // What the tree holds, written out by hand.
        let expect = |tree: &git2::Tree| {
            let mut out = vec![];
            tree.walk(git2::TreeWalkMode::PreOrder, |dir, e| {
                if e.kind() == Some(git2::ObjectType::Blob) {
                    let blob = repo.find_blob(e.id()).unwrap();
                    let mode = e.filemode();
                    let exec = mode == i32::from(git2::FileMode::BlobExecutable);
                    out.push((format!("{dir}{}", e.name().unwrap()), blob.content().to_vec(), exec));
                }
                git2::TreeWalkResult::Ok
            })
            .unwrap();
            out.sort();
            out
        };
        proptest::prop_assert_eq!(listing(&wt), expect(&t1));
        ours.incumbent_worktree(c2).unwrap();
        proptest::prop_assert_eq!(listing(&wt), expect(&t2));
    }
}
