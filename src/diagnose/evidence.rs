//! What a capture, its HLO and the kernel body show about a kernel, as figures the diagnosis
//! rules cite: which kind of work is there (matmuls, exponentials, a Pallas kernel, vendor
//! library calls) and which share of the kernel's op time each kind of op takes.

use crate::trace::kernel_body::KernelOps;
use crate::trace::{HloStats, KernelStats, OpStat};

/// Where the kernel ran, as far as the evidence tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Tpu,
    Gpu,
    Cpu,
    Unknown,
}

/// Shares of the kernel's op (self) time, 0..1, by kind of op.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Shares {
    /// Asynchronous copies (`copy-start` / `copy-done`).
    pub async_copy: f64,
    /// The async copies that move data to or from host memory (memory space S(5)).
    pub host_copy: f64,
    /// Synchronous `copy` ops.
    pub sync_copy: f64,
    /// Layout ops ("data formatting": transpose, reshape, slices, ... and transpose fusions).
    pub layout: f64,
    /// Reductions (not collectives).
    pub reduce: f64,
    /// Collectives (all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute).
    pub collective: f64,
    /// `*-done` ops of async pairs other than copies: their duration is the time the compute
    /// waits (seed 003: "async-done with duration > 0: compute engine waiting = exposed
    /// communication cost").
    pub waits: f64,
    /// Exponentials.
    pub exp: f64,
    /// Matmuls and convolutions.
    pub dot: f64,
}

/// The evidence the rules read.
#[derive(Debug, Clone)]
pub struct Evidence {
    pub backend: Backend,
    /// What shows a matmul/convolution (`2 dot in the HLO`, ...), `None` when nothing does.
    pub dot: Option<String>,
    /// What shows an exponential, `None` when nothing does.
    pub exp: Option<String>,
    /// What shows a Pallas kernel (a `tpu_custom_call` or Triton custom call, a kernel body).
    pub pallas: Option<String>,
    /// Vendor library calls (`__cublas$gemm`, `__cudnn$convForward`, `cudnn-conv` ops).
    pub vendor: Vec<String>,
    /// Shares of the op time; `None` without an op breakdown.
    pub shares: Option<Shares>,
    /// The largest layout op and its share.
    pub layout_top: Option<(String, f64)>,
}

/// Custom-call targets of vendor libraries (cuBLAS, cuDNN, hipBLASLt, rocBLAS, MIOpen, oneDNN),
/// as XLA names them.
fn is_vendor_target(t: &str) -> bool {
    ["__cublas", "__cudnn", "__hipblas", "__rocblas", "__miopen", "__onednn"].iter().any(|p| t.starts_with(p))
}

/// Custom-call targets that are Pallas kernels: Mosaic on TPU, Triton or Mosaic GPU on GPU.
fn is_pallas_target(t: &str) -> bool {
    t == "tpu_custom_call" || t.contains("triton") || t.contains("mosaic_gpu")
}

fn base(name: &str) -> String {
    name.to_ascii_lowercase()
}

pub(crate) fn is_collective(name: &str, category: &str) -> bool {
    const KINDS: [&str; 6] = ["all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute", "collective"];
    let n = base(name);
    KINDS.iter().any(|k| category.starts_with(k) || n.starts_with(k))
}

fn is_async_copy(o: &OpStat) -> bool {
    let n = base(&o.name);
    matches!(o.category.as_str(), "copy-start" | "copy-done" | "async-copy") || n.starts_with("copy-start") || n.starts_with("copy-done")
}

fn is_layout(o: &OpStat) -> bool {
    o.category == "data formatting" || base(&o.name).contains("transpose")
}

fn is_reduce(o: &OpStat) -> bool {
    let n = base(&o.name);
    !is_collective(&o.name, &o.category)
        && (o.category == "reduce" || n.starts_with("reduce") || n.contains("_reduce") || n.contains("reduce_"))
}

fn is_exp(o: &OpStat) -> bool {
    o.category.starts_with("exponential") || base(&o.name).contains("exponential")
}

pub(crate) fn is_dot(o: &OpStat) -> bool {
    let n = base(&o.name);
    o.category == "dot"
        || o.category.contains("convolution")
        || ["dot", "gemm", "matmul", "conv"].iter().any(|k| n.contains(k))
        || n.starts_with("cijk_")
}

fn is_wait(o: &OpStat) -> bool {
    base(&o.name).contains("-done") || o.category.ends_with("-done")
}

