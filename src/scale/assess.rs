//! A finished trial assessed as the serial loop would: its row and decision rebuilt from the
//! worker's run directory by the experiments' own code, and the device it measured on, which
//! keys the noise history.

use super::engine::TrialSpec;
use super::trial::{TrialEnd, TrialResult};
use crate::config::Config;
use crate::error::{Error, Result};
use crate::experiment::{self, Ended, RowContext};
use crate::session::Stop;
use crate::stats::sequential::Next;
use crate::stats::Decision;
use crate::store::ResultRow;
use crate::sweep::hypothesis::Hypothesis;
use crate::sweep::SweepOptions;

/// A trial's outcome as the experiments' code decides it.
pub(super) struct Assessed {
    pub(super) row: ResultRow,
    pub(super) decision: Option<Decision>,
    pub(super) result: TrialResult,
    /// The rule that decided, for `decisions.jsonl` (its id is the row's, set when recorded).
    pub(super) rule: Option<crate::replay::DecisionRecord>,
}

/// The device a trial measured on, as the noise history names it: its host and local slot
/// where the slot binds a device (`[devices]`), the host alone for a slot that binds none (it
/// measures on the host, as the serial loop does), or the host and its device-binding variables
/// (a cluster node's GPU).
pub(super) fn device_of(r: &TrialResult) -> String {
    let bound: Vec<String> = r
        .device_env
        .iter()
        .filter(|(k, _)| k.ends_with("VISIBLE_DEVICES") || k.ends_with("VISIBLE_CHIPS"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    match r.slot {
        Some(i) => super::engine::slot_device(&r.host, i, !bound.is_empty()),
        None => format!("{} {}", r.host, bound.join(" ")).trim_end().to_string(),
    }
}

/// The noise history's key for a benchmark on one device: a number measured on one GPU says
/// nothing of another's noise.
pub(super) fn device_history_key(cfg: &Config, device: &str) -> String {
    format!("{} on {device}", experiment::history_key(cfg))
}

pub(super) fn end_text(e: &TrialEnd) -> String {
    match e {
        TrialEnd::Decided => "decided".into(),
        TrialEnd::NoOp { .. } => "no-op".into(),
        TrialEnd::Candidate { status, .. } => status.as_str().into(),
        TrialEnd::Incumbent { .. } => "incumbent failed".into(),
        TrialEnd::Infrastructure { .. } => "infrastructure".into(),
        TrialEnd::Interrupted => "interrupted".into(),
    }
}

/// The row and decision of a finished trial, from its run directory, by the experiments' code:
/// the stopping rule is rebuilt from this controller's config (it must be the one the worker
/// used) and asked to decide on the trial's pairs.
pub(super) fn assess(cfg: &Config, opts: &SweepOptions, h: &Hypothesis, spec: &TrialSpec, result: TrialResult) -> Result<Assessed> {
    let pairs = h.pairs.or(opts.pairs);
    let seq = super::worker::stopping_rule(cfg, pairs, result.noise_scale, result.sums_scale);
    if serde_json::to_value(&seq.params).expect("params serialize") != result.params {
        return Err(Error::failure(format!(
            "trial {} was measured with another stopping rule than this ratchet.toml gives ({})",
            spec.id,
            spec.out_dir.display()
        ))
        .hint("ratchet.toml changed while the sweep ran; restore it, or delete the trial's directory to run it again"));
    }
    let records = TrialResult::records(&spec.out_dir)?;
    // The log-sums enter as the worker's guard read them: one per pair of each phase (a worker
    // of an older build wrote none; its guard read the log-ratios alone).
    let with_sums = result.main_sums.len() == result.main.len() && result.confirm_sums.len() == result.confirm.len();
    let sums = if with_sums { (&result.main_sums[..], &result.confirm_sums[..]) } else { (&[][..], &[][..]) };
    let ended = match &result.end {
        TrialEnd::Decided => match seq.next_runs(&result.main, &result.confirm, sums.0, sums.1) {
            Next::Done(d) => Ended::Decided(d),
            Next::Measure { .. } => {
                return Err(Error::failure(format!(
                    "trial {} stopped before its stopping rule decided ({})",
                    spec.id,
                    spec.out_dir.display()
                )))
            }
        },
        TrialEnd::NoOp { why } => Ended::NoOp(why.clone()),
        TrialEnd::Candidate { status, why } => Ended::Stopped(Stop::Candidate(*status, why.clone())),
        TrialEnd::Incumbent { why } => Ended::Stopped(Stop::Incumbent(why.clone())),
        TrialEnd::Infrastructure { why } => Ended::Stopped(Stop::Infrastructure(why.clone())),
        TrialEnd::Interrupted => Ended::Stopped(Stop::Interrupted),
    };
    let eopts = experiment::Options {
        message: h.message.clone(),
        deep: h.deep.unwrap_or(opts.deep),
        allow_empty: false,
        pairs,
        hypothesis: Some(h.key()),
        tags: h.tags.clone(),
        allow_large: false,
    };
    let ctx = RowContext {
        id: 0,
        candidate: spec.candidate.clone(),
        incumbent: spec.incumbent.clone(),
        opts: &eopts,
        cfg,
        elasticity: crate::stats::elasticity(cfg.score.metric),
        wall_s: result.wall_s,
    };
    let (row, decision) = experiment::summarize(&ctx, &records, ended);
    let rule = decision.as_ref().map(|_| crate::replay::DecisionRecord {
        trial: spec.out_dir.file_name().map(|n| n.to_string_lossy().into_owned()),
        ..crate::replay::DecisionRecord::new(0, &row.commit, &seq, cfg.score.direction(), ctx.elasticity, with_sums)
    });
    Ok(Assessed { row, decision, result, rule })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Status;

    fn result(slot: Option<usize>, env: &[(&str, &str)]) -> TrialResult {
        TrialResult {
            host: "node7".into(),
            device_env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            slot,
            params: serde_json::json!({"not": "the controller's rule"}),
            ..TrialResult::for_tests()
        }
    }

    #[test]
    fn the_device_is_the_slot_that_binds_one_else_the_host_and_its_binding() {
        // A local slot with a device of its own: its own history.
        assert_eq!(device_of(&result(Some(3), &[("CUDA_VISIBLE_DEVICES", "3")])), "node7 slot 3");
        // A slot that binds nothing measures on the host, as the serial loop does.
        assert_eq!(device_of(&result(Some(3), &[("CUDA_HOME", "/usr/local/cuda")])), "node7");
        // A cluster node: its host and the device its scheduler gave the job.
        assert_eq!(device_of(&result(None, &[("CUDA_VISIBLE_DEVICES", "2"), ("CUDA_HOME", "/x")])), "node7 CUDA_VISIBLE_DEVICES=2");
        assert_eq!(device_of(&result(None, &[("TPU_VISIBLE_CHIPS", "1")])), "node7 TPU_VISIBLE_CHIPS=1");
        assert_eq!(device_of(&result(None, &[])), "node7");
    }

    #[test]
    fn the_history_key_names_the_benchmark_and_the_device() {
        let cfg = Config::parse("[benchmark]\ncommand = \"sh b.sh\"\n[score]\nmetric = \"latency\"\n").unwrap();
        let a = device_history_key(&cfg, "node7 slot 1");
        assert!(a.starts_with(&experiment::history_key(&cfg)) && a.ends_with(" on node7 slot 1"), "{a}");
        assert_ne!(a, device_history_key(&cfg, "node7 slot 2"));
    }

    #[test]
    fn every_end_has_its_word() {
        let words: Vec<String> = [
            TrialEnd::Decided,
            TrialEnd::NoOp { why: "same".into() },
            TrialEnd::Candidate { status: Status::Crash, why: "x".into() },
            TrialEnd::Incumbent { why: "x".into() },
            TrialEnd::Infrastructure { why: "x".into() },
            TrialEnd::Interrupted,
        ]
        .iter()
        .map(end_text)
        .collect();
        assert_eq!(words, ["decided", "no-op", "crash", "incumbent failed", "infrastructure", "interrupted"]);
    }

    #[test]
    fn a_trial_measured_with_another_stopping_rule_is_refused() {
        let cfg = Config::parse("[benchmark]\ncommand = \"sh b.sh\"\n[score]\nmetric = \"latency\"\n").unwrap();
        let h = Hypothesis {
            path: "experiments/h.toml".into(),
            name: "h.toml".into(),
            hash: "x".into(),
            message: "h".into(),
            tags: vec![],
            change: crate::sweep::hypothesis::Change::Edits(vec![]),
            deep: None,
            pairs: None,
        };
        let d = tempfile::tempdir().unwrap();
        let spec = TrialSpec {
            id: "t1".into(),
            repo: "/r".into(),
            incumbent: "a".repeat(40),
            candidate: "b".repeat(40),
            out_dir: d.path().into(),
        };
        let e = assess(&cfg, &SweepOptions::default(), &h, &spec, result(None, &[])).err().expect("refused");
        assert!(e.message.contains("another stopping rule"), "{}", e.message);
    }
}
