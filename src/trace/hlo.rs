//! HLO statistics: how many dot, exponential, reduce, copy, fusion, custom-call and while
//! instructions a compiled module holds, read from the HLO text a benchmark dumps or from the
//! serialized `xla.HloProto` embedded in a capture's `/host:metadata` plane.
//!
//! These counts are the article's "HLO stats" (section 5): the expected numbers for an
//! attention kernel are 2 dots, 2 exponentials and 2-4 reduces; any copy is worth a look,
//! because the compiler inserts defensive copies when it suspects aliasing.

use std::collections::BTreeMap;

use super::wire::{decode_varint, WireType};
use serde::{Deserialize, Serialize};

/// Instruction counts of one HLO module (all computations, fused ones included).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HloStats {
    pub dot: usize,
    pub exponential: usize,
    pub reduce: usize,
    pub copy: usize,
    pub fusion: usize,
    pub custom_call: usize,
    #[serde(rename = "while")]
    pub while_: usize,
    /// All instructions, parameters and constants included.
    pub total_instructions: usize,
    pub computations: usize,
    /// Count of every opcode seen, for what the named fields leave out.
    pub opcodes: BTreeMap<String, usize>,
    /// Copies that carry a `while` loop's state (inside a loop body or condition, or feeding a
    /// loop's initial tuple): what the Pallas interpreter's grid loop makes on CPU, not the
    /// article's defensive copies. Included in `copy`.
    #[serde(default)]
    pub loop_copies: usize,
    /// Targets of the custom calls (`tpu_custom_call` for a Pallas kernel on TPU,
    /// `__gpu$xla.gpu.triton` for one on GPU, `__cublas$gemm` or `__cudnn$convForward` for a
    /// vendor library call), with their counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_call_targets: BTreeMap<String, usize>,
}

impl HloStats {
    fn add(&mut self, opcode: &str) {
        self.total_instructions += 1;
        match opcode {
            "dot" => self.dot += 1,
            "exponential" => self.exponential += 1,
            "reduce" => self.reduce += 1,
            "copy" => self.copy += 1,
            "fusion" => self.fusion += 1,
            "custom-call" => self.custom_call += 1,
            "while" => self.while_ += 1,
            _ => {}
        }
        *self.opcodes.entry(opcode.to_string()).or_default() += 1;
    }

    /// Copies that may be the article's defensive copies: all copies but the loop-state ones.
    pub fn suspect_copies(&self) -> usize {
        self.copy.saturating_sub(self.loop_copies)
    }

    /// The article's defensive-copy diagnosis (section 5.4), when the module holds copies that
    /// are not a loop's state copies.
    pub fn copy_warning(&self) -> Option<String> {
        let n = self.suspect_copies();
        (n > 0).then(|| {
            let loops =
                if self.loop_copies > 0 { format!(" (besides {} while-loop state copies)", self.loop_copies) } else { String::new() };
            format!(
                "{n} copy op(s) in the HLO{loops}: possibly defensive copies from aliasing \
                 (an output ref read before its final write, or an accumulator without a \
                 scratch buffer); each is a full read+write of its buffer"
            )
        })
    }
}

/// Counts the instructions of HLO text (`HloModule ...` as printed by `as_text()` or dumped by
/// XLA). An instruction is a line `[ROOT] %name = <shape> <opcode>(...)` inside a computation
/// body; the opcode is the identifier right after the shape, so `copy(` inside a metadata
/// string or an operand list is never miscounted.
pub fn hlo_stats_from_text(text: &str) -> HloStats {
    let mut stats = HloStats::default();
    let mut graph = Graph::default();
    let mut in_body = false;
    for raw in text.lines() {
        let line = raw.trim();
        if !in_body {
            // A computation header: `%name (params) -> shape {` or `ENTRY %main (...) -> ... {`
            // (compiled modules), or `name {` / `ENTRY name {` (`as_hlo_text()` of a lowered,
            // not yet compiled module).
            if line.ends_with('{') && !line.starts_with("HloModule") && (line.contains("->") || is_bare_header(line)) {
                in_body = true;
                stats.computations += 1;
                let name = line.strip_prefix("ENTRY ").unwrap_or(line).split_whitespace().next().unwrap_or("");
                graph.computations.push((name.trim_start_matches('%').to_string(), Vec::new()));
            }
            continue;
        }
        if line == "}" {
            in_body = false;
            continue;
        }
        if let Some(op) = instruction_opcode(line) {
            stats.add(op);
            if op == "custom-call" {
                if let Some(t) = line.split("custom_call_target=\"").nth(1).and_then(|t| t.split('"').next()) {
                    *stats.custom_call_targets.entry(t.to_string()).or_default() += 1;
                }
            }
            if let (Some(name), Some((_, instrs))) = (instruction_name(line), graph.computations.last_mut()) {
                instrs.push(Instr {
                    key: name.to_string(),
                    opcode: op.to_string(),
                    operands: operand_names(line, op),
                    calls: loop_calls(line),
                });
            }
        }
    }
    stats.loop_copies = graph.loop_copies();
    stats
}

