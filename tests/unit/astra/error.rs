//! Unit tests of `blis_cosim::astra`'s faults: the faults that were text print the messages
//! they printed then.

use blis_cosim::astra::{Ended, Fault, IoFault, ParseError, ProtocolError, Refusal, WriteError};
use blis_cosim::chakra::{BreakdownError, TraceError};
use std::io::{Error, ErrorKind};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::ExitStatus;

/// Checks that each fault prints its message.
fn assert_messages<const N: usize>(cases: [(Fault, &str); N]) {
    for (fault, expected) in cases {
        assert_eq!(fault.to_string(), expected);
    }
}

#[test]
fn protocol_faults_print_their_messages() {
    let p = Fault::Protocol;
    assert_messages([
        (
            p(ProtocolError::FirstIteration {
                npu: 1,
                iteration: 2,
            }),
            "protocol error: the first report (NPU 1) has iteration 2, expected 0",
        ),
        (
            p(ProtocolError::PromptedAgain { npu: 1, batch: 7 }),
            "protocol error: NPU 1 prompted again before every NPU of the instance \
                 received batch 7",
        ),
        (
            p(ProtocolError::NotAReporter {
                npu: 5,
                reporters: vec![0, 3],
            }),
            "protocol error: a prompt from NPU 5, which is neither the start nor the end \
                 NPU ([0, 3])",
        ),
        (
            p(ProtocolError::Iteration {
                npu: 0,
                iteration: 3,
                expected: 2,
            }),
            "protocol error: NPU 0 reported iteration 3, expected 2",
        ),
        (
            p(ProtocolError::Backwards {
                npu: 0,
                cycles: 10,
                clock: 20,
            }),
            "protocol error: NPU 0 reported 10 cycles, before the previous batch ended (20)",
        ),
        (
            p(ProtocolError::UnaskedShutdown),
            "protocol error: it started its shutdown (`Checking Non-Exited Systems`) unasked",
        ),
        (
            p(ProtocolError::NoSuchNpu { npu: 9, npus: 8 }),
            "protocol error: a report for NPU 9, but the batch has 8 NPUs",
        ),
    ]);
}

#[test]
fn io_faults_print_their_messages() {
    let io = || Error::new(ErrorKind::BrokenPipe, "broken pipe");
    assert_messages([
        (
            Fault::Io(IoFault::NonBlocking(io())),
            "making its pipes non-blocking: broken pipe",
        ),
        (
            Fault::Io(IoFault::Poll(io())),
            "waiting for its output: broken pipe",
        ),
        (
            Fault::Io(IoFault::Wait(io())),
            "waiting for it: broken pipe",
        ),
        (
            Fault::Io(IoFault::StdinClosed),
            "its stdin is already closed",
        ),
        (
            Fault::Io(IoFault::NonUtf8Path(PathBuf::from("/t/b0"))),
            "the workload path /t/b0 is not valid UTF-8",
        ),
        (
            Fault::Io(IoFault::Inputs(io())),
            "writing its inputs: broken pipe",
        ),
        (
            Fault::Io(IoFault::MemberTrace {
                member: 2,
                error: Box::new(TraceError::Breakdown(BreakdownError::NoComputeLayers)),
            }),
            "the trace of member 2: latency breakdown: no compute layers",
        ),
        (
            Fault::Io(IoFault::WaveSize {
                batches: 3,
                members: 2,
            }),
            "a wave of 3 batches for a group of 2 members",
        ),
        (
            Fault::Io(IoFault::PipelinedWaveSize {
                batches: 2,
                stages: 3,
                members: 2,
                pp: 2,
            }),
            "a pipelined wave of 2 batches and 3 stages for a group of 2 members in 2 stages",
        ),
        (
            Fault::Io(IoFault::PipelineNetwork {
                stages: 2,
                tp: 4,
                npus: 6,
            }),
            "a pipelined instance of 2 stages of 4 NPUs needs a network of 8 NPUs, got 6",
        ),
        (
            Fault::Io(IoFault::Stopped),
            "ASTRA-Sim was stopped by an earlier fault",
        ),
    ]);
}

#[test]
fn process_faults_print_their_messages() {
    let io = || Error::new(ErrorKind::BrokenPipe, "broken pipe");
    assert_messages([
        (
            Fault::Exited(Ended::Status(ExitStatus::from_raw(3 << 8))),
            "the process ended unexpectedly (exit status: 3)",
        ),
        (
            Fault::Exited(Ended::Status(ExitStatus::from_raw(9))),
            "the process ended unexpectedly (signal: 9 (SIGKILL))",
        ),
        (
            Fault::Exited(Ended::Hung),
            "the process ended unexpectedly (it closed its output but did not exit; killed)",
        ),
        (
            Fault::Unparseable(ParseError::FinalReport {
                line: "sys[0] finished, many cycles".into(),
            }),
            "unparseable output: expected `sys[N] finished, T cycles, exposed communication \
                 E cycles.`, got `sys[0] finished, many cycles`",
        ),
        (
            Fault::Unparseable(ParseError::NoFinalReport { npu: 1 }),
            "unparseable output: no `sys[1] finished, T cycles` line before it exited",
        ),
        (
            Fault::Unparseable(ParseError::IterationReport {
                line: "sys[0] iteration ?? finished".into(),
            }),
            "unparseable output: expected `sys[N] iteration I finished, C cycles, exposed \
                 communication X cycles.` before `Waiting`, got `sys[0] iteration ?? finished`",
        ),
        (
            Fault::Refused(Refusal::NetworkDimension {
                npus: 1,
                dims: vec![1, 2],
            }),
            "refused before starting it: stock ASTRA-Sim 2.0 exits on a network dimension \
                 of 1 NPU (its network parser: `npus_count (1) should be larger than 1`), and \
                 this network's dimensions are [1, 2]: a TP-1 prefill instance or DP group runs \
                 with `--astra-mode fork` only (a lone TP-1 instance runs with an idle peer)",
        ),
        (
            Fault::Write(WriteError {
                path: PathBuf::from("/t/b0.3.et"),
                source: io(),
            }),
            "writing /t/b0.3.et: broken pipe",
        ),
    ]);
}
