//! `--help` through the real binary: `run --help` and `watch --help` end with three examples,
//! `--timeout`/`--stall` say where their default comes from, `--then` names what it sets. (That
//! every flag has a description is a unit test on the clap command: `generated_docs.rs`.)

use crate::common;

use common::Env;

fn help(sub: &str) -> String {
    let run = Env::new().firedup(&[sub, "--help"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    run.stdout
}

/// The lines after the last "Examples:" heading, which must be the end of the help.
fn examples(text: &str) -> Vec<String> {
    let (_, tail) = text
        .rsplit_once("Examples:\n")
        .unwrap_or_else(|| panic!("no Examples: in\n{text}"));
    tail.lines()
        .filter(|l| l.trim_start().starts_with("firedup "))
        .map(str::to_owned)
        .collect()
}

#[test]
fn run_and_watch_help_end_with_three_examples() {
    for sub in ["run", "watch"] {
        let text = help(sub);
        let found = examples(&text);
        assert_eq!(found.len(), 3, "{sub}: {found:?}");
        for line in &found {
            assert!(line.contains(&format!("firedup {sub}")), "{sub}: {line}");
        }
    }
}

#[test]
fn timeout_and_stall_say_the_default_is_the_profiles() {
    for sub in ["run", "watch"] {
        let text = help(sub).replace('\n', " ");
        let text: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for flag in ["--timeout <DURATION>", "--stall <DURATION>"] {
            let at = text
                .find(flag)
                .unwrap_or_else(|| panic!("{sub}: no {flag}"));
            let next = text[at + flag.len()..]
                .find(" --")
                .map_or(text.len(), |n| at + flag.len() + n);
            assert!(
                text[at..next].contains("Default: the profile's"),
                "{sub} {flag}: {}",
                &text[at..next]
            );
        }
    }
}

#[test]
fn then_names_the_variables_it_sets() {
    let text = help("run");
    for var in [
        "FIREDUP_URL",
        "FIREDUP_PORT",
        "FIREDUP_HOST",
        "FIREDUP_LOG",
        "FIREDUP_RUN_ID",
        "FIREDUP_PID",
    ] {
        assert!(text.contains(var), "--then does not name {var}");
    }
}
