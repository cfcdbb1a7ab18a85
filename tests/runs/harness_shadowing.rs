//! A hypothesis may not change what the protected harness imports by adding a module beside it
//! (Python puts the harness's directory first on `sys.path`): a new `json.py` next to a
//! `prepare.py` that imports json is refused, in a single experiment and in a sweep, with
//! nothing lost; a new module of a name of its own is measured as usual.

use crate::support;

use support::TestRepo;

const CONFIG: &str = "[benchmark]\ncommand = \"python3 prepare.py\"\ntimeout_s = 30\nkill_grace_s = 0.5\nwarmup = 0\niters = 5\n\
profile_iters = 0\n[score]\nmetric = \"latency\"\n[decision]\nmethod = \"fixed\"\nmin_pairs = 2\nmax_pairs = 2\nconfirm = false\n";

/// The harness: reads the kernel beside it and reports its latency through json.
const PREPARE: &str = r#"import json, os
import kernel
lat = kernel.LATENCY
with open(os.path.join(os.environ["RATCHET_OUT"], "ratchet-result.json"), "w") as f:
    f.write(json.dumps({"version": 1, "latencies_ms": [lat, lat * 1.01, lat * 0.99, lat]}))
"#;

/// A json.py that halves every latency the harness writes: a "2x gain" of the measuring stick.
const FAKE_JSON: &str = r#"import importlib, sys
_me, _saved = sys.modules["json"], sys.path[:]
sys.path[:] = [p for p in sys.path if p not in ("", __file__.rsplit("/", 1)[0])]
del sys.modules["json"]
_real = importlib.import_module("json")
sys.path[:] = _saved
sys.modules["json"] = _me
def dumps(o, **k):
    o = dict(o, latencies_ms=[v / 2 for v in o["latencies_ms"]])
    return _real.dumps(o, **k)
"#;

fn repo() -> TestRepo {
    let t = TestRepo::with_config(CONFIG);
    t.write("prepare.py", PREPARE);
    t.write("kernel.py", "LATENCY = 10.0\n");
    t.git(&["add", "-A"]);
    t.git(&["commit", "-qm", "a harness that imports json"]);
    t
}

/// The diff that adds (or changes) `files` against HEAD, without leaving them in the tree.
fn patch_of(t: &TestRepo, files: &[(&str, &str)]) -> String {
    for (p, text) in files {
        t.write(p, text);
    }
    t.git(&["add", "-A"]);
    let diff = t.git(&["diff", "--cached"]);
    t.git(&["reset", "-q", "--hard"]);
    diff
}

#[test]
fn a_new_json_module_beside_the_harness_is_refused_and_left_in_the_work_tree() {
    let t = repo();
    let base = t.head();
    t.write("json.py", FAKE_JSON);
    let out = t.ratchet().arg("experiment: faster json").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a shadowing module was measured: {err}");
    assert!(err.contains("json.py shadows `json`"), "{err}");
    assert_eq!(t.head(), base, "nothing was committed");
    assert_eq!(t.read("json.py"), FAKE_JSON, "the change is still in the work tree");
    assert!(t.rows().is_empty(), "no row");
}

#[test]
fn a_module_shadowing_an_installed_package_is_refused_too() {
    let t = repo();
    let site = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(site.path().join("fancy")).unwrap();
    std::fs::write(site.path().join("fancy/__init__.py"), "").unwrap();
    t.write("fancy/__init__.py", "X = 1\n");
    let out = t.ratchet().arg("experiment: fancy").env("PYTHONPATH", site.path()).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("shadows `fancy`"), "{err}");
    assert!(t.rows().is_empty());
}

#[test]
fn a_sweep_refuses_the_shadowing_hypothesis_and_measures_the_others() {
    // The serial sweep and the parallel one (`--jobs 2`, its own controller) apply the same rule.
    for jobs in [None, Some("2")] {
        let t = repo();
        let shadow = patch_of(&t, &[("json.py", FAKE_JSON)]);
        let helper = patch_of(&t, &[("tiling.py", "TILE = 4\n"), ("kernel.py", "import tiling\nLATENCY = 5.0\n")]);
        t.write("experiments/a.patch", &shadow);
        t.write("experiments/a.toml", "message = \"faster json\"\npatch = \"a.patch\"\n");
        t.write("experiments/b.patch", &helper);
        t.write("experiments/b.toml", "message = \"a tiling helper\"\npatch = \"b.patch\"\n");
        t.git(&["add", "-A"]);
        t.git(&["commit", "-qm", "two hypotheses"]);
        let mut cmd = t.ratchet();
        cmd.arg("sweep");
        if let Some(n) = jobs {
            cmd.args(["--jobs", n]);
        }
        let out = cmd.output().unwrap();
        let mut rows = t.rows();
        rows.sort_by_key(|r| r["hypothesis"].clone());
        assert_eq!(rows.len(), 2, "{jobs:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(rows[0]["status"], "refused", "{jobs:?}: {rows:?}");
        assert!(rows[0]["note"].contains("json.py shadows `json`"), "{jobs:?}: {rows:?}");
        assert_eq!(rows[1]["status"], "keep", "{jobs:?}: the new module of its own name is measured: {rows:?}");
        assert!(!t.path().join("json.py").exists(), "{jobs:?}: the refused hypothesis left nothing in the tree");
        assert!(t.path().join("tiling.py").exists(), "{jobs:?}");
    }
}
