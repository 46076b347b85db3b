//! The library's data flows one way: backend -> exec -> {report, plan, trace, codec} (the
//! report's types are plain data below exec, which makes the report from its books). This
//! test reads the library's sources and fails on an upward reference (a module naming one at
//! its own rank or above), so that no import cycle between the library's modules can come
//! back; and inside every folder (`exec/`, `plan/`,
//! `exec/engine/`, ...), on a loop between the modules of that folder (files and
//! subfolders), read from `crate::`, `super::` and `self::` paths.

use std::collections::{BTreeMap, BTreeSet};
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
    ("report", 4),
    ("exec", 5),
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

/// Every source file under `folder` (a path from the repository's root): its path relative
/// to `folder`, and its text.
fn read_sources(folder: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join(folder);
    let mut paths = Vec::new();
    sources(&root, &mut paths);
    paths
        .iter()
        .map(|file| {
            let relative = file.strip_prefix(&root).unwrap().display().to_string();
            (relative, std::fs::read_to_string(file).unwrap())
        })
        .collect()
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

/// Whether a CubeCL runtime is compiled in is asked in one module, `exec/cubecl_fast_path/`,
/// which gives the same functions either way (issue 72): no other file of the library
/// switches code on it.
#[test]
fn only_the_cubecl_module_switches_on_a_cubecl_runtime() {
    let switches = [
        r#"#[cfg(any(feature = "cuda", feature = "wgpu"))]"#,
        r#"#[cfg(not(any(feature = "cuda", feature = "wgpu")))]"#,
    ];
    let mut inside = 0;
    let mut outside = Vec::new();
    for (relative, text) in read_sources("burn-swap/src") {
        let found = switches
            .iter()
            .map(|s| text.matches(s).count())
            .sum::<usize>();
        if relative.starts_with("exec/cubecl_fast_path/") {
            inside += found;
        } else if found > 0 {
            outside.push(format!("{relative}: {found}"));
        }
    }
    assert!(inside > 0, "the check sees the module's own switch");
    assert!(
        outside.is_empty(),
        "CubeCL switches outside exec/cubecl_fast_path/: {outside:?}"
    );
}

#[test]
fn the_check_finds_an_upward_reference() {
    let code = code("use crate::exec::engine::Engine; // crate::backend\nfn f() {}");
    assert_eq!(crate_paths(&code), ["exec"]);
    assert!(rank("exec") >= rank("plan"), "plan naming exec is upward");
}

/// The module path of a source file relative to the library's root (`exec/engine/room.rs`:
/// `["exec", "engine", "room"]`; a `mod.rs` or `lib.rs` is its folder's module).
fn module_path(relative: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
        parts.pop();
    }
    parts
}

/// The paths a `use` tree or an expression names from `code[at..]` (just after `crate::`,
/// `super::` or `self::`), each as its segments: `a::{b, c::D}` gives `[a, b]` and
/// `[a, c, D]`.
fn paths_at(code: &str, at: usize) -> Vec<Vec<String>> {
    fn tree(code: &[u8], mut at: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
        let mut segments = prefix;
        loop {
            while at < code.len() && code[at].is_ascii_whitespace() {
                at += 1;
            }
            let start = at;
            while at < code.len() && (code[at].is_ascii_alphanumeric() || code[at] == b'_') {
                at += 1;
            }
            if at > start {
                segments.push(String::from_utf8_lossy(&code[start..at]).into_owned());
                if code[at..].starts_with(b"::") {
                    at += 2;
                    continue;
                }
                out.push(segments);
                return at;
            }
            if at < code.len() && code[at] == b'{' {
                at += 1;
                loop {
                    at = tree(code, at, segments.clone(), out);
                    while at < code.len() && (code[at].is_ascii_whitespace() || code[at] == b',') {
                        at += 1;
                    }
                    if at >= code.len() || code[at] == b'}' {
                        return at + 1;
                    }
                }
            }
            out.push(segments);
            return at;
        }
    }
    let mut out = Vec::new();
    tree(code.as_bytes(), at, Vec::new(), &mut out);
    out
}

