use super::*;
use blis_cosim::latency::host::program::PROGRAM_HOST_ENTRY;

/// The part's host numbers with a per-request share: 100 µs a step, 12.7 µs a request.
fn tpu_host() -> HostSpec {
    HostSpec {
        seq_cpu_ns: 12_700.0,
        ..host()
    }
}

fn program_host(block_ns: Nanos, async_scheduling: bool) -> ProgramHost {
    let inner = Box::new(Fixed {
        block_ns,
        block: "qkv_proj",
        last_pad: 0,
        tells_list: false,
        listed: Default::default(),
    });
    ProgramHost::new(inner, tpu_host(), async_scheduling)
}

/// Two decodes at 40 and 90 tokens of context.
const TWO_DECODES: [BatchItem; 2] = [
    BatchItem {
        new_tokens: 1,
        context_tokens: 40,
    },
    BatchItem {
        new_tokens: 1,
        context_tokens: 90,
    },
];

#[test]
fn a_program_step_follows_the_hosts_cpu_work() {
    // Two decodes: the program 2,000 + 2 × 10,000 ns, after 100,000 + 2 × 12,700 ns of CPU
    // work, whatever the step before it (no overlap: the host waits for the sampled tokens).
    let items = TWO_DECODES;
    let mut m = program_host(10_000, false);
    for _ in 0..2 {
        let batch = BatchDesc::new(&items).with_back_to_back(true);
        assert_eq!(m.step_time(&batch).unwrap(), 147_400);
    }
    let layers = m.breakdown(&BatchDesc::new(&items)).unwrap();
    let cpu = layers.last().unwrap();
    assert_eq!(
        (cpu.name, cpu.time_ns, cpu.is_comm),
        (PROGRAM_HOST_ENTRY, 125_400, true)
    );
    let total: Nanos = layers.iter().map(|l| l.repeats * l.time_ns).sum();
    assert_eq!(total, 147_400);
    // One request: 112,700 ns of CPU work.
    assert_eq!(m.step_time(&BatchDesc::new(&items[..1])).unwrap(), 134_700);
}

#[test]
fn under_asynchronous_scheduling_the_cpu_work_hides_behind_the_previous_program() {
    let back_to_back = BatchDesc::new(&TWO_DECODES).with_back_to_back(true);
    let after_idle = BatchDesc::new(&TWO_DECODES);
    // CPU work 100,000 + 2 × 12,700 = 125,400 ns; programs of 2,000 + 2 × 10,000 = 22,000 ns.
    let mut m = program_host(10_000, true);
    // The first step has nothing to hide behind: all of it.
    assert_eq!(m.step_time(&back_to_back).unwrap(), 147_400);
    // Back to back: 125,400 − 22,000 = 103,400 ns of it still shows.
    assert_eq!(m.step_time(&back_to_back).unwrap(), 125_400);
    let layers = m.breakdown(&back_to_back).unwrap();
    let cpu = layers.last().unwrap();
    assert_eq!((cpu.name, cpu.time_ns), (PROGRAM_HOST_ENTRY, 103_400));
    // After an idle gap the host starts with the step: all of it again.
    assert_eq!(m.step_time(&after_idle).unwrap(), 147_400);
    // Programs of 2,000 + 2 × 100,000 = 202,000 ns cover the CPU work: the step is the program.
    let mut m = program_host(100_000, true);
    assert_eq!(m.step_time(&back_to_back).unwrap(), 327_400);
    assert_eq!(m.step_time(&back_to_back).unwrap(), 202_000);
}
