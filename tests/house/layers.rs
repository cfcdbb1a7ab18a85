//! No import circles between ratchet's top-level modules: the `crate::` paths of
//! every module in src/ (tests and comments left out) form a graph, which must be acyclic, so
//! the layers of docs/architecture.md hold. A new circle fails here and names its modules.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Cycles that must remain, each with why. Empty: there are none.
const ALLOWED: &[(&[&str], &str)] = &[];

/// The module a file under src/ belongs to: `src/x.rs` and `src/x/...` are `x`.
fn top_module(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    // lib.rs declares every module and main.rs only calls lib: they sit above all.
    (name != "lib" && name != "main").then(|| name.to_string())
}

/// The code of a file without its comments and its unit tests (a `#[cfg(test)] mod tests` at
/// the end, ratchet's convention).
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(i) => &text[..i],
        None => text,
    };
    text.lines().map(|l| l.split("//").next().unwrap_or("")).collect::<Vec<_>>().join("\n")
}

/// The top-level modules a piece of code names: `crate::x...` and each first name inside
/// `crate::{x::..., y}`.
fn uses(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = code.as_bytes();
    let ident = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
            j += 1;
        }
        (code[i..j].to_string(), j)
    };
    for (at, _) in code.match_indices("crate::") {
        let start = at + "crate::".len();
        if b.get(start) != Some(&b'{') {
            let (name, _) = ident(start);
            if !name.is_empty() {
                out.insert(name);
            }
            continue;
        }
        // A use group: the names at depth 1, each at the start of an item.
        let (mut depth, mut i, mut item_start) = (0usize, start, true);
        while i < b.len() {
            match b[i] {
                b'{' => {
                    depth += 1;
                    item_start = depth == 1;
                }
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b',' if depth == 1 => item_start = true,
                c if item_start && depth == 1 && (c.is_ascii_alphabetic() || c == b'_') => {
                    let (name, j) = ident(i);
                    if name != "self" {
                        out.insert(name);
                    }
                    item_start = false;
                    i = j;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (rel, code) in sources() {
        let Some(m) = top_module(&rel) else { continue };
        let deps = uses(&code);
        g.entry(m.clone()).or_default().extend(deps.into_iter().filter(|d| *d != m));
    }
    g
}

/// Strongly connected components with more than one module (Tarjan).
fn cycles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<BTreeSet<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<BTreeSet<String>>,
    }
    impl<'a> T<'a> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on.insert(v);
            for w in self.g.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let l = self.low[v].min(self.low[w]);
                    self.low.insert(v, l);
                } else if self.on.contains(w) {
                    let l = self.low[v].min(self.index[w]);
                    self.low.insert(v, l);
                }
            }
            if self.low[v] == self.index[v] {
                let mut comp = BTreeSet::new();
                while let Some(w) = self.stack.pop() {
                    self.on.remove(w);
                    comp.insert(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 {
                    self.out.push(comp);
                }
            }
        }
    }
    let mut t = T { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: vec![], on: BTreeSet::new(), out: vec![] };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn the_parser_sees_paths_and_use_groups() {
    let c = code("use crate::{config::{self, Config}, error::Result};\n// crate::comment\nlet x = crate::store::now();\n#[cfg(test)]\nmod tests { use crate::cli::ui; }");
    assert_eq!(uses(&c), ["config", "error", "store"].iter().map(|s| s.to_string()).collect());
    let g: BTreeMap<String, BTreeSet<String>> = [("a", vec!["b"]), ("b", vec!["c"]), ("c", vec!["a"]), ("d", vec!["a"])]
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(cycles(&g), vec![["a", "b", "c"].iter().map(|s| s.to_string()).collect::<BTreeSet<_>>()]);
}

#[test]
fn top_level_modules_import_no_circle() {
    let g = graph();
    assert!(g.len() > 10, "found only {:?}", g.keys());
    let found: Vec<BTreeSet<String>> = cycles(&g)
        .into_iter()
        .filter(|c| !ALLOWED.iter().any(|(a, _)| a.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>() == *c))
        .collect();
    let show = |c: &BTreeSet<String>| {
        c.iter().map(|m| format!("  {m} -> {:?}", g[m].intersection(c).collect::<Vec<_>>())).collect::<Vec<_>>().join("\n")
    };
    assert!(
        found.is_empty(),
        "import circles between top-level modules (see docs/architecture.md for the layers):\n{}",
        found.iter().map(show).collect::<Vec<_>>().join("\n\n")
    );
}

