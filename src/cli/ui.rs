//! The command line's text face: renders the core's [`Event`]s as the lines ratchet prints
//! (results on stdout, notes and run-by-run progress on stderr), with a progress bar when
//! stdout is a terminal.

use crate::cli::term;
use crate::events::{Event, Events, Question};
use crate::outcome::{Outcome, SweepOutcome};
use crate::printable::{self, line};
use crate::progress::{Estimate, SweepEta};
use crate::stats::noise::NoiseFloor;
use crate::stats::sequential::Params;
use crate::store::Status;
use crate::units::{fmt_duration, sig};
use crate::vcs::short;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::{IsTerminal, Stderr, Stdout, Write};

/// `writeln!` of a line made printable and fitted to `width` columns ([`fit`]), dropping an
/// error: output that cannot be written never fails an experiment (see `output`). `printable::block` here escapes whatever a field lets
/// through; the fields that must stay on one line (a message, a name) are `printable::line`d
/// where they are formatted, so they cannot start a line of their own.
macro_rules! say {
    ($w:expr, $width:expr; $($arg:tt)*) => {{
        for l in fit(&crate::printable::block(&format!($($arg)*)), $width) {
            let _ = writeln!($w, "{l}");
        }
    }};
}

/// How much the text face says (`--quiet`, `--verbose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Verbosity {
    /// Results only: no per-run progress, notes or hypothesis listing on stderr, no bar.
    Quiet,
    #[default]
    Normal,
    /// Every run's line, above the progress bar when one is drawn.
    Verbose,
}

static VERBOSITY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);

/// Set once from the command line; every [`Text::new`] after it follows it.
pub fn set_verbosity(v: Verbosity) {
    VERBOSITY.store(v as u8, std::sync::atomic::Ordering::Relaxed);
}

fn verbosity() -> Verbosity {
    match VERBOSITY.load(std::sync::atomic::Ordering::Relaxed) {
        0 => Verbosity::Quiet,
        2 => Verbosity::Verbose,
        _ => Verbosity::Normal,
    }
}

/// Renders events as text: results to `out`, notes and progress to `err`.
pub struct Text<O: Write = Stdout, E: Write = Stderr> {
    out: O,
    err: E,
    /// The session's bar; `None` outside a session.
    pb: Option<ProgressBar>,
    /// Whether a session draws a bar (stdout is a terminal) or prints a line per run.
    bars: bool,
    verbosity: Verbosity,
    /// Whether questions are put to the terminal (stdin and stderr): the terminal's face only.
    interactive: bool,
    /// What the bar says: the run in progress, the session's latest estimate, the sweep's.
    label: String,
    estimate: Option<Estimate>,
    sweep: Option<SweepEta>,
    /// The widest line printed: [`LINE_WIDTH`], or a narrower terminal's width.
    width: usize,
}

/// Without a bar, a progress line is printed each time the session's run time passes another
/// this many seconds: often enough to follow a long experiment, rare enough to read its runs.
const PLAIN_EVERY_S: f64 = 60.0;

impl Text {
    /// The terminal's: stdout and stderr, with a progress bar when stdout is a terminal.
    pub fn new() -> Text {
        let verbosity = verbosity();
        Text {
            out: std::io::stdout(),
            err: std::io::stderr(),
            pb: None,
            bars: verbosity != Verbosity::Quiet,
            verbosity,
            interactive: true,
            label: String::new(),
            estimate: None,
            sweep: None,
            width: screen_width(),
        }
    }
}

/// [`LINE_WIDTH`], or less where the terminal (or `COLUMNS`) is narrower; a pipe or a file gets
/// the full width (nothing wraps it).
fn screen_width() -> usize {
    let sized = std::env::var_os("COLUMNS").is_some() || std::io::stdout().is_terminal() || std::io::stderr().is_terminal();
    if sized {
        term::width().min(LINE_WIDTH)
    } else {
        LINE_WIDTH
    }
}

/// `text` as lines of at most `width` cells: as it is when it fits, else wrapped at words with
/// the continuation indented two more than the line.
fn fit(text: &str, width: usize) -> Vec<String> {
    if text.contains('\n') {
        return text.lines().flat_map(|l| fit(l, width)).collect();
    }
    if crate::units::cells(text) <= width {
        return vec![text.to_string()];
    }
    let indent = text.len() - text.trim_start().len();
    let first = crate::units::wrap(text.trim_start(), width - indent);
    let (head, rest) = first.split_first().expect("wrap returns a line");
    let more = crate::units::wrap(&rest.join(" "), width - indent - 2);
    let mut lines = vec![format!("{:indent$}{head}", "")];
    lines.extend(more.into_iter().filter(|l| !l.is_empty()).map(|l| format!("{:w$}{l}", "", w = indent + 2)));
    lines
}
impl Default for Text {
    fn default() -> Self {
        Text::new()
    }
}

impl<O: Write, E: Write> Text<O, E> {
    /// Into these writers, never with a progress bar (tests, logs).
    pub fn with_writers(out: O, err: E) -> Text<O, E> {
        Text {
            out,
            err,
            pb: None,
            bars: false,
            verbosity: Verbosity::Normal,
            interactive: false,
            label: String::new(),
            estimate: None,
            sweep: None,
            width: LINE_WIDTH,
        }
    }

    /// The same, fitting lines to `width` columns (a narrow terminal).
    pub fn with_width(mut self, width: usize) -> Self {
        self.width = width.clamp(40, LINE_WIDTH);
        self
    }

