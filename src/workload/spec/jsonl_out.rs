//! Writing generated requests as LLMServingSim JSONL.

use super::Generator;
use super::session_out::write_session;
use std::io::{self, Write};

/// Flush the line buffer to the writer once it holds this many bytes.
const FLUSH_AT: usize = 1 << 20;

/// Writes every request of `generator` as one JSONL line (`input_toks`, `output_toks`,
/// `arrival_time_ns`, then `model` when the client names one and `input_tok_ids` when it has a
/// prefix group) and every session as a session line, and returns how many lines were
/// written. Lines are formatted into one reused buffer.
pub fn write_jsonl(mut generator: Generator<'_>, out: &mut dyn Write) -> io::Result<u64> {
    let mut int = itoa::Buffer::new();
    // Per client, the constant parts of its lines: the model, and the shared prefix ids
    // (formatted once; a line then formats only the ids unique to its request).
    let mut fixed: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for (i, c) in generator.spec().clients.iter().enumerate() {
        let quoted = |s: &str| serde_json::to_string(s).map_err(io::Error::other);
        let mut model = String::new();
        if let Some(m) = &c.model {
            model.push_str(&format!(",\"model\":{}", quoted(m)?));
        }
        // The tenant and SLO class a client gives its requests (read back by the JSONL
        // reader, so that a spec and its generated file report the same SLO metrics).
        if let Some(t) = &c.tenant_id {
            model.push_str(&format!(",\"tenant\":{}", quoted(t)?));
        }
        if c.slo_class.is_some() {
            model.push_str(&format!(
                ",\"slo_class\":{}",
                quoted(super::generate::class_name(c))?
            ));
        }
        model.push_str(&profile_fields(generator.spec(), c)?);
        // A nonzero priority is the requests' own (the control plane reads it back); a
        // drawn one is written with each line.
        if c.priority != 0 && c.priority_dist.is_none() {
            model.push_str(&format!(",\"priority\":{}", c.priority));
        }
        let prefix = generator.prefix_ids(i).map(|ids| {
            let mut text = b",\"input_tok_ids\":[".to_vec();
            for (k, &id) in ids.iter().enumerate() {
                if k > 0 {
                    text.push(b',');
                }
                text.extend_from_slice(int.format(id).as_bytes());
            }
            text
        });
        fixed.push((model.into_bytes(), prefix));
    }
    let multimodal: Vec<bool> = generator
        .spec()
        .clients
        .iter()
        .map(|c| c.is_multimodal())
        .collect();
    let mut buf: Vec<u8> = Vec::with_capacity(FLUSH_AT + 4096);
    let mut written = 0u64;
    while let Some(req) = generator.next() {
        if let Some((header, plan)) = generator.session(&req) {
            let model = &fixed[req.client as usize].0;
            match super::generate::priority_of(generator.spec(), &req) {
                Some(p)
                    if generator.spec().clients[req.client as usize]
                        .priority_dist
                        .is_some() =>
                {
                    let drawn =
                        [model.as_slice(), format!(",\"priority\":{p}").as_bytes()].concat();
                    write_session(&mut buf, &header, &plan, &drawn)?;
                }
                _ => write_session(&mut buf, &header, &plan, model)?,
            }
            written += 1;
            if buf.len() >= FLUSH_AT {
                out.write_all(&buf)?;
                buf.clear();
            }
            continue;
        }
        buf.extend_from_slice(b"{\"input_toks\":");
        buf.extend_from_slice(int.format(req.input_toks).as_bytes());
        buf.extend_from_slice(b",\"output_toks\":");
        buf.extend_from_slice(int.format(req.output_toks).as_bytes());
        buf.extend_from_slice(b",\"arrival_time_ns\":");
        buf.extend_from_slice(int.format(req.arrival_ns).as_bytes());
        let (model, prefix) = &fixed[req.client as usize];
        buf.extend_from_slice(model);
        if generator.spec().clients[req.client as usize]
            .priority_dist
            .is_some()
            && let Some(p) = super::generate::priority_of(generator.spec(), &req)
        {
            buf.extend_from_slice(b",\"priority\":");
            buf.extend_from_slice(int.format(p).as_bytes());
        }
        if multimodal[req.client as usize] {
            for (name, tokens) in MEDIA.iter().zip(req.media) {
                buf.extend_from_slice(name);
                buf.extend_from_slice(int.format(tokens).as_bytes());
            }
        }
        if let (Some(prefix), Some(ids)) = (prefix, generator.token_ids(&req)) {
            buf.extend_from_slice(prefix);
            let mut first = req.prefix_toks == 0;
            for id in ids.into_suffix() {
                if !first {
                    buf.push(b',');
                }
                first = false;
                buf.extend_from_slice(int.format(id).as_bytes());
            }
            buf.push(b']');
        }
        buf.extend_from_slice(b"}\n");
        written += 1;
        if buf.len() >= FLUSH_AT {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(written)
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
