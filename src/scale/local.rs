//! The local engine: N device slots on this host, each a `ratchet worker` process in its own
//! process group with the environment that binds its device (`[devices]`), optionally pinned to
//! CPUs, and a reused work directory (its checkouts) under the state dir.

use super::engine::{Engine, JobHandle, JobState, TrialSpec};
use super::trial::{self, WorkerPid};
use super::worker::{SLOT_VAR, WORK_DIR_VAR};
use crate::config::{self, DevicesConfig};
use crate::error::{Error, Result, WithPath};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The first TPU slot's port when `[devices] base_port` is not given (libtpu's usual 8476).
pub const TPU_BASE_PORT: u16 = 8476;

/// One device slot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Slot {
    /// How messages name it (`CUDA_VISIBLE_DEVICES=3`, `slot 2`).
    pub label: String,
    pub env: Vec<(String, String)>,
    pub cpus: Vec<usize>,
}

/// The environment binding device `i` of `kind` (one process per device).
///
/// TPU: one chip per process, as pytorch/xla's `configure_tpu_topology` sets it for several
/// processes on one host (github.com/pytorch/xla pull 3628, test/pjrt/common.py, and issue 7714):
/// `TPU_VISIBLE_CHIPS` (older runtimes: `TPU_VISIBLE_DEVICES`), `TPU_CHIPS_PER_PROCESS_BOUNDS` and
/// `TPU_PROCESS_BOUNDS` of 1,1,1, and a port of its own in `TPU_PROCESS_PORT` and
/// `TPU_PROCESS_ADDRESSES`, so the processes' runtimes do not collide.
pub fn device_env(kind: &str, i: usize, base_port: u16) -> Vec<(String, String)> {
    let s = i.to_string();
    let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
    match kind {
        "cuda" => vec![kv("CUDA_VISIBLE_DEVICES", &s)],
        "rocm" => vec![kv("HIP_VISIBLE_DEVICES", &s), kv("ROCR_VISIBLE_DEVICES", &s)],
        "tpu" => {
            let port = (base_port as usize + i).to_string();
            vec![
                kv("TPU_VISIBLE_CHIPS", &s),
                kv("TPU_VISIBLE_DEVICES", &s),
                kv("TPU_CHIPS_PER_PROCESS_BOUNDS", "1,1,1"),
                kv("TPU_PROCESS_BOUNDS", "1,1,1"),
                kv("TPU_PROCESS_PORT", &port),
                kv("TPU_PROCESS_ADDRESSES", &format!("localhost:{port}")),
            ]
        }
        _ => vec![],
    }
}

/// The slots: `[devices]`'s, or `jobs` plain ones. `--jobs` with `[devices]` uses the first N
/// slots (more than it has is an error).
pub fn slots(devices: Option<&DevicesConfig>, jobs: Option<usize>) -> Result<Vec<Slot>> {
    if jobs == Some(0) {
        return Err(Error::usage("--jobs 0: give at least 1 slot"));
    }
    let all: Vec<Slot> = match devices {
        None => {
            let n = jobs.unwrap_or(1);
            if n > config::MAX_SLOTS {
                return Err(Error::usage(format!("--jobs {n}: at most {} slots", config::MAX_SLOTS)));
            }
            (0..n).map(|i| Slot { label: format!("slot {i}"), ..Default::default() }).collect()
        }
        Some(d) if d.slot.is_empty() => {
            let kind = d.kind.as_deref().unwrap_or("cpu");
            (0..d.count.unwrap_or(1))
                .map(|i| {
                    let env = device_env(kind, i, d.base_port.unwrap_or(TPU_BASE_PORT));
                    let cpus = d.cpus_per_slot.map(|k| (i * k..(i + 1) * k).collect()).unwrap_or_default();
                    let label = env.first().map(|(k, v)| format!("{k}={v}")).unwrap_or_else(|| format!("slot {i}"));
                    Slot { label, env, cpus }
                })
                .collect()
        }
        Some(d) => d
            .slot
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let env: Vec<(String, String)> = s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                let label = env.first().map(|(k, v)| format!("{k}={v}")).unwrap_or_else(|| format!("slot {i}"));
                let cpus = s.cpus.as_deref().map(config::parse_cpus).transpose().map_err(Error::config)?.unwrap_or_default();
                Ok(Slot { label, env, cpus })
            })
            .collect::<Result<_>>()?,
    };
    match jobs {
        Some(n) if devices.is_some() && n > all.len() => Err(Error::usage(format!(
            "--jobs {n}, but [devices] in ratchet.toml has {} slot{}",
            all.len(),
            if all.len() == 1 { "" } else { "s" }
        ))
        .hint("give --jobs at most that, or add slots to [devices]")),
        Some(n) if devices.is_some() => Ok(all.into_iter().take(n).collect()),
        _ => Ok(all),
    }
}

