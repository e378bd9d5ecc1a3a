use super::*;
use blis_cosim::latency::host::program::PROGRAM_HOST_ENTRY;

/// The part's host numbers with a per-request share: 100 µs a step, 12.7 µs a request.
fn tpu_host() -> HostSpec {
    HostSpec {
        seq_cpu_ns: 12_700.0,
        ..host()
    }
}

fn program_host(block_ns: Nanos) -> ProgramHost {
    let inner = Box::new(Fixed {
        block_ns,
        block: "qkv_proj",
        last_pad: 0,
        tells_list: false,
        listed: Default::default(),
    });
    ProgramHost::new(inner, tpu_host())
}

#[test]
fn a_program_step_follows_the_hosts_cpu_work() {
    // Two decodes: the program 2,000 + 2 × 10,000 ns, after 100,000 + 2 × 12,700 ns of CPU
    // work, whatever the step before it (no overlap: the host waits for the sampled tokens).
    let items = [
        BatchItem {
            new_tokens: 1,
            context_tokens: 40,
        },
        BatchItem {
            new_tokens: 1,
            context_tokens: 90,
        },
    ];
    let mut m = program_host(10_000);
    for _ in 0..2 {
        assert_eq!(m.step_time(&BatchDesc::new(&items)).unwrap(), 147_400);
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
