//! Each policy's decision on hand-built observations, the settings' defaults and errors, and
//! the fleet's bounds, windows, cooldown and oscillation count on a hand-driven view.

use blis_cosim::autoscale::{
    AutoscaleConfig, AutoscalePolicy, AutoscaleSettings, Autoscaler, Change, DEFAULT_WARMUP_NS,
    Observation, Policy, ReplicaState, ReplicaTemplate, SaturationParams, ScaleNote, SloParams,
};
use blis_cosim::control::section::Layer;
use blis_cosim::router::{ClusterView, InstanceSnapshot};

/// A ready replica with `waiting` and `running` requests out of `max_num_seqs` 10, and
/// `kv_used` of its 100 KV blocks of 16 tokens.
fn snap(waiting: usize, running: usize, kv_used: usize) -> InstanceSnapshot {
    InstanceSnapshot {
        waiting,
        running,
        max_num_seqs: Some(10),
        kv_blocks_used: kv_used,
        kv_blocks_total: 100,
        block_size: 16,
        prefix_caching: false,
        in_flight: waiting + running,
        recent_ttft_ns: 0,
        recent_tpot_ns: 0,
        cache_hit_rate: 0.0,
        estimated_wait_ns: 0,
        taken_at: 0,
        held_for_decode: 0,
        ..InstanceSnapshot::default()
    }
}

fn observe(ready: &[InstanceSnapshot], starting: u32) -> Observation {
    let mut o = Observation {
        starting,
        ..Observation::default()
    };
    for s in ready {
        o.add(s);
    }
    o.finish();
    o
}

#[test]
fn observation_means_over_ready_replicas() {
    // Utilization: max(KV 20/100, seqs (2+3)/10) = 0.5 and max(0.9, 0.1) = 0.9: mean 0.7.
    let o = observe(&[snap(2, 3, 20), snap(0, 1, 90)], 1);
    assert_eq!((o.ready, o.starting, o.current()), (2, 1, 3));
    assert!((o.utilization - 0.7).abs() < 1e-12);
    assert!((o.queue_per_replica - 1.0).abs() < 1e-12);
    assert_eq!(o.kv_tokens_used, 110.0 * 16.0);
    assert_eq!(o.kv_tokens_per_replica, 1600.0);
}

/// A decode pool's observation: `ready` replicas as given, `starting` more, and `held`
/// hand-offs waiting for a ready replica; replicas of [`snap`]'s size.
fn observe_held(ready: &[InstanceSnapshot], starting: u32, held: f64) -> Observation {
    let mut o = Observation {
        starting,
        held_handoffs: held,
        ..Observation::default()
    };
    o.size(&snap(0, 0, 0));
    for s in ready {
        o.add(s);
    }
    o.finish();
    o
}

#[test]
fn held_hand_offs_count_as_waiting_requests_spread_over_the_ready_replicas() {
    // Ready (2 waiting, 3 running of 10; KV 20/100) and (0, 1; 90/100), 6 held: waiting
    // 2 + 6 = 8, 4 per replica; utilization (max(0.2, 0.5) + max(0.9, 0.1) + 6/10) / 2 = 1.0.
    let o = observe_held(&[snap(2, 3, 20), snap(0, 1, 90)], 0, 6.0);
    assert_eq!(o.waiting, 8.0);
    assert!((o.queue_per_replica - 4.0).abs() < 1e-12);
    assert!((o.utilization - 1.0).abs() < 1e-12);
    // None ready, one starting, 4 held: as if on one replica: 4 waiting, utilization 0.4.
    let o = observe_held(&[], 1, 4.0);
    assert_eq!((o.ready, o.current(), o.waiting), (0, 1, 4.0));
    assert!((o.queue_per_replica - 4.0).abs() < 1e-12);
    assert!((o.utilization - 0.4).abs() < 1e-12);
    assert_eq!(o.kv_tokens_per_replica, 1600.0);
}

