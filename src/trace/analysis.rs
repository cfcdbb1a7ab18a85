//! From decoded events to per-execution module times, the kernel's choice and its op breakdown.
//!
//! The best source of a module's execution time is the device timeline: on TPU the
//! `XLA Modules` line has one event per execution; on GPU the kernels of one execution sit on
//! `Stream #N(Kernel)` lines and are tied to their host launch by `correlation_id`. On CPU
//! there is no module-level event, so the op events of the executor threads are grouped by
//! (`hlo_module`, `run_id`), which is what one execution shares. Everything here streams over
//! the lazily decoded events: two passes (modules, then the chosen kernel's ops) and no copy
//! of the event list.

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

use regex::Regex;

use super::xplane::{StatValue, XLine, XPlane, XSpace};
use super::{CategoryStat, DeviceInfo, KernelStats, ModuleStats, OpStat};

/// Picoseconds per microsecond.
const PS_PER_US: f64 = 1e6;

/// One execution of a module: its span on the timeline and how many op events it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exec {
    pub start_ps: i64,
    pub end_ps: i64,
    pub ops: u32,
}

impl Exec {
    fn new(start_ps: i64, end_ps: i64) -> Self {
        Exec { start_ps, end_ps, ops: 1 }
    }

    fn extend(&mut self, start_ps: i64, end_ps: i64) {
        self.start_ps = self.start_ps.min(start_ps);
        self.end_ps = self.end_ps.max(end_ps);
        self.ops += 1;
    }

    fn us(&self) -> f64 {
        (self.end_ps - self.start_ps) as f64 / PS_PER_US
    }
}

/// All executions of one compiled module, in time order.
#[derive(Debug, Clone)]
pub(crate) struct ModuleExecs {
    /// Name as the runtime reports it (`jit_flash_attention`).
    pub module: String,
    pub program_id: Option<u64>,
    pub execs: Vec<Exec>,
    /// Whether `ops` counts op events (CPU, GPU) or is meaningless (TPU module events).
    pub counts_ops: bool,
}

impl ModuleExecs {
    /// `module(program_id)`, the form `/host:metadata` and TPU `XLA Modules` use.
    pub fn display_name(&self) -> String {
        match self.program_id {
            Some(id) => format!("{}({id})", self.module),
            None => self.module.clone(),
        }
    }

    pub fn stats(&self) -> ModuleStats {
        let spans: Vec<f64> = self.execs.iter().map(Exec::us).collect();
        let s = Summary::of(&spans);
        let ops = self.counts_ops.then(|| self.execs.iter().map(|e| f64::from(e.ops)).sum::<f64>() / self.execs.len() as f64);
        ModuleStats {
            name: self.display_name(),
            module: self.module.clone(),
            program_id: self.program_id,
            executions: self.execs.len(),
            median_us: s.median,
            mean_us: s.mean,
            min_us: s.min,
            max_us: s.max,
            total_us: s.total,
            ops_per_execution: ops,
        }
    }
}

/// Median, mean, min, max and total of a sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Summary {
    pub median: f64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
    pub total: f64,
}

impl Summary {
    pub fn of(xs: &[f64]) -> Summary {
        if xs.is_empty() {
            return Summary { median: f64::NAN, mean: f64::NAN, min: f64::NAN, max: f64::NAN, total: 0.0 };
        }
        let mut v = xs.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let total: f64 = v.iter().sum();
        Summary { median, mean: total / n as f64, min: v[0], max: v[n - 1], total }
    }
}

/// Groups executions by module key and execution key, keeping first-start/last-end.
#[derive(Default)]
pub(crate) struct ExecGroups<'s> {
    groups: HashMap<(&'s str, Option<u64>, i64), Exec>,
}

impl<'s> ExecGroups<'s> {
    pub fn add(&mut self, module: &'s str, program: Option<u64>, key: i64, start: i64, end: i64) {
        self.groups.entry((module, program, key)).and_modify(|e| e.extend(start, end)).or_insert_with(|| Exec::new(start, end));
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    pub fn finish(self, counts_ops: bool) -> Vec<ModuleExecs> {
        let mut by_module: HashMap<(&str, Option<u64>), Vec<Exec>> = HashMap::new();
        for ((m, p, _), e) in self.groups {
            by_module.entry((m, p)).or_default().push(e);
        }
        let mut out: Vec<ModuleExecs> = by_module
            .into_iter()
            .map(|((m, p), mut execs)| {
                execs.sort_by_key(|e| (e.start_ps, e.end_ps));
                ModuleExecs { module: m.to_string(), program_id: p, execs, counts_ops }
            })
            .collect();
        sort_modules(&mut out);
        out
    }
}

/// Most executions first, then by name, so output and ties are deterministic.
pub(crate) fn sort_modules(v: &mut [ModuleExecs]) {
    v.sort_by(|a, b| b.execs.len().cmp(&a.execs.len()).then_with(|| a.module.cmp(&b.module)).then_with(|| a.program_id.cmp(&b.program_id)));
}

/// Which timeline the executions came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Tpu { plane: usize },
    Gpu { plane: usize },
    Cpu,
}

