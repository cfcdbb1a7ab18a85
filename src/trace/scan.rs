//! One fused pass over an `.xplane.pb`: every event of every line is decoded once, with only
//! the stats that matter decoded, and goes straight into integer-keyed tables (module
//! executions per device, op self times per module, launch windows, step annotations).
//!
//! Where the executions come from: on TPU the `XLA Modules` line has one event per execution
//! and the `XLA Ops` line the ops (charged their `device_duration_ps`, as XProf does); on GPU
//! the kernels of one execution sit on `Stream #N` lines and are tied by `correlation_id` to
//! their launch on a host thread, whose own `XLA GPU module` window groups them; on CPU the op
//! events of the executor threads are grouped by (`hlo_module`, `run_id`).

use std::cmp::Reverse;
use std::collections::HashMap;

use regex::Regex;

use super::analysis::{
    is_pallas_hlo, op_time_label, pallas_name, sort_modules, split_program_id, Collected, DeviceExecs, Exec, FxMap, Mode, ModuleExecs,
    Nester, OpInterner, OpTable, PipelineRows, Rec,
};
use super::xplane::{DecodeError, StatCodes, StatValue, XLine, XPlane, XSpace};

// Stat codes (see `StatCodes`): which event stats the pass decodes.
const C_HLO_OP: usize = 1;
const C_HLO_MODULE: usize = 2;
const C_RUN_ID: usize = 3;
const C_PROGRAM_ID: usize = 4;
const C_CORRELATION: usize = 5;
const C_DEVICE_DURATION: usize = 6;

// Kinds of host events, by event metadata id.
const K_STEP: u8 = 1;
const K_MODULE_WINDOW: u8 = 2;
const K_THUNK_WINDOW: u8 = 3;
const K_DISPATCH: u8 = 4;

/// A module (or Pallas kernel) as met in the pass.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct SlotKey {
    pub pallas: bool,
    pub name: String,
    pub program: Option<u64>,
}

/// A device (or the host's executors) that ran modules.
struct Device {
    name: String,
    mode: Mode,
    /// Numeric device index, to order devices and break ties.
    order: u32,
    /// Lines whose events gave executions.
    lines: Vec<String>,
}

/// A GPU kernel, kept until every host launch window is known.
struct GpuKernel {
    device: u32,
    line: u32,
    start: i64,
    dur: i64,
    slot: u32,
    op: u32,
    correlation: Option<i64>,
}

/// A host-side execution window of a GPU module (`jit_f:XLA GPU module`, else
/// `GpuExecutable::ExecuteThunks`, possibly `[N] `-prefixed), per host thread.
#[derive(Default)]
struct ThreadWindows {
    module: Vec<(i64, i64)>,
    thunk: Vec<(i64, i64)>,
}

/// Everything the pass accumulates; the Chrome-trace reader fills one too.
#[derive(Default)]
pub(crate) struct State {
    slot_index: HashMap<SlotKey, u32>,
    slots: Vec<SlotKey>,
    pallas_in: Vec<Option<String>>,
    devices: Vec<Device>,
    group_index: FxMap<(u32, u32), u32>,
    groups: Vec<(u32, u32)>,
    exec_index: FxMap<(u32, i64), u32>,
    execs: Vec<(u32, Exec)>,
    pub(crate) ops: OpInterner,
    pub(crate) table: OpTable,
    pub(crate) steps: Vec<(i64, i64)>,
    pub(crate) events: u64,
    gpu_kernels: Vec<GpuKernel>,
    windows: Vec<ThreadWindows>,
    launches: FxMap<i64, (u32, i64)>,
    device_duration: (u64, u64),
    tpu_module_events: u64,
    pub(crate) cpu_lines: usize,
    pub(crate) cpu_plane: String,
    /// Overrides the CPU source description (the Chrome-trace reader names its threads).
    pub(crate) cpu_source: Option<String>,
    unique: i64,
    /// Starts of the host's executable dispatches, and the CPU op events (group, start, end)
    /// that carry no `run_id`, to be split into executions by them.
    pub(crate) dispatches: Vec<i64>,
    pub(crate) unnumbered: Vec<(u32, i64, i64)>,
    split_index: FxMap<(u32, u32), u32>,
    /// How CPU op events were split into executions, when not by `run_id`.
    cpu_split: Option<&'static str>,
    /// Per TPU device, the spans (ps) of its compute and DMA rows of a `TRACE_COMPUTE` capture.
    pipeline: HashMap<String, PipelineRows>,
}

/// The rows of a TPU capture taken with `tpu_trace_mode = TRACE_COMPUTE` (or `_AND_SYNC`) that
/// show a Pallas kernel's pipeline. Their names are the source article's (section 4.1: "Fused
/// Ops" are the compute on the MXU/VPU, "Custom Calls" the DMA transfers between HBM and VMEM);
/// the default `TRACE_ONLY_XLA` capture has neither.
pub(crate) const COMPUTE_ROW: &str = "Fused Ops";
pub(crate) const DMA_ROW: &str = "Custom Calls";

impl State {
    pub(crate) fn slot(&mut self, key: SlotKey) -> u32 {
        if let Some(&s) = self.slot_index.get(&key) {
            return s;
        }
        let s = self.slots.len() as u32;
        self.slots.push(key.clone());
        self.pallas_in.push(None);
        self.slot_index.insert(key, s);
        s
    }

    #[inline]
    pub(crate) fn group(&mut self, slot: u32, device: u32) -> u32 {
        let next = self.groups.len() as u32;
        let g = *self.group_index.entry((slot, device)).or_insert(next);
        if g == next {
            self.groups.push((slot, device));
        }
        g
    }

    #[inline]
    pub(crate) fn add_exec(&mut self, group: u32, key: i64, start: i64, end: i64) {
        extend_exec(&mut self.exec_index, &mut self.execs, (group, key), group, start, end);
    }

    /// The timeline the report reads: the TPU's, else the GPU's, else the CPU's.
    fn mode(&self) -> Mode {
        if self.tpu_module_events > 0 {
            Mode::Tpu
        } else if self.groups.iter().any(|&(_, d)| self.devices[d as usize].mode == Mode::Gpu) {
            Mode::Gpu
        } else {
            Mode::Cpu
        }
    }

    /// Splits the CPU op events that carry no `run_id` into executions by what the capture
    /// does carry: each belongs to the latest host dispatch that started before it (a
    /// benchmark waits for each call, so one dispatch's ops end before the next begins); with
    /// no dispatch events, the latest step annotation; with neither, the events are one
    /// execution per module and a warning says so.
    pub(crate) fn split_unnumbered(&mut self) -> Option<String> {
        if self.unnumbered.is_empty() {
            return None;
        }
        let mut bounds = std::mem::take(&mut self.dispatches);
        self.cpu_split = Some("host dispatch (the op events carry no run_id)");
        if bounds.is_empty() {
            bounds = self.steps.iter().map(|s| s.0).collect();
            self.cpu_split = Some("step annotation (the op events carry no run_id, and no dispatch is recorded)");
        }
        bounds.sort_unstable();
        let events = std::mem::take(&mut self.unnumbered);
        // A TPU or GPU capture's executions come from the device: host ops are not read, so
        // nothing to warn about.
        let warning = (bounds.is_empty() && self.mode() == Mode::Cpu).then(|| {
            self.cpu_split = Some("module only (no run_id, dispatch or step to split executions by)");
            format!(
                "{} op event(s) carry no run_id and the capture records no dispatch or step to tell executions apart: \
                 each module reads as one execution; capture with jax 0.7 or later, or keep the benchmark's own timing",
                events.len()
            )
        });
        for (group, start, end) in events {
            let bound = bounds.partition_point(|&b| b <= start) as u32;
            extend_exec(&mut self.split_index, &mut self.execs, (group, bound), group, start, end);
        }
        warning
    }

