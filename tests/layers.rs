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
    ("gpu", 2),
    ("trace", 2),
    ("codec", 3),
    ("plan", 3),
    ("exec", 4),
    ("report", 5),
    ("backend", 6),
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
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("burn-swap/src");
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

/// Where `unsafe` breaks the rules in a source file under `relative`: outside `gpu/` (the
/// one unsafe layer), an `unsafe` block without a `// SAFETY:` comment on the lines just
/// above it, an `unsafe fn` without a `# Safety` section in its docs, or a public one.
fn unsafe_faults(relative: &str, text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut faults = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if !code.contains("unsafe") || code.contains("unsafe_code") {
            continue;
        }
        let at = format!("{relative}:{}", i + 1);
        if !relative.starts_with("gpu/") {
            faults.push(format!("{at}: unsafe outside gpu/"));
        }
        let above = |marker: &str| {
            lines[..i]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("//") || t.starts_with("#[") || t.is_empty()
                })
                .any(|l| l.contains(marker))
        };
        if code.contains("unsafe fn") {
            if code.contains("pub unsafe fn") {
                faults.push(format!("{at}: a public unsafe fn"));
            }
            if !above("# Safety") {
                faults.push(format!("{at}: unsafe fn without a `# Safety` section"));
            }
        } else if !above("SAFETY:") {
            faults.push(format!(
                "{at}: unsafe block without a `// SAFETY:` comment above"
            ));
        }
    }
    faults
}

#[test]
fn unsafe_code_lives_in_the_gpu_layer_and_says_why_it_is_sound() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("burn-swap/src");
    let mut files = Vec::new();
    sources(&root, &mut files);
    let mut faults = Vec::new();
    let mut blocks = 0;
    for file in &files {
        let relative = file.strip_prefix(&root).unwrap().display().to_string();
        let text = std::fs::read_to_string(file).unwrap();
        blocks += text.matches("unsafe {").count();
        faults.extend(unsafe_faults(&relative, &text));
    }
    assert!(blocks > 0, "the check sees the gpu layer's unsafe blocks");
    assert!(faults.is_empty(), "{faults:#?}");
}

#[test]
fn the_unsafe_check_finds_each_fault() {
    let bare = "fn f() {\n    let x = unsafe { g() };\n}";
    assert_eq!(
        unsafe_faults("exec/a.rs", bare),
        [
            "exec/a.rs:2: unsafe outside gpu/",
            "exec/a.rs:2: unsafe block without a `// SAFETY:` comment above"
        ]
    );
    let public = "/// Does g.\npub unsafe fn f() {}";
    assert_eq!(
        unsafe_faults("gpu/a.rs", public),
        [
            "gpu/a.rs:2: a public unsafe fn",
            "gpu/a.rs:2: unsafe fn without a `# Safety` section"
        ]
    );
    let sound = "/// # Safety\n///\n/// `p` is valid.\nunsafe fn f(p: *const u8) {\n    \
                 // SAFETY: the caller's.\n    unsafe { p.read() };\n}";
    assert!(unsafe_faults("gpu/a.rs", sound).is_empty());
}

#[test]
fn the_check_finds_an_upward_reference() {
    let code = code("use crate::exec::engine::Engine; // crate::backend\nfn f() {}");
    assert_eq!(crate_paths(&code), ["exec"]);
    assert!(rank("exec") >= rank("plan"), "plan naming exec is upward");
}
