//! The work tree around an experiment, in-process on the mock executor: what a benchmark (or
//! another process) writes while the runs go on never ends up in a later commit nor in the
//! user's ignore files, and an edit made meanwhile is never lost or silently left behind.

use crate::support;

use ratchet::bench::mock::{Call, MockExecutor, Step};
use ratchet::bench::Side;
use ratchet::error::Result;
use ratchet::events::{Effects, Event};
use ratchet::experiment::{self, Options, Outcome};
use ratchet::signals::Cancel;
use ratchet::store::Status;
use ratchet::sweep::{self, SweepOptions};
use ratchet::workspace::Workspace;
use std::path::{Path, PathBuf};

fn config() -> String {
    "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
     [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n"
        .to_string()
}

struct Repo {
    dir: tempfile::TempDir,
}

impl Repo {
    fn new() -> Repo {
        support::isolate_git();
        let r = Repo { dir: tempfile::tempdir().unwrap() };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "Test"]);
        r.git(&["config", "user.email", "test@example.com"]);
        r.write("ratchet.toml", &config());
        r.write("kernel.py", "BQ = 128\n");
        r.write("bench.mock", "latency 10\n");
        r.write("data.txt", "original data\n");
        r.git(&["add", "-A"]);
        r.git(&["commit", "-qm", "baseline"]);
        r
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn at(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }

    fn write(&self, rel: &str, text: &str) {
        let p = self.at(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.at(rel)).unwrap()
    }

    fn git(&self, args: &[&str]) -> String {
        support::git_in(self.path(), args)
    }

    /// One experiment of whatever the work tree holds, as the command line runs it (lock,
    /// recoveries, run).
    fn experiment(&self, message: &str, exec: &mut MockExecutor) -> (Result<Outcome>, Vec<Event>) {
        let mut events = vec![];
        let ws = Workspace::discover(self.path()).unwrap().lock("test", &mut events).unwrap();
        let mut fx = Effects::new(&mut events, Cancel::new());
        sweep::recover(&ws, &mut fx).unwrap();
        let opts = Options { message: message.into(), ..Default::default() };
        let r = experiment::run(&ws, &opts, exec, &mut fx);
        (r, events)
    }

    /// Files the commit changed, one per line.
    fn files_of(&self, rev: &str) -> String {
        self.git(&["show", "--name-only", "--format=", rev])
    }
}

fn notes(events: &[Event]) -> String {
    events.iter().filter_map(|e| if let Event::Note { text } = e { Some(text.as_str()) } else { None }).collect::<Vec<_>>().join("\n")
}

/// A kept experiment (candidate 8 ms against 10) whose candidate runs call `side_effect` in the
/// checkout they run in.
fn keep_with(side_effect: impl Fn(&Call) + 'static) -> MockExecutor {
    MockExecutor::new(move |c| {
        if c.side == Side::Candidate {
            side_effect(c);
            Step::Latency(8.0)
        } else {
            Step::Latency(10.0)
        }
    })
}

#[test]
fn files_written_during_a_run_stay_out_of_hypotheses_without_touching_the_users_ignore_files() {
    let repo = Repo::new();
    let exclude_before = std::fs::read_to_string(repo.at(".git/info/exclude")).unwrap_or_default();
    // The benchmark writes files beside the kernel and a directory of many; meanwhile an
    // editor saves a new source file.
    let mut exec = keep_with(|c| {
        std::fs::write(c.dir.join("out.json"), "{}").unwrap();
        std::fs::create_dir_all(c.dir.join("dump")).unwrap();
        for i in 0..50 {
            std::fs::write(c.dir.join(format!("dump/{i}.txt")), "x").unwrap();
        }
        std::fs::write(c.dir.join("helper.py"), "def h(): pass\n").unwrap();
    });
    repo.write("kernel.py", "BQ = 256\n");
    let (r, events) = repo.experiment("exp: BQ 256", &mut exec);
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert!(notes(&events).contains("the benchmark wrote into the repo: dump/, helper.py, out.json"), "{}", notes(&events));

    // Nothing was added to the user's ignore files; their git sees the new files.
    assert_eq!(std::fs::read_to_string(repo.at(".git/info/exclude")).unwrap_or_default(), exclude_before);
    let status = repo.git(&["status", "--porcelain"]);
    assert_eq!(status, "?? dump/\n?? helper.py\n?? out.json", "ratchet's own directories ignore themselves");
    assert_eq!(
        repo.read(".ratchet/outputs").lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(),
        ["dump/", "helper.py", "out.json"]
    );

    // The next hypothesis leaves them out and says so; `git add` brings one in.
    repo.write("kernel.py", "BQ = 512\n");
    let (r, events) = repo.experiment("exp: BQ 512", &mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.files_of("HEAD"), "kernel.py");
    assert!(notes(&events).contains("left out of the hypothesis: dump/, helper.py, out.json"), "{}", notes(&events));
    repo.git(&["add", "helper.py"]);
    repo.write("kernel.py", "BQ = 1024\n");
    let (r, _) = repo.experiment("exp: BQ 1024 with helper", &mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.files_of("HEAD"), "helper.py\nkernel.py");
    // A deleted output is forgotten: written again by hand later, it is the user's file.
    std::fs::remove_file(repo.at("out.json")).unwrap();
    repo.write("kernel.py", "BQ = 2048\n");
    let (r, _) = repo.experiment("exp: BQ 2048", &mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.read(".ratchet/outputs").lines().filter(|l| !l.starts_with('#')).collect::<Vec<_>>(), ["dump/"]);
}

