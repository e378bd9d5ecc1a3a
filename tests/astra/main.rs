//! ASTRA-Sim co-simulation tests, with a test double of ASTRA-Sim built from this target.
//!
//! This target has no libtest harness (`harness = false` in Cargo.toml): when the environment
//! variable `BLIS_ASTRA_DOUBLE` is set, `main` *is* the double (see [`double`]), which the
//! driver under test starts as its ASTRA-Sim binary (`std::env::current_exe()`); otherwise it
//! runs the tests below one at a time, each under a time limit. Tests against a real
//! ASTRA-Sim run only when `BLIS_COSIM_ASTRA_SIM` names one.

mod cli_tests;
mod double;
mod double_sim;
mod dp_tests;
mod fork_tests;
mod hygiene_tests;
mod multi_tests;
mod pd_tests;
mod power_tests;
mod pp_tests;
#[path = "../common/shared_data.rs"]
mod shared_data;
mod stock_tests;
mod support;

use support::Test;

fn main() {
    if let Ok(mode) = std::env::var(double::MODE_ENV) {
        double::main(&mode);
    }
    support::run_all(&[FORK, HYGIENE, STOCK, CLI, MULTI, PD, POWER, PP, DP].concat());
}

/// The `fork` tests.
const FORK: &[Test] = &[
    ("fork::hand_check_tp2", fork_tests::hand_check_tp2),
    (
        "fork::hand_check_tp2_with_step_level_collectives",
        fork_tests::hand_check_tp2_with_step_level_collectives,
    ),
    (
        "fork::memo_hits_on_repeated_batches",
        fork_tests::memo_hits_on_repeated_batches,
    ),
    (
        "fork::breakdown_adds_astra_time",
        fork_tests::breakdown_adds_astra_time,
    ),
    ("fork::fault_crash", fork_tests::fault_crash),
    ("fork::fault_stall", fork_tests::fault_stall),
    ("fork::fault_spam", fork_tests::fault_spam),
    ("fork::fault_garbage", fork_tests::fault_garbage),
    ("fork::fault_quit", fork_tests::fault_quit),
    ("fork::fault_at_start_up", fork_tests::fault_at_start_up),
    ("fork::missing_binary", fork_tests::missing_binary),
];

/// The `hygiene` tests.
const HYGIENE: &[Test] = &[
    (
        "hygiene::a_wrappers_pipeline_and_background_job_end_on_a_timeout",
        hygiene_tests::a_wrappers_pipeline_and_background_job_end_on_a_timeout,
    ),
    (
        "hygiene::an_interrupted_run_leaves_no_run_directory_and_no_process",
        hygiene_tests::an_interrupted_run_leaves_no_run_directory_and_no_process,
    ),
    (
        "hygiene::a_killed_run_leaves_no_process",
        hygiene_tests::a_killed_run_leaves_no_process,
    ),
];

/// The `stock` tests.
const STOCK: &[Test] = &[
    (
        "stock::prices_the_hand_check_once_per_distinct_batch",
        stock_tests::stock_prices_the_hand_check_once_per_distinct_batch,
    ),
    ("stock::faults", stock_tests::stock_faults),
    (
        "stock::follows_upstreams_input_rules",
        stock_tests::stock_follows_upstreams_input_rules,
    ),
    (
        "stock::carries_the_rounding_remainder_between_nodes",
        stock_tests::stock_carries_the_rounding_remainder_between_nodes,
    ),
];

/// The `cli` tests.
const CLI: &[Test] = &[
    (
        "cli::sample_matches_the_analytical_run",
        cli_tests::sample_matches_the_analytical_run,
    ),
    (
        "cli::memo_and_no_memo_give_identical_csvs",
        cli_tests::memo_and_no_memo_give_identical_csvs,
    ),
    (
        "cli::lean_and_detailed_traces_give_identical_csvs",
        cli_tests::lean_and_detailed_traces_give_identical_csvs,
    ),
    (
        "cli::kept_inputs_hold_the_generated_configs",
        cli_tests::kept_inputs_hold_the_generated_configs,
    ),
    (
        "cli::flag_errors_are_clear",
        cli_tests::flag_errors_are_clear,
    ),
    (
        "cli::a_fault_through_the_binary_leaves_nothing",
        cli_tests::a_fault_through_the_binary_leaves_nothing,
    ),
    (
        "cli::stock_mode_through_the_binary",
        cli_tests::stock_mode_through_the_binary,
    ),
    (
        "cli::real_astra_sim_when_available",
        cli_tests::real_astra_sim_when_available,
    ),
];

