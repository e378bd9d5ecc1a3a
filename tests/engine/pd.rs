//! Prefill/decode disaggregation in the engine: hand-computed timings of hand-offs, transfers
//! and decode admission with a deterministic test backend; transfer contention; prefill-side
//! blocks held until the transfer ends; decode-side admission limits; conservation and
//! determinism on random workloads.

use crate::cluster_fixture as fixture;

use blis_cosim::Nanos;
use blis_cosim::choice::Choice;
use blis_cosim::config::{InstanceRole, Link};
use blis_cosim::engine::{
    Disaggregation, InstanceSetup, Observer, PdFlow, StepEvent, TransferEvent,
};
use blis_cosim::engine::{Run, Services, simulate};
use blis_cosim::latency::LatencyBackend;
use blis_cosim::metrics::{PdRecord, RequestRecord};
use blis_cosim::router::{Router, RoutingPolicy};
use blis_cosim::workload::Request;
use fixture::{LinearBackend, request, setup, workload};

use InstanceRole::{Colocated, Decode, Prefill};

/// One finished request with everything the CSV would say.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Done {
    instance: u32,
    id: u64,
    first_token: Nanos,
    end: Nanos,
    queuing_delay: Nanos,
    itl: Vec<Nanos>,
    pd: Option<PdRecord>,
}

#[derive(Debug, Default)]
struct Rec {
    /// Preemptions per instance.
    preemptions: Vec<u64>,
    /// Dummy steps per instance (idle members of DP groups).
    dummy_steps: Vec<u64>,
    done: Vec<Done>,
    transfers: Vec<TransferEvent>,
    steps: Vec<Step>,
}

/// A finished step: instance, start, end, batch as (new tokens, context) pairs.
type Step = (u32, Nanos, Nanos, Vec<(u32, u32)>);

impl Observer for Rec {
    fn request_finished(&mut self, r: &RequestRecord<'_>) -> anyhow::Result<()> {
        assert_eq!(r.itl_ns.len() as u32, r.output_toks - 1);
        self.done.push(Done {
            instance: r.instance_id,
            id: r.request_id,
            first_token: r.first_token_ns,
            end: r.end_ns,
            queuing_delay: r.queuing_delay_ns,
            itl: r.itl_ns.to_vec(),
            pd: r.pd,
        });
        Ok(())
    }

    fn step_finished(
        &mut self,
        s: &StepEvent<'_>,
        _: &mut dyn LatencyBackend,
    ) -> anyhow::Result<()> {
        let items = s.batch.items.iter();
        let batch = items.map(|i| (i.new_tokens, i.context_tokens)).collect();
        self.steps.push((s.instance, s.start_ns, s.end_ns, batch));
        Ok(())
    }

    fn kv_transfer(&mut self, event: &TransferEvent) -> anyhow::Result<()> {
        self.transfers.push(*event);
        Ok(())
    }
}

/// A link of exactly one byte per ns plus `latency` ns.
fn link(latency: f64) -> Link {
    Link {
        bandwidth_gbps: 1e9 / f64::from(1u32 << 30),
        latency_ns: latency,
    }
}

/// Runs `requests` on instances with `roles` and `setups`, priced 10 ns per token (1,000 ns per
/// step, 100 ns per sequence), 100 KV bytes per token, links of 1,000 ns + 1 byte/ns, in
/// LLMServingSim's P/D flow.
fn run(
    requests: &[Request],
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    policy: RoutingPolicy,
) -> Rec {
    run_in(PdFlow::LlmServingSim, requests, setups, roles, policy)
}

/// [`run`] in P/D flow `flow`.
fn run_in(
    flow: PdFlow,
    requests: &[Request],
    setups: &[InstanceSetup],
    roles: &[InstanceRole],
    policy: RoutingPolicy,
) -> Rec {
    let mut backends: Vec<LinearBackend> = setups
        .iter()
        .map(|_| LinearBackend { per_token: 10 })
        .collect();
    let mut dyns: Vec<&mut dyn LatencyBackend> = backends
        .iter_mut()
        .map(|b| b as &mut dyn LatencyBackend)
        .collect();
    let pd = Disaggregation::new(
        roles.to_vec(),
        vec![100; roles.len()],
        Router::with_stream(policy.clone(), 7, b"decode"),
        |_, _| link(1_000.0),
    )
    .with_flow(flow);
    let mut rec = Rec::default();
    let mut router = Router::new(policy, 7);
    let out = simulate(
        Run::new(requests, setups).disaggregated(pd),
        Services::new(&mut dyns, &mut router, &mut rec),
    )
    .unwrap();
    rec.preemptions = out.instances.iter().map(|i| i.stats.preemptions).collect();
    rec.dummy_steps = out.instances.iter().map(|i| i.dummy_steps).collect();
    rec
}

