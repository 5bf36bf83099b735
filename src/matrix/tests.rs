use super::*;

pub(super) fn build(toml_text: &str) -> Result<Matrix> {
    let file: MatrixFile = toml::from_str(toml_text)?;
    Matrix::build(file, vec![], vec![], "test".into())
}

const TWO_BY_TWO: &str = r#"
[base]
command = ["python3", "server.py", "--port", "{port}"]
profile = "sglang"
vars = { port = "30000" }
env = { HF_HOME = "/models" }

[[axis]]
env = "SGLANG_SM120_MMA_FLASHMLA"
values = [0, 1]

[[axis]]
name = "torch.compile"
flag = "--enable-torch-compile"
"#;

#[test]
fn a_two_by_two_expands_to_four_cells_first_axis_slowest() {
    let m = build(TWO_BY_TWO).unwrap();
    let labels: Vec<&str> = m.cells.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "SGLANG_SM120_MMA_FLASHMLA=0 torch.compile=off",
            "SGLANG_SM120_MMA_FLASHMLA=0 torch.compile=on",
            "SGLANG_SM120_MMA_FLASHMLA=1 torch.compile=off",
            "SGLANG_SM120_MMA_FLASHMLA=1 torch.compile=on",
        ]
    );
    let l = m.launch_of(&m.cells[3], 0).unwrap();
    assert_eq!(
        l.command,
        [
            "python3",
            "server.py",
            "--port",
            "30000",
            "--enable-torch-compile"
        ]
    );
    assert_eq!(
        l.env,
        [
            ("HF_HOME".to_string(), "/models".to_string()),
            ("SGLANG_SM120_MMA_FLASHMLA".to_string(), "1".to_string())
        ]
    );
    let off = m.launch_of(&m.cells[0], 0).unwrap();
    assert!(!off.command.contains(&"--enable-torch-compile".to_string()));
}

#[test]
fn exclude_and_include_rules() {
    let text = format!(
        "{TWO_BY_TWO}\n[[exclude]]\nSGLANG_SM120_MMA_FLASHMLA = 0\n\"torch.compile\" = true\n\n[[include]]\nSGLANG_SM120_MMA_FLASHMLA = \"2\"\n\"torch.compile\" = \"off\"\n"
    );
    let m = build(&text).unwrap();
    let labels: Vec<&str> = m.cells.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "SGLANG_SM120_MMA_FLASHMLA=0 torch.compile=off",
            "SGLANG_SM120_MMA_FLASHMLA=1 torch.compile=off",
            "SGLANG_SM120_MMA_FLASHMLA=1 torch.compile=on",
            "SGLANG_SM120_MMA_FLASHMLA=2 torch.compile=off",
        ]
    );
    assert_eq!(
        m.cells.iter().map(|c| c.index).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
}

#[test]
fn arg_and_var_axes_and_slots_fill_templates() {
    let m = build(
        r#"
[base]
command = ["redis-server", "--port", "{port}"]
[[axis]]
arg = "--maxmemory-policy"
values = ["noeviction", "allkeys-lru"]
[[axis]]
var = "port"
values = [6391, 6392]
[bench]
command = "redis-benchmark -p {port} -q --csv {maxmemory-policy}"
[[slot]]
env = { CUDA_VISIBLE_DEVICES = "0" }
[[slot]]
env = { CUDA_VISIBLE_DEVICES = "1" }
"#,
    )
    .unwrap();
    assert_eq!(m.cells.len(), 4);
    let l = m.launch_of(&m.cells[1], 1).unwrap();
    assert_eq!(
        l.command,
        [
            "redis-server",
            "--port",
            "6392",
            "--maxmemory-policy",
            "noeviction"
        ]
    );
    assert_eq!(
        l.env,
        [("CUDA_VISIBLE_DEVICES".to_string(), "1".to_string())]
    );
    assert_eq!(
        l.bench.as_deref(),
        Some("redis-benchmark -p 6392 -q --csv noeviction")
    );
    assert_eq!(l.vars["slot"], "1");
}

#[test]
fn mistakes_are_named_before_anything_launches() {
    let table = [
        ("[base]\ncommand = [\"x\"]\n", "no axis"),
        ("[[axis]]\nenv = \"A\"\nvalues = [1]\n", "no command"),
        (
            "[base]\ncommand = [\"x\", \"{nope}\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\n",
            "unknown variable {nope}",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nflag = \"--b\"\nvalues = [1]\n",
            "exactly one of",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\n",
            "axis A: no values",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nflag = \"--b\"\nvalues = [\"maybe\"]\n",
            "takes on/off",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1, 1]\n",
            "given twice",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\n[[exclude]]\nB = 1\n",
            "no axis named \"B\"",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\n[[exclude]]\nA = 1\n",
            "every cell is excluded",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\nordered = true\nstop_on = [\"cuda_oomm\"]\n",
            "neither a verdict nor a signature",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\n[bench]\ncommand = \"b\"\nmetrics = { t = 'no group' }\n",
            "needs a group",
        ),
        (
            "[base]\ncommand = [\"x\"]\n[[axis]]\nenv = \"A\"\nvalues = [1]\n[[axis]]\nvar = \"A\"\nvalues = [2]\n",
            "two axes are named",
        ),
    ];
    for (text, want) in table {
        let e = format!("{:#}", build(text).unwrap_err());
        assert!(e.contains(want), "{text:?}: {e}");
    }
}

