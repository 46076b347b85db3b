//! The library's data flows one way: backend -> exec -> {plan, trace, codec}, and the report
//! is built above exec from its books. This test reads the library's sources and fails on an
//! upward reference (a module naming one at its own rank or above), so that no import cycle
//! between the library's modules can come back.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The library's top modules, lowest first. A module may name only modules of a lower rank.
const RANKS: &[(&str, u8)] = &[
    ("error", 0),
    ("rng", 0),
    ("config", 1),
    ("compress", 2),
    ("trace", 2),
    ("gpu", 3),
    ("plan", 3),
    ("exec", 4),
    ("report", 5),
    ("backend", 6),
    ("cuda", 7),
    ("unstable", 7),
    ("lib", 7),
];

fn rank(module: &str) -> Option<u8> {
    RANKS.iter().find(|(m, _)| *m == module).map(|(_, r)| *r)
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a source file without comments and without its unit tests.
fn code(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |at| &text[..at]);
    text.lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names that follow `crate::` in `code`.
fn crate_paths(code: &str) -> Vec<String> {
    code.match_indices("crate::")
        .map(|(at, _)| {
            code[at + 7..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[test]
fn no_module_of_the_library_names_one_above_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../burn-swap/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    assert!(files.len() > 30, "the library's sources are at {root:?}");
    let mut upward: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap();
        let first = relative.components().next().unwrap().as_os_str();
        let module = first.to_str().unwrap().trim_end_matches(".rs").to_string();
        let from = rank(&module).unwrap_or_else(|| panic!("module {module} has no rank"));
        let text = std::fs::read_to_string(file).unwrap();
        for name in crate_paths(&code(&text)) {
            if name == module {
                continue;
            }
            // A root item (a type re-exported by lib.rs) is named from the root.
            let to = rank(&name).unwrap_or(rank("lib").unwrap());
            if to >= from {
                upward
                    .entry(relative.display().to_string())
                    .or_default()
                    .push(name);
            }
        }
    }
    for names in upward.values_mut() {
        names.sort();
        names.dedup();
    }
    assert!(
        upward.is_empty(),
        "upward references (module ranks: {RANKS:?}): {upward:#?}"
    );
}

#[test]
fn the_check_finds_an_upward_reference() {
    let code = code("use crate::exec::engine::Engine; // crate::backend\nfn f() {}");
    assert_eq!(crate_paths(&code), ["exec"]);
    assert!(rank("exec") >= rank("plan"), "plan naming exec is upward");
}