/// `name {` or `ENTRY name {`: a computation header without a signature.
fn is_bare_header(line: &str) -> bool {
    let name = line.strip_prefix("ENTRY ").unwrap_or(line).trim_end_matches('{').trim();
    !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "%._-".contains(c))
}

/// One instruction of the module's graph, as the copy classification needs it.
#[derive(Debug, Default)]
struct Instr {
    /// Its name (text) or id (proto), unique within the module.
    key: String,
    opcode: String,
    operands: Vec<String>,
    /// Computations it calls (a while's body and condition, a conditional's branches, a
    /// fusion's or reduce's computation).
    calls: Vec<String>,
}

/// Computations (name or id, instructions) of one module.
#[derive(Debug, Default)]
struct Graph {
    computations: Vec<(String, Vec<Instr>)>,
}

impl Graph {
    /// Copies that carry loop state: every copy in a computation a `while` runs (body,
    /// condition), and every copy whose value reaches a `while`'s operand through tuples and
    /// copies only (the loop's initial state). The Pallas interpreter's grid loop makes these
    /// on CPU; a defensive copy (section 5.4 of the article) feeds the kernel's computation.
    fn loop_copies(&self) -> usize {
        use std::collections::HashSet;
        // Every computation a while runs, and all they call in turn (conditional branches).
        let mut loop_comps: HashSet<&str> = HashSet::new();
        let mut todo: Vec<&str> = self
            .computations
            .iter()
            .flat_map(|(_, is)| is.iter().filter(|i| i.opcode == "while").flat_map(|i| i.calls.iter().map(String::as_str)))
            .collect();
        while let Some(c) = todo.pop() {
            if loop_comps.insert(c) {
                if let Some((_, instrs)) = self.computations.iter().find(|(name, _)| name == c) {
                    todo.extend(instrs.iter().flat_map(|i| i.calls.iter().map(String::as_str)));
                }
            }
        }
        let mut n = 0;
        for (comp, instrs) in &self.computations {
            let copies = instrs.iter().filter(|i| i.opcode == "copy");
            if loop_comps.contains(comp.as_str()) {
                n += copies.count();
                continue;
            }
            // Walk back from each while's operands through tuples and copies.
            let by_key: std::collections::HashMap<&str, &Instr> = instrs.iter().map(|i| (i.key.as_str(), i)).collect();
            let mut state: HashSet<&str> = HashSet::new();
            let mut todo: Vec<&str> =
                instrs.iter().filter(|i| i.opcode == "while").flat_map(|i| i.operands.iter().map(String::as_str)).collect();
            while let Some(k) = todo.pop() {
                let Some(i) = by_key.get(k) else { continue };
                if (i.opcode == "tuple" || i.opcode == "copy") && state.insert(k) {
                    todo.extend(i.operands.iter().map(String::as_str));
                }
            }
            n += copies.filter(|i| state.contains(i.key.as_str())).count();
        }
        n
    }
}

/// The instruction's name without `%` (`%copy.3 = ...` -> `copy.3`).
fn instruction_name(line: &str) -> Option<&str> {
    let line = line.strip_prefix("ROOT ").unwrap_or(line);
    Some(line.split_once(" = ")?.0.trim_start_matches('%'))
}

