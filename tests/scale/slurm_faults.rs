//! The Slurm engine under faults, with a stand-in for Slurm's commands on PATH (sbatch, squeue,
//! scontrol, scancel as shell scripts that run each array task on this host): a job preempted,
//! failed on its node, out of memory or past its time limit starts again and the sweep goes on;
//! a controller killed right after `sbatch` answered, before the job's id reached it, leaves a
//! job the next sweep finds by its name and re-attaches to, submitting nothing twice; a job Slurm will
//! not start (held, its node drained) is shown with Slurm's reason and, past the limit, lost.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use support::TestRepo;

const ENV: &str = "FAKE_LATENCY_MS=10\n#a\n#b\n";
const QUEUE: [&str; 2] = ["01-faster.toml", "02-slower.toml"];

/// sbatch: the Nth submission's fate is line N of $FAKE_SLURM/fates ("STATE SIGNAL": the task
/// is killed with SIGNAL 0.5 s after it starts and then reported as STATE; empty: it runs).
const SBATCH: &str = r#"#!/bin/sh
st="$FAKE_SLURM"
for a in "$@"; do case "$a" in --job-name=*) name="${a#--job-name=}";; --chdir=*) dir="${a#--chdir=}";; esac; script="$a"; done
n=$(cat "$st/next" 2>/dev/null || echo 1); echo $((n+1)) > "$st/next"
job=$((4700+n))
echo "$name" > "$st/$job.name"
fate=$(sed -n "${n}p" "$st/fates" 2>/dev/null)
# "PENDING REASON": Slurm keeps the job pending (held, its node drained) and starts nothing.
case "$fate" in PENDING*) echo "$fate" > "$st/$job.fate"; echo 0 > "$st/$job.pid"; echo "$job"; exit 0;; esac
cd "$dir"
SLURM_ARRAY_TASK_ID=0 SLURM_JOB_ID=$job setsid sh "$script" >"$dir/0/slurm.out" 2>"$dir/0/slurm.err" </dev/null &
pid=$!
echo $pid > "$st/$job.pid"
if [ -n "$fate" ]; then
  echo "$fate" > "$st/$job.fate"
  # In a session of its own: ratchet ends sbatch's process group when sbatch returns.
  setsid sh -c 'sleep 0.5; kill -"$0" "-$1"' "${fate#* }" "$pid" </dev/null >/dev/null 2>&1 &
fi
echo "$job"
"#;

/// The state of job $1's task 0, as `JOB_0|STATE|REASON`.
const STATE_OF: &str = r#"state_of() {
  job="$1"; pid=$(cat "$FAKE_SLURM/$job.pid" 2>/dev/null) || return 1
  r=None
  if [ -f "$FAKE_SLURM/$job.cancelled" ]; then s=CANCELLED
  elif grep -q '^PENDING' "$FAKE_SLURM/$job.fate" 2>/dev/null; then s=PENDING; r=$(cut -d' ' -f2 "$FAKE_SLURM/$job.fate")
  elif [ -r "/proc/$pid/stat" ] && ! grep -q ') Z' "/proc/$pid/stat"; then s=RUNNING
  elif [ -f "$FAKE_SLURM/$job.fate" ]; then s=$(cut -d' ' -f1 "$FAKE_SLURM/$job.fate")
  else s=COMPLETED; fi
  echo "${job}_0|$s|$r"
}
"#;

fn squeue() -> String {
    format!(
        "#!/bin/sh\n{STATE_OF}while [ $# -gt 0 ]; do case \"$1\" in -j) j=\"$2\"; shift;; -n) nm=\"$2\"; shift;; esac; shift; done\n\
         for x in $(echo \"$j\" | tr , ' '); do state_of \"$x\"; done\n\
         if [ -n \"$nm\" ]; then for f in \"$FAKE_SLURM\"/*.name; do [ -f \"$f\" ] && [ \"$(cat \"$f\")\" = \"$nm\" ] && state_of \"$(basename \"$f\" .name)\"; done; fi\n\
         exit 0\n"
    )
}

