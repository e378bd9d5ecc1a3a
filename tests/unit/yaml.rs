//! Unit tests of `blis_cosim::yaml`.

use blis_cosim::yaml::*;

#[test]
fn every_bundled_yaml_file_is_far_below_the_limit() {
    let root = std::path::Path::new(root!());
    let mut checked = 0;
    for dir in [
        "examples/scenarios",
        "examples/sweeps",
        "examples/policy",
        "examples/policy-search",
        "examples",
        "model_archs/layers",
        "astra-sim-configs",
    ] {
        let Ok(entries) = std::fs::read_dir(root.join(dir)) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let yaml = path.extension().is_some_and(|e| e == "yaml" || e == "yml");
            if yaml {
                let text = std::fs::read_to_string(&path).unwrap();
                check_nesting(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                checked += 1;
            }
        }
    }
    assert!(checked > 15, "{checked} files");
}

#[test]
fn deep_flow_block_and_entry_nesting_is_refused_with_its_line() {
    let deep = MAX_DEPTH + 1;
    let flow = format!("a: 1\nb: {}{}\n", "[".repeat(deep), "]".repeat(deep));
    assert_eq!(check_nesting(&flow), Err(TooDeep { line: 2 }));
    let entries = format!("x:\n{}1\n", "- ".repeat(deep));
    assert_eq!(check_nesting(&entries), Err(TooDeep { line: 2 }));
    let block: String = (0..deep)
        .map(|i| format!("{}k{i}:\n", " ".repeat(i)))
        .collect();
    assert_eq!(check_nesting(&block), Err(TooDeep { line: deep }));
    // A flow collection spread over lines counts on every line.
    let spread = format!("a: {}\n  1\n{}\n", "{b: ".repeat(deep), "}".repeat(deep));
    assert_eq!(check_nesting(&spread), Err(TooDeep { line: 1 }));
    let message = TooDeep { line: 2 }.to_string();
    assert!(
        message.contains("line 2") && message.contains("256"),
        "{message}"
    );
}

#[test]
fn brackets_in_quotes_and_comments_do_not_count_and_depth_is_per_value() {
    let many = "[".repeat(MAX_DEPTH * 2);
    let text = format!("a: \"{many}\"\nb: '{many}'\nc: 1 # {many}\n# {many}\nd: [[1], [2], [3]]\n");
    check_nesting(&text).unwrap();
    // Siblings do not add up: 300 lists side by side nest two deep.
    let siblings = format!("a: [{}]\n", vec!["[1]"; 300].join(", "));
    check_nesting(&siblings).unwrap();
    let near = format!(
        "a: {}{}\n",
        "[".repeat(MAX_DEPTH - 1),
        "]".repeat(MAX_DEPTH - 1)
    );
    check_nesting(&near).unwrap();
}