/// The `%name` operands inside the opcode's parentheses.
fn operand_names(line: &str, opcode: &str) -> Vec<String> {
    let Some(at) = line.find(&format!(" {opcode}(")) else { return Vec::new() };
    let rest = &line[at + opcode.len() + 2..];
    let mut depth = 1usize;
    let mut end = rest.len();
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth == 0 {
                    end = i;
                    break;
                }
            }
            _ => {}
        }
    }
    rest[..end]
        .split(|c: char| c == ',' || c.is_whitespace())
        // `/*index=5*/%copy.40`: the operand follows the comment; names may lack the `%`.
        .map(|t| t.rsplit("*/").next().unwrap_or(t).trim_start_matches('%').trim_end_matches(')'))
        .filter(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)))
        .map(str::to_string)
        .collect()
}

/// The computations an instruction line calls: `condition=`, `body=`, `calls=`, `to_apply=`,
/// `true_computation=`, `false_computation=`, `branch_computations={%a, %b}`.
fn loop_calls(line: &str) -> Vec<String> {
    let name_at = |rest: &str| {
        let rest = rest.trim_start().trim_start_matches('%');
        rest[..rest.find(|c: char| c == ',' || c == '}' || c.is_whitespace()).unwrap_or(rest.len())].to_string()
    };
    let mut out: Vec<String> = [", condition=", ", body=", ", calls=", ", to_apply=", ", true_computation=", ", false_computation="]
        .iter()
        .filter_map(|k| line.find(k).map(|at| name_at(&line[at + k.len()..])))
        .collect();
    if let Some(at) = line.find(", branch_computations={") {
        let rest = &line[at + ", branch_computations={".len()..];
        out.extend(rest[..rest.find('}').unwrap_or(rest.len())].split(',').map(name_at));
    }
    out
}

/// The opcode of one instruction line, or `None` when the line is not an instruction.
fn instruction_opcode(line: &str) -> Option<&str> {
    let line = line.strip_prefix("ROOT ").unwrap_or(line);
    let (name, rest) = line.split_once(" = ")?;
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim_start();
    // Skip the shape: a tuple `( ... )` (possibly nested, with `/*index=5*/` comments) or a
    // single token like `f32[64,64]{1,0}`.
    let after_shape = if rest.starts_with('(') {
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in rest.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        &rest[end?..]
    } else {
        let end = rest.find(' ')?;
        &rest[end..]
    };
    let after_shape = after_shape.trim_start();
    let paren = after_shape.find('(')?;
    let op = &after_shape[..paren];
    let valid = !op.is_empty() && op.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    valid.then_some(op)
}

