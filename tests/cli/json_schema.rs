//! Every command's `--json` output validates against the one versioned schema
//! (docs/json.schema.json), checked by a small JSON Schema validator (the keywords the schema
//! uses: $ref, type, const, enum, required, properties, items, oneOf, allOf, minimum).

use crate::support;

use serde_json::Value;
use support::TestRepo;

fn schema() -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/json.schema.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The errors of `v` against `s` (empty: valid), each with its JSON path.
fn check(root: &Value, s: &Value, v: &Value, path: &str, errs: &mut Vec<String>) {
    let Some(s) = s.as_object() else { return };
    if let Some(r) = s.get("$ref").and_then(Value::as_str) {
        let name = r.strip_prefix("#/$defs/").expect("local refs only");
        let def = root["$defs"].get(name).unwrap_or_else(|| panic!("schema: no $defs/{name}"));
        check(root, def, v, path, errs);
    }
    if let Some(t) = s.get("type") {
        let types: Vec<&str> = match t {
            Value::String(x) => vec![x.as_str()],
            Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
            _ => panic!("schema: bad type"),
        };
        let ok = types.iter().any(|t| match *t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            "integer" => v.is_u64() || v.is_i64(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("schema: unknown type {other}"),
        });
        if !ok {
            errs.push(format!("{path}: {v} is not of type {types:?}"));
            return;
        }
    }
    if let Some(c) = s.get("const") {
        if c != v {
            errs.push(format!("{path}: {v} is not {c}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            errs.push(format!("{path}: {v} is not one of {e:?}"));
        }
    }
    if let (Some(m), Some(x)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if x < m {
            errs.push(format!("{path}: {x} < {m}"));
        }
    }
    if let Some(obj) = v.as_object() {
        for k in s.get("required").and_then(Value::as_array).into_iter().flatten() {
            if !obj.contains_key(k.as_str().unwrap()) {
                errs.push(format!("{path}: missing {k}"));
            }
        }
        for (k, sub) in s.get("properties").and_then(Value::as_object).into_iter().flatten() {
            if let Some(x) = obj.get(k) {
                check(root, sub, x, &format!("{path}.{k}"), errs);
            }
        }
    }
    if let (Some(items), Some(arr)) = (s.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            check(root, items, x, &format!("{path}[{i}]"), errs);
        }
    }
    for sub in s.get("allOf").and_then(Value::as_array).into_iter().flatten() {
        check(root, sub, v, path, errs);
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array) {
        let fits: Vec<Vec<String>> = one
            .iter()
            .map(|sub| {
                let mut e = vec![];
                check(root, sub, v, path, &mut e);
                e
            })
            .collect();
        let n = fits.iter().filter(|e| e.is_empty()).count();
        if n != 1 {
            let closest = fits.iter().min_by_key(|e| e.len()).cloned().unwrap_or_default();
            errs.push(format!("{path}: matches {n} of oneOf (must be 1); nearest: {closest:?}"));
        }
    }
}

/// Validate `v` against the whole schema (`def` None) or one of its $defs.
fn valid(v: &Value, def: Option<&str>) {
    let root = schema();
    let s = match def {
        Some(d) => serde_json::json!({"$ref": format!("#/$defs/{d}")}),
        None => root.clone(),
    };
    let mut errs = vec![];
    check(&root, &s, v, "$", &mut errs);
    assert!(errs.is_empty(), "{errs:#?}\nin {v}");
}

/// Run ratchet with `args`; every stdout line must be a JSON object valid against the schema.
fn json_lines(t: &TestRepo, args: &[&str], code: i32) -> Vec<Value> {
    let out = t.ratchet().args(args).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(code), "{args:?}\nstdout: {stdout}\nstderr: {stderr}");
    let lines: Vec<Value> =
        stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: not a JSON line ({e}): {l}"))).collect();
    assert!(!lines.is_empty(), "{args:?}: no JSON");
    for l in &lines {
        valid(l, None);
        assert_eq!(l["schema_version"], 1);
    }
    lines
}

#[test]
fn the_validator_rejects_what_the_schema_forbids() {
    let ok = serde_json::json!({"schema_version": 1, "type": "sweep", "experiments": [1], "kept": 1, "already_done": 0, "not_started": 0, "stopped_by": null});
    valid(&ok, None);
    for (k, bad) in [("kept", serde_json::json!(-1)), ("experiments", serde_json::json!(["1"])), ("schema_version", serde_json::json!(2))] {
        let mut v = ok.clone();
        v[k] = bad;
        let mut errs = vec![];
        check(&schema(), &schema(), &v, "$", &mut errs);
        assert!(!errs.is_empty(), "{k} should be invalid");
    }
    let mut v = ok.clone();
    v.as_object_mut().unwrap().remove("stopped_by");
    let mut errs = vec![];
    check(&schema(), &schema(), &v, "$", &mut errs);
    assert!(!errs.is_empty(), "a missing field is invalid");
}

