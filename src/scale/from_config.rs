//! The engine a repository's `[engine]` table asks for, built for the controller; `local` is
//! the controller's own slots and gives `None`.

use super::engine::Engine;
use super::hook::{HookEngine, HookOptions};
use super::ray::{RayEngine, RayOptions};
use super::slurm::{SlurmEngine, SlurmOptions};
use crate::config::{EngineConfig, EngineKind};
use crate::error::Result;
use std::path::Path;
use std::time::Duration;

/// Trials in flight when `[engine] capacity` is not set.
pub const DEFAULT_CAPACITY: usize = 4;
/// The limit of one engine command when none is set.
pub const DEFAULT_TIMEOUT_S: f64 = 60.0;

/// The external engine of `[engine]` (validated by `Config::parse`), or `None` for `local`.
/// `root` is the repository root (the hooks' working directory); `work_dir` holds the engine's
/// generated files (Slurm's batch scripts) and must be on the filesystem the cluster shares.
pub fn engine_from_config(cfg: &EngineConfig, root: &Path, work_dir: &Path) -> Result<Option<Box<dyn Engine>>> {
    let capacity = cfg.capacity.map(|c| c as usize).unwrap_or(DEFAULT_CAPACITY);
    Ok(match cfg.kind {
        EngineKind::Local => None,
        EngineKind::Slurm => {
            let mut o = SlurmOptions::new(work_dir);
            o.capacity = capacity;
            o.partition = cfg.partition.clone();
            o.exclusive = cfg.exclusive.unwrap_or(false);
            o.gres = match &cfg.gres {
                Some(g) if g.is_empty() => None,
                Some(g) => Some(g.clone()),
                None if o.exclusive => None,
                None => o.gres,
            };
            o.sbatch_args = cfg.sbatch_args.clone().unwrap_or_default();
            o.command_timeout = Duration::from_secs_f64(cfg.command_timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
            o.device_kind = cfg.device_kind.clone();
            Some(Box::new(SlurmEngine::new(o)))
        }
        EngineKind::Hook => Some(Box::new(HookEngine::new(HookOptions {
            capacity,
            submit: cfg.submit.clone().or_else(|| cfg.submit_batch.clone()).unwrap_or_default(),
            batch: cfg.submit_batch.is_some(),
            poll: cfg.poll.clone().unwrap_or_default(),
            cancel: cfg.cancel.clone().unwrap_or_default(),
            fetch: cfg.fetch.clone(),
            find: cfg.find.clone(),
            work_dir: work_dir.to_path_buf(),
            timeout: Duration::from_secs_f64(cfg.hook_timeout_s.unwrap_or(DEFAULT_TIMEOUT_S)),
            poll_interval: cfg.poll_interval_s.map(Duration::from_secs_f64).unwrap_or(super::hook::DEFAULT_POLL_INTERVAL),
            dir: root.to_path_buf(),
            device_kind: cfg.device_kind.clone(),
        }))),
        EngineKind::Ray => {
            let mut o = RayOptions::new(work_dir);
            o.capacity = capacity;
            if let Some(a) = &cfg.address {
                o.address = a.clone();
            }
            o.cpus = cfg.cpus.unwrap_or(o.cpus);
            o.gpus = cfg.gpus.unwrap_or(o.gpus);
            o.submit_args = cfg.submit_args.clone().unwrap_or_default();
            o.command_timeout = Duration::from_secs_f64(cfg.command_timeout_s.unwrap_or(DEFAULT_TIMEOUT_S));
            o.poll_interval = cfg.poll_interval_s.map(Duration::from_secs_f64).unwrap_or(super::ray::DEFAULT_POLL_INTERVAL);
            // A path is the repository's (absolute stays absolute); a bare name is looked up on PATH.
            if let Some(b) = &cfg.ray_bin {
                o.ray = if b.contains('/') { root.join(b) } else { b.into() };
            }
            o.device_kind = cfg.device_kind.clone();
            Some(Box::new(RayEngine::new(o)))
        }
    })
}
