//! Each policy's decision on hand-built states.

use blis_cosim::Nanos;
use blis_cosim::choice::Choice;
use blis_cosim::control::admission::{
    Admission, AdmissionConfig, AdmissionPolicy, BucketParams, RateLimitParams, TierShedParams,
    TokenBucket,
};
use blis_cosim::control::bundle::{DurationError, parse_bundle, parse_duration};
use blis_cosim::control::flow::{
    ConcurrencyParams, Detector, DispatchOrder, FlowConfig, FlowQueue, UtilizationParams,
};
use blis_cosim::control::priority::{
    ConstantParams, PriorityInput, PriorityPolicy, TenantPriorityParams,
};
use blis_cosim::control::section::Layer;
use blis_cosim::control::{
    Action, ControlConfig, ControlNote, ControlPlane, Dropped, Load, Outcome, Stage, Ticket,
};
use blis_cosim::router::{ClusterView, InstanceSnapshot};
use blis_cosim::scheduler::{PreemptionOrder, QueueOrder};

/// A cluster seen as fixed snapshots.
struct Fixed(Vec<InstanceSnapshot>);

impl ClusterView for Fixed {
    fn snapshot(&self, id: u32) -> InstanceSnapshot {
        self.0[id as usize]
    }
    fn cached_prefix_blocks(&self, _id: u32, _hashes: &[u64]) -> usize {
        0
    }
}

fn inst(waiting: usize, running: usize, kv_used: usize) -> InstanceSnapshot {
    InstanceSnapshot {
        waiting,
        running,
        max_num_seqs: Some(10),
        kv_blocks_used: kv_used,
        kv_blocks_total: 100,
        block_size: 16,
        prefix_caching: false,
        ..InstanceSnapshot::default()
    }
}

fn ticket(id: u64, priority: i32, tenant: u32, input_toks: u32) -> Ticket {
    Ticket {
        slot: id as u32,
        id,
        arrival_ns: 0,
        input_toks,
        tenant,
        class: 0,
        priority,
        target_ns: None,
    }
}

#[test]
fn token_bucket_refills_continuously_in_exact_arithmetic() {
    // 100 tokens, 1000 tokens/s = 1 token per ms.
    let mut b = TokenBucket::new(100, 1000.0);
    assert!(b.try_take(0, 100));
    assert!(!b.try_take(0, 1));
    // 37.5 ms later: exactly 37.5 tokens.
    assert_eq!(b.level_pico(37_500_000), 37_500_000_000_000);
    assert!(!b.try_take(37_500_000, 38));
    assert!(b.try_take(37_500_000, 37));
    assert_eq!(b.level_pico(37_500_000), 500_000_000_000);
    // Never above capacity.
    assert_eq!(b.level_pico(10_000_000_000), 100 * 1_000_000_000_000);
    // A fractional rate: 0.5 tokens/s refills one token in 2 s.
    let mut slow = TokenBucket::new(1, 0.5);
    assert!(slow.try_take(0, 1));
    assert!(!slow.try_take(1_999_999_999, 1));
    assert!(slow.try_take(2_000_000_000, 1));
}

fn admission(policy: AdmissionPolicy, f: impl FnOnce(&mut AdmissionConfig)) -> Admission {
    let mut c = AdmissionConfig {
        policy,
        ..AdmissionConfig::default()
    };
    f(&mut c);
    Admission::new(c, &["a".to_owned(), "b".to_owned()])
}

