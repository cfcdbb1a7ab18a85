//! Spill-cliff detection across a sweep (the article, section 5.5): "if you increase BKV and
//! see a sudden nonlinear jump in latency (the spill cliff), you've exceeded the register
//! budget. Back off BKV to the last good value." Rows carry their tunables in the `meta`
//! column; a block size that grows while the other tunables stay put should not make the
//! kernel slower, so a step up in latency (or in the gap, "the smoking gun") is flagged.

use std::collections::BTreeMap;

use serde::Serialize;

use super::columns::parse_cell;
use crate::store::{ResultRow, StatusClass};

/// Latency ratio between neighbouring block sizes that counts as a cliff. The article gives no
/// number; 1.25 is ratchet's: well above the few-percent run-to-run noise of a decided
/// experiment, and a bigger block should make the kernel faster, not 25% slower.
pub const CLIFF_LATENCY_RATIO: f64 = 1.25;
/// Gap ratio that counts as a cliff (the gap "suddenly increases", section 5.5); ratchet's.
pub const CLIFF_GAP_RATIO: f64 = 1.5;
/// The widest confidence interval (high minus low, in percent of the incumbent) an
/// experiment's candidate may have to take part: an interval wider than twice the cliff's 25%
/// cannot tell a cliff from noise (a [0.39x, 1.83x] experiment says nothing about a jump).
/// Ratchet's, derived from [`CLIFF_LATENCY_RATIO`].
pub const MAX_CI_WIDTH_PCT: f64 = 2.0 * (CLIFF_LATENCY_RATIO - 1.0) * 100.0;

/// One cliff: `key` grew from `from` to `to` with every other tunable the same.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cliff {
    pub key: String,
    pub from: u64,
    pub to: u64,
    /// The other tunables, `K=V` joined by spaces (empty when none).
    pub others: String,
    pub latency_from_ms: f64,
    pub latency_to_ms: f64,
    pub gap_from_ms: Option<f64>,
    pub gap_to_ms: Option<f64>,
    /// Experiment ids measured at `to` (the side of the cliff to back off from).
    pub ids: Vec<u64>,
}

impl Cliff {
    pub fn message(&self) -> String {
        let with = if self.others.is_empty() { String::new() } else { format!(" ({})", self.others) };
        let gap = match (self.gap_from_ms, self.gap_to_ms) {
            (Some(a), Some(b)) => format!(", gap {a:.3} -> {b:.3} ms"),
            _ => String::new(),
        };
        format!(
            "spill cliff between {k}={} and {k}={}{with}: latency {:.3} -> {:.3} ms ({:+.0}%){gap}; back off {k} to {} (section 5.5)",
            self.from,
            self.to,
            self.latency_from_ms,
            self.latency_to_ms,
            (self.latency_to_ms / self.latency_from_ms - 1.0) * 100.0,
            self.from,
            k = self.key
        )
    }
}

/// A tunable: an all-caps key (`BQ`, `BKV`, `BLOCK_M`) with a whole-number value, the
/// convention of the example's kernel.py (block sizes are upper-case constants).
fn is_tunable(key: &str, value: &str) -> bool {
    key.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && key.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && value.parse::<u64>().is_ok()
}

/// Counts that follow from the tunables (`num_q_blocks`, `grid_steps`, `num_kv_blocks`): they
/// change with the block size by construction, so they do not split a sweep.
fn is_derived_count(key: &str) -> bool {
    key.starts_with("num_") || key.ends_with("_blocks") || key.ends_with("_steps")
}

/// One measured configuration: an experiment's candidate (its results row) or its incumbent
/// (from its runs).
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    /// The experiment it was measured in.
    pub id: u64,
    /// `meta` as a results cell (`BKV=256;BQ=128;...`).
    pub meta: String,
    pub latency_ms: f64,
    pub gap_ms: Option<f64>,
}

/// Whether a row's measurement is decisive enough for a cliff: no interval recorded, or one
/// narrower than [`MAX_CI_WIDTH_PCT`].
fn decisive(r: &ResultRow) -> bool {
    match (r.ci_low_pct, r.ci_high_pct) {
        (Some(lo), Some(hi)) => (hi - lo).abs() <= MAX_CI_WIDTH_PCT,
        _ => true,
    }
}

/// The measured candidates of a results table: kept or not kept rows with a latency, measured
/// decisively ([`decisive`]).
pub fn candidates(rows: &[ResultRow]) -> Vec<Measured> {
    rows.iter()
        .filter(|r| matches!(r.status.class(), StatusClass::Kept | StatusClass::NotKept))
        .filter(|r| decisive(r))
        .filter_map(|r| Some(Measured { id: r.id, meta: r.meta.clone(), latency_ms: r.latency_ms?, gap_ms: r.gap_ms }))
        .collect()
}