/// For each folder of the library, the references between its modules: `(from, to)` where a
/// source file under module `from` of the folder names something under its sibling `to`.
/// `files` holds each source file's path relative to the root and its code; a name that is
/// not a module of the folder (an item its `mod.rs` defines) is no edge.
fn folder_edges(files: &[(String, String)]) -> BTreeMap<Vec<String>, BTreeSet<(String, String)>> {
    let modules: BTreeSet<Vec<String>> = files
        .iter()
        .flat_map(|(relative, _)| {
            let path = module_path(relative);
            (1..=path.len()).map(move |n| path[..n].to_vec())
        })
        .collect();
    let mut edges: BTreeMap<Vec<String>, BTreeSet<(String, String)>> = BTreeMap::new();
    for (relative, text) in files {
        let here = module_path(relative);
        let code = code(text);
        for (at, prefix) in code.match_indices("::") {
            let word_start = code[..at]
                .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let mut base = match &code[word_start..at] {
                "crate" => Vec::new(),
                "self" => here.clone(),
                "super" if word_start < 2 || &code[word_start - 2..word_start] != "::" => {
                    here[..here.len().saturating_sub(1)].to_vec()
                }
                _ => continue,
            };
            let mut rest = at + prefix.len();
            while code[rest..].starts_with("super::") {
                base.pop();
                rest += "super::".len();
            }
            for segments in paths_at(&code, rest) {
                let target: Vec<String> = base.iter().cloned().chain(segments).collect();
                // The deepest folder holding both, where they are different modules.
                let shared = here.iter().zip(&target).take_while(|(a, b)| a == b).count();
                if shared >= here.len() || shared >= target.len() {
                    continue;
                }
                let sibling = target[..=shared].to_vec();
                if modules.contains(&sibling) {
                    edges
                        .entry(here[..shared].to_vec())
                        .or_default()
                        .insert((here[shared].clone(), target[shared].clone()));
                }
            }
        }
    }
    edges
}

/// The loops among the modules of each folder: every set of two or more modules of one
/// folder that each reach the others (strongly connected), with its folder.
fn folder_loops(files: &[(String, String)]) -> Vec<String> {
    let mut loops = Vec::new();
    for (folder, edges) in folder_edges(files) {
        let nodes: BTreeSet<&String> = edges.iter().flat_map(|(a, b)| [a, b]).collect();
        fn reaches<'a>(
            edges: &'a BTreeSet<(String, String)>,
            from: &'a String,
        ) -> BTreeSet<&'a String> {
            let mut seen = BTreeSet::from([from]);
            let mut todo = vec![from];
            while let Some(n) = todo.pop() {
                for (_, to) in edges.iter().filter(|(a, _)| a == n) {
                    if seen.insert(to) {
                        todo.push(to);
                    }
                }
            }
            seen
        }
        let mut placed: BTreeSet<&String> = BTreeSet::new();
        for &node in &nodes {
            if placed.contains(node) {
                continue;
            }
            let component: Vec<&String> = reaches(&edges, node)
                .into_iter()
                .filter(|other| reaches(&edges, other).contains(node))
                .collect();
            placed.extend(component.iter().copied());
            if component.len() > 1 {
                let inside: Vec<String> = edges
                    .iter()
                    .filter(|(a, b)| component.contains(&a) && component.contains(&b))
                    .map(|(a, b)| format!("{a} -> {b}"))
                    .collect();
                loops.push(format!("{}/: {}", folder.join("/"), inside.join(", ")));
            }
        }
    }
    loops
}