#[test]
fn admission_policies_decide_on_hand_built_states() {
    let idle = Fixed(vec![inst(0, 0, 0), inst(0, 0, 0)]);
    let busy = Fixed(vec![inst(3, 2, 0), inst(0, 1, 0)]);
    let tenants = [0u64, 0];
    let load = |v: &'static Fixed| Load::new(v, &[0, 1], 0, 0, &[]);
    let idle: &'static Fixed = Box::leak(Box::new(idle));
    let busy: &'static Fixed = Box::leak(Box::new(busy));
    let _ = tenants;

    let mut always = admission(AdmissionPolicy::AlwaysAdmit, |_| {});
    assert!(
        always
            .decide(0, &ticket(0, -3, 0, 1 << 20), &load(busy))
            .is_ok()
    );

    let mut none = admission(AdmissionPolicy::RejectAll, |_| {});
    let why = none
        .decide(0, &ticket(0, 4, 0, 1), &load(idle))
        .unwrap_err();
    assert_eq!(
        (why.outcome, why.stage, why.policy),
        (Outcome::Rejected, Stage::Admission, "reject-all")
    );

    // Token bucket: 100 tokens; a 60-token prompt passes, the next 60 does not.
    let bucket = |capacity: f64, per_tenant: bool| {
        AdmissionPolicy::TokenBucket(BucketParams {
            token_bucket_capacity: capacity,
            token_bucket_refill_rate: 1000.0,
            per_tenant,
        })
    };
    let mut tb = admission(bucket(100.0, false), |_| {});
    assert!(tb.decide(0, &ticket(0, 3, 0, 60), &load(idle)).is_ok());
    assert!(tb.decide(0, &ticket(1, 3, 0, 60), &load(idle)).is_err());
    // 20 ms later 20 tokens came back: 60 is there.
    assert!(
        tb.decide(20_000_000, &ticket(2, 3, 0, 60), &load(idle))
            .is_ok()
    );

    // Per tenant: tenant b has its own bucket.
    let mut per = admission(bucket(100.0, true), |_| {});
    assert!(per.decide(0, &ticket(0, 3, 0, 100), &load(idle)).is_ok());
    assert!(per.decide(0, &ticket(1, 3, 1, 100), &load(idle)).is_ok());
    assert!(per.decide(0, &ticket(2, 3, 0, 1), &load(idle)).is_err());

    // Rate limit: burst 2 at 1 req/s.
    let limit = RateLimitParams {
        rate_limit_rps: 1.0,
        rate_limit_burst: 2,
        per_tenant: false,
    };
    let mut rl = admission(AdmissionPolicy::RateLimit(limit), |_| {});
    assert!(rl.decide(0, &ticket(0, 3, 0, 9), &load(idle)).is_ok());
    assert!(rl.decide(0, &ticket(1, 3, 0, 9), &load(idle)).is_ok());
    assert!(rl.decide(0, &ticket(2, 3, 0, 9), &load(idle)).is_err());
    assert!(
        rl.decide(1_000_000_000, &ticket(3, 3, 0, 9), &load(idle))
            .is_ok()
    );

    // Tier shed: busiest load 5 > threshold 4 sheds priority < 3 only.
    let tier = TierShedParams {
        tier_shed_threshold: 4,
        tier_shed_min_priority: 3,
    };
    let mut shed = admission(AdmissionPolicy::TierShed(tier), |_| {});
    let why = shed
        .decide(0, &ticket(0, -1, 0, 1), &load(busy))
        .unwrap_err();
    assert_eq!((why.outcome, why.policy), (Outcome::Shed, "tier-shed"));
    assert!(shed.decide(0, &ticket(1, 3, 0, 1), &load(busy)).is_ok());
    assert!(shed.decide(0, &ticket(2, -1, 0, 1), &load(idle)).is_ok());
}

#[test]
fn tenant_quota_sheds_only_low_priority_requests_of_over_quota_tenants() {
    let view = Fixed(vec![inst(0, 0, 0), inst(0, 0, 0)]);
    // Capacity 2 × 10 = 20; tenant a may hold 0.25 × 20 = 5.
    let mut q = admission(AdmissionPolicy::TenantQuota, |c| {
        c.tenant_quotas = vec![("a".into(), 0.25)];
    });
    let under = [4u64, 100];
    let over = [5u64, 100];
    let l = |t: &'static [u64]| Load::new(&view, &[0, 1], 0, 0, t);
    let under: &'static [u64] = Box::leak(Box::new(under));
    let over: &'static [u64] = Box::leak(Box::new(over));
    assert!(q.decide(0, &ticket(0, -2, 0, 1), &l(under)).is_ok());
    let why = q.decide(0, &ticket(1, -2, 0, 1), &l(over)).unwrap_err();
    assert_eq!((why.outcome, why.policy), (Outcome::Shed, "tenant-quota"));
    // Non-sheddable traffic is protected; tenant b has no quota.
    assert!(q.decide(0, &ticket(2, 3, 0, 1), &l(over)).is_ok());
    assert!(q.decide(0, &ticket(3, -2, 1, 1), &l(over)).is_ok());
}

