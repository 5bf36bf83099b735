//! Which silent rank is not inside a collective: pure comparison of the ranks' stacks, read by
//! the observer (`observe/rank_watch.rs`) when every rank has been silent for a while.
//!
//! Each rank's main thread is placed in one of three places:
//! - **inside**: its Python stack (`py-spy dump`) has a `torch.distributed` collective frame
//!   (`all_reduce`, `barrier`, `wait`, ...), or, seen by the kernel only, it blocks where a rank
//!   waiting for its peers blocks: gloo's caller waits on a futex while its loop thread reads the
//!   socket (`futex_*`, `ep_poll`, `tcp_recvmsg`, `sk_wait_data`, `poll`/`select`);
//! - **outside**: its Python stack has no torch frame at all (user code, the standard library) or
//!   is in torch's data loading; or the kernel shows it sleeping (`*nanosleep`), stopped, paused
//!   (`pause`, `sigsuspend`), waiting for a child process (`do_wait`) or reading its terminal;
//! - **unknown**: anything else. Running is unknown on purpose: NCCL spins on the CPU while it
//!   waits in a collective, and so does a rank stuck in its own loop; so is a rank in torch code
//!   that may wait on a collective issued earlier (autograd's backward under DDP, a CUDA sync).
//!
//! A rank is named only when exactly one rank is outside and every other rank is inside: one
//! unknown peer, or two outside, and nothing is named (a wrong rank is worse than none). Each
//! rank's place is also reported as it is ([`places`]): a multi-node run compares them across
//! its nodes (`firedup_judge::group`).

use firedup_judge::rank_place::{Place, RankPlace};

/// One frame of a Python stack, as `py-spy dump` prints it: `function (file:line)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Frame {
    pub function: String,
    /// The file and line, as printed (`torch/distributed/distributed_c10d.py:2806`).
    pub place: String,
}

/// What was seen of one rank's main thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum View {
    /// Its Python stack, innermost frame first.
    Python(Vec<Frame>),
    /// The kernel's view: the thread's state (`/proc/PID/task/PID/stat`), its wait channel
    /// (`wchan`; `0` or empty when unknown) and the functions of its kernel stack, innermost
    /// first (empty when unreadable).
    Kernel {
        state: char,
        wchan: String,
        stack: Vec<String>,
    },
}

/// One rank's stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RankStack {
    pub rank: u32,
    pub view: View,
}

/// torch.distributed's functions that block until the peers take part.
const COLLECTIVES: &[&str] = &[
    "all_reduce",
    "all_reduce_coalesced",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "broadcast_object_list",
    "barrier",
    "monitored_barrier",
    "_store_based_barrier",
    "reduce",
    "gather",
    "gather_object",
    "scatter",
    "scatter_object_list",
    "send",
    "recv",
    "isend",
    "irecv",
    "batch_isend_irecv",
    "wait",
];

/// Kernel functions (substrings) where a thread waits for a peer or another thread.
const PEER_WAITS: &[&str] = &[
    "futex",
    "ep_poll",
    "epoll_wait",
    "tcp_recvmsg",
    "sk_wait_data",
    "sk_stream_wait",
    "inet_csk_accept",
    "unix_stream_read",
    "sock_recvmsg",
    "do_sys_poll",
    "poll_schedule_timeout",
    "do_select",
    "core_sys_select",
];

/// What a kernel function shows a thread waiting on, when it is nothing its peers could end: the
/// words for it.
fn own_wait(function: &str) -> Option<&'static str> {
    if function.contains("nanosleep") {
        Some("sleeps")
    } else if function.contains("sys_pause") || function.contains("sigsuspend") {
        Some("is paused")
    } else if matches!(
        function,
        "do_wait" | "kernel_wait4" | "kernel_waitid" | "do_waitid"
    ) {
        Some("waits for a child process")
    } else if function.contains("n_tty_read") {
        Some("reads its terminal")
    } else {
        None
    }
}

fn is_torch(place: &str) -> bool {
    place.starts_with("torch/") || place.contains("/torch/")
}

fn python_place(frames: &[Frame]) -> Place {
    let shown = |f: &Frame| format!("{} ({})", f.function, f.place);
    if let Some(f) = frames.iter().find(|f| {
        f.place.contains("torch/distributed/")
            && !f.place.contains("torch/distributed/elastic/")
            && COLLECTIVES.contains(&f.function.as_str())
    }) {
        return Place::Inside(format!("is in {}", shown(f)));
    }
    let Some(top) = frames.first() else {
        return Place::Unknown;
    };
    match frames.iter().find(|f| is_torch(&f.place)) {
        None => Place::Outside(format!("is in {}, outside torch.distributed,", shown(top))),
        Some(t) if t.place.contains("torch/utils/data/") => {
            Place::Outside(format!("is in {}, loading data,", shown(t)))
        }
        Some(_) => Place::Unknown,
    }
}

