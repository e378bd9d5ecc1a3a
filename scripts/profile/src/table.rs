//! The samples by function: the tables the profiler prints and the folded stacks it writes.

use std::collections::BTreeMap;
use std::fmt::Write;

/// One sampled stack: its thread, its functions from the root to the one running, and how
/// many samples found it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stack {
    pub thread: String,
    pub functions: Vec<String>,
    pub count: u64,
}

/// What the sampled runs took.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    pub wall_secs: f64,
    pub cpu_secs: f64,
    pub runs: u32,
    /// Samples a CPU second asked for.
    pub rate: i32,
}

/// Every sampled stack, in a fixed order (thread, then functions).
#[derive(Debug)]
pub struct Samples {
    stacks: Vec<Stack>,
}

impl Samples {
    /// The stacks of a pprof report, their symbols demangled and without their hashes.
    pub fn of(report: &pprof::Report) -> Samples {
        let stacks = report
            .data
            .iter()
            .map(|(frames, &count)| Stack {
                thread: frames.thread_name.clone(),
                // pprof lists the running frame first and, within a frame, the innermost
                // inlined function first.
                functions: frames
                    .frames
                    .iter()
                    .rev()
                    .flat_map(|frame| frame.iter().rev().map(|s| without_hash(&s.name())))
                    .collect(),
                count: u64::try_from(count).unwrap_or(0),
            })
            .collect();
        Samples::from_stacks(stacks)
    }

    /// These stacks, equal ones merged.
    pub fn from_stacks(stacks: Vec<Stack>) -> Samples {
        let mut merged: BTreeMap<(String, Vec<String>), u64> = BTreeMap::new();
        for s in stacks {
            *merged.entry((s.thread, s.functions)).or_default() += s.count;
        }
        let stacks = merged
            .into_iter()
            .map(|((thread, functions), count)| Stack {
                thread,
                functions,
                count,
            })
            .collect();
        Samples { stacks }
    }

    /// All samples.
    pub fn total(&self) -> u64 {
        self.stacks.iter().map(|s| s.count).sum()
    }

    /// One line a stack, `thread;root;...;running count`: the folded format of flame-graph
    /// tools (inferno, speedscope, Brendan Gregg's `flamegraph.pl`).
    pub fn folded(&self) -> String {
        let mut out = String::new();
        for s in &self.stacks {
            let _ = write!(out, "{}", s.thread.replace(';', ":"));
            for f in &s.functions {
                let _ = write!(out, ";{}", f.replace(';', ":"));
            }
            let _ = writeln!(out, " {}", s.count);
        }
        out
    }

    /// Samples by thread, by the function running (self) and by every function on the
    /// stack (inclusive, each once a stack), the `top` largest of each, most first (ties by
    /// name), under a line of what the runs took.
    pub fn render(&self, top: usize, spent: &Spent) -> String {
        let total = self.total();
        let mut out = String::new();
        let taken = total as f64 / spent.cpu_secs.max(1e-9);
        let _ = writeln!(
            out,
            "{total} samples in {} run(s): {:.3} s of CPU, {:.3} s of wall time; {taken:.0} \
             samples a CPU second (asked {})",
            spent.runs, spent.cpu_secs, spent.wall_secs, spent.rate
        );
        if total == 0 {
            return out;
        }
        let [threads, running, anywhere] = self.tallies();
        let share = |n: u64| 100.0 * n as f64 / total as f64;
        let by_thread: Vec<String> = largest(&threads, usize::MAX)
            .into_iter()
            .map(|(name, n)| format!("{name} {:.1} %", share(n)))
            .collect();
        let _ = writeln!(out, "by thread: {}", by_thread.join(", "));
        for (title, tally) in [
            ("self (the function running when sampled)", &running),
            (
                "inclusive (the simulator's functions anywhere on the stack)",
                &anywhere,
            ),
        ] {
            let _ = writeln!(out, "{title}:");
            for (name, n) in largest(tally, top) {
                let _ = writeln!(out, "{:6.1} %  {name}", share(n));
            }
        }
        out
    }