/// The `multi` tests.
const MULTI: &[Test] = &[
    (
        "multi::colocated_tp1_instances_match_the_analytical_run",
        multi_tests::colocated_tp1_instances_match_the_analytical_run,
    ),
    (
        "multi::heterogeneous_instances_get_their_own_inputs",
        multi_tests::heterogeneous_instances_get_their_own_inputs,
    ),
    (
        "multi::memo_and_no_memo_agree_on_several_instances",
        multi_tests::memo_and_no_memo_agree_on_several_instances,
    ),
    (
        "multi::llmservingsim_two_instance_example_matches_the_analytical_run",
        multi_tests::llmservingsim_two_instance_example_matches_the_analytical_run,
    ),
    (
        "multi::a_fault_in_one_instance_stops_them_all",
        multi_tests::a_fault_in_one_instance_stops_them_all,
    ),
    (
        "multi::expert_parallelism_inside_an_instance_matches_the_analytical_run",
        multi_tests::expert_parallelism_inside_an_instance_matches_the_analytical_run,
    ),
    (
        "multi::weights_streamed_from_cxl_match_the_analytical_run_and_the_published_example",
        multi_tests::weights_streamed_from_cxl_match_the_analytical_run_and_the_published_example,
    ),
    (
        "multi::moe_experts_streamed_from_host_memory_match_the_analytical_run",
        multi_tests::moe_experts_streamed_from_host_memory_match_the_analytical_run,
    ),
    (
        "multi::real_astra_sim_reproduces_the_published_moe_example_when_available",
        multi_tests::real_astra_sim_reproduces_the_published_moe_example_when_available,
    ),
    (
        "multi::real_astra_sim_on_several_instances_when_available",
        multi_tests::real_astra_sim_on_several_instances_when_available,
    ),
];

/// The `pd` tests.
const PD: &[Test] = &[
    (
        "pd::example_reproduces_llmservingsim_through_the_double",
        pd_tests::example_reproduces_llmservingsim_through_the_double,
    ),
    (
        "pd::tp2_prefill_and_decode_through_the_double",
        pd_tests::tp2_prefill_and_decode_through_the_double,
    ),
    (
        "pd::a_fault_in_the_prefill_process_stops_everything",
        pd_tests::a_fault_in_the_prefill_process_stops_everything,
    ),
    (
        "pd::network_config_is_refused_with_prefill_instances",
        pd_tests::network_config_is_refused_with_prefill_instances,
    ),
    (
        "pd::moe_prefill_keeps_its_expert_collectives_off_the_receivers",
        pd_tests::moe_prefill_keeps_its_expert_collectives_off_the_receivers,
    ),
    (
        "pd::real_astra_sim_reproduces_the_published_pd_example_when_available",
        pd_tests::real_astra_sim_reproduces_the_published_pd_example_when_available,
    ),
];

/// The `power` tests.
const POWER: &[Test] = &[(
    "power::power_under_astra_sim_matches_the_analytical_run",
    power_tests::power_under_astra_sim_matches_the_analytical_run,
)];

/// The `pp` tests.
const PP: &[Test] = &[
    (
        "pp::pipelined_instances_match_the_analytical_run",
        pp_tests::pipelined_instances_match_the_analytical_run,
    ),
    (
        "pp::moe_dp_group_with_pp_matches_the_analytical_run",
        pp_tests::moe_dp_group_with_pp_matches_the_analytical_run,
    ),
    ("pp::refusals_name_the_key", pp_tests::refusals_name_the_key),
    (
        "pp::real_astra_sim_reproduces_the_published_pp_examples_when_available",
        pp_tests::real_astra_sim_reproduces_the_published_pp_examples_when_available,
    ),
    (
        "pp::real_astra_sim_on_the_published_moe_dp_pp_example_when_available",
        pp_tests::real_astra_sim_on_the_published_moe_dp_pp_example_when_available,
    ),
];

/// The `dp` tests.
const DP: &[Test] = &[
    (
        "dp::moe_groups_match_the_analytical_run",
        dp_tests::moe_groups_match_the_analytical_run,
    ),
    (
        "dp::dense_group_members_run_their_own_processes",
        dp_tests::dense_group_members_run_their_own_processes,
    ),
    (
        "dp::a_decode_group_behind_a_prefill_instance",
        dp_tests::a_decode_group_behind_a_prefill_instance,
    ),
    (
        "dp::a_prefill_group_in_front_of_a_decode_instance",
        dp_tests::a_prefill_group_in_front_of_a_decode_instance,
    ),
    (
        "dp::real_astra_sim_runs_a_prefill_group_when_available",
        dp_tests::real_astra_sim_runs_a_prefill_group_when_available,
    ),
    (
        "dp::a_fault_in_a_group_stops_everything",
        dp_tests::a_fault_in_a_group_stops_everything,
    ),
    (
        "dp::network_config_with_a_group_is_refused",
        dp_tests::network_config_with_a_group_is_refused,
    ),
    (
        "dp::real_astra_sim_on_published_dp_examples_when_available",
        dp_tests::real_astra_sim_on_published_dp_examples_when_available,
    ),
];
