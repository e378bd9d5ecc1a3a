//! How many threads a run uses (`--threads`): the simulation's loop always runs on one; a
//! second, where it pays, draws a generated workload's open-loop arrivals ahead of the loop
//! ([`crate::workload::spec::DrawnAhead`]) and folds the instances' inter-token gaps behind
//! it ([`crate::metrics::FoldBehind`]). Outputs are byte-identical whatever the threads.

/// Requests from which a run takes a second thread by default: below it, starting the
/// threads and handing work over cost about what they save (whole-process timings,
/// docs/src/performance-log.md, "the second core").
pub const AUTO_FROM_REQUESTS: u64 = 10_000;

/// The threads a run may use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Threads {
    /// A second thread for runs of [`AUTO_FROM_REQUESTS`] or more, on a machine with two
    /// processors or more.
    #[default]
    Auto,
    /// Everything on the simulation's thread.
    One,
    /// A second thread whatever the run's size.
    Two,
}

impl Threads {
    /// The setting of `--threads` (`None`: not given).
    pub fn from_flag(flag: Option<u8>) -> Threads {
        match flag {
            None => Threads::Auto,
            Some(1) => Threads::One,
            Some(_) => Threads::Two,
        }
    }

    /// Whether a run of `requests` requests takes a second thread.
    pub fn second(self, requests: u64) -> bool {
        match self {
            Threads::One => false,
            Threads::Two => true,
            Threads::Auto => {
                requests >= AUTO_FROM_REQUESTS
                    && std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
            }
        }
    }
}