/// Why an embedded HLO proto could not be read.
#[derive(Debug, thiserror::Error)]
#[error("corrupt HloProto: {0}")]
pub struct HloProtoError(&'static str);

/// Counts the opcodes of a serialized `xla.HloProto`: hlo_module(1) -> computations(3) ->
/// instructions(2) -> opcode(2). Only those fields are decoded; the rest is skipped.
///
/// For the loop-copy classification it also reads HloComputationProto.id (5) and, per
/// instruction, id (35), operand_ids (36) and called_computation_ids (38) (field numbers of
/// xla/service/hlo.proto), and custom_call_target (28) for what a custom call is.
pub fn hlo_stats_from_proto(bytes: &[u8]) -> Result<HloStats, HloProtoError> {
    let mut stats = HloStats::default();
    let mut graph = Graph::default();
    for module in fields(bytes, 1) {
        for comp in fields(module?, 3) {
            let comp = comp?;
            stats.computations += 1;
            let comp_id = ints(comp, 5)?.first().copied().unwrap_or(0);
            let mut instrs = Vec::new();
            for instr in fields(comp, 2) {
                let instr = instr?;
                for opcode in fields(instr, 2) {
                    let op = std::str::from_utf8(opcode?).map_err(|_| HloProtoError("opcode is not UTF-8"))?;
                    stats.add(op);
                    if op == "custom-call" {
                        // HloInstructionProto.custom_call_target = 28 (xla/service/hlo.proto).
                        for t in fields(instr, 28) {
                            let t = std::str::from_utf8(t?).map_err(|_| HloProtoError("custom call target is not UTF-8"))?;
                            *stats.custom_call_targets.entry(t.to_string()).or_default() += 1;
                        }
                    }
                    let id = ints(instr, 35)?.first().copied().unwrap_or(0);
                    let calls = ints(instr, 38)?.iter().map(u64::to_string).collect();
                    instrs.push(Instr {
                        key: id.to_string(),
                        opcode: op.to_string(),
                        operands: ints(instr, 36)?.iter().map(u64::to_string).collect(),
                        calls,
                    });
                }
            }
            graph.computations.push((comp_id.to_string(), instrs));
        }
    }
    stats.loop_copies = graph.loop_copies();
    Ok(stats)
}

/// Every integer of `field` in a message body: plain varints and packed runs both.
fn ints(body: &[u8], field: u32) -> Result<Vec<u64>, HloProtoError> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let (key, n) = decode_varint(rest).ok_or(HloProtoError("bad varint"))?;
        rest = &rest[n..];
        let wire = WireType::of_key(key).ok_or(HloProtoError("bad wire type"))?;
        let this = key >> 3 == u64::from(field);
        match wire {
            WireType::Varint => {
                let (v, n) = decode_varint(rest).ok_or(HloProtoError("bad varint"))?;
                rest = &rest[n..];
                if this {
                    out.push(v);
                }
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let len = if wire == WireType::SixtyFourBit { 8 } else { 4 };
                rest = rest.get(len..).ok_or(HloProtoError("length past the end"))?;
            }
            WireType::LengthDelimited => {
                let (len, n) = decode_varint(rest).ok_or(HloProtoError("bad varint"))?;
                rest = &rest[n..];
                if len > rest.len() as u64 {
                    return Err(HloProtoError("length past the end"));
                }
                let (mut packed, tail) = rest.split_at(len as usize);
                rest = tail;
                while this && !packed.is_empty() {
                    let (v, n) = decode_varint(packed).ok_or(HloProtoError("bad packed varint"))?;
                    out.push(v);
                    packed = &packed[n..];
                }
            }
            _ => return Err(HloProtoError("unexpected group")),
        }
    }
    Ok(out)
}

/// Iterates the length-delimited occurrences of `field` in a message body, skipping others.
fn fields(body: &[u8], field: u32) -> impl Iterator<Item = Result<&[u8], HloProtoError>> {
    let mut rest = body;
    let mut failed = false;
    std::iter::from_fn(move || {
        while !failed && !rest.is_empty() {
            let step = (|| {
                let mut varint = || {
                    let (v, n) = decode_varint(rest).ok_or(HloProtoError("bad varint"))?;
                    rest = &rest[n..];
                    Ok::<u64, HloProtoError>(v)
                };
                let key = varint()?;
                let wire = WireType::of_key(key).ok_or(HloProtoError("bad wire type"))?;
                let len = match wire {
                    WireType::Varint => {
                        varint()?;
                        return Ok(None);
                    }
                    WireType::SixtyFourBit => 8,
                    WireType::ThirtyTwoBit => 4,
                    WireType::LengthDelimited => varint()?,
                    _ => return Err(HloProtoError("unexpected group")),
                };
                if len > rest.len() as u64 {
                    return Err(HloProtoError("length past the end"));
                }
                let (head, tail) = rest.split_at(len as usize);
                rest = tail;
                let wanted = wire == WireType::LengthDelimited && key >> 3 == u64::from(field);
                Ok(wanted.then_some(head))
            })();
            match step {
                Ok(Some(head)) => return Some(Ok(head)),
                Ok(None) => {}
                Err(e) => {
                    failed = true;
                    return Some(Err(e));
                }
            }
        }
        None
    })
}

/// The tables newer XLA dumps put after the module header: source locations, not program.
const SOURCE_TABLES: [&str; 4] = ["FileNames", "FunctionNames", "FileLocations", "StackFrames"];

/// HLO text without what cannot change the compiled program: every `metadata={...}`
/// attribute (op names, source files and lines, stack frame ids) and the source tables
/// (`FileNames`, `FunctionNames`, `FileLocations`, `StackFrames`). Two dumps of one program
/// differ in these alone when one was compiled with a cold compilation cache and the other
/// with a warm one, so a no-op check compares these texts, not the raw bytes.
pub fn hlo_without_metadata(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_table = false;
    for line in text.lines() {
        let t = line.trim();
        if SOURCE_TABLES.contains(&t) {
            in_table = true;
            continue;
        }
        if in_table {
            // A table row starts with its id; a blank line or anything else ends the table.
            if t.split_whitespace().next().is_some_and(|w| w.parse::<u64>().is_ok()) {
                continue;
            }
            in_table = false;
        }
        out.push_str(&strip_metadata(line));
        out.push('\n');
    }
    out
}

