//! Parallel trials on one serial trunk (issue 18; the design and its simulation are in
//! docs/scale-out.md and `stats::parallel`): engines that run trials on device slots, and the
//! controller that decides them one at a time against the trunk.

pub mod controller;
pub mod engine;
pub mod local;
pub mod trial;
pub mod worker;
