//! `ratchet.toml`: the benchmark command and its phases, the hardware, the deciding metric and
//! the statistical parameters. Parsed strictly: an unknown key or a bad value is an error that
//! names the key and its line.

use crate::error::{Error, Result};
use crate::hardware::{self, Hardware};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub const FILE_NAME: &str = "ratchet.toml";

/// The largest budget of pairs (`max_pairs`, `confirm_pairs`, `--pairs`): 10,000 pairs is
/// 20,000 benchmark processes, past any real experiment, and keeps every buffer sized by it small.
pub const MAX_PAIRS: u32 = 10_000;
/// The longest `timeout_s`: 7 days (a `Duration` of 1e20 s would overflow).
pub const MAX_TIMEOUT_S: f64 = 7.0 * 24.0 * 3600.0;
/// The longest `kill_grace_s`: 1 hour.
pub const MAX_GRACE_S: f64 = 3600.0;
/// The most warmup, measured or profiled iterations per run.
pub const MAX_ITERS: u32 = 10_000_000;
/// The most re-runs of a throttled run.
pub const MAX_RERUNS: u32 = 100;

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub benchmark: Benchmark,
    #[serde(default)]
    pub hardware: HardwareConfig,
    #[serde(default)]
    pub score: ScoreConfig,
    #[serde(default)]
    pub decision: DecisionConfig,
    #[serde(default)]
    pub trace: TraceConfig,
    /// Where trials run: local slots, Slurm or a user's hook.
    #[serde(default)]
    pub engine: EngineConfig,
    /// `[devices]`: the local device slots of a parallel sweep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub devices: Option<DevicesConfig>,
}

/// The device kinds `[devices] kind` knows, and how each binds one slot to one device.
pub const DEVICE_KINDS: [&str; 4] = ["cuda", "rocm", "tpu", "cpu"];

/// `[devices]`: either `kind` and `count` (slot i gets device i), or explicit `[[devices.slot]]`
/// entries with the environment that binds each (docs/scale-out.md).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DevicesConfig {
    pub kind: Option<String>,
    pub count: Option<usize>,
    /// Pin slot i to CPUs [i*k, (i+1)*k) (with `kind`).
    pub cpus_per_slot: Option<usize>,
    /// First of the slots' ports (`kind = "tpu"`: slot i gets base_port + i).
    pub base_port: Option<u16>,
    #[serde(default)]
    pub slot: Vec<DeviceSlot>,
}

/// One explicit slot.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceSlot {
    #[serde(default)]
    pub env: std::collections::BTreeMap<String, String>,
    /// CPUs to pin its worker to, e.g. "0-3" or "0,2,4-5".
    pub cpus: Option<String>,
}

/// The most device slots of one host.
pub const MAX_SLOTS: usize = 256;

/// Parse a CPU list (`0-3`, `0,2,4-5`).
pub fn parse_cpus(s: &str) -> std::result::Result<Vec<usize>, String> {
    let bad = || format!("{s:?} is not a CPU list; write e.g. \"0-3\" or \"0,2,4-5\"");
    let mut out = vec![];
    for part in s.split(',').map(str::trim) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().map_err(|_| bad())?, b.trim().parse().map_err(|_| bad())?);
        if a > b || b >= 4096 {
            return Err(bad());
        }
        out.extend(a..=b);
    }
    Ok(out)
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Benchmark {
    /// Run through `sh -c` from the root of the checkout being measured.
    pub command: String,
    /// Wall-clock limit of one run, in seconds.
    #[serde(default = "defaults::timeout_s")]
    pub timeout_s: f64,
    /// Seconds between SIGTERM and SIGKILL when a run is stopped.
    #[serde(default = "defaults::kill_grace_s")]
    pub kill_grace_s: f64,
    #[serde(default = "defaults::warmup")]
    pub warmup: u32,
    #[serde(default = "defaults::iters")]
    pub iters: u32,
    #[serde(default = "defaults::profile_iters")]
    pub profile_iters: u32,
    /// Extra environment for every run.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files (or directories, ending in `/`) of the measuring harness that a hypothesis may not
    /// change, besides ratchet.toml and the scripts the command names.
    #[serde(default)]
    pub protect: Vec<String>,
    /// How many times in a row a run that the benchmark marks `throttled` is run again before
    /// its value is used anyway (a sample is never dropped for its value).
    #[serde(default = "defaults::throttle_reruns")]
    pub throttle_reruns: u32,
    /// Fork each run of a `python SCRIPT.py` command from a parent that did the imports once
    /// (docs/protocol.md, "Forked runs"); false starts every run as a fresh process.
    #[serde(default = "defaults::preload")]
    pub preload: bool,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct HardwareConfig {
    pub preset: Option<String>,
    /// Overrides the preset's peak dense FLOP/s (TFLOP/s).
    pub peak_tflops: Option<f64>,
    /// Overrides the preset's HBM bandwidth (GB/s).
    pub hbm_gbps: Option<f64>,
}

/// Moved to [`crate::stats`] (the decision's vocabulary; config sits above it).
pub use crate::stats::{Direction, Metric};

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScoreConfig {
    #[serde(default)]
    pub metric: Metric,
    /// Only the metric's own direction is accepted (latency: lower; score, tflops: higher):
    /// results rows record the metric, and every view reads its direction from it.
    pub direction: Option<Direction>,
}

impl ScoreConfig {
    pub fn direction(&self) -> Direction {
        self.metric.natural_direction()
    }
}

/// How the experiment decides: `robust-ratio`, the default (one likelihood ratio whose no-gain
/// fit allows outlier pairs and two modes of runs, with or without history, up to
/// `pairs` pairs: `stats::sequential::robust`), or the earlier rule and its parts:
/// `auto` (`likelihood-ratio` where the history saw no gross outlier, `sequential` elsewhere),
/// `sequential` (looks after `min_pairs`, then every `look_every` pairs up to `max_pairs`, and a
/// confirmation), `likelihood-ratio` (with history: a look after every pair, one phase, up to
/// `rescue_pairs` pairs; without history as `sequential`), `fixed` (one test after `max_pairs`
/// pairs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    Sequential,
    Fixed,
    LikelihoodRatio,
    #[default]
    RobustRatio,
    Auto,
}

impl std::str::FromStr for Method {
    type Err = String;