    /// Samples by thread, by the running function and by every function on the stack.
    fn tallies(&self) -> [BTreeMap<&str, u64>; 3] {
        let [mut threads, mut running, mut anywhere] = [const { BTreeMap::new() }; 3];
        for s in &self.stacks {
            *threads.entry(s.thread.as_str()).or_default() += s.count;
            let leaf = s.functions.last().map_or("(no frame)", String::as_str);
            *running.entry(leaf).or_default() += s.count;
            let mut seen: Vec<&str> = s.functions.iter().map(String::as_str).collect();
            seen.sort_unstable();
            seen.dedup();
            for f in seen.into_iter().filter(|f| f.contains(OWN)) {
                *anywhere.entry(f).or_default() += s.count;
            }
        }
        [threads, running, anywhere]
    }
}

/// What the simulator's own function names contain (its crate's path, in a method's type
/// too): the inclusive table lists these alone, not the runtime's frames under them.
const OWN: &str = "blis_cosim::";

/// The `top` largest entries of `tally`, most first, ties by name.
fn largest<'a>(tally: &BTreeMap<&'a str, u64>, top: usize) -> Vec<(&'a str, u64)> {
    let mut rows: Vec<(&str, u64)> = tally.iter().map(|(&k, &v)| (k, v)).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    rows.truncate(top);
    rows
}

/// A demangled Rust name without the hash rustc appends (`::h` and 16 hex digits).
fn without_hash(name: &str) -> String {
    match name.rsplit_once("::h") {
        Some((path, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            path.to_owned()
        }
        _ => name.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(thread: &str, functions: &[&str], count: u64) -> Stack {
        Stack {
            thread: thread.into(),
            functions: functions.iter().map(|&f| f.into()).collect(),
            count,
        }
    }

    fn spent() -> Spent {
        Spent {
            wall_secs: 0.5,
            cpu_secs: 0.04,
            runs: 2,
            rate: 1000,
        }
    }

    fn samples() -> Samples {
        Samples::from_stacks(vec![
            stack("main", &["main", "blis_cosim::run", "blis_cosim::step"], 6),
            stack("main", &["main", "blis_cosim::run", "blis_cosim::route"], 2),
            stack("main", &["main", "blis_cosim::run", "blis_cosim::step"], 1),
            stack("writer", &["write", "memcpy"], 1),
        ])
    }

    #[test]
    fn equal_stacks_merge_and_fold_one_line_each_in_order() {
        assert_eq!(
            samples().folded(),
            "main;main;blis_cosim::run;blis_cosim::route 2\n\
             main;main;blis_cosim::run;blis_cosim::step 7\n\
             writer;write;memcpy 1\n"
        );
    }

    #[test]
    fn tables_count_the_running_function_and_each_own_function_once_a_stack() {
        let text = samples().render(2, &spent());
        let expected = "10 samples in 2 run(s): 0.040 s of CPU, 0.500 s of wall time; 250 \
            samples a CPU second (asked 1000)\n\
            by thread: main 90.0 %, writer 10.0 %\n\
            self (the function running when sampled):\n  \
            70.0 %  blis_cosim::step\n  \
            20.0 %  blis_cosim::route\n\
            inclusive (the simulator's functions anywhere on the stack):\n  \
            90.0 %  blis_cosim::run\n  \
            70.0 %  blis_cosim::step\n";
        assert_eq!(text, expected);
    }

    #[test]
    fn a_recursive_function_counts_once_a_stack_inclusively() {
        let f = "blis_cosim::f";
        let s = Samples::from_stacks(vec![stack("t", &[f, f, f], 3)]);
        let text = s.render(5, &spent());
        assert!(text.ends_with("anywhere on the stack):\n 100.0 %  blis_cosim::f\n"));
    }

    #[test]
    fn hashes_go_and_other_suffixes_stay() {
        assert_eq!(without_hash("a::b::h0123456789abcdef"), "a::b");
        assert_eq!(without_hash("a::b::hello"), "a::b::hello");
        assert_eq!(without_hash("memmove"), "memmove");
    }

    #[test]
    fn no_samples_prints_the_count_alone() {
        let s = Samples::from_stacks(Vec::new());
        assert_eq!(
            s.render(5, &spent()),
            "0 samples in 2 run(s): 0.040 s of CPU, 0.500 s of wall time; 0 samples a CPU \
             second (asked 1000)\n"
        );
    }
}
