//! The question before committing large or binary untracked files is put by the core
//! through its event sink (`Events::ask`), never read from the terminal by the core; the command
//! line's text face answers from a TTY. In-process: a sink that answers yes, no, or cannot answer.

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::events::{Effects, Event, Events, Question};
use ratchet::experiment::{self, Options, Outcome};
use ratchet::signals::Cancel;
use ratchet::store::Status;
use ratchet::workspace::Workspace;
use std::path::Path;
use support::git_in;

/// A repo whose hypothesis edits kernel.py and adds a 2 MB binary file.
fn repo() -> tempfile::TempDir {
    support::isolate_git();
    let d = tempfile::tempdir().unwrap();
    let p = d.path();
    std::fs::write(
        p.join("ratchet.toml"),
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    )
    .unwrap();
    std::fs::write(p.join("kernel.py"), "BQ = 128\n").unwrap();
    git_in(p, &["init", "-q", "-b", "main"]);
    git_in(p, &["config", "user.name", "Test"]);
    git_in(p, &["config", "user.email", "t@example.com"]);
    git_in(p, &["add", "-A"]);
    git_in(p, &["commit", "-qm", "baseline"]);
    std::fs::write(p.join("kernel.py"), "BQ = 256\n").unwrap();
    let mut blob = vec![0u8; 2 << 20];
    blob[7] = 1;
    std::fs::write(p.join("weights.bin"), blob).unwrap();
    d
}

/// A sink that answers every question with `answer` and keeps what it was asked.
struct Answering {
    answer: Option<bool>,
    asked: Vec<Question>,
    events: Vec<Event>,
}

impl Events for Answering {
    fn emit(&mut self, event: Event) {
        self.events.push(event);
    }
    fn ask(&mut self, question: &Question) -> Option<bool> {
        self.asked.push(question.clone());
        self.answer
    }
}

fn run(dir: &Path, sink: &mut dyn Events, allow_large: bool) -> ratchet::error::Result<Outcome> {
    let ws = Workspace::discover(dir).unwrap().lock("test", sink).unwrap();
    let mut fx = Effects::new(sink, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx)?;
    let opts = Options { message: "exp: BQ 256 with weights".into(), allow_large, ..Default::default() };
    let mut exec = MockExecutor::sides(Step::Latency(10.0), Step::Latency(8.0));
    experiment::run(&ws, &opts, &mut exec, &mut fx)
}

#[test]
fn the_core_asks_and_a_yes_commits_the_files() {
    let d = repo();
    let mut sink = Answering { answer: Some(true), asked: vec![], events: vec![] };
    let o = run(d.path(), &mut sink, false).unwrap();
    assert_eq!(sink.asked, [Question::CommitLargeFiles { files: vec!["weights.bin (2.1 MB, binary)".into()] }]);
    assert!(sink.asked[0].text().contains("weights.bin (2.1 MB, binary)") && sink.asked[0].text().ends_with("[y/N] "));
    assert_eq!(o.row.status, Status::Keep);
    // The hypothesis commit holds the file.
    let files = git_in(d.path(), &["show", "--name-only", "--format=", &o.row.commit]);
    assert!(files.lines().any(|l| l == "weights.bin"), "{files}");
}

#[test]
fn a_no_refuses_and_commits_nothing() {
    let d = repo();
    let base = git_in(d.path(), &["rev-parse", "HEAD"]);
    let mut sink = Answering { answer: Some(false), asked: vec![], events: vec![] };
    let e = run(d.path(), &mut sink, false).unwrap_err();
    assert_eq!(sink.asked.len(), 1);
    assert!(e.to_string().contains("untracked large or binary files would enter the hypothesis: weights.bin"), "{e}");
    assert!(e.hint.as_deref().unwrap_or("").contains("--allow-large"));
    assert_eq!(git_in(d.path(), &["rev-parse", "HEAD"]), base, "nothing committed");
    assert!(d.path().join("weights.bin").exists(), "the file is left where it was");
    assert_eq!(std::fs::read_to_string(d.path().join("kernel.py")).unwrap(), "BQ = 256\n", "the edit is left in the work tree");
}

#[test]
fn nobody_to_ask_keeps_the_non_interactive_refusal_and_allow_large_skips_the_question() {
    // A sink that cannot answer (a test's Vec, --json's JSON lines, the text face without a
    // terminal): refused, as before.
    let d = repo();
    let mut events: Vec<Event> = vec![];
    assert!(run(d.path(), &mut events, false).is_err());
    let mut text = ratchet::cli::ui::Text::with_writers(Vec::new(), Vec::new());
    assert_eq!(text.ask(&Question::CommitLargeFiles { files: vec!["x".into()] }), None);
    let mut json = ratchet::events::JsonLines(Vec::new());
    assert_eq!(json.ask(&Question::CommitLargeFiles { files: vec!["x".into()] }), None);
    // --allow-large: nothing to ask.
    let mut sink = Answering { answer: Some(false), asked: vec![], events: vec![] };
    let o = run(d.path(), &mut sink, true).unwrap();
    assert!(sink.asked.is_empty());
    assert_eq!(o.row.status, Status::Keep);
}
