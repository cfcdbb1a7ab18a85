//! The command line (clap derive): `ratchet "message"` runs an experiment; subcommands set up,
//! show results and inspect traces.

use crate::report::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// A git-backed optimization ratchet for accelerator kernels: commit a change as a hypothesis,
/// benchmark it against the incumbent, keep it only if it is a real gain.
#[derive(Debug, Parser)]
#[command(name = "ratchet", version, args_conflicts_with_subcommands = true, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    #[command(flatten)]
    pub experiment: ExperimentArgs,
    /// When to colour the output (auto: on a terminal, unless NO_COLOR is set or TERM=dumb).
    #[arg(long, value_enum, value_name = "WHEN", default_value = "auto", global = true)]
    pub color: crate::cli::term::ColorChoice,
    /// Print only results: no per-run progress, notes or listing of what a hypothesis commits
    /// (errors still go to stderr).
    #[arg(long, short = 'q', global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print every run's line even where a progress bar is drawn (on a terminal).
    #[arg(long, short = 'v', global = true)]
    pub verbose: bool,
}

pub const EXIT_CODES: &str = "Exit codes:
  0    the experiment ran to a decision (keep, revert, inconclusive, no-op, crash, timeout, invalid alike)
  1    failure (I/O, the incumbent's benchmark failing, ...)
  2    usage error
  3    configuration error (ratchet.toml, or a malformed hypothesis file)
  4    unsafe repository state (detached HEAD, merge in progress, nothing to test)
  5    another ratchet holds the repository's lock
  6    the machine or set-up failed, not the hypothesis: nothing committed or recorded
  7    ratchet gate: the head commit is a significant regression beyond the threshold
  130  interrupted (SIGINT/SIGTERM/SIGHUP): the hypothesis was reverted and recorded";

#[derive(Debug, Args, Default)]
pub struct ExperimentArgs {
    /// The hypothesis, e.g. "experiment: bump BQ to 512" (a trailing " --deep" means --deep).
    pub message: Option<String>,
    #[command(flatten)]
    pub flags: ExperimentFlags,
    #[command(flatten)]
    pub repo: RepoArg,
}

/// How to run one experiment (`ratchet MESSAGE` and `ratchet run MESSAGE` alike).
#[derive(Debug, Args, Default, Clone)]
pub struct ExperimentFlags {
    /// Capture continuous-profiling snapshots for a before/after comparison.
    #[arg(long)]
    pub deep: bool,
    /// Allow a clean working tree: commit an empty hypothesis to re-measure HEAD.
    #[arg(long)]
    pub allow_empty: bool,
    /// The budget of interleaved incumbent/candidate pairs (overrides [decision] pairs).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// JSON lines on stdout (docs/json.md): one `run` event per benchmark run, then the
    /// `decision` object (or an `error` object); the text goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// Commit untracked files over 1 MiB or binary ones too (refused otherwise, asked on a terminal).
    #[arg(long)]
    pub allow_large: bool,
}

#[derive(Debug, Args, Default, Clone)]
pub struct RepoArg {
    /// Run as if started in DIR.
    #[arg(short = 'C', long = "repo", value_name = "DIR", global = true)]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run one experiment (same as `ratchet MESSAGE`).
    Run(RunArgs),
    /// Write a commented ratchet.toml for this repo.
    Init(InitArgs),
    /// Print the results table.
    Results(ResultsArgs),
    /// Show ratchet's state here: the incumbent, a running or unfinished experiment and what
    /// recovery will do about it (status only reports), the last result.
    Status(StatusArgs),
    /// Finish or roll back what a dead ratchet left: an unfinished experiment, a sweep's edit in
    /// flight, an orphaned benchmark (the next experiment or sweep does this by itself too).
    Recover,
    /// Run a queue of hypothesis files (default: experiments/*.toml) unattended, each as an
    /// experiment on top of what the previous ones kept; resumable, with a budget.
    Sweep(SweepArgs),
    /// Everything about one experiment: decision, metrics, diff, runs, HLO, op breakdown, traces.
    Show(ShowArgs),
    /// Draw the score staircase and the roofline chart (PNG + SVG), and an HTML report.
    Plot(PlotArgs),
    /// Read a trace (an .xplane.pb, a profile directory or a run directory) and print the
    /// article-style diagnosis: regime, intensity, time decomposition, HLO counts, op breakdown.
    Inspect(InspectArgs),
    /// Measure the noise floor: A/A runs of HEAD against itself, interleaved as an experiment
    /// would; prints the run-to-run CV, the drift, the smallest gain the configured budget can
    /// detect and a suggested min_effect_pct. Writes results/calibration.json only.
    Calibrate(CalibrateArgs),
    /// CI gate: measure a commit against a base in throw-away detached checkouts (interleaved
    /// pairs, the experiments' statistics), print a Markdown summary (also appended to
    /// $GITHUB_STEP_SUMMARY) and exit 7 on a significant regression beyond the threshold.
    /// Commits, resets and records nothing; works on a detached HEAD.
    Gate(GateArgs),
    /// Put a reverted experiment's parked change (refs/ratchet/discarded/ID) back into the
    /// working tree, uncommitted; with --run or --pairs, run it again at once.
    Retry(RetryArgs),
    /// Recompute recorded decisions from the records alone: each decided row's runs
    /// (results/runs.jsonl) and its rule (results/decisions.jsonl) go through the sequential
    /// test again; exits 1 when one decides otherwise than its row says.
    Replay(ReplayArgs),
    /// Free disk under .ratchet/: remove the run directories (traces) of experiments that were
    /// neither kept nor among the last N; results.csv and runs.jsonl are never touched.
    Gc(GcArgs),
    /// Print a shell completion script: ratchet completions bash > /etc/bash_completion.d/ratchet
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff): ratchet man > ratchet.1, or a subcommand's, which the main
    /// page lists as ratchet-NAME(1): ratchet man show > ratchet-show.1
    Man {
        /// The subcommand whose page to print (default: the main page).
        #[arg(value_name = "SUBCOMMAND")]
        subcommand: Option<String>,
    },
    /// Print the directory holding the ratchet_bench helper (written there first), to run
    /// prepare.py by hand: PYTHONPATH=$(ratchet pythonpath) python3 prepare.py
    Pythonpath,
    /// For engines and scripts: measure --candidate against --incumbent on this
    /// machine's device in interleaved pairs with the experiments' stopping rule, and write a run
    /// directory (trial.json last); decides, commits and records nothing. See docs/scale-out.md.
    Worker(WorkerArgs),
}