fn scontrol() -> String {
    format!("#!/bin/sh\n{STATE_OF}line=$(state_of \"${{3%_*}}\") || {{ echo 'Invalid job id specified' >&2; exit 1; }}\ns=$(echo \"$line\" | cut -d'|' -f2)\necho \"JobId=$3 JobState=$s Reason=None\"\n")
}

const SCANCEL: &str = "#!/bin/sh\njob=\"${1%_*}\"\ntouch \"$FAKE_SLURM/$job.cancelled\"\npid=$(cat \"$FAKE_SLURM/$job.pid\")\n[ \"$pid\" = 0 ] && exit 0\nkill -TERM \"-$pid\" 2>/dev/null; sleep 0.3; kill -KILL \"-$pid\" 2>/dev/null\nexit 0\n";

/// The stand-in's bin directory and state directory, with `fates` written.
fn fake_slurm(rig: &Path, fates: &[&str]) -> (PathBuf, PathBuf) {
    let bin = rig.join("bin");
    let st = rig.join("state");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(&st).unwrap();
    for (name, body) in [("sbatch", SBATCH.to_string()), ("squeue", squeue()), ("scontrol", scontrol()), ("scancel", SCANCEL.to_string())] {
        let p = bin.join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::write(st.join("fates"), fates.iter().map(|f| format!("{f}\n")).collect::<String>()).unwrap();
    (bin, st)
}

fn repo(extra: &str) -> TestRepo {
    let engine = format!("[engine]\nkind = \"slurm\"\ncapacity = 1\ngres = \"\"\ncommand_timeout_s = 10\n{extra}");
    let t = TestRepo::with_config(&format!("{}{engine}", support::DEFAULT_CONFIG));
    t.write("fake.env", ENV);
    for (name, msg, from, to) in
        [(QUEUE[0], "exp: 10 -> 5 ms", "#a\n", "FAKE_LATENCY_MS=5\n"), (QUEUE[1], "exp: -> 20 ms", "#b\n", "FAKE_LATENCY_MS=20\n")]
    {
        t.write(
            &format!("experiments/{name}"),
            &format!("message = {msg:?}\n[[edit]]\nfile = \"fake.env\"\nfind = {from:?}\nreplace = {to:?}\n"),
        );
    }
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "queue"]);
    t
}

fn sweep(t: &TestRepo, bin: &Path, st: &Path, fault: Option<&str>) -> std::process::Output {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let mut c = t.ratchet();
    c.arg("sweep").env("PATH", path).env("FAKE_SLURM", st).env("FAKE_SLEEP_S", "0.1");
    if let Some(f) = fault {
        c.env("RATCHET_FAULT", f);
    }
    c.output().unwrap()
}

