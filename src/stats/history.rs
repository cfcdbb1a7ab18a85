//! The noise scale borrowed from history: the A/A pairs of `ratchet calibrate` and the residuals
//! of earlier experiments on the same benchmark command and host, kept in `.ratchet/noise.json`.
//! The estimate is pure (the simulation uses it unchanged); `load`/`record` are the only I/O.
//!
//! Each entry keeps one session's sum of squared residuals of the pairs' log-ratios (speed-up
//! terms) and its degrees of freedom, after setting aside gross outliers (more than 5 robust
//! sds from the median: one 3x slower run must not inflate a day's scale). The scale in use
//! pools the newest entries up to `MAX_DF` degrees of freedom, so old sessions are forgotten
//! as new ones come; fewer than `MIN_DF` degrees of freedom is no history at all.

use super::sequential::{median, robust_sd, sum_spread, NoiseScale, Warmup, WARMUP_STEPS};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// Below this many degrees of freedom the history is not used (the experiment decides as if
/// there were none).
pub const MIN_DF: f64 = 10.0;
/// The pooled estimate stops at this many degrees of freedom, newest sessions first.
pub const MAX_DF: f64 = 60.0;
/// Entries kept per benchmark (older ones are dropped from the file, but the newest
/// calibration: see [`record`]).
pub const MAX_ENTRIES: usize = 30;
/// `ratchet calibrate`'s pairs by default: one pair more than `MAX_DF`, so that a calibration
/// alone fills the pooled history, and at least the `ONE_MODE_TOLD_PAIRS` on which the
/// likelihood ratio takes one mode at its word (a 16-pair calibration cannot rule out two modes
/// within the noise, and its decisions pay for that: lab/notes/decisions-history.md, "The default
/// calibration").
pub const CALIBRATION_PAIRS: usize = MAX_DF as usize + 1;
const _: () = assert!(CALIBRATION_PAIRS >= super::sequential::ONE_MODE_TOLD_PAIRS);
/// The `source` of a calibration's entry.
pub const CALIBRATE_SOURCE: &str = "calibrate";
/// Residuals further than this many robust sds (1.4826 MAD) from the median are set aside.
const TRIM_K: f64 = 5.0;

/// One session's contribution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub time: String,
    /// `calibrate` or `experiment <id>`.
    pub source: String,
    /// Pairs measured and pairs set aside as gross outliers.
    pub pairs: usize,
    #[serde(default)]
    pub trimmed: usize,
    /// The largest distance of a pair's log-ratio from its batch's median (set-aside pairs
    /// included): held against the pooled scale, it tells a machine with gross outliers
    /// ([`borrowed`]). 0 in entries written before it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_dev: f64,
    /// Sum of squared residuals of the kept pairs' log-ratios around their batch means.
    pub ss: f64,
    pub df: f64,
    /// The same pairs' log-sums: successive-difference sum of squares and df
    /// (`sequential::sum_spread`), the guard's second look at the noise. Absent (0) in entries
    /// written before the sum guard existed, and in a parallel sweep's.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sum_ss: f64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub sum_df: f64,
    /// The first [`WARMUP_STEPS`] successive differences of the first batch's log-sums (its
    /// warm-up), left out of `sum_ss`. Empty in entries written before it, and where the first
    /// batch had no sums.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warmup: Vec<f64>,
    /// How much better two modes fit the session's runs than one (`stats::modes::session_llr`,
    /// nats; the first batch's first pair, its warm-up, left out). Absent in entries written
    /// before it and in sessions of too few pairs with sums: unchecked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modes: Option<f64>,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Entry {
    pub fn sd(&self) -> f64 {
        (self.ss / self.df).sqrt()
    }
}

/// The kept pairs of one batch (indices): those within `TRIM_K` robust sds of its median. A batch
/// of fewer than 4 pairs has no robust sd to trust; beside a borrowed scale `sd` it keeps those
/// within the procedure's outlier band (`sequential::outlier_band`: 2 pairs further apart than
/// twice it both go, as no third tells which is wild), so that a decision handed to the two
/// phases at its second pair by a wild one leaves that pair out of the history's spread.
fn trim(d: &[f64], sd: Option<f64>) -> Vec<usize> {
    let all = (0..d.len()).collect();
    if d.len() < 4 {
        let Some(sd) = sd.filter(|s| *s > 0.0) else {
            return all;
        };
        let (med, band) = (median(d), super::sequential::outlier_band(super::sequential::OUTLIER_K, sd, d));
        return (0..d.len()).filter(|&i| (d[i] - med).abs() <= band).collect();
    }
    let (med, mad) = (median(d), robust_sd(d));
    if mad <= 0.0 {
        return all;
    }
    (0..d.len()).filter(|&i| (d[i] - med).abs() <= TRIM_K * mad).collect()
}

/// [`trim`] of a batch of a session whose runs show two modes (`sums`: its pairs' log-sums, empty
/// where it has none): a mixed pair's log-ratio (one run in each mode) lies at most the span of
/// the runs from the median, so the pairs within `TRIM_K` robust sds plus the span of the kept
/// pairs' runs (at most `TRIM_SPAN_MAX` robust sds) stay. The robust sd of a two-mode machine's pairs is that of the pairs within a
/// mode, and a calibration that drew few mixed pairs set them all aside; a gross outlier (a 3x
/// run) still lies far beyond the runs' span.
fn trim_two_modes(d: &[f64], sums: &[f64], sd: Option<f64>) -> Vec<usize> {
    let keep = trim(d, sd);
    if keep.len() < 2 || sums.len() < d.len() {
        return keep;
    }
    let k: Vec<f64> = keep.iter().map(|&i| d[i]).collect();
    let v: Vec<f64> = keep.iter().map(|&i| sums[i]).collect();
    let runs = super::modes::batch_runs(&k, &v);
    let span = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max) - runs.iter().copied().fold(f64::INFINITY, f64::min);
    let (med, mad) = (median(d), robust_sd(d));
    let band = mad * TRIM_K + span.min(TRIM_SPAN_MAX * mad);
    (0..d.len()).filter(|&i| (d[i] - med).abs() <= band).collect()
}

/// The most the runs' span widens the two-mode trim, in robust sds: a pair with both runs in a
/// population of gross outliers (3x runs, 25% spikes) makes the kept runs' span theirs and would
/// bring every such pair back; modes far apart for their noise (6% at CV 0.5%, 8.5 sds of a
/// pair within a mode) are within it.
const TRIM_SPAN_MAX: f64 = 10.0;

/// An entry from one session's batches of log-ratios (each batch around its own mean: an
/// experiment's phases, or the A/A pairs of a calibration). `None` when nothing is left to
/// estimate a spread from.
pub fn entry(time: &str, source: &str, batches: &[&[f64]]) -> Option<Entry> {
    let with: Vec<(&[f64], &[f64])> = batches.iter().map(|b| (*b, &[][..])).collect();
    entry_runs(time, source, &with)
}