/// The executed modules of a capture and where they were read.
pub(crate) struct Collected {
    pub mode: Mode,
    pub source: String,
    pub modules: Vec<ModuleExecs>,
    pub warnings: Vec<String>,
}

/// Stat ids of one plane, resolved once so the event loops compare integers.
struct Ids {
    hlo_op: Option<i64>,
    hlo_module: Option<i64>,
    run_id: Option<i64>,
    program_id: Option<i64>,
    correlation_id: Option<i64>,
}

impl Ids {
    fn of(plane: &XPlane<'_>) -> Ids {
        Ids {
            hlo_op: plane.stat_id("hlo_op"),
            hlo_module: plane.stat_id("hlo_module"),
            run_id: plane.stat_id("run_id"),
            program_id: plane.stat_id("program_id"),
            correlation_id: plane.stat_id("correlation_id"),
        }
    }
}

/// The stats of an op event that matter for grouping; the first occurrence of a stat wins.
#[derive(Default)]
struct OpStats<'s> {
    op: Option<&'s str>,
    module: Option<&'s str>,
    run_id: Option<i64>,
    program_id: Option<u64>,
    correlation_id: Option<i64>,
}

fn op_stats<'s>(plane: &XPlane<'s>, ids: &Ids, ev: &super::xplane::XEvent<'s>) -> OpStats<'s> {
    let mut s = OpStats::default();
    let wanted = [ids.hlo_op, ids.hlo_module, ids.run_id, ids.program_id, ids.correlation_id];
    for st in ev.stats_where(|id| wanted.contains(&Some(id))) {
        let id = Some(st.metadata_id);
        if id == ids.hlo_op && s.op.is_none() {
            s.op = plane.stat_str(&st.value);
        } else if id == ids.hlo_module && s.module.is_none() {
            s.module = plane.stat_str(&st.value);
        } else if id == ids.run_id && s.run_id.is_none() {
            s.run_id = st.value.as_i64();
        } else if id == ids.program_id && s.program_id.is_none() {
            s.program_id = st.value.as_u64();
        } else if id == ids.correlation_id && s.correlation_id.is_none() {
            s.correlation_id = st.value.as_i64();
        }
    }
    s
}

