//! Unusual git set-ups: sparse checkouts, linked worktrees, ids after results.csv is
//! moved aside, calibrate under the lock, a kill inside the revert with edits made meanwhile,
//! foreign worktrees, submodules, hooks and signing, filters and a leftover index.lock. Each
//! runs the real binary against a throw-away repo and checks that nothing was lost, changed
//! outside the hypothesis, or run.

use crate::support;

use predicates::prelude::*;
use std::os::unix::process::ExitStatusExt;
use support::TestRepo;

fn tree_files(t: &TestRepo, rev: &str) -> Vec<String> {
    t.git(&["ls-tree", "-r", "--name-only", rev]).lines().map(str::to_string).collect()
}

#[test]
fn sparse_checkout_commits_the_incumbent_tree_plus_the_change() {
    let t = TestRepo::new();
    for d in ["a", "b", "c"] {
        for i in 0..2 {
            t.write(&format!("{d}/f{i}.txt"), &format!("{d}{i}\n"));
        }
    }
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "dirs"]);
    let base = t.head();
    let all = tree_files(&t, "HEAD");
    assert_eq!(all.len(), 9);
    t.git(&["sparse-checkout", "set", "a"]);
    assert!(!t.path().join("b/f0.txt").exists(), "b/ is outside the cone");

    // Kept: the new commit is the whole tree with fake.env changed.
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.write("a/f0.txt", "a0 changed\n");
    t.ratchet().arg("experiment: faster").assert().success();
    assert_eq!(t.rows()[0]["status"], "keep");
    assert_eq!(tree_files(&t, "HEAD"), all, "no file outside the cone was dropped");
    assert_eq!(t.git(&["diff", "--name-only", &base, "HEAD"]).lines().collect::<Vec<_>>(), ["a/f0.txt", "fake.env"]);
    assert_eq!(t.git(&["status", "--porcelain"]), "");

    // Reverted: the branch goes back, the parked commit is whole too, the cone stays sparse.
    let kept = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower").assert().success();
    assert_eq!(t.head(), kept);
    assert_eq!(tree_files(&t, "refs/ratchet/discarded/2"), all);
    assert!(!t.path().join("b/f0.txt").exists());
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn linked_worktrees_never_share_ids_refs_or_incumbent_checkouts() {
    let t = TestRepo::new();
    let wt2 = tempfile::tempdir().unwrap();
    let wt2_path = wt2.path().join("wt2");
    t.git(&["worktree", "add", "-q", "-b", "other", wt2_path.to_str().unwrap()]);
    let run_in = |dir: &std::path::Path, msg: &str| {
        let mut c = t.ratchet();
        c.current_dir(dir).arg(msg);
        c
    };
    // Reverted in the main worktree, then in the linked one.
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    run_in(t.path(), "experiment: main slower").assert().success();
    let first = t.git(&["rev-parse", "refs/ratchet/discarded/1"]);
    std::fs::write(wt2_path.join("fake.env"), "FAKE_LATENCY_MS=30\n").unwrap();
    run_in(&wt2_path, "experiment: linked slower").assert().success();
    assert_eq!(t.git(&["rev-parse", "refs/ratchet/discarded/1"]), first, "the first parked hypothesis is intact");
    assert_eq!(t.git(&["log", "-1", "--format=%s", "refs/ratchet/discarded/2"]).trim(), "experiment: linked slower");
    // Both incumbent checkouts exist, each registered on its own.
    let main_inc = t.path().join(".ratchet/worktrees/incumbent");
    let wt2_inc = wt2_path.join(".ratchet/worktrees/incumbent");
    assert!(main_inc.join("fake.env").exists() && wt2_inc.join("fake.env").exists());
    let list = t.git(&["worktree", "list", "--porcelain"]);
    assert!(
        list.contains(main_inc.canonicalize().unwrap().to_str().unwrap())
            && list.contains(wt2_inc.canonicalize().unwrap().to_str().unwrap()),
        "{list}"
    );
    // A third run in main still finds its own incumbent checkout (not pruned by the linked one).
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    run_in(t.path(), "experiment: main faster").assert().success();
    assert_eq!(t.rows().iter().map(|r| r["id"].as_str()).collect::<Vec<_>>(), ["1", "3"]);

    // At once: one lock per repository, whichever worktree holds it.
    let pid_file = t.hanging_candidate();
    let mut first = t.spawn_ratchet("experiment: holds the lock");
    support::wait_for(&pid_file);
    std::fs::write(wt2_path.join("fake.env"), "FAKE_LATENCY_MS=4\n").unwrap();
    run_in(&wt2_path, "experiment: at once").assert().code(5).stderr(predicate::str::contains("another ratchet"));
    assert!(main_inc.join("fake.env").exists(), "the running experiment's incumbent checkout is untouched");
    unsafe {
        libc::kill(first.id() as i32, libc::SIGTERM);
    }
    first.wait().unwrap();
}