    pub(crate) fn fresh_key(&mut self) -> i64 {
        self.unique += 1;
        self.unique
    }

    pub(crate) fn device(&mut self, name: &str, mode: Mode, order: u32) -> u32 {
        if let Some(i) = self.devices.iter().position(|d| d.name == name) {
            return i as u32;
        }
        self.devices.push(Device { name: name.to_string(), mode, order, lines: Vec::new() });
        (self.devices.len() - 1) as u32
    }

    pub(crate) fn used_line(&mut self, device: u32, line: &str) {
        let d = &mut self.devices[device as usize];
        if !d.lines.iter().any(|l| l == line) {
            d.lines.push(line.to_string());
        }
    }
}

/// Stat ids of a plane by name, resolved once (stat ids are per plane; the lowest id wins).
fn codes_for(plane: &XPlane<'_>, wanted: &[(&str, usize)]) -> StatCodes {
    let mut codes = StatCodes::default();
    for &(name, code) in wanted {
        if let Some(id) = plane.stat_id(name) {
            codes.set(id, code as u8);
        }
    }
    codes
}

/// The execution `key` names grown by [start, end], or made when it is new.
#[inline]
fn extend_exec<K: std::hash::Hash + Eq>(index: &mut FxMap<K, u32>, execs: &mut Vec<(u32, Exec)>, key: K, group: u32, start: i64, end: i64) {
    let next = execs.len() as u32;
    let i = *index.entry(key).or_insert(next);
    if i == next {
        execs.push((group, Exec::new(start, end)));
    } else {
        execs[i as usize].1.extend(start, end);
    }
}

/// Whether a host line is an XLA CPU executor thread.
fn is_cpu_executor_line(name: &str) -> bool {
    name.starts_with("tf_XLA") || name.contains("XLAPjRtCpuClient") || name.contains("XLATfrtCpuClient")
}

/// The host lines whose op events gave executions, as a reader can find them: the XLA
/// executor threads (`tf_XLAPjRtCpuClient/<id>`, many) by their prefix, any other thread (the
/// caller's, for a computation run inline) by its name.
pub(crate) fn cpu_line_names(lines: &[String]) -> String {
    let mut names: Vec<String> = Vec::new();
    for l in lines {
        let name = match l.split_once('/') {
            Some((prefix, _)) if prefix.starts_with("tf_XLA") => format!("{prefix}/*"),
            _ => l.clone(),
        };
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names.join(", ")
}

fn device_index(name: &str, prefix: &str) -> Option<u32> {
    name.strip_prefix(prefix)?.parse().ok()
}

/// Reads every event of `space` once and returns the executed modules of the best timeline
/// the capture has (TPU, then GPU, then CPU), with op tables when `with_ops`.
pub(crate) fn scan(space: &XSpace<'_>, with_ops: bool) -> Result<Collected, DecodeError> {
    let mut st = State::default();
    let step_re = Regex::new(r"^kernel_step(_\d+)?$").expect("static regex");
    for plane in &space.planes {
        if let Some(n) = device_index(plane.name, "/device:TPU:") {
            scan_tpu(&mut st, plane, n, with_ops)?;
        } else if let Some(n) = device_index(plane.name, "/device:GPU:") {
            scan_gpu(&mut st, plane, n)?;
        } else if plane.name.starts_with("/host:") {
            scan_host(&mut st, plane, &step_re, with_ops)?;
        } else {
            for line in &plane.lines {
                st.events += line.scan_events(&StatCodes::default(), |_| {})? as u64;
            }
        }
    }
    let mut warnings = resolve_gpu(&mut st, with_ops);
    warnings.extend(st.split_unnumbered());
    let impossible: usize = space.planes.iter().flat_map(|p| &p.lines).map(|l| l.impossible_durations.get()).sum();
    if impossible > 0 {
        warnings.push(impossible_warning(impossible));
    }
    Ok(finish(st, warnings))
}

/// The warning for events whose duration could not be (negative, or past
/// [`super::xplane::MAX_EVENT_PS`]): they count as instantaneous rather than as results.
pub(crate) fn impossible_warning(n: usize) -> String {
    format!("{n} event(s) had an impossible duration (negative or longer than 7 days): the capture is damaged; each counted as 0")
}

/// A TPU module execution window: start, end, op-table group, program id, module slot.
pub(crate) type TpuWindow = (i64, i64, u32, Option<u64>, u32);

/// Records a device's `XLA Modules` events (name `module(program_id)`, start, duration) as
/// executions, and returns them as windows for the ops, in time order.
pub(crate) fn tpu_modules(st: &mut State, device: u32, events: &[(&str, i64, i64)]) -> Vec<TpuWindow> {
    let mut windows = Vec::with_capacity(events.len());
    for &(name, start, dur) in events {
        let (module, program) = split_program_id(name);
        let slot = st.slot(SlotKey { pallas: false, name: module.to_string(), program });
        let group = st.group(slot, device);
        let key = st.fresh_key();
        let end = start.saturating_add(dur);
        st.add_exec(group, key, start, end);
        st.tpu_module_events += 1;
        windows.push((start, end, group, program, slot));
    }
    windows.sort_by_key(|w| (w.0, Reverse(w.1)));
    windows
}

/// What a TPU op stands for: its interned name, program id and, for a Pallas kernel, its slot.
pub(crate) struct TpuOpMeta {
    pub op: u32,
    pub program: Option<u64>,
    pub pallas: Option<u32>,
}

impl TpuOpMeta {
    /// From the op's short name, HLO text, category and costs.
    pub fn new(
        st: &mut State,
        short: &str,
        hlo_text: &str,
        category: Option<&str>,
        flops: Option<f64>,
        bytes: Option<f64>,
        program: Option<u64>,
    ) -> Self {
        // Without a program id, the op's full HLO text tells apart ops of different modules
        // that share a short name (the same text is the same op, costs included).
        let scope = program.or_else(|| {
            (hlo_text != short && !hlo_text.is_empty()).then(|| {
                use std::hash::{Hash, Hasher};
                let mut h = std::collections::hash_map::DefaultHasher::new();
                hlo_text.hash(&mut h);
                h.finish()
            })
        });
        let op = st.ops.intern(scope, short, category, flops, bytes);
        if hlo_text.contains("S(5)") {
            st.ops.infos[op as usize].host_memory = true;
        }
        let pallas =
            is_pallas_hlo(hlo_text).then(|| st.slot(SlotKey { pallas: true, name: pallas_name(short).to_string(), program: None }));
        TpuOpMeta { op, program, pallas }
    }
}

/// The ops of one TPU device: each is charged its `device_duration_ps` (the event's duration
/// when absent), placed in the module execution containing it, and nested per line.
pub(crate) struct TpuOps<'w> {
    windows: &'w [TpuWindow],
    nester: Nester,
    /// Keep each line's ops, to nest them sorted if the line is out of order (the Chrome-trace
    /// reader, whose events are in memory anyway); without, the caller decodes the line again.
    buffer: bool,
    recs: Vec<Rec>,
    pallas: Vec<(u32, u32, i64, i64, u32)>,
    device_duration: (u64, u64),
    with_ops: bool,
}

