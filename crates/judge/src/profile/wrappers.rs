//! Looking through the commands that only start another one: `runuser -u redis -- redis-server`,
//! `sudo -u X`, `nice -n 5`, `taskset -c 0-3`, `numactl --cpunodebind=0`, `env A=B`, `setpriv`,
//! `stdbuf`, `nohup`, `timeout`, `ionice`, `chrt`, `exec`. Profile detection looks at the
//! command under them as well as the whole line, so a wrapped server is still recognised.
//!
//! Only the wrappers' own options are skipped (each wrapper's options, those that take a value
//! said explicitly); an option firedup does not know ends the unwrapping, so a command line is
//! never misread as some other command: it is then judged as written.

/// The command under any leading wrappers (the whole command when there is none, or when a
/// wrapper has no command after it).
pub(crate) fn unwrapped(command: &[String]) -> &[String] {
    let mut rest = command;
    // Each round removes one wrapper; a command line is finite, and so are these rounds.
    while let Some(inner) = rest.first().and_then(|w| strip_one(w, &rest[1..])) {
        rest = inner;
    }
    rest
}

/// The arguments after wrapper `word`'s own options, or `None` when `word` is not a wrapper or
/// its options are not all known.
fn strip_one<'a>(word: &str, args: &'a [String]) -> Option<&'a [String]> {
    let name = word.rsplit('/').next().unwrap_or(word);
    let spec = WRAPPERS.iter().find(|w| w.name == name)?;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let a = a.as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if spec.assignments && is_assignment(a) {
            i += 1;
        } else if a.starts_with("--") {
            let (opt, has_value) = match a.split_once('=') {
                Some((o, _)) => (o, true),
                None => (a, false),
            };
            if spec.long_flags.contains(&opt) && !has_value {
                i += 1;
            } else if spec.long_valued.contains(&opt) {
                i += if has_value { 1 } else { 2 };
            } else if has_value && spec.any_long_with_value {
                i += 1;
            } else {
                return None;
            }
        } else if a.starts_with('-') && a.len() > 1 {
            let short = &a[..2];
            if spec.short_valued.contains(&short) {
                i += if a.len() > 2 { 1 } else { 2 };
            } else if spec.short_flags.contains(&short) && a.len() == 2 {
                i += 1;
            } else if spec.numeric_short && a[1..].parse::<i32>().is_ok() {
                // `nice -5`: the adjustment as an option.
                i += 1;
            } else {
                return None;
            }
        } else {
            break;
        }
    }
    let mut rest = args.get(i..)?;
    for _ in 0..spec.positionals {
        rest = rest.get(1..)?;
    }
    if rest.is_empty() { None } else { Some(rest) }
}

/// `NAME=VALUE`, as `env` takes it.
fn is_assignment(a: &str) -> bool {
    a.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// One wrapper's options.
struct Wrapper {
    name: &'static str,
    /// Short options that take a value (`-u USER` or `-uUSER`).
    short_valued: &'static [&'static str],
    /// Short options alone.
    short_flags: &'static [&'static str],
    /// Long options that take a value (`--user USER` or `--user=USER`).
    long_valued: &'static [&'static str],
    /// Long options alone.
    long_flags: &'static [&'static str],
    /// Any `--name=value` is an option (setpriv's and numactl's are all written so).
    any_long_with_value: bool,
    /// `NAME=VALUE` words before the command (`env`).
    assignments: bool,
    /// `-N` is an option (`nice -5`).
    numeric_short: bool,
    /// Words after the options that are the wrapper's own (taskset's mask, timeout's duration,
    /// chrt's priority).
    positionals: usize,
}

const NONE: &[&str] = &[];

const fn wrapper(name: &'static str) -> Wrapper {
    Wrapper {
        name,
        short_valued: NONE,
        short_flags: NONE,
        long_valued: NONE,
        long_flags: NONE,
        any_long_with_value: false,
        assignments: false,
        numeric_short: false,
        positionals: 0,
    }
}

