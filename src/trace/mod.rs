//! Reading profiler captures (issue 4): the kernel's device time per execution, its op
//! breakdown and HLO statistics, from an `.xplane.pb` (or a `.trace.json.gz` as a fallback).

pub mod hlo;
pub mod xplane;
