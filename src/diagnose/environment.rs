//! What a run was measured with (the result file's `environment`: JAX / jaxlib / libtpu or
//! CUDA plugin versions, device kind and count, XLA_FLAGS, LIBTPU_INIT_ARGS), shown beside the
//! figures, and the keys on which incumbent and candidate differ: a comparison across
//! different software or hardware is not the comparison of one change.

use std::collections::BTreeMap;

pub type Environment = BTreeMap<String, serde_json::Value>;

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// One line: `jax 0.10.2, jaxlib 0.10.2, cpu (cpu) x1, XLA_FLAGS=...`.
pub fn summary(env: &Environment) -> String {
    let get = |k: &str| env.get(k).map(text);
    let mut parts = Vec::new();
    for k in ["jax", "jaxlib", "libtpu", "cuda_plugin"] {
        if let Some(v) = get(k) {
            parts.push(format!("{k} {v}"));
        }
    }
    if let Some(kind) = get("device_kind") {
        let count = get("device_count").map(|c| format!(" x{c}")).unwrap_or_default();
        let backend = get("backend").map(|b| format!(" ({b})")).unwrap_or_default();
        parts.push(format!("{kind}{backend}{count}"));
    }
    if let Some(p) = get("platform_version") {
        parts.push(format!("platform {p}"));
    }
    for k in ["XLA_FLAGS", "LIBTPU_INIT_ARGS"] {
        if let Some(v) = get(k) {
            parts.push(format!("{k}={v}"));
        }
    }
    parts.join(", ")
}

/// Keys whose values differ between the two environments (a key present on one side only
/// differs too): `(key, incumbent, candidate)`, `-` for absent. `python` is left out: the
/// interpreter's patch version does not change what the device runs.
pub fn differences(incumbent: &Environment, candidate: &Environment) -> Vec<(String, String, String)> {
    let keys: std::collections::BTreeSet<&String> = incumbent.keys().chain(candidate.keys()).collect();
    keys.into_iter()
        .filter(|k| k.as_str() != "python")
        .filter_map(|k| {
            let (a, b) = (incumbent.get(k).map(text), candidate.get(k).map(text));
            (a != b).then(|| (k.clone(), a.unwrap_or_else(|| "-".into()), b.unwrap_or_else(|| "-".into())))
        })
        .collect()
}

/// The warning for differing environments, or `None` when they agree.
pub fn difference_warning(incumbent: &Environment, candidate: &Environment) -> Option<String> {
    let d = differences(incumbent, candidate);
    (!d.is_empty()).then(|| {
        let list: Vec<String> = d.iter().map(|(k, a, b)| format!("{k}: {a} -> {b}")).collect();
        format!(
            "incumbent and candidate were measured with different set-ups ({}); the difference is not the change's alone",
            list.join("; ")
        )
    })
}
