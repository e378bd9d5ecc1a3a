//! Unit tests of `blis_cosim::workload::spec::limits`.

use blis_cosim::workload::spec::PlanProblem;

/// The plan problems no spec of the workload harness reaches print the messages they
/// printed as text (the others are pinned there, through the generator).
#[test]
fn plan_problems_print_their_messages() {
    assert_eq!(
        PlanProblem::NothingGenerated.to_string(),
        "the spec generates no request"
    );
    assert_eq!(
        PlanProblem::Requests {
            planned: 2.4e7 + 0.4,
            limit: 10
        }
        .to_string(),
        "the spec plans about 24000000 requests, more than the limit of 10; raise it with \
             --max-requests"
    );
}
