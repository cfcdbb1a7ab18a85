//! One measuring step (`bench::measure`) on a scripted executor that writes what a benchmark
//! would: a result file, summary lines, hostile files beside them.

use ratchet::bench::executor::{Executor, Exit, RunOutput, RunSpec};
use ratchet::bench::{measure, RunContext, RunRecord, Side};
use ratchet::config::Config;

/// Plays a benchmark that exits 0 after writing `result` (and, for legacy runs, `stdout`).
pub struct Writes {
    pub result: Option<String>,
    pub summary: Vec<String>,
    pub fifo: bool,
}

impl Executor for Writes {
    fn run(&mut self, spec: &RunSpec) -> std::io::Result<RunOutput> {
        std::fs::create_dir_all(&spec.log_dir)?;
        let out = spec.env.iter().find(|(k, _)| k == "RATCHET_OUT").map(|(_, v)| std::path::PathBuf::from(v)).unwrap();
        if let Some(r) = &self.result {
            std::fs::write(out.join("ratchet-result.json"), r)?;
        }
        if self.fifo {
            let c = std::ffi::CString::new(out.join("pipe").as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid NUL-terminated path.
            unsafe {
                libc::mkfifo(c.as_ptr(), 0o600);
            }
        }
        let _ = std::os::unix::fs::symlink("/dev/zero", out.join("zero"));
        let (so, se) = (spec.log_dir.join("stdout.log"), spec.log_dir.join("stderr.log"));
        std::fs::write(&so, self.summary.join("\n"))?;
        std::fs::write(&se, "")?;
        Ok(RunOutput {
            exit: Exit::Code(0),
            wall_s: 0.1,
            stdout_path: so,
            stderr_path: se,
            summary_lines: self.summary.clone(),
            stdout_tail: String::new(),
            stderr_tail: String::new(),
            log_error: None,
            forked: false,
        })
    }
}

impl Writes {
    /// A benchmark that writes `result` as its result file and nothing else of note.
    pub fn result(result: &str) -> Writes {
        Writes { result: Some(result.to_string()), summary: vec![], fifo: false }
    }
}

/// One run of `exec` under `cfg` in a scratch directory.
pub fn measure_once(exec: &mut Writes, cfg: &Config) -> RunRecord {
    let d = tempfile::tempdir().unwrap();
    let state = d.path().join(".ratchet");
    std::fs::create_dir_all(&state).unwrap();
    let ctx = RunContext {
        experiment: "1",
        run: 0,
        side: Side::Candidate,
        commit: "abc",
        dir: d.path(),
        out_dir: d.path().join("out"),
        repo_root: d.path(),
        state_dir: &state,
        python_dir: d.path(),
        deep: false,
        pair: None,
    };
    measure(exec, cfg, &ctx).unwrap()
}
