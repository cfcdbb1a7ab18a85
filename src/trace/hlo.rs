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

    /// The article's defensive-copy diagnosis, when the module holds copies.
    pub fn copy_warning(&self) -> Option<String> {
        (self.copy > 0).then(|| {
            format!(
                "{} copy op(s) in the HLO: possibly defensive copies from aliasing \
                 (an output ref read before its final write, or an accumulator without a \
                 scratch buffer); each is a full read+write of its buffer",
                self.copy
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
    let mut in_body = false;
    for raw in text.lines() {
        let line = raw.trim();
        if !in_body {
            // A computation header: `%name (params) -> shape {` or `ENTRY %main (...) -> ... {`.
            if line.ends_with('{') && line.contains("->") && !line.starts_with("HloModule") {
                in_body = true;
                stats.computations += 1;
            }
            continue;
        }
        if line == "}" {
            in_body = false;
            continue;
        }
        if let Some(op) = instruction_opcode(line) {
            stats.add(op);
        }
    }
    stats
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
pub fn hlo_stats_from_proto(bytes: &[u8]) -> Result<HloStats, HloProtoError> {
    let mut stats = HloStats::default();
    for module in fields(bytes, 1) {
        for comp in fields(module?, 3) {
            stats.computations += 1;
            for instr in fields(comp?, 2) {
                for opcode in fields(instr?, 2) {
                    let op = std::str::from_utf8(opcode?).map_err(|_| HloProtoError("opcode is not UTF-8"))?;
                    stats.add(op);
                }
            }
        }
    }
    Ok(stats)
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

#[cfg(test)]
mod tests {
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
        assert!(s.copy_warning().unwrap().contains("1 copy op"));
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
