//! Op counts inside a Pallas kernel: on TPU and GPU the HLO shows a Pallas kernel as one custom
//! call, so its matmuls, exponentials, reductions, DMAs and copies are read from the kernel's
//! own body (the Mosaic module, the Triton module or the Mosaic GPU module, as MLIR text) that
//! `ratchet_bench` decodes from the custom call and writes to `kernel.body.mlir`.
//!
//! The file holds one or more kernels, each after a header line
//! `// ratchet-kernel dialect=mosaic name=flash_attention target=tpu_custom_call [grid=1,4,1]`
//! (written by `ratchet_bench.write_kernel_bodies`). Ops are recognised in both MLIR forms: the
//! generic `"dialect.op"(...)` form (the serialized Mosaic module prints its ops as
//! `"stable_mosaic.tpu.matmul"`, the version prefix is dropped) and the custom
//! `%x = dialect.op ...` form (Triton). What counts as what is listed in `classify`.
//!
//! Mosaic GPU (Pallas `plgpu`, custom call `mosaic_gpu_v2`) serializes its kernel already lowered
//! to per-thread code (gpu / nvvm / llvm ops, `"stable_mosaic_gpu.*"`): one array op becomes one
//! op per register fragment (a (64, 64) `exp` is 16 `math.exp` on `vector<2xf32>`), and a wgmma
//! is PTX in `llvm.inline_asm`. `ratchet_bench` writes that body with its source locations, and
//! matmuls, exponentials and reductions are counted once per source location: ops unrolled from
//! one source op share it. DMAs, waits, copies, loads and stores are counted per op.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The header that starts each kernel in a kernel-body file.
pub const HEADER: &str = "// ratchet-kernel";

/// Op counts of one kernel body.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelOps {
    /// `mosaic` (TPU), `triton` or `mosaic_gpu` (GPU), or what the header says.
    pub dialect: String,
    pub name: String,
    /// Matrix multiplies: `tpu.matmul`, `tt.dot`, `vector.contract`, wgmma / tcgen05 MMAs
    /// (Mosaic GPU: the `wgmma.mma_async` / `tcgen05.mma` PTX of one source matmul counts once).
    pub matmul: usize,
    /// Exponentials: `math.exp`/`exp2`/`expm1`, and Triton's `extern_elementwise` calls of
    /// libdevice `__nv_exp*`.
    pub exp: usize,
    /// Reductions: `vector.multi_reduction`, `vector.reduction`, `tt.reduce`; Mosaic GPU: the
    /// butterfly warp shuffles (`nvvm.shfl.sync` kind bfly) of one source reduction.
    pub reduce: usize,
    /// Explicit DMA / async copy starts: `tpu.enqueue_dma`, Triton's `async_copy_*`, TMA loads
    /// and stores (`nvvm.cp.async.bulk.tensor.*` on Mosaic GPU).
    pub dma: usize,
    /// Waits on DMAs (`tpu.wait_dma*`, `async_wait`, barrier waits).
    pub dma_wait: usize,
    /// Synchronous buffer copies in the body (`memref.copy`, `*.copy` that is not a DMA): the
    /// kernel-level counterpart of the HLO's defensive copies.
    pub copy: usize,
    /// Vector / tensor loads and stores (VMEM or global memory).
    pub load: usize,
    pub store: usize,
    /// `scf.for` / `scf.while` loops inside the body (the GPU form loops over KV blocks).
    pub loops: usize,
    /// Mosaic: the operands the pipeline moves by DMA each grid step (`window_params`);
    /// these DMAs are issued by Pallas' pipeline, not by ops in the body.
    pub pipelined_operands: Option<usize>,
    /// The kernel's grid: Mosaic `iteration_bounds`, Triton's launch grid from the header,
    /// Mosaic GPU's `gpu.launch` grid operands.
    pub grid: Vec<u64>,
    /// The `pallas_call`'s `cost_estimate` (Mosaic): what XProf's roofline tool reads for the
    /// custom call. `None` when the call carries none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_flops: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_transcendentals: Option<u64>,
    /// Every op, constants included.
    pub total_ops: usize,
    /// Count of each op name (version prefix dropped).
    pub opcodes: BTreeMap<String, usize>,
}

impl KernelOps {
    /// Grid steps: the product of the grid (None when the grid is unknown).
    pub fn grid_steps(&self) -> Option<u64> {
        (!self.grid.is_empty()).then(|| self.grid.iter().product())
    }