/// The CPUs this process may run on (its affinity mask): pinning a worker to any other fails
/// with EINVAL at spawn.
fn usable_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect();
        }
        (0..libc::CPU_SETSIZE as usize).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// Every slot's pinned CPUs must be ones this host lets ratchet use (checked before the sweep
/// starts): said with the fix, not as a raw EINVAL when the first worker starts.
pub fn check_host_cpus(slots: &[Slot]) -> Result<()> {
    check_cpus(slots, &usable_cpus())
}

fn check_cpus(slots: &[Slot], usable: &[usize]) -> Result<()> {
    for (i, s) in slots.iter().enumerate() {
        let missing: Vec<String> = s.cpus.iter().filter(|c| !usable.contains(c)).map(|c| c.to_string()).collect();
        if missing.is_empty() {
            continue;
        }
        let have = match (usable.first(), usable.last()) {
            (Some(a), Some(b)) => format!("{} CPUs ({a}-{b})", usable.len()),
            _ => "no CPUs".into(),
        };
        let need = s.cpus.iter().max().map_or(0, |m| m + 1);
        return Err(Error::config(format!(
            "[devices]: slot {i} ({}) is pinned to CPU {} that this host does not have for ratchet: it has {have}, and {} slots need {need}",
            s.label,
            missing.join(", "),
            slots.len()
        ))
        .hint(match usable.len() / slots.len().max(1) {
            0 => format!("use at most {} slots (--jobs), or give each [[devices.slot]] its own `cpus`", usable.len()),
            per => format!("lower cpus_per_slot to {per} or less, use fewer slots (--jobs), or give each [[devices.slot]] its own `cpus`"),
        }));
    }
    Ok(())
}

struct Running {
    trial: String,
    child: Option<Child>,
    pid: i32,
    start: u64,
}

/// Workers as child processes, one per slot.
pub struct LocalEngine {
    slots: Vec<Slot>,
    /// `<state>/slots`: slot i works in `<root>/<i>` (its checkouts and worker state).
    root: PathBuf,
    busy: Vec<Option<Running>>,
    /// How long a cancelled worker gets to stop its benchmark before its group is killed.
    pub grace: Duration,
}

impl LocalEngine {
    pub fn new(slots: Vec<Slot>, state_dir: &Path) -> LocalEngine {
        let n = slots.len();
        LocalEngine { slots, root: state_dir.join("slots"), busy: (0..n).map(|_| None).collect(), grace: Duration::from_secs(3) }
    }

    pub fn slot(&self, i: usize) -> Option<&Slot> {
        self.slots.get(i)
    }

    /// After slot `i`'s worker exited: kill the benchmark run it left behind, as its state
    /// directory's `run.pgid` records it (a worker removes the record after each run, so only a
    /// killed one leaves it). The slot is free only once that run is gone: a trial started
    /// there must not measure beside it on the same device, nor have its checkouts replaced
    /// under it.
    fn clear_slot(&self, i: usize) {
        crate::bench::executor::kill_recorded_run(&crate::layout::pgid_path(&self.root.join(i.to_string()).join("state")));
    }

    fn slot_of(&self, job: &JobHandle) -> Option<usize> {
        self.busy.iter().position(|b| b.as_ref().is_some_and(|r| r.trial == job.trial))
    }
}

/// `pid:start` as a handle's engine id.
fn parse_id(id: &str) -> Option<(i32, u64)> {
    let (p, s) = id.split_once(':')?;
    Some((p.parse().ok()?, s.parse().ok()?))
}

/// The process `pid` still runs and is the one that started at `start` (not a reused pid).
fn alive(pid: i32, start: u64) -> bool {
    crate::bench::executor::proc_stat(pid).is_some_and(|s| s.start == start && s.state != 'Z')
}