#[test]
fn no_folder_of_the_library_has_an_import_loop() {
    let files: Vec<(String, String)> = read_sources("burn-swap/src")
        .into_iter()
        // Unit tests in files of their own name what they test, from beside it.
        .filter(|(relative, _)| !relative.ends_with("tests.rs") && !relative.contains("/tests/"))
        .collect();
    let edges = folder_edges(&files);
    assert!(
        edges
            .get(&vec!["exec".to_string()])
            .is_some_and(|e| e.contains(&("transfer".into(), "residency".into()))),
        "the check sees exec/'s references: {edges:#?}"
    );
    let loops = folder_loops(&files);
    assert!(loops.is_empty(), "import loops inside folders: {loops:#?}");
}

/// The harness package (the examples', tests' and benches' shared code) has no import loop
/// either (issue 72): its library's modules (`harness/src/`) are read as the library's are;
/// its binaries (`src/bin/`, each a crate of its own) are left out.
#[test]
fn no_module_of_the_harness_has_an_import_loop() {
    let files: Vec<(String, String)> = read_sources("harness/src")
        .into_iter()
        .filter(|(relative, _)| !relative.starts_with("bin/"))
        .collect();
    let edges = folder_edges(&files);
    assert!(
        edges
            .get(&Vec::new())
            .is_some_and(|e| e.contains(&("workload".into(), "train".into()))),
        "the check sees the harness's references: {edges:#?}"
    );
    let loops = folder_loops(&files);
    assert!(loops.is_empty(), "import loops in the harness: {loops:#?}");
}

#[test]
fn the_check_finds_a_loop_inside_a_folder() {
    let file = |path: &str, code: &str| (path.to_string(), code.to_string());
    let looped = [
        file("exec/mod.rs", "mod a;\nmod b;\nmod c;"),
        file("exec/a.rs", "use super::b::Thing;"),
        file("exec/b.rs", "use crate::exec::{c::{self, Other}, Item};"),
        file("exec/c/mod.rs", "fn f() { super::super::exec::a::g(); }"),
        file("exec/c/d.rs", "use super::e::X; // super::super::a"),
        file("exec/c/e.rs", "pub struct X;"),
    ];
    assert_eq!(folder_loops(&looped), ["exec/: a -> b, b -> c, c -> a"]);
    // The same without c's reference back to a: no loop; `Item` (defined in exec/mod.rs)
    // and the comment are no edges, `super::e` inside c is c's own folder.
    let mut open = looped.clone();
    open[3] = file("exec/c/mod.rs", "fn f() {}");
    assert!(folder_loops(&open).is_empty(), "{:?}", folder_edges(&open));
    assert_eq!(
        folder_edges(&open)[&vec!["exec".to_string(), "c".to_string()]],
        BTreeSet::from([("d".to_string(), "e".to_string())])
    );
}

/// `Engine`'s methods (every `fn` of an inherent `impl ... Engine<B>` block in `exec/engine/`)
/// and, per engine file, which of its fields the file reaches (`self.<field>`), from code
/// formatted by rustfmt (an impl at column 0, its methods at column 4).
fn engine_shape(files: &[(String, String)], fields: &[&str]) -> (usize, Vec<(String, usize)>) {
    let mut methods = 0;
    let mut reach = Vec::new();
    for (name, text) in files {
        let code = code(text);
        let mut inside = false;
        for line in code.lines() {
            if line.starts_with("impl") && line.contains(" Engine<B>") && !line.contains(" for ") {
                inside = true;
            } else if line.starts_with('}') {
                inside = false;
            } else if inside {
                let rest = line.strip_prefix("    ").unwrap_or("");
                let rest = rest
                    .strip_prefix("pub(crate) ")
                    .or_else(|| rest.strip_prefix("pub(super) "))
                    .or_else(|| rest.strip_prefix("pub "))
                    .unwrap_or(rest);
                let rest = rest.strip_prefix("const ").unwrap_or(rest);
                if rest.starts_with("fn ") {
                    methods += 1;
                }
            }
        }
        let reached = fields
            .iter()
            .filter(|f| {
                code.match_indices(&format!("self.{f}")).any(|(at, m)| {
                    !code[at + m.len()..].starts_with(|c: char| c.is_alphanumeric() || c == '_')
                })
            })
            .count();
        reach.push((name.clone(), reached));
    }
    (methods, reach)
}