    /// The same, at another verbosity.
    pub fn with_verbosity(mut self, v: Verbosity) -> Self {
        self.verbosity = v;
        self
    }

    pub fn into_writers(self) -> (O, E) {
        (self.out, self.err)
    }
}

impl<O: Write, E: Write> Events for Text<O, E> {
    /// A question is answered on the terminal: asked on stderr, read from stdin (a line starting
    /// `y`); no terminal on either (a pipe, CI) means nobody to ask.
    fn ask(&mut self, question: &Question) -> Option<bool> {
        use std::io::{BufRead, IsTerminal};
        if !self.interactive || !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
            return None;
        }
        let err = &mut self.err;
        let mut ask = || {
            let _ = write!(err, "{}", printable::block(&question.text()));
            let _ = err.flush();
            let mut answer = String::new();
            std::io::stdin().lock().read_line(&mut answer).ok().map(|_| matches!(answer.trim(), "y" | "Y" | "yes"))
        };
        match &self.pb {
            Some(pb) => pb.suspend(ask),
            None => ask(),
        }
    }

    fn emit(&mut self, event: Event) {
        let quiet = self.verbosity == Verbosity::Quiet;
        if quiet && matches!(event, Event::Note { .. } | Event::RunRepeated { .. } | Event::CrossCheck { .. }) {
            return;
        }
        // What the hypothesis commits is in `ratchet show`'s diff; the default output is short.
        if self.verbosity != Verbosity::Verbose && matches!(event, Event::Hypothesis { .. }) {
            return;
        }
        let (o, e, width) = (&mut self.out, &mut self.err, self.width);
        match event {
            Event::Recovered { what } => above_bar(&self.pb, || say!(e, width; "recovered: {what}")),
            Event::Note { text } => {
                // A note's later lines (its own, then the wrapped) sit under its first.
                let indented: Vec<String> =
                    text.lines().enumerate().map(|(i, l)| if i == 0 { format!("note: {l}") } else { format!("  {l}") }).collect();
                above_bar(&self.pb, || say!(e, width; "{}", indented.join("\n")));
            }
            Event::Hypothesis { listing } => say!(e, width; "{}", line(&listing)),
            Event::ExperimentStarted { id, message, branch, candidate, incumbent, metric, params, elasticity, history, one_phase } => {
                let verbose = self.verbosity == Verbosity::Verbose;
                let shape = (&params, one_phase);
                for l in
                    experiment_header(id, &message, &branch, &candidate, &incumbent, &metric, shape, elasticity, &history, verbose, width)
                {
                    say!(o, width; "{l}");
                }
            }
            Event::SessionStarted { max_runs } => {
                if let Some(old) = self.pb.take() {
                    old.finish_and_clear();
                }
                let pb = if self.bars { progress_bar(max_runs as u64) } else { ProgressBar::hidden() };
                pb.set_length(max_runs as u64);
                self.estimate = None;
                self.label.clear();
                pb.set_message(fitted(&bar_message(&self.label, None, self.sweep.as_ref()), shown_width(&pb), max_runs as u64));
                self.pb = Some(pb);
            }
            Event::RunStarted { side, label, .. } => {
                self.label = format!("{label}: {}", side.as_str());
                if let Some(pb) = &self.pb {
                    let len = pb.length().unwrap_or(0);
                    pb.set_message(fitted(&bar_message(&self.label, self.estimate.as_ref(), self.sweep.as_ref()), shown_width(pb), len));
                }
            }
            Event::Progress(est) => {
                let plain = self.pb.as_ref().is_none_or(|pb| pb.is_hidden());
                if let Some(pb) = &self.pb {
                    pb.set_length(est.total as u64);
                    pb.set_message(fitted(&bar_message(&self.label, Some(&est), self.sweep.as_ref()), shown_width(pb), est.total as u64));
                }
                if !quiet && plain {
                    let before = self.estimate.as_ref().map_or(0.0, |p| p.elapsed_s);
                    let due = if est.done == 0 {
                        est.decisions > 0
                    } else {
                        (est.elapsed_s / PLAIN_EVERY_S).floor() > (before / PLAIN_EVERY_S).floor()
                    };
                    if due {
                        say!(e, width; "  {}", progress_line(&est));
                    }
                }
                self.estimate = Some(est);
            }
            Event::RunFinished { run, side, label, status, latency_ms, wall_s, .. } => {
                let plain = match &self.pb {
                    Some(pb) => {
                        if pb.length().is_some_and(|l| l <= run as u64) {
                            pb.inc_length(2);
                        }
                        pb.inc(1);
                        pb.is_hidden()
                    }
                    None => true,
                };
                let v = latency_ms.map(|l| format!("{l:.3} ms")).unwrap_or_else(|| status.as_str().to_string());
                let line = format!("  run {} {:<9} {} ({:.1} s) [{label}]", run, side.as_str(), v, wall_s);
                // Every run's line only when asked for (the bar, or a line a minute, says the
                // progress); above a drawn bar, which redraws below it.
                if self.verbosity == Verbosity::Verbose {
                    match &self.pb {
                        Some(pb) if !plain => pb.println(line),
                        _ => say!(e, width; "{line}"),
                    }
                }
            }
            Event::RunRepeated { run, side, attempt, max } => above_bar(
                &self.pb,
                || say!(e, width; "  run {} ({}) was throttled; running it again ({attempt}/{max})", run, side.as_str()),
            ),
            Event::CrossCheck { crashed, other } => above_bar(&self.pb, || {
                say!(
                    e, width;
                    "  the {} crashed; running the {} once to tell a broken set-up from a broken hypothesis",
                    crashed.as_str(),
                    other.as_str()
                )
            }),
            // Read by the progress estimate (`events::Tracking`); nothing to print.
            Event::RunsAhead { .. } => {}
            Event::SessionFinished => {
                if let Some(pb) = self.pb.take() {
                    pb.finish_and_clear();
                }
                self.estimate = None;
            }
            Event::ExperimentFinished { outcome } => {
                for l in experiment_summary(&outcome, self.verbosity == Verbosity::Verbose, width) {
                    say!(o, width; "{l}");
                }
            }
            Event::SweepStarted { branch, hypotheses, already_done, to_run, max_wall_s, max_runs } => {
                say!(
                    o, width;
                    "sweep: {hypotheses} hypotheses on {branch}, {already_done} already done, {to_run} to run{}",
                    budget_text(max_wall_s, max_runs)
                );
            }
            Event::HypothesisDone { index, total, name, id } => {
                say!(o, width; "\n[{}/{total}] {}: already done (experiment {id})", index + 1, line(&name))
            }
            Event::HypothesisStarted { index, total, name, elapsed_s } => {
                say!(o, width; "\n[{}/{total}] {} ({})", index + 1, line(&name), fmt_duration(elapsed_s))
            }
            Event::SweepProgress(eta) => {
                if let Some(line) = sweep_line(&eta) {
                    say!(o, width; "  {line}");
                }
                self.sweep = Some(eta);
            }
            Event::Unmeasured { row } => say!(o, width; "  {}: {}", row.status.as_str().to_uppercase(), row.note),
            Event::SweepFinished { outcome, runs, wall_s, gain } => {
                self.sweep = None;
                sweep_summary(o, width, &outcome, runs, wall_s, gain.as_deref())
            }
            Event::CalibrationStarted { pairs, commit, branch } => {
                say!(o, width; "calibrate: {pairs} A/A pairs of {} on {branch}, interleaved as an experiment", &commit[..commit.len().min(8)])
            }
            Event::CalibrationFinished { metric, noise, params, path } => calibration_summary(o, width, &metric, &noise, &params, &path),
            Event::NoiseHistory { text } => say!(o, width; "  {text}"),
            Event::TrialSubmitted { trial, name, slot, device, incumbent, recheck } => {
                let what = if recheck { "recheck against the head" } else { "trial" };
                let on = slot.map(|s| format!("slot {s}")).unwrap_or_else(|| "the engine".into());
                say!(o, width; "  {}: {what} {trial} on {on} ({}), incumbent {}", line(&name), line(&device), &incumbent[..incumbent.len().min(8)])
            }
            Event::TrialFinished { trial, name, slot, end, wall_s } => {
                let on = slot.map(|s| format!(" on slot {s}")).unwrap_or_default();
                say!(o, width; "  {}: trial {trial}{on} ended ({end}, {})", line(&name), fmt_duration(wall_s))
            }
            Event::StaleWinner { name, won_against, head } => say!(
                o, width;
                "  {}: won against {}, but the trunk moved to {}; it is measured again against the head before it may merge",
                line(&name),
                &won_against[..won_against.len().min(8)],
                &head[..head.len().min(8)]
            ),
        }
    }
}

