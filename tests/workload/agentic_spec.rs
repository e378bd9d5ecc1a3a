//! Agentic workflows in WorkloadSpec v2: each of the nine validation rules refuses a bad
//! workflow with a message naming the client and the step, and good workflows unroll as the
//! design describes.

use blis_cosim::workload::spec::{Overrides, SCENARIOS};
use blis_cosim::workload::spec::{Traffic, WorkloadSpec, generate_workload};

/// A ReAct client whose `agentic` block is `steps` (indented under `agentic:`) plus `extra`
/// client lines.
fn spec_text(agentic: &str, extra: &str) -> String {
    format!(
        "version: \"2\"\nseed: 1\ncategory: agentic\naggregate_rate: 1\nnum_requests: 5\n\
         clients:\n  - id: agent\n    rate_fraction: 1\n    arrival: {{process: poisson}}\n\
         {extra}    agentic:\n{agentic}"
    )
}

const LLM: &str = "input_distribution: {type: constant, params: {value: 10}}, \
                   output_distribution: {type: constant, params: {value: 4}}";

const TOOLS: &str = "      tools:\n        search: {latency: {type: constant, params: {value: \
                     100}}, output_tokens: {type: constant, params: {value: 7}}}\n";

/// `agentic` with a ReAct loop over reason/act/observe of `iterations`, then `final`.
fn react(iterations: u32) -> String {
    format!(
        "      loop: {{over: [reason, act, observe], max_iterations: {iterations}}}\n\
         \x20     steps:\n\
         \x20       - {{id: reason, type: llm_call, {LLM}}}\n\
         \x20       - {{id: act, type: tool_call, tool: search, depends_on: [reason]}}\n\
         \x20       - {{id: observe, type: llm_call, depends_on: [act], context_growth: accumulate, {LLM}}}\n\
         \x20       - {{id: final, type: llm_call, depends_on: [observe], {LLM}}}\n{TOOLS}"
    )
}

fn parse(text: &str) -> Result<WorkloadSpec, String> {
    WorkloadSpec::from_yaml(text, "w.yaml").map_err(|e| e.to_string())
}

fn refused(agentic: &str, extra: &str, want: &str) {
    let err = parse(&spec_text(agentic, extra)).expect_err("refused");
    assert!(
        err.contains("clients[0]: client `agent`: ") && err.contains(want),
        "want `{want}` in: {err}"
    );
}

#[test]
fn a_react_loop_unrolls_into_its_iterations() {
    let spec = parse(&spec_text(&react(3), "")).unwrap();
    let Traffic::Agentic(a) = &spec.clients[0].traffic else {
        panic!("an agentic client")
    };
    assert_eq!(a.num_llm_calls(), 3 * 2 + 1);
    let w = generate_workload(&spec, Overrides::default()).unwrap();
    let plan = &w.sessions.sessions()[0];
    let labels: Vec<&str> = plan.nodes.iter().map(|n| n.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "reason#0",
            "act#0",
            "observe#0",
            "reason#1",
            "act#1",
            "observe#1",
            "reason#2",
            "act#2",
            "observe#2",
            "final"
        ]
    );
    // Each iteration's entry waits for the previous iteration's last step.
    assert_eq!(plan.nodes[3].parents, [2]);
    assert_eq!(plan.nodes[9].parents, [8]);
    // observe#k's prompt: its own 10 tokens, the 7 the search returned, and (from the
    // second iteration) observe#(k-1)'s prompt and 4 output tokens.
    let inputs: Vec<u32> = w.sessions.requests()[..7]
        .iter()
        .map(|r| r.input_toks)
        .collect();
    assert_eq!(inputs, [10, 17, 10, 38, 10, 59, 10]);
}

#[test]
fn an_explicit_loop_back_edge_is_allowed() {
    let agentic = react(2).replace(
        "{id: reason, type: llm_call,",
        "{id: reason, type: llm_call, depends_on: [observe],",
    );
    parse(&spec_text(&agentic, "")).unwrap();
}

#[test]
fn rule_1_the_dag_must_be_acyclic() {
    let agentic = format!(
        "      steps:\n        - {{id: a, type: llm_call, {LLM}}}\n\
         \x20       - {{id: b, type: llm_call, depends_on: [a, c], {LLM}}}\n\
         \x20       - {{id: c, type: llm_call, depends_on: [b], {LLM}}}\n\
         \x20       - {{id: d, type: llm_call, depends_on: [c], {LLM}}}\n"
    );
    refused(&agentic, "", "the depends_on of `b`, `c` form a cycle");
}

#[test]
fn rule_2_exactly_one_root() {
    let agentic = format!(
        "      steps:\n        - {{id: a, type: llm_call, {LLM}}}\n\
         \x20       - {{id: b, type: llm_call, {LLM}}}\n"
    );
    refused(
        &agentic,
        "",
        "`a`, `b` have no depends_on (loop-back edges aside); a workflow has exactly one root",
    );
}