/// Every `.rs` file under src/ with its path relative to src/ and its code (comments and unit
/// tests left out).
fn sources() -> Vec<(std::path::PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = vec![];
    let mut stack = vec![src.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().and_then(|x| x.to_str()) == Some("rs") {
                out.push((p.strip_prefix(&src).unwrap().to_path_buf(), code(&std::fs::read_to_string(&p).unwrap())));
            }
        }
    }
    out
}

/// The library/CLI line: clap lives in the command line's face (`cli/`, `main`) only,
/// so a scheduler can drive the core without it.
#[test]
fn clap_stays_in_the_command_line() {
    let face = |rel: &Path| rel.starts_with("cli") || rel.starts_with("main.rs");
    let offenders: Vec<String> =
        sources().into_iter().filter(|(rel, code)| !face(rel) && code.contains("clap")).map(|(rel, _)| rel.display().to_string()).collect();
    assert!(offenders.is_empty(), "clap named outside cli/: {offenders:?}");
}

/// The core never reaches up into the command line: nothing outside `cli` uses it.
#[test]
fn the_core_does_not_import_the_command_line() {
    let g = graph();
    let bad: Vec<String> = g
        .iter()
        .filter(|(m, _)| m.as_str() != "cli")
        .flat_map(|(m, deps)| deps.iter().filter(|d| *d == "cli").map(move |d| format!("{m} -> {d}")))
        .collect();
    assert!(bad.is_empty(), "core modules importing the command line: {bad:?}");
}

/// The lab (lab/: simulators, floors, probes) sits outside the product: no product code names it
/// and the product's manifest does not depend on it, so `cargo build` and `cargo test` of the
/// product never build it.
#[test]
fn the_product_does_not_depend_on_the_lab() {
    let offenders: Vec<String> =
        sources().into_iter().filter(|(_, code)| code.contains("ratchet_lab")).map(|(rel, _)| rel.display().to_string()).collect();
    assert!(offenders.is_empty(), "product code naming the lab: {offenders:?}");
    let manifest: toml::Table = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap().parse().unwrap();
    for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
        let deps = manifest.get(table).and_then(|t| t.as_table());
        assert!(!deps.is_some_and(|d| d.contains_key("ratchet-lab")), "the product's [{table}] names the lab");
    }
    // The workspace builds the product alone unless the lab is asked for.
    let default = manifest["workspace"]["default-members"].as_array().expect("workspace.default-members");
    assert_eq!(default.iter().filter_map(|m| m.as_str()).collect::<Vec<_>>(), ["."]);
}

/// lib.rs only declares the modules (and documents the API): dispatch lives in `cli`.
#[test]
fn lib_rs_declares_modules_only() {
    let lib = sources().into_iter().find(|(rel, _)| rel == Path::new("lib.rs")).expect("src/lib.rs").1;
    let stray: Vec<&str> = lib.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("#[") && !l.contains("mod ")).collect();
    assert!(stray.is_empty(), "lib.rs holds more than module declarations: {stray:?}");
}

/// Processes are put in a group and signalled as one in `process` alone: a probe or a worker
/// whose children outlive its kill is then one place's bug, not seven.
#[test]
fn process_groups_are_made_and_signalled_in_one_module() {
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, code)| {
            let rel = rel.to_string_lossy();
            rel != "process.rs" && ["killpg(", ".process_group(", "setpgid("].iter().any(|n| code.contains(n))
        })
        .map(|(rel, _)| rel.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "process groups handled outside src/process.rs: {offenders:?}");
}

