//! Workload inputs through the library (and the binary's `generate`): JSONL requests and
//! sessions, WorkloadSpec v2 (BLIS, ServeGen, inference-perf, agentic), production traces,
//! and property-based tests over the input readers.

#[path = "../common/binary.rs"]
mod binary;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod agentic_spec;
mod jsonl;
mod large_datasets;
mod proptest_inputs;
mod session_stream;
mod sessions;
mod spec;
mod spec_blis;
mod spec_inference_perf;
mod spec_servegen;
mod traces;