#[derive(Debug, Args)]
pub struct WorkerArgs {
    // The repository holding both commits is the global `--repo R` (required here): a work tree
    // or a bare repository (only read), or a git bundle.
    /// The incumbent's full commit id.
    #[arg(long, value_name = "SHA")]
    pub incumbent: String,
    /// The candidate's full commit id.
    #[arg(long, value_name = "SHA")]
    pub candidate: String,
    /// The run directory to fill (runs/, runs.jsonl, traces.json, worker.pid, trial.json).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// The trial's id, as its runs name it (default: the --out directory's name).
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// ratchet.toml to use (default: the one in the incumbent's checkout).
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Pairs budget, as `ratchet --pairs`.
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// The noise scale to borrow (SD,DF of one pair's log-ratio), as the controller's history gives it.
    #[arg(long, value_name = "SD,DF")]
    pub noise_scale: Option<String>,
    /// The history's spread of the pairs' log-sums (SD,DF), read by the variance guard beside
    /// --noise-scale.
    #[arg(long, value_name = "SD,DF")]
    pub sums_scale: Option<String>,
    /// A stale winner's recheck (recorded; it decides with the same rule as any trial).
    #[arg(long)]
    pub recheck: bool,
    /// Continuous-profiling snapshots in every run.
    #[arg(long)]
    pub deep: bool,
}

#[derive(Debug, Args)]
pub struct GateArgs {
    /// The base to compare against (a branch, tag or commit, e.g. origin/main).
    #[arg(long, value_name = "REF")]
    pub base: String,
    /// The commit to measure (default: HEAD).
    #[arg(long, value_name = "REF", default_value = "HEAD")]
    pub head: String,
    /// Fail only on a slowdown of at least PCT percent (speed-up terms; default [decision]
    /// min_effect_pct).
    #[arg(long, value_name = "PCT")]
    pub threshold: Option<f64>,
    /// The budget of interleaved pairs (overrides [decision] pairs).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// Print one JSON object (docs/json.md) instead of the Markdown; the text goes to stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args, Default)]
pub struct StatusArgs {
    /// Print one JSON object (docs/json.md) instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// A/A pairs to run (default: 61, what fills the noise history and tells one mode of runs
    /// from two; fewer leave later decisions longer until their own sessions have told it).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// Print the calibration as one JSON object (docs/json.md); the text goes to stderr.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The hypothesis, e.g. "experiment: bump BQ to 512" (a trailing " --deep" means --deep).
    pub message: String,
    #[command(flatten)]
    pub flags: ExperimentFlags,
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Overwrite an existing ratchet.toml.
    #[arg(long)]
    pub force: bool,
    /// Hardware preset to write (default: the detected accelerator, else `cpu`).
    #[arg(long)]
    pub preset: Option<String>,
    /// The benchmark command (default: python3 prepare.py when prepare.py exists).
    #[arg(long)]
    pub command: Option<String>,
}

#[derive(Debug, Args, Default)]
pub struct ResultsArgs {
    /// Output format; csv, json and md are exports with the columns documented in docs/results.md.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Only kept experiments.
    #[arg(long)]
    pub kept: bool,
    /// Only experiments with this status (keep, revert, crash, timeout, invalid, interrupted,
    /// error, skipped); repeat or separate with commas for several.
    #[arg(long, value_name = "S", value_delimiter = ',')]
    pub status: Vec<String>,
    /// Only experiments whose hypothesis has this tag; repeat for any of several.
    #[arg(long, value_name = "T")]
    pub tag: Vec<String>,
    /// Only experiments since TIME: RFC 3339 (2026-11-22T01:00:00Z) or an age like 12h, 30m, 2d.
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// Order of the rows: id (run order), delta (largest gain first), value (best first).
    #[arg(long, value_enum, default_value = "id")]
    pub sort: SortKey,
    /// Every column, however wide (the default table fits the terminal's width, or COLUMNS).
    #[arg(long)]
    pub wide: bool,
}

/// How `ratchet results` orders its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum SortKey {
    #[default]
    Id,
    Delta,
    Value,
}