/// The device index of `/device:TPU:3` (for ordering planes numerically).
fn device_index(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

fn device_planes<'a, 's>(space: &'a XSpace<'s>, prefix: &str) -> Vec<(usize, &'a XPlane<'s>)> {
    let mut v: Vec<_> = space.planes.iter().enumerate().filter_map(|(i, p)| device_index(p.name, prefix).map(|n| (n, i, p))).collect();
    v.sort_by_key(|(n, _, _)| *n);
    v.into_iter().map(|(_, i, p)| (i, p)).collect()
}

/// Splits `jit_f(12190760917235803885)` into the module name and its program id.
pub(crate) fn split_program_id(name: &str) -> (&str, Option<u64>) {
    if let Some(stripped) = name.strip_suffix(')') {
        if let Some(open) = stripped.rfind('(') {
            if let Ok(id) = stripped[open + 1..].parse::<u64>() {
                return (&name[..open], Some(id));
            }
        }
    }
    (name, None)
}

/// TPU: one `XLA Modules` event per execution, on the first TPU plane that has any.
fn collect_tpu(space: &XSpace<'_>) -> Option<Collected> {
    let planes = device_planes(space, "/device:TPU:");
    let with_modules: Vec<_> =
        planes.iter().filter(|(_, p)| p.lines.iter().any(|l| l.name == "XLA Modules" && l.event_count > 0)).collect();
    let &&(idx, plane) = with_modules.first()?;
    let line = plane.lines.iter().find(|l| l.name == "XLA Modules")?;
    let mut groups = ExecGroups::default();
    for (n, ev) in line.events().enumerate() {
        let (module, program) = split_program_id(plane.event_name(ev.metadata_id));
        let start = line.start_ps(&ev);
        // Each module event is one execution; its index keeps repeated run_ids apart.
        groups.add(module, program, n as i64, start, start + ev.duration_ps);
    }
    let mut warnings = Vec::new();
    if with_modules.len() > 1 {
        warnings.push(format!("{} TPU planes executed modules; times are from {} only", with_modules.len(), plane.name));
    }
    Some(Collected {
        mode: Mode::Tpu { plane: idx },
        source: format!("{} / XLA Modules", plane.name),
        modules: groups.finish(false),
        warnings,
    })
}

/// A host-side execution window of a GPU module (`jit_f:XLA GPU module`, or
/// `GpuExecutable::ExecuteThunks`).
#[derive(Clone, Copy)]
struct Window {
    start: i64,
    end: i64,
}

fn is_gpu_window(name: &str) -> bool {
    name.ends_with(":XLA GPU module") || name == "GpuExecutable::ExecuteThunks"
}

/// The innermost window containing `t`: the latest-starting one that has not ended.
fn containing_window(windows: &[Window], t: i64) -> Option<usize> {
    let upto = windows.partition_point(|w| w.start <= t);
    // Nested windows of one execution start close together; a short look back is enough.
    (upto.saturating_sub(64)..upto).rev().find(|&i| windows[i].end >= t)
}

/// GPU: kernels with an `hlo_module` stat on the `Stream #N` lines of the busiest GPU plane,
/// grouped into executions by the host window that launched them.
fn collect_gpu(space: &XSpace<'_>) -> Option<Collected> {
    let planes = device_planes(space, "/device:GPU:");
    let mut best: Option<(usize, usize)> = None; // (kernel count, space index)
    for &(idx, plane) in &planes {
        let ids = Ids::of(plane);
        if ids.hlo_module.is_none() {
            continue;
        }
        let n = plane
            .lines
            .iter()
            .filter(|l| l.name.starts_with("Stream #"))
            .flat_map(|l| l.events())
            .filter(|e| op_stats(plane, &ids, e).module.is_some())
            .count();
        if n > 0 && best.map_or(true, |(b, _)| n > b) {
            best = Some((n, idx));
        }
    }
    let (_, idx) = best?;
    let plane = &space.planes[idx];
    let ids = Ids::of(plane);

    // Host side: launch time per correlation id, and the module execution windows. Both
    // window kinds nest around the same execution; using one kind only keeps every kernel of
    // an execution in the same window.
    let mut launches: HashMap<i64, i64> = HashMap::new();
    let mut module_windows: Vec<Window> = Vec::new();
    let mut thunk_windows: Vec<Window> = Vec::new();
    for host in space.planes.iter().filter(|p| p.name.starts_with("/host:")) {
        let hids = Ids::of(host);
        let window_kind: HashMap<i64, bool> =
            host.event_metadata.values().filter(|m| is_gpu_window(m.name)).map(|m| (m.id, m.name.ends_with(":XLA GPU module"))).collect();
        if hids.correlation_id.is_none() && window_kind.is_empty() {
            continue;
        }
        for line in &host.lines {
            for ev in line.events() {
                let start = line.start_ps(&ev);
                if let Some(&is_module) = window_kind.get(&ev.metadata_id) {
                    let w = Window { start, end: start + ev.duration_ps };
                    if is_module {
                        module_windows.push(w);
                    } else {
                        thunk_windows.push(w);
                    }
                }
                if let Some(c) = op_stats(host, &hids, &ev).correlation_id {
                    launches.entry(c).or_insert(start);
                }
            }
        }
    }
    let mut windows = if module_windows.is_empty() { thunk_windows } else { module_windows };
    windows.sort_by_key(|w| (w.start, Reverse(w.end)));

    let mut groups = ExecGroups::default();
    let mut unmatched = 0usize;
    let mut lines_used = Vec::new();
    let mut next_orphan = -1i64;
    for line in plane.lines.iter().filter(|l| l.name.starts_with("Stream #")) {
        let mut used = false;
        for ev in line.events() {
            let s = op_stats(plane, &ids, &ev);
            let Some(module) = s.module else { continue };
            used = true;
            let start = line.start_ps(&ev);
            let window = s.correlation_id.and_then(|c| launches.get(&c)).and_then(|&t| containing_window(&windows, t));
            let key = match window {
                Some(w) => w as i64,
                None => {
                    // Without a host window, each kernel counts as its own execution.
                    unmatched += 1;
                    next_orphan -= 1;
                    next_orphan
                }
            };
            groups.add(module, s.program_id, key, start, start + ev.duration_ps);
        }
        if used {
            lines_used.push(line.name);
        }
    }
    let mut warnings = Vec::new();
    if unmatched > 0 {
        warnings.push(format!(
            "{unmatched} GPU kernel(s) could not be tied to a host module execution \
             (no launch event or no `XLA GPU module` window); each counts as one execution"
        ));
    }
    Some(Collected {
        mode: Mode::Gpu { plane: idx },
        source: format!("{} / {}", plane.name, lines_used.join(", ")),
        modules: groups.finish(true),
        warnings,
    })
}

/// Whether a host line is an XLA CPU executor thread.
fn is_cpu_executor_line(line: &XLine<'_>) -> bool {
    line.name.starts_with("tf_XLA") || line.name.contains("XLAPjRtCpuClient") || line.name.contains("XLATfrtCpuClient")
}

/// CPU: op events carrying `hlo_op`, grouped by (`hlo_module`, `run_id`) across all executor
/// lines; one group is one execution.
fn collect_cpu(space: &XSpace<'_>) -> Option<Collected> {
    let mut groups = ExecGroups::default();
    let mut lines = 0usize;
    let mut plane_name = "";
    for plane in space.planes.iter().filter(|p| p.name.starts_with("/host:")) {
        let ids = Ids::of(plane);
        if ids.hlo_op.is_none() || ids.hlo_module.is_none() {
            continue;
        }
        for line in plane.lines.iter().filter(|l| is_cpu_executor_line(l)) {
            let mut used = false;
            for ev in line.events() {
                let s = op_stats(plane, &ids, &ev);
                let (Some(_), Some(module)) = (s.op, s.module) else {
                    continue;
                };
                used = true;
                let start = line.start_ps(&ev);
                groups.add(module, s.program_id, s.run_id.unwrap_or(0), start, start + ev.duration_ps);
            }
            if used {
                lines += 1;
                plane_name = plane.name;
            }
        }
    }
    if groups.is_empty() {
        return None;
    }
    Some(Collected {
        mode: Mode::Cpu,
        source: format!("{plane_name} / tf_XLAPjRtCpuClient/* ({lines} line(s); op events grouped by hlo_module, run_id)"),
        modules: groups.finish(true),
        warnings: Vec::new(),
    })
}

/// Module executions from the best source the capture has: TPU, then GPU, then CPU.
pub(crate) fn collect(space: &XSpace<'_>) -> Option<Collected> {
    collect_tpu(space).or_else(|| collect_gpu(space)).or_else(|| collect_cpu(space))
}

/// Modules that are jax's helpers around a kernel (data movement, RNG, dtype conversion),
/// never what a benchmark measures.
fn is_obvious_non_kernel(module: &str) -> bool {
    let base = module.trim_start_matches("jit_").trim_start_matches('_');
    const HELPERS: &[&str] = &[
        "convert_element_type",
        "broadcast_in_dim",
        "threefry_seed",
        "threefry_split",
        "threefry_fold_in",
        "threefry_random_bits",
        "random_bits",
        "random_seed",
        "random_split",
        "random_wrap",
        "random_unwrap",
        "normal",
        "uniform",
        "iota",
        "reshape",
        "squeeze",
        "expand_dims",
        "stage",
        "unstack",
        "concatenate",
        "copy",
        "device_put",
        "psum",
        "zeros_like",
        "ones_like",
        "full",
    ];
    HELPERS.contains(&base)
}

/// Chooses the kernel among the executed modules: by name pattern when given, else the module
/// executed most often among those that are not jax helpers; a tie goes to the one module whose
/// executions the user's `kernel_step` annotations (`steps`, spans in ps) enclose most often.
/// Returns the index into `modules`, or an error that names the candidates.
pub(crate) fn select_kernel(modules: &[ModuleExecs], pattern: Option<&str>, steps: &[(i64, i64)]) -> anyhow::Result<usize> {
    let listing = |idx: &[usize]| {
        idx.iter().map(|&i| format!("{} ({} executions)", modules[i].display_name(), modules[i].execs.len())).collect::<Vec<_>>().join(", ")
    };
    let all: Vec<usize> = (0..modules.len()).collect();
    if modules.is_empty() {
        anyhow::bail!("the capture holds no executed XLA module");
    }
    let candidates: Vec<usize> = match pattern {
        Some(p) => {
            let re = Regex::new(p).map_err(|e| anyhow::anyhow!("invalid kernel pattern {p:?}: {e}"))?;
            let hits: Vec<usize> =
                all.iter().copied().filter(|&i| re.is_match(&modules[i].display_name()) || re.is_match(&modules[i].module)).collect();
            if hits.is_empty() {
                anyhow::bail!("no executed module matches the kernel pattern {p:?}; executed modules: {}", listing(&all));
            }
            hits
        }
        None => {
            let kernels: Vec<usize> = all.iter().copied().filter(|&i| !is_obvious_non_kernel(&modules[i].module)).collect();
            if kernels.is_empty() {
                all
            } else {
                kernels
            }
        }
    };
    let most = candidates.iter().map(|&i| modules[i].execs.len()).max().unwrap_or(0);
    let top: Vec<usize> = candidates.iter().copied().filter(|&i| modules[i].execs.len() == most).collect();
    if top.len() > 1 && pattern.is_none() && !steps.is_empty() {
        let enclosed = |i: usize| modules[i].execs.iter().filter(|e| steps.iter().any(|&(s, t)| s <= e.start_ps && e.end_ps <= t)).count();
        let counts: Vec<usize> = top.iter().map(|&i| enclosed(i)).collect();
        let best = counts.iter().copied().max().unwrap_or(0);
        if best > 0 && counts.iter().filter(|&&c| c == best).count() == 1 {
            return Ok(top[counts.iter().position(|&c| c == best).unwrap()]);
        }
    }
    if top.len() > 1 {
        let how = match pattern {
            Some(p) => format!("the kernel pattern {p:?} matches"),
            None => "cannot tell which module is the kernel:".to_string(),
        };
        anyhow::bail!(
            "{how} {} modules executed {most} times each: {}; pass --kernel PATTERN \
             (or set \"kernel\" in ratchet-result.json) to pick one",
            top.len(),
            listing(&top)
        );
    }
    Ok(top[0])
}

/// One op event of the kernel on one line, before self time is known.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LineOp<'s> {
    pub start: i64,
    pub dur: i64,
    pub name: &'s str,
    pub category: Option<&'s str>,
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
}