    /// One line of counts, in the article's order (section 5.3) plus the kernel-level extras.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "matmul {}  exp {}  reduce {}  dma {}  copy {}  load {}  store {}  loops {}  ({} ops)",
            self.matmul, self.exp, self.reduce, self.dma, self.copy, self.load, self.store, self.loops, self.total_ops
        );
        if let Some(w) = self.pipelined_operands {
            s.push_str(&format!("  pipelined operands {w}"));
        }
        if let Some(g) = self.grid_steps() {
            let dims: Vec<String> = self.grid.iter().map(u64::to_string).collect();
            s.push_str(&format!("  grid {} = {g} steps", dims.join("x")));
        }
        s
    }
}

/// What an op name counts as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Matmul,
    Exp,
    Reduce,
    Dma,
    DmaWait,
    Copy,
    Load,
    Store,
    Loop,
    Other,
}

/// The class of an op (its name without the `stable_mosaic.` prefix). `extern_symbol` is the
/// `symbol = "..."` of a Triton `extern_elementwise`.
fn classify(op: &str, extern_symbol: Option<&str>) -> Class {
    let last = op.rsplit('.').next().unwrap_or(op);
    // Mosaic GPU: TMA copies (`...tensor.shared.cluster.global` loads, `...tensor.global.shared.cta`
    // stores) and non-tensor bulk copies; their commit / wait ops are not copies.
    if op.starts_with("nvvm.cp.async.") && !op.ends_with(".commit.group") && !op.contains("wait") {
        return Class::Dma;
    }
    match op {
        "tpu.matmul"
        | "tt.dot"
        | "tt.dot_scaled"
        | "vector.contract"
        | "ttng.warp_group_dot"
        | "ttng.tc_gen5_mma"
        | "mosaic_gpu.wgmma"
        | "mosaic_gpu.tcgen05_mma"
        | "nvgpu.warpgroup.mma" => Class::Matmul,
        "math.exp" | "math.exp2" | "math.expm1" | "tt.precise_exp" => Class::Exp,
        "tt.extern_elementwise" if extern_symbol.is_some_and(|s| s.contains("exp")) => Class::Exp,
        "vector.multi_reduction" | "vector.reduction" | "tt.reduce" | "tpu.all_reduce" | "nvvm.redux.sync" => Class::Reduce,
        "tpu.enqueue_dma"
        | "tpu.enqueue_indirect_dma"
        | "ttg.async_copy_global_to_local"
        | "ttng.async_tma_copy_global_to_local"
        | "ttng.async_tma_copy_local_to_global"
        | "tt.descriptor_load"
        | "tt.experimental_descriptor_load"
        | "mosaic_gpu.async_load"
        | "mosaic_gpu.async_store"
        | "nvgpu.tma.async.load" => Class::Dma,
        "tpu.wait_dma"
        | "tpu.wait_dma2"
        | "tpu.wait_indirect_dma"
        | "ttg.async_wait"
        | "ttng.wait_barrier"
        | "ttng.async_tma_store_wait"
        | "mosaic_gpu.wait"
        | "nvvm.mbarrier.try_wait.parity"
        | "nvvm.mbarrier.try_wait"
        | "nvvm.cp.async.bulk.wait_group"
        | "nvvm.cp.async.wait.group" => Class::DmaWait,
        "scf.for" | "scf.while" => Class::Loop,
        "vector.load" | "tpu.load" | "tpu.strided_load" | "memref.load" | "tt.load" | "ttg.local_load" | "llvm.load" => Class::Load,
        "vector.store" | "tpu.vector_store" | "tpu.store" | "tpu.strided_store" | "memref.store" | "tt.store" | "ttg.local_store"
        | "llvm.store" => Class::Store,
        _ if last == "copy" || last.ends_with("_copy") => Class::Copy,
        _ => Class::Other,
    }
}

/// The class of an op on its line: [`classify`], plus the Mosaic GPU ops whose meaning is in an
/// attribute (PTX in `llvm.inline_asm`, the kind of a warp shuffle).
fn classify_line(op: &str, line: &str) -> Class {
    match op {
        "llvm.inline_asm" => match quoted_attr(line, "asm_string") {
            Some(asm) if asm.contains("wgmma.mma_async") || asm.contains("tcgen05.mma") => Class::Matmul,
            Some(asm) if asm.contains("ex2.approx") => Class::Exp,
            _ => Class::Other,
        },
        // A butterfly shuffle is a step of a cross-lane reduction (`idx` shuffles broadcast).
        "nvvm.shfl.sync" if line.contains("shfl_kind bfly") => Class::Reduce,
        _ => classify(op, quoted_attr(line, "symbol")),
    }
}