#[derive(Debug, Args, Default)]
pub struct SweepArgs {
    /// Hypothesis files or directories of them (default: every *.toml in experiments/, in name order).
    pub paths: Vec<PathBuf>,
    /// Wall-time budget, e.g. 8h, 30m, 1h30m: no experiment starts that would end past it.
    #[arg(long, value_name = "DURATION")]
    pub max_wall: Option<String>,
    /// Budget of benchmark runs (processes, both sides): no experiment starts that could exceed it.
    #[arg(long, value_name = "N")]
    pub max_runs: Option<u64>,
    /// Take continuous-profiling snapshots in every experiment (a file's `deep` overrides).
    #[arg(long)]
    pub deep: bool,
    /// Interleaved pairs per experiment (a file's `pairs` overrides; default [decision] pairs).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// JSON lines on stdout (docs/json.md): each experiment's `run` events and `decision`, then
    /// a `sweep` object; the text goes to stderr.
    #[arg(long)]
    pub json: bool,
    /// Run up to N hypotheses at once on local device slots ([devices] in ratchet.toml binds
    /// each to a device), deciding them one at a time on one trunk (docs/scale-out.md).
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
}

/// The `ratchet gc --keep-last` default (also the figure `ratchet status` quotes).
pub const GC_KEEP_LAST: usize = 5;

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The experiments to replay (the `id` column of `ratchet results`); default: every decided one.
    pub ids: Vec<u64>,
}

#[derive(Debug, Args)]
pub struct GcArgs {
    /// Keep the run directories of the last N experiments, whatever their outcome.
    #[arg(long, value_name = "N", default_value_t = GC_KEEP_LAST)]
    pub keep_last: usize,
    /// Say what would go, remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also drop the JAX compilation cache (.ratchet/cache).
    #[arg(long)]
    pub cache: bool,
}

#[derive(Debug, Args)]
pub struct RetryArgs {
    /// The experiment's id (the `id` column of `ratchet results`).
    pub id: u64,
    /// Run it right away as a new experiment ("<message> (retry of ID)").
    #[arg(long)]
    pub run: bool,
    /// Run it right away with this budget of pairs (implies --run).
    #[arg(long, value_name = "N")]
    pub pairs: Option<u32>,
    /// When running it: commit large or binary new files too (as `ratchet --allow-large`).
    #[arg(long)]
    pub allow_large: bool,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The experiment's id (the `id` column of `ratchet results`).
    pub id: u64,
    /// Compare with experiment ID instead: the A/B table (step time, MXU util, top hotspot,
    /// peak HBM, with deltas) of the two experiments' candidates, medians over their runs.
    #[arg(long, value_name = "ID")]
    pub vs: Option<u64>,
    /// Print one JSON object (docs/json.md) instead of the report.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Directory for staircase.{png,svg} and roofline.{png,svg}.
    #[arg(long, short = 'o', value_name = "DIR", default_value = "results/plots")]
    pub out: PathBuf,
    /// Also write a self-contained HTML report of the results (table and inline charts) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Also draw experiment ID's per-op self time, candidate beside incumbent, from its runs'
    /// traces (ops-ID.{png,svg}; in the HTML report too); repeat for several.
    #[arg(long, value_name = "ID")]
    pub ops: Vec<u64>,
    /// Draw experiment ID's sequential test: its statistic at each look against the keep and
    /// revert boundaries (looks-ID.{png,svg}; in the HTML report too); repeat for several.
    /// Default: the latest experiment that has a record of its looks.
    #[arg(long, value_name = "ID")]
    pub looks: Vec<u64>,
}