#[derive(Debug, Default, Clone)]
struct OpAgg {
    category: String,
    count: u64,
    inclusive_ps: i64,
    self_ps: i64,
    flops: Option<f64>,
    bytes: Option<f64>,
}

/// Per-op totals of the kernel's executions.
#[derive(Debug, Default)]
pub(crate) struct OpTable {
    ops: HashMap<String, OpAgg>,
}

impl OpTable {
    /// Adds one line's op events. Ops nest on a line (a `while` encloses its body), so each
    /// op's self time is its duration minus that of the ops directly inside it; summing self
    /// times never counts the same picosecond twice.
    pub fn add_line(&mut self, ops: &mut [LineOp<'_>]) {
        ops.sort_by_key(|o| (o.start, Reverse(o.dur)));
        // (end, index into ops, picoseconds covered by direct children)
        let mut stack: Vec<(i64, usize, i64)> = Vec::new();
        for i in 0..ops.len() {
            let op = ops[i];
            while let Some(&(end, j, child)) = stack.last() {
                if end <= op.start {
                    stack.pop();
                    self.record(&ops[j], child);
                } else {
                    break;
                }
            }
            if let Some(top) = stack.last_mut() {
                // Clip an op that overlaps its parent's end instead of nesting cleanly.
                top.2 += op.dur.min(top.0 - op.start);
            }
            stack.push((op.start + op.dur, i, 0));
        }
        while let Some((_, j, child)) = stack.pop() {
            self.record(&ops[j], child);
        }
    }

    fn record(&mut self, op: &LineOp<'_>, child_ps: i64) {
        // Look up by &str first: an owned key is made once per distinct op, not once per event.
        if !self.ops.contains_key(op.name) {
            self.ops.insert(op.name.to_string(), OpAgg { category: op_category(op.name, op.category), ..OpAgg::default() });
        }
        let agg = self.ops.get_mut(op.name).expect("inserted above");
        agg.count += 1;
        agg.inclusive_ps += op.dur;
        agg.self_ps += (op.dur - child_ps).max(0);
        agg.flops = agg.flops.or(op.flops);
        agg.bytes = agg.bytes.or(op.bytes);
    }

    /// The op and category tables, largest self time first.
    pub fn finish(self, executions: usize) -> (Vec<OpStat>, Vec<CategoryStat>) {
        let total_self: i64 = self.ops.values().map(|a| a.self_ps).sum();
        let frac = |ps: i64| {
            if total_self > 0 {
                ps as f64 / total_self as f64
            } else {
                0.0
            }
        };
        let execs = executions.max(1) as f64;
        let mut ops: Vec<OpStat> = self
            .ops
            .into_iter()
            .map(|(name, a)| OpStat {
                name,
                category: a.category,
                count: a.count,
                total_us: a.self_ps as f64 / PS_PER_US,
                inclusive_us: a.inclusive_ps as f64 / PS_PER_US,
                per_execution_us: a.self_ps as f64 / PS_PER_US / execs,
                fraction: frac(a.self_ps),
                flops: a.flops,
                bytes: a.bytes,
            })
            .collect();
        ops.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.name.cmp(&b.name)));
        let mut cats: HashMap<&str, (f64, u64)> = HashMap::new();
        for o in &ops {
            let e = cats.entry(o.category.as_str()).or_default();
            e.0 += o.total_us;
            e.1 += o.count;
        }
        let mut categories: Vec<CategoryStat> = cats
            .into_iter()
            .map(|(c, (us, n))| CategoryStat {
                category: c.to_string(),
                total_us: us,
                per_execution_us: us / execs,
                count: n,
                fraction: if total_self > 0 { us * PS_PER_US / total_self as f64 } else { 0.0 },
            })
            .collect();
        categories.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.category.cmp(&b.category)));
        (ops, categories)
    }
}