fn shares(k: &KernelStats) -> Option<(Shares, Option<(String, f64)>)> {
    let total: f64 = k.op_breakdown.iter().map(|o| o.total_us).sum();
    if total <= 0.0 {
        return None;
    }
    let sum = |f: &dyn Fn(&OpStat) -> bool| k.op_breakdown.iter().filter(|o| f(o)).map(|o| o.total_us).sum::<f64>() / total;
    let host = |o: &OpStat| is_async_copy(o) && k.host_memory_ops.iter().any(|h| h == &o.name);
    let s = Shares {
        async_copy: sum(&is_async_copy),
        host_copy: sum(&host),
        sync_copy: sum(&|o: &OpStat| o.category == "copy" && !is_async_copy(o)),
        layout: sum(&is_layout),
        reduce: sum(&is_reduce),
        collective: sum(&|o: &OpStat| is_collective(&o.name, &o.category)),
        waits: sum(&|o: &OpStat| is_wait(o) && !is_async_copy(o)),
        exp: sum(&is_exp),
        dot: sum(&is_dot),
    };
    let top = k.op_breakdown.iter().filter(|o| is_layout(o)).max_by(|a, b| a.total_us.total_cmp(&b.total_us));
    Some((s, top.map(|o| (o.name.clone(), o.total_us / total))))
}

fn pct(x: f64) -> String {
    super::pct(x)
}

/// Gathers the evidence from what the diagnosis has.
pub fn gather(kernel: Option<&KernelStats>, hlo: Option<&HloStats>, kernel_ops: &[KernelOps], backend: Option<&str>) -> Evidence {
    let backend = match backend {
        Some("tpu") => Backend::Tpu,
        Some("gpu" | "cuda" | "rocm") => Backend::Gpu,
        Some("cpu") => Backend::Cpu,
        _ => match kernel.map(|k| k.device.as_deref()) {
            Some(Some(d)) if d.contains("TPU") => Backend::Tpu,
            Some(Some(d)) if d.contains("GPU") => Backend::Gpu,
            Some(None) => Backend::Cpu,
            _ => Backend::Unknown,
        },
    };
    let (shares, layout_top) = match kernel.and_then(shares) {
        Some((s, t)) => (Some(s), t),
        None => (None, None),
    };
    let body = kernel_ops.first();
    let dot = body
        .filter(|b| b.matmul > 0)
        .map(|b| format!("{} matmul(s) in the {} kernel body", b.matmul, b.dialect))
        .or_else(|| hlo.filter(|h| h.dot > 0).map(|h| format!("{} dot(s) in the HLO", h.dot)))
        .or_else(|| hlo.and_then(|h| h.opcodes.get("convolution")).filter(|n| **n > 0).map(|n| format!("{n} convolution(s) in the HLO")))
        .or_else(|| shares.as_ref().filter(|s| s.dot > 0.0).map(|s| format!("matmul/convolution ops take {} of the op time", pct(s.dot))));
    let exp = body
        .filter(|b| b.exp > 0)
        .map(|b| format!("{} exp(s) in the {} kernel body", b.exp, b.dialect))
        .or_else(|| hlo.filter(|h| h.exponential > 0).map(|h| format!("{} exponential(s) in the HLO", h.exponential)))
        .or_else(|| shares.as_ref().filter(|s| s.exp > 0.0).map(|s| format!("exponentials take {} of the op time", pct(s.exp))));
    let targets: Vec<(&String, &usize)> = hlo.map(|h| h.custom_call_targets.iter().collect()).unwrap_or_default();
    let pallas = body
        .map(|b| format!("the {} kernel body of {}", b.dialect, b.name))
        .or_else(|| targets.iter().find(|(t, _)| is_pallas_target(t)).map(|(t, n)| format!("{n} `{t}` custom call(s) in the HLO")));
    let mut vendor: Vec<String> = targets.iter().filter(|(t, _)| is_vendor_target(t)).map(|(t, _)| t.to_string()).collect();
    if let Some(k) = kernel {
        for o in &k.op_breakdown {
            let n = base(&o.name);
            if (n.starts_with("cudnn") || n.starts_with("cublas") || n.starts_with("__cudnn") || n.starts_with("__cublas"))
                && !vendor.contains(&o.name)
            {
                vendor.push(o.name.clone());
            }
        }
    }
    Evidence { backend, dot, exp, pallas, vendor, shares, layout_top }
}