    /// A method as the config spells it (`--method`, the probes' `method=`).
    fn from_str(s: &str) -> Result<Method, String> {
        Deserialize::deserialize(serde::de::value::StrDeserializer::<serde::de::value::Error>::new(s))
            .map_err(|_| format!("{s:?}: one of sequential, fixed, likelihood-ratio, robust-ratio, auto"))
    }
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionConfig {
    #[serde(default)]
    pub method: Method,
    /// Interleaved pairs before the first look.
    #[serde(default = "defaults::min_pairs")]
    pub min_pairs: u32,
    /// The budget: pairs at the last look (`--pairs` overrides).
    #[serde(default = "defaults::max_pairs")]
    pub max_pairs: u32,
    /// Pairs between looks.
    #[serde(default = "defaults::look_every")]
    pub look_every: u32,
    /// One-sided false-keep level of the first phase, across all its looks.
    #[serde(default = "defaults::alpha")]
    pub alpha: f64,
    /// How alpha is spread over the looks.
    #[serde(default)]
    pub spending: crate::stats::sequential::Spending,
    /// The smallest gain worth keeping, in percent of the deciding metric.
    #[serde(default = "defaults::min_effect_pct")]
    pub min_effect_pct: f64,
    /// Stop early (revert) when the (1 - futility_beta) upper bound of the gain is below the
    /// minimum effect; 0 turns early futility stops off.
    #[serde(default = "defaults::futility_beta")]
    pub futility_beta: f64,
    /// Confirm a keep with an independent batch in reversed order.
    #[serde(default = "defaults::confirm")]
    pub confirm: bool,
    #[serde(default = "defaults::confirm_pairs")]
    pub confirm_pairs: u32,
    /// One-sided level of the confirmation batch.
    #[serde(default = "defaults::confirm_alpha")]
    pub confirm_alpha: f64,
    /// The default rule's budget: at most this many pairs, then their t-test (`--pairs`
    /// overrides). Absent: `rescue_pairs`, the name the earlier rule gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<u32>,
    /// The earlier rule: an unconfirmed or inconclusive decision measures on to this many pairs
    /// in all, then is kept if the t-test over all of them passes at `rescue_alpha` (0: no
    /// rescue).
    #[serde(default = "defaults::rescue_pairs")]
    pub rescue_pairs: u32,
    #[serde(default = "defaults::rescue_alpha")]
    pub rescue_alpha: f64,
}

impl Default for DecisionConfig {
    fn default() -> Self {
        DecisionConfig {
            method: Method::default(),
            min_pairs: defaults::min_pairs(),
            max_pairs: defaults::max_pairs(),
            look_every: defaults::look_every(),
            alpha: defaults::alpha(),
            spending: Default::default(),
            min_effect_pct: defaults::min_effect_pct(),
            futility_beta: defaults::futility_beta(),
            confirm: defaults::confirm(),
            confirm_pairs: defaults::confirm_pairs(),
            confirm_alpha: defaults::confirm_alpha(),
            pairs: None,
            rescue_pairs: defaults::rescue_pairs(),
            rescue_alpha: defaults::rescue_alpha(),
        }
    }
}

impl DecisionConfig {
    /// The earlier rule at its defaults (`method = "auto"`: the likelihood ratio, the two phases
    /// and the rescue): what replays its rows, the tests of its parts and the lab's probes of it
    /// read.
    pub fn earlier() -> DecisionConfig {
        DecisionConfig { method: Method::Auto, ..DecisionConfig::default() }
    }

    /// The default rule's budget without `--pairs`: `pairs`, else `rescue_pairs` (else
    /// `max_pairs`, where that is 0).
    pub fn budget(&self) -> u32 {
        self.pairs.unwrap_or(if self.rescue_pairs > 0 { self.rescue_pairs } else { self.max_pairs })
    }

    /// The procedure's parameters, with the budget `max_pairs` overridden when given.
    pub fn params(&self, max_pairs: Option<u32>) -> crate::stats::sequential::Params {
        use crate::stats::sequential::{OnePhase, Params};
        let max = max_pairs.unwrap_or(self.max_pairs) as usize;
        let base = match self.method {
            Method::Fixed => Params::fixed(max, self.alpha, self.min_effect_pct),
            Method::Sequential | Method::LikelihoodRatio | Method::RobustRatio | Method::Auto => Params {
                min_pairs: (self.min_pairs as usize).min(max),
                max_pairs: max,
                look_every: self.look_every as usize,
                alpha: self.alpha,
                spending: self.spending,
                min_effect_pct: self.min_effect_pct,
                futility_beta: (self.futility_beta > 0.0).then_some(self.futility_beta),
                confirm: false,
                confirm_pairs: 0,
                confirm_alpha: self.confirm_alpha,
                rescue_pairs: self.rescue_pairs as usize,
                rescue_alpha: self.rescue_alpha,
                likelihood_ratio: match self.method {
                    Method::LikelihoodRatio => OnePhase::WithHistory,
                    Method::Auto => OnePhase::UntilOutlier,
                    Method::Sequential | Method::Fixed | Method::RobustRatio => OnePhase::Never,
                },
                levels: crate::stats::sequential::Levels::current(),
                robust: (self.method == Method::RobustRatio).then(|| crate::stats::sequential::RobustLevels {
                    pairs: max_pairs.unwrap_or(self.budget()) as usize,
                    rescue_alpha: self.rescue_alpha,
                    ..crate::stats::sequential::RobustLevels::CURRENT
                }),
            },
        };
        Params { confirm: self.confirm, confirm_pairs: self.confirm_pairs as usize, confirm_alpha: self.confirm_alpha, ..base }
    }
}

/// Where the latency that feeds the decision comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LatencySource {
    /// The kernel time read from the trace when one is found, else the benchmark's timings.
    #[default]
    Auto,
    /// Always the benchmark's own timings.
    Host,
    /// Always the trace; a run without a readable trace is invalid.
    Trace,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    /// Regular expression naming the kernel's module in the trace (overrides the benchmark's).
    pub kernel: Option<String>,
    #[serde(default)]
    pub latency: LatencySource,
    /// The TPU profiler depth the benchmark captures with (`RATCHET_TRACE_MODE`; the article's
    /// `tpu_trace_mode`, section 2.4).
    #[serde(default)]
    pub depth: TraceDepth,
}

/// `[trace] depth`: how much the TPU profiler records (the article, section 2.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TraceDepth {
    TraceOnlyHost,
    TraceOnlyXla,
    /// Compute (MXU/VPU) and DMA rows: what kernel work needs (the default).
    #[default]
    TraceCompute,
    /// Compute plus synchronization events: for pipeline stalls and bubbles.
    TraceComputeAndSync,
}

impl TraceDepth {
    pub fn as_str(self) -> &'static str {
        match self {
            TraceDepth::TraceOnlyHost => "TRACE_ONLY_HOST",
            TraceDepth::TraceOnlyXla => "TRACE_ONLY_XLA",
            TraceDepth::TraceCompute => "TRACE_COMPUTE",
            TraceDepth::TraceComputeAndSync => "TRACE_COMPUTE_AND_SYNC",
        }
    }
}

/// `[engine] kind`: how trials reach devices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EngineKind {
    /// This host's device slots (`--jobs`, `[devices]`): the default.
    #[default]
    Local,
    /// One Slurm job array per batch of trials (docs/scale-out.md, "Slurm").
    Slurm,
    /// The user's submit / poll / cancel / fetch commands (docs/scale-out.md, "Hook").
    Hook,
    /// One Ray job per trial on a Ray cluster (docs/scale-out.md, "Ray").
    Ray,
}

impl EngineKind {
    pub fn as_str(self) -> &'static str {
        match self {
            EngineKind::Local => "local",
            EngineKind::Slurm => "slurm",
            EngineKind::Hook => "hook",
            EngineKind::Ray => "ray",
        }
    }
}

