//! LLMServingSim 2.0's instance keys (`npu_num`, `npu_group`), read beside v1.1's.
//!
//! 2.0 (commit 9e3f0ec, "Release LLMServingSim 2.0") gives an instance's GPUs as `npu_num`,
//! all the GPUs of the instance, and `npu_group`, its pipeline stages (its traces call it
//! `model_parallel_NPU_group`; its scheduler keeps up to `npu_group` batches in flight, one per
//! stage); each stage is `npu_num / npu_group` GPUs of tensor parallelism (its
//! `npus_per_group`, the TP degree of every profile lookup and all-reduce). A MoE model's
//! experts are spread over those TP GPUs whole, which is v1.1's default `ep_size = tp_size`.
//! v1.1 replaced the two keys by `num_npus`, `tp_size` and `pp_size`, so here
//! `npu_num` = `num_npus`, `npu_group` = `pp_size`, and TP = `npu_num / npu_group`.
//!
//! 2.0 refuses `npu_group > npu_num` and floors `npu_num / npu_group`; a remainder would leave
//! GPUs idle that its memory model still counts, so it is refused here too. An instance giving
//! keys of both releases is refused: which one would win is not a thing either release says.

use super::value_line::{Step, json_line};
use super::{Bound, ConfigError, InstanceSpec, Problem};

/// Checks the 2.0 keys of instance `i` of node `n`, whose file is `text`: not beside v1.1's,
/// at least 1, `npu_group` only with `npu_num`, and `npu_num` a multiple of `npu_group`.
/// Errors name the key's line.
pub fn check(
    inst: &InstanceSpec,
    (n, i): (usize, usize),
    text: &str,
    source_name: &str,
) -> Result<(), ConfigError> {
    let error = |key: &str, problem: Problem| {
        let path = [
            Step::Key("nodes"),
            Step::Index(n),
            Step::Key("instances"),
            Step::Index(i),
            Step::Key(key),
        ];
        let field = format!("nodes[{n}].instances[{i}].{key}");
        let error = ConfigError::invalid(source_name, field, problem);
        match json_line(text, &path) {
            Some(line) => error.at_line(line),
            None => error,
        }
    };
    let first_v2 = match (inst.npu_num, inst.npu_group) {
        (None, None) => return Ok(()),
        (Some(_), _) => "npu_num",
        (None, Some(_)) => "npu_group",
    };
    // v1.1's keys describing the instance's GPUs and their parallelism.
    let v1_keys = [
        ("num_npus", inst.num_npus.is_some()),
        ("tp_size", inst.tp_size.is_some()),
        ("pp_size", inst.pp_size.is_some()),
        ("ep_size", inst.ep_size.is_some()),
        ("dp_group", inst.dp_group.is_some()),
    ];
    if let Some((other, _)) = v1_keys.iter().find(|(_, given)| *given) {
        let other = (*other).to_owned();
        return Err(error(first_v2, Problem::MixedSchemas { other }));
    }
    for (key, value) in [("npu_num", inst.npu_num), ("npu_group", inst.npu_group)] {
        if value == Some(0) {
            return Err(error(key, Problem::out_of_range(0, Bound::AtLeast(1))));
        }
    }
    let Some(npus) = inst.npu_num else {
        let what = "npu_num, the instance's GPUs, of which npu_group counts the pipeline stages";
        return Err(error("npu_group", Problem::needs(what)));
    };
    let stages = inst.npu_group.unwrap_or(1);
    if stages > npus {
        let why = format!("npu_num is {npus}: there cannot be more pipeline stages than GPUs");
        return Err(error("npu_group", Problem::disagrees(stages, why)));
    }
    if npus % stages != 0 {
        let why = format!(
            "npu_num is {npus}: each of the npu_group pipeline stages runs npu_num / npu_group \
             GPUs of tensor parallelism, so npu_num must be a multiple of npu_group"
        );
        return Err(error("npu_group", Problem::disagrees(stages, why)));
    }
    Ok(())
}
