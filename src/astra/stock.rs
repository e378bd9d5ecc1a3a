//! Stock ASTRA-Sim 2.0 (not interactive): one process per batch, run to its end. It prints
//! `sys[i] finished, T cycles, exposed communication E cycles.` for every NPU and exits; the
//! batch takes the latest `T`.
//!
//! Upstream's input rules, kept by what stock mode generates or refused before a process is
//! started: every network dimension holds at least 2 NPUs (its network parser exits on
//! `npus_count (1) should be larger than 1`): a one-NPU instance runs as a two-NPU network
//! whose second NPU is an idle peer with an empty trace ([`with_idle_peer`]), any other
//! network with a dimension of 1 is refused ([`check_network`]); no event at time 0 (it
//! asserts `get_event_time() > current_time`, so a first node that costs 0 ns aborts it: the
//! memory file's latency is at least [`super::STOCK_MIN_MEM_LATENCY_NS`], which makes the
//! input load that starts every batch cost at least 1 ns); COMP durations in whole µs (the
//! upstream Chakra dialect), written with the rounding remainder carried from node to node
//! ([`crate::chakra::WireDurations`]) so that a file's compute lasts its exact total to within
//! half a µs: rounded one by one, the same layer's error repeats in every block (+1.5% on a
//! Llama-3.1-70B H100 step of 724 COMP nodes).

use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use super::protocol::parse_final_report;
use super::{
    AstraInputs, AstraProcess, Ended, Fault, NetworkConfig, NetworkDim, OutputLimits, ParseError,
    ProtocolError, Refusal,
};

/// Stock mode's network for a one-NPU network (a TP-1 instance): the same link as one
/// dimension of 2 NPUs, the second an idle peer that is given an empty trace. Nothing is sent
/// to the peer (a TP-1 trace has no collective) and its host-memory queue is the node's, which
/// only NPU 0 uses, so NPU 0's time is the one-NPU time; the peer reports 0. `None` for any
/// other network.
pub fn with_idle_peer(network: &NetworkConfig) -> Option<NetworkConfig> {
    match network.dims.as_slice() {
        [dim] if dim.npus == 1 => Some(NetworkConfig {
            dims: vec![NetworkDim { npus: 2, ..*dim }],
        }),
        _ => None,
    }
}

/// Refuses a network stock ASTRA-Sim 2.0 would refuse: one with a dimension of fewer than 2
/// NPUs (a TP-1 prefill instance or DP group; a lone TP-1 instance has its idle peer by now).
pub fn check_network(network: &NetworkConfig) -> Result<(), Fault> {
    let dims: Vec<u32> = network.dims.iter().map(|d| d.npus).collect();
    match dims.iter().find(|&&n| n < 2) {
        None => Ok(()),
        Some(&npus) => Err(Fault::Refused(Refusal::NetworkDimension { npus, dims })),
    }
}

/// One stock ASTRA-Sim process running one batch.
pub(crate) struct StockRun {
    process: AstraProcess,
    npus: u32,
    timeout: Duration,
}

impl StockRun {
    /// Starts the binary on the batch `<prefix>.<npu>.et` of `npus` NPUs, with upstream's
    /// `--remote-memory-configuration`.
    pub fn spawn(
        binary: &Path,
        inputs: &AstraInputs,
        prefix: &Path,
        npus: u32,
        timeout: Duration,
        limits: OutputLimits,
    ) -> Result<StockRun, Fault> {
        let arg = |key: &str, path: &Path| {
            let mut a = OsString::from(format!("--{key}="));
            a.push(path);
            a
        };
        let args = [
            arg("workload-configuration", prefix),
            arg("system-configuration", &inputs.system),
            arg("network-configuration", &inputs.network),
            arg("remote-memory-configuration", &inputs.memory),
        ];
        let mut process = AstraProcess::spawn(binary, &args, inputs.dir(), limits, timeout)?;
        process.close_stdin();
        Ok(StockRun {
            process,
            npus,
            timeout,
        })
    }

    /// Runs the batch `<prefix>.<npu>.et` of `npus` NPUs to the end ([`StockRun::spawn`], then
    /// [`StockRun::finish_each`]): each NPU's finish time, or the fault with the process's last
    /// output lines.
    pub fn run_each(
        binary: &Path,
        inputs: &AstraInputs,
        prefix: &Path,
        npus: u32,
        timeout: Duration,
        limits: OutputLimits,
    ) -> Result<Vec<u64>, (Fault, Vec<String>)> {
        let mut run = StockRun::spawn(binary, inputs, prefix, npus, timeout, limits)
            .map_err(|f| (f, Vec::new()))?;
        run.finish_each().map_err(|f| (f, run.last_lines()))
    }

    /// Reads the output to its end, waits for a successful exit, and returns the finish time
    /// of every NPU, ns (by NPU id); the batch's time is the latest.
    pub fn finish_each(&mut self) -> Result<Vec<u64>, Fault> {
        let deadline = Instant::now() + self.timeout;
        let mut times: Vec<Option<u64>> = vec![None; self.npus as usize];
        while let Some(line) = self.process.next_line(deadline)? {
            if let Some(report) = parse_final_report(line) {
                let slot = times.get_mut(report.npu as usize).ok_or(Fault::Protocol(
                    ProtocolError::NoSuchNpu {
                        npu: report.npu,
                        npus: self.npus,
                    },
                ))?;
                *slot = Some(report.cycles);
            } else if line.contains("sys[") && line.contains(" finished") {
                return Err(Fault::Unparseable(ParseError::FinalReport {
                    line: line.to_owned(),
                }));
            }
        }
        let status = self.process.wait(deadline)?;
        if !status.success() {
            return Err(Fault::Exited(Ended::Status(status)));
        }
        if let Some(npu) = times.iter().position(Option::is_none) {
            return Err(Fault::Unparseable(ParseError::NoFinalReport { npu }));
        }
        Ok(times.into_iter().flatten().collect())
    }

    /// The last lines printed, oldest first.
    pub fn last_lines(&self) -> Vec<String> {
        self.process.last_lines()
    }
}
