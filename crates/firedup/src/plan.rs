//! Resolving flags and a profile into one plan: the judge's typed configuration (its mode, durations
//! and compiled classifier, ready lines included) and the follower's and probes' settings. Every usage mistake (bad regex, bad duration, a server mode with no
//! readiness condition) is caught here, before anything is launched.

use std::path::PathBuf;
use std::time::Duration;

mod compiled_classifier;

use crate::error::{Error, Result, usage};

use crate::classify::{ClassifierSpec, ReadyLine, builtin_catalog};
use crate::duration::parse_duration;
use crate::judge::{JudgeConfig, Mode};
use crate::lines::DEFAULT_LINE_CAP;
use crate::profile::{Address, ProbeKind, Profile, RequestKind, derive_address};

/// What the user asked for, before resolution (filled from the command line or by a library user).
/// Recorded in the run's `meta.json` so that `firedup watch RUN_ID` judges the same way.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct WatchOptions {
    /// `--until exit`: judge a job until it exits (`succeeded` on exit 0) instead of a server
    /// until it is ready.
    pub until_exit: bool,
    /// `--profile NAME`; `None`: detected from the command (`generic` when none fits).
    pub profile: Option<String>,
    /// `--ready-line` regexes: every one must match a log line for ready; when given they
    /// replace the profile's ready lines.
    pub ready_lines: Vec<String>,
    /// `--fail-line` regexes: a matching log line means the server failed.
    pub fail_lines: Vec<String>,
    /// `--timeout` as written (`30m`; `off`, `none` or `0` for none); `None`: the profile's,
    /// else 30 minutes for a server and no deadline for a job.
    pub timeout: Option<String>,
    /// `--stall` as written (`10m`; `off` for never); `None`: the profile's, else 10 minutes.
    pub stall: Option<String>,
    /// `--log-grace` as written: how long a missing log may stay missing while no process is
    /// known; `None`: 30 seconds.
    pub log_grace: Option<String>,
    /// `--hold` as written: after ready, keep watching this long and report a crash inside
    /// the window (server mode only); `None`: the profile's hold, if any.
    pub hold: Option<String>,
    /// Only read what is written from now on (attach without replaying the existing log).
    pub from_end: bool,
    /// User profile files (`--profile-file`), on top of the built-ins and the user directory.
    pub profile_files: Vec<PathBuf>,
    /// `--http URL` (or a path on the server's derived address): health must answer 2xx.
    pub http: Option<String>,
    /// `--port N`: the port must accept connections, from the watched tree.
    pub port: Option<u16>,
    /// `--ready-request[=KIND]`: a real request must return tokens (`Some("")`: the profile's kind).
    pub ready_request: Option<String>,
    /// `--notify`: the command must send `READY=1` on `NOTIFY_SOCKET`.
    pub notify: bool,
    /// `--no-probe`: the profile's default probes are off (explicit probe flags still apply).
    pub no_probe: bool,
    /// `--phase-timeout NAME=DURATION` (repeatable).
    pub phase_timeouts: Vec<String>,
    /// `--queue-timeout`: how long a batch job may wait in its scheduler's queue.
    pub queue_timeout: Option<String>,
    /// Environment overrides of the launch, for addresses taken from the environment
    /// (`OLLAMA_HOST`). Never recorded: values may be secrets.
    #[serde(skip)]
    pub env: Vec<(String, String)>,
}

impl WatchOptions {
    /// What is recorded of these options (`meta.json`): an `--http` URL's password left out (the
    /// probe sends none, and a record is read by whoever can read the run directory).
    pub fn stored(&self) -> WatchOptions {
        WatchOptions {
            http: self
                .http
                .as_deref()
                .map(crate::secrets::url_without_password),
            ..self.clone()
        }
    }
}

