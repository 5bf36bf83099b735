//! The process the caller starts (the *front*, `src/front.rs`): it waits for the watcher's code,
//! holding little, so that its exit, which the caller waits for, is short (issue 28).

use crate::common;
use common::Env;

/// A hang bound, not a speed check.
const BOUND: std::time::Duration = std::time::Duration::from_secs(120);

/// The resident size (kB) of `pid`'s mapping of its own program at file offset 0 (the ELF header
/// and the relocation tables the dynamic loader read at the start, never read again).
fn program_head_rss_kb(pid: u32) -> Option<u64> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).ok()?;
    let mut inside = false;
    for line in smaps.lines() {
        if line.split_ascii_whitespace().next()?.contains('-') && line.contains(" r") {
            let words: Vec<&str> = line.split_ascii_whitespace().collect();
            inside = words.get(2) == Some(&"00000000") && line.ends_with(exe.to_str()?);
        } else if inside && let Some(kb) = line.strip_prefix("Rss:") {
            return kb.trim().strip_suffix("kB")?.trim().parse().ok();
        }
    }
    None
}

/// While the command runs, the front has let go of the pages its start mapped (the watcher, a
/// copy of the same start, still holds them), and the run ends as always.
#[test]
fn the_front_waits_without_the_pages_its_start_mapped() {
    let env = Env::new();
    let go = env.work.path().join("go");
    let script = format!("while [ ! -e '{}' ]; do sleep 0.05; done", go.display());
    let child = env.run().json().until("exit").shell(&script).spawn();
    let front = child.id();
    let watcher = common::bounded::wait_for("the watcher", BOUND, || common::watcher_of(front));
    let watcher_head = program_head_rss_kb(watcher);
    // Shed right after the split, while the command starts: waited for, bounded.
    let front_head = common::bounded::wait_for("the front's pages let go", BOUND, || {
        program_head_rss_kb(front).filter(|&kb| kb <= 16)
    });
    std::fs::write(&go, "").unwrap();
    let out: common::Run = common::bounded::wait_output(child, BOUND).into();
    assert_eq!(out.verdict(), "succeeded", "{}", out.explain());
    assert!(
        watcher_head.is_some_and(|kb| kb > 16),
        "the watcher, not shed, holds the program's head: {watcher_head:?} kB (front {front_head} kB)"
    );
}
