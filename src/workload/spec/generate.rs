//! Drawing the requests of a spec: per-client streams merged in arrival order.

use super::arrival::ArrivalClock;
use super::limits::{DEFAULT_MAX_REQUESTS, PlanProblem, check_requests};
use super::session_gen::{SessionDraw, Turns, agentic_plan};
use super::window::WindowedClock;
use super::{ClientSpec, LengthDist, Multimodal, SloClass, SpecError, Traffic, WorkloadSpec};
use crate::Nanos;
use crate::workload::sessions::{PlanBuilder, SessionHeader, SessionSet, Tail};
use crate::workload::{MAX_TOKENS, Request, RequestClasses, RequestProfile, Workload};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Token ids are drawn uniformly from `[0, TOKEN_ID_SPACE)`, 17 bits (about Llama-3's
/// vocabulary of 128,256). Only their equality matters: they identify shared prefixes for
/// prefix caching.
pub const TOKEN_ID_SPACE: u32 = 1 << 17;

/// A uniform token id: the top 17 bits of one 32-bit draw.
pub(super) fn token_id(rng: &mut ChaCha8Rng) -> u32 {
    rng.next_u32() >> (32 - TOKEN_ID_SPACE.trailing_zeros())
}

/// Settings that override the spec's own (command-line flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Replaces `num_requests`.
    pub num_requests: Option<u64>,
    /// Replaces `seed`.
    pub seed: Option<i64>,
    /// Most arrivals the spec may plan (default [`DEFAULT_MAX_REQUESTS`]).
    pub max_requests: Option<u64>,
}

/// One generated arrival: a request, or the start of a session (whose plan
/// [`Generator::session`] draws).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratedRequest {
    /// Id of the request (of a session's first request): ids are reserved in arrival order,
    /// one per request, consecutively for a session.
    pub id: u64,
    /// Line of the arrival in `generate`'s JSONL output, from 1.
    pub line: u64,
    /// Arrival at the gateway on the simulated clock: a flat request of a client with a
    /// `network` arrives its uplink time after its client sends it; a session starts when sent.
    pub arrival_ns: Nanos,
    /// Index of the client in the spec.
    pub client: u32,
    /// Whether it starts a session.
    pub session: bool,
    /// Ids it reserves: 1 for a request, the LLM calls of a session.
    pub requests: u32,
    /// Prompt tokens, the shared prefix included (0 for a session).
    pub input_toks: u32,
    /// Tokens to generate (0 for a session).
    pub output_toks: u32,
    /// Leading prompt tokens shared with the client's prefix group (0 without one).
    pub prefix_toks: u32,
    /// Whether the output is streamed.
    pub streaming: bool,
    /// Image, audio and video tokens among the prompt's (multimodal clients; else 0).
    pub media: [u32; 3],
    /// Position among the client's own arrivals: keys its unique token ids and a session's
    /// random streams.
    seq: u64,
    /// When its client sends it (a session's start).
    sent_ns: Nanos,
}

/// The first arrival of `state`'s clock in a window of `lifecycle`, from `t` (outside them)
/// on: arrivals outside the windows are drawn and dropped, as BLIS does; `None` once past the
/// last window or the horizon.
#[inline(never)]
fn in_window(
    state: &mut ClientState,
    lifecycle: &super::Lifecycle,
    mut t: Nanos,
    horizon_ns: Nanos,
) -> Option<Nanos> {
    loop {
        if t >= lifecycle.end_ns() {
            return None;
        }
        let next = state.clock.next(&mut state.arrival_rng).round();
        if next >= horizon_ns as f64 {
            return None;
        }
        t = next as Nanos;
        if lifecycle.contains(t) {
            return Some(t);
        }
    }
}

/// Refuses a window planning more than `limit` arrivals (whose gaps are drawn, and summed
/// ahead, when the window starts), and a client drawing more than `limit` arrivals outside its
/// windows (drawn and dropped before its windows open), whatever `num_requests` says.
fn check_windows(spec: &WorkloadSpec, limit: u64) -> Result<(), SpecError> {
    if let Some((i, j, n)) = spec.busiest_window()
        && n > limit
    {
        return Err(SpecError::Plan {
            source_name: spec.source_name.clone(),
            path: format!("client `{}`: lifecycle.windows[{j}]", spec.clients[i].id),
            problem: PlanProblem::WindowArrivals { planned: n, limit },
        });
    }
    match spec.busiest_dropped() {
        Some((i, n)) if n > limit => Err(SpecError::Plan {
            source_name: spec.source_name.clone(),
            path: format!("client `{}`: lifecycle", spec.clients[i].id),
            problem: PlanProblem::DroppedArrivals { drawn: n, limit },
        }),
        _ => Ok(()),
    }
}