fn kernel_place(state: char, wchan: &str, stack: &[String]) -> Place {
    if matches!(state, 'T' | 't') {
        return Place::Outside("is stopped".into());
    }
    if state == 'R' {
        return Place::Unknown;
    }
    let wchan = Some(wchan).filter(|w| !w.is_empty() && *w != "0");
    let innermost = wchan.or(stack.first().map(String::as_str));
    // The innermost function that says what the thread waits on decides.
    for f in wchan.into_iter().chain(stack.iter().map(String::as_str)) {
        let at = innermost.unwrap_or(f);
        if let Some(words) = own_wait(f) {
            return Place::Outside(format!("{words} in {at}"));
        }
        if PEER_WAITS.iter().any(|p| f.contains(p)) {
            return Place::Inside(format!("waits in {at}"));
        }
    }
    Place::Unknown
}

fn place(view: &View) -> Place {
    match view {
        View::Python(frames) => python_place(frames),
        View::Kernel {
            state,
            wchan,
            stack,
        } => kernel_place(*state, wchan, stack),
    }
}

/// Where each rank of `stacks` was, in their order: what the node reports, for a comparison
/// across nodes (a node with one rank has nothing to compare its rank against).
pub(crate) fn places(stacks: &[RankStack]) -> Vec<RankPlace> {
    stacks
        .iter()
        .map(|s| RankPlace {
            rank: s.rank,
            place: place(&s.view),
        })
        .collect()
}

/// The one rank outside a collective while every other is inside, with the evidence in words
/// ("rank 1 sleeps in hrtimer_nanosleep while rank 0 waits in futex_do_wait"); `None` when fewer
/// than two ranks were seen or the picture is not that clear.
pub(crate) fn outside_collective(stacks: &[RankStack]) -> Option<(u32, String)> {
    if stacks.len() < 2 {
        return None;
    }
    let placed: Vec<(u32, Place)> = stacks.iter().map(|s| (s.rank, place(&s.view))).collect();
    let mut outside = placed.iter().filter_map(|(r, p)| match p {
        Place::Outside(w) => Some((*r, w)),
        _ => None,
    });
    let (rank, words) = outside.next()?;
    if outside.next().is_some() {
        return None;
    }
    let mut peers = Vec::new();
    for (r, p) in &placed {
        match p {
            Place::Inside(w) => peers.push(format!("rank {r} {w}")),
            Place::Outside(_) => {}
            Place::Unknown => return None,
        }
    }
    const SHOWN: usize = 4;
    let mut said = peers
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if peers.len() > SHOWN {
        said.push_str(&format!(" and {} more ranks", peers.len() - SHOWN));
    }
    Some((rank, format!("rank {rank} {words} while {said}")))
}

/// The main thread's frames in `py-spy dump` output, innermost first; `None` when it has no
/// main thread (py-spy failed, or printed something else).
pub(crate) fn parse_py_spy_dump(text: &str) -> Option<Vec<Frame>> {
    let mut lines = text.lines();
    lines.find(|l| l.starts_with("Thread ") && l.contains("\"MainThread\""))?;
    let mut frames = Vec::new();
    for line in lines {
        if !line.starts_with(' ') {
            break;
        }
        let line = line.trim();
        // `--locals` adds "Arguments:" / "Locals:" blocks, indented deeper: not frames.
        let Some(open) = line.rfind(" (") else {
            continue;
        };
        let Some(place) = line[open + 2..].strip_suffix(')') else {
            continue;
        };
        frames.push(Frame {
            function: line[..open].to_string(),
            place: place.to_string(),
        });
    }
    Some(frames)
}

/// The function names of a `/proc/PID/stack` (`[<0>] hrtimer_nanosleep+0xb5/0x130`), innermost
/// first.
pub(crate) fn parse_kernel_stack(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| {
            let f = l.split_once("] ").map_or(l, |(_, f)| f).trim();
            let name = f.split('+').next()?.trim();
            (!name.is_empty()).then(|| name.to_string())
        })
        .collect()
}

#[cfg(test)]
#[path = "rank_stacks/tests.rs"]
mod tests;