#[test]
fn every_policy_scales_a_decode_pool_up_on_held_hand_offs() {
    // No decode replica ready, one starting (the minimum), 4 hand-offs held.
    let held = observe_held(&[], 1, 4.0);
    let none = observe_held(&[], 1, 0.0);
    // queue-depth: 4 per replica > 2: one more; without them 0 < 0.5: one fewer (the
    // bounds then keep the minimum).
    let mut q = Policy::new(AutoscalePolicy::queue_depth(2.0, 0.5));
    assert_eq!((q.desired(&held), q.desired(&none)), (2, 0));
    // threshold: utilization 4/10 = 0.4 > 0.3: one more; 0 < 0.1: one fewer.
    let mut t = Policy::new(AutoscalePolicy::threshold(0.3, 0.1));
    assert_eq!((t.desired(&held), t.desired(&none)), (2, 0));
    // target-utilization 0.2: ceil(1 × 0.4 / 0.2) = 2; with 0: ceil(0) = 0.
    let mut h = Policy::new(AutoscalePolicy::target_utilization(0.2, 0.1));
    assert_eq!((h.desired(&held), h.desired(&none)), (2, 0));
    // saturation: demand 4 × 400 = 1600 tokens against 1600 × 0.8 = 1280 per replica: 1.25
    // replicas, / 0.8 = 1.5625: 2; with nothing held and none ready there is nothing to judge.
    let mut s = Policy::new(AutoscalePolicy::Saturation(SaturationParams {
        kv_cache_threshold: 0.8,
        scale_up_threshold: 0.8,
        scale_down_boundary: 0.4,
        avg_input_tokens: 400.0,
    }));
    assert_eq!((s.desired(&held), s.desired(&none)), (2, 1));
}

#[test]
fn threshold_scales_one_at_a_time_outside_its_band() {
    let mut p = Policy::new(AutoscalePolicy::threshold(0.8, 0.3));
    // (5+4)/10 = 0.9 > 0.8: one more than the 2 ready + 1 starting.
    assert_eq!(p.desired(&observe(&[snap(5, 4, 0), snap(5, 4, 0)], 1)), 4);
    // 0.5: inside the band.
    assert_eq!(p.desired(&observe(&[snap(0, 5, 0), snap(0, 5, 0)], 0)), 2);
    // 0.2 < 0.3: one fewer.
    assert_eq!(p.desired(&observe(&[snap(0, 2, 0), snap(0, 2, 0)], 0)), 1);
}

#[test]
fn target_utilization_is_the_hpa_rule_with_its_tolerance() {
    let mut p = Policy::new(AutoscalePolicy::target_utilization(0.5, 0.1));
    // 3 ready at 0.9: ceil(3 × 0.9 / 0.5) = ceil(5.4) = 6.
    let busy = [snap(0, 9, 0), snap(0, 9, 0), snap(0, 9, 0)];
    assert_eq!(p.desired(&observe(&busy, 0)), 6);
    // 0.53 / 0.5 = 1.06, within 10 %: unchanged (2 ready + 1 starting).
    let near = [snap(0, 5, 53), snap(0, 5, 53)];
    assert_eq!(p.desired(&observe(&near, 1)), 3);
    // 4 ready at 0.1: ceil(4 × 0.2) = 1.
    let idle = [snap(0, 1, 0), snap(0, 1, 0), snap(0, 1, 0), snap(0, 1, 0)];
    assert_eq!(p.desired(&observe(&idle, 0)), 1);
}

#[test]
fn queue_depth_scales_on_waiting_requests_per_replica() {
    let mut p = Policy::new(AutoscalePolicy::queue_depth(4.0, 0.5));
    // (6 + 3) / 2 = 4.5 waiting per replica > 4.
    assert_eq!(p.desired(&observe(&[snap(6, 0, 0), snap(3, 0, 0)], 0)), 3);
    // 1 / 2 = 0.5: not below 0.5.
    assert_eq!(p.desired(&observe(&[snap(1, 0, 0), snap(0, 0, 0)], 0)), 2);
    assert_eq!(p.desired(&observe(&[snap(0, 0, 0), snap(0, 0, 0)], 0)), 1);
}

