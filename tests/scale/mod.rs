//! Parallel trials: local slots, hooks, Slurm, the worker and the controller.

mod controller_inprocess;
mod hooks;
mod local_slots;
mod slurm;
mod slurm_sweep;
mod worker;
