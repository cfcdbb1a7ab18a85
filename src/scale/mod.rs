//! Parallel trials on one serial trunk (the design is docs/scale-out.md; its simulation is the
//! lab's, `lab/src/chain_sim.rs`): engines that run trials on device slots,
//! and the controller that decides them one at a time against the trunk.

mod assess;
pub mod command;
pub mod controller;
pub mod engine;
pub mod from_config;
pub mod hook;
pub mod inline;
mod journal;
pub mod lane;
pub mod local;
pub mod ray;
pub mod slurm;
pub mod trial;
pub mod worker;

pub use from_config::engine_from_config;