#[test]
fn saturation_compares_kv_demand_with_supply() {
    let kind = AutoscalePolicy::Saturation(SaturationParams {
        kv_cache_threshold: 0.8,
        scale_up_threshold: 0.8,
        scale_down_boundary: 0.4,
        avg_input_tokens: 320.0,
    });
    let mut p = Policy::new(kind);
    // Supply per replica 1600 × 0.8 = 1280 tokens. Demand: 2 × 80 blocks × 16 = 2560 tokens
    // in use + 4 waiting × 320 = 3840: 3 replicas' worth; / 0.8 = 3.75: 4 wanted.
    let o = observe(&[snap(2, 0, 80), snap(2, 0, 80)], 0);
    assert_eq!(p.desired(&o), 4);
    // Demand 2 × 10 × 16 = 320 tokens = 0.25 replica, below (3 − 1) × 0.4 = 0.8: one fewer.
    let o = observe(&[snap(0, 0, 10), snap(0, 0, 10), snap(0, 0, 0)], 0);
    assert_eq!(p.desired(&o), 2);
    // Demand 2 × 40 × 16 = 1280 = 1 replica: need ceil(1 / 0.8) = 2 = current, and
    // 1 >= (2 − 1) × 0.4: unchanged.
    let o = observe(&[snap(0, 0, 40), snap(0, 0, 40)], 0);
    assert_eq!(p.desired(&o), 2);
}

#[test]
fn oscillator_alternates_whatever_the_load() {
    let mut p = Policy::new(AutoscalePolicy::Oscillator);
    let o = observe(&[snap(0, 0, 0), snap(0, 0, 0)], 0);
    let wants: Vec<u32> = (0..4).map(|_| p.desired(&o)).collect();
    assert_eq!(wants, [3, 1, 3, 1]);
}

#[test]
fn settings_defaults_flags_over_file_and_errors_name_the_key() {
    assert_eq!(AutoscaleSettings::default().build(), Ok(None));
    let file = AutoscaleSettings {
        policy: Layer::named(Some(AutoscalePolicy::threshold(0.8, 0.3))),
        max_replicas: Some(6),
        ..Default::default()
    };
    let flags = AutoscaleSettings {
        min_replicas: Some(2),
        ..Default::default()
    };
    let c = flags.over(file).build().unwrap().unwrap();
    assert_eq!(
        (c.min_replicas, c.initial_replicas, c.max_replicas),
        (2, 2, 6)
    );
    assert_eq!(c.policy, AutoscalePolicy::threshold(0.8, 0.3));
    assert_eq!(
        (c.interval_ns, c.cooldown_ns),
        (10_000_000_000, 60_000_000_000)
    );
    assert_eq!(c.warmup_ns, DEFAULT_WARMUP_NS);
    let bad = |s: AutoscaleSettings| s.build().unwrap_err().key;
    let with = |f: &dyn Fn(&mut AutoscaleSettings)| {
        let mut s = AutoscaleSettings {
            policy: Layer::named(Some(AutoscalePolicy::threshold(0.8, 0.3))),
            ..Default::default()
        };
        f(&mut s);
        s
    };
    assert_eq!(
        bad(with(&|s| s.min_replicas = Some(0))),
        "autoscale.min_replicas"
    );
    let p = |s: &mut AutoscaleSettings| s.policy.set("target_utilisation", 0.5);
    assert_eq!(bad(with(&p)), "autoscale.params.target_utilisation");
    let range = |s: &mut AutoscaleSettings| s.policy.set("scale_down_threshold", 0.9);
    assert_eq!(bad(with(&range)), "autoscale.params.scale_down_threshold");
    // A parameter of another autoscaling policy is ignored (with a warning).
    let other = |s: &mut AutoscaleSettings| s.policy.set("target_utilization", 0.5);
    assert!(with(&other).build().is_ok());
    let minmax = |s: &mut AutoscaleSettings| {
        s.min_replicas = Some(3);
        s.max_replicas = Some(2);
    };
    assert_eq!(bad(with(&minmax)), "autoscale.max_replicas");
    let no_policy = AutoscaleSettings {
        max_replicas: Some(3),
        ..Default::default()
    };
    assert_eq!(bad(no_policy), "autoscale.policy");
}

/// A view where every instance shows the same snapshot.
struct Same(InstanceSnapshot);

impl ClusterView for Same {
    fn snapshot(&self, _: u32) -> InstanceSnapshot {
        self.0
    }
    fn cached_prefix_blocks(&self, _: u32, _: &[u64]) -> usize {
        0
    }
}