/// The length distributions of a request in `window` of `spec`'s windows: the window's own
/// where it has them, else the client's (`input`, `output`, its multimodal prompts).
fn window_lengths<'a>(
    spec: &'a ClientSpec,
    window: Option<usize>,
    input: &'a LengthDist,
    output: &'a LengthDist,
) -> (&'a LengthDist, &'a LengthDist, Option<&'a Multimodal>) {
    let overrides = window.and_then(|j| Some(&spec.lifecycle.as_ref()?.params()?[j]));
    (
        overrides.and_then(|p| p.input.as_deref()).unwrap_or(input),
        overrides
            .and_then(|p| p.output.as_deref())
            .unwrap_or(output),
        overrides
            .and_then(|p| p.multimodal.as_deref())
            .or(spec.multimodal.as_ref()),
    )
}

/// The window-by-window clock of client `i`, if the spec generates it so.
fn windowed_clock(spec: &WorkloadSpec, i: usize, horizon_ns: Nanos) -> Option<WindowedClock> {
    let rates = spec.window_rates[i].clone()?;
    let c = &spec.clients[i];
    let l = c.lifecycle.as_ref()?;
    Some(WindowedClock::new(
        l.shared_windows(),
        l.params().cloned(),
        rates,
        c.arrival,
        horizon_ns,
    ))
}

/// An iterator over a spec's requests in arrival order (ties: client order), with ids
/// assigned in that order. Stops after `num_requests` requests or at the horizon, whichever
/// comes first. Drawing a request allocates nothing.
pub struct Generator<'a> {
    spec: &'a WorkloadSpec,
    clients: Vec<ClientState>,
    /// Next arrival of every client that has one: (arrival, client index).
    queue: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// Shared prefix token ids of each prefix group, as long as its longest prefix.
    prefixes: Vec<Vec<u32>>,
    remaining: u64,
    horizon_ns: Nanos,
    next_id: u64,
    next_line: u64,
    seed: i64,
    /// Whether a client's prompt upload time varies (a network with a bandwidth), so that a
    /// request may arrive before one drawn earlier.
    overtaking: bool,
    /// Draws for a pass that reads arrivals, ids and clients only ([`Generator::counting`]).
    counting: bool,
}

/// One client's random streams and its next (already drawn) request.
struct ClientState {
    clock: ArrivalClock,
    /// The clock of a client generated window by window (replaces `clock`).
    windowed: Option<WindowedClock>,
    arrival_rng: ChaCha8Rng,
    input_rng: ChaCha8Rng,
    output_rng: ChaCha8Rng,
    streaming_rng: ChaCha8Rng,
    /// Seed of the unique token ids of the client's requests.
    token_seed: u64,
    /// Index into `Generator::prefixes`.
    prefix_group: Option<usize>,
    /// The shared prefix of its sessions' prompts (`prefix_length` ids of its group's), when
    /// it has a prefix group.
    prefix: Option<Arc<[u32]>>,
    /// Turns of each user of a closed-loop client (empty for other clients).
    turns: Vec<u32>,
    /// Whether the client is closed-loop (read on every draw, kept with the streams).
    closed: bool,
    next: GeneratedRequest,
    drawn: u64,
}

/// Seed of one named stream of one client: the spec seed and the names, hashed, so that
/// streams are independent of each other and of the other clients.
fn stream_seed(seed: i64, stream: &str, client_id: &str) -> u64 {
    let mut key = Vec::with_capacity(stream.len() + 1 + client_id.len());
    key.extend_from_slice(stream.as_bytes());
    key.push(0);
    key.extend_from_slice(client_id.as_bytes());
    xxhash_rust::xxh3::xxh3_64_with_seed(&key, seed as u64)
}

/// Seed of one named stream of the session that is arrival `seq` of client `client_id`.
fn session_seed(seed: i64, stream: &str, client_id: &str, seq: u64) -> u64 {
    let mut key = Vec::with_capacity(stream.len() + client_id.len() + 10);
    key.extend_from_slice(stream.as_bytes());
    key.push(0);
    key.extend_from_slice(client_id.as_bytes());
    key.push(0);
    key.extend_from_slice(&seq.to_le_bytes());
    xxhash_rust::xxh3::xxh3_64_with_seed(&key, seed as u64)
}

