//! Hot paths that must not touch the heap, and the summary's memory, measured with a
//! counting global allocator (per thread, so the tests run side by side). Only this harness
//! installs it: the others allocate uncounted.

#[path = "../common/cluster_fixture.rs"]
mod cluster_fixture;
#[path = "../common/counting_alloc.rs"]
mod counting_alloc;
#[path = "../common/rtxpro6000_db.rs"]
mod rtxpro6000_db;
#[path = "../common/shared_data.rs"]
mod shared_data;

mod cluster;
mod lower_tier;
mod pd;
mod pim;
mod pipeline;
mod placement;
mod power;
mod profile;
mod roofline_memo;
mod summary_memory;
mod trace;
mod workload_spec;
