//! Embeds the bundled data files (`model_archs/**.json`, `model_archs/**.yaml`,
//! `hardware/*.toml`) into the binary so that `--model NAME` and `--hardware NAME` work from any
//! directory without a data path, and generates the Rust types of the Chakra execution-trace
//! schema (`proto/et_def.proto`) with `prost-build`, parsing the schema with the pure-Rust
//! `protox` compiler so that no system `protoc` is needed.

use std::env;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

fn collect(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, ext, out);
        } else if path.extension().and_then(|e| e.to_str()) == Some(ext) {
            out.push(path);
        }
    }
}

fn write_table(out: &mut impl Write, name: &str, root: &Path, ext: &str) {
    let mut files = Vec::new();
    collect(root, ext, &mut files);
    files.sort();
    writeln!(
        out,
        "/// Bundled `{ext}` files under `{}/`: (relative path, contents).",
        root.display()
    )
    .unwrap();
    writeln!(out, "pub static {name}: &[(&str, &str)] = &[").unwrap();
    for file in &files {
        let rel = file
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let abs = fs::canonicalize(file).unwrap();
        writeln!(
            out,
            "    ({rel:?}, include_str!({:?})),",
            abs.display().to_string()
        )
        .unwrap();
    }
    writeln!(out, "];").unwrap();
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_path = PathBuf::from(env::var("OUT_DIR").unwrap()).join("embedded.rs");
    let mut out = fs::File::create(&out_path).unwrap();
    write_table(
        &mut out,
        "MODEL_ARCHS",
        &manifest.join("model_archs"),
        "json",
    );
    write_table(
        &mut out,
        "LAYER_SEQUENCES",
        &manifest.join("model_archs"),
        "yaml",
    );
    write_table(&mut out, "HARDWARE", &manifest.join("hardware"), "toml");
    compile_chakra_schema(&manifest);
    println!("cargo:rerun-if-changed=model_archs");
    println!("cargo:rerun-if-changed=hardware");
}

/// Generates `ChakraProtoMsg.rs` in `OUT_DIR` from `proto/et_def.proto`.
fn compile_chakra_schema(manifest: &Path) {
    let proto_dir = manifest.join("proto");
    let descriptors = protox::compile([proto_dir.join("et_def.proto")], [&proto_dir])
        .unwrap_or_else(|e| panic!("proto/et_def.proto: {e}"));
    prost_build::Config::new()
        .compile_fds(descriptors)
        .expect("generate the Chakra ET types");
    println!("cargo:rerun-if-changed=proto/et_def.proto");
}
