//! A time series from the steps each instance tallied and the requests the run finished.

use blis_cosim::metrics::{MAX_SERIES_ROWS, StepSeries, TimeSeries};
use blis_cosim::scheduler::StepTokens;

fn tokens(prompt: u64, generated: u64) -> StepTokens {
    StepTokens { prompt, generated }
}

/// The rows of `series` as written, without the header.
fn rows(series: &TimeSeries) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ts.csv");
    series.write(&path, None).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    text.lines().skip(1).map(str::to_owned).collect()
}

#[test]
fn tallied_steps_count_in_the_interval_their_end_closes_and_states_carry_over() {
    // Intervals of 1 s; instance 0 steps end at 0.5 s, 1 s (on the boundary: the first
    // interval's) and 3.2 s; instance 1's at 1.5 s; a request ends on instance 1 at 2.5 s.
    const S: u64 = 1_000_000_000;
    let mut first = StepSeries::new(S, 2);
    first.step(S / 2, tokens(100, 2), (2, 1), (10, 100));
    first.step(S, tokens(0, 3), (3, 0), (12, 100));
    first.step(3 * S + S / 5, tokens(0, 1), (1, 0), (5, 100));
    let mut second = StepSeries::new(S, 2);
    second.step(S + S / 2, tokens(50, 0), (1, 4), (25, 50));
    let mut series = TimeSeries::new(S, 2);
    series.request_finished(1, 2 * S + S / 2).unwrap();
    series.add_steps(&[first, second]).unwrap();
    // t, instance, prompt and generated tokens a second, running, waiting, KV %, finished,
    // steps: an interval without a step repeats the state of the last one before it.
    assert_eq!(
        rows(&series),
        [
            "1,0,100,5,3,0,12.00,0,2",
            "1,1,0,0,0,0,0.00,0,0",
            "2,0,0,0,3,0,12.00,0,0",
            "2,1,50,0,1,4,50.00,0,1",
            "3,0,0,0,3,0,12.00,0,0",
            "3,1,0,0,1,4,50.00,1,0",
            "4,0,0,1,1,0,5.00,0,1",
            "4,1,0,0,1,4,50.00,0,0",
        ]
    );
}

#[test]
fn a_series_with_no_steps_tallied_has_only_its_finished_requests() {
    const S: u64 = 1_000_000_000;
    let mut series = TimeSeries::new(S, 1);
    series.request_finished(0, 2 * S + 1).unwrap();
    series.add_steps(&[StepSeries::new(S, 1)]).unwrap();
    assert_eq!(
        rows(&series),
        [
            "1,0,0,0,0,0,0.00,0,0",
            "2,0,0,0,0,0,0.00,0,0",
            "3,0,0,0,0,0,0.00,1,0"
        ]
    );
}

#[test]
fn a_series_past_the_rows_it_may_hold_is_refused_naming_the_flag() {
    // One microsecond a row, 16 instances: a sixteenth of the rows each.
    const US: u64 = 1_000;
    let intervals = MAX_SERIES_ROWS / 16;
    let mut series = TimeSeries::new(US, 16);
    let last = intervals as u64 * US;
    series.request_finished(15, last).unwrap();
    let err = series
        .request_finished(3, last + 1)
        .unwrap_err()
        .to_string();
    let reached = (last + 1) as f64 / 1e9;
    assert!(
        err.starts_with(&format!(
            "--timeseries-interval 0.000001 s: the run reached t = {reached} s of simulated \
             time, more than the {intervals} intervals a series of 16 instances may hold"
        )) && err.ends_with("raise the interval to at least 1.000e-6 s"),
        "{err}"
    );
    // A tally stops growing there, and the series refuses it.
    let mut tally = StepSeries::new(US, 16);
    tally.step(last, tokens(1, 0), (1, 0), (1, 10));
    tally.step(last + 1, tokens(1, 0), (1, 0), (1, 10));
    assert_eq!(tally.intervals_held(), intervals);
    let mut series = TimeSeries::new(US, 16);
    let err = series.add_steps(&[tally]).unwrap_err().to_string();
    assert!(
        err.contains(&format!("the run reached t = {reached} s")),
        "{err}"
    );
}