/// The probes a watch runs, resolved to concrete targets.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ProbePlan {
    /// Host and port to connect to.
    pub port: Option<(String, u16)>,
    /// Health URL.
    pub http: Option<String>,
    /// Base URL and request shape of the real request.
    pub request: Option<(String, RequestKind)>,
    /// The API key the real request sends (the server's own `--api-key`, or `FIREDUP_API_KEY`,
    /// `VLLM_API_KEY`, `OPENAI_API_KEY`); never shown.
    #[serde(default)]
    pub request_key: Option<String>,
    /// Wait for `READY=1` on the command's `NOTIFY_SOCKET` (`--notify`, or the profile's
    /// default).
    pub notify: bool,
    /// Sample GPU memory of the tree (where nvidia-smi exists).
    pub gpu: bool,
    /// The run whose processes count as the server's own when a listener's owner is checked
    /// (set by the observer; processes carry it as `FIREDUP_RUN_ID`).
    #[serde(default)]
    pub run_id: Option<String>,
}

impl ProbePlan {
    /// Whether no readiness probe is planned (port, HTTP, request, notify; GPU sampling is not
    /// a readiness probe).
    pub fn is_empty(&self) -> bool {
        self.port.is_none() && self.http.is_none() && self.request.is_none() && !self.notify
    }
}

/// The resolved plan.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The judge's configuration, its classifier included (`judge.classifier`).
    pub judge: JudgeConfig,
    /// Name of the profile used: the one asked for, else the one detected from the command,
    /// else `generic`.
    pub profile: String,
    /// Most bytes of one log line that are kept (the rest of a longer line is dropped):
    /// [`DEFAULT_LINE_CAP`].
    pub line_cap: usize,
    /// Start reading at the log's current end, skipping what it already holds
    /// ([`WatchOptions::from_end`]).
    pub from_end: bool,
    /// The readiness probes to run, resolved to their targets.
    pub probes: ProbePlan,
    /// The server's listen address, when the profile or flags know it (for `--then`).
    pub address: Option<Address>,
}

const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_STALL: Duration = Duration::from_secs(10 * 60);
const DEFAULT_LOG_GRACE: Duration = Duration::from_secs(30);
/// How long a ready condition must stand, with no fatal line and no exit, before `ready`: the
/// next line after a ready line can still be the server's bind error (uvicorn logs
/// `Application startup complete.` and only then binds), and it comes within milliseconds.
pub const DEFAULT_CONFIRM: Duration = Duration::from_millis(500);

fn duration_flag(flag: &str, value: &Option<String>) -> Result<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(v) if v == "0" || v == "none" || v == "off" => Ok(Some(Duration::MAX)),
        Some(v) => match parse_duration(v) {
            Ok(d) => Ok(Some(d)),
            Err(e) => usage!("{flag}: {e}"),
        },
    }
}

/// Refuses settings that are valid syntax but cannot mean what was meant: a zero stall window or
/// deadline (every run stalled or timed out at once; `off` disables them), and a `--ready-line` or
/// `--fail-line` that matches every line (empty, or any pattern matching the empty string).
fn refuse_foot_guns(opts: &WatchOptions) -> Result<()> {
    for (flag, value) in [("--stall", &opts.stall), ("--timeout", &opts.timeout)] {
        if duration_flag(flag, value)? == Some(Duration::ZERO) {
            usage!(
                "{flag} {} would end every run at once: give a positive duration, or `off` to disable it",
                value.as_deref().unwrap_or_default()
            );
        }
    }
    for (flag, patterns) in [
        ("--ready-line", &opts.ready_lines),
        ("--fail-line", &opts.fail_lines),
    ] {
        for p in patterns {
            // An invalid pattern is reported by the classifier, with the regex error.
            if let Some(why) = crate::classify::matches_every_line(p) {
                usage!("{flag} {p:?} {why}");
            }
        }
    }
    Ok(())
}

