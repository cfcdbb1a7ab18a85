//! Parallel trials on one serial trunk (the design and its simulation are in
//! docs/scale-out.md; the simulation is `chain_sim`): engines that run trials on device slots,
//! and the controller that decides them one at a time against the trunk.

mod assess;
pub mod command;
pub mod controller;
pub mod engine;
pub mod from_config;
pub mod hook;
mod journal;
pub mod lane;
pub mod local;
pub mod ray;
pub mod slurm;
pub mod trial;
pub mod worker;

pub use from_config::engine_from_config;