fn find(rec: &Rec, id: u64) -> &Done {
    rec.done.iter().find(|d| d.id == id).unwrap()
}

/// The KV transfers of the two-request case by hand, the same in both flows: A's KV (32 × 100
/// bytes: 1,000 + 3,200 ns) on the prefill instance's link from 1,680, B's (1,600 bytes) behind
/// it; the prefill instance holds each prompt's blocks (16 tokens each: A 2, B 1) until its
/// own transfer has ended.
fn assert_transfers_of_the_two_requests(rec: &Rec) {
    let t: Vec<_> = rec
        .transfers
        .iter()
        .map(|t| (t.request_id, t.arrived, t.start_ns, t.end_ns, t.bytes))
        .collect();
    assert_eq!(
        t,
        [
            (0, false, 1_680, 5_880, 3_200),
            (0, true, 1_680, 5_880, 3_200),
            (1, false, 5_880, 8_480, 1_600),
            (1, true, 5_880, 8_480, 1_600),
        ]
    );
    let used: Vec<_> = rec
        .transfers
        .iter()
        .map(|t| (t.request_blocks, t.sender_blocks_used))
        .collect();
    assert_eq!(used, [(2, 3), (2, 1), (1, 1), (1, 0)]);
}

#[test]
fn two_requests_by_hand_ttft_includes_the_transfer_and_transfers_serialise() {
    // A (32-token prompt, 3 tokens) and B (16-token prompt, 2 tokens) arrive at 0 on a
    // prefill instance (0) in front of a decode instance (1).
    let requests = [
        request(0, 0, 32, 3, Vec::new()),
        request(1, 0, 16, 2, Vec::new()),
    ];
    let rec = run(
        &requests,
        &[setup("m", 100), setup("m", 100)],
        &[Prefill, Decode],
        RoutingPolicy::RoundRobin,
    );
    // Prefill step at 0: 48 tokens, 2 sequences: 1,000 + 480 + 200 = 1,680 ns.
    assert_eq!(rec.steps[0], (0, 0, 1_680, vec![(32, 0), (16, 0)]));
    assert_transfers_of_the_two_requests(&rec);
    // Decode: A arrives at 5,880 (its first token); its first decode step has the prompt as
    // context: 1,000 + 10 + 100 = 1,110 ns; two steps for its two remaining tokens.
    assert_eq!(rec.steps[1], (1, 5_880, 6_990, vec![(1, 32)]));
    assert_eq!(rec.steps[2], (1, 6_990, 8_100, vec![(1, 33)]));
    assert_eq!(rec.steps[3], (1, 8_480, 9_590, vec![(1, 16)]));
    let a = find(&rec, 0);
    let pd = a.pd.unwrap();
    assert_eq!((a.instance, a.first_token, a.end), (1, 5_880, 8_100));
    assert_eq!(a.itl, [1_110, 1_110]);
    assert_eq!(
        (pd.prefill_instance, pd.prefill_end_ns, pd.kv_transfer_ns()),
        (0, 1_680, 4_200)
    );
    assert_eq!(
        (pd.decode_queue_ns(), pd.link_wait_ns(), pd.kv_bytes),
        (0, 0, 3_200)
    );
    let b = find(&rec, 1);
    let pd = b.pd.unwrap();
    assert_eq!(
        (b.instance, b.first_token, b.end, b.itl.clone()),
        (1, 8_480, 9_590, vec![1_110])
    );
    assert_eq!(
        (pd.link_wait_ns(), pd.wire_ns(), pd.kv_transfer_ns()),
        (4_200, 2_600, 6_800)
    );
    assert_eq!(
        b.queuing_delay, 0,
        "scheduled on arrival at the prefill instance"
    );
}

#[test]
fn vllm_flow_by_hand_the_decode_instance_pulls_the_kv_and_its_step_gives_the_first_token() {
    the_two_requests_by_hand_in(PdFlow::Vllm);
}