/// [`entry`] from batches of (log-ratios, log-sums), one of each per pair: the sums' spread
/// ([`sum_spread`] over the pairs the log-ratios keep, as the guard computes it) is recorded
/// beside the log-ratios'. Sums shorter than their log-ratios are not used. The first batch
/// starts the session cold: its first [`WARMUP_STEPS`] sum differences are recorded as its
/// warm-up instead of in the spread.
pub fn entry_runs(time: &str, source: &str, batches: &[(&[f64], &[f64])]) -> Option<Entry> {
    entry_beside(time, source, batches, None)
}

/// [`entry_runs`] of a decision that borrowed the scale `sd` (one pair's log-ratio): its short
/// batches are trimmed against it. Where the session's runs show two modes, what the trim set
/// aside may be the modes' mixed pairs (one run in each), not gross outliers: the batches are
/// trimmed again wide enough for them ([`trim_two_modes`]). A two-mode calibration that
/// drew few mixed pairs has a robust sd of one mode's pairs, and set them all aside: it lent
/// 0.07-0.14x the machine's scale (lab/notes/decisions-history.md, "A mode set aside as outliers").
pub fn entry_beside(time: &str, source: &str, batches: &[(&[f64], &[f64])], sd: Option<f64>) -> Option<Entry> {
    let trimmed = spread(batches, sd, |d, _, sd| trim(d, sd));
    let modes = super::modes::session_llr(&trimmed.runs);
    let e = if trimmed.trimmed > 0 && modes.is_some_and(super::modes::shows_two) { spread(batches, sd, trim_two_modes) } else { trimmed };
    (e.df > 0.0).then(|| Entry {
        time: time.to_string(),
        source: source.to_string(),
        pairs: e.pairs,
        trimmed: e.trimmed,
        max_dev: e.max_dev,
        ss: e.ss,
        df: e.df,
        sum_ss: e.sum_ss,
        sum_df: e.sum_df,
        warmup: e.warmup,
        modes,
    })
}

/// What [`entry_beside`] reads of a session's batches.
#[derive(Default)]
struct Spread {
    pairs: usize,
    trimmed: usize,
    max_dev: f64,
    ss: f64,
    df: f64,
    sum_ss: f64,
    sum_df: f64,
    warmup: Vec<f64>,
    /// The kept pairs' runs (`modes::batch_runs`), the first batch's first pair left out.
    runs: Vec<f64>,
}

/// A batch's trim: the pairs kept of (log-ratios, log-sums, a borrowed sd).
type Trim = fn(&[f64], &[f64], Option<f64>) -> Vec<usize>;

/// The spread of a session's batches, each trimmed by `trim_with` (its finite pairs' log-ratios,
/// their log-sums where it has them, against `sd` where given).
fn spread(batches: &[(&[f64], &[f64])], sd: Option<f64>, trim_with: Trim) -> Spread {
    let mut out = Spread::default();
    for (bi, (b, s)) in batches.iter().enumerate() {
        let ok = finite_pairs(b, s);
        let d: Vec<f64> = ok.iter().map(|&i| b[i]).collect();
        let sv: Vec<f64> = if s.len() >= b.len() { ok.iter().map(|&i| s[i]).collect() } else { vec![] };
        let (keep, batch_ss, batch_df) = spread_of(&d, trim_with(&d, &sv, sd));
        out.pairs += d.len();
        out.trimmed += d.len() - keep.len();
        if !d.is_empty() {
            let med = median(&d);
            out.max_dev = d.iter().fold(out.max_dev, |m, x| m.max((x - med).abs()));
        }
        if keep.len() < 2 {
            continue;
        }
        let k: Vec<f64> = keep.iter().map(|&i| d[i]).collect();
        out.ss += batch_ss;
        out.df += batch_df;
        if s.len() >= b.len() {
            let v: Vec<f64> = keep.iter().map(|&i| s[ok[i]]).collect();
            let cold = if bi == 0 { WARMUP_STEPS.min(v.len().saturating_sub(1)) } else { 0 };
            out.warmup.extend(v.windows(2).take(cold).map(|w| w[1] - w[0]));
            let (a, f) = sum_spread(&v[cold..]);
            out.sum_ss += a;
            out.sum_df += f;
            // The session's first pair (its warm-up) is left out where the trim kept it.
            let first = usize::from(bi == 0 && keep.first() == Some(&0));
            out.runs.extend(super::modes::batch_runs(&k[first..], &v[first..]));
        }
    }
    out
}

/// The pairs of a batch `d` the trim keeps (against `sd` where given), and their sum of squares
/// about their mean and df (0 and 0 below two).
fn kept_spread(d: &[f64], sd: Option<f64>) -> (Vec<usize>, f64, f64) {
    spread_of(d, trim(d, sd))
}

/// The pairs `keep` of a batch `d`, with their sum of squares about their mean and df.
fn spread_of(d: &[f64], keep: Vec<usize>) -> (Vec<usize>, f64, f64) {
    if keep.len() < 2 {
        return (keep, 0.0, 0.0);
    }
    let m = keep.iter().map(|&i| d[i]).sum::<f64>() / keep.len() as f64;
    let ss = keep.iter().map(|&i| (d[i] - m).powi(2)).sum::<f64>();
    let df = (keep.len() - 1) as f64;
    (keep, ss, df)
}

/// The sd [`borrowed`] lends from a history of one session of log-ratios `d` and log-sums `sums`
/// (as [`entry_runs`] records it), without the rest of the entry: the simulator ranks many
/// calibrations by it before it builds the few it keeps (the whole entry, its modes' fit above
/// all, costs 20x more: it is built only where the trim set a pair aside, which the modes undo).
pub fn session_sd(d: &[f64], sums: &[f64]) -> Option<f64> {
    let ok: Vec<f64> = finite_pairs(d, sums).into_iter().map(|i| d[i]).collect();
    let (keep, ss, df) = kept_spread(&ok, None);
    if keep.len() < ok.len() {
        return entry_runs("", CALIBRATE_SOURCE, &[(d, sums)]).and_then(|e| estimate(&[e])).map(|s| s.sd);
    }
    pool(std::iter::once((ss, df))).map(|s| s.sd)
}

/// The pairs of a batch with a finite log-ratio and, where the sums reach them, a finite log-sum.
fn finite_pairs(d: &[f64], sums: &[f64]) -> Vec<usize> {
    (0..d.len()).filter(|&i| d[i].is_finite() && sums.get(i).is_none_or(|x| x.is_finite())).collect()
}

/// The scale in use: the entries (oldest first) pooled newest first up to `MAX_DF` degrees of
/// freedom; `None` below `MIN_DF`.
pub fn estimate(entries: &[Entry]) -> Option<NoiseScale> {
    pool(entries.iter().map(|e| (e.ss, e.df)))
}