/// `line` without its `metadata={...}` attributes (and the `, ` before each); braces inside
/// quoted strings do not count.
fn strip_metadata(line: &str) -> std::borrow::Cow<'_, str> {
    const KEY: &str = "metadata={";
    if !line.contains(KEY) {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find(KEY) {
        // Only a whole attribute name (`metadata=`, not `xla_metadata=`).
        let whole = at == 0 || !rest.as_bytes()[at - 1].is_ascii_alphanumeric() && rest.as_bytes()[at - 1] != b'_';
        if !whole {
            out.push_str(&rest[..at + KEY.len()]);
            rest = &rest[at + KEY.len()..];
            continue;
        }
        let head = &rest[..at];
        out.push_str(head.strip_suffix(", ").unwrap_or(head));
        let body = &rest[at + KEY.len()..];
        let (mut depth, mut quoted, mut escaped, mut end) = (1usize, false, false, body.len());
        for (i, c) in body.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '{' if !quoted => depth += 1,
                '}' if !quoted => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &body[end..];
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn hlo_modulo_metadata_ignores_source_tables_and_metadata_only() {
        let warm =
            "HloModule jit_f, is_scheduled=true\n\nFileNames\n1 \"/a/x.py\"\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=1}\n\n\
            ENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
            ROOT %e = f32[8]{0} exponential(f32[8]{0} %p), metadata={op_name=\"jit(f)/exp {x}\" stack_frame_id=1}\n}\n";
        let cold = "HloModule jit_f, is_scheduled=true\n\nFileNames\n1 \"/b/other.py\"\n2 \"/b/y.py\"\n\nFunctionNames\n1 \"g\"\n\n\
            ENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n  \
            ROOT %e = f32[8]{0} exponential(f32[8]{0} %p), metadata={op_name=\"jit(f)/exp\" source_file=\"/b/y.py\" source_line=3}\n}\n";
        assert_ne!(warm, cold);
        assert_eq!(hlo_without_metadata(warm), hlo_without_metadata(cold));
        assert!(hlo_without_metadata(warm).contains("ROOT %e = f32[8]{0} exponential(f32[8]{0} %p)\n"), "{}", hlo_without_metadata(warm));
        // A different op is a different program.
        let other = cold.replace("exponential", "tanh");
        assert_ne!(hlo_without_metadata(warm), hlo_without_metadata(&other));
        // An attribute that merely ends in `metadata=` stays.
        assert_eq!(strip_metadata("x, xla_metadata={a}"), "x, xla_metadata={a}");
    }

    use super::*;

    const SAMPLE: &str = r#"HloModule jit_f, entry_computation_layout={(f32[8]{0})->f32[8]{0}}

%fused_computation (param_0: f32[8]) -> f32[8] {
  %param_0 = f32[8]{0} parameter(0)
  ROOT %exp.1 = f32[8]{0} exponential(%param_0), metadata={op_name="copy(x)"}
}

%body (arg: (s32[], f32[8])) -> (s32[], f32[8]) {
  %arg = (s32[], f32[8]{0}) parameter(0)
  %gte = f32[8]{0} get-tuple-element(%arg), index=1
  %copy.3 = f32[8]{0} copy(%gte)
  ROOT %t = (s32[], /*index=1*/f32[8]{0}) tuple(%gte, %copy.3)
}

ENTRY %main.2 (x: f32[8]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %w = (s32[], f32[8]{0}) while(%x), condition=%c, body=%body
  %cc = f32[8]{0} custom-call(%x), custom_call_target="tpu_custom_call"
  ROOT %fusion = f32[8]{0} fusion(%cc), kind=kLoop, calls=%fused_computation
}
"#;

    #[test]
    fn counts_opcodes_not_substrings() {
        let s = hlo_stats_from_text(SAMPLE);
        assert_eq!(s.exponential, 1);
        // `copy(x)` inside metadata does not count; `%copy.3 = ... copy(` does.
        assert_eq!(s.copy, 1);
        assert_eq!(s.while_, 1);
        assert_eq!(s.custom_call, 1);
        assert_eq!(s.fusion, 1);
        assert_eq!(s.computations, 3);
        assert_eq!(s.total_instructions, 10);
        assert_eq!(s.opcodes["parameter"], 3);
        // The copy is in the while body: loop state, not a defensive copy.
        assert_eq!(s.loop_copies, 1);
        assert!(s.copy_warning().is_none());
    }

    // The copy warning fires only for copies that are not a loop's state.
    const COPIES: &str = r#"HloModule m

%body (a: (s32[], f32[8])) -> (s32[], f32[8]) {
  %a = (s32[], f32[8]{0}) parameter(0)
  ROOT %r = (s32[], f32[8]{0}) copy(%a)
}

%cond (a: (s32[], f32[8])) -> pred[] {
  %a = (s32[], f32[8]{0}) parameter(0)
  ROOT %p = pred[] constant(true)
}

ENTRY %main (x: f32[8], i: s32[]) -> f32[8] {
  %x = f32[8]{0} parameter(0)
  %i = s32[] parameter(1)
  %c0 = s32[] copy(%i)
  %c1 = s32[] copy(%c0)
  %cx = f32[8]{0} copy(%x)
  %t = (s32[], f32[8]{0}) tuple(%c1, %cx)
  %w = (s32[], f32[8]{0}) while(%t), condition=%cond, body=%body
  %g = f32[8]{0} get-tuple-element(%w), index=1
  %defensive = f32[8]{0} copy(%g)
  ROOT %out = f32[8]{0} add(%defensive, %x)
}
"#;

    #[test]
    fn loop_state_copies_are_told_from_other_copies() {
        let s = hlo_stats_from_text(COPIES);
        assert_eq!(s.copy, 5);
        // body copy + c0 -> c1 -> tuple, cx -> tuple: 4 loop copies; %defensive is not.
        assert_eq!(s.loop_copies, 4);
        assert_eq!(s.suspect_copies(), 1);
        let w = s.copy_warning().unwrap();
        assert!(w.starts_with("1 copy op(s) in the HLO (besides 4 while-loop state copies)"), "{w}");
    }

    #[test]
    fn bare_names_of_a_lowered_module_are_read() {
        let t = "HloModule jit_f\n\nbody.1 {\n  a.1 = (s32[]) parameter(0)\n  ROOT c.1 = (s32[]) copy(a.1)\n}\n\n\
                 ENTRY main.2 {\n  x.1 = s32[] parameter(0)\n  t.1 = (s32[]) tuple(x.1)\n  \
                 w.1 = (s32[]) while(t.1), condition=cond.1, body=body.1\n  \
                 ROOT cc = s32[] custom-call(x.1), custom_call_target=\"tpu_custom_call\"\n}\n";
        let s = hlo_stats_from_text(t);
        assert_eq!((s.computations, s.total_instructions, s.custom_call, s.copy, s.loop_copies), (2, 6, 1, 1, 1));
    }

    #[test]
    fn no_copy_no_warning() {
        let s = hlo_stats_from_text("ENTRY %m (x: f32[]) -> f32[] {\n  ROOT %x = f32[] parameter(0)\n}\n");
        assert_eq!(s.total_instructions, 1);
        assert!(s.copy_warning().is_none());
    }

    #[test]
    fn proto_path_is_decoded_and_corruption_reported() {
        use crate::trace::xplane::tests::W;
        let mut instr = W::default();
        instr.bytes(1, b"dot.1").bytes(2, b"dot").varint(3, 5);
        let mut instr2 = W::default();
        instr2.bytes(2, b"copy");
        let mut comp = W::default();
        comp.bytes(1, b"main").msg(2, &instr).msg(2, &instr2);
        let mut module = W::default();
        module.bytes(1, b"jit_f").msg(3, &comp);
        let mut proto = W::default();
        proto.msg(1, &module);
        let s = hlo_stats_from_proto(&proto.0).unwrap();
        assert_eq!((s.dot, s.copy, s.total_instructions, s.computations), (1, 1, 2, 1));
        let cut = &proto.0[..proto.0.len() - 3];
        assert!(hlo_stats_from_proto(cut).is_err());
    }
}