fn fleet(kind: AutoscalePolicy, tweak: impl Fn(&mut AutoscaleConfig)) -> Autoscaler {
    let mut config = AutoscaleSettings {
        policy: Layer::named(Some(kind.clone())),
        min_replicas: Some(1),
        max_replicas: Some(3),
        ..Default::default()
    }
    .build()
    .unwrap()
    .unwrap();
    config.policy = kind;
    tweak(&mut config);
    let template = ReplicaTemplate {
        pool: 0,
        gpus: 2,
        price_per_gpu_hour: 3.6,
        load_ns: 5,
    };
    Autoscaler::new(config, &vec![template; 3], vec!["t".into()], 1)
}

const S: Nanos = 1_000_000_000;
use blis_cosim::Nanos;

#[test]
fn bounds_cooldown_and_oscillations_on_a_hand_driven_fleet() {
    // Oscillator, no cooldown: up (1 → 2), down (cancels the starting one), up, ...
    let mut a = fleet(AutoscalePolicy::Oscillator, |c| {
        c.cooldown_ns = 0;
        c.oscillation_window_ns = 15 * S;
    });
    let view = Same(snap(0, 0, 0));
    let mut changes = Vec::new();
    for k in 1..=4 {
        a.tick(k * 10 * S, &view, &mut changes);
    }
    let c = a.counts();
    assert_eq!((c.scale_ups, c.scale_downs, c.oscillations), (2, 2, 3));
    // Threshold at full load with a 25 s cooldown: up at 10 s, held at 20 s and 30 s, up at
    // 40 s, then held at max 3.
    let mut a = fleet(AutoscalePolicy::threshold(0.8, 0.3), |c| {
        c.cooldown_ns = 25 * S;
    });
    let busy = Same(snap(0, 10, 0));
    let mut changes = Vec::new();
    for k in 1..=8 {
        a.tick(k * 10 * S, &busy, &mut changes);
    }
    let c = a.counts();
    assert_eq!((c.scale_ups, c.scale_downs, c.oscillations), (2, 0, 0));
    assert_eq!(c.replicas_added, 2);
    let starts = changes
        .iter()
        .filter(|ch| matches!(ch, Change::Due { .. }))
        .count();
    assert_eq!(starts, 2);
}

#[test]
fn down_window_keeps_the_highest_recent_recommendation() {
    // target-utilization, 3 ready: at 10 s the load wants 3, at 20 s and 30 s it wants 1; a
    // 15 s down window still sees the 3 of 10 s at 20 s, then only the 1s at 30 s.
    let mut a = fleet(AutoscalePolicy::target_utilization(0.5, 0.1), |c| {
        c.initial_replicas = 3;
        c.cooldown_ns = 0;
        c.down_window_ns = 15 * S;
    });
    let mut changes = Vec::new();
    a.tick(10 * S, &Same(snap(0, 5, 0)), &mut changes);
    a.tick(20 * S, &Same(snap(0, 1, 0)), &mut changes);
    assert_eq!(a.counts().scale_downs, 0);
    a.tick(30 * S, &Same(snap(0, 1, 0)), &mut changes);
    assert_eq!(a.counts().scale_downs, 1);
    // Utilization 1/10 on 3 ready: ceil(3 × 0.1 / 0.5) = ceil(0.6) = 1 replica: two drained
    // (one action), highest ids first.
    let drains = [Change::Drain { instance: 2 }, Change::Drain { instance: 1 }];
    assert_eq!(changes, drains);
    assert_eq!(a.state(1), ReplicaState::Draining);
    assert!(a.is_ready(0));
}

