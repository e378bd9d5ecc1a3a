//! Unit tests of `blis_cosim::setup::threads`.

use blis_cosim::setup::{AUTO_FROM_REQUESTS, Threads};

#[test]
fn the_flag_names_the_threads_and_auto_takes_two_for_large_runs_only() {
    assert_eq!(Threads::from_flag(None), Threads::Auto);
    assert_eq!(Threads::from_flag(Some(1)), Threads::One);
    assert_eq!(Threads::from_flag(Some(2)), Threads::Two);
    assert!(!Threads::One.second(u64::MAX));
    assert!(Threads::Two.second(1));
    assert!(!Threads::Auto.second(AUTO_FROM_REQUESTS - 1));
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    assert_eq!(Threads::Auto.second(AUTO_FROM_REQUESTS), cores >= 2);
}