/// Refuses a spec whose generation would not end (neither `num_requests`, a horizon nor
/// windows on every client) or would pass the request limit.
fn check_ends(
    spec: &WorkloadSpec,
    overrides: Overrides,
    num_requests: Option<u64>,
) -> Result<(), SpecError> {
    // Clients with windows end with their last window.
    let all_windowed = spec.clients.iter().all(|c| c.lifecycle.is_some());
    if num_requests.is_none() && spec.horizon_us.is_none() && !all_windowed {
        return Err(SpecError::Plan {
            source_name: spec.source_name.clone(),
            path: "num_requests".into(),
            problem: PlanProblem::NoEnd,
        });
    }
    let limit = overrides.max_requests.unwrap_or(DEFAULT_MAX_REQUESTS);
    let by_time_field = match spec.horizon_us {
        Some(_) => "horizon",
        None => "lifecycle windows (trace_rate × duration)",
    };
    let by_time = spec.planned_by_time().map(|n| (n, by_time_field));
    check_requests(num_requests, by_time, limit).map_err(|(path, problem)| SpecError::Plan {
        source_name: spec.source_name.clone(),
        path: path.into(),
        problem,
    })?;
    check_windows(spec, limit)
}

/// The prefix groups in the order clients name them, and each group's shared token ids (as
/// long as its longest client's `prefix_length`), drawn from the group's own stream.
fn shared_prefixes(spec: &WorkloadSpec, seed: i64) -> (Vec<&str>, Vec<Vec<u32>>) {
    let mut group_names: Vec<&str> = Vec::new();
    let mut group_lengths: Vec<u32> = Vec::new();
    for c in &spec.clients {
        if let Some(g) = &c.prefix_group {
            match group_names.iter().position(|n| n == g) {
                Some(i) => group_lengths[i] = group_lengths[i].max(c.prefix_length),
                None => {
                    group_names.push(g);
                    group_lengths.push(c.prefix_length);
                }
            }
        }
    }
    let prefixes = group_names
        .iter()
        .zip(&group_lengths)
        .map(|(name, &len)| {
            let mut rng = ChaCha8Rng::seed_from_u64(stream_seed(seed, "prefix", name));
            (0..len).map(|_| token_id(&mut rng)).collect()
        })
        .collect();
    (group_names, prefixes)
}

