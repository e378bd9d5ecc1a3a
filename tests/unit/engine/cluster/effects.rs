use std::path::Path;

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The one caller of the observer: nothing in the engine calls it but
/// `Cluster::apply_effects` (and start-up, which reads its trace level and what it wants
/// pooled or tallied).
#[test]
fn only_apply_effects_calls_the_observer() {
    let engine = Path::new(root!()).join("src/engine");
    let mut files = Vec::new();
    sources(&engine, &mut files);
    let this = engine.join("cluster/effects.rs");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let text = text.replace("observer.trace_level()", "");
        let text = text.replace("observer.wants_itl_values()", "");
        let text = text.replace("observer.wants_steps()", "");
        let text = text.replace("observer.pools_itl_by()", "");
        let text = text.replace("observer.tallies_steps_every()", "");
        let calls = text.matches("observer.").count();
        if file == this {
            let body = text.split("fn apply_effects").nth(1).unwrap_or("");
            let body = body.split("\n    }\n").next().unwrap_or("");
            assert_eq!(
                calls,
                body.matches("observer.").count(),
                "{}: the observer is called outside apply_effects",
                file.display()
            );
            assert!(calls >= 6, "apply_effects reports every kind of effect");
        } else {
            assert_eq!(calls, 0, "{} calls the observer", file.display());
        }
    }
}