fn text(out: &std::process::Output) -> String {
    crate::support::flat(&format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn submissions(st: &Path) -> usize {
    std::fs::read_to_string(st.join("next")).map(|s| s.trim().parse::<usize>().unwrap() - 1).unwrap_or(0)
}

#[test]
fn preempted_node_failed_out_of_memory_and_timed_out_jobs_start_again() {
    let rig = tempfile::tempdir().unwrap();
    // The first two jobs are preempted (SIGTERM: the worker writes `interrupted`) and lost with
    // their node (SIGKILL: no result at all); the default two retries run the gain a third time.
    let (bin, st) = fake_slurm(rig.path(), &["PREEMPTED TERM", "NODE_FAIL KILL"]);
    let t = repo("");
    let base = t.head();
    let out = sweep(&t, &bin, &st, None);
    assert!(out.status.success(), "{}", text(&out));
    // (A SIGTERM that lands before the worker handles signals leaves no result: the reason then
    // also names the job's log.)
    assert!(text(&out).contains("was lost (slurm: PREEMPTED") && text(&out).contains("was lost (slurm: NODE_FAIL"), "{}", text(&out));
    let rows = t.rows();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap()["status"], "keep", "{rows:?}");
    t.check_kept_chain(&base);
    assert_eq!(submissions(&st), 4);

    // Past the retries: out of memory, then the time limit, with one retry allowed.
    let rig = tempfile::tempdir().unwrap();
    let (bin, st) = fake_slurm(rig.path(), &["OUT_OF_MEMORY KILL", "TIMEOUT TERM"]);
    let t = repo("retries = 1\n");
    let out = sweep(&t, &bin, &st, None);
    assert!(out.status.success(), "{}", text(&out));
    let rows = t.rows();
    let lost = rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap();
    assert_eq!(lost["status"], "interrupted", "{lost:?}");
    assert!(lost["note"].contains("OUT_OF_MEMORY") && lost["note"].contains("TIMEOUT"), "{lost:?}");
    assert_ne!(rows.iter().find(|r| r["hypothesis"].starts_with("02")).unwrap()["status"], "interrupted", "{rows:?}");
}

#[test]
fn a_job_submitted_just_before_the_controller_died_is_found_by_name_and_reattached() {
    let rig = tempfile::tempdir().unwrap();
    let (bin, st) = fake_slurm(rig.path(), &[]);
    let t = repo("");
    let base = t.head();
    // Killed right after sbatch answered (on the engine's own thread), before its job id
    // reached the controller: the journal has at most the job's name.
    let out = sweep(&t, &bin, &st, Some("slurm-after-sbatch"));
    assert!(!out.status.success(), "the fault point was not reached: {}", text(&out));
    assert_eq!(submissions(&st), 1);
    let journal = std::fs::read_to_string(t.path().join(".ratchet/scale.json")).unwrap();
    assert!(!journal.contains("\"engine_id\": \"4701"), "{journal}");
    let out = sweep(&t, &bin, &st, None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("re-attached the jobs a stopped parallel sweep left"), "{}", text(&out));
    // The first job was found (by its name) and recorded; only the second hypothesis was submitted.
    assert_eq!(submissions(&st), 2, "{}", text(&out));
    assert!(!std::fs::read_dir(&st).unwrap().flatten().any(|e| e.file_name().to_string_lossy().ends_with(".cancelled")));
    assert_eq!(t.rows().len(), 2, "{:?}", t.rows());
    t.check_kept_chain(&base);
}

#[test]
fn a_held_job_and_one_on_a_drained_node_are_shown_and_then_lost() {
    // Held by its user, then pending on a drained node: each is named with Slurm's reason at its
    // first poll and, past the limit (0 s here: at once), cancelled and started again.
    let rig = tempfile::tempdir().unwrap();
    let (bin, st) = fake_slurm(rig.path(), &["PENDING JobHeldUser", "PENDING ReqNodeNotAvail,_UnavailableNodes:n1"]);
    let t = repo("stuck_limit_s = 0\n");
    let base = t.head();
    let out = sweep(&t, &bin, &st, None);
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    for reason in ["slurm: PENDING (JobHeldUser)", "slurm: PENDING (ReqNodeNotAvail,_UnavailableNodes:n1)"] {
        assert!(all.contains(&format!("job will not start by itself: {reason}")), "{reason}: {all}");
        assert!(all.contains(&format!("was lost ({reason}, for")), "{reason}: {all}");
    }
    for job in [4701, 4702] {
        assert!(st.join(format!("{job}.cancelled")).exists(), "job {job} was cancelled");
    }
    let rows = t.rows();
    assert_eq!(rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap()["status"], "keep", "{rows:?}");
    t.check_kept_chain(&base);
    assert_eq!(submissions(&st), 4);

    // Past the retries, the hypothesis is recorded interrupted with the reasons.
    let rig = tempfile::tempdir().unwrap();
    let (bin, st) = fake_slurm(rig.path(), &["PENDING JobHeldAdmin", "PENDING JobHeldAdmin"]);
    let t = repo("stuck_limit_s = 0\nretries = 1\n");
    let out = sweep(&t, &bin, &st, None);
    assert!(out.status.success(), "{}", text(&out));
    let rows = t.rows();
    let lost = rows.iter().find(|r| r["hypothesis"].starts_with("01")).unwrap();
    assert_eq!(lost["status"], "interrupted", "{lost:?}");
    assert!(lost["note"].contains("JobHeldAdmin"), "{lost:?}");
}
