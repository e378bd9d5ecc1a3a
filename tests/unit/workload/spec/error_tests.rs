//! The spec's typed errors: each check returns the value that says what is wrong, and the
//! value renders to the message users read.

use blis_cosim::workload::spec::agentic::RawAgentic;
use blis_cosim::workload::spec::schema::RawClient;
use blis_cosim::workload::spec::servegen::{parse_pdf_counts, read_dataset};
use blis_cosim::workload::spec::{
    AgenticError, AgenticSpec, ClientError, ClientProblem, CohortSpec, EntryProblem, PatternError,
    PdfError, ServeGenError, SpecError, StepProblem, TopProblem, WorkloadSpec,
};

fn client_error(yaml: &str) -> ClientError {
    let raw: RawClient = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    blis_cosim::workload::spec::ClientSpec::try_from(raw).expect_err(yaml)
}

fn agentic_error(yaml: &str) -> AgenticError {
    let raw: RawAgentic = serde_yaml_ng::from_str(yaml).unwrap_or_else(|e| panic!("{yaml}: {e}"));
    AgenticSpec::try_from(raw).expect_err(yaml)
}

const LENGTHS: &str = "input_distribution: {type: constant, params: {value: 8}}\n\
                       output_distribution: {type: constant, params: {value: 4}}\n";

#[test]
fn a_client_error_names_the_client_and_holds_the_problem() {
    let err = client_error(&format!(
        "id: a\nrate_fraction: 1\nthink_time_us: 5\n{LENGTHS}"
    ));
    assert_eq!(
        err,
        ClientError {
            who: "client `a`".into(),
            problem: Box::new(ClientProblem::ThinkWithoutUsers {
                field: "think_time_us"
            }),
        }
    );
    assert_eq!(
        err.to_string(),
        "client `a`: think_time_us needs concurrency (closed-loop users)"
    );
    let err = client_error(&format!("rate_fraction: 1\nstreaming: 2\n{LENGTHS}"));
    assert_eq!(*err.problem, ClientProblem::Streaming { value: 2.0 });
    assert_eq!(
        err.to_string(),
        "client: streaming must be true, false or a probability in [0, 1], got 2"
    );
    let err = client_error(&format!("id: c\nrate_fraction: 1\n{LENGTHS}"));
    assert_eq!(*err.problem, ClientProblem::Missing { field: "arrival" });
}

#[test]
fn a_cohort_error_names_the_cohort_and_its_pattern() {
    let raw: RawClient = serde_yaml_ng::from_str(&format!(
        "id: night\npopulation: 2\nrate_fraction: 1\n\
         diurnal: {{peak_hour: 24, peak_to_trough_ratio: 2}}\n{LENGTHS}"
    ))
    .unwrap();
    let err = CohortSpec::try_from(raw).unwrap_err();
    assert_eq!(
        *err.problem,
        ClientProblem::Pattern(PatternError::PeakHour { value: 24 })
    );
    assert_eq!(
        err.to_string(),
        "cohort `night`: diurnal.peak_hour must be an hour in [0, 23], got 24"
    );
}

#[test]
fn an_agentic_error_names_the_step_or_the_rule() {
    let step = |id: &str, more: &str| {
        format!(
            "  - {{id: {id}, type: llm_call, input_distribution: {{type: constant, params: \
             {{value: 8}}}}, output_distribution: {{type: constant, params: {{value: 4}}}}{more}}}\n"
        )
    };
    let err = agentic_error(&format!(
        "steps:\n{}{}",
        step("a", ""),
        step("b", ", depends_on: [c]")
    ));
    assert_eq!(
        err,
        AgenticError::Step {
            id: "b".into(),
            problem: StepProblem::UnknownParent { name: "c".into() },
        }
    );
    assert_eq!(
        err.to_string(),
        "agentic step `b`: depends_on names no step `c`"
    );
    let err = agentic_error(&format!(
        "steps:\n{}{}",
        step("a", ", depends_on: [b]"),
        step("b", ", depends_on: [a]")
    ));
    assert_eq!(
        err,
        AgenticError::Cycle {
            steps: vec!["a".into(), "b".into()]
        }
    );
    assert_eq!(
        err.to_string(),
        "agentic: the depends_on of `a`, `b` form a cycle (only edges back to an earlier step \
         of loop.over may loop)"
    );
    let err = agentic_error(&format!("steps:\n{}{}", step("a", ""), step("b", "")));
    assert_eq!(
        err,
        AgenticError::Roots {
            steps: vec!["a".into(), "b".into()]
        }
    );
}