#[test]
fn lmcache_flow_by_hand_the_kv_comes_with_the_request_and_the_first_step_gives_the_first_token() {
    // LMCache's flow: the prefill instance sends each KV at its hand-off (1,680), A's then
    // B's on its link, and answers the proxy once it is sent, so A reaches the decode
    // instance at 5,880 and B at 8,480, each with its KV there; the first step that admits
    // each loads it and computes its last prompt token. The decode instance is idle when
    // vLLM's proxy sends A and B, so vLLM's flow starts both pulls at once: the same steps.
    the_two_requests_by_hand_in(PdFlow::Lmcache);
}

/// The case above in vLLM's flow (or LMCache's, which gives the same steps here): A (32-token
/// prompt, 3 tokens) and B (16-token prompt, 2 tokens) arrive at 0 on a prefill instance (0)
/// in front of a decode instance (1).
fn the_two_requests_by_hand_in(flow: PdFlow) {
    let requests = [
        request(0, 0, 32, 3, Vec::new()),
        request(1, 0, 16, 2, Vec::new()),
    ];
    let rec = run_in(
        flow,
        &requests,
        &[setup("m", 100), setup("m", 100)],
        &[Prefill, Decode],
        RoutingPolicy::RoundRobin,
    );
    // Prefill step at 0 (max_tokens = 1 there): 1,000 + 480 + 200 = 1,680 ns.
    assert_eq!(rec.steps[0], (0, 0, 1_680, vec![(32, 0), (16, 0)]));
    // At 1,680 the proxy sends both to the decode instance; the step it forms then reaches
    // both at the head of its waiting queue and starts their pulls (no token to compute yet):
    // A's KV on the prefill instance's link 1,680 → 1,680 + 1,000 + 3,200; B's behind it.
    assert_transfers_of_the_two_requests(&rec);
    // A's KV landed at 5,880: the decode step then computes its last prompt token (31 tokens
    // of context): 1,000 + 10 + 100 = 1,110 ns; its end is A's first token. Two decode steps
    // follow. B's KV lands at 8,480, inside A's last step; B's first token is the step after.
    let decode: Vec<_> = rec.steps.iter().filter(|s| s.0 == 1).cloned().collect();
    assert_eq!(
        decode,
        [
            (1, 5_880, 6_990, vec![(1, 31)]),
            (1, 6_990, 8_100, vec![(1, 32)]),
            (1, 8_100, 9_210, vec![(1, 33)]),
            (1, 9_210, 10_320, vec![(1, 15)]),
            (1, 10_320, 11_430, vec![(1, 16)]),
        ]
    );
    let a = find(&rec, 0);
    let pd = a.pd.unwrap();
    assert_eq!((a.instance, a.first_token, a.end), (1, 6_990, 9_210));
    assert_eq!(a.itl, [1_110, 1_110]);
    assert_eq!(
        (pd.prefill_instance, pd.prefill_end_ns, pd.transfer_start_ns),
        (0, 1_680, 1_680)
    );
    assert_eq!(
        (pd.transfer_end_ns, pd.decode_admitted_ns, pd.kv_bytes),
        (5_880, 5_880, 3_200)
    );
    let b = find(&rec, 1);
    let pd = b.pd.unwrap();
    assert_eq!(
        (b.instance, b.first_token, b.end, b.itl.clone()),
        (1, 10_320, 11_430, vec![1_110])
    );
    assert_eq!(
        (pd.link_wait_ns(), pd.wire_ns(), pd.decode_queue_ns()),
        (4_200, 2_600, 730)
    );
    assert_eq!((a.queuing_delay, b.queuing_delay), (0, 0));
}

