//! ratchet's lab: the synthetic benchmarks and reference tests that chose the decision levels,
//! kept outside the product crate. Everything here drives `ratchet::stats::sequential` unchanged.
//!
//! - [`simulate`]: the noise models and the per-scenario tables of `ratchet-lab simulate`;
//! - [`floor`]: the reference tests (scale-free SPRT, whole-pair t-test) the procedure is measured
//!   against; [`mannwhitney`]: the fixed 10+10 baseline;
//! - [`parallel`] and [`chain_sim`]: the simulated parallel night on one serial trunk.

pub mod chain_sim;
pub mod floor;
pub mod mannwhitney;
pub mod parallel;
pub mod simulate;