#[test]
fn lines_older_versions_wrote_to_info_exclude_are_moved_to_ratchets_own_list() {
    let repo = Repo::new();
    repo.write(
        ".git/info/exclude",
        "# my own\n*.swp\n# ratchet's state and results: never part of a hypothesis\n/.ratchet/\n/results/\n\
         # written into the repo by the benchmark (ratchet keeps them out of hypotheses)\n/old_out.bin\n/trace/\n",
    );
    repo.write("old_out.bin", "bench output\n");
    repo.write("trace/t.json", "{}\n");
    repo.write("kernel.py", "BQ = 256\n");
    let (r, _) = repo.experiment("exp: BQ 256", &mut MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0)));
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.read(".git/info/exclude"), "# my own\n*.swp\n");
    assert_eq!(repo.files_of("HEAD"), "kernel.py", "the old outputs stay out of hypotheses");
    assert_eq!(repo.git(&["status", "--porcelain"]), "?? old_out.bin\n?? trace/");
}

#[test]
fn a_tracked_file_the_benchmark_rewrites_during_a_kept_experiment_never_enters_the_next_commit() {
    let repo = Repo::new();
    let hyp = |name: &str, from: &str, to: &str| {
        repo.write(
            &format!("experiments/{name}"),
            &format!("message = \"exp: {name}\"\n[[edit]]\nfile = \"kernel.py\"\nfind = {from:?}\nreplace = {to:?}\n"),
        );
    };
    hyp("01-bq256.toml", "BQ = 128", "BQ = 256");
    hyp("02-bq512.toml", "BQ = 256", "BQ = 512");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-qm", "queue"]);
    // Every candidate run rewrites a tracked file (a tuning cache, say).
    let mut exec = keep_with(|c| std::fs::write(c.dir.join("data.txt"), format!("tuned by run {}\n", c.n)).unwrap());
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let out = sweep::run(&ws, &SweepOptions::default(), &mut exec, &mut Effects::new(&mut events, Cancel::new())).unwrap();
    assert_eq!(out.rows.iter().map(|r| r.status).collect::<Vec<_>>(), [Status::Keep, Status::Keep]);
    assert_eq!(repo.files_of("HEAD"), "kernel.py", "the second hypothesis's commit is its own edit only");
    assert_eq!(repo.files_of("HEAD~1"), "kernel.py");
    assert_eq!(repo.read("data.txt"), "original data\n", "the tracked file is back to the kept commit's");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    // What the benchmark wrote is saved, not lost.
    let ids: Vec<u64> = out.rows.iter().map(|r| r.id).collect();
    for id in ids {
        let saved = repo.git(&["show", &format!("refs/ratchet/meanwhile/{id}:data.txt")]);
        assert!(saved.starts_with("tuned by run"), "{saved}");
    }
    assert!(notes(&events).contains("data.txt changed while experiment"), "{}", notes(&events));
}

/// A shared, writable mapping of a file, made before the experiment (as a long-running tool
/// holding it open would), written through while the runs go on.
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// The mapping is only written from the mock's script, on the test's own thread.
unsafe impl Send for Mapping {}

impl Mapping {
    fn new(path: &Path) -> Mapping {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
        let len = f.metadata().unwrap().len() as usize;
        // SAFETY: a fresh shared mapping of an open file of `len` bytes; unmapped on drop.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, f.as_raw_fd(), 0) };
        assert_ne!(ptr, libc::MAP_FAILED);
        Mapping { ptr: ptr as *mut u8, len }
    }

