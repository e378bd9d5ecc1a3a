//! An autoscaling configuration for hand-timed engine tests: 1 ms ticks, no provisioning
//! delay, warm-up, cooldown or oscillation window unless a test sets them.

use blis_cosim::Nanos;
use blis_cosim::autoscale::{AutoscaleConfig, AutoscalePolicy, AutoscaleSettings};
use blis_cosim::choice::Choice;
use blis_cosim::control::section::Layer;

const MS: Nanos = 1_000_000;

/// `policy` with 1 ms ticks and no delays, then whatever `tweak` sets.
pub fn config(policy: &str, tweak: impl Fn(&mut AutoscaleConfig)) -> AutoscaleConfig {
    let mut c = AutoscaleSettings {
        policy: Layer::named(Some(AutoscalePolicy::parse(policy).unwrap())),
        ..Default::default()
    }
    .build()
    .unwrap()
    .unwrap();
    c.interval_ns = MS;
    c.provisioning_mean_ns = 0;
    c.warmup_ns = 0;
    c.cooldown_ns = 0;
    c.oscillation_window_ns = 0;
    tweak(&mut c);
    c
}