/// Stop a worker: SIGTERM to its group (it stops its benchmark and writes an interrupted result),
/// then after `grace` SIGKILL to the group and the benchmark group its state dir records.
fn stop(pid: i32, start: u64, mut child: Option<Child>, grace: Duration, worker_state: Option<&Path>) {
    if alive(pid, start) {
        crate::process::signal_group(pid, libc::SIGTERM);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            let exited = match child.as_mut() {
                Some(c) => c.try_wait().ok().flatten().is_some(),
                None => !alive(pid, start),
            };
            if exited {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::process::signal_group(pid, libc::SIGKILL);
    }
    if let Some(state) = worker_state {
        crate::bench::executor::kill_recorded_run(&crate::layout::pgid_path(state));
    }
    if let Some(mut c) = child {
        let _ = c.wait();
    }
}

impl Engine for LocalEngine {
    fn name(&self) -> &str {
        "local"
    }

    fn capacity(&self) -> usize {
        self.slots.len()
    }

    fn next_device(&self) -> Option<String> {
        let i = self.busy.iter().position(Option::is_none)?;
        Some(super::engine::slot_device(&crate::stats::history::host(), i, !self.slots[i].env.is_empty()))
    }

    fn submit(&mut self, trials: &[TrialSpec], worker: &[Vec<String>]) -> Result<Vec<JobHandle>> {
        let mut handles = vec![];
        for (t, argv) in trials.iter().zip(worker) {
            let Some(i) = self.busy.iter().position(Option::is_none) else {
                return Err(Error::failure(format!("no free local slot for trial {}: all {} are busy", t.id, self.slots.len())));
            };
            let (program, args) = argv.split_first().ok_or_else(|| Error::failure("empty worker command"))?;
            std::fs::create_dir_all(&t.out_dir).with_path(&t.out_dir)?;
            let log_path = t.out_dir.join("worker.log");
            let log = std::fs::File::create(&log_path).with_path(&log_path)?;
            let work = self.root.join(i.to_string());
            std::fs::create_dir_all(&work).with_path(&work)?;
            let slot = &self.slots[i];
            let mut cmd = Command::new(program);
            cmd.args(args)
                .envs(slot.env.iter().map(|(k, v)| (k, v)))
                .env(WORK_DIR_VAR, &work)
                .env(SLOT_VAR, i.to_string())
                .stdin(Stdio::null())
                .stdout(log.try_clone().with_path(&log_path)?)
                .stderr(log);
            // Its own group: Ctrl-C at the terminal reaches the controller only, which stops the
            // workers itself; cancel kills the whole group.
            crate::process::own_group(&mut cmd);
            if !slot.cpus.is_empty() {
                let cpus = slot.cpus.clone();
                // SAFETY: between fork and exec only async-signal-safe calls (CPU_SET, sched_setaffinity).
                unsafe {
                    cmd.pre_exec(move || {
                        let mut set: libc::cpu_set_t = std::mem::zeroed();
                        for &c in &cpus {
                            libc::CPU_SET(c, &mut set);
                        }
                        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                            return Err(std::io::Error::last_os_error());
                        }
                        Ok(())
                    });
                }
            }
            let child = cmd.spawn().map_err(|e| Error::failure(format!("cannot start the worker {program} on {}: {e}", slot.label)))?;
            let pid = child.id() as i32;
            let start = crate::bench::executor::proc_stat(pid).map(|s| s.start).unwrap_or(0);
            self.busy[i] = Some(Running { trial: t.id.clone(), child: Some(child), pid, start });
            handles.push(JobHandle { trial: t.id.clone(), engine_id: format!("{pid}:{start}"), slot: Some(i) });
        }
        Ok(handles)
    }

    fn poll(&mut self, job: &JobHandle) -> Result<JobState> {
        if let Some(i) = self.slot_of(job) {
            let r = self.busy[i].as_mut().expect("found");
            let status = match r.child.as_mut() {
                Some(c) => match c.try_wait()? {
                    Some(status) => Some(status),
                    None => return Ok(JobState::Running),
                },
                None if alive(r.pid, r.start) => return Ok(JobState::Running),
                None => None,
            };
            self.busy[i] = None;
            self.clear_slot(i);
            return Ok(match status.and_then(|s| s.signal()) {
                // Whatever it wrote is still read (a result written before the signal counts).
                Some(sig) => JobState::Failed(format!("its worker was killed by {}", crate::process::signal(sig))),
                None => JobState::Finished,
            });
        }
        // A job of an earlier controller (re-attached from the journal): watched by its pid.
        match parse_id(&job.engine_id) {
            Some((pid, start)) if alive(pid, start) => {
                if let Some(i) = job.slot.filter(|&i| i < self.busy.len() && self.busy[i].is_none()) {
                    self.busy[i] = Some(Running { trial: job.trial.clone(), child: None, pid, start });
                }
                Ok(JobState::Running)
            }
            _ => {
                // Only a slot no other trial took since: the record there would be its run's.
                if let Some(i) = job.slot.filter(|&i| i < self.busy.len() && self.busy[i].is_none()) {
                    self.clear_slot(i);
                }
                Ok(JobState::Finished)
            }
        }
    }

    /// A worker a dead controller started but never journaled the handle of: its run
    /// directory's `worker.pid`, while that process still runs; its slot is the work
    /// directory it records.
    fn find(&mut self, trial: &TrialSpec) -> Result<Option<JobHandle>> {
        let Ok(text) = std::fs::read_to_string(trial.out_dir.join(trial::PID_FILE)) else { return Ok(None) };
        let Ok(w) = serde_json::from_str::<WorkerPid>(&text) else { return Ok(None) };
        if !alive(w.pid, w.start) {
            return Ok(None);
        }
        let slot = w
            .state_dir
            .parent()
            .filter(|work| work.parent() == Some(self.root.as_path()))
            .and_then(|work| work.file_name()?.to_str()?.parse().ok());
        Ok(Some(JobHandle { trial: trial.id.clone(), engine_id: format!("{}:{}", w.pid, w.start), slot }))
    }

    fn cancel(&mut self, job: &JobHandle) -> Result<()> {
        let state = job.slot.map(|i| self.root.join(i.to_string()).join("state"));
        match self.slot_of(job) {
            Some(i) => {
                let r = self.busy[i].take().expect("found");
                stop(r.pid, r.start, r.child, self.grace, state.as_deref());
            }
            None => {
                if let Some((pid, start)) = parse_id(&job.engine_id) {
                    stop(pid, start, None, self.grace, state.as_deref());
                }
            }
        }
        Ok(())
    }
}

