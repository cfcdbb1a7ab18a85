//! The one-node Slurm of scripts/slurm-localhost.sh, for the tests that drive it: whether it
//! answers, and turns on it (only one cluster test runs at a time).

use std::process::Command;

/// Whether a Slurm controller answers with a node that has GPUs; otherwise why not. Asked once
/// per test binary, and briefly: a controller that is down makes sinfo wait its MessageTimeout.
pub fn slurm_with_gpus() -> Result<(), String> {
    static ANSWER: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    ANSWER
        .get_or_init(|| {
            let out = Command::new("timeout")
                .args(["5", "sinfo", "-h", "-o", "%T %G"])
                .output()
                .map_err(|e| format!("cannot run timeout/sinfo: {e}"))?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() {
                let why = String::from_utf8_lossy(&out.stderr).trim().to_string();
                return Err(match out.status.code() {
                    Some(127) => "sinfo is not installed".to_string(),
                    Some(124) => "sinfo got no answer from slurmctld within 5 s".to_string(),
                    _ => format!("sinfo failed: {why}"),
                });
            }
            let ready = text.lines().any(|l| ["idle", "mixed", "allocated"].iter().any(|s| l.starts_with(s)) && l.contains("gpu:"));
            if ready {
                Ok(())
            } else {
                Err(format!("no idle node with gpu gres in sinfo: {:?}", text.trim()))
            }
        })
        .clone()
}

/// The tests that use the cluster take turns: an exclusive job and an array that must run all
/// at once cannot share one node.
pub static CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// This test's turn on the cluster, or `None` after a visible note where no Slurm answers.
pub fn cluster_turn() -> Option<std::sync::MutexGuard<'static, ()>> {
    if let Err(why) = slurm_with_gpus() {
        eprintln!("SKIPPED (no Slurm here: {why}); scripts/slurm-localhost.sh starts one as root");
        return None;
    }
    Some(CLUSTER.lock().unwrap_or_else(|e| e.into_inner()))
}
