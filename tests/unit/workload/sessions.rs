//! Unit tests of `blis_cosim::workload::sessions`.

use blis_cosim::Nanos;
use blis_cosim::metrics::{Itl, RequestRecord};
use blis_cosim::workload::sessions::{
    NodeStatus, PlanBuilder, SessionHeader, SessionRegistry, SessionSet, Step,
};
use blis_cosim::workload::{BlockHashes, Injector, Request};

fn req(input: u32) -> Request {
    Request {
        id: 0,
        line: 0,
        model: None,
        arrival_ns: 0,
        input_toks: input,
        output_toks: 4,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

fn header(id: &str, arrival_ns: Nanos, first_id: u64, deadline_ns: Option<Nanos>) -> SessionHeader {
    SessionHeader {
        id: id.to_owned(),
        client: None,
        arrival_ns,
        deadline_ns,
        first_id,
        line: 1,
    }
}

/// plan → {search 300, db 100, docs 200} → synthesize.
fn fork_join(deadline_ns: Option<Nanos>) -> SessionSet {
    let mut b = PlanBuilder::new();
    let plan = b.push("plan".into(), vec![], Step::Llm(req(10)), None, false);
    let tools: Vec<u32> = [("search", 300), ("db", 100), ("docs", 200)]
        .into_iter()
        .map(|(name, lat)| b.push(name.into(), vec![plan], Step::Tool(lat), None, false))
        .collect();
    b.push("synthesize".into(), tools, Step::Llm(req(20)), None, false);
    let mut set = SessionSet::new();
    set.add(header("s", 1_000, 5, deadline_ns), b);
    set
}

fn finish(reg: &mut SessionRegistry<'_>, r: &Request, end: Nanos) -> Vec<Request> {
    let mut out = Vec::new();
    let record = RequestRecord {
        instance_id: 0,
        request_id: r.id,
        model: "m",
        input_toks: r.input_toks,
        output_toks: r.output_toks,
        arrival_ns: r.arrival_ns,
        first_token_ns: end,
        end_ns: end,
        queuing_delay_ns: 0,
        itl_ns: Itl::default(),
        pd: None,
    };
    reg.request_finished(&record, BlockHashes::default(), &mut out);
    out
}

#[test]
fn a_fan_in_waits_for_its_slowest_tool() {
    let set = fork_join(None);
    let mut reg = SessionRegistry::new(&set);
    let mut initial = Vec::new();
    reg.start(&mut initial);
    assert_eq!(initial.len(), 1);
    assert_eq!((initial[0].id, initial[0].arrival_ns), (5, 1_000));
    let released = finish(&mut reg, &initial[0], 1_500);
    assert_eq!(released.len(), 1);
    assert_eq!((released[0].id, released[0].arrival_ns), (6, 1_800));
    assert_eq!(released[0].input_toks, 20);
    for (n, lat) in [(1, 300), (2, 100), (3, 200)] {
        let t = reg.timing(0, n);
        assert_eq!(
            (t.status, t.start_ns, t.end_ns),
            (NodeStatus::Done, 1_500, 1_500 + lat)
        );
    }
    assert!(finish(&mut reg, &released[0], 2_000).is_empty());
    assert_eq!(
        (reg.released(), reg.completed(), reg.not_started()),
        (2, 2, 0)
    );
    let [o] = reg.outcomes().try_into().unwrap();
    assert!(o.complete);
    assert_eq!(
        (o.e2e_ns(), o.llm_calls, o.tool_calls, o.steps()),
        (1_000, 2, 3, 5)
    );
    assert_eq!(o.tool_wait_ns, 600);
    // plan 500 + search 300 + synthesize 200.
    assert_eq!((o.critical_path_ns, o.critical_path_llm_ns), (1_000, 700));
}

#[test]
fn a_step_due_at_the_deadline_is_cut_and_the_session_interrupted() {
    let set = fork_join(Some(1_800));
    let mut reg = SessionRegistry::new(&set);
    let mut initial = Vec::new();
    reg.start(&mut initial);
    assert!(finish(&mut reg, &initial[0], 1_500).is_empty());
    assert_eq!(reg.timing(0, 4).status, NodeStatus::Cut);
    assert_eq!(reg.not_started(), 1);
    let [o] = reg.outcomes().try_into().unwrap();
    assert!(!o.complete);
    // The tools started before the deadline and count; the session ends with the slowest.
    assert_eq!((o.llm_calls, o.llm_planned, o.tool_calls), (1, 2, 3));
    assert_eq!(o.end_ns, 1_800);
}

#[test]
fn requests_are_located_by_id_across_sessions() {
    let mut set = fork_join(None);
    let mut b = PlanBuilder::new();
    let a = b.push("0".into(), vec![], Step::Llm(req(1)), None, false);
    let t = b.push("think".into(), vec![a], Step::Think(50), None, false);
    b.push("1".into(), vec![t], Step::Llm(req(2)), None, false);
    set.add(header("chat", 0, 9, None), b);
    let mut tools_only = PlanBuilder::new();
    tools_only.push("t".into(), vec![], Step::Tool(5), None, false);
    set.add(header("tools", 0, 11, None), tools_only);
    let mut last = PlanBuilder::new();
    last.push("0".into(), vec![], Step::Llm(req(3)), None, false);
    set.add(header("last", 0, 11, None), last);
    assert_eq!(set.label(11), Some(("last", "0")));
    assert_eq!(set.locate(4), None);
    assert_eq!(set.label(5), Some(("s", "plan")));
    assert_eq!(set.label(6), Some(("s", "synthesize")));
    assert_eq!(set.locate(7), None);
    assert_eq!(set.label(10), Some(("chat", "1")));
    assert_eq!(set.locate(12), None);
    assert_eq!(set.requests()[3].id, 10);
    assert_eq!(set.sessions()[1].nodes[0].children, vec![1]);
}

#[test]
fn a_think_time_delays_the_follow_up_and_is_not_tool_wait() {
    let mut set = SessionSet::new();
    let mut b = PlanBuilder::new();
    let a = b.push("0".into(), vec![], Step::Llm(req(1)), None, false);
    let t = b.push("think".into(), vec![a], Step::Think(50), None, false);
    b.push("1".into(), vec![t], Step::Llm(req(2)), None, false);
    set.add(header("chat", 0, 0, None), b);
    let mut reg = SessionRegistry::new(&set);
    let mut initial = Vec::new();
    reg.start(&mut initial);
    let next = finish(&mut reg, &initial[0], 70);
    assert_eq!(next[0].arrival_ns, 120);
    finish(&mut reg, &next[0], 200);
    let [o] = reg.outcomes().try_into().unwrap();
    assert_eq!((o.tool_wait_ns, o.think_ns, o.e2e_ns()), (0, 50, 200));
}

#[test]
fn a_clients_network_delays_each_round_both_ways() {
    // Round 0 (1000 prompt, 4 output tokens), 2 ms think, round 1 (500 prompt tokens), sent
    // from 100 ms by a client at 40 ms RTT and 100 Mbit/s.
    let mut set = SessionSet::new();
    let mut b = PlanBuilder::new();
    let a = b.push("0".into(), vec![], Step::Llm(req(1000)), None, false);
    let t = b.push("think".into(), vec![a], Step::Think(2_000_000), None, false);
    b.push("1".into(), vec![t], Step::Llm(req(500)), None, false);
    set.add(header("chat", 100_000_000, 0, None), b);
    let mut classes = blis_cosim::workload::RequestClasses::default();
    let far = blis_cosim::workload::RequestProfile {
        rtt_ms: Some(40.0),
        bandwidth_mbps: Some(100.0),
        ..Default::default()
    };
    classes.assign_profile(0, 2, "t", "c", &far);
    let mut reg = SessionRegistry::new(&set).with_clients(Some(&classes));
    let mut initial = Vec::new();
    reg.start(&mut initial);
    // Half the RTT (20 ms) plus 1000 × 32 bits at 1e8 bit/s (0.32 ms) after the send.
    assert_eq!(initial[0].arrival_ns, 120_320_000);
    // The server's last token at 200 ms reaches the client 20 ms plus 4 × 32 bits at 1e8
    // bit/s (1.28 µs) later; the think time runs from then, and the next round leaves at its
    // end and reaches the gateway 20 ms plus 500 × 32 bits at 1e8 bit/s (0.16 ms) after.
    let next = finish(&mut reg, &initial[0], 200_000_000);
    let received = 200_000_000 + 20_000_000 + 1_280;
    assert_eq!(reg.timing(0, 0).end_ns, received);
    assert_eq!(reg.timing(0, 0).start_ns, 100_000_000);
    assert_eq!(next[0].arrival_ns, received + 2_000_000 + 20_160_000);
    finish(&mut reg, &next[0], 300_000_000);
    let [o] = reg.outcomes().try_into().unwrap();
    // From the first send to the last token at the client; the critical path covers it.
    assert_eq!(o.e2e_ns(), 300_000_000 + 20_001_280 - 100_000_000);
    assert_eq!(o.critical_path_ns, o.e2e_ns());
    assert_eq!(o.critical_path_llm_ns, o.e2e_ns() - 2_000_000);
}