#[test]
fn replica_time_and_cost_are_accounted_by_state() {
    let mut a = fleet(AutoscalePolicy::Oscillator, |c| {
        c.cooldown_ns = 0;
        c.provisioning_mean_ns = 2 * S;
        c.warmup_ns = 3 * S;
    });
    let mut changes = Vec::new();
    a.tick(10 * S, &Same(snap(0, 0, 0)), &mut changes);
    let [
        Change::Due {
            instance,
            at,
            epoch,
        },
    ] = changes[..]
    else {
        panic!("one start: {changes:?}");
    };
    assert_eq!((instance, at), (1, 12 * S));
    assert_eq!(a.advance(1, epoch, 12 * S), Some(Some(12 * S + 5)));
    assert_eq!(a.advance(1, epoch, 12 * S + 5), Some(Some(15 * S + 5)));
    assert_eq!(a.advance(1, epoch + 1, 15 * S + 5), None, "a stale epoch");
    assert_eq!(a.advance(1, epoch, 15 * S + 5), Some(None));
    assert!(a.is_ready(1));
    let r = a.report(20 * S);
    let p = &r.pools[0];
    assert_eq!(p.replica_ns[ReplicaState::Pending.index()], 2 * S as u128);
    assert_eq!(p.replica_ns[ReplicaState::Loading.index()], 5);
    assert_eq!(p.replica_ns[ReplicaState::WarmingUp.index()], 3 * S as u128);
    // Replica 0 ready 20 s, replica 1 ready 20 s − 15 s − 5 ns.
    assert_eq!(
        p.replica_ns[ReplicaState::Ready.index()],
        25 * S as u128 - 5
    );
    // Off: replica 1 for 10 s, replica 2 for 20 s.
    assert_eq!(p.replica_ns[ReplicaState::Off.index()], 30 * S as u128);
    // Billed: 30 s of replicas × 2 GPUs × 3.6 per GPU-hour = 0.06.
    assert!((r.billed_replica_seconds() - 30.0).abs() < 1e-9);
    assert!((r.cost() - 0.06).abs() < 1e-12);
}

/// A ready replica as [`snap`] whose recent TTFT and TPOT are `ttft_ms` and `tpot_ms`.
fn timed(ttft_ms: u64, tpot_ms: u64) -> InstanceSnapshot {
    InstanceSnapshot {
        recent_ttft_ns: ttft_ms * 1_000_000,
        recent_tpot_ns: tpot_ms * 1_000_000,
        ..snap(0, 1, 10)
    }
}

fn slo(ttft_ms: f64, tpot_ms: f64) -> AutoscalePolicy {
    AutoscalePolicy::Slo(SloParams {
        ttft_target_ms: ttft_ms,
        tpot_target_ms: tpot_ms,
        ..SloParams::default()
    })
}

#[test]
fn slo_scales_on_recent_latency_against_its_targets_with_a_hysteresis_band() {
    // Targets: TTFT 200 ms, TPOT 50 ms; up above 1 × a target, down below 0.5 × both.
    let mut p = Policy::new(slo(200.0, 50.0));
    // TTFT (300 + 500) / 2 = 400 ms: 2 × its target; TPOT 25 ms: 0.5. Pressure 2:
    // ceil(2 ready × 2 / 1) = 4.
    let o = observe(&[timed(300, 20), timed(500, 30)], 0);
    assert_eq!((o.recent_ttft_ms, o.recent_tpot_ms), (400.0, 25.0));
    assert_eq!(o.slo_pressure(200.0, 50.0), Some(2.0));
    assert_eq!(p.desired(&o), 4);
    // The same with one replica already starting: 4 of 3.
    assert_eq!(p.desired(&observe(&[timed(300, 20), timed(500, 30)], 1)), 4);
    // TPOT over its target: (60 + 90) / 2 = 75 ms = 1.5 × 50; ceil(2 × 1.5) = 3.
    assert_eq!(p.desired(&observe(&[timed(100, 60), timed(100, 90)], 0)), 3);
    // Starting replicas already cover it: ceil(2 × 1.5) = 3 = current, no more.
    assert_eq!(p.desired(&observe(&[timed(100, 60), timed(100, 90)], 1)), 3);
    // Inside the band (TTFT 0.8 × target): hold.
    assert_eq!(p.desired(&observe(&[timed(160, 20), timed(160, 20)], 0)), 2);
    // Below 0.5 × both targets (TTFT 60 / 200 = 0.3, TPOT 10 / 50 = 0.2): one fewer.
    assert_eq!(p.desired(&observe(&[timed(50, 10), timed(70, 10)], 0)), 1);
    // A TTFT below half its target but a TPOT at 0.6 of its own: hold.
    assert_eq!(p.desired(&observe(&[timed(50, 30), timed(70, 30)], 0)), 2);
    // Replicas that have finished nothing do not count; with none measured, hold.
    let fresh = snap(0, 0, 0);
    let o = observe(&[timed(400, 20), fresh], 0);
    assert_eq!((o.recent_ttft_ms, o.ttft_measured), (400.0, 1));
    assert_eq!(p.desired(&o), 4);
    assert_eq!(p.desired(&observe(&[fresh, fresh], 0)), 2);
    // A TTFT-only policy ignores the TPOT.
    let mut ttft_only = Policy::new(slo(200.0, 0.0));
    assert_eq!(
        ttft_only.desired(&observe(&[timed(100, 900), timed(100, 900)], 0)),
        2
    );
}