#[test]
fn lmcache_flow_sends_at_the_hand_off_where_vllms_waits_for_a_decode_step() {
    // The decode instance is busy with C (16-token prompt, 8 tokens, prefilled first) when A
    // (16-token prompt, 2 tokens) is handed off. vLLM's flow starts A's pull only with the
    // decode instance's next step; LMCache's sends A's KV at the hand-off, so A's KV lands,
    // and A is admitted, no later, and its first token comes sooner.
    let requests = [
        request(0, 0, 16, 8, Vec::new()),
        request(1, 3_000, 16, 2, Vec::new()),
    ];
    let setups = [setup("m", 100), setup("m", 100)];
    let of = |flow| {
        let rec = run_in(
            flow,
            &requests,
            &setups,
            &[Prefill, Decode],
            RoutingPolicy::Load,
        );
        find(&rec, 1).clone()
    };
    let (lmcache, vllm) = (of(PdFlow::Lmcache), of(PdFlow::Vllm));
    let (l, v) = (lmcache.pd.unwrap(), vllm.pd.unwrap());
    assert_eq!(
        l.transfer_start_ns, l.prefill_end_ns,
        "sent at the hand-off"
    );
    assert!(
        v.transfer_start_ns > v.prefill_end_ns,
        "pulled at a decode step's start"
    );
    assert!(l.transfer_end_ns < v.transfer_end_ns);
    assert!(l.decode_admitted_ns <= v.decode_admitted_ns);
    assert!(lmcache.first_token < vllm.first_token);
}

#[test]
fn vllm_flow_pulls_wait_for_free_blocks_on_the_decode_instance() {
    // Three blocks on the decode instance: A's pull (2 blocks of its 32-token prompt) starts
    // at once; B's (2 more) waits at the head of the queue until A has finished and freed
    // its blocks, so B's KV stays on the prefill instance meanwhile.
    let requests = [
        request(0, 0, 32, 3, Vec::new()),
        request(1, 0, 32, 2, Vec::new()),
    ];
    let rec = run_in(
        PdFlow::Vllm,
        &requests,
        &[setup("m", 100), setup("m", 3)],
        &[Prefill, Decode],
        RoutingPolicy::RoundRobin,
    );
    // Prefill of both: 1,000 + 640 + 200 = 1,840. Then A's pull sets 2 blocks aside; B's
    // needs 2 more: B waits at the head of the queue. A's KV lands at 1,840 + 4,200 = 6,040;
    // A computes 3 tokens in steps of 1,110 (growing to 3 blocks): 7,150, 8,260, 9,370.
    let a = find(&rec, 0);
    assert_eq!((a.first_token, a.end), (7_150, 9_370));
    // A's blocks are free at 9,370: B's pull starts then (9,370 → 13,570); its first token
    // is the decode step after: 13,570 + 1,110.
    let b = find(&rec, 1);
    let pd = b.pd.unwrap();
    assert_eq!(
        (pd.transfer_start_ns, pd.transfer_end_ns, pd.link_wait_ns()),
        (9_370, 13_570, 9_370 - 1_840)
    );
    assert_eq!((b.first_token, b.end), (14_680, 15_790));
}

#[test]
fn a_prefill_instance_waits_for_its_transfers_to_free_blocks() {
    // Three blocks on the prefill instance: A's prompt takes two, C's needs two more; C waits,
    // with the instance idle, until A's transfer ends and frees A's blocks.
    let requests = [
        request(0, 0, 32, 3, Vec::new()),
        request(1, 0, 32, 3, Vec::new()),
    ];
    let rec = run(
        &requests,
        &[setup("m", 3), setup("m", 100)],
        &[Prefill, Decode],
        RoutingPolicy::RoundRobin,
    );
    // A alone: 1,000 + 320 + 100 = 1,420; its transfer 1,420 → 5,620; C prefills 5,620 → 7,040.
    assert_eq!(rec.steps[0], (0, 0, 1_420, vec![(32, 0)]));
    let c_prefill = rec.steps.iter().find(|s| s.0 == 0 && s.1 > 0).unwrap();
    assert_eq!(c_prefill, &(0, 5_620, 7_040, vec![(32, 0)]));
    let c = find(&rec, 1);
    assert_eq!(c.queuing_delay, 5_620);
    assert_eq!(c.first_token, 7_040 + 4_200);
}

/// A (32-token prompt, 10 tokens) then B (16-token prompt, 2 tokens), both at 0, on a decode
/// instance built by `decode`: B arrives while A decodes.
fn decode_limited(decode: InstanceSetup) -> Rec {
    let requests = [
        request(0, 0, 32, 10, Vec::new()),
        request(1, 0, 16, 2, Vec::new()),
    ];
    run(
        &requests,
        &[setup("m", 100), decode],
        &[Prefill, Decode],
        RoutingPolicy::RoundRobin,
    )
}