/// The source location an op line ends with (`loc(#loc104)` or an inline `loc("...")`), as
/// `ratchet_bench` writes Mosaic GPU bodies; `None` for bodies written without locations.
fn source_loc(line: &str) -> Option<&str> {
    let at = line.rfind(" loc(")?;
    let loc = line[at + 1..].trim_end();
    loc.ends_with(')').then_some(loc)
}

/// The op name on one line of MLIR text, or `None` when the line holds no op. Handles
/// `"d.op"(...)`, `%r = "d.op"(...)`, `%r:2 = d.op ...`, `d.op ...` (results-free custom form).
fn op_name(line: &str) -> Option<&str> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with("//") || line.starts_with('^') || line.starts_with('}') || line.starts_with('#') {
        return None;
    }
    let rest = if line.starts_with('%') {
        let (_, after) = line.split_once(" = ")?;
        after.trim_start()
    } else {
        line
    };
    let name = if let Some(q) = rest.strip_prefix('"') {
        &q[..q.find('"')?]
    } else {
        let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '.' || c == '_')).unwrap_or(rest.len());
        &rest[..end]
    };
    // An op name is `dialect.op`: at least one dot, starting with a letter (this also skips
    // `module`, attribute aliases and block labels).
    let ok = name.contains('.') && name.starts_with(|c: char| c.is_ascii_alphabetic()) && !name.ends_with('.');
    ok.then(|| name.strip_prefix("stable_mosaic.").or_else(|| name.strip_prefix("stable_mosaic_gpu.")).unwrap_or(name))
}

/// `key = value` of an attribute on the line, e.g. `symbol = "__nv_expf"` -> `__nv_expf`.
fn quoted_attr<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("{key} = \""))? + key.len() + 4;
    let rest = &line[at..];
    Some(&rest[..rest.find('"')?])
}

/// `iteration_bounds = array<i64: 1, 4, 4>` -> [1, 4, 4].
fn iteration_bounds(line: &str) -> Option<Vec<u64>> {
    let at = line.find("iteration_bounds = array<i64:")? + "iteration_bounds = array<i64:".len();
    let rest = &line[at..];
    let inner = &rest[..rest.find('>')?];
    inner.split(',').map(|x| x.trim().parse().ok()).collect()
}

/// `%21 = "...arith.constant"() {value = 8 : index}` -> ("%21", 8): index constants, from
/// which a Mosaic GPU `gpu.launch` takes its grid.
fn index_constant(line: &str) -> Option<(&str, u64)> {
    let (lhs, rhs) = line.trim_start().split_once(" = ")?;
    if !rhs.contains("arith.constant") || !lhs.starts_with('%') {
        return None;
    }
    let at = rhs.find("{value = ")? + "{value = ".len();
    let (v, ty) = rhs[at..].split_once(" : ")?;
    ty.starts_with("index").then_some(())?;
    Some((lhs, v.trim().parse().ok()?))
}

/// The grid of a `gpu.launch` line: its first three operands that are index constants (the
/// async token before them is not; block sizes and shared memory follow).
fn launch_grid(line: &str, consts: &BTreeMap<String, u64>) -> Option<Vec<u64>> {
    let at = line.find("gpu.launch\"(")? + "gpu.launch\"(".len();
    let args = &line[at..at + line[at..].find(')')?];
    let grid: Vec<u64> = args.split(',').filter_map(|a| consts.get(a.trim()).copied()).take(3).collect();
    (grid.len() == 3).then_some(grid)
}

/// How many `window_bounds` entries the line's `window_params` list holds.
fn window_params(line: &str) -> Option<usize> {
    let at = line.find("window_params = [")? + "window_params = ".len();
    // The list's own brackets: entries are `{...}` dicts at depth 1 (an operand without a
    // window, in memory space ANY, is an empty `{}`).
    let (mut depth, mut entries) = (0usize, 0usize);
    for c in line[at..].chars() {
        match c {
            '[' | '<' | '(' => depth += 1,
            ']' | '>' | ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break;
                }
            }
            '{' => {
                if depth == 1 {
                    entries += 1;
                }
                depth += 1;
            }
            '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Some(entries)
}

