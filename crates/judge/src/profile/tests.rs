use super::*;

fn cmd(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn builtin_profiles_parse_and_pass_their_own_checks() {
    for t in BUILTIN {
        if let Err(e) = parse_checked(t) {
            panic!("built-in profile does not check: {e}\n{t}");
        }
    }
    let names: Vec<String> = builtin_profiles().into_iter().map(|p| p.name).collect();
    for want in [
        "sglang",
        "vllm",
        "tgi",
        "llamacpp",
        "llama-cpp-python",
        "ollama",
        "triton",
        "pytorch",
        "postgres",
        "redis",
        "generic",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "no built-in profile {want}"
        );
    }
}

#[test]
fn every_detect_example_selects_its_profile() {
    let set = ProfileSet::builtin();
    for p in builtin_profiles() {
        for ex in &p.detect_examples {
            assert_eq!(set.detect(&cmd(ex)).unwrap().name, p.name, "{ex}");
        }
    }
}

#[test]
fn detects_servers_from_their_command_lines() {
    let table: &[(&str, &str)] = &[
        ("redis-server --port 7000", "redis"),
        ("/usr/bin/redis-server /etc/redis.conf", "redis"),
        (
            "setpriv --reuid=postgres /usr/lib/postgresql/15/bin/postgres -D /d",
            "postgres",
        ),
        ("python3 -m http.server", "generic"),
        ("redis-cli ping", "generic"),
        // Under the wrappers that start a server as another user, niced or pinned (issue 29).
        ("runuser -u redis -- redis-server /etc/redis.conf", "redis"),
        ("sudo -u redis redis-server --port 7000", "redis"),
        ("env A=B nice -n 5 redis-server --port 7000", "redis"),
        ("taskset -c 0-3 redis-server", "redis"),
        ("numactl --cpunodebind=0 --membind=0 redis-server", "redis"),
        ("sudo -u redis redis-cli ping", "generic"),
        ("python train.py", "generic"),
        ("python3 train.py --epochs 3", "generic"),
        ("psql -U postgres -c select", "generic"),
        ("curl http://127.0.0.1:8000/health", "generic"),
        ("ollama run llama3.2", "generic"),
        ("ollama pull llama3.2", "generic"),
        ("pip install vllm sglang", "generic"),
        ("docker pull vllm/vllm-openai:latest", "generic"),
        (
            "python -m sglang.launch_server --model-path Qwen/Qwen2.5-7B --port 30000",
            "sglang",
        ),
        (
            "python3 -m sglang.launch_server --model-path /m --tp 8",
            "sglang",
        ),
        ("sglang serve --model-path /m", "sglang"),
        (
            "torchrun --nproc_per_node=2 -m sglang.launch_server --model-path /m",
            "sglang",
        ),
        ("vllm serve meta-llama/Llama-3.1-8B", "vllm"),
        (
            "python -m vllm.entrypoints.openai.api_server --model X",
            "vllm",
        ),
        ("text-generation-launcher --model-id X", "tgi"),
        ("llama-server -m model.gguf", "llamacpp"),
        (
            "./build/bin/llama-server -m model.gguf --port 8081",
            "llamacpp",
        ),
        (
            "python3 -m llama_cpp.server --model /m/tiny.gguf --port 8001",
            "llama-cpp-python",
        ),
        ("python -m llama_cpp.server_tools", "generic"),
        ("pip install llama-cpp-python", "generic"),
        ("ollama serve", "ollama"),
        ("/usr/local/bin/ollama serve", "ollama"),
        ("tritonserver --model-repository=/models", "triton"),
        ("torchrun --nproc_per_node=8 train.py", "pytorch"),
        (
            "python -m torch.distributed.run --nproc_per_node=2 train.py",
            "pytorch",
        ),
        ("postgres -D /var/lib/postgresql/data", "postgres"),
        ("redis-server --port 6380", "redis"),
    ];
    let set = ProfileSet::builtin();
    for (c, want) in table {
        assert_eq!(set.detect(&cmd(c)).unwrap().name, *want, "{c}");
    }
}

#[test]
fn profile_examples_resolve_to_their_signature() {
    for p in builtin_profiles() {
        let c = crate::classify::Classifier::new(&crate::classify::ClassifierSpec {
            signatures: p.signatures.clone(),
            ready_lines: p
                .ready
                .iter()
                .map(|r| crate::classify::ReadyLine::new(r).unwrap())
                .collect(),
            noise: p.noise.clone(),
            phases: p
                .phases
                .iter()
                .map(|x| (x.name.clone(), x.pattern.clone()))
                .collect(),
            ..Default::default()
        })
        .unwrap();
        for s in &p.signatures {
            for e in &s.examples {
                let got = c
                    .classify(e)
                    .strongest()
                    .and_then(|h| h.signature)
                    .map(|s| s.as_str().to_string());
                assert_eq!(got.as_deref(), Some(s.name.as_str()), "{}: {e}", p.name);
            }
        }
    }
}

