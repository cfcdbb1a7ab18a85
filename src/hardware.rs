//! Peak figures of the accelerators ratchet knows, for the roofline: dense bf16 FLOP/s and HBM
//! bandwidth per chip. Each figure names its source.

/// One chip's roofline ceilings.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Hardware {
    /// Peak dense FLOP/s, in TFLOP/s (10^12).
    pub peak_tflops: f64,
    /// Peak HBM bandwidth, in GB/s (10^9 bytes).
    pub hbm_gbps: f64,
}

/// A named preset and where its figures come from.
pub struct Preset {
    pub name: &'static str,
    pub hw: Hardware,
    pub source: &'static str,
}

/// Presets for `[hardware] preset = "..."`.
pub const PRESETS: &[Preset] = &[
    Preset {
        name: "tpu-v5e",
        hw: Hardware { peak_tflops: 197.0, hbm_gbps: 819.0 },
        // Also the figures of the source article (KernelForge part 2, section 3.1).
        source: "Google Cloud TPU v5e documentation: 197 TFLOP/s bf16, 819 GB/s HBM2",
    },
    Preset {
        name: "tpu-v5p",
        hw: Hardware { peak_tflops: 459.0, hbm_gbps: 2765.0 },
        source: "Google Cloud TPU v5p documentation: 459 TFLOP/s bf16, 2765 GB/s HBM2e",
    },
    Preset {
        name: "tpu-v6e",
        hw: Hardware { peak_tflops: 918.0, hbm_gbps: 1640.0 },
        source: "Google Cloud TPU v6e (Trillium) documentation: 918 TFLOP/s bf16, 1640 GB/s HBM",
    },
    Preset {
        name: "tpu-v7x",
        hw: Hardware { peak_tflops: 2307.0, hbm_gbps: 7380.0 },
        // The same figures give seed 003's v7x ridge: 2307T / 7380 GB/s = 313 FLOPs/byte.
        source: "Google Cloud TPU7x (Ironwood) documentation: 2307 TFLOP/s bf16, 7380 GB/s HBM3e",
    },
    Preset {
        name: "tpu-v4",
        hw: Hardware { peak_tflops: 275.0, hbm_gbps: 1228.0 },
        source: "Google Cloud TPU v4 documentation: 275 TFLOP/s bf16, 1228 GB/s HBM2",
    },
    Preset {
        name: "a100",
        hw: Hardware { peak_tflops: 312.0, hbm_gbps: 1555.0 },
        source: "NVIDIA A100 40GB datasheet: 312 TFLOP/s dense bf16, 1555 GB/s HBM2",
    },
    Preset {
        name: "a100-80gb",
        hw: Hardware { peak_tflops: 312.0, hbm_gbps: 2039.0 },
        source: "NVIDIA A100 80GB SXM datasheet: 312 TFLOP/s dense bf16, 2039 GB/s HBM2e",
    },
    Preset {
        name: "h100",
        hw: Hardware { peak_tflops: 989.0, hbm_gbps: 3350.0 },
        source: "NVIDIA H100 SXM5 datasheet: 989 TFLOP/s dense bf16 (1979 with sparsity), 3.35 TB/s HBM3",
    },
    Preset {
        name: "h200",
        hw: Hardware { peak_tflops: 989.0, hbm_gbps: 4800.0 },
        source: "NVIDIA H200 SXM datasheet: 989 TFLOP/s dense bf16 (1979 with sparsity), 4.8 TB/s HBM3e",
    },
    Preset {
        name: "cpu",
        hw: Hardware { peak_tflops: 1.0, hbm_gbps: 50.0 },
        // There is no single CPU figure: these nominal ceilings only let the example run on a
        // machine without an accelerator. Util and BW% are then not meaningful; latency is.
        source: "nominal figures for running examples on a CPU (not a measured peak)",
    },
];

/// jax `device_kind` substrings and the preset each names, most specific first. The Python
/// helper's `PEAKS` table (python/ratchet_bench.py) holds the same rows with the figures
/// inlined; `peak_table_matches_the_python_helper` fails when the two drift apart.
pub const DEVICE_KINDS: &[(&str, &str)] = &[
    ("TPU7x", "tpu-v7x"),
    ("TPU v7", "tpu-v7x"),
    ("TPU v6 lite", "tpu-v6e"),
    ("TPU v5 lite", "tpu-v5e"),
    ("TPU v5p", "tpu-v5p"),
    ("TPU v5", "tpu-v5p"),
    ("TPU v4", "tpu-v4"),
    ("H200", "h200"),
    ("H100", "h100"),
    ("A100-SXM4-80GB", "a100-80gb"),
    ("A100", "a100"),
];