/// Counts the ops of one kernel's MLIR text.
pub fn kernel_ops(text: &str, dialect: &str, name: &str) -> KernelOps {
    let mut k = KernelOps { dialect: dialect.to_string(), name: name.to_string(), ..Default::default() };
    let mut consts = BTreeMap::new();
    // Source ops already counted, by (class, location): an unrolled op counts once.
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        if let Some((var, v)) = index_constant(line) {
            consts.insert(var.to_string(), v);
        }
        if let Some(g) = launch_grid(line, &consts) {
            k.grid = g;
        }
        if let Some(b) = iteration_bounds(line) {
            // The kernel's main function carries the grid; the index-map functions do not.
            k.grid = b;
        }
        if let Some(w) = window_params(line) {
            k.pipelined_operands = Some(w);
        }
        let Some(op) = op_name(line) else { continue };
        k.total_ops += 1;
        *k.opcodes.entry(op.to_string()).or_default() += 1;
        let class = classify_line(op, line);
        if matches!(class, Class::Matmul | Class::Exp | Class::Reduce) {
            if let Some(loc) = source_loc(line) {
                if !seen.insert((class as u8, loc.to_string())) {
                    continue;
                }
            }
        }
        match class {
            Class::Matmul => k.matmul += 1,
            Class::Exp => k.exp += 1,
            Class::Reduce => k.reduce += 1,
            Class::Dma => k.dma += 1,
            Class::DmaWait => k.dma_wait += 1,
            Class::Copy => k.copy += 1,
            Class::Load => k.load += 1,
            Class::Store => k.store += 1,
            Class::Loop => k.loops += 1,
            Class::Other => {}
        }
    }
    k
}

/// Why a kernel-body file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum KernelBodyError {
    #[error("no `{HEADER}` header line: not a kernel-body file written by ratchet_bench")]
    NoHeader,
}