fn input<'a>(
    class: &'a str,
    class_priority: i32,
    own: Option<i32>,
    deadline: Option<u64>,
) -> PriorityInput<'a> {
    PriorityInput {
        class_priority,
        own,
        class,
        tenant: "web",
        deadline_ns: deadline,
    }
}

#[test]
fn priority_policies_on_hand_built_requests() {
    let crit = input("critical", 4, None, None);
    let batch = input("batch", -1, None, None);
    let own = input("batch", -1, Some(9), None);
    assert_eq!(PriorityPolicy::Static.priority(&crit), 4);
    assert_eq!(PriorityPolicy::Static.priority(&batch), -1);
    assert_eq!(PriorityPolicy::Static.priority(&own), 9);
    assert_eq!(
        PriorityPolicy::Constant(ConstantParams { value: 7 }).priority(&crit),
        7
    );
    assert_eq!(PriorityPolicy::InvertedSlo.priority(&crit), -4);
    assert_eq!(PriorityPolicy::InvertedSlo.priority(&batch), 1);
    let slo = <PriorityPolicy as Choice>::parse("slo-based").unwrap();
    assert_eq!(slo.priority(&crit), 100);
    assert_eq!(slo.priority(&batch), 10);
    assert_eq!(slo.priority(&input("standard", 3, None, None)), 50);
    let tp = PriorityPolicy::TenantPriority(TenantPriorityParams {
        tenant_priorities: [("web".to_owned(), 8)].into(),
        value: 1,
    });
    assert_eq!(tp.priority(&crit), 8);
    let mut other = crit;
    other.tenant = "bulk";
    assert_eq!(tp.priority(&other), 1);
    let dl = PriorityPolicy::DeadlineAware;
    let soon = dl.priority(&input("x", 0, None, Some(5_000_000)));
    let late = dl.priority(&input("x", 0, None, Some(90_000_000)));
    let never = dl.priority(&input("x", 0, None, None));
    assert!(soon > late && late > never, "{soon} {late} {never}");
    assert_eq!(
        blis_cosim::control::priority::default_class_priority("sheddable"),
        -2
    );
    assert_eq!(
        blis_cosim::control::priority::default_class_priority("unknown"),
        3
    );
}

fn flow(order: DispatchOrder, f: impl FnOnce(&mut FlowConfig)) -> FlowQueue {
    let mut c = FlowConfig {
        detector: Detector::Never,
        order,
        ..FlowConfig::default()
    };
    f(&mut c);
    FlowQueue::new(c)
}

fn drain(q: &mut FlowQueue) -> Vec<u64> {
    std::iter::from_fn(|| q.pop()).map(|(t, _)| t.id).collect()
}

#[test]
fn flow_control_dispatch_orders() {
    // (id, priority, enqueue time, SLO target)
    let reqs = [
        (0, 1, 0, Some(50)),
        (1, 5, 1, None),
        (2, 1, 2, Some(10)),
        (3, 5, 3, Some(100)),
    ];
    let fill = |q: &mut FlowQueue| {
        for (id, p, t, target) in reqs {
            q.enqueue(t, ticket(id, p, 0, 1), target).unwrap();
        }
    };
    let mut fifo = flow(DispatchOrder::Fifo, |_| {});
    fill(&mut fifo);
    assert_eq!(drain(&mut fifo), [0, 1, 2, 3]);
    let mut prio = flow(DispatchOrder::Priority, |_| {});
    fill(&mut prio);
    assert_eq!(drain(&mut prio), [1, 3, 0, 2]);
    // Deadlines: 0 → 50, 1 → none, 2 → 12, 3 → 103.
    let mut edf = flow(DispatchOrder::SloDeadline, |_| {});
    fill(&mut edf);
    assert_eq!(drain(&mut edf), [2, 0, 3, 1]);
}