/// Arguments of `ratchet inspect`.
#[derive(Debug, Clone, clap::Args)]
pub struct InspectArgs {
    /// An .xplane.pb (or .trace.json.gz), a profile log directory, or a ratchet run directory
    /// (one holding ratchet-result.json)
    pub path: std::path::PathBuf,
    /// Print one JSON object instead of text
    #[arg(long)]
    pub json: bool,
    /// Regular expression naming the kernel's module (default: the result file's "kernel",
    /// else the module executed most often)
    #[arg(long, value_name = "PATTERN")]
    pub kernel: Option<String>,
    /// Compiled HLO text of the kernel, for HLO op counts (default: the result file's "hlo")
    #[arg(long, value_name = "FILE")]
    pub hlo: Option<std::path::PathBuf>,
    /// The Pallas kernel's body as MLIR text (kernel.body.mlir, or a file written by
    /// tests/helpers/lower_kernel_bodies.py), for op counts inside the kernel (default: the
    /// result file's "kernel_body")
    #[arg(long, value_name = "FILE")]
    pub kernel_body: Option<std::path::PathBuf>,
    /// FLOPs of one kernel call (default: the result file's "flops")
    #[arg(long)]
    pub flops: Option<f64>,
    /// Estimated HBM bytes of one call, re-reads included (default: the result file's "bytes")
    #[arg(long)]
    pub bytes: Option<f64>,
    /// HBM bytes with perfect reuse (default: the result file's "min_bytes")
    #[arg(long)]
    pub min_bytes: Option<f64>,
    /// Peak compute of the chip in TFLOP/s (default: from the capture's device plane)
    #[arg(long, value_name = "TFLOPS")]
    pub peak_tflops: Option<f64>,
    /// Peak HBM bandwidth in GB/s (default: from the capture's device plane)
    #[arg(long, value_name = "GBPS")]
    pub hbm_gbps: Option<f64>,
    /// The repo's configured hardware, used when neither a flag nor the capture gives peaks.
    #[arg(skip)]
    pub config_hardware: Option<crate::hardware::Hardware>,
}

impl InspectArgs {
    /// `ratchet inspect PATH` with no flags: what a library caller or a test starts from.
    pub fn of(path: impl Into<std::path::PathBuf>) -> InspectArgs {
        InspectArgs {
            path: path.into(),
            json: false,
            kernel: None,
            hlo: None,
            kernel_body: None,
            flops: None,
            bytes: None,
            min_bytes: None,
            peak_tflops: None,
            hbm_gbps: None,
            config_hardware: None,
        }
    }
}

/// The library's `results --format` values, spelled for the command line here so that clap stays
/// out of `report`.
impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        &[Format::Table, Format::Csv, Format::Json, Format::Md]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            Format::Table => "table",
            Format::Csv => "csv",
            Format::Json => "json",
            Format::Md => "md",
        }))
    }
}

/// `--color`'s values, spelled for the command line here so that clap stays out of `term`.
impl clap::ValueEnum for crate::cli::term::ColorChoice {
    fn value_variants<'a>() -> &'a [Self] {
        use crate::cli::term::ColorChoice::*;
        &[Auto, Always, Never]
    }
    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        use crate::cli::term::ColorChoice::*;
        Some(match self {
            Auto => clap::builder::PossibleValue::new("auto").help("Colour on a terminal, unless NO_COLOR is set or TERM is dumb"),
            Always => clap::builder::PossibleValue::new("always"),
            Never => clap::builder::PossibleValue::new("never"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn message_and_subcommands_parse() {
        let c = Cli::try_parse_from(["ratchet", "experiment: bump BQ", "--pairs", "4"]).unwrap();
        assert!(c.command.is_none());
        assert_eq!(c.experiment.message.as_deref(), Some("experiment: bump BQ"));
        assert_eq!(c.experiment.flags.pairs, Some(4));
        let c = Cli::try_parse_from(["ratchet", "results", "--format", "csv"]).unwrap();
        assert!(matches!(c.command, Some(Command::Results(ResultsArgs { format: Format::Csv, .. }))));
        let c = Cli::try_parse_from(["ratchet", "results", "--status", "keep,revert", "--tag", "bq", "--since", "12h", "--sort", "delta"])
            .unwrap();
        let Some(Command::Results(r)) = c.command else { panic!("results") };
        assert_eq!(r.status, ["keep", "revert"]);
        assert_eq!(r.sort, SortKey::Delta);
        let c = Cli::try_parse_from(["ratchet", "sweep", "a.toml", "b.toml", "--max-wall", "8h", "--max-runs", "40"]).unwrap();
        let Some(Command::Sweep(s)) = c.command else { panic!("sweep") };
        assert_eq!(s.paths.len(), 2);
        assert_eq!(s.max_runs, Some(40));
        let c = Cli::try_parse_from(["ratchet", "calibrate", "--pairs", "6"]).unwrap();
        assert!(matches!(c.command, Some(Command::Calibrate(CalibrateArgs { pairs: Some(6), .. }))));
    }
}