/// The history's spread of the pairs' log-sums, pooled like [`estimate`] over the newest
/// entries that recorded it; `None` below `MIN_DF` (old files: the guard then sees the
/// log-ratios alone).
pub fn estimate_sums(entries: &[Entry]) -> Option<NoiseScale> {
    pool(entries.iter().filter(|e| e.sum_df > 0.0).map(|e| (e.sum_ss, e.sum_df)))
}

/// The warm-up profile of the entries the sums' spread pools (the newest that recorded sums, up
/// to `MAX_DF` of them, and any with a warm-up alone among them): each first sum difference
/// averaged over the sessions that recorded it, with the sd of one session's difference (sqrt 2
/// times `sums`, the sums' spread [`estimate_sums`] gives). `None` without a recorded warm-up.
pub fn estimate_warmup(entries: &[Entry], sums: NoiseScale) -> Option<Warmup> {
    let (mut df, mut steps, mut counts) = (0.0, vec![0.0; WARMUP_STEPS], vec![0.0; WARMUP_STEPS]);
    // A session of one first-phase difference has its warm-up and no spread: it counts too.
    for e in entries.iter().rev().filter(|e| e.sum_df > 0.0 || !e.warmup.is_empty()) {
        if df >= MAX_DF {
            break;
        }
        df += e.sum_df;
        for (j, x) in e.warmup.iter().take(WARMUP_STEPS).enumerate() {
            steps[j] += x;
            counts[j] += 1.0;
        }
    }
    // Each position's mean over the sessions that reached it; the fewest sessions stand for all.
    let sessions = counts.iter().copied().fold(f64::INFINITY, f64::min);
    (sessions >= 1.0 && sessions.is_finite()).then(|| Warmup {
        steps: steps.iter().zip(&counts).map(|(s, c)| s / c).collect(),
        sessions,
        sd: std::f64::consts::SQRT_2 * sums.sd,
    })
}

/// (sum of squares, df) of entries, oldest first, pooled newest first up to `MAX_DF`.
fn pool(spreads: impl DoubleEndedIterator<Item = (f64, f64)>) -> Option<NoiseScale> {
    let (mut ss, mut df) = (0.0, 0.0);
    for (s, f) in spreads.rev() {
        if df >= MAX_DF {
            break;
        }
        ss += s;
        df += f;
    }
    (df >= MIN_DF && ss > 0.0).then(|| NoiseScale { sd: (ss / df).sqrt(), df })
}

/// The sessions [`estimate`] pools, newest first: up to `MAX_DF` degrees of freedom.
fn pooled_sessions(entries: &[Entry]) -> Vec<&Entry> {
    entries.iter().rev().scan(0.0, |df, e| (*df < MAX_DF).then(|| (*df += e.df, e).1)).collect()
}

/// The borrowed scale of a history, with its sum spread where recorded, the sessions it pooled
/// (newest first, as [`estimate`] takes them; the sums pool the same or fewer) and how many of
/// those saw a gross outlier: a pair further than the procedure's `OUTLIER_K` pooled sds from its
/// batch's median (a per-batch robust sd of a few pairs is too unsure to tell: 4 normal pairs
/// often have a tiny one).
pub fn borrowed(entries: &[Entry]) -> Option<super::sequential::Borrowed> {
    estimate(entries).map(|s| {
        let pooled = pooled_sessions(entries);
        let used: Vec<String> = pooled.iter().map(|e| format!("{}@{}", e.source, e.time)).collect();
        let sums = estimate_sums(entries);
        super::sequential::Borrowed {
            source: used.join(";"),
            outliers: pooled.iter().filter(|e| e.max_dev > super::sequential::OUTLIER_K * s.sd).count(),
            // Sessions that told one mode and that later sessions ran noisier than no longer
            // describe the machine: where the newest did, the history has not told.
            modes: modes_seen(&pooled).filter(|&m| m > 0 || !changed_since_newest_told(entries)),
            modes_pairs: one_mode_pairs(entries),
            warmup: sums.and_then(|m| estimate_warmup(entries, m)),
            ..super::sequential::Borrowed::new(s)
        }
        .with_sums(sums)
    })
}

/// Of the pooled sessions that could tell one mode from two, how many showed two (`None`: none
/// could tell).
fn modes_seen(pooled: &[&Entry]) -> Option<usize> {
    let told: Vec<f64> = pooled.iter().filter_map(|e| e.modes).collect();
    (!told.is_empty()).then(|| told.iter().filter(|&&m| super::modes::shows_two(m)).count())
}

/// Pairs of the kept sessions (pooled or not: modes are the machine's, not the day's) that could
/// tell one mode from two, where none showed two (0 where any did), counted newest first back to
/// the first told session that the sessions after it ran noisier than ([`ran_noisier`]): the
/// machine changed since that one, and what it told no longer holds.
fn one_mode_pairs(entries: &[Entry]) -> usize {
    if entries.iter().any(|e| e.modes.is_some_and(super::modes::shows_two)) {
        return 0;
    }
    let mut pairs = 0;
    for (i, e) in entries.iter().enumerate().rev().filter(|(_, e)| e.modes.is_some()) {
        if ran_noisier(&entries[i + 1..], e) {
            break;
        }
        pairs += e.pairs;
    }
    pairs
}

/// Whether the sessions after the newest that told one mode from two ran noisier than it
/// ([`ran_noisier`]).
fn changed_since_newest_told(entries: &[Entry]) -> bool {
    entries.iter().rposition(|e| e.modes.is_some()).is_some_and(|i| ran_noisier(&entries[i + 1..], &entries[i]))
}

/// Whether the pooled spread of the sessions `later` is above `told`'s at the one-sided F level
/// [`CHANGED_AT`]: a slow mode that came after a calibration (another job's memory placement, a
/// driver update) makes a later session's mixed pairs read as noise the calibration never saw.
fn ran_noisier(later: &[Entry], told: &Entry) -> bool {
    use statrs::distribution::{ContinuousCDF, FisherSnedecor};
    // The log-ratios' spread and the log-sums', pooled: both see a slow mode (ratio ~ +-g where
    // the pair's runs are in different modes, a sum difference where consecutive pairs' are).
    let spread = |e: &Entry| (e.ss + e.sum_ss, e.df + e.sum_df);
    let (ss, df) = later.iter().map(spread).fold((0.0, 0.0), |(s, d), (a, b)| (s + a, d + b));
    let (told_ss, told_df) = spread(told);
    if df < 1.0 || told_df < 1.0 || told_ss <= 0.0 {
        return false;
    }
    let f = (ss / df) / (told_ss / told_df);
    FisherSnedecor::new(df, told_df).is_ok_and(|d| 1.0 - d.cdf(f) < CHANGED_AT)
}

