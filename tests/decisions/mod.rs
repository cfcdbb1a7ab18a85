//! The loop and its decisions: keep, revert, the noise history, looks, progress, sweeps.

mod looks;
mod loop_inprocess;
mod noise_history;
mod noise_jump;
mod on_the_binary;
mod progress;
mod replay;
mod sweep;