/// The most trials an external engine may have in flight.
pub const MAX_ENGINE_CAPACITY: u32 = 10_000;
/// The longest wait for one engine command (`sbatch`, a hook): 1 hour.
pub const MAX_ENGINE_TIMEOUT_S: f64 = 3600.0;
/// The most retries of a lost trial.
pub const MAX_ENGINE_RETRIES: u32 = 100;
/// How long polling may fail before a sweep stops, by default (a scheduler's blip, a job server
/// restarting), and at most (a day).
pub const DEFAULT_POLL_GRACE_S: f64 = 600.0;
pub const MAX_POLL_GRACE_S: f64 = 86_400.0;
/// How long a job the engine will not start (held, its nodes drained) may wait before it
/// counts as a lost trial, by default (ours: time for someone to release it at the start of a
/// night; a real queue wait is never cut) and at most.
pub const DEFAULT_STUCK_LIMIT_S: f64 = 900.0;
pub const MAX_STUCK_LIMIT_S: f64 = 86_400.0;

/// `[engine]`: one flat table; which keys apply depends on `kind` (checked in `validate`).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct EngineConfig {
    #[serde(default)]
    pub kind: EngineKind,
    /// Trials in flight at once (slurm, hook, ray; default 4).
    pub capacity: Option<u32>,
    /// Slurm: the partition (`sbatch --partition`); the cluster's default when absent.
    pub partition: Option<String>,
    /// Slurm: the generic resources of one task (`--gres`, default "gpu:1"; "" asks for none).
    pub gres: Option<String>,
    /// Slurm: a whole node per task (`--exclusive`) instead of `gres`.
    pub exclusive: Option<bool>,
    /// Slurm: more `sbatch` options (`--time=2:00:00`, `--account=x`).
    pub sbatch_args: Option<Vec<String>>,
    /// Slurm, Ray: the limit of each `sbatch` / `squeue` / `scancel` or `ray` call (default 60 s).
    pub command_timeout_s: Option<f64>,
    /// Hook: shell commands (run with `sh -c` from the repository root); `submit_batch` instead
    /// of `submit` takes every trial of a batch in one call.
    pub submit: Option<String>,
    pub submit_batch: Option<String>,
    pub poll: Option<String>,
    pub cancel: Option<String>,
    pub fetch: Option<String>,
    /// Hook: prints the token of the job named `$RATCHET_JOB_NAME`, or nothing (optional).
    pub find: Option<String>,
    /// Hook: the limit of each hook call (default 60 s).
    pub hook_timeout_s: Option<f64>,
    /// Any kind: how often a lost trial (preempted, cancelled, killed) starts again before its
    /// hypothesis is recorded as lost (default 2).
    pub retries: Option<u32>,
    /// Hook, Ray: the least time between two polls of one job (default 5 s; a hook backs off to 4x that
    /// while the job's state does not change).
    pub poll_interval_s: Option<f64>,
    /// Ray: the cluster's job server (default "http://127.0.0.1:8265").
    pub address: Option<String>,
    /// Ray: the CPUs and whole GPUs of one trial (entrypoint resources; default 1 and 1).
    pub cpus: Option<f64>,
    pub gpus: Option<f64>,
    /// Ray: more `ray job submit` options (`--runtime-env-json=...`, `--entrypoint-resources=...`).
    pub submit_args: Option<Vec<String>>,
    /// Ray: the `ray` command (a virtual environment's `bin/ray`; default `ray` on PATH).
    pub ray_bin: Option<String>,
    /// Any kind: how long polling the engine may keep failing (a scheduler that times out, a
    /// job server restarting) before the sweep stops on it (default 600 s; 0: at once).
    pub poll_grace_s: Option<f64>,
    /// Any kind: how long a job the engine says it will not start (Slurm: held, nodes drained
    /// or down) may wait before it counts as a lost trial: retried, then recorded interrupted
    /// (default 900 s).
    pub stuck_limit_s: Option<f64>,
    /// Slurm, Ray, hook: the kind of device every trial runs on (one GPU model: "h100-80gb"),
    /// whose noise history its trials borrow and feed. Absent: Slurm's and Ray's kind is what
    /// they ask for (partition, resources, constraints); a hook's trials decide on their own
    /// spread.
    pub device_kind: Option<String>,
}