#[test]
fn top_level_fields_give_a_typed_problem() {
    let err = WorkloadSpec::from_yaml("version: \"3\"\n", "w.yaml").unwrap_err();
    let SpecError::Top { field, problem, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(
        (*field, problem),
        ("version", &TopProblem::VersionText { text: "3".into() })
    );
    assert_eq!(err.to_string(), "w.yaml: version: must be 1 or 2, got `3`");
    let err = WorkloadSpec::from_yaml("category: chat\n", "w.yaml").unwrap_err();
    assert_eq!(
        err.to_string(),
        "w.yaml: category: unknown category `chat`; known: language, multimodal, reasoning, \
         agentic"
    );
    let err = WorkloadSpec::from_yaml("aggregate_rate: 1\n", "w.yaml").unwrap_err();
    assert!(matches!(
        err,
        SpecError::Top {
            field: "clients",
            problem: TopProblem::NoClient,
            ..
        }
    ));
}

#[test]
fn servegen_errors_hold_the_file_the_entry_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!(
        "servegen_data: {{path: {}}}\n",
        dir.path().join("none").display()
    );
    let err = WorkloadSpec::from_yaml(&spec, "w.yaml").unwrap_err();
    let SpecError::ServeGen { source, .. } = &err else {
        panic!("{err}");
    };
    assert!(
        matches!(source.as_ref(), ServeGenError::ReadDir { .. }),
        "{source}"
    );
    assert_eq!(source.field(), "path");
    assert!(
        err.to_string().starts_with(&format!(
            "w.yaml: servegen_data.path: cannot read ServeGen directory {}",
            dir.path().join("none").display()
        )),
        "{err}"
    );
    let err = WorkloadSpec::from_yaml("servegen_data: {path: x, time_window: dusk}\n", "w.yaml")
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "w.yaml: servegen_data.time_window: unknown window `dusk`; known: midnight, morning, \
         afternoon"
    );
    let dataset = dir.path().join("chunk-1-dataset.json");
    std::fs::write(&dataset, r#"{"soon": {"input_tokens": "{1: 1}"}}"#).unwrap();
    let open = blis_cosim::workload::spec::servegen::Span {
        start: 0.0,
        end: 0.0,
    };
    let Err(err) = read_dataset(&dataset, open, &mut false) else {
        panic!("{} read", dataset.display());
    };
    assert!(
        matches!(
            &err,
            ServeGenError::Entry { stamp, problem: EntryProblem::Stamp, .. } if stamp == "soon"
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{}: entry \"soon\": the time stamp must be a number of seconds ≥ 0",
            dataset.display()
        )
    );
}

#[test]
fn a_pdf_error_says_which_part_is_wrong() {
    let text = |t: &str| t.to_owned();
    for (pdf, err) in [
        ("1: 0.5", PdfError::NotDict),
        (
            "{1 0.5}",
            PdfError::NotPair {
                pair: text("1 0.5"),
            },
        ),
        (
            "{-1: 0.5}",
            PdfError::Key {
                key: text("-1"),
                limit: blis_cosim::workload::MAX_TOKENS as u32,
            },
        ),
        (
            "{1: x}",
            PdfError::Probability {
                value: text("x"),
                key: text("1"),
            },
        ),
    ] {
        assert_eq!(parse_pdf_counts(pdf), Err(err), "{pdf}");
    }
    assert_eq!(
        PdfError::Probability {
            value: text("x"),
            key: text("1")
        }
        .to_string(),
        "probability `x` of 1 must be a number ≥ 0"
    );
}