/// The category of an op: the capture's own `hlo_category` when it has one (TPU), else one
/// derived from the op's name, which XLA builds from the opcode (`copy.38`, `while.30`,
/// `subtract_exponential_fusion`, `wrapped_add.1`, `custom-call.1`, `gemm_fusion_dot_general`).
pub fn op_category(name: &str, hlo_category: Option<&str>) -> String {
    if let Some(c) = hlo_category.filter(|c| !c.is_empty()) {
        return c.to_string();
    }
    // Drop the `.N` uniquifier and the `wrapped_` prefix of single-op fusions.
    let base = match name.rsplit_once('.') {
        Some((head, tail)) if tail.chars().all(|c| c.is_ascii_digit()) => head,
        _ => name,
    };
    let base = base.strip_prefix("wrapped_").unwrap_or(base);
    let lower = base.to_ascii_lowercase();
    let exact = match lower.as_str() {
        "dot" | "dot_general" | "convolution" => Some("dot"),
        "custom-call" | "custom_call" => Some("custom-call"),
        "copy" | "copy-start" | "copy-done" => Some("copy"),
        "exponential" | "exp" => Some("exponential"),
        "reduce" | "reduce-window" | "reduce_sum" | "reduce_max" | "reduce_min" => Some("reduce"),
        "while" => Some("while"),
        "conditional" => Some("conditional"),
        "call" => Some("call"),
        "fusion" => Some("fusion"),
        "transpose"
        | "reshape"
        | "bitcast"
        | "broadcast"
        | "slice"
        | "dynamic-slice"
        | "dynamic-update-slice"
        | "concatenate"
        | "pad"
        | "gather"
        | "scatter"
        | "iota" => Some("data formatting"),
        "all-reduce" | "all-gather" | "reduce-scatter" | "all-to-all" | "collective-permute" => Some("collective"),
        "add" | "subtract" | "multiply" | "divide" | "maximum" | "minimum" | "compare" | "select" | "convert" | "negate" | "abs"
        | "sqrt" | "rsqrt" | "tanh" | "log" | "power" | "and" | "or" | "not" | "clamp" => Some("elementwise"),
        _ => None,
    };
    if let Some(c) = exact {
        return c.to_string();
    }
    if lower.contains("gemm") || lower.contains("cublas") || lower.starts_with("cijk_") {
        "dot".to_string()
    } else if lower.ends_with("fusion") || lower.contains("_fusion") {
        "fusion".to_string()
    } else if lower.starts_with("custom-call") || lower.starts_with("custom_call") {
        "custom-call".to_string()
    } else {
        "other".to_string()
    }
}