#[test]
fn every_commands_json_validates_against_the_schema() {
    let t = TestRepo::new();
    let st = json_lines(&t, &["status", "--json"], 0);
    assert_eq!(st[0]["type"], "status");
    assert!(st[0]["last"].is_null());

    // An experiment: one `run` event per run, then the decision; the text went to stderr.
    t.write("fake.env", "FAKE_LATENCY_MS=5\n");
    let out = t.ratchet().args(["experiment: faster", "--json"]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("experiment 1: experiment: faster"), "the text goes to stderr");
    let lines = json_lines(&t, &["run", "experiment: faster still", "--json", "--allow-empty"], 0);
    let (last, events) = lines.split_last().unwrap();
    assert_eq!(last["type"], "decision");
    assert!(events.iter().all(|e| e["type"] == "run" && e["experiment"] == "2"), "{events:?}");
    assert_eq!(events.len() as u64, last["runs"].as_u64().unwrap());
    let first: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let d1 = first.last().unwrap();
    assert_eq!(d1["status"], "keep");
    assert_eq!(d1["kept"], true);
    assert!(d1["discarded_ref"].is_null());
    assert!(d1["pairs"].as_u64().unwrap() >= 4);
    assert!(d1["p_value"].as_f64().unwrap() <= d1["p_threshold"].as_f64().unwrap());

    // A revert names where the hypothesis is kept.
    t.write("fake.env", "FAKE_LATENCY_MS=9\n");
    let lines = json_lines(&t, &["experiment: slower", "--json"], 0);
    let d = lines.last().unwrap();
    assert_eq!(d["status"], "revert", "{d}");
    assert_eq!(d["discarded_ref"], "refs/ratchet/discarded/3");
    assert_eq!(d["class"], "not_kept");

    // A failure is an error object (and the exit code says the same).
    let lines = json_lines(&t, &["experiment: nothing changed", "--json"], 4);
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["type"], "error");
    assert_eq!(lines[0]["exit_code"], 4);

    let show = json_lines(&t, &["show", "3", "--json"], 0);
    assert_eq!(show[0]["experiment"]["id"], 3);
    assert!(!show[0]["runs"].as_array().unwrap().is_empty());

    let cal = json_lines(&t, &["calibrate", "--pairs", "2", "--json"], 0);
    assert_eq!(cal.last().unwrap()["type"], "calibration");

    t.write(
        "experiments/01-faster.toml",
        "message = \"exp: faster by a sweep\"\n[[edit]]\nfile = \"kernel.py\"\nfind = \"BQ = 128\\n\"\nreplace = \"BQ = 64\\n\"\n",
    );
    t.git(&["add", "experiments"]);
    t.git(&["commit", "-qm", "queue"]);
    let sweep = json_lines(&t, &["sweep", "--json"], 0);
    let end = sweep.last().unwrap();
    assert_eq!(end["type"], "sweep");
    assert_eq!(end["experiments"], serde_json::json!([4]));
    assert_eq!(sweep[sweep.len() - 2]["type"], "decision");

    let base = t.git(&["rev-parse", "HEAD~1"]);
    let gate = json_lines(&t, &["gate", "--base", base.trim(), "--json", "--pairs", "4"], 0);
    assert_eq!(gate[0]["type"], "gate");

    let st = json_lines(&t, &["status", "--json"], 0);
    assert_eq!(st[0]["experiments"], 4);
    valid(&st[0]["last"], Some("row"));

    // The two outputs that predate the envelope.
    let out = t.ratchet().args(["results", "--format", "json"]).output().unwrap();
    valid(&serde_json::from_slice(&out.stdout).unwrap(), Some("results"));
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/example-cpu");
    let out = t.ratchet().arg("inspect").arg(&fixture).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    valid(&serde_json::from_slice(&out.stdout).unwrap(), Some("inspect"));
}

#[test]
fn an_interrupted_experiment_prints_its_decision_then_the_error() {
    let t = TestRepo::new();
    t.write("kernel.py", "BQ = 1\n");
    let out = t.ratchet().args(["experiment: x", "--json"]).env("RATCHET_SIGNAL_AT", "after-run").output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for l in &lines {
        valid(l, None);
    }
    let types: Vec<&str> = lines.iter().map(|l| l["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["run", "decision", "error"]);
    assert_eq!(lines[1]["status"], "interrupted");
    assert_eq!(lines[1]["class"], "not_run");
    assert_eq!(lines[2]["kind"], "interrupted");
    assert_eq!(lines[2]["exit_code"], 130);
}
