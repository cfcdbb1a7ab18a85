//! Hostile input for the one-pass trace reader: mutated real captures of every kind
//! (CPU, TPU, single- and multi-GPU) through the skeleton decoder and the fused pass, mutated
//! TPU Chrome traces, and a bound on memory. Nothing may panic; what decodes must analyse or
//! fail with an error. `PROPTEST_CASES` sets the case count.

use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use ratchet::trace::{analyze, analyze_space, xplane, AnalyzeOptions};

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures").join(rel)
}

/// The fixture's bytes, or `None` (with a note) when ../shared is absent.
fn bytes(rel: &str) -> Option<Vec<u8>> {
    let p = fixture(rel);
    if !p.is_file() {
        eprintln!("SKIPPED: {} is absent (a clone of the project alone)", p.display());
        return None;
    }
    Some(std::fs::read(p).unwrap())
}

const CAPTURES: [&str; 4] = [
    "jax-cpu-0.10.2/flash_attention_5iters.xplane.pb",
    "tpu-v6e-xprof/tpu_inference_2.xplane.pb",
    "amd-mi300x-jax0.8/attention.xplane.pb",
    "amd-mi300x-conv-8gpu/conv_legacy.xplane.pb",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: super::cases(300), ..ProptestConfig::default() })]

    #[test]
    fn the_fused_pass_never_panics_on_mutated_captures(
        which in 0usize..4,
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 1..6),
        cut in any::<usize>(),
        kernel in prop::option::of(prop_oneof![Just("jit".to_string()), Just("RPA".to_string()), Just("conv".to_string())]),
        times_only in any::<bool>(),
    ) {
        static BASES: std::sync::OnceLock<Vec<Option<Vec<u8>>>> = std::sync::OnceLock::new();
        let bases = BASES.get_or_init(|| CAPTURES.iter().map(|c| bytes(c)).collect());
        let Some(base) = &bases[which] else { return Ok(()) };
        // Mostly near the end of a cut, so the mutation lands inside events.
        let data = super::mutate(base, &flips, cut);
        if let Ok(space) = xplane::parse_skeleton(&data) {
            let opts = AnalyzeOptions { kernel, times_only };
            if let Ok(r) = analyze_space(&space, "fuzz", &opts) {
                // What analyses is usable: finite, non-negative times for what it reports.
                if let Some(k) = &r.kernel {
                    prop_assert_eq!(k.per_execution_us.len(), k.executions);
                }
            }
        }
    }
}

#[test]
fn mutated_tpu_chrome_traces_are_errors_or_reports_never_panics() {
    let Some(gz) = bytes("tpu-v-vllm-json/rpa_step.trace.json.gz") else { return };
    let mut text = String::new();
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(&gz[..]), &mut text).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for round in 0..10 {
        let mut t = text.clone().into_bytes();
        // Byte changes inside the JSON (mostly breaking it), or a clean cut.
        if round % 3 == 0 {
            let cut = (next() as usize) % t.len();
            t.truncate(cut);
        } else {
            for _ in 0..4 {
                let i = (next() as usize) % t.len();
                t[i] = b"0123456789\",:{}[]-.e "[(next() as usize) % 21];
            }
        }
        let p = dir.path().join(format!("m{round}.trace.json.gz"));
        let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&p).unwrap(), flate2::Compression::fast());
        enc.write_all(&t).unwrap();
        enc.finish().unwrap();
        for kernel in [None, Some("RPA".to_string())] {
            let _ = analyze(&p, &AnalyzeOptions { kernel, times_only: false });
        }
    }
}

/// A capture whose lengths claim far more than the file: the reader must fail cleanly with its
/// memory bounded (it never allocates by a length it has not checked against the bytes left).
#[test]
fn hostile_lengths_fail_cleanly_under_a_memory_limit() {
    let Some(base) = bytes("jax-cpu-0.10.2/flash_attention_5iters.xplane.pb") else { return };
    let dir = tempfile::tempdir().unwrap();
    // Overwrite bytes in the middle with a maximal varint: a length of ~2^63.
    let mut data = base.clone();
    let mid = data.len() / 2;
    data[mid..mid + 10].copy_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]);
    let p = dir.path().join("hostile.xplane.pb");
    std::fs::write(&p, &data).unwrap();
    let bin = assert_cmd::cargo::cargo_bin("ratchet");
    // 512 MiB of address space: far below what any length in the file claims.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v 524288; exec '{}' inspect '{}'", bin.display(), p.display()))
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "not a clean failure: {:?}\n{err}", out.status);
    assert!(err.contains("corrupt or truncated .xplane.pb"), "{err}");
    assert!(err.contains("hostile.xplane.pb"), "{err}");
}