/// `Engine`'s fields, read from its definition in `exec/engine/mod.rs`.
fn engine_fields(module: &str) -> Vec<String> {
    let code = code(module);
    let start = code
        .find("pub(crate) struct Engine<")
        .expect("Engine is defined in exec/engine/mod.rs");
    let body = &code[start..];
    let body = &body[body.find('{').unwrap() + 1..body.find("\n}").unwrap()];
    body.lines()
        .filter_map(|l| l.trim().split_once(':').map(|(f, _)| f.trim().to_string()))
        .filter(|f| !f.is_empty() && !f.starts_with('#'))
        .collect()
}

/// The engine does not grow back (issue 72): `Engine` had 184 methods over 13 files on
/// 2026-12-07, and the files reached 72 field groups in all (up to all 8 in one). The target is
/// 100 methods and at most 3 fields reached by any file; these ceilings are the latest
/// figures and only go down, each time a group of methods moves to the type that owns its
/// state (181: the known links, the pinned links and the hand-over override moved to
/// `Machine`, a failed copy's count to `Counters`; 165: sixteen methods that read one field
/// only, to `Residency`, `History`, `Counters` and the op's scratch; 162: the strided views'
/// recipes, which then read only the books, to `Residency`; 156: the link probe's news taken
/// by `Machine`, given the books and the counters it changes; 149: the op's questions about
/// its inputs, which read the op and the books, to `OpScratch`, given the books).
const ENGINE_METHODS_AT_MOST: usize = 100;
const ENGINE_FIELD_REACH_AT_MOST: usize = 69;

#[test]
fn the_engine_does_not_grow() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("burn-swap/src/exec/engine");
    let mut paths = Vec::new();
    sources(&dir, &mut paths);
    paths.sort();
    let files: Vec<(String, String)> = paths
        .iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(p).unwrap())
        })
        .collect();
    let module = &files.iter().find(|(n, _)| n == "mod.rs").unwrap().1;
    let fields = engine_fields(module);
    assert_eq!(fields.len(), 8, "Engine's fields as read: {fields:?}");
    let fields: Vec<&str> = fields.iter().map(String::as_str).collect();
    let (methods, reach) = engine_shape(&files, &fields);
    let total: usize = reach.iter().map(|(_, n)| n).sum();
    assert!(
        methods <= ENGINE_METHODS_AT_MOST,
        "Engine has {methods} methods, more than {ENGINE_METHODS_AT_MOST}: give new behaviour \
         to the type that owns its state"
    );
    assert!(
        total <= ENGINE_FIELD_REACH_AT_MOST,
        "the engine's files reach {total} of Engine's fields in all, more than \
         {ENGINE_FIELD_REACH_AT_MOST}: {reach:?}"
    );
}

#[test]
fn the_engine_count_sees_methods_and_fields() {
    let module = "pub(crate) struct Engine<B: BackendIr> {\n    /// Handles.\n    handles: \
                  Handles<B>,\n    op: OpScratch,\n}\n";
    assert_eq!(engine_fields(module), ["handles", "op"]);
    let file = "impl<B: BackendIr> Engine<B> {\n    pub(super) fn a(&self) {\n        \
                self.op.x();\n    }\n\n    fn b(&mut self) {\n        self.handles_x();\n    \
                }\n}\n\nimpl<B: BackendIr> Drop for Engine<B> {\n    fn drop(&mut self) {}\n}\n\
                fn free() {}\n";
    let (methods, reach) = engine_shape(
        &[("a.rs".to_string(), file.to_string())],
        &["handles", "op"],
    );
    assert_eq!((methods, reach), (2, vec![("a.rs".to_string(), 1)]));
}