/// Writes what `write` writes above a drawn bar, never under it: the bar's next redraw would
/// erase the line it was drawn over.
fn above_bar(pb: &Option<ProgressBar>, write: impl FnOnce()) {
    match pb {
        Some(pb) if !pb.is_hidden() => pb.suspend(write),
        _ => write(),
    }
}

fn progress_bar(total: u64) -> ProgressBar {
    if !std::io::stdout().is_terminal() {
        return ProgressBar::hidden();
    }
    let pb = ProgressBar::new(total);
    pb.set_style(bar_style(bar_cells(term::width())));
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb
}

/// The width a bar's message is fitted to: the terminal's for a drawn bar; a hidden one (no
/// terminal) keeps its whole message.
fn shown_width(pb: &ProgressBar) -> usize {
    if pb.is_hidden() {
        usize::MAX
    } else {
        term::width()
    }
}

/// The bar's own cells: narrower on a narrow terminal, to leave its message room.
fn bar_cells(width: usize) -> usize {
    if width >= 110 {
        24
    } else {
        12
    }
}

/// The bar's line; its message is cut by [`fitted`] so that the line never wraps.
fn bar_style(cells: usize) -> ProgressStyle {
    ProgressStyle::with_template(&format!("  {{spinner}} [{{elapsed_precise}}] {{bar:{cells}.cyan/blue}} run {{pos}}/{{len}} {{msg}}"))
        .expect("valid template")
        .progress_chars("=> ")
}

/// A run time: `0.42 s`, `9.1 s`, `75 s`.
fn secs(s: f64) -> String {
    if s < 10.0 {
        format!("{s:.2} s")
    } else if s < 100.0 {
        format!("{s:.1} s")
    } else {
        format!("{s:.0} s")
    }
}

/// What the bar's total is: the likely work (and the budget beside it), or the budget alone.
fn total_note(est: Option<&Estimate>) -> String {
    match est {
        Some(e) if e.decisions > 0 => format!("(likely; at most {})", e.max_runs),
        _ => "(at most)".into(),
    }
}