#[test]
fn ids_are_never_reused_when_results_csv_is_moved_aside() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower").assert().success();
    let parked = t.git(&["rev-parse", "refs/ratchet/discarded/1"]);
    std::fs::rename(t.path().join("results/results.csv"), t.path().join("results/old.csv")).unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=30\n");
    t.ratchet().arg("experiment: slower still").assert().success();
    assert_eq!(t.rows()[0]["id"], "2");
    assert_eq!(t.git(&["rev-parse", "refs/ratchet/discarded/1"]), parked, "the old parked hypothesis is not overwritten");
    assert_eq!(t.git(&["log", "-1", "--format=%s", "refs/ratchet/discarded/2"]).trim(), "experiment: slower still");
    // Even with the counter gone too, the parked refs keep ids unique.
    std::fs::remove_file(t.path().join(".git/ratchet/last-id")).unwrap();
    std::fs::remove_file(t.path().join("results/results.csv")).unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=40\n");
    t.ratchet().arg("experiment: slowest").assert().success();
    assert_eq!(t.rows()[0]["id"], "3");
    assert_eq!(t.git(&["rev-parse", "refs/ratchet/discarded/1"]), parked);
}

#[test]
fn calibrate_waits_for_the_lock_and_leaves_the_incumbent_checkout_alone() {
    let t = TestRepo::new();
    let base = t.head();
    let pid_file = t.hanging_candidate();
    let incumbent = t.head();
    assert_ne!(base, incumbent);
    let mut first = t.spawn_ratchet("experiment: holds the lock");
    support::wait_for(&pid_file);
    let inc_dir = t.path().join(".ratchet/worktrees/incumbent");
    let inc_head = || std::process::Command::new("git").args(["rev-parse", "HEAD"]).current_dir(&inc_dir).output().unwrap().stdout;
    let before = inc_head();
    t.ratchet().args(["calibrate", "--pairs", "2"]).assert().code(5).stderr(predicate::str::contains("another ratchet"));
    assert_eq!(inc_head(), before, "the incumbent checkout still holds the incumbent");
    assert_eq!(String::from_utf8(before).unwrap().trim(), incumbent);
    unsafe {
        libc::kill(first.id() as i32, libc::SIGTERM);
    }
    first.wait().unwrap();
}

