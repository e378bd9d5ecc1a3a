//! Writing generated requests as LLMServingSim JSONL.

use super::session_out::{int, write_session};
use super::{GeneratedRequest, Generator};
use crate::workload::sessions::{PlanBuilder, SessionHeader};
use std::io::{self, Write};

/// Flush the line buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Writes every request of `generator` as one JSONL line (`input_toks`, `output_toks`,
/// `arrival_time_ns`, then `model` when the client names one and `input_tok_ids` when it has a
/// prefix group) and every session as a session line, and returns how many lines were
/// written. Lines are formatted into one reused buffer.
pub fn write_jsonl(mut generator: Generator<'_>, out: &mut dyn Write) -> io::Result<u64> {
    let clients = client_lines(&generator)?;
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let mut written = 0u64;
    while let Some(req) = generator.next() {
        let client = &clients[req.client as usize];
        match generator.session(&req) {
            Some((header, plan)) => {
                write_session_line(&mut buf, &generator, &req, client, (&header, &plan))?
            }
            None => write_request_line(&mut buf, &generator, &req, client),
        }
        written += 1;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(written)
}

/// What the lines of one client's requests share, formatted once.
struct ClientLine {
    /// Its fields after the arrival: model, tenant, SLO class, profile, a fixed priority.
    fields: Vec<u8>,
    /// `,"input_tok_ids":[` and its shared prefix's ids, when it has a prefix group (a line
    /// then formats only the ids unique to its request).
    prefix: Option<Vec<u8>>,
    /// Whether its requests carry image, audio and video tokens.
    multimodal: bool,
}

/// The shared parts of each client's lines.
fn client_lines(generator: &Generator<'_>) -> io::Result<Vec<ClientLine>> {
    let spec = generator.spec();
    let mut lines = Vec::with_capacity(spec.clients.len());
    for (i, c) in spec.clients.iter().enumerate() {
        let prefix = generator.prefix_ids(i).map(|ids| {
            let mut text = b",\"input_tok_ids\":[".to_vec();
            for (k, &id) in ids.iter().enumerate() {
                if k > 0 {
                    text.push(b',');
                }
                int(&mut text, id);
            }
            text
        });
        lines.push(ClientLine {
            fields: client_fields(spec, c)?.into_bytes(),
            prefix,
            multimodal: c.is_multimodal(),
        });
    }
    Ok(lines)
}

/// A client's fields after the arrival: its model, its tenant and SLO class (read back by the
/// JSONL reader, so that a spec and its generated file report the same SLO metrics), its
/// profile's, and a nonzero priority that is its requests' own (the control plane reads it
/// back; a drawn one is written with each line).
fn client_fields(spec: &super::WorkloadSpec, c: &super::ClientSpec) -> io::Result<String> {
    let quoted = |s: &str| serde_json::to_string(s).map_err(io::Error::other);
    let mut fields = String::new();
    if let Some(m) = &c.model {
        fields.push_str(&format!(",\"model\":{}", quoted(m)?));
    }
    if let Some(t) = &c.tenant_id {
        fields.push_str(&format!(",\"tenant\":{}", quoted(t)?));
    }
    if c.slo_class.is_some() {
        let class = super::generate::class_name(c);
        fields.push_str(&format!(",\"slo_class\":{}", quoted(class)?));
    }
    fields.push_str(&profile_fields(spec, c)?);
    if c.priority != 0 && c.priority_dist.is_none() {
        fields.push_str(&format!(",\"priority\":{}", c.priority));
    }
    Ok(fields)
}

/// The priority drawn for `req`, when its client draws its requests' priorities.
fn drawn_priority(generator: &Generator<'_>, req: &GeneratedRequest) -> Option<i32> {
    let spec = generator.spec();
    let client = &spec.clients[req.client as usize];
    client.priority_dist.as_ref()?;
    super::generate::priority_of(spec, req)
}

/// The session line of `req`, the first request of a session (`session`: its header and
/// plan).
fn write_session_line(
    buf: &mut Vec<u8>,
    generator: &Generator<'_>,
    req: &GeneratedRequest,
    client: &ClientLine,
    (header, plan): (&SessionHeader, &PlanBuilder),
) -> io::Result<()> {
    match drawn_priority(generator, req) {
        Some(p) => {
            let drawn = [
                client.fields.as_slice(),
                format!(",\"priority\":{p}").as_bytes(),
            ]
            .concat();
            write_session(buf, header, plan, &drawn)
        }
        None => write_session(buf, header, plan, &client.fields),
    }
}

/// The line of `req`, a request outside any session.
fn write_request_line(
    buf: &mut Vec<u8>,
    generator: &Generator<'_>,
    req: &GeneratedRequest,
    client: &ClientLine,
) {
    buf.extend_from_slice(b"{\"input_toks\":");
    int(buf, req.input_toks);
    buf.extend_from_slice(b",\"output_toks\":");
    int(buf, req.output_toks);
    buf.extend_from_slice(b",\"arrival_time_ns\":");
    int(buf, req.arrival_ns);
    buf.extend_from_slice(&client.fields);
    if let Some(p) = drawn_priority(generator, req) {
        buf.extend_from_slice(b",\"priority\":");
        int(buf, p);
    }
    if client.multimodal {
        for (name, tokens) in MEDIA.iter().zip(req.media) {
            buf.extend_from_slice(name);
            int(buf, tokens);
        }
    }
    if let (Some(prefix), Some(ids)) = (&client.prefix, generator.token_ids(req)) {
        buf.extend_from_slice(prefix);
        let mut first = req.prefix_toks == 0;
        for id in ids.into_suffix() {
            if !first {
                buf.push(b',');
            }
            first = false;
            int(buf, id);
        }
        buf.push(b']');
    }
    buf.extend_from_slice(b"}\n");
}

/// The fields of a multimodal request's image, audio and video tokens.
const MEDIA: [&[u8]; 3] = [
    b",\"image_tokens\":",
    b",\"audio_tokens\":",
    b",\"video_tokens\":",
];

/// The fields a client's profile and its class's goodput targets add to each of its lines
/// (documented extensions the JSONL reader reads back): `timeout_us`, `slo_target_us`,
/// `rtt_ms`, `bandwidth_mbps`, `goodput_slo`.
fn profile_fields(spec: &super::WorkloadSpec, c: &super::ClientSpec) -> io::Result<String> {
    let number = |v: f64| serde_json::to_string(&v).map_err(io::Error::other);
    let p = &c.profile;
    let mut out = String::new();
    if let Some(t) = p.timeout_us {
        out.push_str(&format!(",\"timeout_us\":{t}"));
    }
    if let Some(t) = p.slo_target_us {
        out.push_str(&format!(",\"slo_target_us\":{t}"));
    }
    if let Some(rtt) = p.rtt_ms {
        out.push_str(&format!(",\"rtt_ms\":{}", number(rtt)?));
    }
    if let Some(bw) = p.bandwidth_mbps {
        out.push_str(&format!(",\"bandwidth_mbps\":{}", number(bw)?));
    }
    let class = super::generate::class_name(c);
    if let Some((_, t)) = spec.goodput_targets.iter().find(|(name, _)| name == class) {
        let mut fields = Vec::new();
        for (name, v) in [
            ("ttft_ms", t.ttft_ms),
            ("itl_ms", t.itl_ms),
            ("e2e_ms", t.e2e_ms),
        ] {
            if let Some(v) = v {
                fields.push(format!("\"{name}\":{}", number(v)?));
            }
        }
        out.push_str(&format!(",\"goodput_slo\":{{{}}}", fields.join(",")));
    }
    Ok(out)
}