#[test]
fn flow_control_depth_limits_reject_when_full() {
    let mut q = flow(DispatchOrder::Fifo, |c| {
        c.per_band_capacity = Some(2);
        c.max_depth = Some(3);
    });
    assert!(q.enqueue(0, ticket(0, 1, 0, 1), None).is_ok());
    assert!(q.enqueue(0, ticket(1, 1, 0, 1), None).is_ok());
    let band_full = q.enqueue(0, ticket(2, 1, 0, 1), None).unwrap_err();
    assert_eq!(
        (band_full.stage, band_full.policy),
        (Stage::FlowControl, "per-band-capacity")
    );
    assert!(q.enqueue(0, ticket(3, 2, 0, 1), None).is_ok());
    let full = q.enqueue(0, ticket(4, 9, 0, 1), None).unwrap_err();
    assert_eq!(full.policy, "max-gateway-queue-depth");
    assert_eq!(q.len(), 3);
}

#[test]
fn flow_control_ttl_expires_requests_that_waited_too_long() {
    let mut q = flow(DispatchOrder::Fifo, |c| c.ttl_ns = Some(100));
    q.enqueue(0, ticket(0, 1, 0, 1), None).unwrap();
    q.enqueue(30, ticket(1, 2, 0, 1), None).unwrap();
    q.enqueue(60, ticket(2, 1, 0, 1), None).unwrap();
    assert_eq!(q.next_expiry(), Some(100));
    let mut gone = Vec::new();
    q.expire(99, |t, _| gone.push(t.id));
    assert!(gone.is_empty());
    q.expire(130, |t, why| {
        assert_eq!(why.outcome, Outcome::Expired);
        gone.push(t.id);
    });
    assert_eq!(gone, [1, 0]);
    assert_eq!(q.next_expiry(), Some(160));
    assert_eq!(drain(&mut q), [2]);
}

#[test]
fn saturation_detectors() {
    let view = Fixed(vec![inst(5, 0, 0), inst(4, 0, 90)]);
    let sat = |d: Detector, in_flight: u64| {
        let q = FlowQueue::new(FlowConfig {
            detector: d,
            ..FlowConfig::default()
        });
        q.saturated(&Load::new(&view, &[0, 1], in_flight, 0, &[]))
    };
    let util = |qd: f64, kv: f64| {
        Detector::Utilization(UtilizationParams {
            queue_depth_threshold: qd,
            kv_cache_util_threshold: kv,
        })
    };
    let concurrency = |n: u64| Detector::Concurrency(ConcurrencyParams { max_concurrency: n });
    // mean(max(5/5, 0), max(4/5, 0.9/0.8)) = mean(1, 1.125) ≥ 1.
    assert!(sat(util(5.0, 0.8), 0));
    // mean(max(5/10, 0), max(0.4, 0.9/0.95)) < 1.
    assert!(!sat(util(10.0, 0.95), 0));
    assert!(sat(concurrency(3), 6));
    assert!(!sat(concurrency(3), 5));
    assert!(!sat(Detector::Never, 1 << 40));
}

#[test]
fn control_plane_latencies_delay_the_stages() {
    let config = ControlConfig {
        admission_latency_ns: 10,
        routing_latency_ns: 200,
        ..ControlConfig::default()
    };
    let mut cp = ControlPlane::new(config, None);
    let view = Fixed(vec![inst(0, 0, 0)]);
    let request = blis_cosim::workload::Request {
        id: 0,
        line: 1,
        model: None,
        arrival_ns: 1000,
        input_toks: 5,
        output_toks: 1,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    };
    cp.arrive(1000, 0, &request);
    let mut out = Vec::new();
    cp.poll(1000, &view, &[0], &mut out);
    assert!(out.is_empty());
    assert_eq!(cp.next_wake(), Some(1010));
    cp.poll(1010, &view, &[0], &mut out);
    assert!(out.is_empty());
    assert_eq!(cp.next_wake(), Some(1210));
    cp.poll(1210, &view, &[0], &mut out);
    assert_eq!(
        out,
        [Action::Route {
            slot: 0,
            priority: 3
        }]
    );
    assert_eq!(cp.held(), 0);
}

