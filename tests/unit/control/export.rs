use blis_cosim::control::ControlConfig;
use blis_cosim::control::bundle::parse_bundle;
use blis_cosim::control::export::bundle_text;
use blis_cosim::router::RoutingPolicy;

/// A bundle setting every section, read, exported, read again: the same settings.
#[test]
fn an_exported_bundle_reads_back_to_the_same_control_plane() {
    let full = "\
admission: {policy: token-bucket, token_bucket_capacity: 4000, token_bucket_refill_rate: 250.5,
  per_tenant: true, tenant_quota_min_priority: 2, slo_priorities: {batch: 0}, latency: 30us}
tenant_budgets: {web: 0.25, bulk: 0.5}
routing: {policy: weighted, scorers: [{name: queue-depth, weight: 2}, {name: kv-utilization, weight: 1}], latency: 150us}
priority: {type: slo-based, params: {realtime_score: 9}}
scheduler: priority-fcfs
preemption: {policy: priority}
slo_targets: {critical: 200ms, standard: 2s}
flow_control: {saturation_detector: concurrency, max_concurrency: 7, dispatch_order: slo-deadline,
  per_band_capacity: 5, max_gateway_queue_depth: 40, request_ttl: 1.5s}
autoscale: {policy: queue-depth, params: {scale_up_queue_depth: 3}, interval: 2s, max_replicas: 5,
  cooldown: 7s, provisioning_delay: {mean: 3s, stddev: 1s}, load_bandwidth_gbps: {H100-SXM: 4, default: 2.5},
  cost_per_gpu_hour: 3.25, warmup: 1s, drain: redirect}
";
    let settings = parse_bundle(full).unwrap();
    let routing = settings.routing.resolve("routing").unwrap();
    let control = settings.build().unwrap();
    let text = bundle_text(&routing, &control);
    let again = parse_bundle(&text).unwrap_or_else(|e| panic!("{e:?}\n{text}"));
    assert_eq!(again.routing.resolve("routing").unwrap(), routing, "{text}");
    assert_eq!(again.build().unwrap(), control, "{text}");
    // The defaults too: a run without any setting exports a bundle of the defaults.
    let plain = bundle_text(&RoutingPolicy::default(), &ControlConfig::default());
    let back = parse_bundle(&plain).unwrap();
    assert_eq!(
        back.routing.resolve("routing").unwrap(),
        RoutingPolicy::default()
    );
    assert_eq!(back.build().unwrap(), ControlConfig::default(), "{plain}");
}
