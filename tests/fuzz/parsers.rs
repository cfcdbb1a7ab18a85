//! Hostile input: property-based fuzzing (proptest) of every parser that reads what a user or a
//! benchmark wrote: the trace reader, the result file, the RESULT/REGIME lines, the config, the
//! HLO counter and the hypothesis files (with their patches).
//! None may panic or allocate without bound, whatever the bytes. The case counts are set by
//! PROPTEST_CASES (default below); `PROPTEST_CASES=100000 cargo test --release --test fuzz`
//! is the long run.

use proptest::prelude::*;
use ratchet::bench::protocol::{parse_legacy, parse_result_file};
use ratchet::config::Config;
use ratchet::sweep::hypothesis::Hypothesis;
use ratchet::trace::{analyze_space, hlo_stats_from_text, xplane};

/// The fixture's bytes, or `None` (with a note) when ../shared is absent.
fn fixture(rel: &str) -> Option<Vec<u8>> {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(rel);
    if !p.is_file() {
        eprintln!("SKIPPED: {} is absent (a clone of the project alone)", p.display());
        return None;
    }
    Some(std::fs::read(p).unwrap())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: super::cases(2000), ..ProptestConfig::default() })]

    #[test]
    fn xplane_decoder_never_panics_on_mutated_captures(flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..8), cut in any::<usize>()) {
        static BASE: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
        let Some(base) = BASE.get_or_init(|| fixture("jax-cpu-0.10.2/flash_attention_5iters.xplane.pb")) else { return Ok(()) };
        let data = super::mutate(base, &flips, cut);
        if let Ok(space) = xplane::parse(&data) {
            // A capture that still decodes must also analyse without panicking.
            let _ = analyze_space(&space, "fuzz", &Default::default());
        }
    }

    #[test]
    fn xplane_decoder_never_panics_on_random_bytes(data in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = xplane::parse(&data);
    }

    #[test]
    fn result_file_parser_never_panics(text in ".{0,300}") {
        let _ = parse_result_file(&text);
    }

    #[test]
    fn result_file_parser_on_json_shaped_input(
        version in prop::option::of(0u32..4),
        lats in prop::collection::vec(prop_oneof![Just(f64::NAN), Just(-1.0), Just(0.0), 0.001f64..1e6], 0..6),
        flops in prop::option::of(-1e12f64..1e15),
        extra in prop::option::of("[a-z]{1,8}"),
    ) {
        let mut obj = serde_json::Map::new();
        if let Some(v) = version { obj.insert("version".into(), v.into()); }
        obj.insert("latencies_ms".into(), serde_json::Value::Array(lats.iter().map(|&x| serde_json::Number::from_f64(x).map(serde_json::Value::Number).unwrap_or(serde_json::Value::Null)).collect()));
        if let Some(f) = flops { obj.insert("flops".into(), f.into()); }
        if let Some(k) = extra { obj.insert(k, 1.into()); }
        let text = serde_json::Value::Object(obj).to_string();
        if let Ok(r) = parse_result_file(&text) {
            // Whatever passes validation is usable: a positive, finite latency for every iteration.
            prop_assert!(!r.latencies_ms.is_empty());
            prop_assert!(r.latencies_ms.iter().all(|x| x.is_finite() && *x > 0.0));
            prop_assert!(r.flops.is_none_or(|f| f > 0.0));
        }
    }

    #[test]
    fn result_lines_parser_never_panics(lines in prop::collection::vec("(RESULT|REGIME)?:? ?([a-z]{1,8}=[-0-9.eE%a-z]{0,8} ?){0,5}", 0..5)) {
        let text = lines.join("\n");
        if let Ok(Some(r)) = parse_legacy(&text) {
            prop_assert!(r.latency_ms.is_finite() && r.latency_ms > 0.0);
        }
    }

    #[test]
    fn config_parser_never_panics(text in "(\\[[a-z.]{1,12}\\]\n)?([a-z_]{1,12} = (\"[^\"\n]{0,10}\"|-?[0-9.]{1,6}|true|\\[\\]))?\n?.{0,40}") {
        let _ = Config::parse(&text);
    }

    #[test]
    fn hlo_counter_never_panics(text in ".{0,400}") {
        let _ = hlo_stats_from_text(&text);
    }

    #[test]
    fn hypothesis_files_never_panic(
        text in "(message = \"[^\"\n]{0,10}\"\n)?(tags = \\[(\"[a-z;,]{0,4}\",?){0,3}\\]\n)?(pairs = -?[0-9]{1,3}\n)?(patch = \"p.patch\"\n)?(\\[\\[edit\\]\\]\nfile = \"[a-z./]{0,12}\"\nfind = \"[a-z]{0,3}\"\nreplace = \"x\"\n){0,2}.{0,20}",
        patch in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("h.toml"), &text).unwrap();
        std::fs::write(d.path().join("p.patch"), &patch).unwrap();
        if let Ok(h) = Hypothesis::load(&d.path().join("h.toml")) {
            // What loads is usable: a message, and a key naming the file.
            prop_assert!(!h.message.is_empty());
            prop_assert!(h.key().starts_with("h.toml@"));
        }
    }

    #[test]
    fn patches_parsed_by_a_hypothesis_never_panic(
        body in prop::collection::vec(prop_oneof![Just("diff --git a/f b/f\n".to_string()), Just("--- a/f\n".to_string()), Just("+++ b/f\n".to_string()),
            Just("@@ -1 +1 @@\n".to_string()), "[-+ ][a-z]{0,5}\n", "[^\n]{0,12}\n"], 0..12),
    ) {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("h.toml"), "message = \"m\"\npatch = \"p.patch\"\n").unwrap();
        std::fs::write(d.path().join("p.patch"), body.concat()).unwrap();
        let _ = Hypothesis::load(&d.path().join("h.toml"));
    }
}