#[test]
fn durations_need_units() {
    assert_eq!(parse_duration("200us"), Ok(200_000));
    assert_eq!(parse_duration("1.5ms"), Ok(1_500_000));
    assert_eq!(parse_duration("2s"), Ok(2_000_000_000));
    assert_eq!(parse_duration("7ns"), Ok(7));
    let text = |t: &str| t.to_owned();
    assert_eq!(
        parse_duration("200"),
        Err(DurationError::NoUnit { text: text("200") })
    );
    assert_eq!(
        parse_duration("3h"),
        Err(DurationError::NotUnit { unit: text("h") })
    );
    assert_eq!(
        parse_duration("x5ms").unwrap_err().to_string(),
        "`x5ms` is not a number followed by a unit"
    );
    assert_eq!(
        parse_duration("2000000000s"),
        Err(DurationError::BeyondTime {
            text: text("2000000000s")
        })
    );
}

#[test]
fn a_blis_policy_bundle_reads_unchanged_and_unknown_keys_are_named() {
    let blis = "admission:\n  policy: \"token-bucket\"\n  token_bucket_capacity: 5000.0\n  \
                token_bucket_refill_rate: 250.0\nrouting:\n  policy: \"least-loaded\"\n\
                priority:\n  policy: \"constant\"\nscheduler: \"priority-fcfs\"\n\
                preemption:\n  policy: \"priority\"\n";
    let s = parse_bundle(blis).unwrap();
    let c = s.build().unwrap();
    assert_eq!(
        c.admission.policy,
        AdmissionPolicy::TokenBucket(BucketParams {
            token_bucket_capacity: 5000.0,
            token_bucket_refill_rate: 250.0,
            per_tenant: false,
        })
    );
    assert_eq!(c.scheduler, QueueOrder::PriorityFcfs);
    assert_eq!(c.preemption, PreemptionOrder::Priority);
    assert_eq!(
        c.priority,
        PriorityPolicy::Constant(ConstantParams { value: 0 })
    );
    let e = parse_bundle("admission:\n  polcy: always-admit\n").unwrap_err();
    assert!(e.key.contains("admission"), "{e}");
    assert!(e.problem.to_string().contains("polcy"), "{e}");
    let e = parse_bundle("node_pools: []\n").unwrap_err();
    assert_eq!((e.line, e.key.as_str()), (Some(1), "node_pools"));
    let e = parse_bundle("flow_control:\n  dispatch_order: lifo\n").unwrap_err();
    assert_eq!(
        (e.line, e.key.as_str()),
        (Some(2), "flow_control.dispatch_order")
    );
}

#[test]
fn flags_override_the_bundle() {
    let file = parse_bundle("admission:\n  policy: reject-all\nscheduler: sjf\n").unwrap();
    let flags = blis_cosim::control::bundle::Settings {
        admission: Layer::named(Some(AdmissionPolicy::AlwaysAdmit)),
        ..Default::default()
    };
    let c = flags.over(file).build().unwrap();
    assert_eq!(c.admission.policy, AdmissionPolicy::AlwaysAdmit);
    assert_eq!(c.scheduler, QueueOrder::Sjf);
}