#[test]
fn every_builtin_phase_has_a_real_example() {
    // The check (`parse_checked`) proves each example begins its phase; this proves there is one,
    // so that a server's new wording shows up as a failing example, not as a stall with no phase.
    for p in builtin_profiles() {
        for ph in &p.phases {
            assert!(
                !ph.examples.is_empty(),
                "{}: phase {} has no example line",
                p.name,
                ph.name
            );
        }
    }
}

#[test]
fn unknown_profile_names_the_known_ones() {
    let err = by_name("nope").unwrap_err().to_string();
    assert!(err.contains("generic") && err.contains("redis"), "{err}");
}

#[test]
fn addresses_come_from_flags_env_and_defaults() {
    let e = EndpointSpec {
        host_flags: vec!["--host".into()],
        port_flags: vec!["--port".into(), "-p".into()],
        addr_env: Some("SRV_HOST".into()),
        default_host: "127.0.0.1".into(),
        default_port: 30000,
        health: Some("/health".into()),
        request: None,
        scheme: None,
    };
    let none = |_: &str| None;
    let table: &[(&str, Option<&str>, &str, u16)] = &[
        ("srv", None, "127.0.0.1", 30000),
        ("srv --port 31000", None, "127.0.0.1", 31000),
        ("srv --port=31001 --host 0.0.0.0", None, "0.0.0.0", 31001),
        ("srv -p5432", None, "127.0.0.1", 5432),
        ("srv -p 5433", None, "127.0.0.1", 5433),
        ("srv", Some("0.0.0.0:11500"), "0.0.0.0", 11500),
        ("srv", Some("http://10.0.0.2:9"), "10.0.0.2", 9),
        ("srv --port 7", Some(":8"), "127.0.0.1", 7),
        ("srv", Some("8081"), "127.0.0.1", 8081),
    ];
    for (c, envv, host, port) in table {
        let env = |k: &str| (k == "SRV_HOST").then(|| envv.unwrap().to_string());
        let got = if envv.is_some() {
            derive_address(&e, &cmd(c), &env)
        } else {
            derive_address(&e, &cmd(c), &none)
        };
        assert_eq!(
            got,
            Address {
                host: host.to_string(),
                port: *port,
                scheme: None,
            },
            "{c} {envv:?}"
        );
    }
    let a = Address {
        host: "0.0.0.0".into(),
        port: 8000,
        scheme: None,
    };
    assert_eq!(a.base_url(), "http://127.0.0.1:8000");
}

#[test]
fn check_names_line_and_field() {
    let table: &[(&str, &str)] = &[
        (
            "name = \"x\"\ndescription = \"d\"\nready = ['(unclosed']\n",
            "3: field ready[0]: invalid regex '(unclosed'",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\nreddy = ['a']\n",
            "3: unknown field `reddy`",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\n\n[[signature]]\nname = \"cuda_boom\"\nstrength = \"fatal\"\npatterns = ['boom']\n",
            "5: field signature.name: unknown signature 'cuda_boom'",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\nstall = \"5 parsecs\"\n",
            "3: field stall:",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\nready_probes = [\"http\"]\n",
            "3: field ready_probes: port, http and request probes need an [endpoint] section",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\ndetect = ['^foo']\ndetect_examples = ['bar foo']\n",
            "4: field detect_examples: 'bar foo' is not matched",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\n[[signature]]\nname = \"disk_full\"\nstrength = \"fatal\"\npatterns = ['ENOSPC']\nexamples = ['no space']\n",
            "7: field signature disk_full: examples: example 'no space' does not match",
        ),
        (
            "name = \"x\"\ndescription = \"d\"\n[[phase]]\nname = \"load\"\npattern = 'Load weight begin'\nexamples = ['Loading weights']\n",
            "6: field phase load: examples: example 'Loading weights' does not begin phase load",
        ),
    ];
    for (text, want) in table {
        let err = parse_checked(text).unwrap_err();
        assert!(err.starts_with(want), "got {err:?}\nwant {want:?}");
    }
}

/// A profile's `ready` pattern gets the rule `--ready-line` gets (one that matches every line
/// would give a false READY), and every mistake of a file is reported, each at its own line.
#[test]
fn every_mistake_is_reported_at_its_own_line() {
    let text = "# ready = ['.*'] would be wrong\nname = \"x\"\ndescription = \"d\"\nready = [\n  'Uvicorn.*running',\n  '.*',\n]\nstall = \"5x\"\nuntil = \"sometimes\"\n";
    let err = parse_checked(text).unwrap_err();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 3, "{err}");
    assert!(
        lines[0].starts_with("6: field ready[1]: '.*' matches every line"),
        "{err}"
    );
    assert!(lines[1].starts_with("8: field stall: "), "{err}");
    assert!(lines[2].starts_with("9: field until: "), "{err}");
    // The same rule as the flag's, word for word.
    let why = crate::classify::matches_every_line(".*").unwrap();
    assert!(lines[0].ends_with(why), "{err}");
}
