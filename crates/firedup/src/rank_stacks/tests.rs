//! The stack comparison on views seen on real ranks (torch 2.15, gloo, 2 ranks under torchrun:
//! rank 1 in `time.sleep`, rank 0 in `dist.all_reduce`), and on variations of them.

use super::*;

/// `py-spy dump --pid` of the rank blocked in `all_reduce`, as printed.
const PY_SPY_ALL_REDUCE: &str = "Process 27027: /work/torchvenv/bin/python3 -u silent.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 27027 (idle): \"MainThread\"
    all_reduce (torch/distributed/distributed_c10d.py:4181)
    _exception_logger.<locals>.wrapper (torch/distributed/c10d_logger.py:83)
    <module> (silent.py:9)
";

/// `py-spy dump --pid` of the rank in `time.sleep`, as printed.
const PY_SPY_SLEEP: &str = "Process 27028: /work/torchvenv/bin/python3 -u silent.py
Python v3.11.7 (/root/.pyenv/versions/3.11.7/bin/python3.11)

Thread 27028 (idle): \"MainThread\"
    <module> (silent.py:7)
";

/// `/proc/PID/stack` of a Python main thread in `time.sleep`, as read.
const KERNEL_SLEEP: &str = "[<0>] hrtimer_nanosleep+0xb5/0x130
[<0>] common_nsleep_timens+0x3d/0xa0
[<0>] __x64_sys_clock_nanosleep+0xde/0x150
[<0>] do_syscall_64+0x71/0x290
[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e
";

/// `/proc/PID/stack` of a main thread blocked on a futex, as read.
const KERNEL_FUTEX: &str = "[<0>] futex_do_wait+0x46/0x90
[<0>] __futex_wait+0x8a/0x100
[<0>] futex_wait+0x9a/0x150
[<0>] do_futex+0xfd/0x250
[<0>] __x64_sys_futex+0x12d/0x230
[<0>] do_syscall_64+0x71/0x290
[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e
";

fn py(rank: u32, text: &str) -> RankStack {
    RankStack {
        rank,
        view: View::Python(parse_py_spy_dump(text).expect("a main thread")),
    }
}

fn frames(rank: u32, frames: &[(&str, &str)]) -> RankStack {
    RankStack {
        rank,
        view: View::Python(
            frames
                .iter()
                .map(|(f, p)| Frame {
                    function: f.to_string(),
                    place: p.to_string(),
                })
                .collect(),
        ),
    }
}

fn kernel(rank: u32, state: char, wchan: &str, stack: &str) -> RankStack {
    RankStack {
        rank,
        view: View::Kernel {
            state,
            wchan: wchan.into(),
            stack: parse_kernel_stack(stack),
        },
    }
}

#[test]
fn parses_the_main_thread_of_a_py_spy_dump() {
    let f = parse_py_spy_dump(PY_SPY_ALL_REDUCE).unwrap();
    assert_eq!(f.len(), 3);
    assert_eq!(f[0].function, "all_reduce");
    assert_eq!(f[0].place, "torch/distributed/distributed_c10d.py:4181");
    assert_eq!(f[1].function, "_exception_logger.<locals>.wrapper");
    assert_eq!(
        parse_py_spy_dump("Error: Failed to find python version"),
        None
    );
    let two_threads = "Thread 1 (idle): \"pt_gloo\"\n    run (x.py:1)\nThread 2 (active): \"MainThread\"\n    step (train.py:5)\n    Arguments:\n        x: 1\nThread 3 (idle): \"other\"\n    f (y.py:2)\n";
    let f = parse_py_spy_dump(two_threads).unwrap();
    assert_eq!(
        f,
        vec![Frame {
            function: "step".into(),
            place: "train.py:5".into()
        }]
    );
}

#[test]
fn parses_kernel_stacks() {
    assert_eq!(
        parse_kernel_stack(KERNEL_SLEEP)[..2],
        ["hrtimer_nanosleep", "common_nsleep_timens"]
    );
    assert!(parse_kernel_stack("").is_empty());
}

#[test]
fn names_the_one_rank_outside_a_collective_and_only_then() {
    let cases: Vec<(&str, Vec<RankStack>, Option<(u32, &str)>)> = vec![
        (
            "py-spy: rank 1 in user code, rank 0 in all_reduce (real dumps)",
            vec![py(0, PY_SPY_ALL_REDUCE), py(1, PY_SPY_SLEEP)],
            Some((
                1,
                "rank 1 is in <module> (silent.py:7), outside torch.distributed, while rank 0 is in all_reduce (torch/distributed/distributed_c10d.py:4181)",
            )),
        ),
        (
            "kernel: rank 1 sleeps, rank 0 waits on a futex (real stacks)",
            vec![
                kernel(0, 'S', "futex_do_wait", KERNEL_FUTEX),
                kernel(1, 'S', "hrtimer_nanosleep", KERNEL_SLEEP),
            ],
            Some((
                1,
                "rank 1 sleeps in hrtimer_nanosleep while rank 0 waits in futex_do_wait",
            )),
        ),
        (
            "kernel: the wait channel unknown, the stack decides",
            vec![
                kernel(0, 'S', "0", KERNEL_FUTEX),
                kernel(1, 'S', "", KERNEL_SLEEP),
            ],
            Some((
                1,
                "rank 1 sleeps in hrtimer_nanosleep while rank 0 waits in futex_do_wait",
            )),
        ),
        (
            "kernel: the stack unreadable, the wait channel decides; four ranks",
            vec![
                kernel(0, 'S', "futex_do_wait", ""),
                kernel(1, 'S', "ep_poll", ""),
                kernel(2, 'T', "do_signal_stop", ""),
                kernel(3, 'S', "tcp_recvmsg", ""),
            ],
            Some((
                2,
                "rank 2 is stopped while rank 0 waits in futex_do_wait, rank 1 waits in ep_poll, rank 3 waits in tcp_recvmsg",
            )),
        ),
        (
            "mixed views: py-spy for one, the kernel for the other",
            vec![
                py(0, PY_SPY_ALL_REDUCE),
                kernel(1, 'S', "hrtimer_nanosleep", KERNEL_SLEEP),
            ],
            Some((
                1,
                "rank 1 sleeps in hrtimer_nanosleep while rank 0 is in all_reduce (torch/distributed/distributed_c10d.py:4181)",
            )),
        ),
        (
            "a rank waiting for a child process is outside",
            vec![
                kernel(0, 'S', "futex_do_wait", ""),
                kernel(1, 'S', "do_wait", ""),
            ],
            Some((
                1,
                "rank 1 waits for a child process in do_wait while rank 0 waits in futex_do_wait",
            )),
        ),
        (
            "py-spy: a rank stuck loading data is outside",
            vec![
                frames(
                    0,
                    &[("barrier", "torch/distributed/distributed_c10d.py:4800")],
                ),
                frames(
                    1,
                    &[
                        ("_get_data", "torch/utils/data/dataloader.py:1120"),
                        ("train", "train.py:40"),
                    ],
                ),
            ],
            Some((
                1,
                "rank 1 is in _get_data (torch/utils/data/dataloader.py:1120), loading data, while rank 0 is in barrier (torch/distributed/distributed_c10d.py:4800)",
            )),
        ),
        (
            "every rank sleeps: none is named",
            vec![
                kernel(0, 'S', "hrtimer_nanosleep", ""),
                kernel(1, 'S', "hrtimer_nanosleep", ""),
            ],
            None,
        ),
        (
            "every rank in the collective: none is named",
            vec![py(0, PY_SPY_ALL_REDUCE), py(1, PY_SPY_ALL_REDUCE)],
            None,
        ),
        (
            "a running peer may be NCCL spinning in the collective: none is named",
            vec![
                kernel(0, 'R', "0", ""),
                kernel(1, 'S', "hrtimer_nanosleep", KERNEL_SLEEP),
            ],
            None,
        ),
        (
            "a running rank may be in a collective (NCCL spins): not named against waiting peers",
            vec![
                kernel(0, 'R', "0", ""),
                kernel(1, 'S', "futex_do_wait", KERNEL_FUTEX),
            ],
            None,
        ),
        (
            "py-spy: torch code other than torch.distributed may wait on a collective (DDP's backward)",
            vec![
                py(0, PY_SPY_ALL_REDUCE),
                frames(
                    1,
                    &[
                        ("_engine_run_backward", "torch/autograd/graph.py:829"),
                        ("train", "train.py:40"),
                    ],
                ),
            ],
            None,
        ),
        (
            "py-spy: the elastic launcher's wrapper is not a collective",
            vec![
                py(0, PY_SPY_ALL_REDUCE),
                frames(
                    1,
                    &[
                        ("wait", "torch/distributed/elastic/agent/server/api.py:700"),
                        ("main", "train.py:40"),
                    ],
                ),
            ],
            None,
        ),
        (
            "a wait the kernel view cannot place: none is named",
            vec![
                kernel(0, 'D', "io_schedule", ""),
                kernel(1, 'S', "hrtimer_nanosleep", ""),
            ],
            None,
        ),
        (
            "one rank alone: nothing to compare",
            vec![kernel(1, 'S', "hrtimer_nanosleep", KERNEL_SLEEP)],
            None,
        ),
        (
            "nothing readable: an empty Python stack",
            vec![frames(0, &[]), frames(1, &[])],
            None,
        ),
    ];
    for (what, stacks, want) in cases {
        let got = outside_collective(&stacks);
        let want = want.map(|(r, w)| (r, w.to_string()));
        assert_eq!(got, want, "{what}");
    }
}

#[test]
fn many_peers_are_summarised() {
    let mut stacks: Vec<RankStack> = (0..8)
        .map(|r| kernel(r, 'S', "futex_do_wait", ""))
        .collect();
    stacks.push(kernel(8, 'S', "hrtimer_nanosleep", ""));
    let (rank, words) = outside_collective(&stacks).unwrap();
    assert_eq!(rank, 8);
    assert!(
        words.ends_with("rank 3 waits in futex_do_wait and 4 more ranks"),
        "{words}"
    );
}

#[test]
fn each_ranks_place_is_reported_also_for_one_rank_alone() {
    // (the stacks a node read, the places it reports): one rank alone names nobody on its node,
    // but its place goes to the group.
    let cases: Vec<(Vec<RankStack>, Vec<(u32, Place)>)> = vec![
        (
            vec![py(1, PY_SPY_SLEEP)],
            vec![(
                1,
                Place::Outside("is in <module> (silent.py:7), outside torch.distributed,".into()),
            )],
        ),
        (
            vec![kernel(0, 'S', "0", KERNEL_FUTEX)],
            vec![(0, Place::Inside("waits in futex_do_wait".into()))],
        ),
        (
            vec![kernel(1, 'S', "0", KERNEL_SLEEP), kernel(2, 'R', "0", "")],
            vec![
                (1, Place::Outside("sleeps in hrtimer_nanosleep".into())),
                (2, Place::Unknown),
            ],
        ),
        (vec![], vec![]),
    ];
    for (stacks, want) in cases {
        let got: Vec<(u32, Place)> = places(&stacks)
            .into_iter()
            .map(|p| (p.rank, p.place))
            .collect();
        assert_eq!(got, want);
        if stacks.len() == 1 {
            assert_eq!(outside_collective(&stacks), None);
        }
    }
}