#[test]
fn json_in_arguments_is_not_a_template() {
    let m = build(
        "[base]\ncommand = [\"x\", '{\"a\": 1}', \"{A}\", \"${HOME}/{A}\"]\n[[axis]]\nenv = \"A\"\nvalues = [7]\n",
    )
    .unwrap();
    let l = m.launch_of(&m.cells[0], 0).unwrap();
    assert_eq!(l.command, ["x", "{\"a\": 1}", "7", "${HOME}/7"]);
}

#[test]
fn ordered_axes_wait_for_their_predecessor() {
    let m = build(
        r#"
[base]
command = ["x"]
[[axis]]
env = "GPU"
values = ["a", "b"]
[[axis]]
arg = "--mem-fraction-static"
values = ["0.8", "0.85", "0.9"]
ordered = true
stop_on = ["cuda_oom"]
"#,
    )
    .unwrap();
    let pre = m.predecessors();
    // Cells: a/0.8, a/0.85, a/0.9, b/0.8, b/0.85, b/0.9.
    assert_eq!(pre[0], vec![]);
    assert_eq!(pre[1], vec![(1, 0)]);
    assert_eq!(pre[2], vec![(1, 1)]);
    assert_eq!(pre[3], vec![]);
    assert_eq!(pre[5], vec![(1, 4)]);
}

#[test]
fn axis_flags_parse() {
    let table: Vec<(
        &str,
        Option<(Option<&str>, Option<&str>, Option<&str>, usize, bool)>,
    )> = vec![
        (
            "env:FLASHMLA=0,1",
            Some((Some("FLASHMLA"), None, None, 2, false)),
        ),
        (
            "flag:--enable-torch-compile",
            Some((None, Some("--enable-torch-compile"), None, 0, false)),
        ),
        (
            "arg:--mem-fraction-static=0.8,0.85+ordered",
            Some((None, None, Some("--mem-fraction-static"), 2, true)),
        ),
        ("env:FLASHMLA", None),
        ("flag:", None),
        ("nope:X=1", None),
        ("env:=1", None),
    ];
    for (s, want) in table {
        match (parse_axis_flag(s), want) {
            (Ok(d), Some((env, flag, arg, n, ordered))) => {
                assert_eq!(d.env.as_deref(), env, "{s}");
                assert_eq!(d.flag.as_deref(), flag, "{s}");
                assert_eq!(d.arg.as_deref(), arg, "{s}");
                assert_eq!(d.values.len(), n, "{s}");
                assert_eq!(d.ordered, ordered, "{s}");
            }
            (Err(e), None) => assert!(e.to_string().contains("--axis"), "{s}: {e}"),
            (got, want) => panic!("{s}: got {got:?}, want {want:?}"),
        }
    }
}

#[test]
fn the_definition_hash_ignores_slots_and_repeat() {
    let a = build(TWO_BY_TWO).unwrap();
    let b = build(&format!(
        "repeat = 3\n{TWO_BY_TWO}\n[[slot]]\nenv = {{ X = \"1\" }}\n"
    ))
    .unwrap();
    assert_eq!(a.def_hash(), b.def_hash());
    let c = build(&TWO_BY_TWO.replace("30000", "30001")).unwrap();
    assert_ne!(a.def_hash(), c.def_hash());
}

#[test]
fn toml_mistakes_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("m.toml");
    std::fs::write(&p, "[base]\ncommand = [\"x\"]\n\n[[axis]]\nenvv = \"A\"\n").unwrap();
    let e = read_file(&p).unwrap_err().to_string();
    assert!(e.contains("m.toml:5"), "{e}");
    assert!(e.contains("envv"), "{e}");
}

#[test]
fn secret_axes_and_values_are_never_shown_or_stored() {
    let m = build(
        r#"
[base]
command = ["vllm", "serve", "m", "--api-key", "sk-base-secret"]
env = { HF_TOKEN = "hf_base_secret", PORT = "8000" }
[[axis]]
env = "OPENAI_API_KEY"
values = ["sk-one", "sk-two"]
[[axis]]
env = "MODE"
values = ["a"]
[bench]
command = "curl -H 'Authorization: Bearer sk-bench-secret' localhost"
[[slot]]
env = { SLOT_PASSWORD = "pw-slot" }
"#,
    )
    .unwrap();
    let labels: Vec<&str> = m.cells.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "OPENAI_API_KEY=<redacted #1> MODE=a",
            "OPENAI_API_KEY=<redacted #2> MODE=a"
        ]
    );
    // The launch still gets the real value.
    let l = m.launch_of(&m.cells[1], 0).unwrap();
    assert!(
        l.env
            .contains(&("OPENAI_API_KEY".to_string(), "sk-two".to_string()))
    );
    let stored = m.redacted_definition().to_string();
    for secret in [
        "sk-one",
        "sk-two",
        "sk-base-secret",
        "hf_base_secret",
        "sk-bench-secret",
        "pw-slot",
    ] {
        assert!(!stored.contains(secret), "{secret} in {stored}");
    }
    assert!(stored.contains("8000"));
    // Rotating a secret is the same definition, for --resume.
    let rotated = build(
        r#"
[base]
command = ["vllm", "serve", "m", "--api-key", "sk-rotated"]
env = { HF_TOKEN = "hf_rotated", PORT = "8000" }
[[axis]]
env = "OPENAI_API_KEY"
values = ["sk-three", "sk-four"]
[[axis]]
env = "MODE"
values = ["a"]
[bench]
command = "curl -H 'Authorization: Bearer sk-other' localhost"
"#,
    )
    .unwrap();
    assert_eq!(m.def_hash(), rotated.def_hash());
}
