use blis_cosim::engine::events::{EventKind, EventQueue, Phase};

#[test]
fn events_pop_by_time_then_completions_by_instance_then_arrivals_then_insertion() {
    let mut q = EventQueue::with_capacity(8);
    q.push(20, EventKind::Arrival);
    q.push(10, EventKind::Arrival);
    q.push(10, EventKind::StepEnd { instance: 3 });
    q.push(10, EventKind::StepEnd { instance: 1 });
    q.push(5, EventKind::StepEnd { instance: 7 });
    q.push(10, EventKind::StepEnd { instance: 1 });
    let mut order = Vec::new();
    while let Some(e) = q.pop_until(u64::MAX) {
        order.push((e.time, e.kind, e.seq));
    }
    use EventKind::{Arrival, StepEnd};
    assert_eq!(
        order,
        [
            (5, StepEnd { instance: 7 }, 4),
            (10, StepEnd { instance: 1 }, 3),
            (10, StepEnd { instance: 1 }, 5),
            (10, StepEnd { instance: 3 }, 2),
            (10, Arrival, 1),
            (20, Arrival, 0),
        ]
    );
}

#[test]
fn transfer_ends_come_after_step_ends_and_before_arrivals() {
    let mut q = EventQueue::with_capacity(4);
    q.push(10, EventKind::Arrival);
    q.push(10, EventKind::TransferEnd { sender: 0 });
    q.push(10, EventKind::StepEnd { instance: 5 });
    q.push(10, EventKind::TransferEnd { sender: 2 });
    let mut order = Vec::new();
    while let Some(e) = q.pop_until(10) {
        order.push(e.kind);
    }
    use EventKind::{Arrival, StepEnd, TransferEnd};
    assert_eq!(
        order,
        [
            StepEnd { instance: 5 },
            TransferEnd { sender: 0 },
            TransferEnd { sender: 2 },
            Arrival
        ]
    );
}

/// The same-instant order, as a table: each kind of event at one instant, scheduled in
/// reverse, comes out phase by phase and by instance within a phase.
#[test]
fn same_instant_order_table() {
    use EventKind::{
        Arrival, Control, Replica, ScaleTick, StageFree, StepEnd, Timeout, TransferEnd,
    };
    let table = [
        (StepEnd { instance: 0 }, Phase::StepEnds),
        (StepEnd { instance: 2 }, Phase::StepEnds),
        (TransferEnd { sender: 1 }, Phase::TransferEnds),
        (TransferEnd { sender: 3 }, Phase::TransferEnds),
        (StageFree { instance: 0 }, Phase::StagesFree),
        (StageFree { instance: 4 }, Phase::StagesFree),
        (
            Replica {
                instance: 0,
                epoch: 1,
            },
            Phase::Scaling,
        ),
        (
            Replica {
                instance: 3,
                epoch: 1,
            },
            Phase::Scaling,
        ),
        (ScaleTick, Phase::Scaling),
        (Control, Phase::Control),
        (Arrival, Phase::Arrivals),
        (Timeout, Phase::Timeouts),
    ];
    let mut q = EventQueue::with_capacity(table.len());
    for (kind, phase) in table.iter().rev() {
        assert_eq!(kind.phase(), *phase);
        q.push(100, *kind);
    }
    let order: Vec<EventKind> = std::iter::from_fn(|| q.pop_until(100))
        .map(|e| e.kind)
        .collect();
    assert_eq!(order, table.map(|(kind, _)| kind));
    assert!(
        Phase::Timeouts < Phase::StartSteps,
        "steps start after every event"
    );
}

#[test]
fn the_next_step_end_is_named_only_when_it_comes_first() {
    let mut q = EventQueue::with_capacity(3);
    assert_eq!(q.next_step_end(), None);
    q.push(5, EventKind::Arrival);
    q.push(7, EventKind::StepEnd { instance: 3 });
    q.push(7, EventKind::StepEnd { instance: 2 });
    assert_eq!(q.next_step_end(), None, "an arrival comes first");
    q.pop_until(5);
    assert_eq!(q.next_step_end(), Some(2), "then instance 2's step end");
    q.pop_until(7);
    assert_eq!(q.next_step_end(), Some(3));
}

#[test]
fn pop_until_stops_at_the_instant() {
    let mut q = EventQueue::with_capacity(2);
    q.push(7, EventKind::Arrival);
    q.push(9, EventKind::StepEnd { instance: 0 });
    assert_eq!(q.next_time(), Some(7));
    assert_eq!(q.pop_until(6), None);
    assert_eq!(q.pop_until(7).map(|e| e.time), Some(7));
    assert_eq!(q.pop_until(7), None);
    assert_eq!(q.next_time(), Some(9));
}

#[test]
fn a_step_end_is_lone_only_when_nothing_else_is_due_at_its_instant() {
    let mut q = EventQueue::with_capacity(4);
    assert_eq!(q.lone_step_end(7), None);
    q.push(7, EventKind::StepEnd { instance: 2 });
    assert_eq!(q.lone_step_end(7), Some(2));
    assert_eq!(q.lone_step_end(6), None, "not at that instant");
    q.push(9, EventKind::StepEnd { instance: 1 });
    q.push(8, EventKind::Arrival);
    assert_eq!(q.lone_step_end(7), Some(2));
    assert_eq!(q.second_step_end(), None, "an arrival comes second");
    q.push(7, EventKind::Arrival);
    assert_eq!(q.lone_step_end(7), None, "an arrival at the same instant");
    q.pop_until(7);
    assert_eq!(q.lone_step_end(7), None, "an arrival comes first");
}