impl EngineConfig {
    /// The keys each kind takes (besides `kind`), for the error naming a misplaced one.
    pub const LOCAL_KEYS: &'static [&'static str] = &["retries", "poll_grace_s"];
    pub const SLURM_KEYS: &'static [&'static str] = &[
        "capacity",
        "partition",
        "gres",
        "exclusive",
        "sbatch_args",
        "command_timeout_s",
        "retries",
        "poll_grace_s",
        "stuck_limit_s",
        "device_kind",
    ];
    pub const HOOK_KEYS: &'static [&'static str] = &[
        "capacity",
        "submit",
        "submit_batch",
        "poll",
        "cancel",
        "fetch",
        "find",
        "hook_timeout_s",
        "retries",
        "poll_interval_s",
        "poll_grace_s",
        "stuck_limit_s",
        "device_kind",
    ];
    pub const RAY_KEYS: &'static [&'static str] = &[
        "capacity",
        "address",
        "cpus",
        "gpus",
        "submit_args",
        "ray_bin",
        "command_timeout_s",
        "poll_interval_s",
        "retries",
        "poll_grace_s",
        "device_kind",
    ];

    /// The keys set in this table, besides `kind`.
    fn set_keys(&self) -> Vec<&'static str> {
        let keys = [
            ("capacity", self.capacity.is_some()),
            ("partition", self.partition.is_some()),
            ("gres", self.gres.is_some()),
            ("exclusive", self.exclusive.is_some()),
            ("sbatch_args", self.sbatch_args.is_some()),
            ("command_timeout_s", self.command_timeout_s.is_some()),
            ("submit", self.submit.is_some()),
            ("submit_batch", self.submit_batch.is_some()),
            ("poll", self.poll.is_some()),
            ("cancel", self.cancel.is_some()),
            ("fetch", self.fetch.is_some()),
            ("find", self.find.is_some()),
            ("hook_timeout_s", self.hook_timeout_s.is_some()),
            ("retries", self.retries.is_some()),
            ("poll_interval_s", self.poll_interval_s.is_some()),
            ("address", self.address.is_some()),
            ("cpus", self.cpus.is_some()),
            ("gpus", self.gpus.is_some()),
            ("submit_args", self.submit_args.is_some()),
            ("ray_bin", self.ray_bin.is_some()),
            ("poll_grace_s", self.poll_grace_s.is_some()),
            ("stuck_limit_s", self.stuck_limit_s.is_some()),
            ("device_kind", self.device_kind.is_some()),
        ];
        keys.iter().filter(|(_, set)| *set).map(|(k, _)| *k).collect()
    }

    fn validate(&self, text: &str) -> Result<()> {
        let bad = |key: &str, why: String| {
            let at = key_line(text, "engine", key).map(|l| format!("line {l}: ")).unwrap_or_default();
            Err(Error::config(format!("{at}[engine] {key}: {why}")))
        };
        let allowed: &[&str] = match self.kind {
            EngineKind::Local => Self::LOCAL_KEYS,
            EngineKind::Slurm => Self::SLURM_KEYS,
            EngineKind::Hook => Self::HOOK_KEYS,
            EngineKind::Ray => Self::RAY_KEYS,
        };
        for key in self.set_keys() {
            if !allowed.contains(&key) {
                let takes = if self.kind == EngineKind::Local {
                    format!("{} (its slots come from --jobs and [devices])", allowed.join(", "))
                } else {
                    allowed.join(", ")
                };
                return bad(key, format!("does not apply to kind = \"{}\", which takes {takes}", self.kind.as_str()));
            }
        }
        if let Some(c) = self.capacity {
            if c == 0 || c > MAX_ENGINE_CAPACITY {
                return bad("capacity", format!("must be between 1 and {MAX_ENGINE_CAPACITY} trials in flight, got {c}"));
            }
        }
        for (key, v) in [("command_timeout_s", self.command_timeout_s), ("hook_timeout_s", self.hook_timeout_s)] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0 && v <= MAX_ENGINE_TIMEOUT_S) {
                    return bad(key, format!("must be in (0, {MAX_ENGINE_TIMEOUT_S}] seconds, got {v}"));
                }
            }
        }
        if let Some(r) = self.retries {
            if r > MAX_ENGINE_RETRIES {
                return bad("retries", format!("must be between 0 and {MAX_ENGINE_RETRIES}, got {r}"));
            }
        }
        if let Some(v) = self.poll_grace_s {
            if !(v.is_finite() && (0.0..=MAX_POLL_GRACE_S).contains(&v)) {
                return bad("poll_grace_s", format!("must be in [0, {MAX_POLL_GRACE_S}] seconds, got {v}"));
            }
        }
        if let Some(v) = self.stuck_limit_s {
            if !(v.is_finite() && (0.0..=MAX_STUCK_LIMIT_S).contains(&v)) {
                return bad("stuck_limit_s", format!("must be in [0, {MAX_STUCK_LIMIT_S}] seconds, got {v}"));
            }
        }
        if let Some(v) = self.poll_interval_s {
            if !(v.is_finite() && (0.0..=MAX_ENGINE_TIMEOUT_S).contains(&v)) {
                return bad("poll_interval_s", format!("must be in [0, {MAX_ENGINE_TIMEOUT_S}] seconds, got {v}"));
            }
        }
        if let Some(k) = &self.device_kind {
            if k.trim().is_empty() || k.len() > 100 || k.chars().any(|c| c.is_control()) {
                return bad("device_kind", format!("must name a kind of device in 1-100 printable characters, got {k:?}"));
            }
        }
        if let Some(p) = &self.partition {
            if p.is_empty() || p.chars().any(|c| c.is_whitespace() || c.is_control()) {
                return bad("partition", format!("must be a partition name without spaces, got {p:?}"));
            }
        }
        if let Some(g) = &self.gres {
            // name[:type][:count], comma-separated (sbatch(1), --gres); "" asks for none.
            let item = regex::Regex::new(r"^[A-Za-z0-9_./-]+(:[A-Za-z0-9_./-]+)*$").expect("static regex");
            if !g.is_empty() && !g.split(',').all(|i| item.is_match(i)) {
                return bad("gres", format!("must look like \"gpu:1\" or \"gpu:a100:1\" (or \"\" for none), got {g:?}"));
            }
            if self.exclusive == Some(true) && !g.is_empty() {
                return bad("gres", "cannot be combined with exclusive = true (a whole node per task); remove one".into());
            }
        }
        if let Some(args) = &self.sbatch_args {
            // ratchet sets these itself: the array, the output files and the working directory.
            const OWN: &[&str] = &["--array", "-a", "--output", "-o", "--error", "-e", "--parsable", "--chdir", "-D", "--wrap"];
            for a in args {
                let flag = a.split('=').next().unwrap_or("");
                if !a.starts_with('-') {
                    return bad("sbatch_args", format!("{a:?} is not an option; give each as \"--name=value\""));
                }
                if OWN.contains(&flag) {
                    return bad(
                        "sbatch_args",
                        format!("{flag} is set by ratchet (one array task per trial, output into each run directory); remove it"),
                    );
                }
            }
        }
        if let Some(a) = &self.address {
            if !(a.starts_with("http://") || a.starts_with("https://")) || a.chars().any(|c| c.is_whitespace()) {
                return bad("address", format!("must be the job server's URL, like \"http://head:8265\", got {a:?}"));
            }
        }
        if let Some(c) = self.cpus {
            if !(c.is_finite() && (0.0..=1e6).contains(&c)) {
                return bad("cpus", format!("must be a number of CPUs >= 0, got {c}"));
            }
        }
        if let Some(g) = self.gpus {
            // Whole GPUs: a fraction lets Ray put two trials on one device, and they would
            // measure each other.
            if !(g.is_finite() && g >= 0.0 && g.fract() == 0.0 && g <= 1e4) {
                return bad("gpus", format!("must be a whole number of GPUs per trial (trials must not share a device), got {g}"));
            }
        }
        if self.ray_bin.as_deref().is_some_and(|b| b.trim().is_empty()) {
            return bad("ray_bin", "is empty; give the path of the `ray` command or leave the key out".into());
        }
        if let Some(args) = &self.submit_args {
            // ratchet sets these itself: the job's name, its resources, its metadata, the server.
            const OWN: &[&str] = &[
                "--submission-id",
                "--job-id",
                "--no-wait",
                "--address",
                "--entrypoint-num-cpus",
                "--entrypoint-num-gpus",
                "--metadata-json",
            ];
            for a in args {
                let flag = a.split('=').next().unwrap_or("");
                if !a.starts_with("--") || a == "--" {
                    return bad("submit_args", format!("{a:?} is not an option; give each as \"--name=value\""));
                }
                if OWN.contains(&flag) {
                    return bad(
                        "submit_args",
                        format!("{flag} is set by ratchet (the job named by its trial, cpus and gpus from [engine]); remove it"),
                    );
                }
            }
        }
        if self.kind == EngineKind::Hook {
            let submit = match (&self.submit, &self.submit_batch) {
                (Some(_), Some(_)) => return bad("submit_batch", "cannot be combined with submit; give one of them".into()),
                (None, Some(_)) => ("submit_batch", &self.submit_batch),
                _ => ("submit", &self.submit),
            };
            for (key, v) in [submit, ("poll", &self.poll), ("cancel", &self.cancel)] {
                match v {
                    None => {
                        return bad(
                            key,
                            "is required for kind = \"hook\" (submit or submit_batch, poll and cancel; fetch is optional)".into(),
                        )
                    }
                    Some(c) if c.trim().is_empty() => return bad(key, "is empty; give the shell command to run".into()),
                    _ => {}
                }
            }
            for (key, v) in [("fetch", &self.fetch), ("find", &self.find)] {
                if v.as_deref().is_some_and(|c| c.trim().is_empty()) {
                    return bad(key, "is empty; give the shell command or leave the key out".into());
                }
            }
        }
        Ok(())
    }
}