impl<'w> TpuOps<'w> {
    pub fn new(windows: &'w [TpuWindow], with_ops: bool, buffer: bool) -> Self {
        TpuOps { windows, nester: Nester::default(), buffer, recs: Vec::new(), pallas: Vec::new(), device_duration: (0, 0), with_ops }
    }

    /// The program id of the module execution holding an op at `start` lasting `span`, for
    /// ops that do not carry their own (Chrome-trace exports).
    pub fn program_at(&self, start: i64, span: i64) -> Option<u64> {
        let end = start.saturating_add(span);
        let i = self.windows.partition_point(|w| w.0 <= start);
        i.checked_sub(1).map(|i| self.windows[i]).filter(|w| end <= w.1).and_then(|w| w.3)
    }

    /// The op as a record of the execution holding it, if one does (and its program agrees).
    #[inline]
    pub fn place(&self, m: &TpuOpMeta, start: i64, span: i64, device_duration: Option<i64>) -> Option<(Rec, u32)> {
        let time = device_duration.unwrap_or(span);
        let end = start.saturating_add(span);
        let i = self.windows.partition_point(|w| w.0 <= start);
        let w = i.checked_sub(1).map(|i| self.windows[i]).filter(|w| end <= w.1)?;
        if matches!((m.program, w.3), (Some(a), Some(b)) if a != b) {
            return None;
        }
        Some((Rec { start, span, time, group: w.2, op: m.op }, w.4))
    }

    #[inline]
    pub fn push(&mut self, m: &TpuOpMeta, start: i64, span: i64, device_duration: Option<i64>) {
        let device_duration = device_duration.filter(|d| (0..=super::xplane::MAX_EVENT_PS).contains(d));
        if device_duration.is_some() {
            self.device_duration.0 += 1;
        } else {
            self.device_duration.1 += 1;
        }
        let Some((r, module_slot)) = self.place(m, start, span, device_duration) else { return };
        if self.with_ops {
            self.nester.push(r);
            if self.buffer {
                self.recs.push(r);
            }
        }
        if let Some(p) = m.pallas {
            self.pallas.push((p, m.op, start, r.time, module_slot));
        }
    }

    /// Ends a line; false when it was out of order and not buffered: the caller nests it again
    /// from its events ([`super::analysis::nest_sorted`]).
    pub fn end_line(&mut self, st: &mut State) -> bool {
        let mut ok = true;
        if self.with_ops && !self.nester.end_line(&mut st.table) {
            if self.buffer {
                super::analysis::nest_sorted(&mut self.recs, &mut st.table);
            } else {
                ok = false;
            }
        }
        self.recs.clear();
        ok
    }

    /// Records the Pallas kernels' calls as their executions.
    pub fn finish(self, st: &mut State, device: u32) {
        st.device_duration.0 += self.device_duration.0;
        st.device_duration.1 += self.device_duration.1;
        for (slot, op, start, time, module_slot) in self.pallas {
            let group = st.group(slot, device);
            let key = st.fresh_key();
            st.add_exec(group, key, start, start.saturating_add(time));
            if st.pallas_in[slot as usize].is_none() {
                let k = &st.slots[module_slot as usize];
                st.pallas_in[slot as usize] = Some(match k.program {
                    Some(p) => format!("{}({p})", k.name),
                    None => k.name.clone(),
                });
            }
            if self.with_ops {
                // One row for the kernel, not one per call (`RPA.1`, `RPA.2`, ...): its
                // executions are its calls.
                let info = &st.ops.infos[op as usize];
                let (category, flops, bytes, host) = (info.category.clone(), info.flops, info.bytes, info.host_memory);
                let name = st.slots[slot as usize].name.clone();
                let kernel_op = st.ops.intern(None, &name, Some(&category), flops, bytes);
                st.ops.infos[kernel_op as usize].host_memory |= host;
                st.table.record_one(group, kernel_op, time);
            }
        }
    }
}

fn scan_tpu(st: &mut State, plane: &XPlane<'_>, n: u32, with_ops: bool) -> Result<(), DecodeError> {
    let device = st.device(plane.name, Mode::Tpu, n);
    let none = StatCodes::default();
    // Module executions first (whatever the line order), as windows for the ops.
    let mut evs: Vec<(&str, i64, i64)> = Vec::new();
    for line in plane.lines.iter().filter(|l| l.name == "XLA Modules") {
        let before = evs.len();
        st.events += line
            .scan_events(&none, |ev| evs.push((plane.event_name(ev.metadata_id), line.start_ps_of(ev.offset_ps), ev.duration_ps)))?
            as u64;
        if evs.len() > before {
            st.used_line(device, line.name);
        }
    }
    let windows = tpu_modules(st, device, &evs);
    fn stat_of<'s>(want: Option<i64>, m: &super::xplane::XEventMetadata<'s>) -> Option<StatValue<'s>> {
        want.and_then(|w| m.stats.iter().find(|s| s.metadata_id == w)).map(|s| s.value)
    }
    let (cat, flops, bytes, prog) =
        (plane.stat_id("hlo_category"), plane.stat_id("flops"), plane.stat_id("bytes_accessed"), plane.stat_id("program_id"));
    let mut metas: FxMap<i64, TpuOpMeta> = FxMap::default();
    if plane.lines.iter().any(|l| l.name == "XLA Ops") {
        for m in plane.event_metadata.values() {
            let short = if m.display_name.is_empty() { m.name } else { m.display_name };
            let meta = TpuOpMeta::new(
                st,
                short,
                m.name,
                stat_of(cat, m).and_then(|v| plane.stat_str(&v)),
                stat_of(flops, m).and_then(|v| v.as_f64()),
                stat_of(bytes, m).and_then(|v| v.as_f64()),
                stat_of(prog, m).and_then(|v| v.as_u64()),
            );
            metas.insert(m.id, meta);
        }
    }
    let codes = codes_for(plane, &[("device_duration_ps", C_DEVICE_DURATION)]);
    let mut ops = TpuOps::new(&windows, with_ops, false);
    for line in &plane.lines {
        if line.name == COMPUTE_ROW || line.name == DMA_ROW {
            let rows = st.pipeline.entry(plane.name.to_string()).or_default();
            let spans = if line.name == COMPUTE_ROW { &mut rows.compute } else { &mut rows.dma };
            st.events += line.scan_events(&none, |ev| {
                let start = line.start_ps_of(ev.offset_ps);
                spans.push((start, start + ev.duration_ps.max(0)));
            })? as u64;
            continue;
        }
        if line.name != "XLA Ops" {
            if line.name != "XLA Modules" {
                st.events += line.scan_events(&none, |_| {})? as u64;
            }
            continue;
        }
        st.events += line.scan_events(&codes, |ev| {
            if let Some(m) = metas.get(&ev.metadata_id) {
                let dd = ev.stats[C_DEVICE_DURATION].and_then(|v| v.as_i64());
                ops.push(m, line.start_ps_of(ev.offset_ps), ev.duration_ps, dd);
            }
        })? as u64;
        if !ops.end_line(st) {
            // Out of time order: decode this line again and nest its ops sorted.
            let mut recs = Vec::new();
            line.scan_events(&codes, |ev| {
                if let Some(m) = metas.get(&ev.metadata_id) {
                    let dd = ev.stats[C_DEVICE_DURATION].and_then(|v| v.as_i64());
                    recs.extend(ops.place(m, line.start_ps_of(ev.offset_ps), ev.duration_ps, dd).map(|p| p.0));
                }
            })?;
            super::analysis::nest_sorted(&mut recs, &mut st.table);
        }
    }
    ops.finish(st, device);
    Ok(())
}