/// The F level at which later sessions running noisier than one that told the modes end what it
/// told.
pub const CHANGED_AT: f64 = 0.01;

/// The history of one benchmark command on one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Benchmark {
    pub host: String,
    pub command: String,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct File {
    version: u32,
    benchmarks: Vec<Benchmark>,
}

pub fn path(state_dir: &Path) -> PathBuf {
    state_dir.join("noise.json")
}

/// This machine's name (the history is per machine).
pub fn host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn read(state_dir: &Path) -> File {
    std::fs::read_to_string(path(state_dir)).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default()
}

/// The history of `command` on this host (empty when there is none, or the file is unreadable:
/// a lost history only costs runs, never validity).
pub fn load(state_dir: &Path, command: &str) -> Benchmark {
    let h = host();
    read(state_dir).benchmarks.into_iter().find(|b| b.host == h && b.command == command).unwrap_or(Benchmark {
        host: h,
        command: command.to_string(),
        entries: vec![],
    })
}

/// Append an entry to the history of `command` on this host (atomically; the oldest entries
/// beyond `MAX_ENTRIES` are dropped, all but the newest calibration's: it is the one session
/// long enough to tell one mode from two, and a sweep's experiments, mostly too short to tell,
/// would otherwise rotate it out after 30 of them; a newer calibration replaces it).
pub fn record(state_dir: &Path, command: &str, e: Entry) -> Result<()> {
    let mut f = read(state_dir);
    f.version = 1;
    let h = host();
    let i = match f.benchmarks.iter().position(|b| b.host == h && b.command == command) {
        Some(i) => i,
        None => {
            f.benchmarks.push(Benchmark { host: h, command: command.to_string(), entries: vec![] });
            f.benchmarks.len() - 1
        }
    };
    let entries = &mut f.benchmarks[i].entries;
    entries.push(e);
    let calibration = entries.iter().rposition(|e| e.source == CALIBRATE_SOURCE);
    let mut excess = entries.len().saturating_sub(MAX_ENTRIES);
    let mut i = 0;
    entries.retain(|_| {
        let drop = excess > 0 && Some(i) != calibration;
        excess -= usize::from(drop);
        i += 1;
        !drop
    });
    let bytes = serde_json::to_vec_pretty(&f).expect("history serializes");
    crate::fsutil::write_atomic(&path(state_dir), &bytes)
}

/// One line for people: the scale in use, where it comes from, and how the rule `params` (the
/// `[decision] method`'s) reads it.
pub fn describe(b: &Benchmark, params: &super::sequential::Params) -> String {
    let one_phase = params.likelihood_ratio;
    if params.robust.is_some() {
        return describe_robust(b);
    }
    match borrowed(&b.entries) {
        Some(h) => {
            let (s, used) = (h.scale, pooled_sessions(&b.entries).len());
            let ratio = one_phase.decides(h.outliers);
            let reads = if ratio {
                format!(
                    "decisions pool it with their own pairs in a likelihood ratio of whole pairs{}",
                    if one_phase == super::sequential::OnePhase::UntilOutlier {
                        " (the two phases, which borrow it, where a pair is a gross outlier)"
                    } else {
                        ""
                    }
                )
            } else {
                format!("decisions borrow it (x{} safety)", super::sequential::SAFETY)
            };
            format!(
                "noise scale {:.2}% per pair (one run's CV about {:.2}%, speed-up terms) from {used} session{} ({:.0} df) of history on {}; {reads}{}{}{}{}",
                s.sd * 100.0,
                s.sd / 2f64.sqrt() * 100.0,
                if used == 1 { "" } else { "s" },
                s.df,
                b.host,
                match h.sums {
                    Some(m) if !ratio => format!(", and their variance guard reads the runs' sums too ({:.0} df){}", m.df, warmup_note(&b.entries, m)),
                    Some(m) => format!(", the runs' sums too ({:.0} df){}", m.df, warmup_note(&b.entries, m)),
                    None => String::new(),
                },
                match h.outliers {
                    0 => String::new(),
                    n => format!(
                        "; {n} of those sessions saw a gross outlier (a pair over {} sds from its batch's median): while they are pooled, `method = \"auto\"` decides by the two phases",
                        super::sequential::OUTLIER_K
                    ),
                },
                match h.modes {
                    Some(n) if n > 0 && ratio => format!(
                        "; {n} of them ran in two modes (runs apart by more than their noise, as when some processes run slower): the ratio keeps at e^{} rather than e^{}, and from {} pairs",
                        super::sequential::LR_KEEP_AT,
                        super::sequential::LR_KEEP_AT_ONE_MODE,
                        super::sequential::LR_KEEP_FROM_TWO_MODES
                    ),
                    Some(0) if ratio && h.modes_pairs < super::sequential::ONE_MODE_TOLD_PAIRS => format!(
                        "; its sessions show one mode on {} pairs, too few to rule out two modes within the noise (a calibration that came out low hides them): until {} pairs show it, the ratio keeps at e^{} rather than e^{}, and before {} pairs only a mean gain of {} calibrated sds (`ratchet calibrate` once tells it, {} pairs by default)",
                        h.modes_pairs,
                        super::sequential::ONE_MODE_TOLD_PAIRS,
                        super::sequential::LR_KEEP_AT,
                        super::sequential::LR_KEEP_AT_ONE_MODE,
                        super::sequential::LR_EARLY_UNTIL,
                        super::sequential::LR_EARLY_SDS,
                        CALIBRATION_PAIRS
                    ),
                    None if changed_since_newest_told(&b.entries) => format!(
                        "; the sessions since the newest that told one mode from two ran noisier than it (F level {CHANGED_AT}): the machine may have changed since (a slow mode that came, a noise jump), so one mode is no longer taken at its word and decisions wait out a streak of a second population, until a session of {} pairs or more tells the modes again (`ratchet calibrate` does)",
                        super::sequential::MODES_MIN_PAIRS
                    ),
                    _ => String::new(),
                },
                // Measured for the two phases with their confirmation (lab/notes/decisions-history.md, "Point 6
                // under `sequential`, at the default calibration").
                if one_phase == super::sequential::OnePhase::Never && params.confirm && s.df < MAX_DF {
                    format!(
                        "; `method = \"sequential\"` holds the false-keep bound for a calibration that came out low from {MAX_DF:.0} df (`ratchet calibrate` gives them), not on {:.0}",
                        s.df
                    )
                } else {
                    String::new()
                }
            )
        }
        None => {
            // An empty f64 sum is -0.0, which would print as "-0 of 10 df".
            let df: f64 = b.entries.iter().map(|e| e.df).sum::<f64>() + 0.0;
            format!(
                "noise scale: no usable history yet ({df:.0} of {MIN_DF:.0} df on {}); decisions use each experiment's own t-test (run `ratchet calibrate` to build it)",
                b.host
            )
        }
    }
}

