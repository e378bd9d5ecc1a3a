//! Unit tests of `blis_cosim::config::dtype`.

use blis_cosim::config::Dtype;

#[test]
fn parses_vllm_and_short_names() {
    assert_eq!("bfloat16".parse::<Dtype>(), Ok(Dtype::Bfloat16));
    assert_eq!("BF16".parse::<Dtype>(), Ok(Dtype::Bfloat16));
    assert_eq!("float16".parse::<Dtype>(), Ok(Dtype::Float16));
    assert_eq!("fp8".parse::<Dtype>().unwrap().bytes(), 1);
    assert!("bf17".parse::<Dtype>().is_err());
}
