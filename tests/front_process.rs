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

/// Whether `a` and `b` share their memory (`kcmp(KCMP_VM)`); `None` where the kernel cannot say.
fn share_memory(a: u32, b: u32) -> Option<bool> {
    const KCMP_VM: libc::c_long = 1;
    // SAFETY: kcmp only compares two processes' kernel objects.
    let r = unsafe {
        libc::syscall(
            libc::SYS_kcmp,
            a as libc::c_long,
            b as libc::c_long,
            KCMP_VM,
            0,
            0,
        )
    };
    (r >= 0).then_some(r == 0)
}

/// The children of `pid`, oldest first.
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// `SigBlk` of `pid`'s status: the signals it blocks.
fn blocked_signals(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The front's memory is shared with a keeper process that holds no file and takes no signal
/// but SIGKILL, so that the front's exit frees nothing; the keeper dies with the front (here a
/// SIGKILL of the front, the hardest end).
#[test]
fn the_front_s_memory_outlives_it_in_a_keeper_that_dies_with_it() {
    let env = Env::new();
    let mut child = env.run().json().until("exit").shell("sleep 600").spawn();
    let front = child.id();
    let watcher = common::bounded::wait_for("the watcher", BOUND, || common::watcher_of(front));
    let keeper = common::bounded::wait_for("the keeper", BOUND, || {
        children_of(front).into_iter().find(|&c| c != watcher)
    });
    assert_eq!(
        share_memory(front, keeper),
        Some(true),
        "the keeper shares the front's memory"
    );
    assert_eq!(
        share_memory(front, watcher),
        Some(false),
        "the watcher has its own"
    );
    // Its files closed (a `$(firedup run ...)` ends with the front) and its signals blocked (a
    // Ctrl-C to the process group is the front's and the watcher's), waited for: it does both
    // right after its start.
    common::bounded::wait_for("the keeper's files closed", BOUND, || {
        std::fs::read_dir(format!("/proc/{keeper}/fd"))
            .ok()
            .map(|d| d.count())
            .filter(|&n| n == 0)
    });
    let blocked = blocked_signals(keeper).unwrap_or(0);
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        assert_ne!(
            blocked & (1 << (sig - 1)),
            0,
            "signal {sig} blocked: {blocked:x}"
        );
    }
    child.kill().unwrap();
    let _ = child.wait();
    common::bounded::wait_for("the keeper gone with the front", BOUND, || {
        let state = std::fs::read_to_string(format!("/proc/{keeper}/stat")).unwrap_or_default();
        // Gone, or a zombie left to its new parent to reap.
        (state.is_empty()
            || state
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z')))
        .then_some(())
    });
    // The watcher was killed with the front before any verdict (`PR_SET_PDEATHSIG`), and its
    // server with it is stopped by the environment's end.
}
