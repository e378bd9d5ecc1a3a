//! A dataset with sessions read as the run goes: its entries come from the file in arrival
//! order ([`super::DatasetRows`]); a session is started when its start comes
//! ([`super::sessions::LiveSessions`]: its first requests join the stream, its later ones are
//! released as earlier ones finish, and it is let go once it has ended), so that only the
//! sessions in flight are held.
//!
//! The stream gives the requests a whole read starts the run with (the flat requests and the
//! requests the sessions start with) in the same order (moved arrival, then id), with the same
//! ids: an entry, or what a session starts with, waits until no entry still to read can come
//! before it.

use super::flat::DatasetRow;
use super::sessions::SharedSessions;
use super::spec::Retime;
use super::{ArrivalKey, ByArrival, Request, SessionLine};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::rc::Rc;

/// The requests a dataset with sessions starts the run with, read as the run reaches them
/// (see the module doc).
pub struct DatasetSessions<'a> {
    rows: Box<dyn Iterator<Item = DatasetRow> + 'a>,
    /// Whether the rows come in (moved arrival, id) order: in arrival order with arrivals
    /// kept, or in file order with every arrival moved to one time. Else (arrivals moved
    /// closer, which can make two equal) entries of one moved arrival wait until all of them
    /// are read.
    in_order: bool,
    /// The next entry read, its arrival moved, not queued yet.
    next_row: Option<DatasetRow>,
    sessions: SharedSessions<'a>,
    /// Entries read and requests sessions started with, not handed out or started yet.
    pending: BinaryHeap<Reverse<ByArrival<DatasetRow>>>,
    retime: Retime<'a>,
    scratch: Vec<Request>,
    /// Requests handed out so far.
    count: Rc<Cell<u64>>,
}

impl<'a> DatasetSessions<'a> {
    /// The stream of `rows` (a dataset's, [`super::DatasetRows`], read here or on another
    /// thread), their arrivals moved by `retime`, their sessions started in `sessions` (shared
    /// with the run's injector and observer, or a dry pass's own); `in_order` says whether the
    /// rows come in (moved arrival, id) order.
    pub fn new(
        rows: Box<dyn Iterator<Item = DatasetRow> + 'a>,
        in_order: bool,
        sessions: SharedSessions<'a>,
        retime: Retime<'a>,
    ) -> DatasetSessions<'a> {
        DatasetSessions {
            rows,
            in_order,
            next_row: None,
            sessions,
            pending: BinaryHeap::new(),
            retime,
            scratch: Vec::new(),
            count: Rc::new(Cell::new(0)),
        }
    }

    /// The count of requests handed out so far, readable after the stream is gone.
    pub fn counter(&self) -> Rc<Cell<u64>> {
        Rc::clone(&self.count)
    }

    /// The next entry, read if not yet, its arrival moved.
    fn peek_row(&mut self) -> Option<&DatasetRow> {
        if self.next_row.is_none() {
            self.next_row = self.rows.next().map(|mut row| {
                row.retime(&self.retime);
                row
            });
        }
        self.next_row.as_ref()
    }

    /// Whether the first pending entry goes before every entry still to read: the next one
    /// comes later (or, in order, has a later key).
    fn first_is_due(&mut self) -> bool {
        let Some(Reverse(first)) = self.pending.peek() else {
            return false;
        };
        let first = first.0.arrival_key();
        let in_order = self.in_order;
        self.peek_row().is_none_or(|next| {
            let next = next.arrival_key();
            first.0 < next.0 || (in_order && first < next)
        })
    }

    /// Starts `session`: the requests it starts with join the pending entries.
    fn start(&mut self, session: SessionLine) {
        let (header, plan) = session.into_parts();
        let mut sessions = self.sessions.borrow_mut();
        sessions.start(header, plan, None, &mut self.scratch);
        let started = self.scratch.drain(..).map(DatasetRow::Request);
        self.pending.extend(started.map(|r| Reverse(ByArrival(r))));
    }
}

impl Iterator for DatasetSessions<'_> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        loop {
            if !self.first_is_due() {
                // The next entry may come first: queued (none left and none pending: done).
                self.peek_row();
                let row = self.next_row.take()?;
                self.pending.push(Reverse(ByArrival(row)));
                continue;
            }
            match self.pending.pop()?.0.0 {
                DatasetRow::Request(r) => {
                    self.count.set(self.count.get() + 1);
                    return Some(r);
                }
                DatasetRow::Session(s) => self.start(*s),
            }
        }
    }
}
