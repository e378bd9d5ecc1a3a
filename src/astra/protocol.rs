//! The lines ASTRA-Sim prints that the driver acts on (spec §6, LLMServingSim §4.5).
//!
//! Everything else (`Checking End NPU n ...`, logger noise) is read and ignored. Log lines may
//! carry any prefix (the fork's spdlog pattern puts a timestamp, level and logger name first);
//! the parsers look for the report from `sys[` to the end of the line.

/// What an NPU prints when it has finished a workload (the fork:
/// `sys[N] iteration I finished, C cycles, exposed communication X cycles.`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// The reporting NPU.
    pub npu: u32,
    /// Workloads that NPU has loaded before this one finished (0: the initial workload).
    pub iteration: u64,
    /// Absolute simulated time, ns (1 cycle = 1 ns).
    pub cycles: u64,
    /// Cumulative non-compute time, ns.
    pub exposed: u64,
}

/// What stock ASTRA-Sim prints for each NPU at the end of its run:
/// `sys[N] finished, T cycles, exposed communication X cycles.`
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalReport {
    /// The NPU.
    pub npu: u32,
    /// Time at which it finished, ns.
    pub cycles: u64,
    /// Non-compute time, ns.
    pub exposed: u64,
}

/// Whether `line` is the fork's prompt for the next workload (a log line whose message is
/// `Waiting`).
pub fn is_waiting(line: &str) -> bool {
    line.trim_end().ends_with("Waiting")
}

/// Whether the fork's shutdown has started (`Checking Non-Exited Systems ...`).
pub fn is_exit_check(line: &str) -> bool {
    line.contains("Checking Non-Exited Systems")
}

/// Parses the fork's report line; `None` when `line` is not one.
pub fn parse_report(line: &str) -> Option<Report> {
    let mut c = Cursor::at_report(line)?;
    let npu = c.number()?;
    c.literal("] iteration ")?;
    let iteration = c.number()?;
    c.literal(" finished, ")?;
    let (cycles, exposed) = c.cycles_tail()?;
    Some(Report {
        npu: u32::try_from(npu).ok()?,
        iteration,
        cycles,
        exposed,
    })
}

/// Parses stock ASTRA-Sim's final line for one NPU; `None` when `line` is not one.
pub fn parse_final_report(line: &str) -> Option<FinalReport> {
    let mut c = Cursor::at_report(line)?;
    let npu = c.number()?;
    c.literal("] finished, ")?;
    let (cycles, exposed) = c.cycles_tail()?;
    Some(FinalReport {
        npu: u32::try_from(npu).ok()?,
        cycles,
        exposed,
    })
}

/// A position in a line being parsed.
struct Cursor<'a> {
    rest: &'a str,
}

impl<'a> Cursor<'a> {
    /// Just after the last `sys[` of the line.
    fn at_report(line: &'a str) -> Option<Cursor<'a>> {
        let start = line.rfind("sys[")?;
        Some(Cursor {
            rest: line[start + 4..].trim_end(),
        })
    }

    fn literal(&mut self, s: &str) -> Option<()> {
        self.rest = self.rest.strip_prefix(s)?;
        Some(())
    }

    fn number(&mut self) -> Option<u64> {
        let end = self
            .rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.rest.len());
        let value = self.rest[..end].parse().ok()?;
        self.rest = &self.rest[end..];
        Some(value)
    }

    /// `C cycles, exposed communication X cycles.` up to the end of the line.
    fn cycles_tail(&mut self) -> Option<(u64, u64)> {
        let cycles = self.number()?;
        self.literal(" cycles, exposed communication ")?;
        let exposed = self.number()?;
        self.literal(" cycles.")?;
        self.rest.is_empty().then_some((cycles, exposed))
    }
}