/// Streaming multiprocessors of the NVIDIA GPUs ratchet knows, by `device_kind` substring, most
/// specific first: a grid of fewer programs than this leaves SMs idle. Sources: NVIDIA H100
/// Tensor Core GPU Architecture whitepaper (132 SMs on the SXM5 board, 114 on PCIe); the H200
/// is the same GH100 configuration as the H100 SXM5 (132; PyTorch reported 132 on this
/// project's H200, 2026-10-28); NVIDIA A100 Tensor Core GPU Architecture whitepaper (108).
pub const GPU_SMS: &[(&str, u32)] = &[("H100 PCIe", 114), ("H200", 132), ("H100", 132), ("A100", 108)];

/// The SM count for a jax `device_kind` (`NVIDIA H200`), if known.
pub fn gpu_sms(kind: &str) -> Option<u32> {
    by_device_kind(GPU_SMS, kind).copied()
}

/// The value of the first row whose substring a jax `device_kind` contains, ignoring case (the
/// tables list the most specific substring first).
fn by_device_kind<'a, T>(table: &'a [(&str, T)], kind: &str) -> Option<&'a T> {
    let k = kind.to_ascii_lowercase();
    table.iter().find(|(sub, _)| k.contains(&sub.to_ascii_lowercase())).map(|(_, v)| v)
}

/// The preset for a jax `device_kind` (`TPU v5 lite`, `NVIDIA H100 80GB HBM3`), if known.
pub fn for_device_kind(kind: &str) -> Option<&'static Preset> {
    by_device_kind(DEVICE_KINDS, kind).and_then(|name| preset(name))
}

pub fn preset(name: &str) -> Option<&'static Preset> {
    PRESETS.iter().find(|p| p.name.eq_ignore_ascii_case(name))
}

pub fn preset_names() -> Vec<&'static str> {
    PRESETS.iter().map(|p| p.name).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_preset_is_found_by_name_and_positive() {
        for p in PRESETS {
            assert_eq!(preset(p.name).unwrap().name, p.name);
            assert!(p.hw.peak_tflops > 0.0 && p.hw.hbm_gbps > 0.0);
        }
        assert!(preset("TPU-V5E").is_some());
        assert!(preset("tpu-v9").is_none());
    }

    #[test]
    fn gpu_sms_follow_the_device_kind() {
        assert_eq!(gpu_sms("NVIDIA H200"), Some(132));
        assert_eq!(gpu_sms("NVIDIA H100 80GB HBM3"), Some(132));
        assert_eq!(gpu_sms("NVIDIA H100 PCIe"), Some(114));
        assert_eq!(gpu_sms("NVIDIA A100-SXM4-80GB"), Some(108));
        assert_eq!(gpu_sms("TPU v5 lite"), None);
    }

    #[test]
    fn device_kinds_name_presets() {
        for (_, name) in DEVICE_KINDS {
            assert!(preset(name).is_some(), "{name}");
        }
        assert_eq!(for_device_kind("TPU v5 lite").unwrap().name, "tpu-v5e");
        assert_eq!(for_device_kind("NVIDIA H100 80GB HBM3").unwrap().name, "h100");
        assert_eq!(for_device_kind("NVIDIA A100-SXM4-80GB").unwrap().name, "a100-80gb");
        assert_eq!(for_device_kind("TPU7x").unwrap().hw.peak_tflops, 2307.0);
        assert!(for_device_kind("cpu").is_none());
    }

    /// One table of peaks: the Python helper's PEAKS rows equal DEVICE_KINDS + PRESETS.
    #[test]
    fn peak_table_matches_the_python_helper() {
        let py = crate::pyhelper::SOURCE;
        let start = py.find("PEAKS = (").expect("PEAKS table in ratchet_bench.py");
        let table = &py[start..start + py[start..].find("\n)").unwrap()];
        let rows: Vec<(String, f64, f64)> = table
            .lines()
            .filter_map(|l| {
                let l = l.trim().strip_prefix("(\"")?;
                let (kind, rest) = l.split_once("\", ")?;
                let nums: Vec<f64> = rest.trim_end_matches("),").split(',').map(|x| x.trim().parse().unwrap()).collect();
                Some((kind.to_string(), nums[0], nums[1]))
            })
            .collect();
        assert_eq!(rows.len(), DEVICE_KINDS.len());
        for ((kind, tflops, gbps), (k, name)) in rows.iter().zip(DEVICE_KINDS) {
            assert_eq!(kind, k);
            let hw = preset(name).unwrap().hw;
            assert_eq!((hw.peak_tflops, hw.hbm_gbps), (*tflops, *gbps), "{kind}");
        }
    }
}