/// The string of a `hlo_op` / `hlo_module` stat: a reference to a stat metadata name, or a
/// string value.
fn stat_string<'s>(plane: &XPlane<'s>, v: &StatValue<'s>) -> Option<&'s str> {
    plane.stat_str(v)
}

fn scan_gpu(st: &mut State, plane: &XPlane<'_>, n: u32) -> Result<(), DecodeError> {
    let device = st.device(plane.name, Mode::Gpu, n);
    let codes = codes_for(
        plane,
        &[("hlo_op", C_HLO_OP), ("hlo_module", C_HLO_MODULE), ("program_id", C_PROGRAM_ID), ("correlation_id", C_CORRELATION)],
    );
    let none = StatCodes::default();
    for (li, line) in plane.lines.iter().enumerate() {
        if !line.name.starts_with("Stream #") || codes.is_empty() {
            st.events += line.scan_events(&none, |_| {})? as u64;
            continue;
        }
        // (op, module, program id, correlation id, metadata id, start, duration)
        type Found<'s> = (Option<&'s str>, &'s str, Option<u64>, Option<i64>, i64, i64, i64);
        let mut found: Vec<Found<'_>> = Vec::new();
        st.events += line.scan_events(&codes, |ev| {
            let Some(module) = ev.stats[C_HLO_MODULE].and_then(|v| stat_string(plane, &v)) else { return };
            let op = ev.stats[C_HLO_OP].and_then(|v| stat_string(plane, &v));
            let program = ev.stats[C_PROGRAM_ID].and_then(|v| v.as_u64());
            let corr = ev.stats[C_CORRELATION].and_then(|v| v.as_i64());
            found.push((op, module, program, corr, ev.metadata_id, line.start_ps_of(ev.offset_ps), ev.duration_ps));
        })? as u64;
        if found.is_empty() {
            continue;
        }
        st.used_line(device, line.name);
        let line_key = (device << 16) | (li as u32 & 0xffff);
        for (op, module, program, correlation, md, start, dur) in found {
            let slot = st.slot(SlotKey { pallas: false, name: module.to_string(), program });
            let op = st.ops.intern(program, op.unwrap_or_else(|| plane.event_name(md)), None, None, None);
            st.gpu_kernels.push(GpuKernel { device, line: line_key, start, dur, slot, op, correlation });
        }
    }
    Ok(())
}

/// Per-plane caches from a stat reference id (a stat metadata id) to what it names.
#[derive(Default)]
struct RefCache {
    dense: Vec<u32>,
    sparse: FxMap<u64, u32>,
}

impl RefCache {
    #[inline]
    fn get(&self, id: u64) -> Option<u32> {
        match self.dense.get(id as usize) {
            Some(&v) if v != u32::MAX => Some(v),
            Some(_) => None,
            None => self.sparse.get(&id).copied(),
        }
    }

    fn put(&mut self, id: u64, v: u32) {
        if id < 1 << 20 {
            if self.dense.len() <= id as usize {
                self.dense.resize(id as usize + 1, u32::MAX);
            }
            self.dense[id as usize] = v;
        } else {
            self.sparse.insert(id, v);
        }
    }
}

/// The thunk executor's window, bare (`GpuExecutable::ExecuteThunks`) or, as jax 0.11's CUDA
/// captures name it, after a bracketed device ordinal (`[0] GpuExecutable::ExecuteThunks`).
fn is_thunk_window(name: &str) -> bool {
    const THUNKS: &str = "GpuExecutable::ExecuteThunks";
    name == THUNKS
        || name
            .strip_prefix('[')
            .and_then(|r| r.split_once("] "))
            .is_some_and(|(ordinal, rest)| !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit()) && rest == THUNKS)
}

fn scan_host(st: &mut State, plane: &XPlane<'_>, step_re: &Regex, with_ops: bool) -> Result<(), DecodeError> {
    let codes = codes_for(
        plane,
        &[
            ("hlo_op", C_HLO_OP),
            ("hlo_module", C_HLO_MODULE),
            ("run_id", C_RUN_ID),
            ("program_id", C_PROGRAM_ID),
            ("correlation_id", C_CORRELATION),
        ],
    );
    let mut kinds = StatCodes::default();
    for m in plane.event_metadata.values() {
        if step_re.is_match(m.name) {
            kinds.set(m.id, K_STEP);
        } else if m.name.ends_with(":XLA GPU module") {
            kinds.set(m.id, K_MODULE_WINDOW);
        } else if is_thunk_window(m.name) {
            kinds.set(m.id, K_THUNK_WINDOW);
        } else if is_dispatch(m.name) {
            kinds.set(m.id, K_DISPATCH);
        }
    }
    let mut op_refs = RefCache::default();
    let mut nester = Nester::default();
    let host = st.device(plane.name, Mode::Cpu, 0);
    for line in &plane.lines {
        // The XLA executor threads hold nothing but op events: their lean pass is the bulk of a
        // CPU capture's time.
        let n = if is_cpu_executor_line(line.name) {
            scan_host_line::<false>(st, plane, line, &codes, &kinds, &mut op_refs, &mut nester, host, with_ops)?
        } else {
            scan_host_line::<true>(st, plane, line, &codes, &kinds, &mut op_refs, &mut nester, host, with_ops)?
        };
        st.events += n as u64;
    }
    Ok(())
}

/// A host-side dispatch of a compiled executable (`TfrtCpuExecutable::Execute` in jax 0.4.x,
/// `PjRtCpuExecutable::Execute` later, with an `ExecuteHelper` inside, or alone as in 0.6.x):
/// where a CPU execution begins when op events carry no `run_id`.
pub(crate) fn is_dispatch(name: &str) -> bool {
    name.ends_with("Executable::Execute") || name.ends_with("Executable::ExecuteHelper")
}