#[test]
fn slo_scaling_holds_through_its_cooldown_and_traces_the_latencies_it_saw() {
    // TTFT target 200 ms, cooldown 25 s, ticks every 10 s; 1 of 3 replicas ready.
    let mut a = fleet(slo(200.0, 0.0), |c| c.cooldown_ns = 25 * S);
    a.trace_decisions();
    let slow = Same(timed(400, 20));
    let mut changes = Vec::new();
    // 10 s: TTFT 2 × target: ceil(1 × 2) = 2, one started. 20 s, 30 s: cooling down.
    // 40 s: 1 ready + 1 starting = ceil(1 × 2): nothing more.
    for k in 1..=4 {
        a.tick(k * 10 * S, &slow, &mut changes);
    }
    assert_eq!(a.counts().scale_ups, 1);
    // 50 s: TTFT 40 ms (0.2 × target): one fewer, the starting replica cancelled.
    a.tick(50 * S, &Same(timed(40, 20)), &mut changes);
    let c = a.counts();
    assert_eq!((c.scale_ups, c.scale_downs, c.replicas_removed), (1, 1, 1));
    let notes: Vec<ScaleNote> = a.take_notes().collect();
    let actions: Vec<(Nanos, bool, u32, u32, f64)> = notes
        .iter()
        .filter_map(|n| match n {
            ScaleNote::Action(x) => Some((x.t, x.up, x.from, x.to, x.signals.recent_ttft_ms)),
            _ => None,
        })
        .collect();
    assert_eq!(
        actions,
        [(10 * S, true, 1, 2, 400.0), (50 * S, false, 2, 1, 40.0)]
    );
    // Each action is followed by the replica change it made.
    let changes_of = |t: Nanos| {
        notes
            .iter()
            .filter_map(|n| match *n {
                ScaleNote::Replica {
                    t: at,
                    instance,
                    from,
                    to,
                } if at == t => Some((instance, from, to)),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    use ReplicaState::{Off, Pending};
    assert_eq!(changes_of(10 * S), [(1, Off, Pending)]);
    assert_eq!(changes_of(50 * S), [(1, Pending, Off)]);
    assert!(matches!(notes[0], ScaleNote::Action(_)));
    assert!(matches!(notes[2], ScaleNote::Action(_)));
}

#[test]
fn slo_targets_come_from_the_class_targets_and_one_is_required() {
    use blis_cosim::control::bundle::parse_bundle;
    let build = |text: &str| parse_bundle(text).unwrap().build();
    let c =
        build("autoscale:\n  policy: slo\nslo_targets: {critical: 150ms, batch: 2s}\n").unwrap();
    assert_eq!(c.autoscale.unwrap().policy, slo(150.0, 0.0));
    let c = build(
        "autoscale: {type: slo, params: {ttft_target_ms: 300, tpot_target_ms: 40}}\n\
                   slo_targets: {critical: 150ms}\n",
    )
    .unwrap();
    assert_eq!(c.autoscale.unwrap().policy, slo(300.0, 40.0));
    let e = build("autoscale:\n  policy: slo\n").unwrap_err();
    let (key, message) = (e.key, e.problem.to_string());
    assert_eq!(key, "autoscale.ttft_target_ms");
    assert!(message.contains("needs a target"), "{message}");
    let key = build("autoscale:\n  policy: slo\n  tpot_target_ms: -1\n")
        .unwrap_err()
        .key;
    assert_eq!(key, "autoscale.params.tpot_target_ms");
    let e = build("autoscale:\n  policy: slo\n  tpot_target_ms: 40\n  scale_down_ratio: 1.2\n")
        .unwrap_err();
    let (key, message) = (e.key, e.problem.to_string());
    assert_eq!(key, "autoscale.params.scale_down_ratio");
    assert!(message.contains("below the scale-up bound"), "{message}");
}

/// A view of idle replicas where prefill slot 0 holds `held` hand-offs for want of a ready
/// decode replica; it counts the snapshots taken.
struct Counting {
    held: usize,
    taken: std::cell::Cell<u64>,
}

impl ClusterView for Counting {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.taken.set(self.taken.get() + 1);
        let mut s = snap(0, 0, 0);
        if id == 0 {
            s.held_for_decode = self.held;
        }
        s
    }
    fn cached_prefix_blocks(&self, _: u32, _: &[u64]) -> usize {
        0
    }
}

#[test]
fn a_decode_pools_tick_looks_at_the_prefill_replicas_ever_on_not_every_slot() {
    // Issue 36: a P/D run of 2,000 prefill and 2,000 decode slots, one of each ready. The
    // decode pool's demand is the hand-offs held on its prefill slots; the slots never on
    // hold none, so a tick looks at the replicas on, not at 2,000 prefill slots.
    let slots = 2_000u32;
    let mut config = AutoscaleSettings {
        policy: Layer::named(Some(AutoscalePolicy::threshold(0.8, 0.3))),
        min_replicas: Some(1),
        max_replicas: Some(slots),
        ..Default::default()
    }
    .build()
    .unwrap()
    .unwrap();
    (config.cooldown_ns, config.up_window_ns) = (0, 0);
    let template = |pool| ReplicaTemplate {
        pool,
        gpus: 1,
        price_per_gpu_hour: 1.0,
        load_ns: 5,
    };
    let templates: Vec<ReplicaTemplate> = (0..2 * slots).map(|id| template(id / slots)).collect();
    let names = vec!["prefill".into(), "decode".into()];
    let mut a = Autoscaler::new(config, &templates, names, 1);
    assert_eq!((a.pool_of(slots - 1), a.pool_of(slots)), (0, 1));
    let prefills: Vec<u32> = (0..slots).collect();
    a.takes_handoffs_from(1, &prefills[..slots as usize / 2]);
    a.takes_handoffs_from(1, &prefills[slots as usize / 2 - 1..]);
    // 10 held hand-offs on the one ready prefill replica fill a decode replica of 10 seqs:
    // the decode pool scales up.
    let view = Counting {
        held: 10,
        taken: std::cell::Cell::new(0),
    };
    let mut changes = Vec::new();
    a.tick(S, &view, &mut changes);
    let started: Vec<u32> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Due { instance, .. } => Some(*instance),
            Change::Drain { .. } => None,
        })
        .collect();
    assert!(
        !started.is_empty() && started.iter().all(|&id| id >= slots),
        "{started:?}"
    );
    let taken = view.taken.get();
    assert!(taken < 20, "{taken} snapshots in a tick of 2 replicas on");
    // Nothing held: the decode pool's ticks look at the prefill replicas ever on only.
    let idle = Counting {
        held: 0,
        taken: std::cell::Cell::new(0),
    };
    for k in 2..=5 {
        a.tick(k * S, &idle, &mut changes);
    }
    let taken = idle.taken.get();
    assert!(taken < 200, "{taken} snapshots in 4 ticks");
}