/// How long a missing log may stay missing while no process is known (`--log-grace`, 30 s by
/// default).
pub fn log_grace(opts: &WatchOptions) -> Result<Duration> {
    Ok(duration_flag("--log-grace", &opts.log_grace)?
        .filter(|d| *d != Duration::MAX)
        .unwrap_or(DEFAULT_LOG_GRACE))
}

/// Resolves options for a watch of `command` (empty when attaching) whose log is `log`.
pub fn resolve(
    opts: &WatchOptions,
    command: &[String],
    log: &str,
    expect_process: bool,
) -> Result<Plan> {
    refuse_foot_guns(opts)?;
    let set = crate::profile_files::load_profile_set(&opts.profile_files)?;
    let prof: Profile = match &opts.profile {
        Some(name) => set.by_name(name)?,
        None => set.detect(command)?,
    };
    let mode = if opts.until_exit {
        Mode::UntilExit
    } else {
        prof.mode()
    };
    let (probes, address) = resolve_probes(opts, &prof, command)?;
    let ready_probes = ready_probe_list(&probes);
    // Explicit ready lines replace the profile's: the user knows what "ready" means here. A
    // profile whose own probes are the authority (`ready_by_probe`) waits for its lines only
    // when they do not run (`--no-probe`; a `--port` probe alone says less than the lines).
    let no_lines = Vec::new();
    let profile_probes_run = !opts.no_probe && !prof.ready_probes.is_empty();
    let ready_patterns = if !opts.ready_lines.is_empty() {
        &opts.ready_lines
    } else if prof.ready_by_probe && profile_probes_run {
        &no_lines
    } else {
        &prof.ready
    };
    if mode == Mode::UntilReady && ready_patterns.is_empty() && ready_probes.is_empty() {
        usage!(
            "no readiness condition: give --ready-line REGEX, --http URL, --port N, a --profile that knows this server, or --until exit for a job"
        );
    }
    let mut signatures = builtin_catalog().signatures;
    signatures.extend(prof.signatures.iter().cloned());
    let ready_lines = ready_patterns
        .iter()
        .map(|r| ReadyLine::new(r))
        .collect::<Result<Vec<_>, _>>()?;
    let classifier = compiled_classifier::compiled(&ClassifierSpec {
        signatures,
        fail_lines: opts.fail_lines.clone(),
        ready_lines,
        noise: prof.noise.clone(),
        phases: prof
            .phases
            .iter()
            .map(|p| (p.name.clone(), p.pattern.clone()))
            .collect(),
    })?;
    let profile_stall = duration_flag("profile stall", &prof.stall)?;
    let profile_timeout = duration_flag("profile timeout", &prof.timeout)?;
    let unbounded = |d: Option<Duration>| d.filter(|d| *d != Duration::MAX);
    let stall = match duration_flag("--stall", &opts.stall)? {
        Some(d) => unbounded(Some(d)),
        None => Some(profile_stall.unwrap_or(DEFAULT_STALL)),
    };
    let timeout = match duration_flag("--timeout", &opts.timeout)? {
        Some(d) => unbounded(Some(d)),
        None if mode == Mode::UntilReady => Some(profile_timeout.unwrap_or(DEFAULT_SERVER_TIMEOUT)),
        None => None,
    };
    let log_grace = log_grace(opts)?;
    let hold = match duration_flag("--hold", &opts.hold)? {
        Some(d) => unbounded(Some(d)),
        None if mode == Mode::UntilReady => unbounded(duration_flag("profile hold", &prof.hold)?),
        None => None,
    };
    // A hold (the user's or the profile's) is a longer window of the same kind: it replaces the
    // confirmation, and `--hold 0s` turns both off.
    let confirm = if mode == Mode::UntilExit || opts.hold.is_some() || prof.hold.is_some() {
        Duration::ZERO
    } else {
        match duration_flag("profile confirm", &prof.confirm)? {
            Some(Duration::MAX) => Duration::ZERO,
            Some(d) => d,
            None => DEFAULT_CONFIRM,
        }
    };
    if opts.hold.is_some() && mode == Mode::UntilExit {
        usage!("--hold applies to server mode (--until ready), not to a job");
    }
    let mut phase_budgets = Vec::new();
    for spec in &opts.phase_timeouts {
        let Some((name, d)) = spec.split_once('=') else {
            usage!("--phase-timeout '{spec}' is not PHASE=DURATION (e.g. capture_cuda_graph=15m)");
        };
        if !prof.phases.iter().any(|p| p.name == name) {
            usage!(
                "--phase-timeout: profile {} has no phase '{name}'; its phases are: {}",
                prof.name,
                if prof.phases.is_empty() {
                    "(none)".to_string()
                } else {
                    prof.phases
                        .iter()
                        .map(|p| p.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            );
        }
        let d =
            parse_duration(d).map_err(|e| Error::usage(format!("--phase-timeout {name}: {e}")))?;
        phase_budgets.push((name.to_string(), d));
    }
    let mut judge = JudgeConfig::new(mode, log, classifier);
    judge.stall = stall;
    judge.timeout = timeout;
    judge.queue_timeout = unbounded(duration_flag("--queue-timeout", &opts.queue_timeout)?);
    judge.log_grace = log_grace;
    judge.hold = hold;
    judge.confirm = confirm;
    judge.expect_process = expect_process;
    judge.ready_probes = ready_probes;
    judge.phase_budgets = phase_budgets;
    Ok(Plan {
        judge,
        profile: prof.name,
        line_cap: DEFAULT_LINE_CAP,
        from_end: opts.from_end,
        probes,
        address,
    })
}

/// Readiness probes from the flags and the profile's defaults, resolved to concrete targets.
fn resolve_probes(
    opts: &WatchOptions,
    prof: &Profile,
    command: &[String],
) -> Result<(ProbePlan, Option<Address>)> {
    let env = |k: &str| {
        opts.env
            .iter()
            .rev()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
            .or_else(|| std::env::var(k).ok())
    };
    let mut address = prof
        .endpoint
        .as_ref()
        .map(|e| derive_address(e, command, &env));
    if let Some(p) = opts.port {
        match address.as_mut() {
            Some(a) => a.port = p,
            None => {
                address = Some(Address {
                    host: "127.0.0.1".into(),
                    port: p,
                    scheme: None,
                })
            }
        }
    }
    let defaults: &[ProbeKind] = if opts.no_probe {
        &[]
    } else {
        &prof.ready_probes
    };
    let mut plan = ProbePlan {
        gpu: true,
        notify: opts.notify || defaults.contains(&ProbeKind::Notify),
        ..Default::default()
    };
    if opts.port.is_some() || defaults.contains(&ProbeKind::Port) {
        let a = address.as_ref().expect("a port probe has an address");
        plan.port = Some((a.connect_host().to_string(), a.port));
    }
    let health_path = prof.endpoint.as_ref().and_then(|e| e.health.clone());
    let http = match &opts.http {
        Some(u) if u.starts_with('/') => match &address {
            Some(a) => Some(format!("{}{u}", a.http_base_url())),
            None => usage!(
                "--http {u}: a path needs the server's address; give a full URL (http://host:port{u}) or --port"
            ),
        },
        Some(u) => Some(u.clone()),
        None if defaults.contains(&ProbeKind::Http) => match (&address, &health_path) {
            (Some(a), Some(h)) => Some(format!("{}{h}", a.http_base_url())),
            _ => None,
        },
        None => None,
    };
    if let Some(u) = &http {
        if !u.starts_with("http://") {
            usage!(
                "--http '{u}': only http:// URLs (or a /path on the server's address) are supported"
            );
        }
    }
    // A full --http URL says where the server is when nothing else does (for --then's
    // FIREDUP_HOST, FIREDUP_PORT and FIREDUP_URL, and a matrix cell's port checks).
    if let (None, Some(u)) = (&address, &http) {
        if let Ok(t) = crate::probe::http::Target::parse(u) {
            address = Some(Address {
                host: t.host,
                port: t.port,
                scheme: None,
            });
        }
    }
    plan.http = http;
    let want_request = opts.ready_request.is_some() || defaults.contains(&ProbeKind::Request);
    if want_request {
        let kind = match opts.ready_request.as_deref().filter(|k| !k.is_empty()) {
            Some("openai") => RequestKind::Openai,
            Some("tgi") => RequestKind::Tgi,
            Some(other) => usage!("--ready-request '{other}': use openai or tgi"),
            None => match prof.endpoint.as_ref().and_then(|e| e.request) {
                Some(k) => k,
                None => usage!(
                    "--ready-request: profile {} does not know a request shape; write --ready-request=openai or --ready-request=tgi",
                    prof.name
                ),
            },
        };
        let base = match (&plan.http, &address) {
            (Some(u), _) => origin_of(u),
            (None, Some(a)) => a.http_base_url(),
            (None, None) => usage!(
                "--ready-request needs the server's address: give --http URL or --port N, or a profile that knows it"
            ),
        };
        plan.request = Some((base, kind));
        plan.request_key = crate::profile::flag_value(command, &["--api-key".to_string()])
            .or_else(|| env("FIREDUP_API_KEY"))
            .or_else(|| env("VLLM_API_KEY"))
            .or_else(|| env("OPENAI_API_KEY"))
            // A key read back from a run record is redacted there: not a key.
            .filter(|k| !k.is_empty() && k != crate::secrets::REDACTED);
    }
    Ok((plan, address))
}

/// `http://host:port` of a URL.
fn origin_of(url: &str) -> String {
    let rest = url.trim_start_matches("http://");
    let host = rest.split('/').next().unwrap_or(rest);
    format!("http://{host}")
}

/// The readiness conditions the judge tracks for a probe plan, with their targets.
fn ready_probe_list(p: &ProbePlan) -> Vec<(ProbeKind, String)> {
    let mut v = Vec::new();
    if let Some((h, port)) = &p.port {
        v.push((ProbeKind::Port, format!("{h}:{port}")));
    }
    if let Some(u) = &p.http {
        v.push((ProbeKind::Http, u.clone()));
    }
    if let Some((base, kind)) = &p.request {
        let path = match kind {
            RequestKind::Openai => "/v1/completions",
            RequestKind::Tgi => "/generate",
        };
        v.push((ProbeKind::Request, format!("{base}{path}")));
    }
    if p.notify {
        v.push((ProbeKind::Notify, "NOTIFY_SOCKET".into()));
    }
    v
}

/// Parses `KEY=VALUE`, or `KEY` alone: the value of `KEY` in firedup's own environment, so that
/// a secret never sits in firedup's argv (which every user reads in `ps`).
pub fn parse_env(pair: &str) -> Result<(String, String)> {
    let named = |k: &str| !k.is_empty() && !k.contains(char::is_whitespace);
    match pair.split_once('=') {
        Some((k, v)) if named(k) => Ok((k.to_string(), v.to_string())),
        None if named(pair) => match std::env::var(pair) {
            Ok(v) => Ok((pair.to_string(), v)),
            Err(_) => usage!(
                "--env {pair}: {pair} is not set (as UTF-8) in firedup's environment; export it first, or write --env KEY=VALUE"
            ),
        },
        _ => usage!(
            "--env '{}' is not KEY=VALUE or KEY",
            crate::secrets::redact_text(pair)
        ),
    }
}

/// A log path made absolute against the current directory.
pub fn absolute(path: &std::path::Path) -> PathBuf {
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path))
            .unwrap_or_else(|_| path.to_path_buf())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_mistakes_are_caught_before_launch() {
        let table: &[(WatchOptions, &str)] = &[
            (WatchOptions::default(), "no readiness condition"),
            (
                WatchOptions {
                    ready_lines: vec!["(".into()],
                    ..Default::default()
                },
                "invalid regex in --ready-line",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["x".into()],
                    timeout: Some("5x".into()),
                    ..Default::default()
                },
                "--timeout: invalid duration '5x'",
            ),
            (
                WatchOptions {
                    until_exit: true,
                    hold: Some("1m".into()),
                    ..Default::default()
                },
                "--hold applies",
            ),
            (
                WatchOptions {
                    profile: Some("nope".into()),
                    ..Default::default()
                },
                "unknown profile",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["x".into()],
                    stall: Some("0ms".into()),
                    ..Default::default()
                },
                "--stall 0ms would end every run at once",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["x".into()],
                    timeout: Some("0s".into()),
                    ..Default::default()
                },
                "--timeout 0s would end every run at once",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["".into()],
                    ..Default::default()
                },
                "--ready-line \"\" matches every line",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["READY".into(), "x*".into()],
                    ..Default::default()
                },
                "--ready-line \"x*\" matches every line",
            ),
            (
                WatchOptions {
                    ready_lines: vec!["READY".into()],
                    fail_lines: vec!["".into()],
                    ..Default::default()
                },
                "--fail-line \"\" matches every line",
            ),
        ];
        for (opts, want) in table {
            let err = resolve(opts, &["./server".into()], "/tmp/log", true)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err} should contain {want}");
        }
    }

    #[test]
    fn profiles_and_flags_combine() {
        let p = resolve(
            &WatchOptions::default(),
            &["redis-server".into()],
            "/tmp/l",
            true,
        )
        .unwrap();
        assert_eq!(p.profile, "redis");
        assert_eq!(p.judge.stall, Some(Duration::from_secs(120)));
        let p = resolve(
            &WatchOptions {
                until_exit: true,
                stall: Some("off".into()),
                ..Default::default()
            },
            &["python3".into(), "train.py".into()],
            "/tmp/l",
            true,
        )
        .unwrap();
        assert_eq!(p.judge.stall, None);
        assert_eq!(p.judge.timeout, None);
        assert_eq!(
            parse_env("A=b=c").unwrap(),
            ("A".to_string(), "b=c".to_string())
        );
        assert!(parse_env("novalue").is_err());
        assert!(parse_env("=x").is_err());
        // `--env KEY`: the value from firedup's own environment.
        assert_eq!(
            parse_env("PATH").unwrap(),
            ("PATH".to_string(), std::env::var("PATH").unwrap())
        );
    }

    #[test]
    fn a_profile_ready_by_probe_waits_for_its_lines_only_without_probes() {
        let server = ["llama-server".to_string(), "-m".into(), "m.gguf".into()];
        let lines = |opts: &WatchOptions| {
            let p = resolve(opts, &server, "/tmp/l", true).unwrap();
            assert_eq!(p.profile, "llamacpp");
            (
                p.judge.classifier.ready_lines().len(),
                p.judge.ready_probes.len(),
            )
        };
        let table: &[(WatchOptions, (usize, usize))] = &[
            // The health probe runs: it alone decides.
            (WatchOptions::default(), (0, 1)),
            // No probe: the profile's ready line decides.
            (
                WatchOptions {
                    no_probe: true,
                    ..Default::default()
                },
                (1, 0),
            ),
            // A port probe alone (the server listens before it loads): the line decides too.
            (
                WatchOptions {
                    no_probe: true,
                    port: Some(8080),
                    ..Default::default()
                },
                (1, 1),
            ),
            // A user's ready line always counts, beside the probe.
            (
                WatchOptions {
                    ready_lines: vec!["all slots are idle".into()],
                    ..Default::default()
                },
                (1, 1),
            ),
        ];
        for (opts, want) in table {
            assert_eq!(lines(opts), *want, "{opts:?}");
        }
    }
}
