//! The floor plan, checked: for each crate of the workspace (`crates/judge`, `crates/firedup`, and the
//! CLI in `src/`), read every source file and assert that
//!
//! 1. the import graph between the crate's top-level modules has no cycle (a module is a node; a
//!    `crate::MODULE` path, a `use crate::{MODULE, ...}` group or a `super::` path that climbs to the
//!    crate root is an edge from the file's top-level module to MODULE);
//!    The same holds one level down for the modules listed in [`CHECKED_CHILDREN`] (every module
//!    with children of its own): e.g. the child modules of `judge` (`judge/cause.rs`,
//!    `judge/decide.rs`, ...) or of the CLI's `matrix` (`cell.rs`, `runner.rs`) import each other
//!    without a cycle (`super::X`, `crate::judge::X` from inside `judge` are edges between its
//!    children);
//! 2. the library crates never name the CLI (`firedup_cli`, or `firedup-cli` in their Cargo.toml);
//! 3. no source file is over [`MAX_LINES`] lines unless its `//!` module doc has a line starting
//!    with [`LONG_FILE_MARKER`] that says why (see CONTRIBUTING.md).
//!
//! Test code is left out of all three: files declared `#[cfg(test)] mod NAME;` (and `tests.rs`
//! files), and every item under `#[cfg(test)]` (a trailing `mod tests { ... }` does not count
//! towards a file's length). A test module may import what it tests from anywhere.
//!
//! The paths are read after comments, strings and char literals are blanked, by a small lexer:
//! enough for this code base's style, not a Rust parser (a macro that builds a path from pieces
//! would be missed). [`KNOWN_EDGES`] and [`KNOWN_LONG_FILES`] list the violations that are still
//! being removed, each with its owner; an entry that is no longer needed fails the test too, so
//! the lists only shrink.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 500;
const LONG_FILE_MARKER: &str = "Long file:";

/// The crates checked: (directory of `src`, relative to the workspace root; is a library crate).
const CRATES: &[(&str, bool)] = &[
    ("crates/judge/src", true),
    ("crates/firedup/src", true),
    ("src", false),
];

/// Modules whose child modules must not import each other in a cycle either: (crate `src` dir,
/// top-level module).
const CHECKED_CHILDREN: &[(&str, &str)] = &[
    ("crates/judge/src", "judge"),
    ("crates/judge/src", "normalize"),
    ("crates/judge/src", "classify"),
    ("crates/judge/src", "verdict"),
    ("crates/judge/src", "profile"),
    ("crates/firedup/src", "host"),
    ("crates/firedup/src", "session"),
    ("crates/firedup/src", "observe"),
    ("crates/firedup/src", "launch"),
    ("crates/firedup/src", "remote"),
    ("crates/firedup/src", "probe"),
    ("crates/firedup/src", "slurm"),
    ("crates/firedup/src", "process"),
    ("crates/firedup/src", "follow"),
    ("src", "matrix"),
    ("src", "history"),
    ("src", "report"),
];

/// Import edges allowed for now: (crate `src` dir, from module, to module, owner: why).
const KNOWN_EDGES: &[(&str, &str, &str, &str)] = &[];

/// Files allowed over [`MAX_LINES`] for now: (path, owner: why).
const KNOWN_LONG_FILES: &[(&str, &str)] = &[];

/// One top-level module's reference to another, with where it was seen.
#[derive(Debug, Clone)]
struct Edge {
    from: String,
    to: String,
    at: String,
}

/// What one file says about itself and its neighbours.
#[derive(Debug, Default)]
struct FileFacts {
    /// (top-level module of the referring code, top-level module referred to, line).
    refs: Vec<(String, String, usize)>,
    /// (module path of the referring code, the first two segments of the absolute path referred
    /// to, line): what the child-module check reads.
    deep_refs: Vec<(Vec<String>, Vec<String>, usize)>,
    /// Modules declared `#[cfg(test)] mod NAME;` (paths relative to the crate root).
    test_children: Vec<Vec<String>>,
    /// Modules declared `mod NAME;` or `mod NAME { ... }` at the crate root, by the root file.
    root_modules: Vec<String>,
    /// The line where a trailing `#[cfg(test)]` item that runs to the end of the file starts.
    trailing_test_from: Option<usize>,
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    PathSep,
    Punct(char),
}