mod defaults {
    pub fn timeout_s() -> f64 {
        600.0
    }
    pub fn kill_grace_s() -> f64 {
        5.0
    }
    pub fn warmup() -> u32 {
        5
    }
    pub fn iters() -> u32 {
        20
    }
    /// With a trace, a run's figure is the median of the kernel's traced executions (not of
    /// the timed iterations): ten keep one slow execution from deciding it.
    pub fn profile_iters() -> u32 {
        10
    }
    pub fn min_pairs() -> u32 {
        4
    }
    pub fn max_pairs() -> u32 {
        16
    }
    pub fn look_every() -> u32 {
        2
    }
    pub fn futility_beta() -> f64 {
        0.3
    }
    pub fn confirm() -> bool {
        true
    }
    pub fn confirm_pairs() -> u32 {
        // 5 pairs keep power >= 95% for +3% at 1% CV and bring the mean runs per decision under
        // a 10+10 fixed test's 20 (`ratchet-lab simulate`, docs/decisions.md).
        5
    }
    pub fn confirm_alpha() -> f64 {
        // With the rescue's 0.0001 the rule's bound stays 0.001 (docs/decisions.md).
        0.045
    }
    pub fn rescue_pairs() -> u32 {
        30
    }
    pub fn rescue_alpha() -> f64 {
        0.0001
    }
    pub fn throttle_reruns() -> u32 {
        2
    }
    pub fn preload() -> bool {
        true
    }
    pub fn alpha() -> f64 {
        0.02
    }
    pub fn min_effect_pct() -> f64 {
        1.0
    }
}

/// Largest config file read (a real one is a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

impl Config {
    /// Read and validate `ratchet.toml` at `path`.
    pub fn load(path: &Path) -> Result<Config> {
        if let Err(e) = std::fs::metadata(path) {
            return Err(if e.kind() == std::io::ErrorKind::NotFound {
                Error::config(format!("no {} in {}", FILE_NAME, path.parent().unwrap_or(Path::new(".")).display()))
                    .hint("run `ratchet init` to write a commented one")
            } else {
                Error::config(format!("cannot read {}: {e}", path.display()))
            });
        }
        // Read without blocking and only as a regular file: a FIFO or a device given as the
        // config (`--config /dev/stdin`, a named pipe) is an error, never a hang.
        let text = crate::safe_read::read_text_capped(path, MAX_CONFIG_BYTES)
            .map_err(|e| Error::config(e.0).hint("give the path of a regular ratchet.toml file"))?;
        Self::parse(&text).map_err(|e| Error::config(format!("{}: {}", path.display(), e.message)).hint_opt(e.hint))
    }