/// The bar's message cut to what a terminal `width` columns wide leaves beside the bar's fixed
/// part (with `len` runs, the position counted at `len`'s digits), one column spare: a wrapped
/// bar redraws over the lines above it.
fn fitted(msg: &str, width: usize, len: u64) -> String {
    let digits = len.max(1).to_string().len();
    // "  ⠋ [00:00:00] " + the bar + " run " + pos + "/" + len + " "
    let fixed = 15 + bar_cells(width) + 5 + 2 * digits + 1 + 1;
    crate::units::cut(msg, width.saturating_sub(fixed + 1))
}

/// The text beside the bar: what the total is, the time left, the run in progress and, in a
/// sweep, where the sweep stands. The sweep's time left is the hypotheses after this one plus
/// this experiment's own time left; its wall budget left counts down with this session's runs.
fn bar_message(label: &str, est: Option<&Estimate>, sweep: Option<&SweepEta>) -> String {
    let mut parts = vec![total_note(est)];
    if let Some(left) = est.and_then(|e| e.left_s) {
        parts.push(format!("~{} left", fmt_duration(left)));
    }
    if !label.is_empty() {
        parts.push(label.to_string());
    }
    if let Some(s) = sweep {
        let mut text = format!("sweep {}/{}", s.index + 1, s.total);
        if let (Some(after), Some(left)) = (s.after_this_s, est.and_then(|e| e.left_s)) {
            text.push_str(&format!(" ~{} left", fmt_duration(after + left)));
        }
        if let Some(w) = s.wall_left_s {
            let spent = est.map_or(0.0, |e| e.elapsed_s);
            text.push_str(&format!(", wall {} left", fmt_duration(w - spent)));
        }
        parts.push(text);
    }
    parts.join(" · ")
}

/// `the last decision`, `the last 5 decisions`.
fn last_decisions(n: usize) -> String {
    if n == 1 {
        "the last decision".into()
    } else {
        format!("the last {n} decisions")
    }
}

/// A plain line of a session's progress (no bar: not a terminal, or a log), short enough for
/// the experiment's output width.
fn progress_line(e: &Estimate) -> String {
    let time = match (e.left_s, e.secs_per_run) {
        (Some(left), Some(per)) => format!(", ~{} left at {} a run", fmt_duration(left), secs(per)),
        _ => String::new(),
    };
    // With no decisions on record the likely total is the budget: "at most N" says both.
    let of =
        if e.total == e.max_runs { format!("at most {} runs", e.max_runs) } else { format!("{} runs (at most {})", e.total, e.max_runs) };
    if e.done == 0 {
        let basis = if e.total == e.max_runs { String::new() } else { format!(", the median of {}", last_decisions(e.decisions)) };
        format!("expecting {of}{basis}{time}")
    } else {
        format!("progress: {} of {of} in {}{time}", e.done, fmt_duration(e.elapsed_s))
    }
}

/// The sweep's line under a hypothesis's header: done of total, elapsed, the time left at its
/// pace, and with `--max-wall` the time left before the wall. `None` when there is nothing to
/// estimate from and no wall budget.
fn sweep_line(s: &SweepEta) -> Option<String> {
    let mut text = format!("sweep: {}/{} done in {}", s.total - s.left, s.total, fmt_duration(s.elapsed_s));
    match (s.left_s, s.runs_per_hypothesis, s.secs_per_run) {
        (Some(left), Some(runs), Some(per)) => {
            let basis = if s.measured > 0 { "this sweep".to_string() } else { format!("last {} decisions", s.decisions) };
            text.push_str(&format!("; {} more ~{} ({runs:.1} runs x {}, {basis})", s.left, fmt_duration(left), secs(per)));
        }
        _ if s.wall_left_s.is_none() => return None,
        _ => {}
    }
    if let Some(w) = s.wall_left_s {
        text.push_str(&format!("; wall {} left", fmt_duration(w)));
        if let Some(n) = s.wall_fits {
            text.push_str(&format!(", time for {n} more"));
        }
    }
    Some(text)
}

/// The widest line an experiment's default output prints (its header may be cut to it).
pub const LINE_WIDTH: usize = 100;

/// An experiment's header: what is measured against what, on which metric, in how many pairs at
/// most; `-v` adds the plan and where the noise scale comes from.
#[allow(clippy::too_many_arguments)]
fn experiment_header(
    id: u64,
    message: &str,
    branch: &str,
    candidate: &str,
    incumbent: &str,
    metric: &str,
    (p, one_phase): (&Params, Option<usize>),
    elasticity: f64,
    history: &str,
    verbose: bool,
    width: usize,
) -> Vec<String> {
    let most = one_phase.unwrap_or_else(|| p.max_total_pairs());
    let mut lines = vec![
        crate::units::cut(&format!("experiment {id}: {}", line(message)), width),
        crate::units::cut(
            &format!(
                "  candidate {} vs incumbent {} on {}: {metric}, up to {most} interleaved pairs",
                short(candidate),
                short(incumbent),
                line(branch)
            ),
            width,
        ),
    ];
    if !verbose {
        return lines;
    }
    let plan = match one_phase {
        Some(n) if p.robust.is_some() => format!(
            "one likelihood ratio after every pair (no gain fitted at its best: any noise, outlier pairs, two modes of runs), up to {n} pairs, then their t-test"
        ),
        // The likelihood ratio decides: the two phases' plan is only its fallback.
        Some(n) => format!(
            "a likelihood ratio of whole pairs after every pair, up to {n} pairs{}",
            if p.likelihood_ratio == crate::stats::sequential::OnePhase::UntilOutlier {
                format!(
                    " (the two phases' {} to {} pairs if one of the first {} is a gross outlier)",
                    p.min_pairs, p.max_pairs, p.max_pairs
                )
            } else {
                String::new()
            }
        ),
        None => {
            let mut plan = if p.min_pairs == p.max_pairs {
                format!("{} interleaved pairs", p.max_pairs)
            } else {
                format!("{} to {} interleaved pairs, a look every {}", p.min_pairs, p.max_pairs, p.look_every)
            };
            if p.confirm {
                plan += &format!(", a keep confirmed by {} pairs in reversed order", p.confirm_pairs);
            }
            if p.rescues() {
                plan += &format!(", an undecided one measured on to {} pairs for the rescue's t-test", p.max_total_pairs());
            }
            plan
        }
    };
    lines.push(format!("  plan: {plan}"));
    lines.push(format!(
        "  minimum effect {}% speed-up (latency terms{}); {history}",
        p.min_effect_pct,
        if elasticity != 1.0 {
            format!(": {:.2}% of {metric}", crate::stats::metric_pct(p.min_effect_pct, elasticity))
        } else {
            String::new()
        },
    ));
    lines
}