#[test]
fn a_kill_inside_the_revert_parks_the_hypothesis_and_the_edits_made_meanwhile() {
    let t = TestRepo::with_config(&support::DEFAULT_CONFIG.replace("min_pairs = 4\nmax_pairs = 8", "min_pairs = 2\nmax_pairs = 2"));
    t.write("run0.txt", "original\n");
    t.git(&["add", "run0.txt"]);
    t.git(&["commit", "-qm", "a tracked file the benchmark overwrites (as a user's edit would)"]);
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    let out =
        t.ratchet().arg("experiment: slower").env("RATCHET_FAULT", "mid-revert-checkout").env("FAKE_WRITE_DIR", t.path()).output().unwrap();
    assert_eq!(out.status.signal(), Some(9), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n", "killed with the work tree already reverted");
    t.ratchet().arg("recover").assert().success();
    assert_eq!(t.head(), base);
    assert_eq!(t.git(&["show", "refs/ratchet/discarded/1:fake.env"]), "FAKE_LATENCY_MS=20\n", "the hypothesis, not its inverse");
    assert_eq!(t.git(&["show", "refs/ratchet/discarded/1:run0.txt"]), "benchmark output\n", "the edit made meanwhile");
    assert_eq!(t.read("run0.txt"), "original\n");
    assert_eq!(t.git(&["status", "--porcelain", "--untracked-files=no"]), "");
}

#[test]
fn a_foreign_worktree_at_the_incumbent_path_is_never_clobbered() {
    let t = TestRepo::new();
    let path = t.path().join(".ratchet/worktrees/incumbent");
    t.git(&["worktree", "add", "-q", "-b", "mine", path.to_str().unwrap()]);
    std::fs::write(path.join("kernel.py"), "my work in progress\n").unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let base = t.head();
    t.ratchet().arg("experiment: faster").assert().failure().stderr(predicate::str::contains("not ratchet's incumbent checkout"));
    assert_eq!(std::fs::read_to_string(path.join("kernel.py")).unwrap(), "my work in progress\n");
    let branch = std::process::Command::new("git").args(["branch", "--show-current"]).current_dir(&path).output().unwrap().stdout;
    assert_eq!(String::from_utf8(branch).unwrap().trim(), "mine");
    // Refused before the commit: the change is still in the work tree, nothing parked or recorded.
    assert_eq!(t.head(), base);
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n");
    assert_eq!(t.git(&["for-each-ref", "refs/ratchet/"]), "");
    assert!(t.rows().is_empty());

    // Plain files there are not removed either.
    let t = TestRepo::new();
    t.write(".ratchet/worktrees/incumbent/notes.txt", "keep me\n");
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().failure().stderr(predicate::str::contains("not ratchet's incumbent checkout"));
    assert_eq!(t.read(".ratchet/worktrees/incumbent/notes.txt"), "keep me\n");
}

#[test]
fn the_incumbent_checkout_has_the_submodules() {
    let sub = TestRepo::new();
    sub.write("lib.py", "VALUE = 1\n");
    sub.git(&["add", "-A"]);
    sub.git(&["commit", "-qm", "lib"]);
    let t = TestRepo::new();
    t.git(&["-c", "protocol.file.allow=always", "submodule", "add", "-q", sub.path().to_str().unwrap(), "vendor/lib"]);
    t.git(&["commit", "-qm", "add submodule"]);
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    assert_eq!(t.read(".ratchet/worktrees/incumbent/vendor/lib/lib.py"), "VALUE = 1\n");
}

/// `ratchet MESSAGE` refuses with exit 4 (a git set-up it will not work in), naming each of
/// `needles` on stderr, and commits nothing.
fn refused_at_start(t: &TestRepo, message: &str, needles: &[&str]) {
    let base = t.head();
    let out = t.ratchet().arg(message).assert().code(4).get_output().stderr.clone();
    let err = String::from_utf8_lossy(&out);
    for n in needles {
        assert!(err.contains(n), "{n:?} missing from: {err}");
    }
    assert_eq!(t.head(), base, "nothing committed");
}

#[test]
fn hooks_and_signing_are_honoured_by_a_clear_refusal_or_skipped_on_request() {
    let t = TestRepo::new();
    let marker = t.path().join("hook-ran");
    let hook = t.path().join(".git/hooks/pre-commit");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
    std::fs::set_permissions(&hook, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    refused_at_start(&t, "experiment: faster", &["pre-commit", "ratchet.skipHooks"]);
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n");
    assert!(t.rows().is_empty());
    t.git(&["config", "ratchet.skipHooks", "true"]);
    t.ratchet().arg("experiment: faster").assert().success().stderr(predicate::str::contains("do not run the pre-commit hook"));
    assert!(!marker.exists());

    t.write("fake.env", "FAKE_LATENCY_MS=4\n");
    t.git(&["config", "commit.gpgsign", "true"]);
    refused_at_start(&t, "experiment: faster still", &["gpgsign", "ratchet.unsignedCommits"]);
    t.git(&["config", "ratchet.unsignedCommits", "true"]);
    t.ratchet().arg("experiment: faster still").assert().success().stderr(predicate::str::contains("not signed"));
}

#[test]
fn filter_attributes_are_refused_at_start_naming_the_filter() {
    let t = TestRepo::new();
    t.write(".gitattributes", "*.dat filter=crypt\n");
    t.write("weights.dat", "secret\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "filtered data"]);
    t.git(&["config", "filter.crypt.clean", "rev"]);
    t.git(&["config", "filter.crypt.smudge", "rev"]);
    t.write("weights.dat", "new secret\n");
    refused_at_start(&t, "experiment: new weights", &["filter `crypt`", ".gitattributes", "*.dat"]);
    assert_eq!(t.read("weights.dat"), "new secret\n");
    assert!(!t.path().join(".ratchet/worktrees/incumbent").exists());
}

#[test]
fn a_leftover_index_lock_is_named_with_the_fix() {
    let t = TestRepo::new();
    std::fs::write(t.path().join(".git/index.lock"), "").unwrap();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    refused_at_start(&t, "experiment: faster", &["index.lock", "rm "]);
    assert!(t.rows().is_empty());
}

/// A faster hypothesis kept, then a slower one reverted, through the binary in `t`: every row,
/// ratchet's directories and the incumbent checkout are in `t`'s work tree.
fn keep_then_revert(t: &TestRepo) {
    let base = t.head();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    t.ratchet().arg("experiment: faster").assert().success();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower").assert().success();
    let rows = t.rows();
    assert_eq!(rows.iter().map(|r| r["status"].as_str()).collect::<Vec<_>>(), ["keep", "revert"], "{rows:?}");
    assert_ne!(t.head(), base);
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    assert_eq!(t.read(".ratchet/worktrees/incumbent/fake.env"), "FAKE_LATENCY_MS=5\n");
}

/// Only the git directory itself in `dir`: ratchet made nothing beside it.
fn only_the_git_dir_in(dir: &std::path::Path, git_dir: &str) {
    let names: Vec<String> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert_eq!(names, [git_dir], "nothing is made beside the git directory");
}

#[test]
fn a_separate_git_dir_leaves_the_work_tree_where_the_git_file_is() {
    let t = TestRepo::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let git_dir = elsewhere.path().join("kernel.git");
    // Moves the repository there and leaves a `.git` file (`gitdir: ...`), with no core.worktree.
    t.git(&["init", "-q", &format!("--separate-git-dir={}", git_dir.display())]);
    assert!(t.path().join(".git").is_file());
    keep_then_revert(&t);
    only_the_git_dir_in(elsewhere.path(), "kernel.git");
}

#[test]
fn a_git_symlink_leaves_the_work_tree_where_the_link_is() {
    let t = TestRepo::new();
    let elsewhere = tempfile::tempdir().unwrap();
    let git_dir = elsewhere.path().join("kernel.git");
    std::fs::rename(t.path().join(".git"), &git_dir).unwrap();
    std::os::unix::fs::symlink(&git_dir, t.path().join(".git")).unwrap();
    keep_then_revert(&t);
    only_the_git_dir_in(elsewhere.path(), "kernel.git");
}

#[test]
fn a_repository_owned_by_someone_else_is_named_with_gits_fix() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: handing a repository to another user needs root (the error's wording has a unit test)");
        return;
    }
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let st = std::process::Command::new("chown").args(["-R", "nobody"]).arg(t.path()).status().unwrap();
    assert!(st.success());
    let root = t.path().canonicalize().unwrap();
    let out = t.ratchet().arg("experiment: faster").assert().code(4).get_output().stderr.clone();
    let err = String::from_utf8_lossy(&out);
    assert!(err.contains("owned by someone else"), "{err}");
    assert!(err.contains(&format!("git config --global --add safe.directory {}", root.display())), "{err}");
    assert!(!err.contains("not inside a git repository"), "{err}");
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n");
}

#[test]
fn a_copied_repository_runs_experiments_and_leaves_the_original_alone() {
    let t = TestRepo::new();
    t.write("fake.env", "FAKE_LATENCY_MS=20\n");
    t.ratchet().arg("experiment: slower, to make the incumbent checkout").assert().success();
    let original = |args: &[&str]| t.git(args);
    let (head, worktrees) = (t.head(), original(&["worktree", "list", "--porcelain"]));
    let results = t.read("results/results.csv");
    let inc_head = || support::git_in(&t.path().join(".ratchet/worktrees/incumbent"), &["rev-parse", "HEAD"]);
    let original_inc = inc_head();

    // The copy carries ratchet's state and the incumbent checkout registered in the original.
    let to = tempfile::tempdir().unwrap();
    let copy = to.path().join("copy");
    let st = std::process::Command::new("cp").arg("-r").arg(t.path()).arg(&copy).status().unwrap();
    assert!(st.success());
    std::fs::write(copy.join("fake.env"), "FAKE_LATENCY_MS=5\n").unwrap();
    let out = t.ratchet().current_dir(&copy).arg("experiment: faster in the copy").output().unwrap();
    assert_eq!(
        std::fs::read_to_string(copy.join("fake.env")).unwrap(),
        "FAKE_LATENCY_MS=5\n",
        "the edit is in the copy's work tree: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let in_copy = |args: &[&str]| support::git_in(&copy, args);
    assert_eq!(in_copy(&["log", "-1", "--format=%s"]), "experiment: faster in the copy");
    assert_eq!(in_copy(&["status", "--porcelain"]), "");
    let copy_inc = copy.join(".ratchet/worktrees/incumbent");
    assert_eq!(support::git_in(&copy_inc, &["rev-parse", "HEAD"]), in_copy(&["rev-parse", "HEAD~"]), "it measured the incumbent");
    assert!(
        in_copy(&["worktree", "list", "--porcelain"]).contains(copy_inc.canonicalize().unwrap().to_str().unwrap()),
        "the copy's incumbent checkout is registered in the copy"
    );

    // The original: its branch, results, incumbent checkout and its registration as they were.
    assert_eq!(t.head(), head);
    assert_eq!(original(&["worktree", "list", "--porcelain"]), worktrees);
    assert_eq!(t.read("results/results.csv"), results);
    assert_eq!(inc_head(), original_inc);
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=10\n");
    t.write("fake.env", "FAKE_LATENCY_MS=4\n");
    t.ratchet().arg("experiment: faster in the original").assert().success();
    assert_eq!(t.rows().last().unwrap()["status"], "keep");
}