impl<'a> Generator<'a> {
    /// Prepares the streams of every client. Fails when nothing would end the generation
    /// (neither `num_requests` nor `horizon`).
    pub fn new(spec: &'a WorkloadSpec, overrides: Overrides) -> Result<Generator<'a>, SpecError> {
        let turns = super::closed_loop::user_turns(spec, overrides)?;
        Generator::with_turns(spec, overrides, turns)
    }

    /// [`Generator::new`] with the turns of every closed-loop client's users given (per
    /// client; none at all: such clients send nothing).
    pub(super) fn with_turns(
        spec: &'a WorkloadSpec,
        overrides: Overrides,
        closed_loop_turns: Vec<Vec<u32>>,
    ) -> Result<Generator<'a>, SpecError> {
        let seed = overrides.seed.unwrap_or(spec.seed);
        let num_requests = overrides.num_requests.or(spec.num_requests);
        check_ends(spec, overrides, num_requests)?;
        let (group_names, prefixes) = shared_prefixes(spec, seed);
        let horizon_ns = spec
            .horizon_us
            .map_or(Nanos::MAX, |h| h.saturating_mul(1000));
        let rng = |stream: &str, id: &str| ChaCha8Rng::seed_from_u64(stream_seed(seed, stream, id));
        let clients = spec
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let arrival_rng = rng("arrival", &c.id);
                // A closed-loop client has no rate and never reads its clock.
                let rate = Some(spec.client_rate(i)).filter(|&r| r > 0.0);
                let clock = ArrivalClock::new(&c.arrival, rate.unwrap_or(1.0), &arrival_rng);
                (i, c, clock, arrival_rng)
            })
            .map(|(i, c, clock, arrival_rng)| ClientState {
                clock,
                windowed: windowed_clock(spec, i, horizon_ns),
                arrival_rng,
                input_rng: rng("input", &c.id),
                output_rng: rng("output", &c.id),
                streaming_rng: rng("streaming", &c.id),
                token_seed: stream_seed(seed, "tokens", &c.id),
                prefix_group: c
                    .prefix_group
                    .as_ref()
                    .map(|g| group_names.iter().position(|n| n == g).expect("collected")),
                prefix: c.prefix_group.as_ref().map(|g| {
                    let group = group_names.iter().position(|n| n == g).expect("collected");
                    Arc::from(&prefixes[group][..c.prefix_length as usize])
                }),
                next: GeneratedRequest {
                    id: 0,
                    line: 0,
                    arrival_ns: 0,
                    client: i as u32,
                    session: false,
                    requests: 1,
                    input_toks: 0,
                    output_toks: 0,
                    prefix_toks: 0,
                    streaming: false,
                    media: [0; 3],
                    seq: 0,
                    sent_ns: 0,
                },
                turns: Vec::new(),
                closed: c.closed_loop.is_some(),
                drawn: 0,
            })
            .collect();
        let mut generator = Generator {
            spec,
            clients,
            queue: BinaryHeap::with_capacity(spec.clients.len()),
            prefixes,
            remaining: num_requests.unwrap_or(u64::MAX),
            horizon_ns,
            next_id: 0,
            next_line: 1,
            seed,
            overtaking: spec.clients.iter().any(|c| {
                let p = &c.profile;
                p.rtt_ms.is_some() && p.bandwidth_mbps.is_some()
            }),
            counting: false,
        };
        if !closed_loop_turns.is_empty() {
            for (state, turns) in generator.clients.iter_mut().zip(closed_loop_turns) {
                state.turns = turns;
            }
        }
        for i in 0..generator.clients.len() {
            generator.draw(i);
        }
        Ok(generator)
    }

    /// The spec being generated.
    pub fn spec(&self) -> &'a WorkloadSpec {
        self.spec
    }

    /// A time no arrival still to come falls before (a flat request's arrival at the
    /// gateway, a session's start), `None` when none is left: the next arrival, or, when
    /// a prompt's upload lets a short prompt overtake a long one sent earlier, the earliest
    /// of each client's next send plus half its round trip.
    pub fn not_before(&self) -> Option<Nanos> {
        if !self.overtaking {
            return self.queue.peek().map(|&Reverse((t, _))| t);
        }
        let earliest = |&Reverse((_, i)): &Reverse<(Nanos, u32)>| {
            let next = &self.clients[i as usize].next;
            match next.session {
                true => next.sent_ns,
                false => {
                    let half_rtt = self.spec.clients[i as usize].profile.uplink_ns(0);
                    next.sent_ns.saturating_add(half_rtt)
                }
            }
        };
        self.queue.iter().map(earliest).min()
    }

    /// The same generator for a pass that reads only the arrivals, ids, sessions and clients
    /// of what it generates: a plain request whose arrival does not depend on its prompt (no
    /// network between client and gateway) is given no lengths, and its length streams are
    /// not drawn. Its arrival streams are drawn as ever, so its arrivals are the same.
    pub fn counting(mut self) -> Self {
        self.counting = true;
        self
    }

    /// Draws client `i`'s next request and queues it, unless it falls at or past the horizon.
    fn draw(&mut self, i: usize) {
        if self.clients[i].closed {
            self.draw_user(i);
            return;
        }
        let Some((arrival_ns, window)) = self.next_arrival(i) else {
            return;
        };
        let spec = &self.spec.clients[i];
        let state = &mut self.clients[i];
        let (input, output) = match &spec.traffic {
            Traffic::Requests {
                input,
                output,
                conversation: None,
            } => (input, output),
            Traffic::Requests {
                conversation: Some(c),
                ..
            } => {
                let seed = session_seed(self.seed, "session", &spec.id, state.drawn);
                let turns = c.turns(&mut ChaCha8Rng::seed_from_u64(seed));
                self.queue_bare(i, arrival_ns, true, turns);
                return;
            }
            Traffic::Agentic(a) => {
                let calls = a.num_llm_calls();
                self.queue_bare(i, arrival_ns, true, calls);
                return;
            }
        };
        if self.counting && spec.profile.rtt_ms.is_none() {
            self.queue_bare(i, arrival_ns, false, 1);
            return;
        }
        let (input, output, multimodal) = window_lengths(spec, window, input, output);
        let prefix_toks = spec.prefix_length;
        let (own, media) = match multimodal {
            None => (input.sample(&mut state.input_rng), [0; 3]),
            Some(m) => {
                let tokens = m.sample(&mut state.input_rng);
                (tokens.total(), tokens.media)
            }
        };
        // Validation keeps the prefix below the limit, so the prompt gets at least one token.
        let input = own.min(MAX_TOKENS as u32 - prefix_toks);
        let streaming = match spec.streaming {
            p if p <= 0.0 => false,
            p if p >= 1.0 => true,
            p => state.streaming_rng.random::<f64>() < p,
        };
        // The client sends it at `arrival_ns`; it reaches the gateway half a round trip and
        // the prompt's upload later (`RequestProfile::uplink_ns`), and the run sees it then.
        let sent_ns = arrival_ns;
        let arrival_ns = arrival_ns.saturating_add(spec.profile.uplink_ns(input + prefix_toks));
        state.next = GeneratedRequest {
            id: 0,
            line: 0,
            arrival_ns,
            client: i as u32,
            session: false,
            requests: 1,
            input_toks: input + prefix_toks,
            output_toks: output.sample(&mut state.output_rng),
            prefix_toks,
            streaming,
            media,
            seq: state.drawn,
            sent_ns,
        };
        state.drawn += 1;
        self.queue.push(Reverse((arrival_ns, i as u32)));
    }

    /// Client `i`'s next arrival before the horizon (in one of its windows, if it has
    /// windows) and, for a client generated window by window, the index of its window.
    fn next_arrival(&mut self, i: usize) -> Option<(Nanos, Option<usize>)> {
        let spec = &self.spec.clients[i];
        let state = &mut self.clients[i];
        if let Some(w) = &mut state.windowed {
            let (t, j) = w.next(&mut state.arrival_rng)?;
            return (t < self.horizon_ns).then_some((t, Some(j)));
        }
        let t = state.clock.next(&mut state.arrival_rng).round();
        if t >= self.horizon_ns as f64 {
            return None;
        }
        let arrival_ns = t as Nanos;
        match &spec.lifecycle {
            Some(l) if !l.contains(arrival_ns) => {
                in_window(state, l, arrival_ns, self.horizon_ns).map(|t| (t, None))
            }
            _ => Some((arrival_ns, None)),
        }
    }

    /// Queues the next user of closed-loop client `i` that has turns (its first request
    /// arrives staggered over one think time), unless none is left or it arrives at or past
    /// the horizon.
    #[inline(never)]
    fn draw_user(&mut self, i: usize) {
        let users = self.spec.clients[i]
            .closed_loop
            .as_ref()
            .expect("a closed-loop client");
        let state = &mut self.clients[i];
        while let Some(&turns) = state.turns.get(state.drawn as usize) {
            if turns > 0 {
                let arrival_ns = users.first_arrival_ns(state.drawn as u32);
                if arrival_ns >= self.horizon_ns {
                    return;
                }
                self.queue_bare(i, arrival_ns, true, turns);
                return;
            }
            state.drawn += 1;
        }
    }

    /// Queues a request of client `i` arriving at `arrival_ns` with nothing else drawn: a
    /// session (`session`, with `requests` LLM calls, its plan drawn when it starts) or a plain
    /// request without its lengths (see [`Generator::counting`]).
    fn queue_bare(&mut self, i: usize, arrival_ns: Nanos, session: bool, requests: u32) {
        let state = &mut self.clients[i];
        state.next = GeneratedRequest {
            id: 0,
            line: 0,
            arrival_ns,
            client: i as u32,
            session,
            requests,
            input_toks: 0,
            output_toks: 0,
            prefix_toks: 0,
            streaming: false,
            media: [0; 3],
            seq: state.drawn,
            sent_ns: arrival_ns,
        };
        state.drawn += 1;
        self.queue.push(Reverse((arrival_ns, i as u32)));
    }

    /// The session `req` starts (`None` for a plain request): its header (id
    /// `<client>/<k>` for the client's k-th session, deadline at the horizon) and its whole
    /// plan, drawn from the session's own streams.
    pub fn session(&self, req: &GeneratedRequest) -> Option<(SessionHeader, PlanBuilder)> {
        let (header, plan) = self.session_start(req)?;
        let plan = match plan {
            Drawn::Whole(plan) => plan,
            Drawn::Turns(turns) => turns.whole(),
        };
        Some((header, plan))
    }

    /// The same session with only what it starts with drawn (a conversation's first turn)
    /// and the rest of its plan, drawn when the run reaches it; the same plan in the end.
    pub fn session_lazily(
        &self,
        req: &GeneratedRequest,
    ) -> Option<(SessionHeader, PlanBuilder, Option<Tail<'a>>)> {
        let (header, plan) = self.session_start(req)?;
        let (plan, tail) = match plan {
            Drawn::Whole(plan) => (plan, None),
            Drawn::Turns(turns) => turns.start(),
        };
        Some((header, plan, tail))
    }

    /// The header of the session `req` starts and its plan, whole or as turns to draw.
    fn session_start(&self, req: &GeneratedRequest) -> Option<(SessionHeader, Drawn<'a>)> {
        if !req.session {
            return None;
        }
        let spec: &'a ClientSpec = &self.spec.clients[req.client as usize];
        let seed = |stream: &str| {
            ChaCha8Rng::seed_from_u64(session_seed(self.seed, stream, &spec.id, req.seq))
        };
        // Token ids for a prefix group's clients, and for sessions whose calls carry their
        // context on (with an empty shared prefix): their later calls then hit the prefix
        // cache, as in BLIS, which draws ids for every request.
        let prefix = self.clients.get(req.client as usize).and_then(|c| {
            let shared = c.prefix.clone();
            shared.or_else(|| spec.traffic.accumulates().then(|| Arc::from([])))
        });
        let mut draw = SessionDraw {
            rng: seed("session"),
            ids: prefix.map(|prefix| (prefix, seed("session-tokens"))),
            ids_carried: 0,
            model: spec.model.clone(),
        };
        let plan = match &spec.traffic {
            Traffic::Requests {
                input,
                output,
                conversation: None,
            } if spec.closed_loop.is_some() => {
                let users = spec.closed_loop.as_ref().expect("checked");
                let chain = Turns::new((&users.think, false), (input, output), draw, req.requests);
                Drawn::Turns(Box::new(chain))
            }
            Traffic::Requests {
                input,
                output,
                conversation: Some(c),
            } => {
                let turns = c.turns(&mut draw.rng);
                let think = (&c.think_time, c.accumulate);
                Drawn::Turns(Box::new(Turns::new(think, (input, output), draw, turns)))
            }
            Traffic::Agentic(a) => Drawn::Whole(agentic_plan(a, &mut draw)),
            Traffic::Requests {
                conversation: None, ..
            } => return None,
        };
        let header = SessionHeader {
            id: format!("{}/{}", spec.id, req.seq),
            client: Some(spec.id.clone()),
            arrival_ns: req.arrival_ns,
            deadline_ns: (self.horizon_ns != Nanos::MAX).then_some(self.horizon_ns),
            first_id: req.id,
            line: req.line,
        };
        Some((header, plan))
    }

    /// The prompt token ids of `req` (the group's shared prefix, then ids unique to the
    /// request), or `None` when its client has no prefix group.
    pub fn token_ids(&self, req: &GeneratedRequest) -> Option<TokenIds<'_>> {
        let state = &self.clients[req.client as usize];
        let group = state.prefix_group?;
        let prefix = &self.prefixes[group][..req.prefix_toks as usize];
        let key = state.token_seed ^ req.seq.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Some(TokenIds {
            prefix: prefix.iter(),
            suffix: ChaCha8Rng::seed_from_u64(key),
            suffix_left: req.input_toks - req.prefix_toks,
        })
    }

    /// The shared prefix token ids of client `client`'s requests (as long as its
    /// `prefix_length`), or `None` when it has no prefix group.
    pub fn prefix_ids(&self, client: usize) -> Option<&[u32]> {
        let group = self.clients[client].prefix_group?;
        Some(&self.prefixes[group][..self.spec.clients[client].prefix_length as usize])
    }

    /// `req` as an engine request (ids in arrival order; `line` is the line it has in
    /// `generate`'s JSONL output).
    pub fn request(&self, req: &GeneratedRequest) -> Request {
        Request {
            id: req.id,
            line: req.line,
            model: self.spec.clients[req.client as usize].model.clone(),
            arrival_ns: req.arrival_ns,
            input_toks: req.input_toks,
            output_toks: req.output_toks,
            token_ids: self
                .token_ids(req)
                .map(Iterator::collect)
                .unwrap_or_default(),
            prompt_blocks: None,
            known_hashes: None,
        }
    }
}