#[test]
fn rule_3_tools_must_be_defined() {
    refused(
        &react(2).replace("tool: search", "tool: web"),
        "",
        "agentic step `act`: tool `web` is not defined in `tools` (defined: search)",
    );
}

#[test]
fn rule_4_fan_out_is_at_least_two() {
    refused(
        &react(2).replace("depends_on: [reason]}", "depends_on: [reason], fan_out: 1}"),
        "",
        "agentic step `act`: fan_out must be at least 2, got 1",
    );
}

#[test]
fn rule_5_the_loop_is_connected_and_not_fed_back_from_outside() {
    let apart = react(2).replace("over: [reason, act, observe]", "over: [reason, observe]");
    refused(
        &apart,
        "",
        "loop.over steps must form a connected subgraph; not linked to `reason` through \
         depends_on: `observe`",
    );
    // `act` outside the loop both follows `reason` and precedes `observe`.
    let around = react(2).replace("over: [reason, act, observe]", "over: [reason, observe]");
    let around = around.replace(
        "{id: observe, type: llm_call, depends_on: [act]",
        "{id: observe, type: llm_call, depends_on: [act, reason]",
    );
    refused(
        &around,
        "",
        "steps outside loop.over both wait for its steps and are waited for by them (put them \
         in loop.over): `act`",
    );
}

#[test]
fn rule_6_llm_calls_need_both_distributions() {
    let agentic = react(2).replace(
        "{id: final, type: llm_call, depends_on: [observe], input_distribution: {type: \
         constant, params: {value: 10}}, ",
        "{id: final, type: llm_call, depends_on: [observe], ",
    );
    refused(
        &agentic,
        "",
        "agentic step `final`: an llm_call needs `input_distribution`",
    );
}

#[test]
fn rule_7_tool_calls_take_no_distributions() {
    refused(
        &react(2).replace(
            "depends_on: [reason]}",
            "depends_on: [reason], output_distribution: {type: constant, params: {value: 3}}}",
        ),
        "",
        "agentic step `act`: a tool_call takes no input_distribution or output_distribution",
    );
}

#[test]
fn rule_8_accumulate_only_inside_the_loop() {
    refused(
        &react(2).replace(
            "{id: final, type: llm_call, depends_on: [observe],",
            "{id: final, type: llm_call, depends_on: [observe], context_growth: accumulate,",
        ),
        "",
        "agentic step `final`: context_growth: accumulate is only valid on a step of loop.over",
    );
}

#[test]
fn rule_9_agentic_excludes_reasoning_and_multimodal() {
    for extra in [
        "    reasoning: {multi_turn: {max_rounds: 2}}\n",
        "    multimodal: {}\n",
    ] {
        refused(
            &react(2),
            extra,
            "`agentic` cannot be combined with `reasoning` or `multimodal`",
        );
    }
}

#[test]
fn other_mistakes_name_the_step() {
    for (agentic, want) in [
        (
            react(2).replace("depends_on: [reason]}", "depends_on: [think]}"),
            "agentic step `act`: depends_on names no step `think`",
        ),
        (
            react(2).replace(
                "{id: act, type: tool_call, tool: search,",
                "{id: act, type: tool_call,",
            ),
            "agentic step `act`: a tool_call needs `tool`",
        ),
        (react(0), "agentic: loop.max_iterations must be at least 1"),
        (
            react(2).replace("over: [reason, act, observe]", "over: [reason, plan]"),
            "agentic: loop.over names no step `plan`",
        ),
        (
            react(2).replace("{id: final,", "{id: act,"),
            "agentic step `act`: the id is used by two steps",
        ),
        (
            react(2).replace("type: tool_call", "type: tool"),
            "unknown variant `tool`",
        ),
    ] {
        let err = parse(&spec_text(&agentic, "")).expect_err("refused");
        assert!(err.contains(want), "want `{want}` in: {err}");
    }
    let err = parse(&spec_text(
        &react(2),
        "    input_distribution: {type: constant, params: {value: 3}}\n",
    ))
    .unwrap_err();
    assert!(err.contains("belong on its llm_call steps"), "{err}");
}

#[test]
fn the_three_example_workflows_are_built_in_scenarios() {
    for (name, calls) in [
        ("react-search", 5 * 2 + 1),
        ("mcts-code", 1 + 4 + 1 + 1),
        ("fork-join-research", 2),
    ] {
        let s = SCENARIOS.iter().find(|s| s.name == name).unwrap();
        let spec = s.spec().unwrap();
        let Traffic::Agentic(a) = &spec.clients[0].traffic else {
            panic!("{name}: an agentic client")
        };
        assert_eq!(a.num_llm_calls(), calls, "{name}");
    }
}
