//! What `firedup run --slurm` gives `sbatch`: the batch script and the arguments. Pure: the
//! command, the user's `--sbatch-arg`s and the script's text in, the submission out.
//!
//! A COMMAND whose program is a script with `#SBATCH` lines is submitted as it is (its arguments
//! after it); any other COMMAND is wrapped in a generated script that `exec`s it, every word
//! quoted for the shell. firedup adds, before the user's arguments (a later option wins in
//! sbatch, and a command-line option wins over the script's `#SBATCH` line):
//!
//! - `--export=ALL,FIREDUP_RUN_ID=ID`, so every process of the job carries the run's id (the
//!   user's own `--export=...` gets the id appended instead);
//! - `--output=LOG --open-mode=append` (the run's log), unless the user or the script sets
//!   `--output`: then the job's own `StdOut=` is followed;
//! - `--job-name=RUN_ID`, unless the user or the script names the job.

use std::path::{Path, PathBuf};

/// The `sbatch` call of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// The arguments before the script: firedup's, then the user's.
    pub args: Vec<String>,
    /// The script file to submit.
    pub script: PathBuf,
    /// The script's own arguments.
    pub script_args: Vec<String>,
    /// firedup set `--output` (the log is known before the job is); false: the job's `StdOut=`.
    pub sets_output: bool,
    /// The generated wrapper's text, to be written to `script`; `None`: the user's script.
    pub wrapper: Option<String>,
}

/// What a run submits: `command` (a `#SBATCH` script, or any command to wrap in `wrapper_path`),
/// `user_args` (`--sbatch-arg`), `log` (the run's log), `run_id`.
pub fn plan(
    command: &[String],
    user_args: &[String],
    log: &Path,
    run_id: &str,
    wrapper_path: &Path,
) -> Submission {
    let script_text = command
        .first()
        .and_then(|p| std::fs::read_to_string(p).ok())
        .filter(|t| has_sbatch_lines(t));
    let directives = script_text.as_deref().map(directives).unwrap_or_default();
    let given = |short: &str, long: &str| {
        has_option(user_args, short, long) || has_option(&directives, short, long)
    };
    let mut args = Vec::new();
    let export = format!("FIREDUP_RUN_ID={run_id}");
    let mut user: Vec<String> = user_args.to_vec();
    match user.iter().position(|a| a.starts_with("--export=")) {
        Some(i) => user[i] = format!("{},{export}", user[i]),
        None => args.push(format!("--export=ALL,{export}")),
    }
    let sets_output = !given("-o", "--output");
    if sets_output {
        args.push(format!("--output={}", log.display()));
        args.push("--open-mode=append".into());
    }
    if !given("-J", "--job-name") {
        args.push(format!("--job-name={run_id}"));
    }
    args.extend(user);
    match script_text {
        Some(_) => Submission {
            args,
            script: PathBuf::from(&command[0]),
            script_args: command[1..].to_vec(),
            sets_output,
            wrapper: None,
        },
        None => Submission {
            args,
            script: wrapper_path.to_path_buf(),
            script_args: Vec::new(),
            sets_output,
            wrapper: Some(wrapper(command)),
        },
    }
}

/// A batch script that runs `command` as the job's own process (`exec`), its words quoted.
pub fn wrapper(command: &[String]) -> String {
    let words: Vec<String> = command
        .iter()
        .map(|w| {
            shlex::try_quote(w)
                .map(|q| q.into_owned())
                // A NUL cannot be in an argument anyway; quote what is left of it.
                .unwrap_or_else(|_| format!("'{}'", w.replace('\0', "").replace('\'', r"'\''")))
        })
        .collect();
    format!(
        "#!/bin/sh\n# Written by firedup run --slurm: the command, as the job's own process.\nexec {}\n",
        words.join(" ")
    )
}

/// Whether a script's text has `#SBATCH` directives (in its leading comment block, where sbatch
/// reads them).
pub fn has_sbatch_lines(text: &str) -> bool {
    leading_block(text).any(|l| {
        l.strip_prefix("#SBATCH")
            .is_some_and(|r| r.starts_with(char::is_whitespace))
    })
}

/// The leading comment block of a script: sbatch stops reading directives at the first command.
fn leading_block(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .take_while(|l| l.is_empty() || l.starts_with('#'))
}

/// The options written in a script's `#SBATCH` lines, word by word.
fn directives(text: &str) -> Vec<String> {
    leading_block(text)
        .filter_map(|l| l.strip_prefix("#SBATCH"))
        .filter(|rest| rest.starts_with(char::is_whitespace))
        .flat_map(|rest| {
            // A directive ends at a comment.
            let rest = rest.split(" #").next().unwrap_or(rest);
            shlex::split(rest).unwrap_or_default()
        })
        .collect()
}

