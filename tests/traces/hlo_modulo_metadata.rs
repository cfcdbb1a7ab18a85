//! HLO compared modulo metadata: a real dump (tests/fixtures/example-cpu, jax 0.10.2) keeps
//! every instruction and loses only its source tables and `metadata={...}` attributes, so two
//! compilations of one program compare equal whatever the compilation cache held; and the
//! experiment loop (in-process, on the mock executor) calls such a pair a no-op after one pair.

use crate::support;

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::events::Effects;
use ratchet::experiment::{self, Options, Outcome};
use ratchet::signals::Cancel;
use ratchet::store::Status;
use ratchet::trace::hlo::hlo_without_metadata;
use ratchet::trace::hlo_stats_from_text;
use ratchet::workspace::Workspace;

#[test]
fn a_real_dump_keeps_its_program_and_drops_its_source_locations() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu/flash_attention_bq128_bkv128.hlo.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let bare = hlo_without_metadata(&text);
    assert!(text.contains("StackFrames") && text.matches("metadata={").count() == 115);
    assert!(!bare.contains("metadata={") && !bare.contains("StackFrames") && !bare.contains("FileLocations"), "{bare}");
    // Same instructions, same counts.
    let (a, b) = (hlo_stats_from_text(&text), hlo_stats_from_text(&bare));
    assert_eq!(
        (a.total_instructions, a.dot, a.exponential, a.copy, a.loop_copies),
        (b.total_instructions, b.dot, b.exponential, b.copy, b.loop_copies)
    );
    // The same program with its source moved elsewhere (another checkout, another cache state).
    let moved = text.replace("/work/main/target/demo", "/home/someone/elsewhere").replace("stack_frame_id=12", "stack_frame_id=40");
    assert_ne!(moved, text);
    assert_eq!(hlo_without_metadata(&moved), bare);
    // Idempotent.
    assert_eq!(hlo_without_metadata(&bare), bare);
}

/// One experiment (hypothesis `kernel.py: BQ = 256`) on a throw-away repo whose incumbent runs
/// dump `inc_hlo` and whose candidate runs dump `cand_hlo`, as the command line runs it.
fn experiment_with_hlo(inc_hlo: &str, cand_hlo: &str) -> (Outcome, usize) {
    support::isolate_git();
    let repo = support::TestRepo::with_config(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 0\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 8\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    );
    repo.write("kernel.py", "BQ = 256\n");
    let mut exec = MockExecutor::sides(Step::Hlo(10.0, inc_hlo.into()), Step::Hlo(10.0, cand_hlo.into()));
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx).unwrap();
    let opts = Options { message: "exp: BQ 256".into(), ..Default::default() };
    let o = experiment::run(&ws, &opts, &mut exec, &mut fx).unwrap();
    (o, exec.log.len())
}

fn example_dump() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu/flash_attention_bq128_bkv128.hlo.txt");
    std::fs::read_to_string(path).unwrap()
}

#[test]
fn a_dump_differing_only_in_metadata_is_a_no_op_through_the_loop() {
    // A cold-cache compile of the same program: other source paths, other stack-frame ids.
    let warm = example_dump();
    let cold = warm.replace("/work/main/target/demo", "/home/someone/elsewhere").replace("stack_frame_id=12", "stack_frame_id=40");
    assert_ne!(warm, cold);
    let (o, runs) = experiment_with_hlo(&warm, &cold);
    assert_eq!(o.row.status, Status::NoOp, "{}", o.row.note);
    assert_eq!((o.row.runs, runs), (2, 2));
    assert!(o.row.note.contains("only in metadata"), "{}", o.row.note);
}

#[test]
fn a_dump_with_a_changed_instruction_is_measured_not_a_no_op() {
    let warm = example_dump();
    // The same metadata noise plus one real change: an exponential becomes a tanh.
    let changed = warm.replace("/work/main/target/demo", "/home/someone/elsewhere").replacen(" exponential(", " tanh(", 1);
    assert_ne!(hlo_without_metadata(&warm), hlo_without_metadata(&changed));
    let (o, runs) = experiment_with_hlo(&warm, &changed);
    assert_ne!(o.row.status, Status::NoOp, "{}", o.row.note);
    assert!(runs > 2, "measured past the first pair: {runs} runs");
}
