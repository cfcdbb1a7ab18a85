//! What `ratchet init` finds on the machine and in the repo: the hardware preset (the accelerator
//! as the TPU runtime's environment or `nvidia-smi` names it, else the nominal `cpu` preset) and
//! the project's Python virtual environment.

use std::process::Command;
use std::time::Duration;

/// The preset for an accelerator name: a TPU accelerator type (`v5litepod-8`, `v6e-4`, `v5p-8`,
/// `tpu7x-...`) or a GPU's marketing name (`NVIDIA H100 80GB HBM3`).
pub fn preset_for(name: &str) -> Option<&'static str> {
    let n = name.to_ascii_lowercase();
    // Order matters: "v5litepod" before "v5p"/"v5", "h200" before "h100".
    let table: &[(&str, &str)] = &[
        ("v5litepod", "tpu-v5e"),
        ("v5e", "tpu-v5e"),
        ("v5p", "tpu-v5p"),
        ("v6e", "tpu-v6e"),
        ("tpu7x", "tpu-v7x"),
        ("v7x", "tpu-v7x"),
        ("h200", "h200"),
        ("h100", "h100"),
    ];
    table.iter().find(|(k, _)| n.contains(k)).map(|(_, p)| *p)
}

/// The detected preset and what it was detected from, or `None` with no known accelerator.
pub fn detect() -> Option<(&'static str, String)> {
    for var in ["TPU_ACCELERATOR_TYPE", "ACCELERATOR_TYPE"] {
        if let Ok(v) = std::env::var(var) {
            if let Some(p) = preset_for(&v) {
                return Some((p, format!("{var}={v}")));
            }
        }
    }
    let gpu = run_with_timeout("nvidia-smi", &["--query-gpu=name", "--format=csv,noheader"], Duration::from_secs(10))?;
    let first = gpu.lines().next()?.trim().to_string();
    preset_for(&first).map(|p| (p, format!("nvidia-smi: {first}")))
}

/// Directory names a project venv goes by, in the order they are looked for.
pub const VENV_DIRS: &[&str] = &[".venv", "venv", "env"];

/// The project venv's interpreter under `root`, relative to it (".venv/bin/python"): the first
/// of [`VENV_DIRS`] with an executable `bin/python` (or `bin/python3`).
pub fn venv_python(root: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let runs = |p: &std::path::Path| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    VENV_DIRS.iter().flat_map(|d| ["python", "python3"].map(|exe| format!("{d}/bin/{exe}"))).find(|rel| runs(&root.join(rel)))
}

/// stdout of `cmd args` when it exits 0 within `limit` (a hung driver must not hang `init`).
fn run_with_timeout(cmd: &str, args: &[&str], limit: Duration) -> Option<String> {
    let mut c = Command::new(cmd);
    c.args(args);
    let out = crate::process::output_within(c, limit).filter(|o| o.status.success())?;
    String::from_utf8(out.stdout).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_presets() {
        assert_eq!(preset_for("v5litepod-8"), Some("tpu-v5e"));
        assert_eq!(preset_for("v5p-16"), Some("tpu-v5p"));
        assert_eq!(preset_for("v6e-4"), Some("tpu-v6e"));
        assert_eq!(preset_for("NVIDIA H100 80GB HBM3"), Some("h100"));
        assert_eq!(preset_for("NVIDIA H200"), Some("h200"));
        assert_eq!(preset_for("NVIDIA A10G"), None);
        for p in ["tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu-v7x", "h100", "h200"] {
            assert!(crate::hardware::preset(p).is_some(), "{p} is a preset");
        }
    }
}