/// Blanks comments, string and char literals (keeping newlines, so line numbers stay true).
fn strip(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < c.len() {
        let ident_before = i > 0 && (c[i - 1].is_alphanumeric() || c[i - 1] == '_');
        if c[i] == '/' && c.get(i + 1) == Some(&'/') {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if c[i] == '/' && c.get(i + 1) == Some(&'*') {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && c.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && c.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
        } else if (c[i] == 'r' || (c[i] == 'b' && c.get(i + 1) == Some(&'r')))
            && !ident_before
            && raw_string_start(&c, i + if c[i] == 'b' { 1 } else { 0 }).is_some()
        {
            let r = i + if c[i] == 'b' { 1 } else { 0 };
            let hashes = raw_string_start(&c, r).unwrap();
            let mut j = r + 1 + hashes + 1;
            let end = loop {
                if j >= c.len() {
                    break c.len();
                }
                if c[j] == '"' && (0..hashes).all(|h| c.get(j + 1 + h) == Some(&'#')) {
                    break j + 1 + hashes;
                }
                j += 1;
            };
            for &ch in &c[i..end] {
                blank(&mut out, ch);
            }
            i = end;
        } else if c[i] == '"' {
            blank(&mut out, c[i]);
            i += 1;
            while i < c.len() && c[i] != '"' {
                if c[i] == '\\' {
                    blank(&mut out, c[i]);
                    i += 1;
                }
                if i < c.len() {
                    blank(&mut out, c[i]);
                    i += 1;
                }
            }
            if i < c.len() {
                out.push(' ');
                i += 1;
            }
        } else if c[i] == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a): only the former is blanked.
            let end = if c.get(i + 1) == Some(&'\\') {
                (i + 2..c.len()).find(|&j| c[j] == '\'').map(|j| j + 1)
            } else if c.get(i + 2) == Some(&'\'') {
                Some(i + 3)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for &ch in &c[i..end] {
                        blank(&mut out, ch);
                    }
                    i = end;
                }
                None => {
                    out.push(c[i]);
                    i += 1;
                }
            }
        } else {
            out.push(c[i]);
            i += 1;
        }
    }
    out
}

/// At `c[r] == 'r'`: the number of `#`s when a raw string starts here.
fn raw_string_start(c: &[char], r: usize) -> Option<usize> {
    if c.get(r) != Some(&'r') {
        return None;
    }
    let hashes = c[r + 1..].iter().take_while(|&&ch| ch == '#').count();
    (c.get(r + 1 + hashes) == Some(&'"')).then_some(hashes)
}

fn tokens(clean: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = clean.chars().collect();
    let (mut out, mut line, mut i) = (Vec::new(), 1, 0);
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            out.push((Tok::Ident(c[start..i].iter().collect()), line));
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            out.push((Tok::PathSep, line));
            i += 2;
        } else {
            out.push((Tok::Punct(ch), line));
            i += 1;
        }
    }
    out
}

fn is(t: Option<&(Tok, usize)>, want: &Tok) -> bool {
    t.map(|(t, _)| t) == Some(want)
}

fn ident(t: Option<&(Tok, usize)>) -> Option<&str> {
    match t {
        Some((Tok::Ident(s), _)) => Some(s),
        _ => None,
    }
}

/// The index just past the balanced group that opens at `toks[open]`.
fn skip_group(toks: &[(Tok, usize)], open: usize) -> usize {
    let mut depth = 0i32;
    for (k, (t, _)) in toks.iter().enumerate().skip(open) {
        match t {
            Tok::Punct('{' | '(' | '[') => depth += 1,
            Tok::Punct('}' | ')' | ']') => {
                depth -= 1;
                if depth == 0 {
                    return k + 1;
                }
            }
            _ => {}
        }
    }
    toks.len()
}