impl Iterator for Generator<'_> {
    type Item = GeneratedRequest;

    /// The next arrival. `num_requests` counts the open-loop clients' arrivals; closed-loop
    /// users come whatever is left of it (their turns were planned within it).
    fn next(&mut self) -> Option<GeneratedRequest> {
        loop {
            let Reverse((_, client)) = self.queue.pop()?;
            let closed = self.clients[client as usize].closed;
            if !closed && self.remaining == 0 {
                continue;
            }
            let mut req = self.clients[client as usize].next;
            req.id = self.next_id;
            req.line = self.next_line;
            self.next_id += u64::from(req.requests);
            self.next_line += 1;
            if !closed {
                self.remaining -= 1;
            }
            if closed || self.remaining > 0 {
                self.draw(client as usize);
            }
            return Some(req);
        }
    }
}

/// The prompt token ids of one request: see [`Generator::token_ids`].
pub struct TokenIds<'a> {
    prefix: std::slice::Iter<'a, u32>,
    suffix: ChaCha8Rng,
    suffix_left: u32,
}

impl Iterator for TokenIds<'_> {
    type Item = u32;

    fn next(&mut self) -> Option<u32> {
        if let Some(&id) = self.prefix.next() {
            return Some(id);
        }
        if self.suffix_left == 0 {
            return None;
        }
        self.suffix_left -= 1;
        Some(token_id(&mut self.suffix))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.prefix.len() + self.suffix_left as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for TokenIds<'_> {}

impl<'a> TokenIds<'a> {
    /// The ids after the shared prefix, those unique to the request.
    pub fn into_suffix(self) -> TokenIds<'a> {
        TokenIds {
            prefix: [].iter(),
            ..self
        }
    }
}

