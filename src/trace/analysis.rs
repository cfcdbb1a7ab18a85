//! From a capture's events to per-execution module times, the kernel's choice and its op
//! breakdown: the data model shared by the `.xplane.pb` pass (`trace::scan`) and the
//! Chrome-trace fallback ([`super::json_trace`]).
//!
//! Op names and modules are interned to integers as they are met, so the tables a pass fills
//! per event are keyed by integers, never by strings.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use regex::Regex;

use super::xplane::{StatValue, XSpace};
use super::{CategoryStat, DeviceInfo, DeviceStats, KernelStats, ModuleStats, OpStat};

/// Picoseconds per microsecond.
pub(crate) const PS_PER_US: f64 = 1e6;

/// A small multiplicative hasher for integer keys (FxHash's mixing step): the per-event
/// tables hash a few integers, where SipHash's DoS resistance buys nothing.
#[derive(Default, Clone, Copy)]
pub(crate) struct Fx(u64);

impl Fx {
    #[inline(always)]
    fn add(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_i64(&mut self, i: i64) {
        self.add(i as u64);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A hash map with integer keys hashed by [`Fx`].
pub(crate) type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// One execution of a module: its span on the timeline and how many op events it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Exec {
    pub start_ps: i64,
    pub end_ps: i64,
    pub ops: u32,
}

impl Exec {
    pub fn new(start_ps: i64, end_ps: i64) -> Self {
        Exec { start_ps, end_ps, ops: 1 }
    }

    pub fn extend(&mut self, start_ps: i64, end_ps: i64) {
        self.start_ps = self.start_ps.min(start_ps);
        self.end_ps = self.end_ps.max(end_ps);
        self.ops += 1;
    }

    pub fn us(&self) -> f64 {
        (self.end_ps - self.start_ps) as f64 / PS_PER_US
    }
}

/// The executions of one module on one device.
#[derive(Debug, Clone)]
pub(crate) struct DeviceExecs {
    pub device: String,
    pub execs: Vec<Exec>,
}

/// All executions of one compiled module (or one Pallas kernel), in time order.
#[derive(Debug, Clone)]
pub(crate) struct ModuleExecs {
    /// Name as the runtime reports it (`jit_flash_attention`), or a Pallas kernel's name.
    pub module: String,
    pub program_id: Option<u64>,
    /// The executions on [`Self::device`], the device that ran the module most often.
    pub execs: Vec<Exec>,
    /// Whether `ops` counts op events (CPU, GPU) or is meaningless (TPU module events).
    pub counts_ops: bool,
    /// The device plane the executions are from (`None` on CPU).
    pub device: Option<String>,
    /// Which plane and line(s) the executions were read from.
    pub source: String,
    /// Every device that ran the module, when there are several.
    pub per_device: Vec<DeviceExecs>,
    /// The op-table group of the primary device's executions.
    pub group: u32,
    /// For a Pallas kernel (a TPU custom call): the module it ran in. `None` for a module.
    pub pallas_in: Option<String>,
}

impl ModuleExecs {
    /// `module(program_id)`, the form `/host:metadata` and TPU `XLA Modules` use.
    pub fn display_name(&self) -> String {
        match self.program_id {
            Some(id) => format!("{}({id})", self.module),
            None => self.module.clone(),
        }
    }

    pub fn total_ps(&self) -> i64 {
        self.execs.iter().map(|e| e.end_ps - e.start_ps).sum()
    }

    /// The module's figures; `device_total_ps` is the summed time of every module on the
    /// device, for the module's share of it.
    pub fn stats(&self, device_total_ps: i64) -> ModuleStats {
        let spans: Vec<f64> = self.execs.iter().map(Exec::us).collect();
        let s = Summary::of(&spans);
        let ops = self.counts_ops.then(|| self.execs.iter().map(|e| f64::from(e.ops)).sum::<f64>() / self.execs.len().max(1) as f64);
        ModuleStats {
            name: self.display_name(),
            module: self.module.clone(),
            program_id: self.program_id,
            kind: if self.pallas_in.is_some() { "pallas_kernel" } else { "module" }.to_string(),
            within: self.pallas_in.clone(),
            device: self.device.clone(),
            executions: self.execs.len(),
            median_us: s.median,
            mean_us: s.mean,
            min_us: s.min,
            max_us: s.max,
            total_us: s.total,
            share_of_device_time: if device_total_ps > 0 { self.total_ps() as f64 / device_total_ps as f64 } else { f64::NAN },
            ops_per_execution: ops,
            devices: self
                .per_device
                .iter()
                .map(|d| {
                    let spans: Vec<f64> = d.execs.iter().map(Exec::us).collect();
                    let s = Summary::of(&spans);
                    DeviceStats {
                        device: d.device.clone(),
                        executions: d.execs.len(),
                        median_us: s.median,
                        mean_us: s.mean,
                        min_us: s.min,
                        max_us: s.max,
                    }
                })
                .collect(),
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

/// Most executions first, then by name, so output and ties are deterministic.
pub(crate) fn sort_modules(v: &mut [ModuleExecs]) {
    v.sort_by(|a, b| {
        a.pallas_in
            .is_some()
            .cmp(&b.pallas_in.is_some())
            .then_with(|| b.execs.len().cmp(&a.execs.len()))
            .then_with(|| a.module.cmp(&b.module))
            .then_with(|| a.program_id.cmp(&b.program_id))
    });
}

/// Which kind of timeline the executions came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Tpu,
    Gpu,
    Cpu,
}

/// What an op id stands for.
#[derive(Debug, Clone)]
pub(crate) struct OpInfo {
    pub name: String,
    pub category: String,
    /// FLOPs and bytes of one occurrence by the capture's cost model (TPU).
    pub flops: Option<f64>,
    pub bytes: Option<f64>,
    /// Whether the op's HLO text puts a buffer in memory space S(5), XLA's host memory
    /// (`Layout::kHostMemorySpace = 5`, xla/layout.h): a transfer to or from the host.
    pub host_memory: bool,
}

/// Op names interned to dense ids, each with its category and costs.
#[derive(Debug, Default)]
pub(crate) struct OpInterner {
    /// By (program id of the op's module, short name): ops of different modules share short
    /// names (`fusion`, `copy-done`) but not their category or cost.
    index: HashMap<(Option<u64>, String), u32>,
    pub infos: Vec<OpInfo>,
}

impl OpInterner {
    /// The id of op `name` of the module with program id `program`; the first call for them
    /// fixes the op's category and costs.
    pub fn intern(&mut self, program: Option<u64>, name: &str, hlo_category: Option<&str>, flops: Option<f64>, bytes: Option<f64>) -> u32 {
        let key = (program, name.to_string());
        if let Some(&id) = self.index.get(&key) {
            return id;
        }
        let id = self.infos.len() as u32;
        self.infos.push(OpInfo { name: name.to_string(), category: op_category(name, hlo_category), flops, bytes, host_memory: false });
        self.index.insert(key, id);
        id
    }
}

/// Time of one op within one group (a module on a device).
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct OpAgg {
    pub count: u64,
    pub inclusive_ps: i64,
    pub self_ps: i64,
}

/// Per (group, op) totals.
#[derive(Debug, Default)]
pub(crate) struct OpTable {
    aggs: FxMap<(u32, u32), OpAgg>,
}

impl OpTable {
    #[inline]
    fn record(&mut self, r: &Rec, child_ps: i64) {
        let a = self.aggs.entry((r.group, r.op)).or_default();
        a.count += 1;
        a.inclusive_ps += r.time;
        a.self_ps += (r.time - child_ps).max(0);
    }

    /// One op that holds no other (a Pallas kernel's own occurrence).
    pub fn record_one(&mut self, group: u32, op: u32, time: i64) {
        self.record(&Rec { start: 0, span: time, time, group, op }, 0);
    }

    fn merge(&mut self, other: &mut OpTable) {
        for (k, v) in other.aggs.drain() {
            let a = self.aggs.entry(k).or_default();
            a.count += v.count;
            a.inclusive_ps += v.inclusive_ps;
            a.self_ps += v.self_ps;
        }
    }

    /// Names of the ops of `group` that move data to or from host memory, sorted.
    pub fn host_memory_ops(&self, group: u32, infos: &[OpInfo]) -> Vec<String> {
        let mut v: Vec<String> = self
            .aggs
            .keys()
            .filter(|k| k.0 == group && infos[k.1 as usize].host_memory)
            .map(|k| infos[k.1 as usize].name.clone())
            .collect();
        v.sort();
        v
    }

    /// The op and category tables of `group`, largest self time first.
    pub fn finish(&self, group: u32, executions: usize, infos: &[OpInfo]) -> (Vec<OpStat>, Vec<CategoryStat>) {
        let mine: Vec<(u32, OpAgg)> = self.aggs.iter().filter(|(k, _)| k.0 == group).map(|(k, v)| (k.1, *v)).collect();
        let total_self: i64 = mine.iter().map(|(_, a)| a.self_ps).sum();
        let frac = |ps: f64| if total_self > 0 { ps / total_self as f64 } else { 0.0 };
        let execs = executions.max(1) as f64;
        let mut ops: Vec<OpStat> = mine
            .iter()
            .map(|&(op, a)| {
                let info = &infos[op as usize];
                OpStat {
                    name: info.name.clone(),
                    category: info.category.clone(),
                    count: a.count,
                    total_us: a.self_ps as f64 / PS_PER_US,
                    inclusive_us: a.inclusive_ps as f64 / PS_PER_US,
                    per_execution_us: a.self_ps as f64 / PS_PER_US / execs,
                    fraction: frac(a.self_ps as f64),
                    flops: info.flops,
                    bytes: info.bytes,
                }
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
                fraction: frac(us * PS_PER_US),
            })
            .collect();
        categories.sort_by(|a, b| b.total_us.total_cmp(&a.total_us).then_with(|| a.category.cmp(&b.category)));
        (ops, categories)
    }
}

/// One op occurrence on a line, before its self time is known. `span` places it on the
/// timeline (nesting); `time` is what it is charged (the device's own duration on TPU).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rec {
    pub start: i64,
    pub span: i64,
    pub time: i64,
    pub group: u32,
    pub op: u32,
}

/// Self time on one line: ops nest (a `while` encloses its body), so an op's self time is
/// its time minus that of the ops directly inside it, and summing self times never counts a
/// picosecond twice. Lines come in time order, so this streams with a stack; a line out of
/// order is reported, and the caller nests it again with [`nest_sorted`].
#[derive(Debug, Default)]
pub(crate) struct Nester {
    /// (end, op, time of its direct children)
    stack: Vec<(i64, Rec, i64)>,
    last: Option<(i64, Reverse<i64>)>,
    /// This line's totals, merged into the capture's when the line ends in order.
    line: OpTable,
    disordered: bool,
}

impl Nester {
    #[inline]
    pub fn push(&mut self, r: Rec) {
        if self.disordered {
            return;
        }
        let key = (r.start, Reverse(r.span));
        if self.last.is_some_and(|l| key < l) {
            self.disordered = true;
            return;
        }
        self.last = Some(key);
        step(&mut self.stack, &mut self.line, r);
    }

    /// Ends the line: merges its totals into `table` and returns true, or returns false (and
    /// drops them) when the line was out of order.
    pub fn end_line(&mut self, table: &mut OpTable) -> bool {
        let ok = !self.disordered;
        if ok {
            drain(&mut self.stack, &mut self.line);
            table.merge(&mut self.line);
        }
        self.stack.clear();
        self.line.aggs.clear();
        self.last = None;
        self.disordered = false;
        ok
    }
}

#[inline]
fn step(stack: &mut Vec<(i64, Rec, i64)>, table: &mut OpTable, r: Rec) {
    while let Some(&(end, top, child)) = stack.last() {
        if end <= r.start {
            stack.pop();
            table.record(&top, child);
        } else {
            break;
        }
    }
    if let Some(top) = stack.last_mut() {
        // Clip an op that overlaps its parent's end instead of nesting cleanly.
        top.2 += r.time.min(top.0 - r.start).max(0);
    }
    stack.push((r.start.saturating_add(r.span), r, 0));
}

fn drain(stack: &mut Vec<(i64, Rec, i64)>, table: &mut OpTable) {
    while let Some((_, r, child)) = stack.pop() {
        table.record(&r, child);
    }
}

/// Nests one line's ops in any order (sorting them first).
pub(crate) fn nest_sorted(recs: &mut [Rec], table: &mut OpTable) {
    recs.sort_by_key(|r| (r.start, Reverse(r.span)));
    let mut stack = Vec::new();
    for &r in recs.iter() {
        step(&mut stack, table, r);
    }
    drain(&mut stack, table);
}

/// The executed modules of a capture, their op tables and where they were read.
pub(crate) struct Collected {
    /// Every executed module of the chosen timeline kind, then the Pallas kernels.
    pub modules: Vec<ModuleExecs>,
    pub ops: OpInterner,
    pub table: OpTable,
    /// Spans (ps) of the user's `kernel_step` annotations, in time order.
    pub steps: Vec<(i64, i64)>,
    pub events: u64,
    /// What the op times are: the `device_duration_ps` stat (as XProf) or the event's.
    pub op_time: String,
    pub warnings: Vec<String>,
    /// Per TPU device, its `TRACE_COMPUTE` compute and DMA rows (absent in other captures).
    pub pipeline: std::collections::HashMap<String, PipelineRows>,
}

impl Collected {
    /// Summed time of the (non-Pallas) modules on `device`.
    pub fn device_total_ps(&self, device: &Option<String>) -> i64 {
        self.modules.iter().filter(|m| m.pallas_in.is_none() && &m.device == device).map(ModuleExecs::total_ps).sum()
    }

    pub fn module_stats(&self) -> Vec<ModuleStats> {
        self.modules.iter().map(|m| m.stats(self.device_total_ps(&m.device))).collect()
    }
}

/// The description of what op times are, from how many ops had a device duration.
pub(crate) fn op_time_label(with_device_duration: u64, without: u64) -> String {
    match (with_device_duration, without) {
        (0, _) => "event duration".to_string(),
        (_, 0) => "device_duration_ps stat (as XProf)".to_string(),
        (w, wo) => format!("device_duration_ps stat (as XProf) for {w} op events, the event's duration for {wo} without it"),
    }
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

/// The kernel name of a Pallas call on TPU: the custom call's short name without XLA's
/// `.N` uniquifier (`RPA-bq_32-bkvp_64-p_64-.7` -> `RPA-bq_32-bkvp_64-p_64-`).
pub(crate) fn pallas_name(short_name: &str) -> &str {
    match short_name.rsplit_once('.') {
        Some((head, tail)) if !head.is_empty() && tail.chars().all(|c| c.is_ascii_digit()) => head,
        _ => short_name,
    }
}

/// Whether an op's HLO text is a Pallas kernel on TPU (`custom_call_target="tpu_custom_call"`).
pub(crate) fn is_pallas_hlo(hlo_text: &str) -> bool {
    hlo_text.contains("custom_call_target=\"tpu_custom_call\"")
}

/// Assembles the kernel's figures from its executions and the op table.
pub(crate) fn kernel_from_table(k: &ModuleExecs, c: &Collected, with_ops: bool) -> KernelStats {
    let per: Vec<f64> = k.execs.iter().map(Exec::us).collect();
    let s = Summary::of(&per);
    let n = k.execs.len();
    let (op_breakdown, category_breakdown) = if with_ops { c.table.finish(k.group, n, &c.ops.infos) } else { (Vec::new(), Vec::new()) };
    let cost = |f: fn(&OpStat) -> Option<f64>| {
        // A cost model that gives nothing (0 for a custom call it cannot see into) is no figure.
        let known: f64 = op_breakdown.iter().filter_map(|o| f(o).map(|v| v * o.count as f64)).sum();
        (known > 0.0).then(|| known / n.max(1) as f64)
    };
    KernelStats {
        name: k.display_name(),
        executions: n,
        median_us: s.median,
        mean_us: s.mean,
        min_us: s.min,
        max_us: s.max,
        host_memory_ops: if with_ops { c.table.host_memory_ops(k.group, &c.ops.infos) } else { Vec::new() },
        cost_model_flops: cost(|o| o.flops),
        cost_model_bytes: cost(|o| o.bytes),
        per_execution_us: per,
        device: k.device.clone(),
        op_time: c.op_time.clone(),
        op_breakdown,
        category_breakdown,
        pipeline: k.device.as_ref().and_then(|d| c.pipeline.get(d)).and_then(|rows| pipeline_health(&k.execs, rows)),
    }
}

/// DMA/compute overlap of a kernel's executions from a `TRACE_COMPUTE` capture's rows. Each
/// execution's steady state runs from its first compute block's start to its last one's end
/// (the article's 4.4 leaves the pipeline's fill and drain out); inside it, the DMA time that
/// some compute block covers, over all DMA time. `None` without both rows in the executions.
/// One device's compute and DMA spans, `(start, end)` in ps, in line order (the scan fills
/// them; kept here with the rest of what a pass collects, so the scan depends on this module
/// and not the other way round).
#[derive(Debug, Default, Clone)]
pub(crate) struct PipelineRows {
    pub compute: Vec<(i64, i64)>,
    pub dma: Vec<(i64, i64)>,
}

pub(crate) fn pipeline_health(execs: &[Exec], rows: &PipelineRows) -> Option<super::PipelineHealth> {
    let sorted = |v: &[(i64, i64)]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    let (compute, dma) = (sorted(&rows.compute), sorted(&rows.dma));
    let inside = |v: &[(i64, i64)], lo: i64, hi: i64| -> Vec<(i64, i64)> {
        let from = v.partition_point(|s| s.1 <= lo);
        v[from..].iter().take_while(|s| s.0 < hi).map(|&(a, b)| (a.max(lo), b.min(hi))).filter(|(a, b)| b > a).collect()
    };
    let (mut dma_ps, mut hidden_ps, mut blocks, mut seen, mut span_ps, mut busy_ps) = (0i64, 0i64, 0u64, 0usize, 0i64, 0i64);
    for e in execs {
        let comp = inside(&compute, e.start_ps, e.end_ps);
        let (Some(first), Some(last)) = (comp.first(), comp.iter().map(|c| c.1).max()) else { continue };
        seen += 1;
        blocks += comp.len() as u64;
        let merged = union(&comp);
        span_ps += e.end_ps - e.start_ps;
        busy_ps += merged.iter().map(|c| c.1 - c.0).sum::<i64>();
        for d in inside(&dma, first.0, last) {
            dma_ps += d.1 - d.0;
            hidden_ps += merged.iter().map(|c| (d.1.min(c.1) - d.0.max(c.0)).max(0)).sum::<i64>();
        }
    }
    (seen > 0 && dma_ps > 0).then(|| super::PipelineHealth {
        dma_overlap: hidden_ps as f64 / dma_ps as f64,
        dma_us_per_execution: dma_ps as f64 / 1e6 / seen as f64,
        compute_blocks_per_execution: blocks as f64 / seen as f64,
        compute_share: if span_ps > 0 { (busy_ps as f64 / span_ps as f64).min(1.0) } else { 0.0 },
    })
}

/// Sorted spans merged where they overlap.
fn union(spans: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out: Vec<(i64, i64)> = Vec::new();
    for &(a, b) in spans {
        match out.last_mut() {
            Some(l) if a <= l.1 => l.1 = l.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Peak figures of a device plane (TPU planes carry them as stats; GPU planes a bandwidth).
pub(crate) fn device_info(space: &XSpace<'_>, plane: &str) -> Option<DeviceInfo> {
    let p = space.plane(plane)?;
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
    if lower.contains("gemm") || lower.contains("cublas") || lower.starts_with("cijk_") || lower.contains("cudnn-conv") {
        "dot".to_string()
    } else if lower.ends_with("fusion") || lower.contains("_fusion") {
        "fusion".to_string()
    } else if lower.starts_with("custom-call") || lower.starts_with("custom_call") {
        "custom-call".to_string()
    } else {
        "other".to_string()
    }
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
            let matches = |i: &usize| re.is_match(&modules[*i].display_name()) || re.is_match(&modules[*i].module);
            // Modules first; a Pallas kernel (a TPU custom call) when no module matches.
            let mut hits: Vec<usize> = all.iter().copied().filter(|i| modules[*i].pallas_in.is_none()).filter(matches).collect();
            if hits.is_empty() {
                hits = all.iter().copied().filter(|i| modules[*i].pallas_in.is_some()).filter(matches).collect();
            }
            if hits.is_empty() {
                anyhow::bail!("no executed module matches the kernel pattern {p:?}; executed modules: {}", listing(&all));
            }
            hits
        }
        None => {
            let mods: Vec<usize> = all.iter().copied().filter(|&i| modules[i].pallas_in.is_none()).collect();
            let kernels: Vec<usize> = mods.iter().copied().filter(|&i| !is_obvious_non_kernel(&modules[i].module)).collect();
            if kernels.is_empty() {
                mods
            } else {
                kernels
            }
        }
    };
    if candidates.is_empty() {
        anyhow::bail!("the capture holds no executed XLA module, only Pallas kernels: {}; pass --kernel PATTERN", listing(&all));
    }
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

    fn rec(start: i64, dur: i64, op: u32) -> Rec {
        Rec { start, span: dur, time: dur, group: 0, op }
    }

    fn infos(names: &[&str]) -> Vec<OpInfo> {
        names
            .iter()
            .map(|n| OpInfo { name: n.to_string(), category: op_category(n, None), flops: None, bytes: None, host_memory: false })
            .collect()
    }

    #[test]
    fn self_time_subtracts_nested_ops_in_order_or_not() {
        let names = infos(&["while.1", "dot.2", "exp.3", "copy.4"]);
        // while.1 [0,100) holds dot.2 [10,40) and exp.3 [50,60); copy.4 after it.
        let ops = [rec(0, 100, 0), rec(10, 30, 1), rec(50, 10, 2), rec(100, 5, 3)];
        let check = |t: &OpTable| {
            let (ops, cats) = t.finish(0, 1, &names);
            let get = |n: &str| ops.iter().find(|o| o.name == n).unwrap().clone();
            assert_eq!(get("while.1").total_us * PS_PER_US, 60.0);
            assert_eq!(get("while.1").inclusive_us * PS_PER_US, 100.0);
            assert_eq!(get("dot.2").total_us * PS_PER_US, 30.0);
            let sum: f64 = cats.iter().map(|c| c.total_us).sum();
            assert!((sum * PS_PER_US - 105.0).abs() < 1e-9);
            assert_eq!(cats[0].category, "while");
        };
        // Streaming, in order.
        let mut t = OpTable::default();
        let mut n = Nester::default();
        ops.iter().for_each(|&r| n.push(r));
        assert!(n.end_line(&mut t));
        check(&t);
        // Out of order: the streaming pass refuses the line, the sorted one gets it right.
        let mut shuffled = [ops[1], ops[0], ops[3], ops[2]];
        let mut t = OpTable::default();
        shuffled.iter().for_each(|&r| n.push(r));
        assert!(!n.end_line(&mut t));
        assert!(t.aggs.is_empty());
        nest_sorted(&mut shuffled, &mut t);
        check(&t);
    }

    #[test]
    fn charged_time_can_differ_from_the_span() {
        // A TPU op whose device duration (90) is below its span (100), holding a child of 30.
        let names = infos(&["fusion.1", "dot.2"]);
        let mut t = OpTable::default();
        let mut recs = [Rec { start: 0, span: 100, time: 90, group: 0, op: 0 }, Rec { start: 10, span: 30, time: 28, group: 0, op: 1 }];
        nest_sorted(&mut recs, &mut t);
        let (ops, _) = t.finish(0, 1, &names);
        let f = ops.iter().find(|o| o.name == "fusion.1").unwrap();
        assert_eq!((f.total_us * PS_PER_US, f.inclusive_us * PS_PER_US), (62.0, 90.0));
    }

    #[test]
    fn pallas_names() {
        assert_eq!(pallas_name("RPA-bq_32-bkvp_64-p_64-.7"), "RPA-bq_32-bkvp_64-p_64-");
        assert_eq!(pallas_name("qmm"), "qmm");
        assert!(is_pallas_hlo(r#"%x = f32[8] custom-call(%a), custom_call_target="tpu_custom_call""#));
        assert!(!is_pallas_hlo(r#"%x = f32[8] custom-call(%a), custom_call_target="ConcatBitcast""#));
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
        // A convolution run by a library call (MIOpen / cuDNN), as XLA names it.
        assert_eq!(c("cudnn-conv.1.0"), "dot");
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
        ModuleExecs {
            module: name.to_string(),
            program_id: Some(1),
            execs: vec![Exec::new(0, 1_000_000); n],
            counts_ops: true,
            device: None,
            source: String::new(),
            per_device: Vec::new(),
            group: 0,
            pallas_in: None,
        }
    }

    #[test]
    fn a_pallas_kernel_is_chosen_by_pattern_only() {
        let mut rpa = module("RPA-bq_32", 64);
        rpa.program_id = None;
        rpa.pallas_in = Some("jit_step(1)".into());
        let mods = vec![rpa, module("jit_step", 1), module("jit_sample", 1)];
        // Two modules ran once each: no default; the Pallas kernel is never the default.
        assert!(select_kernel(&mods, None, &[]).is_err());
        assert_eq!(select_kernel(&mods, Some("RPA"), &[]).unwrap(), 0);
        assert_eq!(select_kernel(&mods, Some("step"), &[]).unwrap(), 1);
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