const WRAPPERS: &[Wrapper] = &[
    Wrapper {
        short_valued: &["-u", "-g", "-G"],
        short_flags: &["-l", "-m", "-p"],
        long_valued: &[
            "--user",
            "--group",
            "--supp-group",
            "--whitelist-environment",
        ],
        long_flags: &["--login", "--preserve-environment"],
        ..wrapper("runuser")
    },
    Wrapper {
        short_valued: &[
            "-u", "-g", "-h", "-p", "-C", "-D", "-r", "-t", "-U", "-T", "-R",
        ],
        short_flags: &["-E", "-H", "-n", "-S", "-b", "-k", "-P", "-A", "-B", "-N"],
        long_valued: &[
            "--user",
            "--group",
            "--host",
            "--prompt",
            "--close-from",
            "--chdir",
            "--role",
            "--type",
            "--other-user",
            "--command-timeout",
            "--chroot",
        ],
        long_flags: &[
            "--preserve-env",
            "--set-home",
            "--non-interactive",
            "--stdin",
            "--background",
            "--reset-timestamp",
            "--preserve-groups",
            "--askpass",
            "--bell",
            "--no-update",
        ],
        ..wrapper("sudo")
    },
    Wrapper {
        short_valued: &["-n"],
        long_valued: &["--adjustment"],
        numeric_short: true,
        ..wrapper("nice")
    },
    Wrapper {
        short_valued: &["-c", "-n"],
        short_flags: &["-t"],
        long_valued: &["--class", "--classdata"],
        long_flags: &["--ignore"],
        ..wrapper("ionice")
    },
    Wrapper {
        short_flags: &["-a", "-c"],
        long_flags: &["--all-tasks", "--cpu-list"],
        positionals: 1,
        ..wrapper("taskset")
    },
    Wrapper {
        short_valued: &["-C", "-N", "-m", "-i", "-p", "-P", "-w", "-b"],
        short_flags: &["-l", "-a", "-s", "-H", "-S", "-u"],
        long_valued: &[
            "--physcpubind",
            "--cpunodebind",
            "--membind",
            "--interleave",
            "--preferred",
            "--preferred-many",
            "--weighted-interleave",
            "--balancing",
        ],
        long_flags: &["--localalloc", "--all", "--huge", "--touch", "--strict"],
        any_long_with_value: true,
        ..wrapper("numactl")
    },
    Wrapper {
        short_valued: &["-u", "-C", "-S"],
        short_flags: &["-i", "-0", "-v"],
        long_valued: &["--unset", "--chdir", "--split-string"],
        long_flags: &["--ignore-environment", "--null", "--debug"],
        assignments: true,
        ..wrapper("env")
    },
    Wrapper {
        long_flags: &[
            "--clear-groups",
            "--init-groups",
            "--keep-groups",
            "--no-new-privs",
            "--reset-env",
        ],
        any_long_with_value: true,
        ..wrapper("setpriv")
    },
    Wrapper {
        short_valued: &["-i", "-o", "-e"],
        long_valued: &["--input", "--output", "--error"],
        ..wrapper("stdbuf")
    },
    wrapper("nohup"),
    wrapper("exec"),
    Wrapper {
        short_valued: &["-k", "-s"],
        short_flags: &["-v"],
        long_valued: &["--kill-after", "--signal"],
        long_flags: &["--foreground", "--preserve-status", "--verbose"],
        positionals: 1,
        ..wrapper("timeout")
    },
    Wrapper {
        short_flags: &["-a", "-b", "-d", "-f", "-i", "-o", "-r", "-R", "-v"],
        long_flags: &[
            "--all-tasks",
            "--batch",
            "--deadline",
            "--fifo",
            "--idle",
            "--other",
            "--rr",
            "--reset-on-fork",
            "--verbose",
        ],
        positionals: 1,
        ..wrapper("chrt")
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_under_common_wrappers() {
        let table: &[(&str, &str)] = &[
            ("redis-server --port 7", "redis-server --port 7"),
            (
                "runuser -u redis -- redis-server /etc/r.conf",
                "redis-server /etc/r.conf",
            ),
            ("/usr/sbin/runuser -u redis redis-server", "redis-server"),
            (
                "sudo -u redis redis-server --port 7",
                "redis-server --port 7",
            ),
            ("sudo -E --user=redis -- redis-server", "redis-server"),
            ("nice redis-server", "redis-server"),
            ("nice -n 5 redis-server", "redis-server"),
            ("nice -n5 redis-server", "redis-server"),
            ("nice -5 redis-server", "redis-server"),
            ("nice --adjustment=5 redis-server", "redis-server"),
            ("taskset 0x3 redis-server", "redis-server"),
            ("taskset -c 0-3,8 redis-server", "redis-server"),
            (
                "numactl --cpunodebind=0 --membind=0 redis-server",
                "redis-server",
            ),
            ("numactl -N 0 -m 0 -- redis-server", "redis-server"),
            ("numactl --interleave all redis-server", "redis-server"),
            ("env A=B C=D redis-server", "redis-server"),
            ("/usr/bin/env -u HOME A=B redis-server", "redis-server"),
            ("env -i PATH=/bin redis-server", "redis-server"),
            (
                "env A=B nice redis-server --port 7",
                "redis-server --port 7",
            ),
            (
                "sudo -u x env A=1 nice -n 3 taskset -c 1 numactl -l redis-server",
                "redis-server",
            ),
            (
                "setpriv --reuid=redis --clear-groups redis-server",
                "redis-server",
            ),
            ("stdbuf -oL -eL redis-server", "redis-server"),
            ("nohup redis-server", "redis-server"),
            ("timeout -s INT 1h redis-server", "redis-server"),
            ("chrt -r 10 redis-server", "redis-server"),
            ("ionice -c 2 -n 7 redis-server", "redis-server"),
            // Not wrappers, or options not known: the command as written.
            ("python3 -m http.server", "python3 -m http.server"),
            (
                "nice --frobnicate redis-server",
                "nice --frobnicate redis-server",
            ),
            ("sudo -s", "sudo -s"),
            ("env", "env"),
            ("env A=B", "env A=B"),
            ("taskset 0x3", "taskset 0x3"),
            ("numactl --show", "numactl --show"),
        ];
        for (line, want) in table {
            let cmd: Vec<String> = line.split_whitespace().map(String::from).collect();
            assert_eq!(unwrapped(&cmd).join(" "), *want, "{line}");
        }
    }
}