#[test]
fn decode_admission_waits_for_max_num_seqs_and_kv_blocks() {
    let mut one_seq = setup("m", 100);
    one_seq.scheduler.max_num_seqs = Some(1);
    // A needs 3 blocks at admission (33 tokens) and at most 3 ever (42); B 2 (17 tokens).
    let four_blocks = setup("m", 4);
    for (what, decode) in [("max_num_seqs", one_seq), ("KV", four_blocks)] {
        let rec = decode_limited(decode);
        // A decodes 9 steps of 1,110 ns from 5,880; B's KV arrives at 8,480 but B is admitted
        // only when A finishes, at 15,870.
        let a = find(&rec, 0);
        assert_eq!(a.end, 5_880 + 9 * 1_110, "{what}");
        let b = find(&rec, 1);
        let pd = b.pd.unwrap();
        assert_eq!(b.first_token, 8_480, "{what}: TTFT ends with the transfer");
        assert_eq!(pd.decode_admitted_ns, 15_870, "{what}");
        assert_eq!(pd.decode_queue_ns(), 15_870 - 8_480, "{what}");
        assert_eq!(b.itl, [15_870 + 1_110 - 8_480], "{what}");
        assert!(
            rec.steps.iter().all(|s| s.0 != 1 || s.3.len() == 1),
            "{what}: never two sequences on the decode instance"
        );
    }
    // Without a limit B joins A's batch at the first step boundary after its arrival.
    let rec = decode_limited(setup("m", 100));
    assert_eq!(
        find(&rec, 1).pd.unwrap().decode_admitted_ns,
        5_880 + 3 * 1_110
    );
}

#[test]
fn one_token_requests_finish_on_the_prefill_instance_without_a_transfer() {
    let requests = [request(0, 0, 20, 1, Vec::new())];
    let rec = run(
        &requests,
        &[setup("m", 100), setup("m", 100)],
        &[Prefill, Decode],
        RoutingPolicy::Load,
    );
    assert_eq!(rec.done.len(), 1);
    assert_eq!((rec.done[0].instance, rec.done[0].pd), (0, None));
    assert!(rec.transfers.is_empty());
}

/// Checks one run on a random workload; returns the finished requests.
fn check_conservation(requests: &[Request], roles: &[InstanceRole], policy: RoutingPolicy) -> Rec {
    check_grouped_conservation(PdFlow::LlmServingSim, requests, roles, &[], policy)
}

/// [`check_conservation`] with instance `i` in DP group `groups[i]` (none past the list).
fn check_grouped_conservation(
    flow: PdFlow,
    requests: &[Request],
    roles: &[InstanceRole],
    groups: &[Option<u32>],
    policy: RoutingPolicy,
) -> Rec {
    // Small pools force preemptions and prefill instances blocked by held blocks.
    let setups: Vec<InstanceSetup> = roles
        .iter()
        .enumerate()
        .map(|(i, _)| InstanceSetup {
            dp_group: groups.get(i).copied().flatten(),
            sglang: None,
            ..setup("m", [60, 40, 2_000, 25, 3_000][i % 5])
        })
        .collect();
    let name = policy.name();
    let rec = run_in(flow, requests, &setups, roles, policy);
    let mut ids: Vec<u64> = rec.done.iter().map(|d| d.id).collect();
    ids.sort_unstable();
    assert_eq!(
        ids,
        (0..requests.len() as u64).collect::<Vec<_>>(),
        "{name}"
    );
    let starts: Vec<&TransferEvent> = rec.transfers.iter().filter(|t| !t.arrived).collect();
    let arrivals: Vec<&TransferEvent> = rec.transfers.iter().filter(|t| t.arrived).collect();
    let handed_off = rec.done.iter().filter(|d| d.pd.is_some()).count();
    assert_eq!(
        (starts.len(), arrivals.len()),
        (handed_off, handed_off),
        "{name}"
    );
    for d in &rec.done {
        let r = requests.iter().find(|r| r.id == d.id).unwrap();
        match d.pd {
            Some(pd) => {
                assert_eq!(roles[pd.prefill_instance as usize], Prefill, "{name}");
                assert_eq!(roles[d.instance as usize], Decode, "{name}");
                match flow {
                    PdFlow::LlmServingSim => assert_eq!(d.first_token, pd.transfer_end_ns),
                    // The decode instance's step after the landing gives the first token
                    // (LMCache's: the first step that admits the request, KV there).
                    PdFlow::Vllm | PdFlow::Lmcache => {
                        assert!(d.first_token > pd.decode_admitted_ns, "{name}")
                    }
                }
                assert!(pd.prefill_end_ns <= pd.transfer_start_ns, "{name}");
                assert!(pd.transfer_end_ns <= pd.decode_admitted_ns, "{name}");
                assert_eq!(pd.kv_bytes, 100 * u64::from(r.input_toks), "{name}");
                assert_eq!(pd.wire_ns(), 1_000 + pd.kv_bytes, "{name}");
                assert_eq!(arrivals.iter().filter(|t| t.request_id == d.id).count(), 1);
            }
            None => assert!(roles[d.instance as usize] == Colocated || r.output_toks == 1),
        }
    }
    // One transfer at a time per sender, in hand-off order (vLLM's flow: in the order the
    // pulls start); its blocks held while in flight.
    for sender in 0..roles.len() as u32 {
        let mine: Vec<&&TransferEvent> = starts.iter().filter(|t| t.from == sender).collect();
        for w in mine.windows(2) {
            assert!(w[0].end_ns <= w[1].start_ns, "{name}: serialised");
            let fifo = w[0].prefill_end_ns <= w[1].prefill_end_ns;
            assert!(fifo || flow == PdFlow::Vllm, "{name}: FIFO");
        }
        for t in &mine {
            assert!(
                t.sender_blocks_used >= t.request_blocks,
                "{name}: blocks held"
            );
        }
    }
    rec
}