/// Costs the capture attaches to an op's metadata (TPU): category, FLOPs, bytes accessed,
/// program id, short name.
struct OpMeta<'s> {
    name: &'s str,
    category: Option<&'s str>,
    flops: Option<f64>,
    bytes: Option<f64>,
    program_id: Option<u64>,
}

fn op_metas<'s>(plane: &XPlane<'s>) -> HashMap<i64, OpMeta<'s>> {
    let id = |n: &str| plane.stat_id(n);
    let (cat, flops, bytes, prog) = (id("hlo_category"), id("flops"), id("bytes_accessed"), id("program_id"));
    plane
        .event_metadata
        .values()
        .map(|m| {
            let get = |want: Option<i64>| want.and_then(|w| m.stats.iter().find(|s| s.metadata_id == w)).map(|s| s.value);
            let meta = OpMeta {
                name: if m.display_name.is_empty() { m.name } else { m.display_name },
                category: get(cat).and_then(|v| plane.stat_str(&v)),
                flops: get(flops).and_then(|v| v.as_f64()),
                bytes: get(bytes).and_then(|v| v.as_f64()),
                program_id: get(prog).and_then(|v| v.as_u64()),
            };
            (m.id, meta)
        })
        .collect()
}

/// Whether `[start, end)` lies inside one of the (sorted, non-overlapping) executions.
fn inside(execs: &[Exec], start: i64, end: i64) -> bool {
    let i = execs.partition_point(|e| e.start_ps <= start);
    i > 0 && end <= execs[i - 1].end_ps
}

/// The kernel's per-execution times and op breakdown (second pass over the events).
pub(crate) fn kernel_stats(space: &XSpace<'_>, c: &Collected, k: &ModuleExecs) -> KernelStats {
    let mut table = OpTable::default();
    let mut buf: Vec<LineOp<'_>> = Vec::new();
    match c.mode {
        Mode::Tpu { plane } => {
            let plane = &space.planes[plane];
            let metas = op_metas(plane);
            for line in plane.lines.iter().filter(|l| l.name == "XLA Ops") {
                buf.clear();
                for ev in line.events() {
                    let Some(m) = metas.get(&ev.metadata_id) else {
                        continue;
                    };
                    let start = line.start_ps(&ev);
                    let end = start + ev.duration_ps;
                    let ours = match (m.program_id, k.program_id) {
                        (Some(a), Some(b)) => a == b && inside(&k.execs, start, end),
                        _ => inside(&k.execs, start, end),
                    };
                    if ours {
                        buf.push(LineOp { start, dur: ev.duration_ps, name: m.name, category: m.category, flops: m.flops, bytes: m.bytes });
                    }
                }
                table.add_line(&mut buf);
            }
        }
        Mode::Gpu { plane } => {
            let plane = &space.planes[plane];
            let ids = Ids::of(plane);
            for line in plane.lines.iter().filter(|l| l.name.starts_with("Stream #")) {
                buf.clear();
                for ev in line.events() {
                    let s = op_stats(plane, &ids, &ev);
                    if s.module == Some(k.module.as_str()) && s.program_id == k.program_id {
                        buf.push(LineOp {
                            start: line.start_ps(&ev),
                            dur: ev.duration_ps,
                            name: s.op.unwrap_or_else(|| plane.event_name(ev.metadata_id)),
                            category: None,
                            flops: None,
                            bytes: None,
                        });
                    }
                }
                table.add_line(&mut buf);
            }
        }
        Mode::Cpu => {
            for plane in space.planes.iter().filter(|p| p.name.starts_with("/host:")) {
                let ids = Ids::of(plane);
                if ids.hlo_op.is_none() {
                    continue;
                }
                for line in plane.lines.iter().filter(|l| is_cpu_executor_line(l)) {
                    buf.clear();
                    for ev in line.events() {
                        let s = op_stats(plane, &ids, &ev);
                        if let (Some(op), true) = (s.op, s.module == Some(k.module.as_str()) && s.program_id == k.program_id) {
                            buf.push(LineOp {
                                start: line.start_ps(&ev),
                                dur: ev.duration_ps,
                                name: op,
                                category: None,
                                flops: None,
                                bytes: None,
                            });
                        }
                    }
                    table.add_line(&mut buf);
                }
            }
        }
    }
    kernel_from_table(k, table)
}

