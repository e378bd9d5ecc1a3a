use blis_cosim::config::InstanceRole;
use blis_cosim::engine::eligibility::{Eligibility, unservable};
use blis_cosim::engine::{InstanceSetup, Setups};
use blis_cosim::scheduler::SchedulerConfig;
use blis_cosim::workload::Request;

fn setup(model: &str, num_blocks: u32) -> InstanceSetup {
    InstanceSetup {
        model_name: model.into(),
        max_model_len: 100_000,
        num_blocks,
        scheduler: SchedulerConfig {
            max_num_seqs: Some(4),
            max_num_batched_tokens: 256,
            long_prefill_token_threshold: 0,
            enable_chunked_prefill: true,
            reserve_full_isl: false,
            enable_prefix_caching: false,
            block_size: 16,
            async_scheduling: false,
        },
        dp_group: None,
        lower_tier: None,
        pipeline: None,
        sglang: None,
    }
}

fn request(id: u64, model: Option<&str>, input_toks: u32, output_toks: u32) -> Request {
    Request {
        id,
        line: id + 1,
        model: model.map(Into::into),
        arrival_ns: 0,
        input_toks,
        output_toks,
        token_ids: Vec::new(),
        prompt_blocks: None,
        known_hashes: None,
    }
}

/// The lists instance by instance, as the rules state them.
fn reference(r: &Request, setups: Setups<'_>, roles: &[InstanceRole]) -> [Vec<u32>; 2] {
    let ok = |i: usize| unservable(r, &setups[i], roles[i]).is_none();
    let n = setups.len();
    let decode: Vec<u32> = (0..n)
        .filter(|&d| roles[d] == InstanceRole::Decode && ok(d))
        .map(|d| d as u32)
        .collect();
    let has_decode = |i: usize| {
        decode
            .iter()
            .any(|&d| setups[d as usize].model_name == setups[i].model_name)
    };
    let arrival = (0..n)
        .filter(|&i| ok(i))
        .filter(|&i| match roles[i] {
            InstanceRole::Colocated => true,
            InstanceRole::Prefill => has_decode(i),
            InstanceRole::Decode => false,
        })
        .map(|i| i as u32)
        .collect();
    [arrival, decode]
}

/// Requests of two models and many lengths on instances of several sizes and roles get
/// the lists the rules give instance by instance, the same lists again when their
/// classes accept them alike, and the same refusals.
#[test]
fn lists_by_class_equal_the_lists_by_instance() {
    use InstanceRole::{Colocated, Decode, Prefill};
    let layout = [
        ("a", 8, Colocated),
        ("a", 64, Colocated),
        ("b", 8, Prefill),
        ("a", 8, Colocated),
        ("b", 32, Decode),
        ("b", 8, Prefill),
        ("a", 64, Colocated),
        ("b", 4, Decode),
    ];
    let setups: Vec<_> = layout.iter().map(|&(m, b, _)| setup(m, b)).collect();
    let roles: Vec<_> = layout.iter().map(|l| l.2).collect();
    let mut requests = Vec::new();
    for (k, input) in [1u32, 40, 100, 130, 200, 500, 1000].into_iter().enumerate() {
        for (j, model) in [None, Some("a"), Some("b")].into_iter().enumerate() {
            let id = (k * 3 + j) as u64;
            requests.push(request(id, model, input, 20));
        }
    }
    let servable: Vec<Request> = requests
        .iter()
        .filter(|r| !reference(r, (&setups[..]).into(), &roles)[0].is_empty())
        .cloned()
        .collect();
    let mut eligibility = Eligibility::compute(&servable, (&setups[..]).into(), &roles).unwrap();
    for (index, r) in servable.iter().enumerate() {
        let expected = reference(r, (&setups[..]).into(), &roles);
        let groups = eligibility.groups(index);
        assert_eq!(
            eligibility.arrival(groups),
            &expected[0][..],
            "request {}",
            r.id
        );
        assert_eq!(
            eligibility.decode(groups),
            &expected[1][..],
            "request {}",
            r.id
        );
    }
    for r in &requests {
        let expected = reference(r, (&setups[..]).into(), &roles);
        match eligibility.groups_for(r, (&setups[..]).into()) {
            Ok(groups) => {
                assert_eq!(eligibility.arrival(groups), &expected[0][..]);
                assert_eq!(eligibility.decode(groups), &expected[1][..]);
            }
            Err(_) => assert!(expected[0].is_empty(), "request {} refused", r.id),
        }
    }
    assert!(servable.len() < requests.len(), "some requests are refused");
}

/// Requests whose classes accept them as the last one's did, as an earlier one's did, or as
/// none did (refused in between) get the lists the rules give, each time.
#[test]
fn a_pattern_like_the_last_or_an_earlier_one_gives_the_rules_lists() {
    use InstanceRole::Colocated;
    let layout = [("a", 8), ("a", 64), ("b", 16)];
    let setups: Vec<_> = layout.iter().map(|&(m, b)| setup(m, b)).collect();
    let roles = vec![Colocated; layout.len()];
    let mut eligibility = Eligibility::compute(&[], (&setups[..]).into(), &roles).unwrap();
    // Inputs and models: 100 tokens fit everywhere, 500 only in 64 blocks, 5000 nowhere.
    let asks = [
        (100, None),
        (100, None),
        (500, None),
        (500, None),
        (5000, None),
        (500, None),
        (100, Some("b")),
        (100, None),
        (5000, Some("a")),
        (100, None),
        (500, Some("a")),
    ];
    for (id, &(input, model)) in asks.iter().enumerate() {
        let r = request(id as u64, model, input, 20);
        let expected = reference(&r, (&setups[..]).into(), &roles);
        match eligibility.groups_for(&r, (&setups[..]).into()) {
            Ok(groups) => {
                assert_eq!(
                    eligibility.arrival(groups),
                    &expected[0][..],
                    "request {id}"
                );
                assert_eq!(eligibility.decode(groups), &expected[1][..], "request {id}");
            }
            Err(_) => assert!(expected[0].is_empty(), "request {id} refused"),
        }
    }
}