/// Replacing the earliest event pops in the order popping it and pushing the new one
/// gives, insertion numbers included.
#[test]
fn replacing_the_earliest_event_is_popping_it_then_pushing() {
    let mut state = 7u64;
    let mut draw = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % 50
    };
    let (mut a, mut b) = (EventQueue::with_capacity(4), EventQueue::with_capacity(4));
    for k in 0..40u32 {
        let (time, instance) = (draw(), k % 5);
        a.push(time, EventKind::StepEnd { instance });
        b.push(time, EventKind::StepEnd { instance });
    }
    for k in 0..200u32 {
        let second = a.second_step_end();
        let first = a.pop_until(u64::MAX).unwrap();
        assert_eq!(second, a.next_step_end(), "the second comes next");
        let kind = match k % 3 {
            0 => EventKind::Arrival,
            _ => EventKind::StepEnd { instance: k % 7 },
        };
        let time = first.time + draw();
        a.push(time, kind);
        assert_eq!(b.peek(), Some(first));
        b.replace_next(time, kind);
    }
    let rest =
        |q: &mut EventQueue| std::iter::from_fn(|| q.pop_until(u64::MAX)).collect::<Vec<_>>();
    assert_eq!(rest(&mut a), rest(&mut b));
}

/// The queue pops in the order of a plain sort by (time, phase, instance, insertion) under
/// random pushes, pops and replacements of the earliest event, heaps of every size from
/// empty up included.
#[test]
fn the_queue_pops_as_a_sorted_list_does() {
    use EventKind::{Arrival, Control, StepEnd, TransferEnd};
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut draw = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let mut q = EventQueue::with_capacity(2);
    // The reference: (time, phase, subject, insertion, kind), the earliest taken by a scan.
    let mut list: Vec<(u64, Phase, u32, u64, EventKind)> = Vec::new();
    let (mut seq, mut now) = (0u64, 0u64);
    for _ in 0..5_000 {
        let (time, subject) = (now + draw(40), draw(6) as u32);
        let kind = match draw(4) {
            0 => Arrival,
            1 => Control,
            2 => TransferEnd { sender: subject },
            _ => StepEnd { instance: subject },
        };
        let subject = match kind {
            Arrival | Control => 0,
            _ => subject,
        };
        let earliest = list
            .iter()
            .enumerate()
            .min_by_key(|(_, e)| (e.0, e.1, e.2, e.3));
        let earliest = earliest.map(|(k, _)| k);
        match draw(3) {
            0 if list.len() < 64 => {
                q.push(time, kind);
                list.push((time, kind.phase(), subject, seq, kind));
                seq += 1;
            }
            1 if earliest.is_some() => {
                let want = list.remove(earliest.unwrap());
                let got = q.pop_until(u64::MAX).expect("an event");
                assert_eq!((got.time, got.kind, got.seq), (want.0, want.4, want.3));
                now = got.time;
            }
            _ if earliest.is_some() => {
                let want = list.remove(earliest.unwrap());
                assert_eq!(q.peek().map(|e| (e.time, e.kind)), Some((want.0, want.4)));
                q.replace_next(time, kind);
                list.push((time, kind.phase(), subject, seq, kind));
                seq += 1;
                now = want.0;
            }
            _ => assert_eq!(q.pop_until(u64::MAX), None, "the queue is empty"),
        }
    }
    list.sort_by_key(|e| (e.0, e.1, e.2, e.3));
    for want in list {
        let got = q.pop_until(u64::MAX).expect("an event");
        assert_eq!((got.time, got.kind, got.seq), (want.0, want.4, want.3));
    }
    assert_eq!(q.pop_until(u64::MAX), None);
}

/// Past `2^29` insertion numbers the queued events are numbered again in the same order: the
/// queue pops as a plain sort by (time, phase, instance, insertion) across the renumbering,
/// with replica epochs and every kind kept.
#[test]
fn the_queue_pops_in_order_across_its_renumbering() {
    use EventKind::{Arrival, Replica, ScaleTick, StepEnd, TransferEnd};
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut draw = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let first = (1 << 29) - 300;
    let mut q = EventQueue::numbered_from(4, first);
    let mut list: Vec<(u64, Phase, u32, u64, EventKind)> = Vec::new();
    let (mut seq, mut now, mut popped) = (0u64, 0u64, 0);
    for _ in 0..3_000 {
        let (time, subject) = (now + draw(30), draw(5) as u32);
        let kind = match draw(5) {
            0 => Arrival,
            1 => ScaleTick,
            2 => Replica {
                instance: subject,
                epoch: draw(3) as u32,
            },
            3 => TransferEnd { sender: subject },
            _ => StepEnd { instance: subject },
        };
        let subject = match kind {
            Arrival => 0,
            ScaleTick => u32::MAX,
            _ => subject,
        };
        if draw(2) == 0 || list.len() < 8 {
            q.push(time, kind);
            list.push((time, kind.phase(), subject, seq, kind));
            seq += 1;
            continue;
        }
        let earliest = (0..list.len())
            .min_by_key(|&k| (list[k].0, list[k].1, list[k].2, list[k].3))
            .expect("an event");
        let want = list.remove(earliest);
        let got = q.pop_until(u64::MAX).expect("an event");
        assert_eq!((got.time, got.kind), (want.0, want.4));
        now = got.time;
        popped += 1;
    }
    assert!(seq > 300 && popped > 300, "the numbers ran out midway");
    list.sort_by_key(|e| (e.0, e.1, e.2, e.3));
    for want in list {
        let got = q.pop_until(u64::MAX).expect("an event");
        assert_eq!((got.time, got.kind), (want.0, want.4));
    }
    assert_eq!(q.pop_until(u64::MAX), None);
}