/// A path as the user can type it from here: relative to the working directory when under it.
fn from_here(p: &std::path::Path) -> String {
    let rel = std::env::current_dir().ok().and_then(|cwd| p.strip_prefix(cwd).ok().map(|r| r.to_path_buf()));
    printable::path(rel.as_deref().filter(|r| !r.as_os_str().is_empty()).unwrap_or(p))
}

/// The lines that close an experiment: the verdict with its one speed-up and interval (the
/// row's: every view shows the same), the roofline's figures, what was kept or where the
/// reverted hypothesis is, and where the evidence is. `-v` adds the test's reasoning and the
/// other estimates, each named.
fn experiment_summary(oc: &Outcome, verbose: bool, width: usize) -> Vec<String> {
    let row = &oc.row;
    let verdict = row.status.as_str().to_uppercase();
    let mut lines = vec![];
    match &oc.decision {
        Some(d) => {
            let level = crate::stats::fmt_level(row.ci_level_pct.unwrap_or(d.ci_level * 100.0));
            let effect = match crate::report::speedup(row) {
                Some((x, Some((lo, hi)))) => format!("speed-up {} [{level}% CI {lo:.2}-{hi:.2}]", crate::report::fmt_x(x)),
                Some((x, None)) => format!("speed-up {}", crate::report::fmt_x(x)),
                None => "no speed-up measured".into(),
            };
            // Every pair the estimate is made of; -v says which phase measured which.
            let confirming = d.confirmation.as_ref().map_or(0, |c| c.pairs);
            let total = d.total_pairs();
            let mut phases = format!("{} pairs", d.pairs);
            if confirming > 0 {
                phases += &format!(" + {confirming} confirming");
            }
            if d.rescue_pairs() > 0 {
                phases += &format!(" + {} rescue", d.rescue_pairs());
            }
            let noisy = if crate::report::too_noisy(row) { ", too noisy to tell" } else { "" };
            // A rescue's keep: its estimate, interval and p read the pairs it did not set aside.
            let over = match d.rescue.as_ref().filter(|r| d.procedure == crate::stats::Procedure::Rescue && r.set_aside > 0) {
                Some(r) => format!(
                    "{} of {} pairs ({} outlier{} set aside)",
                    r.pairs - r.set_aside,
                    r.pairs,
                    r.set_aside,
                    if r.set_aside == 1 { "" } else { "s" }
                ),
                None => format!("{total} pairs"),
            };
            lines.push(format!("  {verdict}: {effect}, p = {} over {over}{noisy}", crate::stats::fmt_p(d.p_value)));
            if verbose {
                // The robust ratio's p holds at every look (Ville's inequality): nothing to adjust.
                let adjusted = if d.procedure == crate::stats::Procedure::RobustRatio {
                    format!("valid at each of {} look{}", d.looks, if d.looks == 1 { "" } else { "s" })
                } else {
                    format!("{} adjusted for {} look{}", crate::stats::fmt_p(d.p_adjusted), d.looks, if d.looks == 1 { "" } else { "s" })
                };
                lines.push(format!(
                    "  why: {phases}; p = {} (<= {} to count; {adjusted}), {} noise scale ({:.2}% per pair{}): {}",
                    crate::stats::fmt_p(d.p_value),
                    crate::stats::fmt_p(d.p_threshold),
                    d.scale,
                    d.noise_sd_pct,
                    match row.borrowed_sd_pct {
                        // A history was there and the deciding look fell back to the pairs' own
                        // scale (they were noisier than it): say so, so the two scales agree.
                        Some(h) if d.scale == "own" => format!("; the history's {h:.2}% was not used at the deciding look"),
                        _ => String::new(),
                    },
                    row.note
                ));
                if let Some(l) = crate::report::confirmation_line(row) {
                    lines.push(format!("  {l}"));
                }
            }
        }
        None => {
            lines.push(crate::units::cut(&format!("  {verdict}: {}", line(row.note.lines().next().unwrap_or(""))), width));
            // The rest (a crash's stderr tail) is `show`'s and -v's.
            if verbose {
                lines.extend(row.note.lines().skip(1).map(|l| format!("    {}", line(l))));
            }
        }
    }
    if verbose {
        if let (Some(v), Some(iv)) = (row.value, row.incumbent_value) {
            lines.push(format!("  {}: incumbent {} -> candidate {}", row.metric, sig(iv, 4), sig(v, 4)));
        }
    }
    // The roofline's figures, each with the rank it keeps on a narrow line: the latency, the
    // regime and the gap say the most; the intensity and bandwidth share go first.
    let mut figs: Vec<(u8, String)> = vec![];
    if let Some(l) = row.latency_ms {
        figs.push((0, format!("{} ms ({})", crate::report::figures(l, 4), row.latency_source.as_deref().unwrap_or("?"))));
    }
    if let Some(u) = row.util_pct {
        figs.push((3, format!("util {u:.1}%")));
    }
    if let Some(t) = row.tflops {
        figs.push((4, format!("{} TFLOP/s", crate::report::figures(t, 3))));
    }
    if let Some(i) = row.intensity {
        figs.push((6, format!("{} FLOP/B", crate::report::figures(i, 3))));
    }
    if let Some(b) = row.bw_pct {
        figs.push((5, format!("BW {b:.1}%")));
    }
    if let Some(r) = &row.regime {
        figs.push((1, r.clone()));
    }
    if let Some(g) = row.gap_ms {
        figs.push((2, format!("gap {} ms", crate::report::figures(g, 3))));
    }
    // Whole figures only (a cut one reads as another number): the lowest-ranked go until the
    // line fits; `show` has them all.
    let join = |figs: &[(u8, String)]| format!("  {}", figs.iter().map(|(_, f)| f.as_str()).collect::<Vec<_>>().join(" | "));
    let mut roof = join(&figs);
    while crate::units::cells(&roof) > width && figs.len() > 1 {
        let last = figs.iter().enumerate().max_by_key(|(_, (rank, _))| *rank).map(|(i, _)| i).expect("figures");
        figs.remove(last);
        roof = join(&figs);
    }
    if !figs.is_empty() {
        lines.push(crate::units::cut(&roof, width));
    }
    if verbose {
        if let (Some(dot), Some(exp), Some(red), Some(copy)) = (row.hlo_dot, row.hlo_exp, row.hlo_reduce, row.hlo_copy) {
            // Copies that carry a while loop's state are the loop's, not defensive copies.
            let loops = row.hlo_loop_copy.unwrap_or(0).min(copy);
            let warn = if copy > loops { "  (copies: possibly defensive copies from aliasing; see `ratchet inspect`)" } else { "" };
            let of_loops = if loops > 0 { format!(" ({loops} while-loop state)") } else { String::new() };
            lines.push(format!("  HLO: {dot} dot, {exp} exponential, {red} reduce, {copy} copy{of_loops}{warn}"));
        }
        if !row.kernel_ops.is_empty() {
            lines.push(format!("  kernel body: {}", line(&row.kernel_ops.replace(';', ", ").replace('=', " "))));
        }
    }
    let show = format!("ratchet show {}", row.id);
    let mut end = if let Some(r) = &oc.discarded_ref {
        if verbose {
            lines.push(format!("  git show {r} shows the hypothesis; ratchet retry {} re-applies it", row.id));
        }
        format!("  reverted to {}; the hypothesis is at {r} · {show}", short(&row.incumbent))
    } else if row.status == Status::Keep {
        format!("  kept {} as the new incumbent · {show}", short(&row.commit))
    } else {
        format!("  evidence: {show}")
    };
    // An unconfirmed gain is settled by twice the pairs it had: the retry takes the place of
    // the ref it re-applies the hypothesis from (-v names the ref).
    if let Some(d) = oc.decision.as_ref().filter(|_| row.status == Status::Unconfirmed) {
        let settle = format!("to settle it: ratchet retry {} --pairs {}", row.id, 2 * d.total_pairs().max(8));
        end = format!("  reverted to {} · {show} · {settle}", short(&row.incumbent));
    }
    // The runs' folder where the line has room for it (always with -v); `show` names it too.
    let with_runs = oc.runs_dir.as_ref().map(|dir| format!("{end} · runs: {}", from_here(dir)));
    lines.push(match with_runs {
        Some(l) if verbose || crate::units::cells(&l) <= width => l,
        _ => end,
    });
    lines
}