#[test]
fn every_request_ends_once_in_vllms_flow_whatever_the_routing() {
    ends_once_whatever_the_routing(PdFlow::Vllm);
}

#[test]
fn every_request_ends_once_in_lmcaches_flow_whatever_the_routing() {
    ends_once_whatever_the_routing(PdFlow::Lmcache);
}

/// Conservation and determinism in `flow` under each routing policy, and with one decode
/// instance.
fn ends_once_whatever_the_routing(flow: PdFlow) {
    // Small decode pools (see check_grouped_conservation) make pulls wait for blocks and
    // decodes preempt.
    let requests = workload(5, 400, true);
    let roles = [Prefill, Prefill, Decode, Decode, Colocated];
    for policy in [
        RoutingPolicy::Load,
        RoutingPolicy::RoundRobin,
        RoutingPolicy::Random,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::PrefixAffinity,
        RoutingPolicy::weighted("queue=1,kv=1,prefix=2".parse().unwrap()),
    ] {
        let rec = check_grouped_conservation(flow, &requests, &roles, &[], policy.clone());
        let again = check_grouped_conservation(flow, &requests, &roles, &[], policy);
        assert_eq!(rec.done, again.done, "deterministic");
        assert_eq!(rec.transfers, again.transfers, "deterministic");
    }
    check_grouped_conservation(
        flow,
        &requests,
        &[Prefill, Decode],
        &[],
        RoutingPolicy::Load,
    );
}

#[test]
fn every_prefilled_request_is_decoded_exactly_once() {
    let requests = workload(5, 400, true);
    let roles = [Prefill, Prefill, Decode, Decode, Colocated];
    for policy in [
        RoutingPolicy::Load,
        RoutingPolicy::RoundRobin,
        RoutingPolicy::Random,
        RoutingPolicy::LeastLoaded,
        RoutingPolicy::PrefixAffinity,
        RoutingPolicy::weighted("queue=1,kv=1,prefix=2".parse().unwrap()),
    ] {
        let rec = check_conservation(&requests, &roles, policy.clone());
        for id in [0, 1] {
            let prefilled = |d: &Done| d.pd.is_some_and(|pd| pd.prefill_instance == id);
            assert!(
                rec.done.iter().any(prefilled),
                "{}: {id} prefilled",
                policy.name()
            );
        }
        for id in [2, 3, 4] {
            let served = rec.done.iter().any(|d| d.instance == id);
            assert!(served, "{}: instance {id} served", policy.name());
        }
        let waited = rec
            .done
            .iter()
            .any(|d| d.pd.is_some_and(|p| p.link_wait_ns() > 0));
        assert!(waited, "{}: transfers contend", policy.name());
        // Policies blind to KV send requests to the small decode pool until it preempts.
        let blind = matches!(
            policy,
            RoutingPolicy::Load | RoutingPolicy::RoundRobin | RoutingPolicy::Random
        );
        let preempted = rec.preemptions[3] > 0;
        assert!(!blind || preempted, "{}: decode preemption", policy.name());
        let again = check_conservation(&requests, &roles, policy);
        assert_eq!(rec.done, again.done, "deterministic");
        assert_eq!(rec.transfers, again.transfers, "deterministic");
    }
    // P/D only, no colocated instance.
    check_conservation(&requests, &[Prefill, Decode], RoutingPolicy::Load);
}