/// The first identifiers of the items of a `{a, b::c, d::{..}}` group opening at `toks[open]`.
fn group_heads(toks: &[(Tok, usize)], open: usize) -> Vec<String> {
    let end = skip_group(toks, open);
    let (mut heads, mut depth, mut at_item_start) = (Vec::new(), 0, true);
    for (t, _) in &toks[open..end] {
        match t {
            Tok::Punct('{') => {
                depth += 1;
                at_item_start = depth == 1;
            }
            Tok::Punct('}') => depth -= 1,
            Tok::Punct(',') if depth == 1 => at_item_start = true,
            Tok::Ident(s) if depth == 1 && at_item_start => {
                heads.push(s.clone());
                at_item_start = false;
            }
            _ => {}
        }
    }
    heads
}

/// The absolute module paths (at most two segments) that the path continuing at `toks[at]`
/// names below `base`: `x::y::z` → `base + [x, y]` (cut at two), `{a, b::c}` → one per item.
fn path_after(toks: &[(Tok, usize)], at: usize, base: Vec<String>) -> Vec<Vec<String>> {
    if base.len() >= 2 {
        return vec![base[..2].to_vec()];
    }
    match toks.get(at).map(|t| &t.0) {
        Some(Tok::Ident(m)) => {
            let mut p = base;
            p.push(m.clone());
            if is(toks.get(at + 1), &Tok::PathSep) {
                path_after(toks, at + 2, p)
            } else {
                vec![p]
            }
        }
        Some(Tok::Punct('{')) => group_heads(toks, at)
            .into_iter()
            .map(|h| base.iter().cloned().chain([h]).collect())
            .collect(),
        _ => vec![base],
    }
}