    /// Parse and validate the text of a config file.
    pub fn parse(text: &str) -> Result<Config> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let msg = e.message().trim().to_string();
            match line {
                Some(l) => Error::config(format!("line {l}: {msg}")),
                None => Error::config(msg),
            }
        })?;
        cfg.validate(text)?;
        Ok(cfg)
    }

    fn validate(&self, text: &str) -> Result<()> {
        let bad = |table: &str, key: &str, why: String| {
            let at = key_line(text, table, key).map(|l| format!("line {l}: ")).unwrap_or_default();
            Err(Error::config(format!("{at}[{table}] {key}: {why}")))
        };
        let b = &self.benchmark;
        if b.command.trim().is_empty() {
            return bad("benchmark", "command", "is empty; give the command that runs one benchmark, e.g. \"python3 prepare.py\"".into());
        }
        if !(b.timeout_s.is_finite() && b.timeout_s > 0.0 && b.timeout_s <= MAX_TIMEOUT_S) {
            return bad("benchmark", "timeout_s", format!("must be in (0, {MAX_TIMEOUT_S}] seconds (7 days), got {}", b.timeout_s));
        }
        if !(b.kill_grace_s.is_finite() && b.kill_grace_s >= 0.0 && b.kill_grace_s <= MAX_GRACE_S) {
            return bad("benchmark", "kill_grace_s", format!("must be in [0, {MAX_GRACE_S}] seconds, got {}", b.kill_grace_s));
        }
        if b.iters == 0 {
            return bad("benchmark", "iters", "must be at least 1 measured iteration".into());
        }
        for (key, v, max) in [
            ("warmup", b.warmup, MAX_ITERS),
            ("iters", b.iters, MAX_ITERS),
            ("profile_iters", b.profile_iters, MAX_ITERS),
            ("throttle_reruns", b.throttle_reruns, MAX_RERUNS),
        ] {
            if v > max {
                return bad("benchmark", key, format!("must be between 0 and {max}, got {v}"));
            }
        }
        let h = &self.hardware;
        if let Some(p) = &h.preset {
            if hardware::preset(p).is_none() {
                return bad("hardware", "preset", format!("unknown preset {p:?}; known: {}", hardware::preset_names().join(", ")));
            }
        }
        for (key, v) in [("peak_tflops", h.peak_tflops), ("hbm_gbps", h.hbm_gbps)] {
            if let Some(v) = v {
                if !(v.is_finite() && v > 0.0 && v <= 1e9) {
                    return bad("hardware", key, format!("must be a positive number of at most 1e9, got {v}"));
                }
            }
        }
        if h.preset.is_none() && (h.peak_tflops.is_some() != h.hbm_gbps.is_some()) {
            let missing = if h.peak_tflops.is_none() { "peak_tflops" } else { "hbm_gbps" };
            return Err(Error::config(format!("[hardware] without a preset needs both peak_tflops and hbm_gbps; {missing} is missing")));
        }
        if self.hardware().is_none() && self.score.metric != Metric::Latency {
            return Err(Error::config(format!(
                "[score] metric = \"{}\" needs the hardware's peak figures, and [hardware] gives none",
                self.score.metric.as_str()
            ))
            .hint(format!(
                "add [hardware] preset = \"...\" (one of {}) or peak_tflops and hbm_gbps, or use [score] metric = \"latency\"",
                hardware::preset_names().join(", ")
            )));
        }
        let natural = self.score.metric.natural_direction();
        if self.score.direction.is_some_and(|d| d != natural) {
            let word = |d: Direction| if d == Direction::Lower { "lower" } else { "higher" };
            return Err(Error::config(format!(
                "{}[score] direction = \"{}\": {} is better {} and ratchet decides it that way; the other direction would keep \
                 what makes it worse",
                key_line(text, "score", "direction").map(|l| format!("line {l}: ")).unwrap_or_default(),
                word(if natural == Direction::Lower { Direction::Higher } else { Direction::Lower }),
                self.score.metric.as_str(),
                word(natural)
            ))
            .hint("remove the direction line (each metric has its own: latency lower, score and tflops higher)"));
        }
        let d = &self.decision;
        if d.max_pairs < 2 || d.max_pairs > MAX_PAIRS {
            return bad(
                "decision",
                "max_pairs",
                format!("must be between 2 (a paired test needs two pairs) and {MAX_PAIRS}, got {}", d.max_pairs),
            );
        }
        if d.min_pairs < 2 || d.min_pairs > d.max_pairs {
            return bad("decision", "min_pairs", format!("must be between 2 and max_pairs ({}), got {}", d.max_pairs, d.min_pairs));
        }
        if d.look_every > d.max_pairs {
            return bad("decision", "look_every", format!("must be between 1 and max_pairs ({}), got {}", d.max_pairs, d.look_every));
        }
        if d.confirm_pairs > MAX_PAIRS {
            return bad("decision", "confirm_pairs", format!("must be between 2 and {MAX_PAIRS}, got {}", d.confirm_pairs));
        }
        if d.look_every < 1 {
            return bad("decision", "look_every", "must be at least 1 pair between looks (2 keeps every look balanced, AB and BA)".into());
        }
        if !(d.alpha > 0.0 && d.alpha < 0.5) {
            return bad("decision", "alpha", format!("must be in (0, 0.5), got {}", d.alpha));
        }
        if !(d.futility_beta >= 0.0 && d.futility_beta < 0.5) {
            return bad("decision", "futility_beta", format!("must be in [0, 0.5) (0 = no early futility stop), got {}", d.futility_beta));
        }
        if d.confirm && d.confirm_pairs < 2 {
            return bad("decision", "confirm_pairs", format!("must be at least 2 when confirm = true, got {}", d.confirm_pairs));
        }
        if !(d.confirm_alpha > 0.0 && d.confirm_alpha < 0.5) {
            return bad("decision", "confirm_alpha", format!("must be in (0, 0.5), got {}", d.confirm_alpha));
        }
        if let Some(n) = d.pairs.filter(|n| !(2..=MAX_PAIRS).contains(n)) {
            return bad("decision", "pairs", format!("must be between 2 (its t-test needs two pairs) and {MAX_PAIRS}, got {n}"));
        }
        if d.rescue_pairs > MAX_PAIRS {
            return bad("decision", "rescue_pairs", format!("must be at most {MAX_PAIRS} (0 = no rescue), got {}", d.rescue_pairs));
        }
        if !(d.rescue_alpha >= 0.0 && d.rescue_alpha < 0.5) {
            return bad("decision", "rescue_alpha", format!("must be in [0, 0.5) (0 = no rescue), got {}", d.rescue_alpha));
        }
        if !(d.min_effect_pct.is_finite() && d.min_effect_pct >= 0.0 && d.min_effect_pct <= 1000.0) {
            return bad("decision", "min_effect_pct", format!("must be in [0, 1000] percent, got {}", d.min_effect_pct));
        }
        if let Some(d) = &self.devices {
            self.validate_devices(d, text)?;
        }
        if let Some(k) = &self.trace.kernel {
            if let Err(e) = regex::Regex::new(k) {
                return bad("trace", "kernel", format!("is not a valid regular expression: {e}"));
            }
        }
        self.engine.validate(text)?;
        Ok(())
    }

    fn validate_devices(&self, d: &DevicesConfig, text: &str) -> Result<()> {
        let bad = |key: &str, why: String| {
            let at = key_line(text, "devices", key).map(|l| format!("line {l}: ")).unwrap_or_default();
            Err(Error::config(format!("{at}[devices] {key}: {why}")))
        };
        match (&d.kind, d.count, d.slot.is_empty()) {
            (Some(_), _, false) => {
                return Err(Error::config("[devices] has both `kind` and [[devices.slot]] entries; give one of them")
                    .hint("kind = \"cuda\" with count = 8 binds slot i to device i; [[devices.slot]] lists each slot's env"))
            }
            (None, None, true) => {
                return Err(Error::config("[devices] is empty: it needs `kind` and `count`, or [[devices.slot]] entries")
                    .hint("e.g. [devices] kind = \"cuda\" count = 8"))
            }
            (None, Some(_), _) => return bad("count", "needs `kind` (one of cuda, rocm, tpu, cpu)".into()),
            (Some(_), None, _) => return bad("count", "is missing: how many devices of that kind (slot i binds device i)".into()),
            _ => {}
        }
        if let Some(k) = &d.kind {
            if !DEVICE_KINDS.contains(&k.as_str()) {
                return bad("kind", format!("unknown kind {k:?}; known: {}", DEVICE_KINDS.join(", ")));
            }
        }
        if let Some(c) = d.count {
            if !(1..=MAX_SLOTS).contains(&c) {
                return bad("count", format!("must be between 1 and {MAX_SLOTS}, got {c}"));
            }
        }
        if d.cpus_per_slot == Some(0) {
            return bad("cpus_per_slot", "must be at least 1".into());
        }
        if d.cpus_per_slot.is_some() && d.kind.is_none() {
            return bad("cpus_per_slot", "goes with `kind`; give each [[devices.slot]] its own `cpus`".into());
        }
        if d.base_port.is_some() && d.kind.as_deref() != Some("tpu") {
            return bad("base_port", "is for kind = \"tpu\" (one port per slot)".into());
        }
        if let (Some(p), Some(c)) = (d.base_port, d.count) {
            if p < 1024 || p as usize + c > 65536 {
                return bad("base_port", format!("must be at least 1024 and leave room for {c} ports below 65536, got {p}"));
            }
        }
        if d.slot.len() > MAX_SLOTS {
            return Err(Error::config(format!("[devices] lists {} slots; at most {MAX_SLOTS}", d.slot.len())));
        }
        for (i, s) in d.slot.iter().enumerate() {
            let which = format!("[[devices.slot]] #{}", i + 1);
            if let Some(c) = &s.cpus {
                parse_cpus(c).map_err(|e| Error::config(format!("{which} cpus: {e}")))?;
            }
            for k in s.env.keys() {
                if k.is_empty() || k.contains('=') || k.contains('\0') || k.starts_with("RATCHET_") {
                    return Err(Error::config(format!(
                        "{which} env: {k:?} is not a variable a slot may set (empty, holds '=' or NUL, or is ratchet's own RATCHET_*)"
                    )));
                }
            }
            if s.env.is_empty() && s.cpus.is_none() {
                return Err(Error::config(format!("{which} binds nothing: give it `env = {{ ... }}` or `cpus`"))
                    .hint("e.g. env = { CUDA_VISIBLE_DEVICES = \"0\" }"));
            }
        }
        Ok(())
    }

    /// The chip's ceilings: the preset's figures, each overridable.
    pub fn hardware(&self) -> Option<Hardware> {
        let h = &self.hardware;
        let base = h.preset.as_deref().and_then(hardware::preset).map(|p| p.hw);
        match (base, h.peak_tflops, h.hbm_gbps) {
            (Some(b), t, g) => Some(Hardware { peak_tflops: t.unwrap_or(b.peak_tflops), hbm_gbps: g.unwrap_or(b.hbm_gbps) }),
            (None, Some(t), Some(g)) => Some(Hardware { peak_tflops: t, hbm_gbps: g }),
            _ => None,
        }
    }
}

impl Error {
    fn hint_opt(self, hint: Option<String>) -> Self {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }
}

/// 1-based line number of byte offset `pos`.
fn line_of(text: &str, pos: usize) -> usize {
    text[..pos.min(text.len())].bytes().filter(|&b| b == b'\n').count() + 1
}

/// The 1-based line where `key` is set inside `[table]`, found by a plain scan (good enough for
/// the flat tables of this file).
fn key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if let Some(rest) = line.strip_prefix('[') {
            current = rest.trim_end_matches(']').trim().to_string();
            continue;
        }
        if current == table {
            if let Some((k, _)) = line.split_once('=') {
                if k.trim().trim_matches('"') == key {
                    return Some(i + 1);
                }
            }
        }
    }
    None
}