/// The files of each module directory (`src/trace/scan.rs` is `trace`'s `scan`), its
/// subdirectories as one node each (`stats/sequential/two_phases/` is `stats/sequential`'s
/// `two_phases`, every file in it reading for it), and the siblings each names (`super::x`,
/// `super::super::x` from a subdirectory's file, `crate::trace::x`); `mod.rs`, the parent every
/// child may read, is left out of its own directory.
fn sibling_graphs() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut out: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    let all = sources();
    let parts = |r: &Path| -> Vec<String> { r.components().map(|c| c.as_os_str().to_string_lossy().to_string()).collect() };
    // The nodes of a directory: its files but mod.rs, and its subdirectories.
    let nodes = |dir: &[String]| -> BTreeSet<String> {
        all.iter()
            .filter_map(|(r, _)| {
                let p = parts(r);
                let (f, d) = p.split_last()?;
                if d == dir {
                    (f != "mod.rs").then(|| f.trim_end_matches(".rs").to_string())
                } else {
                    (d.len() > dir.len() && d.starts_with(dir)).then(|| d[dir.len()].clone())
                }
            })
            .collect()
    };
    for (rel, code) in &all {
        let p = parts(rel);
        let Some((file, dirs)) = p.split_last().filter(|(_, d)| !d.is_empty()) else { continue };
        for depth in 1..=dirs.len() {
            let dir = &dirs[..depth];
            let me = if depth == dirs.len() { file.trim_end_matches(".rs").to_string() } else { dirs[depth].clone() };
            if me == "mod" {
                continue;
            }
            // `super::` as often as it takes from this file to `dir`.
            let up = "super::".repeat(dirs.len() - depth + usize::from(file != "mod.rs"));
            let path = dir.join("::");
            let groups = use_groups(code, &up);
            let named: BTreeSet<String> = nodes(dir)
                .into_iter()
                .filter(|s| {
                    *s != me
                        && (names(code, &format!("{up}{s}::")) || code.contains(&format!("crate::{path}::{s}::")) || groups.contains(s))
                })
                .collect();
            out.entry(dir.join("/")).or_default().entry(me).or_default().extend(named);
        }
    }
    out
}

/// Whether `code` holds `path` not as the tail of a longer path (`super::x::` within
/// `super::super::x::`).
fn names(code: &str, path: &str) -> bool {
    code.match_indices(path).any(|(at, _)| !code[..at].ends_with("::"))
}

/// The first names of `use {up}{a::..., b}` groups (`up`: `super::`, `super::super::`).
fn use_groups(code: &str, up: &str) -> BTreeSet<String> {
    let open = format!("{up}{{");
    code.match_indices(&open)
        .filter(|(at, _)| !code[..*at].ends_with("::"))
        .flat_map(|(at, _)| uses(&format!("crate::{}", &code[at + up.len()..])))
        .collect()
}

#[test]
fn sibling_files_of_a_module_import_no_circle() {
    let graphs = sibling_graphs();
    assert!(graphs.contains_key("trace") && graphs["trace"].contains_key("scan"), "{:?}", graphs.keys());
    // Nested modules too: the decision core's files, and its two phases' folder as one node.
    assert!(
        graphs.get("stats/sequential").is_some_and(|g| g.contains_key("rescue") && g.contains_key("two_phases")),
        "{:?}",
        graphs.keys()
    );
    assert!(graphs.get("stats/sequential/two_phases").is_some_and(|g| g.contains_key("look")), "{:?}", graphs.keys());
    let found: Vec<String> = graphs.iter().flat_map(|(dir, g)| cycles(g).into_iter().map(move |c| format!("{dir}: {c:?}"))).collect();
    assert!(found.is_empty(), "import circles between the files of a module: {found:?}");
}

/// The terminal (its width, whether to colour) is read by the command line's face alone; the
/// views (`report`, `plot`, `diagnose`, ...) take a width and a colour flag, so a library user or
/// a test renders them for any terminal.
#[test]
fn only_the_command_line_reads_the_terminal() {
    let face = |rel: &Path| rel.starts_with("cli") || rel.starts_with("main.rs");
    let reads_terminal =
        |code: &str| ["terminal_size", "IsTerminal", "is_terminal()", "\"COLUMNS\"", "\"NO_COLOR\""].iter().any(|t| code.contains(t));
    let offenders: Vec<String> = sources()
        .into_iter()
        .filter(|(rel, code)| !face(rel) && (reads_terminal(code) || uses(code).contains("cli")))
        .map(|(rel, _)| rel.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "the terminal read outside the command line's face: {offenders:?}");
}