/// Assembles the kernel's figures from its executions and op table.
pub(crate) fn kernel_from_table(k: &ModuleExecs, table: OpTable) -> KernelStats {
    let per: Vec<f64> = k.execs.iter().map(Exec::us).collect();
    let s = Summary::of(&per);
    let n = k.execs.len();
    let (op_breakdown, category_breakdown) = table.finish(n);
    let cost = |f: fn(&OpStat) -> Option<f64>| {
        let known: Vec<f64> = op_breakdown.iter().filter_map(|o| f(o).map(|v| v * o.count as f64)).collect();
        (!known.is_empty()).then(|| known.iter().sum::<f64>() / n.max(1) as f64)
    };
    KernelStats {
        name: k.display_name(),
        executions: n,
        median_us: s.median,
        mean_us: s.mean,
        min_us: s.min,
        max_us: s.max,
        cost_model_flops: cost(|o| o.flops),
        cost_model_bytes: cost(|o| o.bytes),
        per_execution_us: per,
        op_breakdown,
        category_breakdown,
    }
}

/// Peak figures of the device plane the times came from (TPU planes carry them as stats).
pub(crate) fn device_info(space: &XSpace<'_>, c: &Collected) -> Option<DeviceInfo> {
    let idx = match c.mode {
        Mode::Tpu { plane } | Mode::Gpu { plane } => plane,
        Mode::Cpu => return None,
    };
    let p = &space.planes[idx];
    let num = |n: &str| p.plane_stat(n).and_then(|v| v.as_f64());
    Some(DeviceInfo {
        plane: p.name.to_string(),
        device_type: p
            .plane_stat("device_type_string")
            .and_then(|v| p.stat_str(&v))
            .or_else(|| p.plane_stat("device_vendor").and_then(|v| p.stat_str(&v)))
            .map(str::to_string),
        peak_tflops: num("peak_teraflops_per_second"),
        hbm_gbps: num("peak_hbm_bw_gigabytes_per_second").or_else(|| num("memory_bandwidth").map(|b| b / 1e9)),
    })
}

/// Spans (start, end in ps) of the user's `kernel_step_i` / `kernel_step` annotations on host
/// lines, in time order.
pub(crate) fn host_step_windows(space: &XSpace<'_>) -> Vec<(i64, i64)> {
    let step = Regex::new(r"^kernel_step(_\d+)?$").expect("static regex");
    let mut out: Vec<(i64, i64)> = Vec::new();
    for plane in space.planes.iter().filter(|p| p.name.starts_with("/host:")) {
        // One metadata per step name (`kernel_step_0`, `kernel_step_1`, ...): thousands of ids.
        let ids: HashSet<i64> = plane.event_metadata.values().filter(|m| step.is_match(m.name)).map(|m| m.id).collect();
        if ids.is_empty() {
            continue;
        }
        // Executor lines hold the bulk of the events and never the user's annotations.
        for line in plane.lines.iter().filter(|l| !is_cpu_executor_line(l)) {
            for ev in line.events().filter(|e| ids.contains(&e.metadata_id)) {
                let start = line.start_ps(&ev);
                out.push((start, start.saturating_add(ev.duration_ps)));
            }
        }
    }
    out.sort_unstable();
    out
}