/// Reads one file's references. `modpath` is the file's module path from the crate root.
fn facts(src: &str, modpath: &[String]) -> FileFacts {
    let toks = tokens(&strip(src));
    let mut f = FileFacts::default();
    // Inline modules currently open: (name, brace depth inside it).
    let mut inline: Vec<(String, i32)> = Vec::new();
    let mut depth = 0i32;
    let mut i = 0;
    while i < toks.len() {
        let here: Vec<String> = modpath
            .iter()
            .cloned()
            .chain(inline.iter().map(|m| m.0.clone()))
            .collect();
        let t = &toks[i].0;
        let line = toks[i].1;
        // `#[cfg(test)]`: skip the item it applies to (after any further attributes).
        if *t == Tok::Punct('#')
            && is(toks.get(i + 1), &Tok::Punct('['))
            && ident(toks.get(i + 2)) == Some("cfg")
            && ident(toks.get(i + 4)) == Some("test")
            && is(toks.get(i + 5), &Tok::Punct(')'))
        {
            let start_line = line;
            let mut j = skip_group(&toks, i + 1);
            while is(toks.get(j), &Tok::Punct('#')) {
                j = skip_group(&toks, j + 1);
            }
            let item = j;
            while j < toks.len() && !matches!(toks[j].0, Tok::Punct(';' | '{')) {
                j = if matches!(toks[j].0, Tok::Punct('(' | '[')) {
                    skip_group(&toks, j)
                } else {
                    j + 1
                };
            }
            let mod_name = (ident(toks.get(item)) == Some("mod"))
                .then(|| ident(toks.get(item + 1)))
                .flatten();
            if is(toks.get(j), &Tok::Punct(';')) {
                if let Some(name) = mod_name {
                    f.test_children
                        .push(here.iter().cloned().chain([name.to_string()]).collect());
                }
                i = j + 1;
            } else {
                i = skip_group(&toks, j);
                if i >= toks.len() {
                    f.trailing_test_from = Some(start_line);
                }
            }
            continue;
        }
        match t {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|m| m.1 == depth) {
                    inline.pop();
                }
                depth -= 1;
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let Some(name) = ident(toks.get(i + 1)) {
                    if here.is_empty() {
                        f.root_modules.push(name.to_string());
                    }
                    if is(toks.get(i + 2), &Tok::Punct('{')) {
                        inline.push((name.to_string(), depth + 1));
                        depth += 1;
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(kw) if kw == "crate" && is(toks.get(i + 1), &Tok::PathSep) => {
                let targets = match &toks.get(i + 2).map(|t| &t.0) {
                    Some(Tok::Ident(m)) => vec![m.clone()],
                    Some(Tok::Punct('{')) => group_heads(&toks, i + 2),
                    _ => vec![],
                };
                for to in path_after(&toks, i + 2, Vec::new()) {
                    f.deep_refs.push((here.clone(), to, line));
                }
                if let Some(from) = here.first() {
                    for to in targets {
                        f.refs.push((from.clone(), to, line));
                    }
                }
            }
            Tok::Ident(kw) if kw == "super" && (i == 0 || !is(toks.get(i - 1), &Tok::PathSep)) => {
                let mut n = 0;
                let mut j = i;
                while ident(toks.get(j)) == Some("super") && is(toks.get(j + 1), &Tok::PathSep) {
                    n += 1;
                    j += 2;
                }
                if n > 0 && n <= here.len() {
                    for to in path_after(&toks, j, here[..here.len() - n].to_vec()) {
                        f.deep_refs.push((here.clone(), to, line));
                    }
                }
                // Climbing to the crate root makes the next segment a top-level module; a shorter
                // climb stays inside this file's own top-level module.
                if n > 0 && n == here.len() {
                    let targets = match toks.get(j).map(|t| &t.0) {
                        Some(Tok::Ident(m)) => vec![m.clone()],
                        Some(Tok::Punct('{')) => group_heads(&toks, j),
                        _ => vec![],
                    };
                    for to in targets {
                        f.refs.push((here[0].clone(), to, line));
                    }
                }
                i = j.max(i + 1);
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    f
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `matrix/table.rs` → `[matrix, table]`; `lib.rs`, `main.rs` → `[]`; `a/mod.rs` → `[a]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// One crate, read: its import edges, its non-test files with their lengths, and whether it names
/// the CLI (file:line).
struct CrateScan {
    edges: Vec<Edge>,
    /// Per module of [`CHECKED_CHILDREN`] in this crate: the edges between its child modules.
    child_edges: Vec<(String, Vec<Edge>)>,
    lengths: Vec<(String, usize, bool)>,
    names_cli: Vec<String>,
}

fn scan(root: &Path, src_dir: &str) -> CrateScan {
    let dir = root.join(src_dir);
    let mut files = Vec::new();
    rust_files(&dir, &mut files);
    files.sort();
    let mut per_file = Vec::new();
    let (mut test_mods, mut nodes) = (BTreeSet::new(), BTreeSet::new());
    // Child modules, as [parent, child], for the child-module check.
    let mut children: BTreeSet<Vec<String>> = BTreeSet::new();
    for p in &files {
        let rel = p.strip_prefix(&dir).unwrap();
        let modpath = module_path(rel);
        let src = std::fs::read_to_string(p).unwrap();
        let f = facts(&src, &modpath);
        test_mods.extend(f.test_children.iter().cloned());
        nodes.extend(f.root_modules.iter().cloned());
        if let Some(top) = modpath.first() {
            nodes.insert(top.clone());
        }
        if modpath.len() >= 2 {
            children.insert(modpath[..2].to_vec());
        }
        per_file.push((format!("{src_dir}/{}", rel.display()), modpath, src, f));
    }
    let mut scan = CrateScan {
        child_edges: CHECKED_CHILDREN
            .iter()
            .filter(|c| c.0 == src_dir)
            .map(|c| (c.1.to_string(), Vec::new()))
            .collect(),
        edges: Vec::new(),
        lengths: Vec::new(),
        names_cli: Vec::new(),
    };
    for (path, modpath, src, f) in per_file {
        let test_only = modpath.last().is_some_and(|m| m == "tests")
            || test_mods.iter().any(|t| modpath.starts_with(t));
        if test_only {
            continue;
        }
        let counted = f.trailing_test_from.map_or(src.lines().count(), |l| l - 1);
        let has_reason = src.lines().take_while(|l| l.starts_with("//!")).any(|l| {
            l.trim_start_matches("//!")
                .trim_start()
                .starts_with(LONG_FILE_MARKER)
        });
        scan.lengths.push((path.clone(), counted, has_reason));
        for (n, l) in strip(&src).lines().enumerate() {
            if l.contains("firedup_cli") {
                scan.names_cli.push(format!("{path}:{}", n + 1));
            }
        }
        for (parent, edges) in scan.child_edges.iter_mut() {
            for (here, to, line) in &f.deep_refs {
                let child_of = |p: &[String]| {
                    (p.len() >= 2 && p[0] == *parent && children.contains(&p[..2]))
                        .then(|| p[1].clone())
                };
                if let (Some(from), Some(to)) = (child_of(here), child_of(to)) {
                    if from != to {
                        edges.push(Edge {
                            from,
                            to,
                            at: format!("{path}:{line}"),
                        });
                    }
                }
            }
        }
        for (from, to, line) in f.refs {
            if from != to && nodes.contains(&to) {
                scan.edges.push(Edge {
                    from,
                    to,
                    at: format!("{path}:{line}"),
                });
            }
        }
    }
    scan
}

/// Breadth-first from `from`: every module reachable from it, with the one it was reached from,
/// and the order they were reached in.
fn reach<'a>(
    adj: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    from: &'a str,
) -> (BTreeMap<&'a str, &'a str>, Vec<&'a str>) {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    let mut order = Vec::new();
    while let Some(v) = queue.pop_front() {
        for &w in &adj[v] {
            if w != from && !parent.contains_key(w) {
                parent.insert(w, v);
                order.push(w);
                queue.push_back(w);
            }
        }
    }
    (parent, order)
}

/// One cycle per strongly connected component of the graph, spelled out as the shortest cycle
/// through its first module (`a → b → a`). The graphs are small: a breadth-first search per node.
fn cycles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut adj: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for e in edges {
        adj.entry(&e.from).or_default().insert(&e.to);
        adj.entry(&e.to).or_default();
    }
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for &v in adj.keys() {
        if done.contains(v) {
            continue;
        }
        let (parent, order) = reach(&adj, v);
        let Some(&last) = order.iter().find(|w| adj[*w].contains(v)) else {
            continue;
        };
        for &u in &order {
            if reach(&adj, u).0.contains_key(v) {
                done.insert(u);
            }
        }
        let mut cyc = vec![v.to_string()];
        let mut at = last;
        while at != v {
            cyc.push(at.to_string());
            at = parent[at];
        }
        cyc.push(v.to_string());
        cyc.reverse();
        out.push(cyc);
    }
    out
}

/// One message per cycle of `edges` (the import graph `graph`), with where each edge was seen.
fn cycle_problems(graph: &str, edges: &[Edge]) -> Vec<String> {
    let mut problems = Vec::new();
    for cyc in cycles(edges) {
        let mut msg = format!("{graph}: import cycle {}", cyc.join(" → "));
        for pair in cyc.windows(2) {
            let seen: Vec<&str> = edges
                .iter()
                .filter(|e| e.from == pair[0] && e.to == pair[1])
                .map(|e| e.at.as_str())
                .collect();
            msg += &format!("\n    {} → {}: {}", pair[0], pair[1], seen.join(", "));
        }
        problems.push(msg);
    }
    problems
}

#[test]
fn the_module_graph_has_no_cycle_the_library_never_names_the_cli_and_files_stay_short() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut problems = Vec::new();
    let mut used_edges = BTreeSet::new();
    let mut used_long = BTreeSet::new();
    for &(src_dir, is_library) in CRATES {
        let s = scan(root, src_dir);
        let allowed = |e: &Edge| {
            KNOWN_EDGES
                .iter()
                .position(|k| k.0 == src_dir && k.1 == e.from && k.2 == e.to)
        };
        for e in &s.edges {
            if let Some(k) = allowed(e) {
                used_edges.insert(k);
            }
        }
        let edges: Vec<Edge> = s
            .edges
            .iter()
            .filter(|e| allowed(e).is_none())
            .cloned()
            .collect();
        let mut graphs = vec![(src_dir.to_string(), edges)];
        for (parent, edges) in &s.child_edges {
            graphs.push((format!("{src_dir}/{parent}"), edges.clone()));
        }
        for (graph, edges) in &graphs {
            problems.extend(cycle_problems(graph, edges));
        }
        if std::env::var_os("FIREDUP_ARCH_EDGES").is_some() {
            for e in &s.edges {
                eprintln!("{src_dir}: {} → {} ({})", e.from, e.to, e.at);
            }
        }
        if is_library {
            for at in &s.names_cli {
                problems.push(format!("{at}: a library crate names the CLI (firedup_cli)"));
            }
            let manifest = root.join(src_dir).parent().unwrap().join("Cargo.toml");
            let manifest_text = std::fs::read_to_string(&manifest).unwrap();
            if manifest_text.contains("firedup-cli") {
                problems.push(format!(
                    "{}: a library crate depends on the CLI",
                    manifest.display()
                ));
            }
        }
        for (path, lines, has_reason) in &s.lengths {
            let known = KNOWN_LONG_FILES.iter().position(|k| k.0 == path);
            if *lines > MAX_LINES {
                match known {
                    Some(k) => {
                        used_long.insert(k);
                    }
                    None if !has_reason => problems.push(format!(
                        "{path}: {lines} lines (tests excluded) > {MAX_LINES}: split it by idea, or state why \
                         in its module doc on a line starting `//! {LONG_FILE_MARKER}`"
                    )),
                    None => {}
                }
            }
        }
    }
    for (k, e) in KNOWN_EDGES.iter().enumerate() {
        if !used_edges.contains(&k) {
            problems.push(format!(
                "KNOWN_EDGES: {} {} → {} is gone: remove the entry",
                e.0, e.1, e.2
            ));
        }
    }
    for (k, f) in KNOWN_LONG_FILES.iter().enumerate() {
        if !used_long.contains(&k) {
            problems.push(format!(
                "KNOWN_LONG_FILES: {} is no longer over {MAX_LINES} lines: remove the entry",
                f.0
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the floor plan is broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_lexer_sees_paths_only_in_code() {
    let src = "//! crate::a in a doc\nuse crate::{b, c::{d, e}};\nfn f() { let s = \"crate::g\"; let r = r#\"crate::h\"#; let c = '\"'; crate::i::j(); }\n#[cfg(test)]\nmod tests {\n    use crate::k;\n}\n";
    let f = facts(src, &["m".to_string()]);
    let refs: Vec<(&str, usize)> = f.refs.iter().map(|r| (r.1.as_str(), r.2)).collect();
    assert_eq!(refs, vec![("b", 2), ("c", 2), ("i", 3)]);
    assert_eq!(f.trailing_test_from, Some(4));
    let nested =
        "mod inner { fn f() { super::super::x::y(); super::z(); } }\n#[cfg(test)]\nmod tests;\n";
    let f = facts(nested, &["m".to_string()]);
    let refs: Vec<&str> = f.refs.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(refs, vec!["x"]);
    assert_eq!(
        f.test_children,
        vec![vec!["m".to_string(), "tests".to_string()]]
    );
    // Below the top level: a sibling by `super::`, a group, and `crate::` through the parent.
    let child = "use super::decide::Decision;\nuse super::{cause, Judge};\nfn f() { crate::judge::exit::g(); }\n";
    let f = facts(child, &["judge".to_string(), "line".to_string()]);
    let deep: Vec<(String, usize)> = f.deep_refs.iter().map(|r| (r.1.join("::"), r.2)).collect();
    assert_eq!(
        deep,
        vec![
            ("judge::decide".to_string(), 1),
            ("judge::cause".to_string(), 2),
            ("judge::Judge".to_string(), 2),
            ("judge::exit".to_string(), 3)
        ]
    );
}

#[test]
fn a_cycle_is_spelled_out() {
    let e = |a: &str, b: &str| Edge {
        from: a.into(),
        to: b.into(),
        at: String::new(),
    };
    assert!(cycles(&[e("a", "b"), e("b", "c")]).is_empty());
    let found = cycles(&[e("a", "b"), e("b", "c"), e("c", "a"), e("c", "d")]);
    assert_eq!(found, vec![vec!["a", "b", "c", "a"]]);
}

/// With `autotests = false`, a `tests/*.rs` that neither tests/main.rs declares nor Cargo.toml
/// names as a `[[test]]` would never run, silently.
#[test]
fn every_integration_test_file_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let main = std::fs::read_to_string(root.join("tests/main.rs")).unwrap();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(root.join("tests")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let declared = main.lines().any(|l| l.trim() == format!("mod {name};"));
        let own_target = manifest.contains(&format!("path = \"tests/{name}.rs\""));
        if !declared && !own_target {
            missing.push(format!("tests/{name}.rs"));
        }
    }
    assert!(
        missing.is_empty(),
        "never run: {missing:?}: declare each as `mod NAME;` in tests/main.rs"
    );
}
