//! Tests that run the real `blis-cosim` binary on files and flags, one module per command or
//! feature (the main job's outputs, clusters, P/D, control plane, sweeps, traces, docs).

#[path = "../common/binary.rs"]
mod binary;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod anomalies;
mod autoscale;
mod calibrate;
mod cluster;
mod control;
mod docs_examples;
mod docs_flags;
mod end_to_end;
mod et;
mod evaluation;
mod fp8;
mod host_model;
mod huge_pages;
mod interrupt;
mod json_shape;
mod large_datasets;
mod limits;
mod lower_tier;
mod mixups;
mod overflow;
mod overload;
mod paths;
mod pd;
mod pd_sessions;
mod pim;
mod pipeline;
mod plots;
mod profile_bundle;
mod release2;
mod routing;
mod scenario;
mod sessions;
mod sglang;
mod slo;
mod spec_limits;
mod summary_memory;
mod sweep;
mod threads;
mod timeseries;
mod tpu;
mod trace;
mod trace_scaling;
mod traces;
mod validate;
mod vllm_version;
mod workload_spec;