/// HLO counts of the kernel from the `Hlo Proto` stat of `/host:metadata`.
pub(crate) fn kernel_hlo_proto(space: &XSpace<'_>, k: &ModuleExecs) -> Option<Result<super::hlo::HloStats, super::hlo::HloProtoError>> {
    let plane = space.plane("/host:metadata")?;
    let proto_id = plane.stat_id("Hlo Proto")?;
    let want = k.display_name();
    let md = plane.event_metadata.values().find(|m| m.name == want).or_else(|| {
        // Without a program id (JSON fallback), a unique module name still identifies it.
        let mut same = plane.event_metadata.values().filter(|m| split_program_id(m.name).0 == k.module);
        let first = same.next()?;
        same.next().is_none().then_some(first)
    })?;
    md.stats.iter().find(|s| s.metadata_id == proto_id).and_then(|s| match s.value {
        StatValue::Bytes(b) => Some(super::hlo::hlo_stats_from_proto(b)),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start: i64, dur: i64, name: &'static str) -> LineOp<'static> {
        LineOp { start, dur, name, category: None, flops: None, bytes: None }
    }

    #[test]
    fn self_time_subtracts_nested_ops() {
        let mut t = OpTable::default();
        // while.1 [0,100) holds dot.2 [10,40) and exp.3 [50,60); copy.4 after it.
        let mut ops = vec![op(10, 30, "dot.2"), op(0, 100, "while.1"), op(50, 10, "exp.3"), op(100, 5, "copy.4")];
        t.add_line(&mut ops);
        let (ops, cats) = t.finish(1);
        let get = |n: &str| ops.iter().find(|o| o.name == n).unwrap();
        assert_eq!(get("while.1").total_us * PS_PER_US, 60.0);
        assert_eq!(get("while.1").inclusive_us * PS_PER_US, 100.0);
        assert_eq!(get("dot.2").total_us * PS_PER_US, 30.0);
        let sum: f64 = cats.iter().map(|c| c.total_us).sum();
        assert!((sum * PS_PER_US - 105.0).abs() < 1e-9);
        assert_eq!(cats[0].category, "while");
    }

    #[test]
    fn categories_from_names() {
        let c = |n| op_category(n, None);
        assert_eq!(c("copy.38"), "copy");
        assert_eq!(c("while.30"), "while");
        assert_eq!(c("subtract_exponential_fusion.1"), "fusion");
        assert_eq!(c("ynn_fusion"), "fusion");
        assert_eq!(c("wrapped_add.1"), "elementwise");
        assert_eq!(c("custom-call.1"), "custom-call");
        assert_eq!(c("gemm_fusion_dot_general.1"), "dot");
        assert_eq!(c("dot.3"), "dot");
        assert_eq!(c("exponential.2"), "exponential");
        assert_eq!(c("reduce.7"), "reduce");
        assert_eq!(op_category("broadcast.2", Some("broadcast")), "broadcast");
    }

    #[test]
    fn program_ids_split_from_names() {
        assert_eq!(split_program_id("jit_f(12190760917235803885)"), ("jit_f", Some(12190760917235803885)));
        assert_eq!(split_program_id("jit_f"), ("jit_f", None));
        assert_eq!(split_program_id("f(x)"), ("f(x)", None));
    }

    fn module(name: &str, n: usize) -> ModuleExecs {
        ModuleExecs { module: name.to_string(), program_id: Some(1), execs: vec![Exec::new(0, 1_000_000); n], counts_ops: true }
    }

    #[test]
    fn selection_default_pattern_and_ambiguity() {
        let mods = vec![module("jit_convert_element_type", 9), module("jit_attn", 5), module("jit_mm", 5), module("jit_small", 1)];
        let err = select_kernel(&mods, None, &[]).unwrap_err().to_string();
        assert!(err.contains("jit_attn(1) (5 executions), jit_mm(1) (5 executions)"), "{err}");
        assert_eq!(select_kernel(&mods, Some("attn"), &[]).unwrap(), 1);
        let err = select_kernel(&mods, Some("nope"), &[]).unwrap_err().to_string();
        assert!(err.contains("executed modules: jit_convert_element_type(1)"), "{err}");
        assert!(select_kernel(&mods, Some("("), &[]).is_err());
        let mods = vec![module("jit_convert_element_type", 9), module("jit_attn", 5)];
        assert_eq!(select_kernel(&mods, None, &[]).unwrap(), 1);
    }

    #[test]
    fn a_tie_goes_to_the_module_inside_the_step_annotations() {
        let mut attn = module("jit_attn", 3);
        attn.execs = vec![Exec::new(10, 20), Exec::new(110, 120), Exec::new(210, 220)];
        let mut mm = module("jit_mm", 3);
        mm.execs = vec![Exec::new(30, 40), Exec::new(130, 140), Exec::new(230, 240)];
        let mods = vec![mm, attn];
        // Steps enclose attn's executions only (as when setup work runs outside the steps).
        let steps = [(5, 25), (105, 125), (205, 225)];
        assert_eq!(select_kernel(&mods, None, &steps).unwrap(), 1);
        // Steps that enclose both leave the tie, and the error.
        assert!(select_kernel(&mods, None, &[(0, 300)]).is_err());
    }

    #[test]
    fn summary_median_even_and_odd() {
        assert_eq!(Summary::of(&[3.0, 1.0, 2.0]).median, 2.0);
        assert_eq!(Summary::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert!(Summary::of(&[]).median.is_nan());
    }
}