/// [`describe`] for the robust ratio: the history weighs the gain side's noise only, so there is
/// no guard, outlier or mode rule to tell of.
fn describe_robust(b: &Benchmark) -> String {
    match borrowed(&b.entries) {
        Some(h) => {
            let (s, used) = (h.scale, pooled_sessions(&b.entries).len());
            format!(
                "noise scale {:.2}% per pair (one run's CV about {:.2}%, speed-up terms) from {used} session{} ({:.0} df) of history on {}; the robust ratio weighs a gain's noise by it, and fits no gain to the pairs alone",
                s.sd * 100.0,
                s.sd / 2f64.sqrt() * 100.0,
                if used == 1 { "" } else { "s" },
                s.df,
                b.host
            )
        }
        None => {
            let df: f64 = b.entries.iter().map(|e| e.df).sum::<f64>() + 0.0;
            format!(
                "noise scale: no usable history yet ({df:.0} of {MIN_DF:.0} df on {}); the robust ratio weighs a gain's noise over 0.05% to 30% a pair, which takes more pairs (run `ratchet calibrate` to build it)",
                b.host
            )
        }
    }
}

/// The warm-up the guard reads around, in words (empty where the history shows none).
fn warmup_note(entries: &[Entry], sums: NoiseScale) -> String {
    let Some(w) = estimate_warmup(entries, sums) else { return String::new() };
    match w.used(WARMUP_STEPS, super::sequential::WARMUP_Z).first().filter(|x| **x != 0.0) {
        Some(step) => format!(
            "; sessions start warming up: a session's first pair {:.1}% {} than its second, both runs together (mean of {:.0} session{}), which the guard reads as warm-up, not noise",
            step.abs() * 100.0,
            if *step < 0.0 { "slower" } else { "faster" },
            w.sessions,
            if w.sessions == 1.0 { "" } else { "s" }
        ),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sequential::{OnePhase, Params};

    /// The default rule with the likelihood ratio deciding as `one_phase` says.
    fn rule(one_phase: OnePhase) -> Params {
        Params { likelihood_ratio: one_phase, ..crate::config::DecisionConfig::earlier().params(None) }
    }

    #[test]
    fn no_history_reads_zero_degrees_of_freedom() {
        let text = describe(&Benchmark::default(), &rule(OnePhase::UntilOutlier));
        assert!(text.contains("(0 of ") && !text.contains("-0"), "{text}");
    }

    #[test]
    fn the_borrowed_scale_names_the_sessions_it_pooled_newest_first() {
        let e = |time: &str, source: &str| Entry {
            time: time.into(),
            source: source.into(),
            pairs: 31,
            trimmed: 0,
            max_dev: 0.0,
            ss: 0.003,
            df: 30.0,
            sum_ss: 0.0,
            sum_df: 0.0,
            warmup: vec![],
            modes: None,
        };
        // 30 df each: the newest two reach 60 df, the oldest is not pooled.
        let entries = [e("t1", "calibrate"), e("t2", "experiment 1"), e("t3", "experiment 2")];
        let b = borrowed(&entries).unwrap();
        assert_eq!(b.source, "experiment 2@t3;experiment 1@t2");
        assert_eq!(b.scale.df, 60.0);
        // The sessions with a gross outlier it counts are those it pooled; the pooled sd is 0.01,
        // a pair 6 sds from its batch's median is not gross, just beyond is.
        let with = |i: usize, max_dev: f64| {
            let mut v = entries.clone();
            v[i].max_dev = max_dev;
            borrowed(&v).unwrap().outliers
        };
        assert_eq!((b.outliers, with(0, 1.0), with(1, 0.06), with(1, 0.0601), with(2, 1.0)), (0, 0, 0, 1, 1));
        let mut seen = entries.to_vec();
        seen[2].max_dev = 1.0;
        let text = |entries: &[Entry], one_phase| {
            describe(&Benchmark { host: "h".into(), command: "c".into(), entries: entries.to_vec() }, &rule(one_phase))
        };
        assert!(text(&seen, OnePhase::Never).contains("1 of those sessions saw a gross outlier"), "{}", text(&seen, OnePhase::Never));
        assert!(!text(&entries, OnePhase::Never).contains("gross outlier"), "{}", text(&entries, OnePhase::Never));
        // The line says how the rule reads the scale: the default's likelihood ratio pools it,
        // the two phases borrow it with their safety factor (also where auto leaves it to them).
        let auto = text(&entries, OnePhase::UntilOutlier);
        assert!(auto.contains("pool it with their own pairs in a likelihood ratio of whole pairs") && !auto.contains("safety"), "{auto}");
        assert!(text(&entries, OnePhase::Never).contains("decisions borrow it (x1.25 safety)"));
        assert!(text(&seen, OnePhase::UntilOutlier).contains("decisions borrow it (x1.25 safety)"));
        // The robust ratio, the default: the scale weighs the gain side alone, gross outlier or not.
        let robust = crate::config::DecisionConfig::default().params(None);
        let line = |entries: &[Entry]| describe(&Benchmark { host: "h".into(), command: "c".into(), entries: entries.to_vec() }, &robust);
        assert_eq!(line(&seen), line(&entries));
        assert!(line(&entries).starts_with("noise scale 1.00% per pair") && line(&entries).contains("60 df"), "{}", line(&entries));
        assert!(line(&entries).contains("the robust ratio weighs a gain's noise by it"), "{}", line(&entries));
        assert!(line(&[]).contains("no usable history yet") && line(&[]).contains("ratchet calibrate"), "{}", line(&[]));
        // Sessions that could tell one mode from two: the scale counts those that showed two
        // among the pooled, and says so where the ratio decides.
        let modes = |m: [Option<f64>; 3]| {
            let mut v = entries.clone();
            for (e, m) in v.iter_mut().zip(m) {
                e.modes = m;
            }
            v
        };
        let count = |m| borrowed(&modes(m)).unwrap().modes;
        assert_eq!(count([None, None, None]), None, "none could tell");
        assert_eq!(count([Some(9.0), Some(1.0), None]), Some(0), "the oldest is not pooled");
        assert_eq!(count([None, Some(9.0), Some(1.0)]), Some(1));
        assert!(borrowed(&modes([None, Some(1.0), Some(2.0)])).unwrap().one_mode());
        // One mode is told on the pairs of every kept session that could tell, none showing two.
        let told = |m| borrowed(&modes(m)).unwrap().modes_pairs;
        assert_eq!(told([None, Some(1.0), Some(2.0)]), entries[1].pairs + entries[2].pairs);
        assert_eq!(told([Some(1.0), Some(1.0), Some(2.0)]), entries.iter().map(|e| e.pairs).sum::<usize>(), "the unpooled count too");
        assert_eq!(told([Some(9.0), Some(1.0), None]), 0, "a kept session showed two");
        let few = text(&modes([None, Some(1.0), None]), OnePhase::UntilOutlier);
        assert!(few.contains(&format!("one mode on {} pairs", entries[1].pairs)) && few.contains("until 60 pairs show it, the ratio keeps at e^6.5 rather than e^5.7, and before 6 pairs only a mean gain of 4 calibrated sds"), "{few}");
        assert!(!text(&modes([None, Some(1.0), None]), OnePhase::Never).contains("one mode"));
        let two = text(&modes([None, Some(9.0), None]), OnePhase::UntilOutlier);
        assert!(two.contains("1 of them ran in two modes") && two.contains("keeps at e^6.5 rather than e^5.7, and from 5 pairs"), "{two}");
        assert!(!text(&modes([None, Some(9.0), None]), OnePhase::Never).contains("two modes"));
    }

    #[test]
    fn entry_pools_batches_around_their_own_means() {
        // Two batches with different means: residuals around each, df = (3 - 1) + (2 - 1).
        let e = entry("t", "x", &[&[0.1, 0.2, 0.3], &[1.0, 1.2]]).unwrap();
        assert!((e.ss - (0.02 + 0.02)).abs() < 1e-12, "{e:?}");
        assert_eq!(e.df, 3.0);
        assert!(entry("t", "x", &[&[0.5]]).is_none());
    }

    #[test]
    fn a_session_s_first_sum_step_is_its_warm_up_not_its_noise() {
        // The first batch's runs warm up: its first pair 8% slower in the sums than the next.
        let d = [0.01, -0.012, 0.004, -0.003, 0.008, -0.009];
        let sums = [0.10, 0.02, 0.025, 0.015, 0.02, 0.018];
        let e = entry_runs("t", "experiment 1", &[(&d, &sums), (&d, &sums)]).unwrap();
        assert_eq!(e.warmup.len(), WARMUP_STEPS);
        assert!((e.warmup[0] + 0.08).abs() < 1e-12, "{:?}", e.warmup);
        // Left out of the first batch's spread only: the confirmation does not start cold.
        let (first, _) = sum_spread(&sums[WARMUP_STEPS..]);
        let (second, _) = sum_spread(&sums);
        assert!((e.sum_ss - first - second).abs() < 1e-15, "{}", e.sum_ss);
        assert_eq!(e.sum_df, (5 - WARMUP_STEPS + 5) as f64);
        // Ten sessions that all began so lend that step as their profile, the mean of the
        // sessions the sums' spread pools (9 df each: the newest 7 reach 60), with the sd of one
        // session's difference (sqrt 2 x the sums' sd).
        let entries: Vec<Entry> = (0..10).map(|_| e.clone()).collect();
        let sums_scale = estimate_sums(&entries).unwrap();
        let w = estimate_warmup(&entries, sums_scale).unwrap();
        assert!((w.steps[0] + 0.08).abs() < 1e-12 && w.sessions == 7.0, "{w:?}");
        assert!((w.sd - std::f64::consts::SQRT_2 * sums_scale.sd).abs() < 1e-15);
        assert_eq!(borrowed(&entries).unwrap().warmup, Some(w));
        // A session whose first phase stopped at 2 pairs has a warm-up and no spread: it counts
        // towards the profile, not the spread.
        let short = entry_runs("t", "experiment 2", &[(&d[..2], &sums[..2])]).unwrap();
        assert_eq!((short.sum_df, short.warmup.len()), (0.0, 1));
        let mut with_short = entries.clone();
        with_short.push(short);
        assert_eq!(estimate_warmup(&with_short, sums_scale).unwrap().sessions, 8.0);
        // Entries written before the warm-up was recorded lend none.
        let old: Vec<Entry> = entries.iter().map(|e| Entry { warmup: vec![], ..e.clone() }).collect();
        assert_eq!(estimate_warmup(&old, sums_scale), None);
        let json = serde_json::to_string(&old[0]).unwrap();
        assert!(!json.contains("warmup"), "{json}");
        // `ratchet status` says so, and says nothing of a warm-up the history does not show.
        let text = describe(&Benchmark { host: "h".into(), command: "c".into(), entries: entries.clone() }, &rule(OnePhase::Never));
        assert!(text.contains("a session's first pair 8.0% slower than its second, both runs together (mean of 7 sessions)"), "{text}");
        assert!(!describe(&Benchmark { host: "h".into(), command: "c".into(), entries: old }, &rule(OnePhase::Never)).contains("warming"));
    }

    #[test]
    fn a_session_records_whether_its_runs_fall_in_two_modes() {
        // 9 pairs: the first is the session's warm-up and left out, so 8 can tell.
        let runs = |slow: &dyn Fn(usize) -> bool| -> (Vec<f64>, Vec<f64>) {
            let mut rng = super::super::rng::Rng::new(3);
            let run: Vec<f64> = (0..18).map(|t| 0.004 * rng.normal() + if slow(t) { 0.04 } else { 0.0 }).collect();
            (0..9).map(|i| (run[2 * i] - run[2 * i + 1], run[2 * i] + run[2 * i + 1])).unzip()
        };
        let (d, s) = runs(&|t| t % 3 == 0);
        let two = entry_runs("t", "calibrate", &[(&d, &s)]).unwrap().modes.unwrap();
        assert!(super::super::modes::shows_two(two), "{two}");
        let (d, s) = runs(&|_| false);
        let one = entry_runs("t", "calibrate", &[(&d, &s)]).unwrap().modes.unwrap();
        assert!(!super::super::modes::shows_two(one), "{one}");
        // Too few pairs, or no sums: unchecked, and not written.
        let short = entry_runs("t", "experiment 1", &[(&d[..8], &s[..8])]).unwrap();
        assert_eq!(short.modes, None);
        assert_eq!(entry("t", "x", &[&d]).unwrap().modes, None);
        assert!(!serde_json::to_string(&short).unwrap().contains("modes"));
    }

    #[test]
    fn a_gross_outlier_does_not_inflate_the_scale() {
        let clean = [0.01, -0.012, 0.004, -0.003, 0.008, -0.009, 0.0, 0.011, -0.006, 0.002];
        let mut dirty = clean.to_vec();
        dirty.push(1.1); // one run 3x slower
        let (a, b) = (entry("t", "x", &[&clean]).unwrap(), entry("t", "x", &[&dirty]).unwrap());
        assert_eq!(b.trimmed, 1);
        assert!((a.sd() - b.sd()).abs() < 1e-12);
    }

    #[test]
    fn a_short_session_leaves_a_gross_outlier_out_beside_a_borrowed_scale() {
        // Three pairs, one with a run 3x slow: no robust sd to trim by, so alone it stays in the
        // spread; beside a borrowed sd of 1.4% it is 6 sds out, left out, and still the session's
        // largest distance (what routes `auto`).
        let short: [(&[f64], &[f64]); 1] = [(&[0.01, -0.012, 1.1], &[])];
        let alone = entry_runs("t", "x", &short).unwrap();
        let beside = entry_beside("t", "x", &short, Some(0.014)).unwrap();
        assert_eq!((alone.trimmed, beside.trimmed), (0, 1));
        assert!(alone.sd() > 0.5 && (beside.sd() - 0.022f64 / 2f64.sqrt()).abs() < 1e-12, "{} {}", alone.sd(), beside.sd());
        assert_eq!(alone.max_dev, beside.max_dev);
        // Pairs within 6 sds are all kept, and a longer batch is the robust trim's.
        let calm: [(&[f64], &[f64]); 1] = [(&[0.01, -0.012, 0.07], &[])];
        assert_eq!(entry_beside("t", "x", &calm, Some(0.014)).unwrap().trimmed, 0);
        let clean = [0.01, -0.012, 0.004, -0.003, 0.008];
        assert_eq!(entry_beside("t", "x", &[(&clean, &[])], Some(1e-6)), entry_runs("t", "x", &[(&clean, &[])]));
    }

    #[test]
    fn estimate_needs_enough_df_and_forgets_old_sessions() {
        let e = |sd: f64, df: f64| Entry {
            time: "t".into(),
            source: "x".into(),
            pairs: df as usize + 1,
            trimmed: 0,
            max_dev: 0.0,
            ss: sd * sd * df,
            df,
            sum_ss: 0.0,
            sum_df: 0.0,
            warmup: vec![],
            modes: None,
        };
        assert!(estimate(&[e(0.01, 5.0)]).is_none(), "below MIN_DF");
        let s = estimate(&[e(0.01, 5.0), e(0.01, 7.0)]).unwrap();
        assert!((s.sd - 0.01).abs() < 1e-12 && s.df == 12.0);
        // An old noisy era is forgotten once 60 df of newer sessions exist.
        let mut v = vec![e(0.05, 30.0)];
        v.extend((0..4).map(|_| e(0.01, 15.0)));
        let s = estimate(&v).unwrap();
        assert!((s.sd - 0.01).abs() < 1e-12 && s.df == 60.0, "{s:?}");
    }

    #[test]
    fn record_and_load_round_trip_per_command() {
        let d = tempfile::tempdir().unwrap();
        assert!(load(d.path(), "python3 a.py").entries.is_empty());
        for i in 0..(MAX_ENTRIES + 3) {
            record(d.path(), "python3 a.py", entry("t", &format!("experiment {i}"), &[&[0.01, 0.02, 0.0]]).unwrap()).unwrap();
        }
        record(d.path(), "python3 b.py", entry("t", "calibrate", &[&[0.01, 0.03]]).unwrap()).unwrap();
        let a = load(d.path(), "python3 a.py");
        assert_eq!(a.entries.len(), MAX_ENTRIES);
        assert_eq!(a.entries.last().unwrap().source, format!("experiment {}", MAX_ENTRIES + 2));
        assert_eq!(load(d.path(), "python3 b.py").entries.len(), 1);
        assert!(
            describe(&a, &rule(OnePhase::UntilOutlier)).contains("noise scale 1.00%"),
            "{}",
            describe(&a, &rule(OnePhase::UntilOutlier))
        );
    }

    #[test]
    fn a_mode_is_not_set_aside_as_outliers_but_gross_outliers_are() {
        // 61 pairs of runs with a spread of 0.5% within a mode, `slow(j)` of them `by` slower.
        let session = |slow: &dyn Fn(usize) -> bool, by: f64| -> (Vec<f64>, Vec<f64>) {
            let mut rng = crate::stats::rng::Rng::new(5);
            let runs: Vec<f64> = (0..122).map(|j| 0.005 * rng.normal() + if slow(j) { by } else { 0.0 }).collect();
            runs.chunks(2).map(|r| (r[0] - r[1], r[0] + r[1])).unzip()
        };
        // A two-mode machine whose calibration drew few mixed pairs (one run slow, one fast): 12
        // of 61, yet beyond 5 robust sds of the rest, which the trim reads as the whole machine.
        let (d, sums) = session(&|j| j % 10 == 3 || (j % 20 < 2 && j < 40), 0.06);
        let e = entry_runs("t", CALIBRATE_SOURCE, &[(&d, &sums)]).unwrap();
        assert!(e.modes.is_some_and(crate::stats::modes::shows_two), "{e:?}");
        assert_eq!((e.pairs, e.trimmed), (61, 0), "{e:?}");
        assert!(e.sd() > 0.02, "the mixed pairs are in the scale: {e:?}");
        assert_eq!(session_sd(&d, &sums), estimate(&[e]).map(|s| s.sd), "the simulator ranks by what is lent");
        // The same machine with two 3x runs besides: the mixed pairs stay, the gross ones go.
        let (d, sums) = session(&|j| j % 10 == 3 || (j % 20 < 2 && j < 40), 0.06);
        let (mut d, mut sums) = (d, sums);
        for i in [11, 37] {
            (d[i], sums[i]) = (d[i] + 1.1, sums[i] + 1.1);
        }
        let e = entry_runs("t", CALIBRATE_SOURCE, &[(&d, &sums)]).unwrap();
        assert!(e.modes.is_some_and(crate::stats::modes::shows_two), "{e:?}");
        assert_eq!(e.trimmed, 2, "{e:?}");
        assert!(e.sd() > 0.02 && e.sd() < 0.1, "{e:?}");
        // Three 3x runs in 61 pairs of one mode are gross outliers: they go.
        let (d, sums) = session(&|j| j % 40 == 7, 1.1);
        let e = entry_runs("t", CALIBRATE_SOURCE, &[(&d, &sums)]).unwrap();
        assert!(e.modes.is_some_and(|m| !crate::stats::modes::shows_two(m)), "{e:?}");
        assert_eq!(e.trimmed, 3, "{e:?}");
        assert!(e.sd() < 0.01, "{e:?}");
        assert_eq!(session_sd(&d, &sums), estimate(&[e]).map(|s| s.sd));
    }

    #[test]
    fn one_mode_told_before_later_sessions_ran_noisier_is_no_longer_taken_at_its_word() {
        // A session of `pairs` pairs at a pair sd of `sd`, its sums as spread, told or not.
        let session = |source: &str, pairs: usize, sd: f64, modes: Option<f64>| {
            let df = (pairs - 1) as f64;
            Entry {
                time: String::new(),
                source: source.into(),
                pairs,
                trimmed: 0,
                max_dev: 0.0,
                ss: sd * sd * df,
                df,
                sum_ss: sd * sd * df,
                sum_df: df,
                warmup: vec![],
                modes,
            }
        };
        let calibration = session(CALIBRATE_SOURCE, CALIBRATION_PAIRS, 0.01, Some(1.0));
        let quiet = session("experiment", 4, 0.01, None);
        let noisy = session("experiment", 4, 0.03, None);
        let told = |v: &[Entry]| borrowed(v).map(|b| (b.one_mode(), b.modes_pairs)).unwrap();
        // Later sessions as noisy as the calibration leave what it told.
        let mut v = vec![calibration.clone(), quiet.clone(), quiet.clone(), quiet.clone()];
        assert_eq!(told(&v), (true, CALIBRATION_PAIRS));
        // One session of 3 df at 3x its sd (F = 9 on 6 and 120 df with the sums) ends it: the
        // history no longer shows one mode, and the line says why.
        v.push(noisy.clone());
        assert_eq!(told(&v), (false, 0));
        let text = describe(&Benchmark { host: "h".into(), command: "c".into(), entries: v.clone() }, &rule(OnePhase::UntilOutlier));
        assert!(text.contains("ran noisier than it (F level 0.01)") && text.contains("until a session of 8 pairs or more"), "{text}");
        // A session long enough to tell, after the change, tells one mode on its own pairs only.
        v.push(session("experiment", 10, 0.03, Some(1.0)));
        assert_eq!(told(&v), (true, 10));
        // At 1.5x, one short session is within chance (F = 2.25 on 6 df: p > 0.01); several are not.
        let mild = session("experiment", 4, 0.015, None);
        let mut w = vec![calibration.clone(), mild.clone()];
        assert_eq!(told(&w), (true, CALIBRATION_PAIRS));
        w.extend([mild.clone(), mild.clone(), mild.clone(), mild]);
        assert_eq!(told(&w), (false, 0));
        // Where a session showed two modes the history says so, changed or not.
        let mut two = vec![calibration, session("experiment", 10, 0.03, Some(9.0)), noisy];
        assert_eq!(borrowed(&two).unwrap().modes, Some(1));
        two.remove(1);
        assert_eq!(borrowed(&two).unwrap().modes, None);
    }

    #[test]
    fn rotation_keeps_the_newest_calibration_while_experiments_come_and_go() {
        let d = tempfile::tempdir().unwrap();
        let add = |source: &str| record(d.path(), "python3 a.py", entry("t", source, &[&[0.01, 0.02, 0.0]]).unwrap()).unwrap();
        add(CALIBRATE_SOURCE);
        add("experiment 0");
        add(CALIBRATE_SOURCE);
        for i in 1..(2 * MAX_ENTRIES) {
            add(&format!("experiment {i}"));
        }
        let a = load(d.path(), "python3 a.py");
        assert_eq!(a.entries.len(), MAX_ENTRIES);
        // The newest calibration stays, oldest, beside the newest experiments; the older one went.
        assert_eq!(a.entries.iter().filter(|e| e.source == CALIBRATE_SOURCE).count(), 1);
        assert_eq!(a.entries[0].source, CALIBRATE_SOURCE);
        assert_eq!(a.entries[1].source, format!("experiment {}", MAX_ENTRIES + 1));
        assert_eq!(a.entries.last().unwrap().source, format!("experiment {}", 2 * MAX_ENTRIES - 1));
        // A new calibration replaces it: the old one rotates out like any entry.
        add(CALIBRATE_SOURCE);
        let a = load(d.path(), "python3 a.py");
        assert_eq!(a.entries.len(), MAX_ENTRIES);
        assert_eq!(a.entries.iter().filter(|e| e.source == CALIBRATE_SOURCE).count(), 1);
        assert_eq!(a.entries.last().unwrap().source, CALIBRATE_SOURCE);
    }

    #[test]
    fn entries_record_the_sums_spread_of_the_kept_pairs() {
        let d = [0.01, -0.012, 0.004, -0.003, 0.008, -0.009, 0.0, 0.011, -0.006, 1.1];
        let sums = [0.0, 0.02, 0.0, 0.02, 0.0, 0.02, 0.0, 0.02, 0.0, 5.0];
        let e = entry_runs("t", "calibrate", &[(&d, &sums)]).unwrap();
        // The 3x outlier pair is trimmed from both; of the 8 successive differences of 0.02
        // left, the first is the session's warm-up, recorded apart.
        assert_eq!((e.trimmed, e.sum_df), (1, 8.0 - WARMUP_STEPS as f64));
        assert!((e.sum_ss - (8 - WARMUP_STEPS) as f64 * 0.0004 / 2.0).abs() < 1e-15, "{e:?}");
        assert_eq!(e.warmup, vec![0.02; WARMUP_STEPS]);
        // Without sums (a history written before they were recorded): the log-ratios' spread alone.
        let plain = entry("t", "x", &[&d]).unwrap();
        assert_eq!((plain.sum_ss, plain.sum_df, plain.ss), (0.0, 0.0, e.ss));
    }

    #[test]
    fn an_old_noise_file_without_sums_still_loads_and_lends_its_scale() {
        let d = tempfile::tempdir().unwrap();
        // As written before the sum guard existed: no sum_ss / sum_df.
        let old = format!(
            r#"{{"version": 1, "benchmarks": [{{"host": "{}", "command": "python3 a.py", "entries": [
                {{"time": "t", "source": "calibrate", "pairs": 16, "trimmed": 0, "ss": 0.0015, "df": 15.0}}]}}]}}"#,
            host()
        );
        std::fs::write(path(d.path()), old).unwrap();
        let h = load(d.path(), "python3 a.py");
        let b = borrowed(&h.entries).expect("the old entry lends its scale");
        assert!((b.scale.sd - 0.01).abs() < 1e-12 && b.sums.is_none(), "{b:?}");
        // A new session with sums: the sums' scale needs MIN_DF of its own.
        record(d.path(), "python3 a.py", entry_runs("t", "calibrate", &[(&[0.01, -0.01, 0.0], &[0.0, 0.01, 0.0])]).unwrap()).unwrap();
        assert!(borrowed(&load(d.path(), "python3 a.py").entries).unwrap().sums.is_none());
        let s: Vec<f64> = (0..16).map(|i| if i % 2 == 0 { 0.0 } else { 0.01 }).collect();
        let r: Vec<f64> = (0..16).map(|i| if i % 3 == 0 { 0.01 } else { -0.005 }).collect();
        record(d.path(), "python3 a.py", entry_runs("t", "calibrate", &[(&r, &s)]).unwrap()).unwrap();
        let b = borrowed(&load(d.path(), "python3 a.py").entries).unwrap();
        // 2 and 15 successive differences, less each session's first (its warm-up).
        let sums = b.sums.expect("15 df of sums");
        assert_eq!(sums.df, 17.0 - 2.0 * WARMUP_STEPS as f64);
        // The file still reads as before for the old fields.
        assert!(std::fs::read_to_string(path(d.path())).unwrap().contains("\"sum_df\""));
    }
}