/// The error for a spec that generates no request: none arrives before its horizon, or (with
/// no horizon) nothing is generated at all.
pub fn nothing_generated(spec: &WorkloadSpec) -> SpecError {
    let (path, problem) = match spec.horizon_us {
        Some(horizon_us) => ("horizon", PlanProblem::NothingBeforeHorizon { horizon_us }),
        None => ("clients", PlanProblem::NothingGenerated),
    };
    SpecError::Plan {
        source_name: spec.source_name.clone(),
        path: path.into(),
        problem,
    }
}

/// All requests of `spec` (with `overrides`) as engine requests, in arrival order, for a
/// spec without sessions (see [`generate_workload`]). Fails when nothing ends the generation
/// or no request arrives before the horizon.
pub fn generate_requests(
    spec: &WorkloadSpec,
    overrides: Overrides,
) -> Result<Vec<Request>, SpecError> {
    if let Some(c) = spec.clients.iter().find(|c| c.traffic.is_session()) {
        return Err(SpecError::Plan {
            source_name: spec.source_name.clone(),
            path: "clients".into(),
            problem: PlanProblem::Sessions {
                client: c.id.clone(),
            },
        });
    }
    Ok(generate_workload(spec, overrides)?.requests)
}

/// The workload of `spec` (with `overrides`): flat requests in arrival order and sessions
/// (each arrival `num_requests` counts once). Fails when nothing ends the generation or
/// nothing arrives before the horizon.
pub fn generate_workload(spec: &WorkloadSpec, overrides: Overrides) -> Result<Workload, SpecError> {
    let mut generator = Generator::new(spec, overrides)?;
    let mut requests = Vec::new();
    let mut sessions = SessionSet::new();
    let mut classes = RequestClasses::default();
    let mut assigner = ClassAssigner::new(spec);
    while let Some(g) = generator.next() {
        assigner.assign(&g, &mut classes);
        match generator.session(&g) {
            Some((header, plan)) => sessions.add(header, plan),
            None => requests.push(generator.request(&g)),
        }
    }
    if requests.is_empty() && sessions.is_empty() {
        return Err(nothing_generated(spec));
    }
    set_goodput_targets(spec, &mut classes);
    Ok(Workload {
        requests,
        sessions,
        classes: Some(classes),
    })
}