/// The kernels of a kernel-body file, each with its counts.
pub fn parse_kernel_bodies(text: &str) -> Result<Vec<KernelOps>, KernelBodyError> {
    let mut out = Vec::new();
    type Cost = [Option<u64>; 3];
    let mut current: Option<(String, String, Vec<u64>, Cost, String)> = None;
    let finish = |cur: Option<(String, String, Vec<u64>, Cost, String)>, out: &mut Vec<KernelOps>| {
        if let Some((dialect, name, grid, cost, body)) = cur {
            let mut k = kernel_ops(&body, &dialect, &name);
            if k.grid.is_empty() {
                k.grid = grid;
            }
            [k.cost_flops, k.cost_bytes, k.cost_transcendentals] = cost;
            out.push(k);
        }
    };
    for line in text.lines() {
        if let Some(h) = line.strip_prefix(HEADER) {
            finish(current.take(), &mut out);
            let field = |key: &str| {
                h.split_whitespace().find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('='))).unwrap_or("").to_string()
            };
            let grid = field("grid").split(',').filter_map(|x| x.trim().parse().ok()).collect();
            let num = |key: &str| field(key).parse::<u64>().ok();
            let cost = [num("cost_flops"), num("cost_bytes_accessed"), num("cost_transcendentals")];
            current = Some((field("dialect"), field("name"), grid, cost, String::new()));
        } else if let Some((_, _, _, _, body)) = current.as_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    finish(current, &mut out);
    if out.is_empty() {
        return Err(KernelBodyError::NoHeader);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_names_in_both_forms() {
        assert_eq!(op_name(r#"    %49 = "stable_mosaic.tpu.matmul"(%47, %24, %48) {x} : () -> ()"#), Some("tpu.matmul"));
        assert_eq!(op_name(r#"    "stable_mosaic.tpu.vector_store"(%55, %arg9) : () -> ()"#), Some("tpu.vector_store"));
        assert_eq!(op_name("      %133 = tt.dot %38, %131, %132 : tensor<1xf32>"), Some("tt.dot"));
        assert_eq!(op_name("      %43:3 = scf.for %arg4 = %c0 to %c4 step %c1"), Some("scf.for"));
        assert_eq!(op_name("    tt.store %72, %47 : tensor<128x64x!tt.ptr<bf16>>"), Some("tt.store"));
        assert_eq!(op_name(r#"      %134 = "tt.reduce"(%133) <{axis = 1 : i32}> ({"#), Some("tt.reduce"));
        assert_eq!(op_name("module attributes {stable_mosaic.version = 11 : i64} {"), None);
        assert_eq!(op_name("  ^bb0(%arg0: i32):"), None);
        assert_eq!(op_name("  }) : () -> ()"), None);
        assert_eq!(op_name("// comment tpu.matmul"), None);
    }

    #[test]
    fn triton_exp_is_an_extern_call_of_libdevice() {
        let t = r#"%137 = tt.extern_elementwise %136 {libname = "", libpath = "", pure = true, symbol = "__nv_expf"} : (tensor<128xf32>) -> tensor<128xf32>
%138 = tt.extern_elementwise %136 {libname = "", libpath = "", pure = true, symbol = "__nv_logf"} : (tensor<128xf32>) -> tensor<128xf32>
%2 = math.exp2 %1 : f32
"#;
        let k = kernel_ops(t, "triton", "k");
        assert_eq!((k.exp, k.total_ops), (2, 3));
    }

    #[test]
    fn copies_dmas_and_waits_are_told_apart() {
        let t = r#""stable_mosaic.tpu.enqueue_dma"(%a, %b, %sem) : () -> ()
"stable_mosaic.tpu.wait_dma2"(%sem, %a, %b) : () -> ()
"stable_mosaic.memref.copy"(%a, %b) : () -> ()
%x = ttg.async_copy_global_to_local %p, %buf : tensor<1xf32>
"#;
        let k = kernel_ops(t, "mosaic", "k");
        assert_eq!((k.dma, k.dma_wait, k.copy), (2, 1, 1));
    }

    #[test]
    fn mosaic_gpu_ops_count_once_per_source_location() {
        let t = r#"%20 = "stable_mosaic_gpu.arith.constant"() {value = 1 : index} : () -> index loc(#loc1)
%21 = "stable_mosaic_gpu.arith.constant"() {value = 8 : index} : () -> index loc(#loc1)
%22 = "stable_mosaic_gpu.arith.constant"() {value = 128 : index} : () -> index loc(#loc1)
%235 = "stable_mosaic_gpu.gpu.launch"(%28, %21, %20, %20, %22, %20, %20, %18) ({
%1 = "stable_mosaic_gpu.math.exp"(%0#0) : (vector<2xf32>) -> vector<2xf32> loc(#loc7)
%2 = "stable_mosaic_gpu.math.exp"(%0#1) : (vector<2xf32>) -> vector<2xf32> loc(#loc7)
%3 = "stable_mosaic_gpu.math.exp"(%0#2) : (vector<1xf32>) -> vector<1xf32> loc(#loc8)
%4 = "stable_mosaic_gpu.llvm.inline_asm"(%a) {asm_string = "{ wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 }"} : (i32) -> f32 loc(#loc9)
%5 = "stable_mosaic_gpu.llvm.inline_asm"(%a) {asm_string = "{ wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 }"} : (i32) -> f32 loc(#loc9)
%6 = "stable_mosaic_gpu.llvm.inline_asm"(%a) {asm_string = "max.NaN.f32 $0, $1, $2;"} : (f32) -> f32 loc(#loc9)
%7 = "stable_mosaic_gpu.nvvm.shfl.sync"(%a, %b, %c, %d) {kind = #nvvm<shfl_kind bfly>} : (i32, i32, i32, i32) -> i32 loc(#loc10)
%8 = "stable_mosaic_gpu.nvvm.shfl.sync"(%a, %b, %c, %d) {kind = #nvvm<shfl_kind idx>} : (i32, i32, i32, i32) -> i32 loc(#loc10)
"stable_mosaic_gpu.nvvm.cp.async.bulk.tensor.shared.cluster.global"(%a) : () -> () loc(#loc11)
"stable_mosaic_gpu.nvvm.cp.async.bulk.tensor.shared.cluster.global"(%b) : () -> () loc(#loc11)
"stable_mosaic_gpu.nvvm.cp.async.bulk.commit.group"() : () -> () loc(#loc12)
"stable_mosaic_gpu.nvvm.cp.async.bulk.wait_group"() {group = 0 : i32} : () -> () loc(#loc12)
"#;
        let k = kernel_ops(t, "mosaic_gpu", "k");
        // Two exp locations, one wgmma location (the max asm is not a matmul), one butterfly
        // reduction; both TMA loads count (DMAs count per op), the commit is not a copy.
        assert_eq!((k.exp, k.matmul, k.reduce, k.dma, k.dma_wait, k.copy), (2, 1, 1, 2, 1, 0));
        assert_eq!(k.grid, vec![8, 1, 1]);
        assert_eq!(k.opcodes["math.exp"], 3);
    }

    #[test]
    fn file_without_header_is_an_error() {
        assert!(parse_kernel_bodies("module {}\n").is_err());
        let two = "// ratchet-kernel dialect=mosaic name=a target=tpu_custom_call\n\"stable_mosaic.math.exp\"(%0) : () -> ()\n\
                   // ratchet-kernel dialect=triton name=b target=t grid=2,3,1\n%1 = tt.dot %a, %b, %c : x\n";
        let ks = parse_kernel_bodies(two).unwrap();
        assert_eq!(ks.len(), 2);
        assert_eq!((ks[0].name.as_str(), ks[0].exp, ks[0].matmul), ("a", 1, 0));
        assert_eq!((ks[1].dialect.as_str(), ks[1].matmul, ks[1].grid_steps()), ("triton", 1, Some(6)));
    }
}