fn budget_text(max_wall_s: Option<f64>, max_runs: Option<u64>) -> String {
    let mut parts = vec![];
    if let Some(w) = max_wall_s {
        parts.push(format!("wall time {}", fmt_duration(w)));
    }
    if let Some(r) = max_runs {
        parts.push(format!("{r} runs"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; budget: {}", parts.join(", "))
    }
}

fn sweep_summary(o: &mut impl Write, width: usize, out: &SweepOutcome, runs: u64, wall: f64, gain: Option<&str>) {
    say!(o, width; "\nsweep summary");
    for r in &out.rows {
        // Speed-up first ("+1204% score" reads wrong), the metric's change beside it.
        let effect = match crate::report::speedup_line(r) {
            Some(line) => line,
            None => line(r.note.lines().next().unwrap_or("")).chars().take(70).collect(),
        };
        let name = line(r.hypothesis.split('@').next().unwrap_or(""));
        // A table's row is cut, not wrapped: its columns stay aligned.
        let row = format!("  {:>4}  {:<11} {:<28} {effect}", r.id, r.status.as_str(), name);
        say!(o, width; "{}", crate::units::cut(&row, width));
    }
    // Every status counted (no-op and inconclusive included), so the parts add up to the rows.
    let counts = crate::report::status_counts(&out.rows);
    say!(
        o, width;
        "  {} experiments this sweep ({}); {} already done; {runs} benchmark runs in {}",
        out.rows.len(),
        if counts.is_empty() { "none".to_string() } else { counts },
        out.already_done,
        fmt_duration(wall)
    );
    if let Some(why) = &out.stopped_by {
        say!(o, width; "  stopped by the {why}; {} hypotheses not started (run the sweep again to go on)", out.not_started);
    }
    if let Some(line) = gain {
        say!(o, width; "  {line}");
    }
    say!(o, width; "  review: ratchet results | ratchet show ID | ratchet plot");
}

fn calibration_summary(o: &mut impl Write, width: usize, metric: &str, f: &NoiseFloor, params: &Params, out: &std::path::Path) {
    let interval = f.pair_cv_interval_pct.map(|[lo, hi]| format!(" [{lo:.2}, {hi:.2}] (90% interval, {} df)", f.df)).unwrap_or_default();
    say!(
        o, width;
        "  {} runs of {metric}: run-to-run CV {:.2}%{interval} in speed-up terms (from the pairs; {:.2}% over all runs)",
        f.runs,
        f.pair_cv_pct,
        f.run_cv_pct
    );
    if (f.df as f64) < crate::stats::history::MIN_DF {
        say!(
            o, width;
            "  note: {} pairs give {} df, too few to know the noise: the CV, the detectable gain and the suggestion below are \
             rough, and decisions will not borrow this scale (they need {:.0} df; 16 pairs give 15)",
            f.pairs,
            f.df,
            crate::stats::history::MIN_DF
        );
    }
    say!(o, width; "  drift {:+.3}%/run over the session; A/A difference {:+.2}% (should be near 0)", f.drift_pct_per_run, f.aa_effect_pct);
    say!(
        o, width;
        "  smallest gain the budget keeps with ~95% probability: {:.2}% ({}; at the decisions' scale, {:.2}% a pair, \
         gross outliers set aside)",
        f.detectable_pct,
        crate::stats::noise::budget_words(params, f.keep_at),
        f.deciding_sd_pct
    );
    say!(o, width; "  suggested [decision] min_effect_pct = {:.1}", f.suggested_min_effect_pct);
    if f.suggested_min_effect_pct > params.min_effect_pct {
        say!(
            o, width;
            "  note: min_effect_pct {} is below what this budget can see; raise it, or raise {}",
            params.min_effect_pct,
            budget_keys(params)
        );
    }
    say!(o, width; "  wrote {}", printable::path(out));
}

/// The `[decision]` keys that set the rule's budget: the robust ratio reads one, the earlier
/// rule its two phases'.
fn budget_keys(params: &Params) -> &'static str {
    if params.robust.is_some() {
        "[decision] pairs"
    } else {
        "[decision] max_pairs and confirm_pairs"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::{RunStatus, Side};

    #[test]
    fn the_budget_note_names_the_keys_the_rule_in_use_reads() {
        let robust = crate::config::DecisionConfig::default().params(None);
        assert!(robust.robust.is_some());
        assert_eq!(budget_keys(&robust), "[decision] pairs");
        let earlier = crate::config::DecisionConfig::earlier().params(None);
        assert_eq!(budget_keys(&earlier), "[decision] max_pairs and confirm_pairs");
    }

    #[test]
    fn the_sweep_summary_counts_every_status() {
        let row = |id, s| crate::store::ResultRow::unmeasured(id, s, "m", String::new(), String::new());
        let out = SweepOutcome {
            rows: vec![row(1, Status::Keep), row(2, Status::NoOp), row(3, Status::Inconclusive), row(4, Status::Revert)],
            already_done: 0,
            not_started: 0,
            stopped_by: None,
        };
        let mut o = Vec::new();
        sweep_summary(&mut o, LINE_WIDTH, &out, 8, 1.0, None);
        let text = String::from_utf8(o).unwrap();
        assert!(text.contains("4 experiments this sweep (1 kept, 1 reverted, 1 inconclusive, 1 no-op)"), "{text}");
    }

    #[test]
    fn the_bar_never_wraps_at_any_width() {
        use indicatif::{InMemoryTerm, ProgressDrawTarget};
        // A message as long as a sweep's (about 130 columns), on 80, 110 and 60 columns.
        let label = "confirmation pair 12: candidate · sweep 3/5 ~2 h 10 min left, wall 1 h 05 min left · (likely; at most 44)";
        for cols in [60u16, 80, 110] {
            let term = InMemoryTerm::new(4, cols);
            let pb = ProgressBar::with_draw_target(Some(44), ProgressDrawTarget::term_like(Box::new(term.clone())));
            pb.set_style(bar_style(bar_cells(cols as usize)));
            pb.set_position(7);
            pb.set_message(fitted(&bar_message(label, None, None), cols as usize, 44));
            pb.tick();
            let shown = term.contents();
            let rows: Vec<&str> = shown.lines().filter(|l| !l.trim().is_empty()).collect();
            assert_eq!(rows.len(), 1, "{cols} columns: the bar took {} rows:\n{shown}", rows.len());
            assert!(rows[0].contains("run 7/44"), "{shown}");
            assert!(crate::units::cells(rows[0]) <= cols as usize, "{shown}");
        }
    }

    fn said(v: Verbosity) -> (String, String) {
        let mut t = Text::with_writers(Vec::new(), Vec::new()).with_verbosity(v);
        t.emit(Event::Note { text: "a note".into() });
        t.emit(Event::Hypothesis { listing: "hypothesis: 1 file".into() });
        t.emit(Event::SessionStarted { max_runs: 2 });
        t.emit(Event::RunFinished {
            run: 0,
            side: Side::Candidate,
            label: "pair 1".into(),
            status: RunStatus::Ok,
            latency_ms: Some(8.0),
            value: Some(8.0),
            wall_s: 0.5,
        });
        t.emit(Event::SessionFinished);
        t.emit(Event::Recovered { what: "rolled back experiment 3".into() });
        let (o, e) = t.into_writers();
        (String::from_utf8(o).unwrap(), String::from_utf8(e).unwrap())
    }

    fn finished(run: usize, wall_s: f64) -> Event {
        let label = format!("pair {}", run / 2 + 1);
        Event::RunFinished { run, side: Side::Candidate, label, status: RunStatus::Ok, latency_ms: Some(8.0), value: Some(8.0), wall_s }
    }

    /// A session of 38 runs at most that five past decisions of median 12 runs (at 10 s a run)
    /// say will likely take 12, with these runs' times.
    fn session(t: &mut Text<Vec<u8>, Vec<u8>>, run_secs: &[f64]) {
        use crate::events::Tracking;
        use crate::progress::{Plan, Record};
        let plan = Plan::new(38, &Record { decisions: 5, runs_per_decision: Some(12.0), secs_per_run: Some(10.0) });
        let mut tracked = Tracking::new(t, plan);
        tracked.emit(Event::SessionStarted { max_runs: 38 });
        for (run, &s) in run_secs.iter().enumerate() {
            tracked.emit(Event::RunStarted { run, side: Side::Candidate, label: format!("pair {}", run / 2 + 1) });
            tracked.emit(finished(run, s));
        }
    }

    #[test]
    fn the_bar_counts_to_the_likely_total_with_the_time_left() {
        let mut t = Text::with_writers(Vec::new(), Vec::new());
        session(&mut t, &[20.0, 30.0, 25.0]);
        let pb = t.pb.as_ref().unwrap();
        // 3 of the likely 12 runs (not the 38 of the budget), 9 left at this experiment's 25 s.
        assert_eq!((pb.position(), pb.length()), (3, Some(12)));
        assert_eq!(pb.message(), "(likely; at most 38) · ~3m45s left · pair 2: candidate");
        // Past the likely total it grows a pair at a time.
        let mut t = Text::with_writers(Vec::new(), Vec::new());
        session(&mut t, &[1.0; 13]);
        assert_eq!(t.pb.as_ref().unwrap().length(), Some(14));
    }

    #[test]
    fn in_a_sweep_the_bar_adds_the_sweeps_time_left_and_its_wall() {
        let mut t = Text::with_writers(Vec::new(), Vec::new());
        let rec = crate::progress::Record { decisions: 5, runs_per_decision: Some(12.0), secs_per_run: Some(10.0) };
        // The third of 5 hypotheses, 3 left, 10 minutes in of a 1 h wall, at 120 s a hypothesis.
        t.emit(Event::SweepProgress(crate::progress::sweep_eta(2, 5, 3, 600.0, &[], &rec, Some(3600.0))));
        session(&mut t, &[20.0, 20.0]);
        // After this one, 2 x 120 s; this one has 10 runs left at 20 s; the wall less its 40 s.
        let msg = t.pb.as_ref().unwrap().message();
        assert!(msg.ends_with(" · sweep 3/5 ~7m20s left, wall 49m20s left"), "{msg}");
        let (out, _) = t.into_writers();
        let out = String::from_utf8(out).unwrap();
        assert_eq!(out, "  sweep: 2/5 done in 10m00s; 3 more ~6m00s (12.0 runs x 10.0 s, last 5 decisions); wall 50m00s left\n");
    }

    #[test]
    fn without_a_bar_a_progress_line_comes_at_the_start_and_each_minute_of_runs() {
        let mut t = Text::with_writers(Vec::new(), Vec::new());
        session(&mut t, &[25.0, 25.0, 25.0, 25.0, 25.0]);
        let (_, err) = t.into_writers();
        let lines: Vec<String> = String::from_utf8(err).unwrap().lines().filter(|l| !l.starts_with("  run ")).map(String::from).collect();
        // Runs end at 25, 50, 75, 100 and 125 s: a line as the 1st and the 2nd minute pass.
        assert_eq!(
            lines,
            [
                "  expecting 12 runs (at most 38), the median of the last 5 decisions, ~2m00s left at 10.0 s a run",
                "  progress: 3 of 12 runs (at most 38) in 1m15s, ~3m45s left at 25.0 s a run",
                "  progress: 5 of 12 runs (at most 38) in 2m05s, ~2m55s left at 25.0 s a run",
            ]
        );
        assert!(lines.iter().all(|l| l.chars().count() <= LINE_WIDTH), "{lines:?}");
        // Quiet says none of it.
        let mut q = Text::with_writers(Vec::new(), Vec::new()).with_verbosity(Verbosity::Quiet);
        session(&mut q, &[25.0; 5]);
        assert!(q.into_writers().1.is_empty());
    }

    #[test]
    fn quiet_drops_progress_and_notes_but_not_recoveries() {
        let (_, normal) = said(Verbosity::Normal);
        // The default keeps notes and recoveries; the listing and each run's line are for -v.
        assert!(normal.contains("note: a note") && normal.contains("recovered:"), "{normal}");
        assert!(!normal.contains("hypothesis: 1 file") && !normal.contains("run 0 candidate"), "{normal}");
        let (_, verbose) = said(Verbosity::Verbose);
        // Run 0 is run 0 in runs.jsonl, `show` and its directory too.
        assert!(verbose.contains("hypothesis: 1 file") && verbose.contains("run 0 candidate"), "{verbose}");
        let (_, quiet) = said(Verbosity::Quiet);
        assert_eq!(quiet, "recovered: rolled back experiment 3\n");
    }
}
