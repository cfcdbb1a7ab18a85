//! The seed's A/B table (`ratchet show ID`, `ratchet show ID --vs OTHER`): step time, MXU util,
//! top hotspot and peak HBM of two sets of runs, each the median over its runs, with deltas;
//! every cell recomputed here from runs.jsonl and the runs' own captures.

use crate::support::{self, median};

use ratchet::bench::mock::{MockExecutor, Step};
use ratchet::bench::RunRecord;
use ratchet::diagnose::compare::{ab_table, render, AbSide};
use ratchet::events::Effects;
use ratchet::experiment::{self, Options};
use ratchet::signals::Cancel;
use ratchet::trace::{analyze, AnalyzeOptions};
use ratchet::workspace::Workspace;

fn capture(dir: &str) -> std::path::PathBuf {
    support::own_fixture(&format!("captures/{dir}/steps.xplane.pb"))
}

/// One experiment whose incumbent runs carry the jax 0.4.38 capture and whose candidate runs
/// carry the 0.7.2 one (kernel `jit_small` in both); its run records.
fn experiment_with_captures() -> (support::TestRepo, Vec<RunRecord>) {
    support::isolate_git();
    let repo = support::TestRepo::with_config(
        "[benchmark]\ncommand = \"true\"\ntimeout_s = 20\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\nprofile_iters = 2\n\
         [hardware]\npreset = \"tpu-v5e\"\n[decision]\nmin_pairs = 4\nmax_pairs = 4\nconfirm_pairs = 4\n[score]\nmetric = \"latency\"\n",
    );
    repo.write("kernel.py", "BQ = 256\n");
    let side = |ms: f64, dir: &str| Step::Trace { ms, capture: capture(dir), kernel: "small".into() };
    let mut exec = MockExecutor::sides(side(10.0, "jax-0.4.38-cpu"), side(8.0, "jax-0.7.2-cpu"));
    let mut events = vec![];
    let ws = Workspace::discover(repo.path()).unwrap().lock("test", &mut events).unwrap();
    let mut fx = Effects::new(&mut events, Cancel::new());
    ratchet::sweep::recover(&ws, &mut fx).unwrap();
    experiment::run(&ws, &Options { message: "exp: BQ 256".into(), ..Default::default() }, &mut exec, &mut fx).unwrap();
    let runs = Workspace::discover(repo.path()).unwrap().store.runs().unwrap();
    (repo, runs)
}

#[test]
fn the_ab_table_is_the_median_of_each_sides_runs() {
    let (repo, runs) = experiment_with_captures();
    let raw = repo.runs();
    let hw = ratchet::hardware::preset("tpu-v5e").unwrap().hw;
    let t = ratchet::diagnose::show::ab_table(&runs, Some(hw), None);

    // From runs.jsonl: the median latency of each side's ok runs, the util it gives.
    let lat = |side: &str| {
        median(raw.iter().filter(|r| r["side"] == side && r["status"] == "ok").map(|r| r["latency_ms"].as_f64().unwrap()).collect())
    };
    let (a, b) = (lat("incumbent"), lat("candidate"));
    assert_eq!(t.step_time_ms, [Some(a), Some(b)]);
    assert!((t.step_time_delta_pct.unwrap() - (b / a - 1.0) * 100.0).abs() < 1e-9);
    let util = |ms: f64| 1e9 / (ms * 1e-3) / (hw.peak_tflops * 1e12) * 100.0;
    assert!((t.util_pct[0].unwrap() - util(a)).abs() < 1e-9 && (t.util_pct[1].unwrap() - util(b)).abs() < 1e-9);
    assert!((t.util_delta_pts.unwrap() - (util(b) - util(a))).abs() < 1e-9);

    // From the captures themselves: each side's runs all carry one, so its median is its own.
    let ops = |dir: &str| {
        let r = analyze(&capture(dir), &AnalyzeOptions { kernel: Some("small".into()), ..Default::default() }).unwrap();
        r.kernel.unwrap().op_breakdown
    };
    let (inc_ops, cand_ops) = (ops("jax-0.4.38-cpu"), ops("jax-0.7.2-cpu"));
    let top = |o: &[ratchet::trace::OpStat]| o.iter().max_by(|x, y| x.fraction.total_cmp(&y.fraction)).unwrap().clone();
    let (hi, hc) = (t.hotspot[0].clone().unwrap(), t.hotspot[1].clone().unwrap());
    assert_eq!((hi.op.as_str(), hi.share), (top(&inc_ops).name.as_str(), top(&inc_ops).fraction));
    assert_eq!((hc.op.as_str(), hc.share), (top(&cand_ops).name.as_str(), top(&cand_ops).fraction));
    let after = cand_ops.iter().find(|o| o.name == hi.op).map(|o| o.per_execution_us).unwrap_or(0.0);
    assert!((t.hotspot_delta_pct.unwrap() - (after / hi.per_execution_us - 1.0) * 100.0).abs() < 1e-9);
    assert_eq!(hi.runs, t.baseline_runs);
    // The mock's benchmark runs on no device that reports memory.
    assert_eq!((t.peak_memory_bytes, t.peak_memory_delta_bytes), ([None, None], None));

    let text = render(&t);
    assert!(text.contains(&format!("A/B: candidate vs incumbent (medians over {} and {} ok runs)", t.experiment_runs, t.baseline_runs)));
    let hot = text.lines().find(|l| l.trim_start().starts_with("top hotspot")).unwrap();
    assert!(hot.contains(&format!("{} ({:.1}%)", hi.op, hi.share * 100.0)) && hot.contains("its time"), "{hot}");
    assert!(text.contains("peak HBM is the device's memory_stats(), which a CPU backend does not give"), "{text}");
}

fn record(side: &str, latency_ms: f64, peak: f64) -> RunRecord {
    serde_json::from_value(serde_json::json!({
        "experiment": "1", "run": 0, "side": side, "commit": "abc", "time": "2026-12-02T00:00:00Z", "status": "ok",
        "out_dir": "/nonexistent", "wall_s": 1.0, "latency_ms": latency_ms, "latency_source": "host", "value": latency_ms,
        "flops": null, "bytes": null, "min_bytes": null, "peak_memory_bytes": peak,
    }))
    .unwrap()
}

#[test]
fn peak_memory_is_the_median_of_what_the_runs_recorded() {
    const GIB: f64 = 1073741824.0;
    let runs = [
        record("incumbent", 2.0, 1.0 * GIB),
        record("incumbent", 2.2, 1.2 * GIB),
        record("incumbent", 2.4, 3.0 * GIB),
        record("candidate", 1.0, 1.5 * GIB),
        record("candidate", 1.2, 1.7 * GIB),
    ];
    let t = ab_table(
        &AbSide::of("incumbent", &runs, ratchet::bench::Side::Incumbent),
        &AbSide::of("candidate", &runs, ratchet::bench::Side::Candidate),
        None,
        None,
    );
    assert_eq!(t.peak_memory_bytes, [Some(1.2 * GIB), Some(1.6 * GIB)]);
    assert_eq!(t.step_time_ms, [Some(2.2), Some(1.1)]);
    let text = render(&t);
    let peak = text.lines().find(|l| l.trim_start().starts_with("peak HBM")).unwrap();
    assert!(peak.contains("1.20 GiB") && peak.contains("1.60 GiB") && peak.contains("+0.40 GiB"), "{peak}");
    // Without peaks or traces the table says what it lacks instead of a figure.
    assert!(text.contains("MXU util needs the chip's peaks") && text.contains("the hotspot needs the runs' traces"), "{text}");
}