/// One host line, the bulk of a CPU capture: its op events (with `hlo_op` and `hlo_module`,
/// and no `correlation_id`, which marks a GPU launch instead) grouped by (`hlo_module`,
/// `program_id`, `run_id`) on whatever thread ran them (the XLA executor threads, or the
/// caller's own thread for a computation run inline); its steps, GPU module windows, launches
/// and dispatches. Consecutive op events mostly share their module and execution, so the last
/// lookups are cached. `MIXED`: a line that may hold steps, windows, launches and dispatches
/// too (any but an XLA executor thread's).
#[allow(clippy::too_many_arguments)]
fn scan_host_line<const MIXED: bool>(
    st: &mut State,
    plane: &XPlane<'_>,
    line: &XLine<'_>,
    codes: &StatCodes,
    kinds: &StatCodes,
    op_refs: &mut RefCache,
    nester: &mut Nester,
    host: u32,
    with_ops: bool,
) -> Result<usize, DecodeError> {
    let thread = st.windows.len() as u32;
    let mut tw = ThreadWindows::default();
    let mut last_module: Option<(StatValue<'_>, Option<u64>, u32)> = None;
    let mut last_exec: Option<(u32, i64, u32)> = None;
    let mut last_dispatch_end = i64::MIN;
    let mut used = false;
    let n = line.scan_events(codes, |ev| {
        let start = line.start_ps_of(ev.offset_ps);
        let end = start.saturating_add(ev.duration_ps);
        if MIXED {
            match kinds.get(ev.metadata_id) {
                0 => {}
                K_STEP => st.steps.push((start, end)),
                K_MODULE_WINDOW => tw.module.push((start, end)),
                K_THUNK_WINDOW => tw.thunk.push((start, end)),
                _ => {
                    // Only the outermost of nested dispatch events starts an execution.
                    if start >= last_dispatch_end {
                        st.dispatches.push(start);
                        last_dispatch_end = end;
                    }
                }
            }
            if let Some(c) = ev.stats[C_CORRELATION].and_then(|v| v.as_i64()) {
                st.launches.entry(c).or_insert((thread, start));
                return;
            }
        }
        let (Some(op), Some(module)) = (ev.stats[C_HLO_OP], ev.stats[C_HLO_MODULE]) else { return };
        let program = ev.stats[C_PROGRAM_ID].and_then(|v| v.as_u64());
        let group = match last_module {
            Some((m, p, g)) if m == module && p == program => g,
            _ => {
                let Some(name) = stat_string(plane, &module) else { return };
                let slot = st.slot(SlotKey { pallas: false, name: name.to_string(), program });
                let g = st.group(slot, host);
                last_module = Some((module, program, g));
                g
            }
        };
        let op_id = match op {
            StatValue::Ref(r) => match op_refs.get(r) {
                Some(id) => id,
                None => {
                    let Some(name) = stat_string(plane, &op) else { return };
                    let id = st.ops.intern(None, name, None, None, None);
                    op_refs.put(r, id);
                    id
                }
            },
            other => match stat_string(plane, &other) {
                Some(name) => st.ops.intern(None, name, None, None, None),
                None => return,
            },
        };
        used = true;
        match ev.stats[C_RUN_ID].and_then(|v| v.as_i64()) {
            Some(run) => match last_exec {
                Some((g, r, i)) if g == group && r == run => st.execs[i as usize].1.extend(start, end),
                _ => {
                    st.add_exec(group, run, start, end);
                    let i = st.exec_index[&(group, run)];
                    last_exec = Some((group, run, i));
                }
            },
            // No run_id (jax 0.4.x): the execution is found once every dispatch is known.
            None => st.unnumbered.push((group, start, end)),
        }
        if with_ops {
            nester.push(Rec { start, span: ev.duration_ps, time: ev.duration_ps, group, op: op_id });
        }
    })?;
    st.windows.push(tw);
    if with_ops && !nester.end_line(&mut st.table) {
        // Out of time order: decode this line again and nest it sorted (rare; costs one more
        // pass over this line only).
        let mut recs: Vec<Rec> = Vec::new();
        line.scan_events(codes, |ev| {
            if ev.stats[C_CORRELATION].is_some() {
                return;
            }
            let (Some(op), Some(module)) = (ev.stats[C_HLO_OP], ev.stats[C_HLO_MODULE]) else { return };
            let program = ev.stats[C_PROGRAM_ID].and_then(|v| v.as_u64());
            let (Some(name), Some(op_name)) = (stat_string(plane, &module), stat_string(plane, &op)) else { return };
            let slot = st.slot(SlotKey { pallas: false, name: name.to_string(), program });
            let group = st.group(slot, host);
            let op_id = st.ops.intern(None, op_name, None, None, None);
            recs.push(Rec { start: line.start_ps_of(ev.offset_ps), span: ev.duration_ps, time: ev.duration_ps, group, op: op_id });
        })?;
        super::analysis::nest_sorted(&mut recs, &mut st.table);
    }
    if used {
        st.cpu_lines += 1;
        st.cpu_plane = plane.name.to_string();
        st.used_line(host, line.name);
    }
    Ok(n)
}

/// The innermost window containing `t`: the latest-starting one that has not ended.
fn containing_window(windows: &[(i64, i64)], t: i64) -> Option<usize> {
    let upto = windows.partition_point(|w| w.0 <= t);
    // Nested windows of one execution start close together; a short look back is enough.
    (upto.saturating_sub(64)..upto).rev().find(|&i| windows[i].1 >= t)
}

/// Which window thread holds the launches of each (launching thread, device) pair. A thread
/// whose own windows hold its launches is their holder. Launches recorded on a thread without
/// windows (tracers that log the launch API on a line of their own, one per OS thread or one
/// for all) go to the thread whose windows hold the most of them; among threads that hold as
/// many, one that no other device uses, since concurrent executions of different devices run
/// on different threads, and their windows overlap in time.
fn window_holders(launches: &[(u32, u32, i64)], windows: &[Vec<(i64, i64)>]) -> FxMap<(u32, u32), u32> {
    let mut by_key: std::collections::BTreeMap<(u32, u32), Vec<i64>> = std::collections::BTreeMap::new();
    for &(thread, device, t) in launches {
        by_key.entry((thread, device)).or_default().push(t);
    }
    let mut holder: FxMap<(u32, u32), u32> = FxMap::default();
    let mut devices_of: FxMap<u32, Vec<u32>> = FxMap::default();
    // (held launches, best count of the key, key, thread) for keys not held by their own thread.
    let mut candidates: Vec<(usize, usize, (u32, u32), u32)> = Vec::new();
    for (&key, times) in &by_key {
        let held = |th: usize| times.iter().filter(|&&t| containing_window(&windows[th], t).is_some()).count();
        if held(key.0 as usize) > 0 {
            holder.insert(key, key.0);
            devices_of.entry(key.0).or_default().push(key.1);
            continue;
        }
        let counts: Vec<(usize, u32)> =
            (0..windows.len()).filter(|&th| !windows[th].is_empty()).map(|th| (held(th), th as u32)).filter(|c| c.0 > 0).collect();
        let best = counts.iter().map(|c| c.0).max().unwrap_or(0);
        candidates.extend(counts.into_iter().map(|(n, th)| (n, best, key, th)));
    }
    candidates.sort_by_key(|&(n, _, key, th)| (Reverse(n), key, th));
    // First the threads free of other devices that hold as many launches as any; then, for a
    // key still without one, the thread holding the most (one thread driving several GPUs).
    for free_only in [true, false] {
        for &(n, best, key, th) in &candidates {
            if holder.contains_key(&key) || (free_only && n < best) {
                continue;
            }
            let others = devices_of.get(&th).is_some_and(|ds| ds.iter().any(|&d| d != key.1));
            if free_only && others {
                continue;
            }
            holder.insert(key, th);
            devices_of.entry(th).or_default().push(key.1);
        }
    }
    holder
}

/// Groups the GPU kernels into executions per device: each kernel's launch (by
/// `correlation_id`) lies on one host thread; the thread holding that thread's launches for
/// the kernel's device ([`window_holders`]) has the module window around the launch, which is
/// the execution. A kernel without a launch joins the execution of its device whose kernels
/// surround it on the device's timeline, else counts as its own.
fn resolve_gpu(st: &mut State, with_ops: bool) -> Vec<String> {
    let mut warnings = Vec::new();
    if st.gpu_kernels.is_empty() {
        return warnings;
    }
    // One window kind per thread: both kinds nest around the same execution.
    let windows: Vec<Vec<(i64, i64)>> = std::mem::take(&mut st.windows)
        .into_iter()
        .map(|tw| {
            let mut w = if tw.module.is_empty() { tw.thunk } else { tw.module };
            w.sort_by_key(|w| (w.0, Reverse(w.1)));
            w
        })
        .collect();
    let kernels = std::mem::take(&mut st.gpu_kernels);
    let launch: Vec<Option<(u32, i64)>> = kernels.iter().map(|k| k.correlation.and_then(|c| st.launches.get(&c).copied())).collect();
    let keyed: Vec<(u32, u32, i64)> = kernels.iter().zip(&launch).filter_map(|(k, l)| l.map(|(thread, t)| (thread, k.device, t))).collect();
    let holder = window_holders(&keyed, &windows);
    // The execution key of each kernel that a window claims.
    let mut exec_of: Vec<Option<i64>> = kernels
        .iter()
        .zip(&launch)
        .map(|(k, l)| {
            let (thread, t) = (*l)?;
            let h = *holder.get(&(thread, k.device))?;
            containing_window(&windows[h as usize], t).map(|w| (i64::from(h) << 32) | w as i64)
        })
        .collect();
    // Unclaimed kernels: inside the device-time span of one claimed execution of the same
    // module and device, they belong to it (its other kernels surround them).
    // Per (module slot, device): (first kernel start, last kernel end, execution key).
    type Spans = FxMap<(u32, u32), Vec<(i64, i64, i64)>>;
    let mut spans: Spans = FxMap::default();
    for (k, e) in kernels.iter().zip(&exec_of) {
        let Some(e) = *e else { continue };
        let v = spans.entry((k.slot, k.device)).or_default();
        match v.iter_mut().find(|s| s.2 == e) {
            Some(s) => {
                s.0 = s.0.min(k.start);
                s.1 = s.1.max(k.start.saturating_add(k.dur));
            }
            None => v.push((k.start, k.start.saturating_add(k.dur), e)),
        }
    }
    let mut unmatched = 0usize;
    for (k, e) in kernels.iter().zip(exec_of.iter_mut()) {
        if e.is_some() {
            continue;
        }
        let inside: Vec<i64> = spans
            .get(&(k.slot, k.device))
            .map(|v| v.iter().filter(|s| s.0 <= k.start && k.start < s.1).map(|s| s.2).collect())
            .unwrap_or_default();
        if let [one] = inside[..] {
            *e = Some(one);
        } else {
            unmatched += 1;
        }
    }
    let mut by_line: FxMap<u32, Vec<Rec>> = FxMap::default();
    for (k, e) in kernels.iter().zip(&exec_of) {
        // Without a host window, a kernel counts as its own execution.
        let key = e.unwrap_or_else(|| -st.fresh_key());
        let group = st.group(k.slot, k.device);
        st.add_exec(group, key, k.start, k.start.saturating_add(k.dur));
        if with_ops {
            by_line.entry(k.line).or_default().push(Rec { start: k.start, span: k.dur, time: k.dur, group, op: k.op });
        }
    }
    for recs in by_line.values_mut() {
        super::analysis::nest_sorted(recs, &mut st.table);
    }
    if unmatched > 0 {
        warnings.push(format!(
            "{unmatched} GPU kernel(s) could not be tied to a host module execution \
             (no launch event, or no `XLA GPU module` window holding the launch); each counts as one execution"
        ));
    }
    warnings
}

pub(crate) fn finish(st: State, warnings: Vec<String>) -> Collected {
    let mode = st.mode();
    // Executions per (slot, device) of the chosen kind.
    let mut per_slot: HashMap<u32, Vec<(u32, u32, Vec<Exec>)>> = HashMap::new(); // slot -> (device, group, execs)
    let mut by_group: FxMap<u32, Vec<Exec>> = FxMap::default();
    for &(g, e) in &st.execs {
        by_group.entry(g).or_default().push(e);
    }
    for (g, execs) in by_group {
        let (slot, device) = st.groups[g as usize];
        if st.devices[device as usize].mode != mode {
            continue;
        }
        per_slot.entry(slot).or_default().push((device, g, execs));
    }
    let mut modules = Vec::new();
    for (slot, mut devs) in per_slot {
        for d in &mut devs {
            d.2.sort_by_key(|e| (e.start_ps, e.end_ps));
        }
        devs.sort_by_key(|d| (st.devices[d.0 as usize].order, d.0));
        let primary = devs.iter().enumerate().max_by_key(|(i, d)| (d.2.len(), Reverse(*i))).map(|(i, _)| i).unwrap_or(0);
        let key = &st.slots[slot as usize];
        let dev = &st.devices[devs[primary].0 as usize];
        let source = match mode {
            Mode::Cpu => {
                let grouping = match st.cpu_split {
                    Some(by) => format!("op events grouped by hlo_module, split by {by}"),
                    None => "op events grouped by hlo_module, run_id".to_string(),
                };
                match &st.cpu_source {
                    Some(threads) => format!("{threads} (trace.json.gz; {grouping})"),
                    None => format!("{} / {} ({} line(s); {grouping})", st.cpu_plane, cpu_line_names(&dev.lines), st.cpu_lines),
                }
            }
            Mode::Tpu if key.pallas => format!("{} / XLA Ops (custom call)", dev.name),
            _ => format!("{} / {}", dev.name, dev.lines.join(", ")),
        };
        modules.push(ModuleExecs {
            module: key.name.clone(),
            program_id: key.program,
            execs: devs[primary].2.clone(),
            counts_ops: mode != Mode::Tpu,
            device: (mode != Mode::Cpu).then(|| dev.name.clone()),
            source,
            per_device: if devs.len() > 1 {
                devs.iter().map(|d| DeviceExecs { device: st.devices[d.0 as usize].name.clone(), execs: d.2.clone() }).collect()
            } else {
                Vec::new()
            },
            group: devs[primary].1,
            pallas_in: if key.pallas { Some(st.pallas_in[slot as usize].clone().unwrap_or_default()) } else { None },
        });
    }
    sort_modules(&mut modules);
    let mut steps = st.steps;
    steps.sort_unstable();
    Collected {
        modules,
        ops: st.ops,
        table: st.table,
        steps,
        events: st.events,
        op_time: if mode == Mode::Tpu { op_time_label(st.device_duration.0, st.device_duration.1) } else { "event duration".to_string() },
        warnings,
        pipeline: st.pipeline,
    }
}

#[cfg(test)]
mod tests {
    use super::is_thunk_window;

    #[test]
    fn thunk_windows_are_recognised_bare_and_ordinal_prefixed() {
        for yes in ["GpuExecutable::ExecuteThunks", "[0] GpuExecutable::ExecuteThunks", "[15] GpuExecutable::ExecuteThunks"] {
            assert!(is_thunk_window(yes), "{yes}");
        }
        for no in [
            "[] GpuExecutable::ExecuteThunks",
            "[a] GpuExecutable::ExecuteThunks",
            "[0]GpuExecutable::ExecuteThunks",
            "[0] Thunks::Prepare",
            "x GpuExecutable::ExecuteThunks",
        ] {
            assert!(!is_thunk_window(no), "{no}");
        }
    }

    use crate::trace::xplane::tests::W;
    use crate::trace::{analyze_space, xplane, AnalyzeOptions};

    fn entry(field: u32, key: i64, value: &W) -> (u32, W) {
        let mut e = W::default();
        e.varint(1, key as u64).msg(2, value);
        (field, e)
    }

    fn stat_md(id: i64, name: &str) -> (u32, W) {
        let mut m = W::default();
        m.varint(1, id as u64).bytes(2, name.as_bytes());
        entry(5, id, &m)
    }

    fn event_md(id: i64, name: &str, display: &str) -> (u32, W) {
        let mut m = W::default();
        m.varint(1, id as u64).bytes(2, name.as_bytes()).bytes(4, display.as_bytes());
        entry(4, id, &m)
    }

    /// An event; `stats` are (stat id, field of the value, value) with varint values, or a
    /// string for field 5.
    fn event(md: i64, offset: i64, dur: i64, stats: &[(i64, u32, &str)]) -> W {
        let mut e = W::default();
        e.varint(1, md as u64).varint(2, offset as u64).varint(3, dur as u64);
        for &(id, field, v) in stats {
            let mut s = W::default();
            s.varint(1, id as u64);
            if field == 5 {
                s.bytes(5, v.as_bytes());
            } else {
                s.varint(field, v.parse::<i64>().unwrap() as u64);
            }
            e.msg(4, &s);
        }
        e
    }

    fn line(id: i64, name: &str, events: &[W]) -> W {
        let mut l = W::default();
        l.varint(1, id as u64).bytes(2, name.as_bytes());
        for e in events {
            l.msg(4, e);
        }
        l
    }

    fn plane(name: &str, lines: &[W], metadata: &[(u32, W)]) -> W {
        let mut p = W::default();
        p.bytes(2, name.as_bytes());
        for l in lines {
            p.msg(3, l);
        }
        for (field, m) in metadata {
            p.msg(*field, m);
        }
        p
    }

    fn space(planes: &[W]) -> Vec<u8> {
        let mut s = W::default();
        for p in planes {
            s.msg(1, p);
        }
        s.0
    }

    #[test]
    fn each_gpu_launch_goes_to_its_own_threads_window() {
        // Two host threads drive two GPUs at once; their module windows overlap in time. A
        // launch must land in its own thread's window, not in the other's that also holds it.
        let host_md = [stat_md(1, "correlation_id"), event_md(1, "jit_f:XLA GPU module", ""), event_md(2, "hipLaunchKernel", "")];
        let a = line(
            100,
            "py_xla_execute/100",
            &[event(1, 0, 1000, &[]), event(2, 10, 1, &[(1, 4, "1")]), event(1, 2000, 1000, &[]), event(2, 2010, 1, &[(1, 4, "2")])],
        );
        let b =
            line(200, "py_xla_execute/200", &[event(1, 5, 1000, &[]), event(2, 20, 1, &[(1, 4, "3")]), event(2, 30, 1, &[(1, 4, "4")])]);
        let host = plane("/host:CPU", &[a, b], &host_md);
        let gpu_md =
            [stat_md(1, "hlo_module"), stat_md(2, "program_id"), stat_md(3, "correlation_id"), stat_md(4, "hlo_op"), event_md(1, "k", "")];
        let kernel =
            |start: i64, corr: &'static str| event(1, start, 50, &[(1, 5, "jit_f"), (2, 3, "1"), (3, 4, corr), (4, 5, "fusion.1")]);
        let gpu0 = plane("/device:GPU:0", &[line(1, "Stream #1(Kernel)", &[kernel(100, "1"), kernel(2100, "2")])], &gpu_md);
        let gpu1 = plane("/device:GPU:1", &[line(1, "Stream #1(Kernel)", &[kernel(110, "3"), kernel(400, "4")])], &gpu_md);
        let data = space(&[gpu1, host, gpu0]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        let r = analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap();
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
        let m = &r.modules[0];
        assert_eq!((m.name.as_str(), m.device.as_deref(), m.executions), ("jit_f(1)", Some("/device:GPU:0"), 2));
        assert_eq!(m.devices.len(), 2);
        assert_eq!((m.devices[1].device.as_str(), m.devices[1].executions), ("/device:GPU:1", 1));
        // GPU:1's one execution spans both of its kernels: 110 .. 450 ps.
        assert_eq!(m.devices[1].median_us * 1e6, 340.0);
        assert_eq!(r.kernel.as_ref().unwrap().per_execution_us.iter().map(|u| u * 1e6).collect::<Vec<_>>(), vec![50.0, 50.0]);
    }

    /// A CPU host plane: a caller line (`python3`) with `events` plus an executor line with
    /// `executor`; stats 1-4 are hlo_module, hlo_op, run_id, correlation_id; events 1-4 are an
    /// op, a dispatch (`TfrtCpuExecutable::Execute`), a step (`kernel_step`), a GPU launch.
    fn cpu_host(caller: &[W], executor: &[W]) -> crate::trace::TraceReport {
        let md = [
            stat_md(1, "hlo_module"),
            stat_md(2, "hlo_op"),
            stat_md(3, "run_id"),
            stat_md(4, "correlation_id"),
            event_md(1, "op", ""),
            event_md(2, "TfrtCpuExecutable::Execute", ""),
            event_md(3, "kernel_step", ""),
            event_md(4, "hipLaunchKernel", ""),
        ];
        let lines = [line(1, "python3", caller), line(2, "tf_XLATfrtCpuClient/7", executor)];
        let data = space(&[plane("/host:CPU", &lines, &md)]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        analyze_space(&sp, "t", &AnalyzeOptions { kernel: Some("jit_k".into()), ..Default::default() }).unwrap()
    }

    fn op(offset: i64, dur: i64, run: Option<&'static str>) -> W {
        match run {
            Some(r) => event(1, offset, dur, &[(1, 5, "jit_k"), (2, 5, "add.1"), (3, 4, r)]),
            None => event(1, offset, dur, &[(1, 5, "jit_k"), (2, 5, "add.1")]),
        }
    }

    fn times_ps(r: &crate::trace::TraceReport) -> Vec<f64> {
        r.kernel.as_ref().unwrap().per_execution_us.iter().map(|u| (u * 1e6).round()).collect()
    }

    #[test]
    fn ops_run_inline_on_the_callers_thread_are_executions() {
        // jax 0.10 runs a cheap computation on the calling thread: its op events sit on the
        // `python3` line, beside the executor's. A GPU launch there (it carries a
        // correlation_id) is not a CPU op.
        let caller = [op(0, 10, Some("1")), op(100, 12, Some("2")), event(4, 200, 5, &[(1, 5, "jit_k"), (2, 5, "add.1"), (4, 4, "9")])];
        let r = cpu_host(&caller, &[op(300, 20, Some("3"))]);
        assert_eq!(times_ps(&r), vec![10.0, 12.0, 20.0]);
        assert_eq!(r.source, "/host:CPU / python3, tf_XLATfrtCpuClient/* (2 line(s); op events grouped by hlo_module, run_id)");
    }

    #[test]
    fn ops_without_run_id_are_split_by_the_hosts_dispatches() {
        // jax 0.4.x: no run_id. Three calls, each dispatched (nested Execute events count once)
        // and run on the executor, one of them over two ops.
        let caller = [event(2, 0, 30, &[]), event(2, 1, 20, &[]), event(2, 1000, 30, &[]), event(2, 2000, 30, &[])];
        let executor = [op(40, 100, None), op(1040, 50, None), op(1100, 30, None), op(2040, 70, None)];
        let r = cpu_host(&caller, &executor);
        assert_eq!(times_ps(&r), vec![100.0, 90.0, 70.0]);
        assert!(r.source.contains("split by host dispatch (the op events carry no run_id)"), "{}", r.source);
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn ops_without_run_id_or_dispatch_are_split_by_steps() {
        let caller = [event(3, 0, 500, &[]), event(3, 1000, 500, &[])];
        let r = cpu_host(&caller, &[op(40, 100, None), op(1040, 50, None), op(1100, 30, None)]);
        assert_eq!(times_ps(&r), vec![100.0, 90.0]);
        assert!(r.source.contains("split by step annotation"), "{}", r.source);
    }

    #[test]
    fn ops_that_cannot_be_split_say_so() {
        let r = cpu_host(&[], &[op(40, 100, None), op(1040, 50, None)]);
        assert_eq!(times_ps(&r), vec![1050.0]);
        assert!(
            r.warnings.iter().any(|w| w.contains("2 op event(s) carry no run_id") && w.contains("each module reads as one execution")),
            "{:?}",
            r.warnings
        );
    }

    #[test]
    fn host_ops_without_run_id_beside_a_device_raise_no_warning() {
        // A TPU capture whose host also ran a few ops of its own, with no run_id, dispatch or
        // step: the executions are the device's, and the host's ops are not read.
        let host_md = [stat_md(1, "hlo_module"), stat_md(2, "hlo_op"), event_md(1, "op", "")];
        let host = plane("/host:CPU", &[line(1, "python3", &[op(0, 10, None), op(50, 10, None)])], &host_md);
        let tpu = plane(
            "/device:TPU:0",
            &[line(1, "XLA Modules", &[event(1, 0, 1000, &[]), event(1, 2000, 1000, &[])])],
            &[event_md(1, "jit_g(7)", "")],
        );
        let data = space(&[host, tpu]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        let r = analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap();
        assert_eq!(r.source, "/device:TPU:0 / XLA Modules");
        assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    }

    #[test]
    fn executions_longer_than_every_host_step_are_a_contradiction() {
        // One run_id over two calls (a capture whose run ids repeat): the merged execution
        // (1050 ps) is longer than either step (500 ps) that waited for a call.
        let caller = [event(3, 0, 500, &[]), event(3, 1000, 500, &[])];
        let r = cpu_host(&caller, &[op(40, 100, Some("5")), op(1040, 50, Some("5"))]);
        assert_eq!(times_ps(&r), vec![1050.0]);
        let w = r.host_contradiction().expect("a contradiction");
        assert!(w.contains("longer than the longest of the host's 2 kernel_step annotations"), "{w}");
        assert!(r.warnings.contains(&w));
        // Split properly, the same capture agrees with its steps.
        let r = cpu_host(&caller, &[op(40, 100, Some("5")), op(1040, 50, Some("6"))]);
        assert_eq!(r.host_contradiction(), None);
    }

    /// A TPU device plane of one module executed at 0..1000 and 2000..3000 ps, with a
    /// TRACE_COMPUTE capture's compute and DMA rows (the source article's 4.1 names them) holding
    /// the same pattern in both executions.
    fn pipelined(compute: &[(i64, i64)], dma: &[(i64, i64)]) -> crate::trace::KernelStats {
        let md = [event_md(1, "jit_g(7)", ""), event_md(2, "fusion", ""), event_md(3, "dma", "")];
        let both = |spans: &[(i64, i64)], md: i64| -> Vec<xplane::tests::W> {
            [0, 2000].iter().flat_map(|o| spans.iter().map(move |&(a, b)| event(md, o + a, b - a, &[]))).collect()
        };
        let modules = line(1, "XLA Modules", &[event(1, 0, 1000, &[]), event(1, 2000, 1000, &[])]);
        let comp = line(3, super::COMPUTE_ROW, &both(compute, 2));
        let dmas = line(4, super::DMA_ROW, &both(dma, 3));
        let data = space(&[plane("/device:TPU:0", &[modules, comp, dmas], &md)]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap().kernel.unwrap()
    }

    #[test]
    fn trace_compute_rows_give_dma_compute_overlap() {
        // Healthy (the article's 4.2): each step's DMA runs under the previous step's compute;
        // the first DMA is the pipeline's fill, before any compute, and is left out.
        let k = pipelined(&[(100, 300), (300, 500), (500, 700), (700, 900)], &[(0, 100), (150, 280), (350, 480), (550, 680)]);
        let p = k.pipeline.clone().expect("pipeline rows read");
        assert_eq!(p.dma_overlap, 1.0);
        assert_eq!(p.compute_blocks_per_execution, 4.0);
        assert!((p.dma_us_per_execution - 390e-6).abs() < 1e-12, "{p:?}");
        assert!((p.compute_share - 0.8).abs() < 1e-12, "{p:?}");
        assert_eq!(crate::diagnose::blocks_seen(&k), Some(4));
        assert!((crate::diagnose::bubble_fraction(&k).unwrap() - 0.2).abs() < 1e-12);
        // Broken: DMA and compute take turns, so nothing is hidden (4.2's bubble pattern).
        let k = pipelined(&[(100, 200), (300, 400), (500, 600)], &[(0, 100), (200, 300), (400, 500)]);
        assert_eq!(k.pipeline.unwrap().dma_overlap, 0.0);
        // Half of one transfer under compute.
        let k = pipelined(&[(100, 200), (300, 400)], &[(0, 100), (150, 250)]);
        assert_eq!(k.pipeline.unwrap().dma_overlap, 0.5);
    }

    #[test]
    fn captures_without_trace_compute_rows_have_no_pipeline() {
        let md = [event_md(1, "jit_g(7)", "")];
        let modules = line(1, "XLA Modules", &[event(1, 0, 1000, &[])]);
        let data = space(&[plane("/device:TPU:0", &[modules], &md)]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        let k = analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap().kernel.unwrap();
        assert!(k.pipeline.is_none());
        // Compute rows without any DMA: no overlap figure either.
        assert!(pipelined(&[(100, 900)], &[]).pipeline.is_none());
    }

    #[test]
    fn tpu_ops_are_charged_device_durations_even_out_of_order() {
        let md = [
            stat_md(1, "device_duration_ps"),
            event_md(1, "jit_g(7)", ""),
            event_md(2, "%while.1 = f32[8] while(%a), body=%b", "while.1"),
            event_md(3, "%dot.2 = f32[8] dot(%a, %b)", "dot.2"),
        ];
        // The ops line comes first and lists the child before its parent.
        let ops = line(2, "XLA Ops", &[event(3, 1100, 300, &[(1, 3, "250")]), event(2, 1000, 1000, &[(1, 3, "900")])]);
        let modules = line(1, "XLA Modules", &[event(1, 1000, 1500, &[])]);
        let data = space(&[plane("/device:TPU:0", &[ops, modules], &md)]);
        let sp = xplane::parse_skeleton(&data).unwrap();
        let r = analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap();
        let k = r.kernel.as_ref().unwrap();
        assert_eq!(k.name, "jit_g(7)");
        assert_eq!(k.op_time, "device_duration_ps stat (as XProf)");
        let get = |n: &str| k.op_breakdown.iter().find(|o| o.name == n).unwrap();
        assert_eq!((get("while.1").inclusive_us * 1e6, get("while.1").total_us * 1e6), (900.0, 650.0));
        assert_eq!(get("dot.2").total_us * 1e6, 250.0);
        assert_eq!(r.source, "/device:TPU:0 / XLA Modules");
    }

    #[test]
    fn a_corrupt_event_is_an_error_from_the_pass() {
        let md = [stat_md(1, "device_duration_ps"), event_md(1, "jit_g(7)", "")];
        let mut data = space(&[plane("/device:TPU:0", &[line(1, "XLA Modules", &[event(1, 0, 10, &[])])], &md)]);
        // Break the event's first field into a group tag, which no XSpace field is.
        let at = data.windows(6).position(|w| w == [0x08, 0x01, 0x10, 0x00, 0x18, 0x0a]).unwrap();
        data[at] = 0x0b;
        let sp = xplane::parse_skeleton(&data).unwrap();
        let err = analyze_space(&sp, "t", &AnalyzeOptions::default()).unwrap_err();
        assert!(format!("{err:#}").contains("corrupt or truncated"), "{err:#}");
    }
}
