//! Processes a language runtime starts for itself, never a daemon a launcher left behind: Python's
//! `multiprocessing` resource tracker, semaphore tracker and fork server, and torch inductor's
//! compile workers. Each lives only until the program that started it is gone (it waits on a pipe
//! from it, or on its pid), so when a launcher exits 0 and one of these is all that still carries
//! the run's id, the run has ended: following it would turn a plain exit 0 into "followed the
//! daemon pid … resource_tracker" and an unknown status a moment later.

/// The code a `multiprocessing` helper is started with (`python -c CODE`), as CPython 3.7 to 3.14
/// writes it (`multiprocessing/resource_tracker.py`, `semaphore_tracker.py`, `forkserver.py`).
const MULTIPROCESSING_HELPERS: [&str; 3] = [
    "from multiprocessing.resource_tracker import main",
    "from multiprocessing.semaphore_tracker import main",
    "from multiprocessing.forkserver import main",
];

/// torch inductor's compile worker pool (`torch/_inductor/compile_worker/__main__.py`, started by
/// `SubprocPool` with `--parent=PID`: it exits when that pid does).
const TORCH_COMPILE_WORKER: &str = "torch/_inductor/compile_worker/";

/// Whether the process started with `argv` is a runtime's own helper.
pub fn is_interpreter_helper(argv: &[String]) -> bool {
    let code_after_c = argv
        .windows(2)
        .find(|w| w[0] == "-c")
        .map(|w| w[1].trim_start());
    if code_after_c.is_some_and(|code| MULTIPROCESSING_HELPERS.iter().any(|h| code.starts_with(h)))
    {
        return true;
    }
    argv.get(1)
        .is_some_and(|script| script.contains(TORCH_COMPILE_WORKER))
        && argv.iter().any(|a| a.starts_with("--parent="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_helpers_are_told_from_daemons() {
        let cases: [(&[&str], bool); 9] = [
            (
                &[
                    "/venv/bin/python3",
                    "-c",
                    "from multiprocessing.resource_tracker import main;main(7)",
                ],
                true,
            ),
            (
                &[
                    "python",
                    "-B",
                    "-s",
                    "-c",
                    "from multiprocessing.resource_tracker import main;main(12)",
                ],
                true,
            ),
            (
                &[
                    "python3.7",
                    "-c",
                    "from multiprocessing.semaphore_tracker import main;main(5)",
                ],
                true,
            ),
            (
                &[
                    "/usr/bin/python3",
                    "-c",
                    "from multiprocessing.forkserver import main; main(8, 9, ['__main__'], **{'sys_path': []})",
                ],
                true,
            ),
            (
                &[
                    "/venv/bin/python",
                    "/venv/lib/python3.12/site-packages/torch/_inductor/compile_worker/__main__.py",
                    "--pickler=torch._inductor.compile_worker.subproc_pool.SubprocPickler",
                    "--kind=fork",
                    "--workers=2",
                    "--parent=4242",
                    "--read-fd=11",
                    "--write-fd=14",
                ],
                true,
            ),
            // A daemon a launcher left: its own program.
            (&["redis-server", "*:6379"], false),
            (
                &["/usr/lib/postgresql/15/bin/postgres", "-D", "/var/lib/pg"],
                false,
            ),
            // multiprocessing's spawned workers are the program's own processes.
            (
                &[
                    "python",
                    "-c",
                    "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, pipe_handle=9)",
                    "--multiprocessing-fork",
                ],
                false,
            ),
            // A server that happens to be run with -c.
            (
                &["python", "-c", "import http.server; http.server.test()"],
                false,
            ),
        ];
        for (argv, want) in cases {
            let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
            assert_eq!(is_interpreter_helper(&argv), want, "{argv:?}");
        }
    }
}
