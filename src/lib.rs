//! ratchet: a git-backed optimization ratchet for accelerator kernels. The modules follow the
//! loop: config -> vcs -> bench (the only place that spawns processes) -> trace -> metrics -> stats ->
//! store -> report, with `experiment` orchestrating one hypothesis end to end.
//!
//! # Driving it as a library
//! The command line ([`cli`]) is one face of this crate; a scheduler or an agent can drive the
//! same core without it:
//! - [`workspace::Workspace::discover`] finds the repository; [`workspace::Workspace::lock`]
//!   gives the [`workspace::Locked`] handle every operation that changes the branch takes.
//! - [`experiment::run`] measures and decides one hypothesis, [`sweep::run`] a queue of them,
//!   [`calibrate::run`] measures the noise; each returns data ([`outcome::Outcome`],
//!   [`outcome::SweepOutcome`]) and reports progress as [`events::Event`]s through
//!   [`events::Effects`] (a sink plus a cancellation token): nothing in the core prints.
//! - Benchmarks are spawned through [`bench::executor::Executor`]; [`bench::mock::MockExecutor`]
//!   replays scripted runs for exact in-process tests.
//! - [`scale`] runs trials on several devices, deciding them one at a time against one trunk.
//! - [`store`] reads the results table and the raw runs; [`trace`] parses XProf captures;
//!   [`stats`] holds the decision procedure (its simulation is the lab's, in `lab/`); [`diagnose`] interprets a run.
//!
//! Modules marked hidden in the docs are public only for the project's own tests, benches and lab.

// The public API.
pub mod bench;
pub mod calibrate;
pub mod cli;
pub mod config;
pub mod diagnose;
pub mod error;
pub mod events;
pub mod experiment;
pub mod gate;
pub mod outcome;
pub mod plot;
pub mod progress;
pub mod replay;
pub mod report;
pub mod scale;
pub mod signals;
pub mod stats;
pub mod store;
pub mod sweep;
pub mod trace;
pub mod vcs;
pub mod workspace;

// Public for the binary, the tests and the examples only.
#[doc(hidden)]
pub mod fault;
#[doc(hidden)]
pub mod fsutil;
#[doc(hidden)]
pub mod hardware;
#[doc(hidden)]
pub mod journal;
#[doc(hidden)]
pub mod pyhelper;

// Internal.
pub(crate) mod admit;
pub(crate) mod cleanup;
pub(crate) mod layout;
pub(crate) mod lock;
pub(crate) mod metrics;
pub(crate) mod printable;
pub(crate) mod process;
pub(crate) mod safe_read;
pub(crate) mod session;
pub(crate) mod units;
