//! `ratchet inspect --json` speaks JSON on failure too: a missing or corrupt capture gives the
//! project's error object on stdout (and a non-zero exit), never plain text alone.

use assert_cmd::Command;

fn inspect_json(path: &std::path::Path) -> (serde_json::Value, i32) {
    let out = Command::cargo_bin("ratchet").unwrap().args(["inspect", "--json"]).arg(path).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {stdout:?}"));
    (v, out.status.code().unwrap())
}

#[test]
fn a_corrupt_or_missing_capture_is_a_json_error_object() {
    let dir = tempfile::tempdir().unwrap();
    // A plane whose length prefix promises far more bytes than the file holds.
    let bad = dir.path().join("cut.xplane.pb");
    std::fs::write(&bad, [0x0a, 0xff, 0xff, 0x07, 0x12, 0x03, b'a', b'b', b'c']).unwrap();
    let (v, code) = inspect_json(&bad);
    assert_eq!(v["type"], "error", "{v}");
    assert!(v["message"].as_str().unwrap().contains("corrupt or truncated"), "{v}");
    assert_ne!(code, 0);
    let (v, code) = inspect_json(&dir.path().join("absent.xplane.pb"));
    assert!(v["message"].as_str().unwrap().contains("does not exist"), "{v}");
    assert_eq!(v["exit_code"].as_i64(), Some(i64::from(code)));
}