    /// Overwrite the file's bytes from the start with `text` (same length or shorter).
    fn write(&self, text: &str) {
        assert!(text.len() <= self.len);
        // SAFETY: within the mapping's bounds.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.ptr, text.len());
            libc::msync(self.ptr as *mut libc::c_void, self.len, libc::MS_SYNC);
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

/// A reverted experiment (candidate 12 ms against 10) whose candidate runs call `side_effect`.
fn revert_with(side_effect: impl Fn(&Call) + 'static) -> MockExecutor {
    MockExecutor::new(move |c| {
        if c.side == Side::Candidate {
            side_effect(c);
            Step::Latency(12.0)
        } else {
            Step::Latency(10.0)
        }
    })
}

#[test]
fn a_write_through_a_mapping_to_the_hypothesiss_file_is_saved_not_checked_out_over() {
    let repo = Repo::new();
    repo.write("kernel.py", "BQ = 256\n");
    let map = std::rc::Rc::new(Mapping::new(&repo.at("kernel.py")));
    let m = map.clone();
    let mut exec = revert_with(move |_| m.write("BQ = 999\n"));
    let (r, events) = repo.experiment("exp: BQ 256", &mut exec);
    let o = r.unwrap();
    assert_eq!(o.row.status, Status::Revert);
    assert_eq!(repo.read("kernel.py"), "BQ = 128\n", "reverted");
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1:kernel.py"]), "BQ = 999", "the edit is saved");
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1~1:kernel.py"]), "BQ = 256", "on top of the hypothesis");
    assert!(notes(&events).contains("files changed while experiment 1 ran"), "{}", notes(&events));
}

#[test]
fn a_write_through_a_mapping_to_another_tracked_file_is_never_left_in_the_tree() {
    let repo = Repo::new();
    let map = std::rc::Rc::new(Mapping::new(&repo.at("data.txt")));
    // Reverted: the edit is saved on top of the parked hypothesis, the tree is the incumbent's.
    let m = map.clone();
    repo.write("kernel.py", "BQ = 256\n");
    let (r, _) = repo.experiment("exp: BQ 256", &mut revert_with(move |_| m.write("mapped edit 1\n")));
    assert_eq!(r.unwrap().row.status, Status::Revert);
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1:data.txt"]), "mapped edit 1");
    assert_eq!(repo.read("data.txt"), "original data\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
    drop(map);
    // Kept: set aside, so the next commit cannot take it.
    let map = std::rc::Rc::new(Mapping::new(&repo.at("data.txt")));
    let m = map.clone();
    repo.write("kernel.py", "BQ = 512\n");
    let (r, _) = repo.experiment("exp: BQ 512", &mut keep_with(move |_| m.write("mapped edit 2\n")));
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.files_of("HEAD"), "kernel.py");
    assert_eq!(repo.git(&["show", "refs/ratchet/meanwhile/2:data.txt"]), "mapped edit 2");
    assert_eq!(repo.read("data.txt"), "original data\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_write_through_a_hard_link_from_outside_is_never_left_in_the_tree() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    let link = outside.path().join("data-link.txt");
    std::fs::hard_link(repo.at("data.txt"), &link).unwrap();
    repo.write("kernel.py", "BQ = 256\n");
    let (r, _) = repo.experiment(
        "exp: BQ 256",
        &mut keep_with(move |_| {
            use std::io::Write;
            // In place, through the other name: the inode the work tree's data.txt also is.
            let mut f = std::fs::OpenOptions::new().write(true).open(&link).unwrap();
            f.write_all(b"linked edit!!\n").unwrap();
        }),
    );
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.git(&["show", "refs/ratchet/meanwhile/1:data.txt"]), "linked edit!!");
    assert_eq!(repo.read("data.txt"), "original data\n");
    assert_eq!(repo.git(&["status", "--porcelain"]), "");
}

#[test]
fn a_mapping_made_after_the_runs_started_is_seen_whether_it_lives_on_or_is_gone() {
    // Made during a candidate run, written through, then unmapped at once: only the file's
    // stat data are left to tell.
    let repo = Repo::new();
    let root = repo.at("data.txt");
    repo.write("kernel.py", "BQ = 256\n");
    let done = std::cell::Cell::new(false);
    let (r, _) = repo.experiment(
        "exp: BQ 256",
        &mut revert_with(move |_| {
            if !done.replace(true) {
                Mapping::new(&root).write("mapped gone 1\n");
            }
        }),
    );
    assert_eq!(r.unwrap().row.status, Status::Revert);
    assert_eq!(repo.git(&["show", "refs/ratchet/discarded/1:data.txt"]), "mapped gone 1");
    assert_eq!(repo.read("data.txt"), "original data\n");
    // Made during a run and still mapped when the runs end (the writer lives on).
    let held: std::rc::Rc<std::cell::RefCell<Option<Mapping>>> = Default::default();
    let (h, path) = (held.clone(), repo.at("data.txt"));
    repo.write("kernel.py", "BQ = 512\n");
    let (r, _) = repo.experiment(
        "exp: BQ 512",
        &mut keep_with(move |_| {
            let mut h = h.borrow_mut();
            if h.is_none() {
                let m = Mapping::new(&path);
                m.write("mapped live 2\n");
                *h = Some(m);
            }
        }),
    );
    assert_eq!(r.unwrap().row.status, Status::Keep);
    assert_eq!(repo.files_of("HEAD"), "kernel.py", "the mapped edit never enters the kept commit");
    assert_eq!(repo.git(&["show", "refs/ratchet/meanwhile/2:data.txt"]), "mapped live 2");
    drop(held);
}
