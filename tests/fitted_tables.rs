//! `ps`, `history`, `compare` and the matrix's table fit the width they get (`COLUMNS` here, as
//! a terminal's would be): every line within it at 80 and 120 columns, run ids whole, the
//! command cut with an ellipsis, empty columns dropped; `--wide` prints every column whole; with
//! no width (a pipe, `COLUMNS` unset) the text is as scripts always got it.

use crate::common;

use common::Env;

/// A job with a long run id (from its script's name) and a command far wider than 80 columns.
const ARGS: &[&str] = &[
    "--model",
    "/models/meta-llama/Llama-3.1-70B-Instruct",
    "--tensor-parallel-size",
    "8",
    "--max-model-len",
    "32768",
    "--gpu-memory-utilization",
    "0.92",
];

fn job(env: &Env) -> String {
    let script = env.script("serve-llama-3.1-70b-instruct-tp8", "exit 0");
    let mut args = vec!["run", "--json", "--until", "exit", "--", &script];
    args.extend(ARGS);
    let r = env.firedup(&args);
    assert_eq!(r.verdict(), "succeeded", "{}", r.explain());
    r.run_id().to_string()
}

fn at_width(env: &Env, args: &[&str], columns: Option<usize>) -> String {
    let mut c = env.cmd();
    c.env_remove("COLUMNS");
    if let Some(w) = columns {
        c.env("COLUMNS", w.to_string());
    }
    let out = c.args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn assert_fits(text: &str, width: usize, ids: &[&str], what: &str) {
    for line in text.lines() {
        assert!(
            line.chars().count() <= width,
            "{what} at {width}: a line of {} columns:\n{text}",
            line.chars().count()
        );
    }
    for id in ids {
        assert!(
            text.contains(id),
            "{what} at {width}: run id {id} not whole:\n{text}"
        );
    }
}

#[test]
fn ps_history_and_compare_fit_80_and_120_columns_with_run_ids_whole() {
    let env = Env::new();
    let (a, b) = (job(&env), job(&env));
    let ids = [a.as_str(), b.as_str()];
    assert!(a.len() >= 30, "a run id too short to test: {a}");
    for width in [80, 120] {
        let ps = at_width(&env, &["ps", "--all"], Some(width));
        assert_fits(&ps, width, &ids, "ps --all");
        assert!(
            ps.contains('…'),
            "ps at {width}: the command is not cut:\n{ps}"
        );
        // Nobody named these runs or owns them: those columns are left out.
        assert!(!ps.contains("NAME") && !ps.contains("OWNER"), "{ps}");

        let history = at_width(&env, &["history"], Some(width));
        assert_fits(&history, width, &ids, "history");
        assert!(
            !history.contains("signature"),
            "empty column kept:\n{history}"
        );

        let compare = at_width(&env, &["compare", &a, &b], Some(width));
        assert_fits(&compare, width, &ids, "compare");
    }
}

#[test]
fn wide_and_a_pipe_without_columns_show_every_column_whole() {
    let env = Env::new();
    let (a, b) = (job(&env), job(&env));
    let full = "--gpu-memory-utilization 0.92";
    for args in [
        vec!["ps", "--all", "--wide"],
        vec!["history", "--wide"],
        vec!["compare", &a, &b, "--wide"],
    ] {
        let text = at_width(&env, &args, Some(80));
        assert!(text.contains(full), "{args:?}: the command is cut:\n{text}");
        assert!(!text.contains('…'), "{args:?}:\n{text}");
    }
    let wide = at_width(&env, &["history", "--wide"], Some(80));
    assert!(
        wide.contains("signature") && wide.contains("metrics"),
        "{wide}"
    );
    let ps = at_width(&env, &["ps", "--all", "--wide"], Some(80));
    assert!(ps.contains("NAME") && ps.contains("OWNER"), "{ps}");
    // No terminal and no COLUMNS (a script's pipe): as before, every column (`history`'s
    // command cut at 40 characters as it always was).
    let ps = at_width(&env, &["ps", "--all"], None);
    assert!(
        ps.contains(full) && ps.contains("OWNER"),
        "ps cut in a pipe:\n{ps}"
    );
    let history = at_width(&env, &["history"], None);
    assert!(
        history.contains("signature"),
        "history in a pipe:\n{history}"
    );
}

#[test]
fn the_matrix_table_fits_80_and_120_columns_and_drops_empty_columns() {
    let env = Env::new();
    let oom = "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB on /models/meta-llama/Llama-3.1-70B-Instruct'; exit 1";
    for width in [80, 120] {
        let mut c = env.cmd();
        c.env("COLUMNS", width.to_string()).args([
            "matrix",
            "--axis",
            "env:A_RATHER_LONG_VARIABLE_NAME=first-value,second-value",
            "--ready-line",
            "NEVER",
            "--",
            "sh",
            "-c",
            oom,
        ]);
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_fits(&text, width, &["first-value", "cuda_oom"], "matrix");
        // No cell reached a phase or ready: those columns are left out.
        assert!(!text.contains("phase") && !text.contains("ready"), "{text}");
    }
}
