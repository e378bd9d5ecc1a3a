//! What a bundle says it measured (`meta.yaml`'s `model`, `hardware`, `architecture`,
//! `architecture_sha256`), checked against the run (issue 19, finding 6).
//!
//! - `architecture` must name the architecture the run prices with: the stem of the
//!   `--architecture` file when one is given, else the model's `model_type`. Another one is
//!   refused: its tables would price a different layer sequence.
//! - `architecture_sha256` (optional) must be 64 hex digits. It is the SHA-256 of the
//!   profiler's `models/<architecture>.yaml`; when it differs from the file in use (the
//!   `--architecture` file's bytes, or the LLMServingSim file our bundled layer sequence
//!   mirrors) the bundle was profiled with another version of the layer catalog: a warning.
//! - `model` and `hardware` differing from the run's are warnings (a bundle copied or linked
//!   under another model's folder is a legitimate stand-in, but should not go unnoticed).

use std::path::Path;

use super::ProfileSpec;
use super::meta::Identity;
use super::{MetaProblem, ProfileError};

/// SHA-256 of LLMServingSim's `profiler/models/<model_type>.yaml`, whose layer sequences our
/// bundled `model_archs/layers/<model_type>.yaml` mirror (a test checks both).
pub const UPSTREAM_SHA256: [(&str, &str); 5] = [
    (
        "llama",
        "19d708000ec8a89edf1ca12dd388235b2cfe59007aaec6ea48702fb856ff2cfb",
    ),
    (
        "mixtral",
        "a13e97ef49bf70de8ed511e73113d6f3896b86935c8040423e86dfd3b444e097",
    ),
    (
        "phimoe",
        "a075a2270124d6a3cca12e68afcac788d73615cf6715c60ee6879815130af41b",
    ),
    (
        "qwen3",
        "c0557f326f38c70b46b5841c90d3447863d653dc9a228019db74eec591c2bf78",
    ),
    (
        "qwen3_moe",
        "784ed86cdd6b8a71c1c8cc82a5af96e49a70607e40ac8570b7b9341eb3dc5800",
    ),
];

/// Checks the bundle's identity against `spec`: refuses another architecture or a malformed
/// checksum, warns about a different checksum, model or hardware.
pub(super) fn check(
    spec: &ProfileSpec<'_>,
    id: &Identity,
    bundle: &Path,
) -> Result<(), ProfileError> {
    let meta = bundle.join("meta.yaml");
    let invalid = |field: &str, problem| ProfileError::Meta {
        path: meta.clone(),
        field: field.into(),
        problem,
    };
    let (in_use, what) = match spec.architecture {
        Some(file) => (
            file.file_stem()
                .map_or_else(String::new, |s| s.to_string_lossy().into_owned()),
            format!("the architecture file in use is {}", file.display()),
        ),
        None => (
            spec.model.model_type.clone(),
            format!("the model's model_type is `{}`", spec.model.model_type),
        ),
    };
    if id.architecture != in_use {
        let problem = MetaProblem::OtherArchitecture {
            profiled: id.architecture.clone(),
            in_use: what,
        };
        return Err(invalid("architecture", problem));
    }
    if let Some(recorded) = &id.architecture_sha256 {
        let recorded = recorded.trim().to_ascii_lowercase();
        if recorded.len() != 64 || !recorded.bytes().all(|b| b.is_ascii_hexdigit()) {
            let problem = MetaProblem::NotSha256 { text: recorded };
            return Err(invalid("architecture_sha256", problem));
        }
        if let Some((actual, source)) = sha_in_use(spec)?
            && actual != recorded
        {
            log::warn!(
                "{}: architecture_sha256 {recorded} is not the SHA-256 of the `{in_use}` layer \
                 file in use ({source}: {actual}): the bundle was profiled with another \
                 version of it, and layers may be priced differently than measured; give the \
                 file it was profiled with as --architecture",
                meta.display()
            );
        }
    }
    warn_if_other(&meta, "model", &id.model, &spec.model.name);
    if let Some(hardware) = &id.hardware {
        warn_if_other(&meta, "hardware", hardware, spec.hardware);
    }
    Ok(())
}

/// The SHA-256 of the architecture in use and what it is of, when known.
fn sha_in_use(spec: &ProfileSpec<'_>) -> Result<Option<(String, String)>, ProfileError> {
    match spec.architecture {
        Some(file) => {
            let bytes = std::fs::read(file).map_err(|source| ProfileError::Io {
                path: file.to_path_buf(),
                source,
            })?;
            Ok(Some((hex(&sha256(&bytes)), file.display().to_string())))
        }
        None => {
            let model_type = spec.model.model_type.as_str();
            Ok(UPSTREAM_SHA256
                .iter()
                .find(|(t, _)| *t == model_type)
                .map(|(_, sha)| {
                    let source = format!(
                        "LLMServingSim's profiler/models/{model_type}.yaml, which the bundled \
                         layers/{model_type}.yaml mirrors"
                    );
                    (sha.to_string(), source)
                }))
        }
    }
}

/// Warns when `meta.yaml`'s `field` names another `ours` than the run's.
fn warn_if_other(meta: &Path, field: &str, theirs: &str, ours: &str) {
    if theirs.trim() != ours {
        log::warn!(
            "{}: {field}: the bundle profiled `{theirs}`, not this run's `{ours}`; \
             its times are used as they are",
            meta.display()
        );
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (FIPS 180-4) of `data`; small and only run once per load, so no dependency.
pub fn sha256(data: &[u8]) -> [u8; 32] {
    const K: [u32; 64] = [
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
        0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
        0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
        0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
        0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
        0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
        0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
        0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
        0xc67178f2,
    ];
    let mut h: [u32; 8] = [
        0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab,
        0x5be0cd19,
    ];
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            (hh, g, f, e, d, c, b, a) = (g, f, e, d.wrapping_add(t1), c, b, a, t1.wrapping_add(t2));
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}