/// The harness a hypothesis may not touch: ratchet.toml, the files the benchmark command names
/// (e.g. `prepare.py` in `python3 prepare.py`) and `[benchmark] protect`. Paths are relative
/// to the repo root; a trailing `/` protects a whole directory.
pub fn protected_paths(cfg: &Config, root: &Path) -> Vec<String> {
    let mut out = vec![FILE_NAME.to_string()];
    for tok in cfg.benchmark.command.split(|c: char| c.is_whitespace() || c == ';' || c == '&' || c == '|') {
        let tok = tok.trim_matches(|c| c == '"' || c == '\'');
        if tok.is_empty() || tok.starts_with('-') || tok.contains('$') {
            continue;
        }
        let rel = tok.trim_start_matches("./");
        if !Path::new(rel).is_absolute() && root.join(rel).is_file() {
            out.push(rel.to_string());
        }
    }
    out.extend(cfg.benchmark.protect.iter().map(|p| p.trim_start_matches("./").to_string()));
    out.sort();
    out.dedup();
    out
}

/// Whether `path` (relative to the repo root) falls under one of `protected`.
pub fn is_protected(path: &str, protected: &[String]) -> bool {
    protected.iter().any(|p| if p.ends_with('/') { path.starts_with(p.as_str()) } else { path == p })
}

/// Where the config of the repo at `root` lives.
pub fn path_in(root: &Path) -> PathBuf {
    root.join(FILE_NAME)
}