/// A request of `id` arriving at 0.
fn arrival(id: u64) -> blis_cosim::workload::Request {
    blis_cosim::workload::Request {
        id,
        line: id + 1,
        model: None,
        arrival_ns: 0,
        input_toks: 5,
        output_toks: 1,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

#[test]
fn a_refused_request_is_delayed_and_retried_until_its_delays_run_out() {
    // A 1-token bucket refilled at 10 requests/s; delays of 60 ms, at most 3.
    let bundle = "admission:\n  policy: rate-limit\n  rate_limit_rps: 10\n  rate_limit_burst: 1\n  \
                  delay: 60ms\n  max_delays: 3\n";
    let config = parse_bundle(bundle).unwrap().build().unwrap();
    let delay = config.admission.delay.unwrap();
    assert_eq!((delay.backoff_ns, delay.max_delays), (60_000_000, 3));
    let mut cp = ControlPlane::new(config, None);
    cp.trace_decisions();
    let view = Fixed(vec![inst(0, 0, 0)]);
    for id in 0..3 {
        cp.arrive(0, id as u32, &arrival(id));
    }
    let mut out = Vec::new();
    let ms = 1_000_000;
    // 0: the first takes the token; the others are delayed to 60 ms.
    cp.poll(0, &view, &[0], &mut out);
    let route = |slot| Action::Route { slot, priority: 3 };
    assert_eq!(out, [route(0)]);
    assert_eq!((cp.held(), cp.next_wake()), (2, Some(60 * ms)));
    let delays = |cp: &mut ControlPlane| -> Vec<(u64, u32, Nanos)> {
        cp.take_notes()
            .filter_map(|n| match n {
                ControlNote::Delayed {
                    request,
                    attempt,
                    retry_at,
                    why,
                    ..
                } => {
                    assert_eq!(why, Dropped::rejected(Stage::Admission, "rate-limit"));
                    Some((request, attempt, retry_at))
                }
                _ => None,
            })
            .collect()
    };
    assert_eq!(delays(&mut cp), [(1, 1, 60 * ms), (2, 1, 60 * ms)]);
    // 60 ms: 0.6 tokens; both delayed again.
    out.clear();
    cp.poll(60 * ms, &view, &[0], &mut out);
    assert!(out.is_empty());
    assert_eq!(delays(&mut cp), [(1, 2, 120 * ms), (2, 2, 120 * ms)]);
    // 120 ms: a full token (capped at 1): the second is admitted, the third delayed.
    cp.poll(120 * ms, &view, &[0], &mut out);
    assert_eq!(out, [route(1)]);
    assert_eq!(delays(&mut cp), [(2, 3, 180 * ms)]);
    // 180 ms: 0.6 tokens and no delay left: the refusal stands.
    out.clear();
    cp.poll(180 * ms, &view, &[0], &mut out);
    let why = Dropped::rejected(Stage::Admission, "rate-limit");
    assert_eq!(out, [Action::Drop { slot: 2, why }]);
    assert_eq!((cp.held(), cp.next_wake()), (0, None));
}

#[test]
fn a_retry_goes_before_an_arrival_due_at_the_same_time_and_can_be_withdrawn() {
    let bundle = "admission:\n  policy: rate-limit\n  rate_limit_rps: 10\n  rate_limit_burst: 1\n  \
                  delay: 100ms\n";
    let config = parse_bundle(bundle).unwrap().build().unwrap();
    assert_eq!(config.admission.delay.map(|d| d.max_delays), Some(3));
    let mut cp = ControlPlane::new(config, None);
    let view = Fixed(vec![inst(0, 0, 0)]);
    let mut out = Vec::new();
    cp.arrive(0, 0, &arrival(0));
    cp.arrive(0, 1, &arrival(1));
    cp.poll(0, &view, &[0], &mut out);
    // At 100 ms a new request arrives as request 1's retry falls due: one token, the retry
    // takes it.
    let ms = 1_000_000;
    cp.arrive(100 * ms, 2, &arrival(2));
    out.clear();
    cp.poll(100 * ms, &view, &[0], &mut out);
    assert_eq!(
        out,
        [Action::Route {
            slot: 1,
            priority: 3
        }]
    );
    // Request 2, delayed in turn, is taken back (its timeout) from the delayed requests.
    assert_eq!(cp.withdraw(2), Some(Stage::Admission));
    assert_eq!((cp.held(), cp.next_wake()), (0, None));
}

#[test]
fn admission_delays_are_checked_and_named() {
    let bad = |text: &str| {
        let e = parse_bundle(text).unwrap().build().unwrap_err();
        (e.key, e.problem.to_string())
    };
    let (key, message) = bad("admission:\n  policy: rate-limit\n  delay: 0ms\n");
    assert_eq!(key, "admission.delay");
    assert!(message.contains("positive"), "{message}");
    let (key, message) = bad("admission:\n  policy: rate-limit\n  delay: 1ms\n  max_delays: 0\n");
    assert_eq!(
        (key.as_str(), message.as_str()),
        ("admission.max_delays", "must be in [1, 1000], got 0")
    );
    let (key, message) = bad("admission:\n  policy: rate-limit\n  max_delays: 2\n");
    assert_eq!(key, "admission.max_delays");
    assert!(message.contains("admission.delay"), "{message}");
}
