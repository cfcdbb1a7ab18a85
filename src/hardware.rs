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
        source: "Google Cloud TPU7x (Ironwood) documentation: 2307 TFLOP/s bf16, 7380 GB/s HBM3e",
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
}