/// A commented `ratchet.toml` for `ratchet init`.
pub fn template(command: &str, preset: &str) -> String {
    // A TOML string, escaped: a command may hold quotes or backslashes.
    let command = toml::Value::String(command.to_string()).to_string();
    let presets = hardware::PRESETS
        .iter()
        .map(|p| format!("#   {:<8} {:>7.0} TFLOP/s {:>6.0} GB/s  ({})", p.name, p.hw.peak_tflops, p.hw.hbm_gbps, p.source))
        .collect::<Vec<_>>()
        .join("\n");
    format!(
        r#"# ratchet.toml: how ratchet measures this repo's kernel. Only [benchmark] command is required.
# The benchmark protocol (environment, result file) is documented in ratchet's docs/protocol.md.

[benchmark]
# Run through `sh -c` from the root of the checkout being measured (the incumbent runs from a
# checkout under .ratchet/; $RATCHET_REPO is the repo's own root, for files git ignores).
command = {command}
timeout_s = 600        # per run; the run's whole process group is killed past it
warmup = 5             # iterations before measuring (JIT compile, caches)
iters = 20             # measured iterations per run
profile_iters = 10     # iterations under jax.profiler (0 = no trace); with a trace, a run's
                       # figure is the median of the kernel's executions in it, not of `iters`
# [benchmark.env]      # extra environment for every run
# XLA_FLAGS = "--xla_dump_to=/tmp/xla"

[hardware]
# One of the presets below, or peak_tflops and hbm_gbps (both override a preset's figures).
{presets}
preset = "{preset}"

[score]
metric = "score"       # score (util x 100 / latency_ms) | latency | tflops; latency is better
                       # lower, score and tflops higher

[decision]
# After every pair, keep when a gain of at least min_effect_pct is 1111 times as likely as no
# gain fitted at its best (any noise level, up to a fifth of the pairs wild, up to a quarter in
# a second mode of runs); revert when a gain is e^2 times less likely than none (or a loss 1111
# times as likely); at `pairs` pairs, keep if their t-test (pairs over 4 robust sds out set
# aside) passes at p < 0.0001, else inconclusive. The noise `ratchet calibrate` measured weighs
# the gain side. At most 0.1% of do-nothing changes kept (docs/decisions.md gives the rates).
# The earlier rule (method = "auto" and its parts) and its keys: docs/configuration.md.
min_effect_pct = 1.0   # smallest gain worth keeping, in percent
pairs = 30             # the budget: at most 30 pairs, then their t-test

[trace]
# kernel = "flash_attention"  # regex naming the kernel's module in the trace
latency = "auto"       # auto (trace when found, else host timings) | host | trace
"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sequential::OnePhase;

    #[test]
    fn a_traced_run_rests_on_enough_executions_and_the_template_says_which() {
        let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"tpu-v5e\"\n").unwrap();
        assert!(cfg.benchmark.profile_iters >= 10, "{}", cfg.benchmark.profile_iters);
        let t = template("python3 prepare.py", "tpu-v5e");
        let line = t.lines().find(|l| l.starts_with("profile_iters")).unwrap();
        assert!(line.contains(&format!("= {}", defaults::profile_iters())), "{line}");
        assert!(t.contains("median of the kernel's executions in it, not of `iters`"), "{t}");
        assert_eq!(Config::parse(&t).unwrap().benchmark.profile_iters, defaults::profile_iters());
    }

    #[test]
    fn minimal_config_is_complete() {
        let cfg = Config::parse("[benchmark]\ncommand = \"python3 prepare.py\"\n[hardware]\npreset = \"tpu-v5e\"\n").unwrap();
        assert_eq!(cfg.benchmark.command, "python3 prepare.py");
        assert_eq!(cfg.benchmark.iters, 20);
        assert_eq!(cfg.decision.max_pairs, 16);
        assert_eq!(cfg.decision.method, Method::RobustRatio);
        assert_eq!(cfg.score.metric, Metric::Score);
        assert_eq!(cfg.score.direction(), Direction::Higher);
        assert_eq!(cfg.hardware(), Some(Hardware { peak_tflops: 197.0, hbm_gbps: 819.0 }));
    }

    #[test]
    fn unknown_key_names_key_and_line() {
        let e = Config::parse("[benchmark]\ncommand = \"x\"\nitres = 3\n").unwrap_err();
        assert!(e.message.contains("line 3"), "{}", e.message);
        assert!(e.message.contains("itres"), "{}", e.message);
    }

    #[test]
    fn bad_value_names_key_and_line() {
        let e = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\n[decision]\nalpha = 0.7\n").unwrap_err();
        assert!(e.message.contains("line 6") && e.message.contains("alpha"), "{}", e.message);
        let e = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"tpu-v9\"\n").unwrap_err();
        assert!(e.message.contains("line 4") && e.message.contains("tpu-v5e"), "{}", e.message);
        let e = Config::parse("[benchmark]\ncommand = \"x\"\niters = \"many\"\n").unwrap_err();
        assert!(e.message.contains("line 3"), "{}", e.message);
    }

    #[test]
    fn decision_keys_are_validated_with_their_line() {
        let head = "[benchmark]\ncommand = \"x\"\n[score]\nmetric = \"latency\"\n[decision]\n";
        let e = Config::parse(&format!("{head}min_pairs = 10\nmax_pairs = 6\n")).unwrap_err();
        assert!(e.message.contains("line 6") && e.message.contains("min_pairs"), "{}", e.message);
        let e = Config::parse(&format!("{head}confirm_alpha = 0.9\n")).unwrap_err();
        assert!(e.message.contains("line 6") && e.message.contains("confirm_alpha"), "{}", e.message);
        let e = Config::parse(&format!("{head}budget = 4\n")).unwrap_err();
        assert!(e.message.contains("line 6") && e.message.contains("`pairs`"), "an unknown key lists the known ones: {}", e.message);
        let cfg = Config::parse(&format!("{head}method = \"fixed\"\nmax_pairs = 5\nspending = \"o-brien-fleming\"\n")).unwrap();
        let p = cfg.decision.params(None);
        assert_eq!(p.looks(), vec![5]);
        assert_eq!(cfg.decision.params(Some(12)).max_pairs, 12);
        assert_eq!(p.likelihood_ratio, OnePhase::Never);
        let cfg = Config::parse(&format!("{head}method = \"likelihood-ratio\"\n")).unwrap();
        let p = cfg.decision.params(None);
        assert!(p.likelihood_ratio == OnePhase::WithHistory && p.confirm && p.max_total_pairs() == 30, "{p:?}");
        let cfg = Config::parse(&format!("{head}method = \"auto\"\n")).unwrap();
        assert_eq!(cfg.decision.params(None).likelihood_ratio, OnePhase::UntilOutlier);
        let e = Config::parse(&format!("{head}method = \"likelihood\"\n")).unwrap_err();
        assert!(e.message.contains("likelihood-ratio"), "the error lists the methods: {}", e.message);
        // The default: the robust ratio alone, its budget `pairs` (absent, rescue_pairs; or
        // --pairs), its t-test at rescue_alpha, both recorded in its levels.
        let robust = |p: &crate::stats::sequential::Params| p.robust.expect("the robust ratio decides");
        let p = Config::parse(head).unwrap().decision.params(None);
        assert_eq!(robust(&p), crate::stats::sequential::RobustLevels::CURRENT);
        let cfg = Config::parse(&format!("{head}rescue_pairs = 40\nrescue_alpha = 0.00005\n")).unwrap();
        let l = robust(&cfg.decision.params(None));
        assert_eq!((l.pairs, l.rescue_alpha), (40, 0.00005));
        assert_eq!(robust(&cfg.decision.params(Some(12))).pairs, 12, "--pairs sets the budget");
        let cfg = Config::parse(&format!("{head}rescue_pairs = 0\nmax_pairs = 20\n")).unwrap();
        assert_eq!(robust(&cfg.decision.params(None)).pairs, 20, "without a rescue, max_pairs");
        // `pairs`, the budget's plain name, wins over both, and `--pairs` over it.
        let cfg = Config::parse(&format!("{head}pairs = 22\nrescue_pairs = 40\n")).unwrap();
        assert_eq!(robust(&cfg.decision.params(None)).pairs, 22);
        assert_eq!(robust(&cfg.decision.params(Some(12))).pairs, 12);
        assert_eq!(cfg.decision.params(None).rescue_pairs, 40, "the earlier rule's rescue keeps its own key");
        let e = Config::parse(&format!("{head}pairs = 1\n")).unwrap_err();
        assert!(e.message.contains("[decision] pairs") && e.message.contains("between 2"), "{}", e.message);
        assert!(DecisionConfig::earlier().params(None).robust.is_none());
    }

    #[test]
    fn out_of_range_values_name_key_line_and_range() {
        let head = "[benchmark]\ncommand = \"x\"\n";
        let tail = "[score]\nmetric = \"latency\"\n";
        for (body, key, range) in [
            ("timeout_s = 1e20\n", "timeout_s", "604800"),
            ("timeout_s = inf\n", "timeout_s", "604800"),
            ("kill_grace_s = 1e300\n", "kill_grace_s", "3600"),
            ("iters = 4000000000\n", "iters", "10000000"),
            ("throttle_reruns = 4000000000\n", "throttle_reruns", "100"),
            ("[decision]\nmax_pairs = 4000000000\n", "max_pairs", "10000"),
            ("[decision]\nconfirm_pairs = 4000000000\n", "confirm_pairs", "10000"),
            ("[decision]\nlook_every = 100\n", "look_every", "max_pairs"),
            ("[decision]\nmin_effect_pct = 1e10\n", "min_effect_pct", "1000"),
        ] {
            let text = format!("{head}{body}{tail}");
            let e = Config::parse(&text).unwrap_err();
            let line = text.lines().position(|l| l.starts_with(key)).unwrap() + 1;
            assert!(e.message.contains(&format!("line {line}")), "{body}: {}", e.message);
            assert!(e.message.contains(key) && e.message.contains(range), "{body}: {}", e.message);
        }
    }

    #[test]
    fn a_direction_against_the_metrics_own_is_refused_and_its_own_accepted() {
        let base = "[benchmark]\ncommand = \"x\"\n[score]\nmetric = \"latency\"\n";
        let e = Config::parse(&format!("{base}direction = \"higher\"\n")).unwrap_err();
        assert!(e.message.contains("line 5") && e.message.contains("latency is better lower"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap_or("").contains("remove the direction line"));
        let cfg = Config::parse(&format!("{base}direction = \"lower\"\n")).unwrap();
        assert_eq!(cfg.score.direction(), Direction::Lower);
        assert!(Metric::lower_is_better("latency") && !Metric::lower_is_better("score") && !Metric::lower_is_better(""));
    }

    #[test]
    fn score_without_hardware_is_an_error_latency_is_not() {
        let e = Config::parse("[benchmark]\ncommand = \"x\"\n").unwrap_err();
        assert!(e.message.contains("peak figures"), "{}", e.message);
        let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[score]\nmetric = \"latency\"\n").unwrap();
        assert_eq!(cfg.score.direction(), Direction::Lower);
    }

    #[test]
    fn explicit_figures_override_preset() {
        let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\nhbm_gbps = 3000\n").unwrap();
        assert_eq!(cfg.hardware(), Some(Hardware { peak_tflops: 989.0, hbm_gbps: 3000.0 }));
        let cfg = Config::parse("[benchmark]\ncommand = \"x\"\n[hardware]\npeak_tflops = 10\nhbm_gbps = 100\n").unwrap();
        assert_eq!(cfg.hardware(), Some(Hardware { peak_tflops: 10.0, hbm_gbps: 100.0 }));
    }

    #[test]
    fn protected_paths_come_from_the_command_and_the_list() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bench")).unwrap();
        std::fs::write(d.path().join("bench/prepare.py"), "").unwrap();
        let cfg = Config::parse(
            "[benchmark]\ncommand = \"cd . && python3 ./bench/prepare.py --fast $X\"\nprotect = [\"data/\", \"ref.py\"]\n[score]\nmetric = \"latency\"\n",
        )
        .unwrap();
        let p = protected_paths(&cfg, d.path());
        assert_eq!(p, vec!["bench/prepare.py", "data/", "ratchet.toml", "ref.py"]);
        assert!(is_protected("data/inputs.npy", &p));
        assert!(is_protected("bench/prepare.py", &p));
        assert!(!is_protected("bench/kernel.py", &p));
    }

    #[test]
    fn template_parses() {
        let text = template("python3 prepare.py", "tpu-v5e");
        let cfg = Config::parse(&text).unwrap();
        assert_eq!(cfg.benchmark.command, "python3 prepare.py");
        // Its [decision] sets only what the default rule reads, at the defaults.
        assert_eq!(cfg.decision.params(None).robust, Some(crate::stats::sequential::RobustLevels::CURRENT));
        let decision = &text[text.find("[decision]").unwrap()..text.find("[trace]").unwrap()];
        let keys: Vec<&str> =
            decision.lines().filter(|l| !l.starts_with('#') && l.contains(" = ")).map(|l| l.split(" = ").next().unwrap().trim()).collect();
        assert_eq!(keys, ["min_effect_pct", "pairs"], "{decision}");
    }
}
