//! Reading captures and HLO: figures per execution and per op, the roofline, the diagnosis.

mod cost_model;
mod cpu_layouts;
mod diagnosis_evidence;
mod diagnosis_rule_sources;
mod diagnosis_rules;
mod gpu_attribution;
mod hlo_modulo_metadata;
mod impossible_figures;
mod inspect_json;
mod inspect_modules;
mod kernel_body;
mod kernel_body_counts_agree;
mod mosaic_gpu;
mod shared_captures;
mod step_markers;