/// Kill every worker a dead controller left running under `trials_dir` (as each run
/// directory's `worker.pid` records it), with its benchmark, except those of the trials in
/// `spare` (re-attached jobs). Returns the trials stopped.
pub fn kill_orphans(trials_dir: &Path, spare: &[String]) -> Vec<String> {
    let mut stopped = vec![];
    let Ok(entries) = std::fs::read_dir(trials_dir) else { return stopped };
    for e in entries.flatten() {
        if spare.iter().any(|s| e.file_name() == s.as_str()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path().join(trial::PID_FILE)) else { continue };
        let Ok(w) = serde_json::from_str::<WorkerPid>(&text) else { continue };
        if alive(w.pid, w.start) {
            stop(w.pid, w.start, None, Duration::from_millis(500), Some(&w.state_dir));
            stopped.push(e.file_name().to_string_lossy().into_owned());
        } else {
            crate::bench::executor::kill_recorded_run(&crate::layout::pgid_path(&w.state_dir));
        }
    }
    stopped
}

#[cfg(test)]
mod tests {
    use super::*;

    fn devices(text: &str) -> Result<crate::config::Config> {
        crate::config::Config::parse(&format!("[benchmark]\ncommand = \"true\"\n[hardware]\npreset = \"cpu\"\n{text}"))
    }