/// A request finished at `end_s` seconds with a TTFT of `ttft_ms` and `output` tokens at
/// `tpot_ms` each after the first.
fn finished(
    end_s: f64,
    ttft_ms: u64,
    output: u32,
    tpot_ms: u64,
) -> blis_cosim::metrics::RequestRecord<'static> {
    let end_ns = (end_s * 1e9) as Nanos;
    let first_token_ns = end_ns - u64::from(output - 1) * tpot_ms * 1_000_000;
    blis_cosim::metrics::RequestRecord {
        instance_id: 0,
        request_id: 0,
        model: "m",
        input_toks: 10,
        output_toks: output,
        arrival_ns: first_token_ns - ttft_ms * 1_000_000,
        first_token_ns,
        end_ns,
        queuing_delay_ns: 0,
        itl_ns: blis_cosim::metrics::Itl::default(),
        pd: None,
    }
}

fn windowed(ttft_ms: f64, tpot_ms: f64, window_ms: f64) -> AutoscalePolicy {
    AutoscalePolicy::Slo(SloParams {
        ttft_target_ms: ttft_ms,
        tpot_target_ms: tpot_ms,
        window_ms,
        ..SloParams::default()
    })
}

#[test]
fn slo_with_a_window_scales_on_the_attainment_of_the_requests_finished_in_it() {
    // TTFT target 200 ms, TPOT 40 ms, a 10 s window, 90% aimed at (10% misses allowed);
    // up above 1 × the allowed misses, down below 0.5 ×; no cooldown; 1 of 3 ready.
    let mut a = fleet(windowed(200.0, 40.0, 10_000.0), |c| c.cooldown_ns = 0);
    a.trace_decisions();
    let view = Same(snap(0, 0, 0));
    let mut changes = Vec::new();
    // Nothing finished: no attainment, hold.
    a.tick(5 * S, &view, &mut changes);
    assert_eq!(a.counts().scale_ups, 0);
    // Ten requests in (0, 10 s]: a TTFT miss at 1 s (300 ms), a TPOT miss at 2 s (50 ms a
    // token over 11 tokens), eight met (TTFT 100 ms, TPOT 30 ms; one single-token request,
    // whose TPOT is not judged). Attainment 0.8: misses 0.2 / 0.1 = 2 × the allowed share:
    // ceil(1 ready × 2 / 1) = 2, one replica started.
    a.request_finished(0, &finished(1.0, 300, 11, 30));
    a.request_finished(0, &finished(2.0, 100, 11, 50));
    a.request_finished(0, &finished(3.0, 100, 1, 0));
    for k in 4..=10 {
        a.request_finished(0, &finished(f64::from(k), 100, 11, 30));
    }
    a.tick(10 * S, &view, &mut changes);
    assert_eq!((a.counts().scale_ups, a.counts().replicas_added), (1, 1));
    // At 11 s the miss that finished at 1 s has left the window (11 − 1 ≥ 10 s): 1 miss in
    // 9, attainment 8/9, misses 1/9 / 0.1 = 1.11 × the allowed: ceil(1 ready × 1.11) = 2,
    // which the starting replica covers: hold.
    a.tick(11 * S, &view, &mut changes);
    assert_eq!(a.counts().scale_ups, 1);
    // At 12 s both misses are out: 8 of 8 met, 0 misses: below 0.5 × the allowed: one fewer.
    a.tick(12 * S, &view, &mut changes);
    assert_eq!(a.counts().scale_downs, 1);
    let seen: Vec<(u32, u32)> = a
        .take_notes()
        .filter_map(|n| match n {
            ScaleNote::Action(x) => Some((x.signals.window_finished, x.signals.window_met)),
            _ => None,
        })
        .collect();
    assert_eq!(seen, [(10, 8), (8, 8)]);
}

#[test]
fn slo_window_settings_are_checked_and_exported() {
    use blis_cosim::control::bundle::parse_bundle;
    let build = |text: &str| parse_bundle(text).unwrap().build();
    let c = build(
        "autoscale: {type: slo, params: {ttft_target_ms: 300, window_ms: 30000, \
         target_attainment: 0.95}}\n",
    )
    .unwrap();
    let AutoscalePolicy::Slo(p) = c.autoscale.unwrap().policy else {
        panic!("not slo")
    };
    assert_eq!((p.window_ms, p.target_attainment), (30_000.0, 0.95));
    for bad in [
        "target_attainment: 1",
        "target_attainment: 0",
        "window_ms: -5",
    ] {
        let text = format!("autoscale: {{type: slo, params: {{ttft_target_ms: 300, {bad}}}}}\n");
        let key = build(&text).unwrap_err().key;
        let name = bad.split(':').next().unwrap();
        assert_eq!(key, format!("autoscale.params.{name}"), "{bad}");
    }
}