/// What a run needs to know of a streamed spec's requests before it draws them: drawn once
/// ahead, without keeping any of them.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamPlan {
    /// Requests the spec generates (a session's LLM calls each count).
    pub count: u64,
    /// Sessions it starts.
    pub sessions: u64,
    /// The first arrival and the last (of a flat request, or a session's start).
    pub first_arrival_ns: Nanos,
    pub last_arrival_ns: Nanos,
    /// Each request's tenant, SLO class and profile, as [`generate_workload`] gives them.
    pub classes: RequestClasses,
}

/// What the run needs to know of `spec`'s workload (with `overrides`) before it runs, from a
/// first pass over its arrivals that keeps none of them and draws no session's plan, and the
/// generator of its arrivals for the run (see [`super::SessionStream`]: it draws the requests
/// [`generate_workload`] gives, in the same order, with the same ids and token ids). Fails as
/// [`generate_workload`] does.
pub fn stream_workload(
    spec: &WorkloadSpec,
    overrides: Overrides,
) -> Result<(StreamPlan, Generator<'_>), SpecError> {
    let mut plan = StreamPlan {
        count: 0,
        sessions: 0,
        first_arrival_ns: 0,
        last_arrival_ns: 0,
        classes: RequestClasses::default(),
    };
    let mut arrivals = 0u64;
    let mut assigner = ClassAssigner::new(spec);
    for g in Generator::new(spec, overrides)?.counting() {
        // A client's network may let a short prompt overtake a long one.
        if arrivals == 0 || g.arrival_ns < plan.first_arrival_ns {
            plan.first_arrival_ns = g.arrival_ns;
        }
        plan.last_arrival_ns = plan.last_arrival_ns.max(g.arrival_ns);
        arrivals += 1;
        plan.count += u64::from(g.requests);
        plan.sessions += u64::from(g.session);
        assigner.assign(&g, &mut plan.classes);
    }
    if arrivals == 0 {
        return Err(nothing_generated(spec));
    }
    set_goodput_targets(spec, &mut plan.classes);
    Ok((plan, Generator::new(spec, overrides)?))
}

/// [`stream_workload`] for a run that reads neither arrival time of the plan (no replay
/// mode that moves arrivals, no autoscaler): where the spec's count and classes are known
/// without drawing its arrivals, the survey is skipped and both times are left 0.
pub fn stream_workload_untimed(
    spec: &WorkloadSpec,
    overrides: Overrides,
) -> Result<(StreamPlan, Generator<'_>), SpecError> {
    let generator = Generator::new(spec, overrides)?;
    let Some(count) = fixed_count(spec, overrides) else {
        return stream_workload(spec, overrides);
    };
    // The one check of the survey that needs a draw: something arrives before the horizon.
    let Some(first) = Generator::new(spec, overrides)?.counting().next() else {
        return Err(nothing_generated(spec));
    };
    let mut plan = StreamPlan {
        count,
        sessions: 0,
        first_arrival_ns: 0,
        last_arrival_ns: 0,
        classes: RequestClasses::default(),
    };
    ClassAssigner::new(spec).assign(&first, &mut plan.classes);
    // Every later id gets the first's labels, as the assigner gives them one by one.
    let end = first.id.saturating_add(count);
    let mut id = first.id + 1;
    while id < end {
        let run = u32::try_from(end - id).unwrap_or(u32::MAX);
        plan.classes.assign_like(id, run, first.id);
        id += u64::from(run);
    }
    set_goodput_targets(spec, &mut plan.classes);
    Ok((plan, generator))
}

