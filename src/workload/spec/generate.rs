//! Drawing the requests of a spec: per-client streams merged in arrival order.

use super::arrival::ArrivalClock;
use super::{SpecError, WorkloadSpec};
use crate::Nanos;
use crate::workload::{MAX_TOKENS, Request};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Token ids are drawn uniformly from `[0, TOKEN_ID_SPACE)`, 17 bits (about Llama-3's
/// vocabulary of 128,256). Only their equality matters: they identify shared prefixes for
/// prefix caching.
pub const TOKEN_ID_SPACE: u32 = 1 << 17;

/// A uniform token id: the top 17 bits of one 32-bit draw.
fn token_id(rng: &mut ChaCha8Rng) -> u32 {
    rng.next_u32() >> (32 - TOKEN_ID_SPACE.trailing_zeros())
}

/// Settings that override the spec's own (command-line flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Overrides {
    /// Replaces `num_requests`.
    pub num_requests: Option<u64>,
    /// Replaces `seed`.
    pub seed: Option<i64>,
}

/// One generated request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeneratedRequest {
    /// Id: position in arrival order, from 0.
    pub id: u64,
    /// Arrival on the simulated clock.
    pub arrival_ns: Nanos,
    /// Index of the client in the spec.
    pub client: u32,
    /// Prompt tokens, the shared prefix included.
    pub input_toks: u32,
    /// Tokens to generate.
    pub output_toks: u32,
    /// Leading prompt tokens shared with the client's prefix group (0 without one).
    pub prefix_toks: u32,
    /// Whether the output is streamed.
    pub streaming: bool,
    /// Position among the client's own requests: keys its unique token ids.
    seq: u64,
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
}

/// One client's random streams and its next (already drawn) request.
struct ClientState {
    clock: ArrivalClock,
    arrival_rng: ChaCha8Rng,
    input_rng: ChaCha8Rng,
    output_rng: ChaCha8Rng,
    streaming_rng: ChaCha8Rng,
    /// Seed of the unique token ids of the client's requests.
    token_seed: u64,
    /// Index into `Generator::prefixes`.
    prefix_group: Option<usize>,
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

impl<'a> Generator<'a> {
    /// Prepares the streams of every client. Fails when nothing would end the generation
    /// (neither `num_requests` nor `horizon`).
    pub fn new(spec: &'a WorkloadSpec, overrides: Overrides) -> Result<Generator<'a>, SpecError> {
        let seed = overrides.seed.unwrap_or(spec.seed);
        let num_requests = overrides.num_requests.or(spec.num_requests);
        if num_requests.is_none() && spec.horizon_us.is_none() {
            return Err(SpecError::Invalid {
                source_name: spec.source_name.clone(),
                path: "num_requests".into(),
                message: "give num_requests or horizon (or --num-requests) so that generation \
                          ends"
                    .into(),
            });
        }
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
        let rng = |stream: &str, id: &str| ChaCha8Rng::seed_from_u64(stream_seed(seed, stream, id));
        let clients = spec
            .clients
            .iter()
            .enumerate()
            .map(|(i, c)| ClientState {
                clock: ArrivalClock::new(&c.arrival, spec.client_rate(i)),
                arrival_rng: rng("arrival", &c.id),
                input_rng: rng("input", &c.id),
                output_rng: rng("output", &c.id),
                streaming_rng: rng("streaming", &c.id),
                token_seed: stream_seed(seed, "tokens", &c.id),
                prefix_group: c
                    .prefix_group
                    .as_ref()
                    .map(|g| group_names.iter().position(|n| n == g).expect("collected")),
                next: GeneratedRequest {
                    id: 0,
                    arrival_ns: 0,
                    client: i as u32,
                    input_toks: 0,
                    output_toks: 0,
                    prefix_toks: 0,
                    streaming: false,
                    seq: 0,
                },
                drawn: 0,
            })
            .collect();
        let mut generator = Generator {
            spec,
            clients,
            queue: BinaryHeap::with_capacity(spec.clients.len()),
            prefixes,
            remaining: num_requests.unwrap_or(u64::MAX),
            horizon_ns: spec
                .horizon_us
                .map_or(Nanos::MAX, |h| h.saturating_mul(1000)),
            next_id: 0,
        };
        for i in 0..generator.clients.len() {
            generator.draw(i);
        }
        Ok(generator)
    }

    /// The spec being generated.
    pub fn spec(&self) -> &'a WorkloadSpec {
        self.spec
    }

    /// Draws client `i`'s next request and queues it, unless it falls at or past the horizon.
    fn draw(&mut self, i: usize) {
        let spec = &self.spec.clients[i];
        let state = &mut self.clients[i];
        let t = state.clock.next(&mut state.arrival_rng);
        let arrival_ns = t.round();
        if arrival_ns >= self.horizon_ns as f64 {
            return;
        }
        let arrival_ns = arrival_ns as Nanos;
        let prefix_toks = spec.prefix_length;
        // Validation keeps the prefix below the limit, so the prompt gets at least one token.
        let input = spec
            .input_distribution
            .sample(&mut state.input_rng)
            .min(MAX_TOKENS as u32 - prefix_toks);
        let streaming = match spec.streaming {
            p if p <= 0.0 => false,
            p if p >= 1.0 => true,
            p => state.streaming_rng.random::<f64>() < p,
        };
        state.next = GeneratedRequest {
            id: 0,
            arrival_ns,
            client: i as u32,
            input_toks: input + prefix_toks,
            output_toks: spec.output_distribution.sample(&mut state.output_rng),
            prefix_toks,
            streaming,
            seq: state.drawn,
        };
        state.drawn += 1;
        self.queue.push(Reverse((arrival_ns, i as u32)));
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
            line: req.id + 1,
            model: self.spec.clients[req.client as usize].model.clone(),
            arrival_ns: req.arrival_ns,
            input_toks: req.input_toks,
            output_toks: req.output_toks,
            token_ids: self
                .token_ids(req)
                .map(Iterator::collect)
                .unwrap_or_default(),
        }
    }
}

impl Iterator for Generator<'_> {
    type Item = GeneratedRequest;

    fn next(&mut self) -> Option<GeneratedRequest> {
        if self.remaining == 0 {
            return None;
        }
        let Reverse((_, client)) = self.queue.pop()?;
        let mut req = self.clients[client as usize].next;
        req.id = self.next_id;
        self.next_id += 1;
        self.remaining -= 1;
        if self.remaining > 0 {
            self.draw(client as usize);
        }
        Some(req)
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

/// All requests of `spec` (with `overrides`) as engine requests, in arrival order. Fails when
/// nothing ends the generation or no request arrives before the horizon.
pub fn generate_requests(
    spec: &WorkloadSpec,
    overrides: Overrides,
) -> Result<Vec<Request>, SpecError> {
    let mut generator = Generator::new(spec, overrides)?;
    let mut requests = Vec::new();
    while let Some(g) = generator.next() {
        requests.push(generator.request(&g));
    }
    if requests.is_empty() {
        return Err(SpecError::Invalid {
            source_name: spec.source_name.clone(),
            path: "horizon".into(),
            message: "no request arrives before the horizon".into(),
        });
    }
    Ok(requests)
}