/// Whether `args` set the option `short` (`-o FILE`, `-oFILE`) or `long` (`--output FILE`,
/// `--output=FILE`).
fn has_option(args: &[String], short: &str, long: &str) -> bool {
    args.iter().any(|a| {
        a == long
            || a.strip_prefix(long).is_some_and(|r| r.starts_with('='))
            || a.starts_with(short) && !a.starts_with("--")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn a_command_is_wrapped_with_its_words_quoted() {
        let cases: [(&[&str], &str); 3] = [
            (
                &["python3", "-m", "http.server", "8000"],
                "exec python3 -m http.server 8000",
            ),
            (
                &["sh", "-c", "echo 'hi'; exit 3"],
                r#"exec sh -c "echo 'hi'; exit 3""#,
            ),
            (&["echo", "$HOME", "a b"], "exec echo '$HOME' 'a b'"),
        ];
        for (command, line) in cases {
            let text = wrapper(&s(command));
            assert!(text.starts_with("#!/bin/sh\n"), "{text}");
            assert_eq!(text.lines().last(), Some(line), "{command:?}");
        }
    }

    #[test]
    fn the_wrapper_runs_the_command_exactly() {
        // Through a real shell: every word arrives as it was given.
        let words = s(&["printf", "%s|", "a b", "$x", "it's", "\"q\"", "`id`", "*"]);
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(wrapper(&words))
            .output()
            .expect("sh runs");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a b|$x|it's|\"q\"|`id`|*|"
        );
    }

    #[test]
    fn firedup_adds_its_options_unless_the_user_or_the_script_set_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let script = dir.path().join("job.sh");
        let own = "#!/bin/bash\n#SBATCH -n 2\n#SBATCH --output=/tmp/mine-%j.out # mine\n#SBATCH -J named\nsrun hostname\n#SBATCH --late=ignored\n";
        std::fs::write(&script, own).expect("write");
        let log = Path::new("/runs/r1/output.log");
        let wrap = dir.path().join("wrap.sh");
        let script_cmd = vec![script.display().to_string(), "arg1".into()];
        // (command, user args, expected args, sets_output, wrapped)
        let cases: Vec<(Vec<String>, Vec<String>, Vec<&str>, bool, bool)> = vec![
            (
                s(&["sleep", "1"]),
                vec![],
                vec![
                    "--export=ALL,FIREDUP_RUN_ID=r1",
                    "--output=/runs/r1/output.log",
                    "--open-mode=append",
                    "--job-name=r1",
                ],
                true,
                true,
            ),
            (
                s(&["sleep", "1"]),
                s(&["-o", "x.out", "--job-name=j", "--export=NONE", "--mem=100M"]),
                vec![
                    "-o",
                    "x.out",
                    "--job-name=j",
                    "--export=NONE,FIREDUP_RUN_ID=r1",
                    "--mem=100M",
                ],
                false,
                true,
            ),
            (
                s(&["sleep", "1"]),
                s(&["-oy.out", "--nodes=2"]),
                vec![
                    "--export=ALL,FIREDUP_RUN_ID=r1",
                    "--job-name=r1",
                    "-oy.out",
                    "--nodes=2",
                ],
                false,
                true,
            ),
            (
                script_cmd.clone(),
                s(&["--time=1"]),
                vec!["--export=ALL,FIREDUP_RUN_ID=r1", "--time=1"],
                false,
                false,
            ),
        ];
        for (command, user, want, sets_output, wrapped) in cases {
            let sub = plan(&command, &user, log, "r1", &wrap);
            assert_eq!(sub.args, s(&want), "{command:?} {user:?}");
            assert_eq!(sub.sets_output, sets_output, "{command:?} {user:?}");
            assert_eq!(sub.wrapper.is_some(), wrapped, "{command:?}");
            if wrapped {
                assert_eq!(sub.script, wrap);
            } else {
                assert_eq!(
                    (sub.script.as_path(), sub.script_args.clone()),
                    (script.as_path(), s(&["arg1"]))
                );
            }
        }
    }

    #[test]
    fn only_leading_sbatch_lines_are_directives() {
        let cases = [
            ("#!/bin/sh\n#SBATCH -n 2\necho hi\n", true),
            ("#!/bin/sh\n\n# about\n#SBATCH --time=1\nsrun x\n", true),
            ("#!/bin/sh\necho hi\n#SBATCH -n 2\n", false),
            ("#!/bin/sh\n#SBATCHX\necho\n", false),
            ("plain text", false),
        ];
        for (text, want) in cases {
            assert_eq!(has_sbatch_lines(text), want, "{text:?}");
        }
    }
}