/// The requests `spec` generates, where that is its `num_requests` and every request is
/// its one client's with that client's labels: a client of plain requests (no conversation,
/// closed loop, priority draws or lifecycle) and no horizon, so that only the count ends
/// the generation and the ids run 0.. in order. (An arrival clock passing 2^64 ns, some 584
/// years, would end it sooner: the count then only sizes the summary's lists and the
/// progress bar, and the run reports the requests drawn.)
fn fixed_count(spec: &WorkloadSpec, overrides: Overrides) -> Option<u64> {
    let [client] = spec.clients.as_slice() else {
        return None;
    };
    let plain = matches!(
        client.traffic,
        Traffic::Requests {
            conversation: None,
            ..
        }
    );
    let bare = client.closed_loop.is_none()
        && client.priority_dist.is_none()
        && client.lifecycle.is_none();
    if !plain || !bare || spec.horizon_us.is_some() {
        return None;
    }
    overrides.num_requests.or(spec.num_requests)
}

/// Gives each arrival's ids its client's tenant, SLO class and profile (a client's nonzero
/// `priority` is its requests' own; 0 leaves the class's; a `priority_distribution` gives
/// each arrival its own draw).
struct ClassAssigner<'s> {
    spec: &'s WorkloadSpec,
    /// Each client's last arrival's first id, for a client whose arrivals all get the same.
    last: Vec<Option<u64>>,
}

impl<'s> ClassAssigner<'s> {
    fn new(spec: &'s WorkloadSpec) -> ClassAssigner<'s> {
        ClassAssigner {
            spec,
            last: vec![None; spec.clients.len()],
        }
    }

    /// Gives arrival `g`'s ids their classes: those of its client's last arrival when its
    /// client draws no priority per arrival, else looked up by name.
    fn assign(&mut self, g: &GeneratedRequest, classes: &mut RequestClasses) {
        let client = &self.spec.clients[g.client as usize];
        let last = &mut self.last[g.client as usize];
        match *last {
            Some(like) => classes.assign_like(g.id, g.requests, like),
            None => {
                let profile = RequestProfile {
                    priority: priority_of(self.spec, g),
                    ..client.profile
                };
                let (tenant, class) = (tenant_name(client), class_name(client));
                classes.assign_profile(g.id, g.requests, tenant, class, &profile);
            }
        }
        if client.priority_dist.is_none() && g.requests > 0 {
            *last = Some(g.id);
        }
    }
}

/// The own priority of arrival `g`'s requests: its draw from its client's
/// `priority_distribution`, else the client's nonzero `priority` (`None`: its class's).
pub(super) fn priority_of(spec: &WorkloadSpec, g: &GeneratedRequest) -> Option<i32> {
    let client = &spec.clients[g.client as usize];
    match &client.priority_dist {
        Some(dist) => Some(dist.draw(spec.seed, g.client, g.id)),
        None => (client.priority != 0).then_some(client.priority),
    }
}

/// Gives the spec's `goodput_slo_targets` to the classes its requests use (a target for a
/// class no request has is ignored, with a warning), after the requests so that classes keep
/// the order of their first request, as the JSONL reader sees them.
fn set_goodput_targets(spec: &WorkloadSpec, classes: &mut RequestClasses) {
    for (class, targets) in &spec.goodput_targets {
        if classes.classes().iter().any(|c| c == class) {
            classes
                .set_targets(class, *targets)
                .expect("one entry per class");
        } else {
            log::warn!(
                "{}: goodput_slo_targets.{class}: no client has SLO class `{class}`; ignored",
                spec.source_name
            );
        }
    }
}

/// A client's tenant as reported: its `tenant_id`, else `default`.
fn tenant_name(client: &ClientSpec) -> &str {
    client.tenant_id.as_deref().unwrap_or("default")
}

/// A client's SLO class as reported: BLIS's lower-case name, else `default`.
pub(super) fn class_name(client: &ClientSpec) -> &'static str {
    match client.slo_class {
        Some(SloClass::Critical) => "critical",
        Some(SloClass::Standard) => "standard",
        Some(SloClass::Sheddable) => "sheddable",
        Some(SloClass::Batch) => "batch",
        Some(SloClass::Background) => "background",
        None => "default",
    }
}

/// A session's plan as [`Generator::session_start`] draws it.
enum Drawn<'a> {
    /// An agentic workflow's, drawn whole.
    Whole(PlanBuilder),
    /// A conversation's or closed-loop user's turns, none drawn yet.
    Turns(Box<Turns<'a>>),
}