#[test]
fn a_prefill_dp_member_waits_for_its_transfers_while_its_partner_pads() {
    // Prefill instances 0 and 1 form a DP group in front of decode instance 2. Member 0 has
    // three blocks: A's prompt takes two, C's needs two more. RR: A and C to 0, B to 1.
    let requests = [
        request(0, 0, 32, 3, Vec::new()),
        request(1, 0, 32, 3, Vec::new()),
        request(2, 0, 32, 3, Vec::new()),
    ];
    let member = |blocks| InstanceSetup {
        dp_group: Some(0),
        sglang: None,
        ..setup("m", blocks)
    };
    let rec = run(
        &requests,
        &[member(3), member(100), setup("m", 100)],
        &[Prefill, Prefill, Decode],
        RoutingPolicy::RoundRobin,
    );
    // Wave 1: A on 0, B on 1, 1,000 + 320 + 100 = 1,420 ns each. Each sender's transfer
    // takes 1,000 + 3,200 ns on its own link: both arrive at 5,620. Until then member 0 can
    // form no batch and member 1 has none: no wave (and no error). Wave 2 at 5,620: C on 0
    // (1,420 ns), a one-token dummy on 1 (not reported) padded to 32 tokens, the padding
    // counted as decodes: 1,000 + 320 + 3,200 = 4,520 ns, the wave's length.
    let prefill_steps: Vec<_> = rec.steps.iter().filter(|s| s.0 < 2).collect();
    assert_eq!(
        prefill_steps,
        [
            &(0, 0, 1_420, vec![(32, 0)]),
            &(1, 0, 1_420, vec![(32, 0)]),
            &(0, 5_620, 10_140, vec![(32, 0)]),
        ]
    );
    assert_eq!(rec.dummy_steps[..2], [0, 1]);
    let c = find(&rec, 2);
    assert_eq!(c.queuing_delay, 5_620);
    assert_eq!(c.first_token, 10_140 + 4_200);
    assert_eq!(rec.done.len(), 3);
}

#[test]
fn dp_groups_on_both_sides_of_disaggregation_step_in_lock_step_and_conserve_requests() {
    let requests = workload(9, 400, true);
    let roles = [Prefill, Prefill, Decode, Decode, Colocated];
    let groups = [Some(0), Some(0), Some(1), Some(1)];
    let flows = [PdFlow::LlmServingSim, PdFlow::Vllm, PdFlow::Lmcache];
    for (flow, policy) in flows
        .into_iter()
        .flat_map(|f| [(f, RoutingPolicy::Load), (f, RoutingPolicy::LeastLoaded)])
    {
        let name = format!("{flow:?} {}", policy.name());
        let rec = check_grouped_conservation(flow, &requests, &roles, &groups, policy.clone());
        // Members' steps span the same intervals or none of each other's: the distinct
        // intervals of a group never overlap.
        for members in [[0, 1], [2, 3]] {
            let mut spans: Vec<(Nanos, Nanos)> = rec
                .steps
                .iter()
                .filter(|s| members.contains(&s.0))
                .map(|s| (s.1, s.2))
                .collect();
            spans.sort_unstable();
            spans.dedup();
            for w in spans.windows(2) {
                assert!(w[0].1 <= w[1].0, "{name}: {members:?} out of step: {w:?}");
            }
        }
        assert!(rec.dummy_steps[..4].iter().all(|&d| d > 0), "{name}");
        for id in [2, 3] {
            let decoded = rec.done.iter().any(|d| d.instance == id && d.pd.is_some());
            assert!(decoded, "{name}: decode member {id} served");
        }
        let again = check_grouped_conservation(flow, &requests, &roles, &groups, policy);
        assert_eq!(rec.done, again.done, "{name}: deterministic");
    }
}