/// The incumbents of the experiments whose runs are given: per experiment, the median latency
/// of its ok incumbent runs and the last one's `meta`. A sweep that reverts a bigger block
/// leaves the smaller one only on the incumbent side, so the cliff needs these points.
pub fn incumbents(runs: &[crate::bench::RunRecord], rows: &[ResultRow]) -> Vec<Measured> {
    use crate::bench::{RunStatus, Side};
    rows.iter()
        .filter(|r| matches!(r.status.class(), StatusClass::Kept | StatusClass::NotKept))
        .filter(|r| decisive(r))
        .filter_map(|r| {
            let id = r.id.to_string();
            let inc: Vec<&crate::bench::RunRecord> = runs
                .iter()
                .filter(|x| x.experiment == id && x.side == Side::Incumbent && x.status == RunStatus::Ok && !x.superseded)
                .collect();
            let latency_ms = crate::metrics::median(&inc.iter().filter_map(|x| x.latency_ms).collect::<Vec<_>>())?;
            let meta = super::columns::meta_cell(&inc);
            Some(Measured { id: r.id, meta, latency_ms, gap_ms: None })
        })
        .collect()
}

/// The cliffs in a results table (candidates only).
pub fn detect(rows: &[ResultRow]) -> Vec<Cliff> {
    detect_points(&candidates(rows))
}

/// The cliffs among measured configurations; several measurements of one configuration count
/// by their median.
pub fn detect_points(measured: &[Measured]) -> Vec<Cliff> {
    struct Point {
        tunables: BTreeMap<String, u64>,
        // Non-numeric meta entries (dtype, variant): a change there is another configuration.
        labels: BTreeMap<String, String>,
        latency: f64,
        gap: Option<f64>,
        id: u64,
    }
    let points: Vec<Point> = measured
        .iter()
        .filter_map(|r| {
            let latency = Some(r.latency_ms).filter(|l| l.is_finite() && *l > 0.0)?;
            let mut tunables = BTreeMap::new();
            let mut labels = BTreeMap::new();
            for (k, v) in parse_cell(&r.meta) {
                if is_tunable(k, v) {
                    tunables.insert(k.to_string(), v.parse().ok()?);
                } else if !is_derived_count(k) {
                    // Shapes (seq, heads, head_dim) and labels (dtype, variant): another value
                    // is another problem, never the same sweep.
                    labels.insert(k.to_string(), v.to_string());
                }
            }
            (!tunables.is_empty()).then_some(Point { tunables, labels, latency, gap: r.gap_ms, id: r.id })
        })
        .collect();
    let keys: std::collections::BTreeSet<&String> = points.iter().flat_map(|p| p.tunables.keys()).collect();
    let mut out = Vec::new();
    for key in keys {
        // Group by everything but `key`, then order the group's configurations by `key`.
        let mut groups: BTreeMap<String, BTreeMap<u64, Vec<&Point>>> = BTreeMap::new();
        for p in points.iter().filter(|p| p.tunables.contains_key(key)) {
            let others: Vec<String> = p.tunables.iter().filter(|(k, _)| *k != key).map(|(k, v)| format!("{k}={v}")).collect();
            let labels: Vec<String> = p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let group = format!("{}|{}", others.join(" "), labels.join(" "));
            groups.entry(group).or_default().entry(p.tunables[key]).or_default().push(p);
        }
        for (group, by_size) in groups {
            let others = group.split('|').next().unwrap_or("").to_string();
            let steps: Vec<(u64, f64, Option<f64>, Vec<u64>)> = by_size
                .into_iter()
                .map(|(size, ps)| {
                    let lat: Vec<f64> = ps.iter().map(|p| p.latency).collect();
                    let gap = crate::metrics::median(&ps.iter().filter_map(|p| p.gap).collect::<Vec<_>>());
                    let mut ids: Vec<u64> = ps.iter().map(|p| p.id).collect();
                    ids.sort_unstable();
                    ids.dedup();
                    // Every size in the map has at least one point.
                    (size, crate::metrics::median(&lat).unwrap_or(f64::NAN), gap, ids)
                })
                .collect();
            for w in steps.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                let lat_jump = b.1 / a.1 >= CLIFF_LATENCY_RATIO;
                let gap_jump = matches!((a.2, b.2), (Some(ga), Some(gb)) if ga > 0.0 && gb / ga >= CLIFF_GAP_RATIO && b.1 > a.1);
                if lat_jump || gap_jump {
                    out.push(Cliff {
                        key: key.clone(),
                        from: a.0,
                        to: b.0,
                        others: others.clone(),
                        latency_from_ms: a.1,
                        latency_to_ms: b.1,
                        gap_from_ms: a.2,
                        gap_to_ms: b.2,
                        ids: b.3.clone(),
                    });
                }
            }
        }
    }
    out
}
