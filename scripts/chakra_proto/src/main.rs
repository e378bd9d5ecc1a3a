//! Writes the Rust types of the Chakra execution-trace schema to stdout: `proto/et_def.proto`
//! (the one argument names the repository root) parsed with `protox`, types generated with
//! `prost-build`, behind a header that says where the file comes from.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const HEADER: &str = "\
// Generated from proto/et_def.proto by scripts/chakra_proto.sh (prost-build with protox): do
// not edit; change the schema and rerun the script. CI checks that this file is current.

";

fn main() -> ExitCode {
    let Some(root) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: chakra-proto REPOSITORY_ROOT");
        return ExitCode::FAILURE;
    };
    let proto_dir = root.join("proto");
    let descriptors = match protox::compile([proto_dir.join("et_def.proto")], [&proto_dir]) {
        Ok(descriptors) => descriptors,
        Err(e) => {
            eprintln!("proto/et_def.proto: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = std::env::temp_dir().join(format!("chakra-proto-{}", std::process::id()));
    let generated = std::fs::create_dir_all(&out).and_then(|()| {
        prost_build::Config::new()
            .out_dir(&out)
            .compile_fds(descriptors)?;
        std::fs::read_to_string(out.join("chakra_proto_msg.rs"))
    });
    let _ = std::fs::remove_dir_all(&out);
    match generated {
        Ok(code) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(HEADER.as_bytes())
                .and_then(|()| stdout.write_all(code.as_bytes()))
                .is_err()
            {
                return ExitCode::FAILURE;
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("generate the Chakra ET types: {e}");
            ExitCode::FAILURE
        }
    }
}
