//! `ratchet replay [ID...]`: recompute recorded decisions from `runs.jsonl` and
//! `decisions.jsonl` alone and say, row by row, whether the test decides what the row says.

use crate::cli::args::ReplayArgs;
use crate::error::{Error, Result};
use crate::replay::{self, Replayed};
use crate::workspace::Workspace;
use std::collections::HashMap;

pub fn run(ws: &Workspace, args: &ReplayArgs) -> Result<()> {
    let rows = ws.store.rows()?;
    for id in &args.ids {
        if !rows.iter().any(|r| r.id == *id) {
            return Err(Error::usage(format!("there is no experiment {id}")).hint("`ratchet results` lists them"));
        }
    }
    let chosen: Vec<_> = rows.iter().filter(|r| args.ids.is_empty() || args.ids.contains(&r.id)).collect();
    let runs = ws.store.runs()?;
    let records = replay::records(&ws.store)?;
    let text = report(&chosen, &runs, &records);
    print!("{}", crate::printable::block(&text.body));
    if text.differ > 0 {
        return Err(Error::failure(format!("{} of {} replayed decisions differ from their rows", text.differ, text.replayed)).hint(
            "results.csv, runs.jsonl or decisions.jsonl was edited, or this ratchet's test differs from the one that decided \
             (the record names its version)",
        ));
    }
    Ok(())
}

/// The report's text and its counts.
pub struct Report {
    pub body: String,
    pub replayed: usize,
    pub same: usize,
    pub differ: usize,
    pub cannot: usize,
}

/// Replay each decided row of `rows` and render one line each, then the totals.
pub fn report(rows: &[&crate::store::ResultRow], runs: &[crate::bench::RunRecord], records: &[replay::DecisionRecord]) -> Report {
    let mut r = Report { body: String::new(), replayed: 0, same: 0, differ: 0, cannot: 0 };
    let decided: Vec<_> = rows.iter().copied().filter(|row| replay::is_decided(row)).collect();
    if decided.is_empty() {
        r.body.push_str("no decided experiments to replay (keep, revert, inconclusive and unconfirmed rows are)\n");
        return r;
    }
    r.body.push_str(&format!(
        "replaying {} decided experiment{} from results/runs.jsonl and results/{}\n",
        decided.len(),
        if decided.len() == 1 { "" } else { "s" },
        replay::DECISIONS_JSONL
    ));
    r.body.push_str(&format!("{:>4}  {:<12}  {:<12}  {:>9}  {:>9}  {}\n", "id", "recorded", "replayed", "p", "pairs", "replay"));
    // Each file read once into maps: a long history has thousands of rows and many more runs.
    let mut by_experiment: HashMap<&str, Vec<&crate::bench::RunRecord>> = HashMap::new();
    for x in runs {
        by_experiment.entry(x.experiment.as_str()).or_default().push(x);
    }
    // The last record of each (id, commit), as `replay::replay` would pick it.
    let last: HashMap<(u64, &str), &replay::DecisionRecord> = records.iter().map(|d| ((d.id, d.commit.as_str()), d)).collect();
    for row in decided {
        let own = by_experiment.get(row.id.to_string().as_str()).map(Vec::as_slice).unwrap_or_default();
        let rule = last.get(&(row.id, row.commit.as_str())).map(|d| std::slice::from_ref(*d)).unwrap_or_default();
        let p = row.p_value.map(crate::stats::fmt_p).unwrap_or_else(|| "-".into());
        let line = |replayed: &str, pairs: String, verdict: String| {
            format!("{:>4}  {:<12}  {:<12}  {:>9}  {:>9}  {}\n", row.id, row.status.as_str(), replayed, p, pairs, verdict)
        };
        let pairs = |d: &crate::stats::Decision| {
            let two = match &d.confirmation {
                Some(c) => format!("{} + {}", d.pairs, c.pairs),
                None => d.pairs.to_string(),
            };
            match d.rescue_pairs() {
                0 => two,
                r => format!("{two} + {r}"),
            }
        };
        match replay::replay(row, own, rule) {
            Replayed::Same(d) => {
                r.replayed += 1;
                r.same += 1;
                r.body.push_str(&line(replay::status_of(d.verdict).as_str(), pairs(&d), "same".into()));
            }
            Replayed::Differs { decision, what } => {
                r.replayed += 1;
                r.differ += 1;
                let (verdict, n) = match &decision {
                    Some(d) => (replay::status_of(d.verdict).as_str(), pairs(d)),
                    None => ("-", "-".into()),
                };
                r.body.push_str(&line(verdict, n, format!("DIFFERS: {}", what.join("; "))));
            }
            Replayed::Cannot(why) => {
                r.cannot += 1;
                r.body.push_str(&line("-", "-".into(), format!("cannot: {why}")));
            }
        }
    }
    r.body.push_str(&match (r.differ, r.cannot) {
        (0, 0) => format!("all {} decide as recorded, with the same p-values and levels\n", r.same),
        (0, c) => format!("all {} that could be replayed decide as recorded; {c} could not be replayed\n", r.same),
        (d, c) => format!("{d} of {} replayed decide otherwise than their rows; {c} could not be replayed\n", r.replayed),
    });
    r
}