    #[test]
    fn kinds_bind_one_device_per_slot() {
        let c = devices("[devices]\nkind = \"cuda\"\ncount = 8\ncpus_per_slot = 2\n").unwrap();
        let s = slots(c.devices.as_ref(), None).unwrap();
        assert_eq!(s.len(), 8);
        assert_eq!(s[3].env, vec![("CUDA_VISIBLE_DEVICES".to_string(), "3".to_string())]);
        assert_eq!(s[3].cpus, vec![6, 7]);
        let c = devices("[devices]\nkind = \"tpu\"\ncount = 4\nbase_port = 9000\n").unwrap();
        let s = slots(c.devices.as_ref(), Some(2)).unwrap();
        assert_eq!(s.len(), 2);
        let env: std::collections::HashMap<_, _> = s[1].env.iter().cloned().collect();
        assert_eq!(env["TPU_VISIBLE_CHIPS"], "1");
        assert_eq!(env["TPU_CHIPS_PER_PROCESS_BOUNDS"], "1,1,1");
        assert_eq!(env["TPU_PROCESS_BOUNDS"], "1,1,1");
        assert_eq!(env["TPU_PROCESS_PORT"], "9001");
        let e = slots(c.devices.as_ref(), Some(5)).unwrap_err();
        assert!(e.message.contains("--jobs 5, but [devices] in ratchet.toml has 4 slots"), "{}", e.message);
        assert_eq!(slots(None, Some(3)).unwrap().len(), 3);
    }

    #[test]
    fn explicit_slots_and_their_pinning() {
        let c = devices(
            "[devices]\n[[devices.slot]]\nenv = { CUDA_VISIBLE_DEVICES = \"0,1\" }\ncpus = \"0-1,4\"\n[[devices.slot]]\nenv = { CUDA_VISIBLE_DEVICES = \"2,3\" }\n",
        )
        .unwrap();
        let s = slots(c.devices.as_ref(), None).unwrap();
        assert_eq!(s[0].cpus, vec![0, 1, 4]);
        assert_eq!(s[1].label, "CUDA_VISIBLE_DEVICES=2,3");
    }

    #[test]
    fn bad_devices_tables_name_the_key_and_the_fix() {
        for (text, says) in [
            ("[devices]\nkind = \"gpu\"\ncount = 2\n", "[devices] kind: unknown kind \"gpu\"; known: cuda, rocm, tpu, cpu"),
            ("[devices]\nkind = \"cuda\"\n", "[devices] count: is missing"),
            ("[devices]\ncount = 2\n", "[devices] count: needs `kind`"),
            ("[devices]\nkind = \"cuda\"\ncount = 0\n", "must be between 1 and 256, got 0"),
            ("[devices]\n", "[devices] is empty"),
            ("[devices]\nkind = \"cuda\"\ncount = 2\nbase_port = 9000\n", "base_port: is for kind = \"tpu\""),
            ("[devices]\nkind = \"cuda\"\ncount = 2\n[[devices.slot]]\ncpus = \"0\"\n", "both `kind` and [[devices.slot]]"),
            ("[devices]\n[[devices.slot]]\ncpus = \"3-1\"\n", "[[devices.slot]] #1 cpus: \"3-1\" is not a CPU list"),
            ("[devices]\n[[devices.slot]]\nenv = { RATCHET_OUT = \"x\" }\n", "is not a variable a slot may set"),
            ("[devices]\n[[devices.slot]]\n", "binds nothing"),
            ("[devices]\nkind = \"cuda\"\ncount = 2\ncolour = 1\n", "unknown field `colour`"),
        ] {
            let e = devices(text).unwrap_err();
            assert!(e.to_string().contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn cpus_beyond_the_host_are_a_clear_error_before_any_worker_starts() {
        let s: Vec<Slot> = (0..4).map(|i| Slot { label: format!("slot {i}"), env: vec![], cpus: (4 * i..4 * i + 4).collect() }).collect();
        let e = check_cpus(&s, &[0, 1]).unwrap_err();
        assert!(e.message.contains("slot 0 (slot 0) is pinned to CPU 2, 3") && e.message.contains("it has 2 CPUs (0-1)"), "{}", e.message);
        assert!(e.hint.as_deref().unwrap_or("").contains("use at most 2 slots (--jobs)"), "{:?}", e.hint);
        let hint = check_cpus(&s, &(0..8).collect::<Vec<_>>()).unwrap_err().hint.unwrap_or_default();
        assert!(hint.contains("lower cpus_per_slot to 2 or less"), "{hint}");
        assert!(check_cpus(&s, &(0..16).collect::<Vec<_>>()).is_ok());
        // This host's own CPUs: 4096 per slot is beyond any test machine's.
        let c = devices("[devices]\nkind = \"cuda\"\ncount = 2\ncpus_per_slot = 4096\n").unwrap();
        let s = slots(c.devices.as_ref(), None).unwrap();
        assert!(check_host_cpus(&s).unwrap_err().message.contains("this host does not have"));
    }
}
