//! Parallel trials: local slots, hooks, Slurm, the worker and the controller.

mod controller_inprocess;
mod hooks;
mod local_slots;
mod lost_trials;
mod ray;
mod reattach;
mod recheck;
mod slurm;
mod slurm_faults;
mod slurm_sweep;
mod worker;
