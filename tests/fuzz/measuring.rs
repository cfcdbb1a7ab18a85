//! Fuzzing what a benchmark reports through the whole measuring step (`bench::measure`):
//! result files with hostile paths (devices, FIFOs, symlinks out, parent escapes) and hostile
//! values (denormals, 1e308, zero, huge counts), and RESULT lines with extreme figures. None may
//! panic, hang or read outside the run; a run that comes out `ok` has a value the statistics can
//! use (positive, finite, with finite log ratios). PROPTEST_CASES sets the case count.

use crate::support::measure::{measure_once as run, Writes};
use proptest::prelude::*;
use ratchet::bench::RunStatus;
use ratchet::config::Config;

fn value_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("1e-320".to_string()),
        Just("5e-324".to_string()),
        Just("1e308".to_string()),
        Just("1.7976931348623157e308".to_string()),
        Just("0".to_string()),
        Just("-0.0".to_string()),
        Just("-1".to_string()),
        Just("1e-9".to_string()),
        Just("1e9".to_string()),
        Just("1e24".to_string()),
        (1e-3f64..1e4).prop_map(|v| v.to_string()),
    ]
}

fn path_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/dev/zero".to_string()),
        Just("/dev/stdin".to_string()),
        Just("/proc/self/mem".to_string()),
        Just("pipe".to_string()),
        Just("zero".to_string()),
        Just("../../../../etc/passwd".to_string()),
        Just("".to_string()),
        Just(".".to_string()),
        Just("/".to_string()),
        "[a-z./]{0,12}",
    ]
}

fn assert_usable(rec: &ratchet::bench::RunRecord) -> Result<(), TestCaseError> {
    if rec.status == RunStatus::Ok {
        let v = rec.value.unwrap();
        prop_assert!(v.is_finite() && v > 0.0 && v.ln().is_finite(), "ok run with value {v}");
        let r = ratchet::stats::log_ratios(&[(v, v * 2.0), (v, v / 2.0)], ratchet::config::Direction::Higher);
        prop_assert!(r.iter().all(|x| x.is_finite()));
    } else {
        prop_assert!(rec.error.as_deref().is_some_and(|e| !e.is_empty()), "a failed run says why");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: super::cases(300), ..ProptestConfig::default() })]

    #[test]
    fn hostile_result_files_never_panic_hang_or_escape(
        lats in prop::collection::vec(value_strategy(), 1..4),
        flops in prop::option::of(value_strategy()),
        bytes in prop::option::of(value_strategy()),
        hlo in prop::option::of(path_strategy()),
        trace in prop::option::of(path_strategy()),
        metric in prop_oneof![Just("latency"), Just("score"), Just("tflops")],
        fifo in any::<bool>(),
    ) {
        let mut fields = vec![format!("\"latencies_ms\": [{}]", lats.join(", "))];
        if let Some(f) = flops { fields.push(format!("\"flops\": {f}")); }
        if let Some(b) = bytes { fields.push(format!("\"bytes\": {b}")); }
        if let Some(h) = hlo { fields.push(format!("\"hlo\": {}", serde_json::to_string(&h).unwrap())); }
        if let Some(t) = trace { fields.push(format!("\"trace\": {}", serde_json::to_string(&t).unwrap())); }
        let result = format!("{{\"version\": 1, {}}}", fields.join(", "));
        let cfg = Config::parse(&format!("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\n[score]\nmetric = \"{metric}\"\n")).unwrap();
        let rec = run(&mut Writes { result: Some(result), summary: vec![], fifo }, &cfg);
        assert_usable(&rec)?;
    }

    #[test]
    fn hostile_result_lines_never_panic(
        latency in value_strategy(),
        score in value_strategy(),
        util in value_strategy(),
        metric in prop_oneof![Just("latency"), Just("score"), Just("tflops")],
    ) {
        let line = format!("RESULT: score={score} latency={latency}ms util={util}% tflops={score}");
        let cfg = Config::parse(&format!("[benchmark]\ncommand = \"x\"\n[hardware]\npreset = \"h100\"\n[score]\nmetric = \"{metric}\"\n")).unwrap();
        let rec = run(&mut Writes { result: None, summary: vec![line], fifo: false }, &cfg);
        assert_usable(&rec)?;
    }
}
