//! Workloads: the requests that enter the simulator.