#[test]
fn received_prompts_reuse_blocks_cached_on_the_decode_instance() {
    // Two 64-token prompts (4 full blocks) of 10 tokens on a decode instance of 8 blocks:
    // each needs 5 blocks at admission. With the same prompt ids the second shares the first's
    // 4 cached prompt blocks and is admitted at once; without ids it waits for the first.
    let prompt: Vec<u32> = (0..64).collect();
    let ids = |out: u32| {
        prompt
            .iter()
            .copied()
            .chain(out..out + 10)
            .collect::<Vec<_>>()
    };
    let second_admission = |shared: bool| {
        let (a, b) = if shared {
            (ids(1_000), ids(2_000))
        } else {
            (Vec::new(), Vec::new())
        };
        let requests = [request(0, 0, 64, 10, a), request(1, 0, 64, 10, b)];
        let rec = run(
            &requests,
            &[setup("m", 100), setup("m", 8)],
            &[Prefill, Decode],
            RoutingPolicy::Load,
        );
        let first_end = find(&rec, 0).end;
        (find(&rec, 1).pd.unwrap(), first_end)
    };
    let (pd, first_end) = second_admission(true);
    assert!(
        pd.decode_admitted_ns < first_end,
        "admitted beside the first"
    );
    let (pd, first_end) = second_admission(false);
    assert_eq!(
        pd.decode_admitted_ns, first_end,
        "waits for the first's blocks"
    );
}

#[test]
fn a_request_no_decode_instance_can_take_is_refused_up_front() {
    let refusal = |setups: &[InstanceSetup], roles: &[InstanceRole]| {
        let mut backends: Vec<LinearBackend> = setups
            .iter()
            .map(|_| LinearBackend { per_token: 10 })
            .collect();
        let mut dyns: Vec<&mut dyn LatencyBackend> = backends
            .iter_mut()
            .map(|b| b as &mut dyn LatencyBackend)
            .collect();
        let pd = Disaggregation::new(
            roles.to_vec(),
            vec![100; roles.len()],
            Router::new(RoutingPolicy::Load, 0),
            |_, _| link(0.0),
        )
        .with_flow(PdFlow::LlmServingSim);
        let requests = [request(0, 0, 32, 10, Vec::new())];
        let mut router = Router::new(RoutingPolicy::Load, 0);
        let mut rec = Rec::default();
        simulate(
            Run::new(&requests, setups).disaggregated(pd),
            Services::new(&mut dyns, &mut router, &mut rec),
        )
        .unwrap_err()
        .to_string()
    };
    // The prompt fits the prefill instance (2 blocks), prompt + output not the decode one.
    let err = refusal(&[setup("m", 2), setup("m", 2)], &[Prefill, Decode]);
    assert!(
        err.contains("request 0")
            && err.contains("needs 3 KV blocks")
            && err.contains("instance 1"),
        "{err}"
    );
    let err = refusal(&[setup("m", 100)], &[Prefill]);
    assert!(
        err.contains("no decode instance serves that model"),
        "{err}"
    );
}

/// A cluster serving two models, with requests naming none: each hand-off goes to a decode
/// instance of the model its prompt ran on, however loaded the others are, in both flows.
#[test]
fn hand_offs_go_to_decode_instances_of_their_prefills_model() {
    let mut requests = workload(11, 60, false);
    for r in &mut requests {
        // A one-token request ends on its prefill instance.
        r.output_toks = r.output_toks.max(2);
    }
    let setups = [
        setup("a", 100),
        setup("b", 100),
        setup("b", 100),
        setup("a", 100),
        setup("a", 100),
    ];
    let roles = [Prefill, Prefill, Decode, Decode, Decode];
    for flow in [PdFlow::Vllm, PdFlow::LlmServingSim] {
        let rec = run_in(flow, &requests, &setups, &roles, RoutingPolicy::Load);
        assert_eq!(rec.done.len(), requests.len(), "{flow:?}");
        let prefilled = |d: &Done| d.pd.expect("handed off").prefill_instance as usize;
        // Both models took prompts.
        assert!(rec.done.iter().any(|d| prefilled(d) == 0), "{flow:?}");
        assert!(rec.done.iter().any(|d| prefilled(d) == 1), "{flow:?}");
        for d in &rec.done {
            let (decoded, prompt) = (&setups[d.instance as usize], &setups[prefilled(d)]);
            assert_eq!(decoded.model_name, prompt.model_name, "{flow:?}: {}", d.id);
        }
    }
}
