//! Accuracy against real runs and published numbers: LLMServingSim's golden example, its
//! placement and power examples, validation against vLLM runs, the roofline's derived
//! constants, our H200 measurements, and public runs no constant was derived from.

#[path = "../common/binary.rs"]
mod binary;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod derive_roofline;
mod lss2_setups;
mod measured_h200;
mod placement;
mod power;
mod profile_golden;
mod profile_warnings;
mod public_checks;
mod validate;
