//! The Python packages of `python/` against this build's binary: the policy-search
//! evaluators, and a sweep on a real local Ray.

#[path = "../common/binary.rs"]
mod binary;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod python_eval;
mod sweep_ray;
