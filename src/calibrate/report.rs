//! The text `calibrate` prints: the fitted values with their bounds and sensitivities, the
//! fit's residual on the runs it was fitted to, and apart from it the error on the runs it
//! was not fitted to.

use super::fit::Found;
use super::{Chosen, Prepared, rms};
use crate::config::KernelSpec;
use crate::metrics::diff_label;
use std::fmt::Write as _;

/// Runs with their Diff% tables before and after the fit.
pub(super) struct Runs<'a> {
    paths: Vec<String>,
    before: &'a [[[f64; 5]; 3]],
    after: &'a [[[f64; 5]; 3]],
}

impl<'a> Runs<'a> {
    pub(super) fn new(
        runs: &[Prepared],
        before: &'a [[[f64; 5]; 3]],
        after: &'a [[[f64; 5]; 3]],
    ) -> Runs<'a> {
        Runs {
            paths: runs.iter().map(|r| r.vllm.display().to_string()).collect(),
            before,
            after,
        }
    }
}

/// Everything the report shows.
pub(super) struct Report<'a> {
    pub start: &'a KernelSpec,
    pub found: &'a Found,
    pub scalars: &'a Chosen,
    pub sensitivities: &'a [f64],
    pub fitted: Runs<'a>,
    pub held_out: Runs<'a>,
}

pub(super) fn render(r: &Report<'_>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Fitted {} constant(s) in {} simulations of {} run(s) (searched from {} starts; the \
         best in {} round(s) of Gauss–Newton steps and a bounded Hooke–Jeeves pattern search):",
        r.scalars.fitted.len(),
        r.found.evaluations + r.found.probes,
        r.fitted.paths.len(),
        r.found.starts,
        r.found.rounds
    );
    for (s, sensitivity) in r.scalars.fitted.iter().zip(r.sensitivities) {
        let value = s.get(&r.found.kernels).unwrap_or(f64::NAN);
        let was = s.get(r.start).unwrap_or(f64::NAN);
        let at_bound = if s.at_bound(value) {
            "  AT ITS BOUND: the runs push past what a real GPU has; look for something the simulation does not model"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "  kernels.{} = {} (bounds {} to {}; was {}; residual {:+.3} points per +1%){at_bound}\n      {}",
            s.key,
            fmt(value, s.decimals),
            fmt(s.lo, s.decimals),
            fmt(s.hi, s.decimals),
            fmt(was, s.decimals),
            sensitivity,
            s.what
        );
    }
    for (s, why) in &r.scalars.left {
        let _ = writeln!(out, "  kernels.{} not fitted: {why}", s.key);
    }
    let _ = writeln!(
        out,
        "\nThe fit's residual, on the runs it was fitted to (RMS of validate's 15 Diff% per \
         run; this measures the fit, not accuracy): {:.2}% before, {:.2}% after.",
        rms(r.fitted.before),
        rms(r.fitted.after)
    );
    tables(&mut out, &r.fitted);
    if r.held_out.paths.is_empty() {
        let _ = writeln!(
            out,
            "\nNo held-out run was given (--held-out): the error on runs NOT used in the fit \
             is unknown. Check the file on runs it was not fitted to before trusting it."
        );
    } else {
        let _ = writeln!(
            out,
            "\nError on runs NOT used in the fit (held out; this is the evidence that the \
             constants transfer): RMS {:.2}% before, {:.2}% after.",
            rms(r.held_out.before),
            rms(r.held_out.after)
        );
        tables(&mut out, &r.held_out);
    }
    out
}

/// Each run's 15 Diff% numbers before and after.
fn tables(out: &mut String, runs: &Runs<'_>) {
    for (i, path) in runs.paths.iter().enumerate() {
        let _ = writeln!(out, "  {path}: Diff% before -> after");
        for m in 0..3 {
            let cells: Vec<String> = (0..5)
                .map(|s| {
                    format!(
                        "{} {:+.1} -> {:+.1}",
                        diff_label(m, s),
                        runs.before[i][m][s],
                        runs.after[i][m][s]
                    )
                })
                .collect();
            let _ = writeln!(out, "    {}", cells.join(", "));
        }
    }
}

fn fmt(value: f64, decimals: i32) -> String {
    format!("{value:.*}", usize::try_from(decimals).unwrap_or(0))
}
