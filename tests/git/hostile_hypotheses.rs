//! Hostile hypotheses: a sweep hypothesis that does not apply, or that names a path it
//! must not write (through a symlink, into `.git`, over an untracked or ignored file), changes
//! nothing at all; one that touches the harness becomes a `refused` row and the sweep goes on;
//! a sweep killed before its commit is undone by `status` and never committed by the next
//! single experiment.

use crate::support;

use predicates::prelude::*;
use std::os::unix::process::ExitStatusExt;
use support::TestRepo;

/// Every file under `dir` with its bytes, for before/after comparison.
fn snapshot(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let md = std::fs::symlink_metadata(&p).unwrap();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            if md.file_type().is_symlink() {
                out.push((rel, std::fs::read_link(&p).unwrap().to_string_lossy().as_bytes().to_vec()));
            } else if md.is_dir() {
                stack.push(p);
            } else {
                out.push((rel, std::fs::read(&p).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn faster(t: &TestRepo, name: &str) {
    t.write(
        &format!("experiments/{name}"),
        "message = \"exp: faster\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"FAKE_LATENCY_MS=10\\n\"\nreplace = \"FAKE_LATENCY_MS=5\\n\"\n",
    );
}

#[test]
fn hypotheses_that_do_not_apply_or_aim_outside_change_nothing() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.txt"), "outside the repo\n").unwrap();
    let t = TestRepo::new();
    // A committed symlink to a directory outside, one to a file outside, one into .git, an
    // ignored 1 MB data file, and ignored notes (a sweep starts only on a clean tree, so an
    // untracked file is the single experiment's case).
    std::os::unix::fs::symlink(outside.path(), t.path().join("ext")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("victim.txt"), t.path().join("victim-link.txt")).unwrap();
    std::os::unix::fs::symlink(".git/config", t.path().join("gitcfg")).unwrap();
    t.write(".gitignore", "data.bin\nnotes.txt\nscratch\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "links"]);
    std::fs::write(t.path().join("data.bin"), vec![7u8; 1 << 20]).unwrap();
    std::os::unix::fs::symlink(outside.path(), t.path().join("scratch")).unwrap();
    t.write("notes.txt", "my untracked notes\n");
    let kernel_hunk =
        "diff --git a/kernel.py b/kernel.py\n--- a/kernel.py\n+++ b/kernel.py\n@@ -1,2 +1,2 @@\n-BQ = 128\n+BQ = 64\n BKV = 256\n";
    let cases: &[(&str, String)] = &[
        // A valid hunk, then one through the committed directory symlink.
        ("01-through-symlink.patch", format!("{kernel_hunk}diff --git a/ext/victim.txt b/ext/victim.txt\n--- a/ext/victim.txt\n+++ b/ext/victim.txt\n@@ -1 +1 @@\n-outside the repo\n+owned\n")),
        // Adds a file over the ignored data file, and one over the untracked notes.
        ("02-over-ignored.patch", format!("{kernel_hunk}diff --git a/data.bin b/data.bin\nnew file mode 100644\n--- /dev/null\n+++ b/data.bin\n@@ -0,0 +1 @@\n+small\n")),
        ("03-over-untracked.patch", "diff --git a/notes.txt b/notes.txt\nnew file mode 100644\n--- /dev/null\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+replaced\n".to_string()),
        // Deletes the ignored data file (git does not track it).
        ("04-delete-ignored.patch", format!("{kernel_hunk}diff --git a/data.bin b/data.bin\ndeleted file mode 100644\n--- a/data.bin\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n")),
        // A valid hunk, then one that does not apply: all or nothing.
        ("05-half.patch", format!("{kernel_hunk}diff --git a/fake.env b/fake.env\n--- a/fake.env\n+++ b/fake.env\n@@ -1 +1 @@\n-FAKE_LATENCY_MS=99\n+FAKE_LATENCY_MS=1\n")),
        // Adds a file under an ignored symlink to a directory outside.
        ("06-into-ignored-link.patch", "diff --git a/scratch/new.txt b/scratch/new.txt\nnew file mode 100644\n--- /dev/null\n+++ b/scratch/new.txt\n@@ -0,0 +1 @@\n+planted\n".to_string()),
    ];
    for (i, (name, text)) in cases.iter().enumerate() {
        t.write(&format!("experiments/{name}"), text);
        t.write(&format!("experiments/{:02}.toml", i + 1), &format!("message = \"exp: hostile {i}\"\npatch = \"{name}\"\n"));
    }
    // Edits through symlinks: out of the repo, and into .git.
    t.write(
        "experiments/07.toml",
        "message = \"exp: edit outside\"\n[[edit]]\nfile = \"victim-link.txt\"\nfind = \"outside\"\nreplace = \"owned\"\n",
    );
    t.write("experiments/08.toml", "message = \"exp: edit git config\"\n[[edit]]\nfile = \"gitcfg\"\nfind = \"[core]\"\nreplace = \"[core]\\n\\tfsmonitor = touch /tmp/pwned\"\n");
    // An edit of the untracked notes.
    t.write(
        "experiments/09.toml",
        "message = \"exp: edit untracked\"\n[[edit]]\nfile = \"notes.txt\"\nfind = \"my\"\nreplace = \"your\"\n",
    );
    faster(&t, "10-faster.toml");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let base = t.head();
    let repo_before: Vec<_> = snapshot(t.path()).into_iter().filter(|(p, _)| !p.starts_with("experiments")).collect();
    let outside_before = snapshot(outside.path());

    t.ratchet().arg("sweep").assert().success();
    let rows = t.rows();
    let st: Vec<&str> = rows.iter().map(|r| r["status"].as_str()).collect();
    assert_eq!(st[..9], ["skipped"; 9], "{rows:#?}");
    assert_eq!(st[9], "keep", "the sweep goes on to the hypothesis that applies");
    for r in &rows[..9] {
        assert!(r["commit"].is_empty() && r["runs"] == "0", "nothing committed or run: {r:?}");
    }
    // git itself refuses a path through a tracked symlink; ratchet checks the ones git does not see.
    assert!(rows[0]["note"].contains("'ext' exists but is not a tree"), "{}", rows[0]["note"]);
    assert!(rows[5]["note"].contains("symbolic link scratch"), "{}", rows[5]["note"]);
    assert!(rows[1]["note"].contains("ignored file"), "{}", rows[1]["note"]);
    assert!(rows[2]["note"].contains("ignored file"), "{}", rows[2]["note"]);
    assert!(rows[6]["note"].contains("outside the repo"), "{}", rows[6]["note"]);
    assert!(rows[7]["note"].contains(".git"), "{}", rows[7]["note"]);
    assert!(rows[8]["note"].contains("not tracked"), "{}", rows[8]["note"]);

    // Outside the repo, nothing changed; inside, only the kept hypothesis's file.
    assert_eq!(snapshot(outside.path()), outside_before);
    let repo_after: Vec<_> = snapshot(t.path()).into_iter().filter(|(p, _)| !p.starts_with("experiments")).collect();
    let changed: Vec<&String> = repo_after
        .iter()
        .filter(|(p, b)| {
            !p.starts_with(".git/")
                && !p.starts_with(".ratchet/")
                && !p.starts_with("results/")
                && repo_before.iter().find(|(q, _)| q == p).map(|(_, a)| a) != Some(b)
        })
        .map(|(p, _)| p)
        .collect();
    assert_eq!(changed, ["fake.env"], "only the kept hypothesis changed a file");
    assert_eq!(std::fs::read(t.path().join("data.bin")).unwrap(), vec![7u8; 1 << 20]);
    assert!(!t.read(".git/config").contains("fsmonitor"));
    assert_eq!(t.git(&["log", "--format=%s", &format!("{base}..HEAD")]).trim(), "exp: faster");
    assert_eq!(t.read("notes.txt"), "my untracked notes\n");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
}

#[test]
fn paths_into_git_are_refused_however_they_are_written() {
    let t = TestRepo::new();
    // Each is a refused row naming the rule (the sweep goes on with the others), and .git is
    // never written.
    let refused = |t: &TestRepo, n: usize, what: &str| {
        t.git(&["add", "experiments"]);
        t.git(&["commit", "-qm", "queue"]);
        let config = t.read(".git/config");
        t.ratchet().arg("sweep").assert().success().stderr(predicate::str::contains(".git").and(predicate::str::contains("01.toml")));
        assert_eq!(t.read(".git/config"), config, "{what}");
        let rows = t.rows();
        assert_eq!(rows.len(), n, "{what}: {rows:?}");
        assert_eq!(rows[n - 1]["status"], "refused", "{what}");
        assert!(rows[n - 1]["note"].contains(".git"), "{what}: {rows:?}");
    };
    for (i, file) in ["./.git/config", "a/../.git/config", ".GIT/config", "vendor/.git/config", ".git./HEAD"].iter().enumerate() {
        t.write(
            "experiments/01.toml",
            &format!(
                "message = \"exp: {i}\"\n[[edit]]\nfile = {file:?}\nfind = \"[core]\"\nreplace = \"[core]\\n\\tfsmonitor = touch pwned\"\n"
            ),
        );
        refused(&t, i + 1, file);
    }
    // The same rule for a patch's paths.
    t.write(
        "experiments/p.patch",
        "diff --git a/./.git/HEAD b/./.git/HEAD\n--- a/./.git/HEAD\n+++ b/./.git/HEAD\n@@ -1 +1 @@\n-ref: refs/heads/main\n+garbage\n",
    );
    t.write("experiments/01.toml", "message = \"exp: head\"\npatch = \"p.patch\"\n");
    refused(&t, 6, "patch");
    assert_eq!(t.read(".git/HEAD"), "ref: refs/heads/main\n");
}

#[test]
fn a_nul_byte_in_a_message_is_refused_up_front() {
    let t = TestRepo::new();
    t.write("experiments/01.toml", "message = \"exp: a\\u0000b\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"10\"\nreplace = \"5\"\n");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let base = t.head();
    t.ratchet().arg("sweep").assert().success().stderr(predicate::str::contains("NUL"));
    assert_eq!(t.rows()[0]["status"], "refused");
    assert_eq!(t.head(), base, "nothing was committed");
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    // And the fixed file is a new hypothesis that runs.
    t.write("experiments/01.toml", "message = \"exp: ab\"\n[[edit]]\nfile = \"fake.env\"\nfind = \"10\"\nreplace = \"5\"\n");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    t.ratchet().arg("sweep").assert().success();
    assert_eq!(t.rows()[1]["status"], "keep");
}

#[test]
fn a_harness_hypothesis_is_a_refused_row_and_the_sweep_goes_on() {
    let t = TestRepo::new();
    t.write(
        "experiments/01-harness.toml",
        "message = \"exp: tweak the config\"\n[[edit]]\nfile = \"ratchet.toml\"\nfind = \"max_pairs = 8\"\nreplace = \"max_pairs = 6\"\n",
    );
    faster(&t, "02-faster.toml");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let config = t.read("ratchet.toml");
    t.ratchet().arg("sweep").assert().success().stdout(predicate::str::contains("REFUSED"));
    let rows = t.rows();
    assert_eq!(rows.iter().map(|r| r["status"].as_str()).collect::<Vec<_>>(), ["refused", "keep"]);
    assert!(rows[0]["note"].contains("ratchet.toml") && rows[0]["note"].contains("harness"), "{}", rows[0]["note"]);
    assert_eq!(t.read("ratchet.toml"), config);
    // A restart does not run (or refuse) it again.
    t.ratchet().arg("sweep").assert().success().stdout(predicate::str::contains("2 already done"));
    assert_eq!(t.rows().len(), 2);
}

/// A sweep SIGKILLed after applying its first hypothesis and before committing it.
fn sweep_killed_before_commit(t: &TestRepo) {
    faster(t, "01-faster.toml");
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let out = t.ratchet().arg("sweep").env("RATCHET_FAULT", "before-commit").output().unwrap();
    assert_eq!(out.status.signal(), Some(9));
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=5\n", "killed with the edit applied");
}

#[test]
fn status_reports_and_undoes_a_sweep_killed_before_its_commit() {
    let t = TestRepo::new();
    sweep_killed_before_commit(&t);
    t.ratchet().arg("status").assert().success().stdout(predicate::str::contains("01-faster.toml").and(predicate::str::contains("sweep")));
    t.ratchet().arg("recover").assert().success().stdout(predicate::str::contains("01-faster.toml").and(predicate::str::contains("sweep")));
    assert_eq!(t.git(&["status", "--porcelain"]), "");
    t.ratchet().arg("sweep").assert().success();
    assert_eq!(t.rows().last().unwrap()["status"], "keep");
}

#[test]
fn the_next_single_experiment_never_commits_a_stopped_sweeps_edit() {
    let t = TestRepo::new();
    let base = t.head();
    sweep_killed_before_commit(&t);
    t.write("kernel.py", "BQ = 64\nBKV = 256\n");
    t.ratchet().arg("experiment: my own change").assert().success().stderr(predicate::str::contains("undid"));
    let commit = t.rows().last().unwrap()["commit"].clone();
    assert_eq!(t.git(&["show", "--name-only", "--format=%s", &commit]).trim(), "experiment: my own change\n\nkernel.py");
    assert_eq!(t.git(&["rev-parse", "HEAD:fake.env"]), t.git(&["rev-parse", &format!("{base}:fake.env")]));

    // Where the user changed the sweep's file since, nothing is guessed: a clear refusal.
    let t = TestRepo::new();
    sweep_killed_before_commit(&t);
    t.write("fake.env", "FAKE_LATENCY_MS=4\n");
    let head = t.head();
    t.ratchet()
        .arg("experiment: mine")
        .assert()
        .code(4)
        .stderr(predicate::str::contains("fake.env").and(predicate::str::contains("changed since")));
    assert_eq!(t.read("fake.env"), "FAKE_LATENCY_MS=4\n");
    assert_eq!(t.head(), head);
}

/// A FIFO with no writer in a directory of its own (opening it for reading would block for ever).
fn fifo_outside() -> (tempfile::TempDir, std::path::PathBuf) {
    let outside = tempfile::tempdir().unwrap();
    let fifo = outside.path().join("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a NUL-terminated path in a directory this test owns.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    (outside, fifo)
}

#[test]
fn a_patch_that_is_a_fifo_or_an_endless_device_is_a_malformed_row_not_a_hang() {
    let (_outside, fifo) = fifo_outside();
    let t = TestRepo::new();
    std::fs::create_dir_all(t.path().join("experiments")).unwrap();
    std::os::unix::fs::symlink(&fifo, t.path().join("experiments/fifo.patch")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", t.path().join("experiments/zero.patch")).unwrap();
    t.write("experiments/01-fifo.toml", "message = \"exp: a patch that is a FIFO\"\npatch = \"fifo.patch\"\n");
    t.write("experiments/02-zero.toml", "message = \"exp: a patch that never ends\"\npatch = \"zero.patch\"\n");
    faster(&t, "03-faster.toml");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    let out = t.ratchet().arg("sweep").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let rows = t.rows();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (r, name) in rows.iter().zip(["fifo.patch", "zero.patch"]) {
        assert_eq!(r["status"], "refused", "{r:?}");
        assert!(r["note"].contains(name) && r["note"].contains("not a regular file"), "the row names the file and why: {r:?}");
    }
    assert_eq!(rows[2]["status"], "keep", "the sweep goes on: {rows:?}");
}

#[test]
fn a_hypothesis_file_that_is_a_fifo_is_refused_at_once() {
    let (_outside, fifo) = fifo_outside();
    let t = TestRepo::new();
    let out = t.ratchet().args(["sweep", fifo.to_str().unwrap()]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "a usage error: {}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a regular file"), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(t.rows().len(), 0);
}
