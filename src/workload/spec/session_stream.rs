//! A spec's workload drawn as the run reaches it, sessions included: each session is planned
//! when its first arrival comes and started then (its first requests join the stream), and
//! its later requests are released as earlier ones finish ([`LiveSessions`]), so that only
//! the sessions in flight are held, and of a conversation only the turns it has reached.
//!
//! The stream gives the requests a whole generated workload starts with (its flat requests
//! and the requests its sessions start with), in the same order (arrival, then id), with the
//! same ids, sizes and token ids: every session is drawn from its own seeded streams, the
//! same whenever it is drawn. What is drawn waits until nothing still to be drawn can come
//! before it ([`Generator::not_before`]): a client whose prompts take time to upload may send
//! a short prompt that arrives before a long one sent earlier.

use super::generate::Generator;
use crate::Nanos;
use crate::workload::sessions::{LiveSessions, SharedSessions};
use crate::workload::{ByArrival, Request, RequestClasses};
use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

/// Where an arrival known before the run moves (a replay mode's speed-up or concurrency;
/// keeps their order).
pub type Retime<'a> = Box<dyn Fn(Nanos) -> Nanos + 'a>;

/// The requests a spec's workload starts with, drawn one at a time (see the module doc).
pub struct SessionStream<'a> {
    generator: Generator<'a>,
    sessions: Either<'a>,
    /// Flat requests drawn and requests the sessions started so far start with, not yet
    /// handed out.
    started: BinaryHeap<Reverse<ByArrival>>,
    retime: Retime<'a>,
    scratch: Vec<Request>,
    /// Requests handed out so far.
    count: Rc<Cell<u64>>,
}

/// The sessions a stream starts: shared with the run, or its own (a dry pass).
enum Either<'a> {
    Shared(SharedSessions<'a>),
    Own(RefCell<LiveSessions<'a>>),
}

impl<'a> SessionStream<'a> {
    /// The stream of `generator`'s workload, its arrivals moved by `retime`, its sessions
    /// started in `sessions` (which the run's injector and observer share).
    pub fn new(
        generator: Generator<'a>,
        sessions: SharedSessions<'a>,
        retime: Retime<'a>,
    ) -> SessionStream<'a> {
        SessionStream::with(generator, Either::Shared(sessions), retime)
    }

    /// The same stream with sessions that are started and forgotten (their requests' networks
    /// read from `clients`): what the workload starts with, without holding it.
    pub fn dry(
        generator: Generator<'a>,
        clients: Option<&'a RequestClasses>,
        retime: Retime<'a>,
    ) -> SessionStream<'a> {
        let sessions = LiveSessions::dry(clients);
        SessionStream::with(generator, Either::Own(RefCell::new(sessions)), retime)
    }

    fn with(generator: Generator<'a>, sessions: Either<'a>, retime: Retime<'a>) -> Self {
        SessionStream {
            generator,
            sessions,
            started: BinaryHeap::new(),
            retime,
            scratch: Vec::new(),
            count: Rc::new(Cell::new(0)),
        }
    }

    /// The count of requests handed out so far, readable after the stream is gone.
    pub fn counter(&self) -> Rc<Cell<u64>> {
        Rc::clone(&self.count)
    }

    /// Draws the generator's next arrival: a flat request, handed back, or a session,
    /// started, what it brings waiting in `started`.
    fn advance(&mut self) -> Drawn {
        let Some(g) = self.generator.next() else {
            return Drawn::Spent;
        };
        let Some((mut header, plan, tail)) = self.generator.session_lazily(&g) else {
            let r = self.generator.request(&g);
            let arrival_ns = (self.retime)(r.arrival_ns);
            return Drawn::Flat(Request { arrival_ns, ..r });
        };
        header.arrival_ns = (self.retime)(header.arrival_ns);
        let sessions = match &self.sessions {
            Either::Shared(s) => &**s,
            Either::Own(s) => s,
        };
        sessions
            .borrow_mut()
            .start(header, plan, tail, &mut self.scratch);
        self.started
            .extend(self.scratch.drain(..).map(|r| Reverse(ByArrival(r))));
        Drawn::Started
    }

    /// Whether a request arriving at `arrival_ns` is due: no later than anything still to be
    /// drawn (at equal times the drawn one has the lower id).
    fn due(&self, arrival_ns: Nanos) -> bool {
        let bound = self.generator.not_before().map(|t| (self.retime)(t));
        bound.is_none_or(|b| arrival_ns <= b)
    }

    /// Hands `r` out, counted.
    fn hand_out(&mut self, r: Request) -> Option<Request> {
        self.count.set(self.count.get() + 1);
        Some(r)
    }
}

/// What [`SessionStream::advance`] drew.
enum Drawn {
    /// Nothing: the generator is spent.
    Spent,
    /// A flat request, not queued.
    Flat(Request),
    /// A session, started: its first requests wait in `started`.
    Started,
}

impl Iterator for SessionStream<'_> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        loop {
            // Whatever is drawn and due goes first.
            if let Some(Reverse(first)) = self.started.peek()
                && self.due(first.0.arrival_ns)
            {
                let r = self.started.pop().map(|r| r.0.0)?;
                return self.hand_out(r);
            }
            match self.advance() {
                // Due at once with nothing else drawn: handed out without queueing it.
                Drawn::Flat(r) if self.started.is_empty() && self.due(r.arrival_ns) => {
                    return self.hand_out(r);
                }
                Drawn::Flat(r) => self.started.push(Reverse(ByArrival(r))),
                Drawn::Spent if self.started.is_empty() => return None,
                Drawn::Spent | Drawn::Started => {}
            }
        }
    }
}
