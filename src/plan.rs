//! Resolving flags and a profile into one plan: the judge's configuration, the compiled classifier
//! and the follower's settings. Every usage mistake (bad regex, bad duration, a server mode with no
//! readiness condition) is caught here, before anything is launched.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};

use crate::classify::{Classifier, ClassifierSpec, builtin_catalog};
use crate::duration::parse_duration;
use crate::judge::{JudgeConfig, Mode};
use crate::lines::DEFAULT_LINE_CAP;
use crate::profile::{self, Profile};

/// What the user asked for, before resolution (filled from the command line or by a library user).
#[derive(Debug, Clone, Default)]
pub struct WatchOptions {
    pub until_exit: bool,
    pub profile: Option<String>,
    pub ready_lines: Vec<String>,
    pub fail_lines: Vec<String>,
    pub timeout: Option<String>,
    pub stall: Option<String>,
    pub log_grace: Option<String>,
    pub hold: Option<String>,
    /// Only read what is written from now on (attach without replaying the existing log).
    pub from_end: bool,
}

/// The resolved plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub judge: JudgeConfig,
    pub classifier: Classifier,
    pub profile: String,
    pub line_cap: usize,
    pub from_end: bool,
}

const DEFAULT_SERVER_TIMEOUT: Duration = Duration::from_secs(30 * 60);
const DEFAULT_STALL: Duration = Duration::from_secs(10 * 60);
const DEFAULT_LOG_GRACE: Duration = Duration::from_secs(30);

fn duration_flag(flag: &str, value: &Option<String>) -> Result<Option<Duration>> {
    match value {
        None => Ok(None),
        Some(v) if v == "0" || v == "none" || v == "off" => Ok(Some(Duration::MAX)),
        Some(v) => match parse_duration(v) {
            Ok(d) => Ok(Some(d)),
            Err(e) => bail!("{flag}: {e}"),
        },
    }
}

/// Resolves options for a watch of `command` (empty when attaching) whose log is `log`.
pub fn resolve(
    opts: &WatchOptions,
    command: &[String],
    log: &str,
    expect_process: bool,
) -> Result<Plan> {
    let prof: Profile = match &opts.profile {
        Some(name) => profile::by_name(name)?,
        None => profile::detect(command)?,
    };
    let mode = if opts.until_exit {
        Mode::UntilExit
    } else {
        Mode::UntilReady
    };
    let mut ready_lines = prof.ready.clone();
    if !opts.ready_lines.is_empty() {
        // Explicit ready lines replace the profile's: the user knows what "ready" means here.
        ready_lines = opts.ready_lines.clone();
    }
    if mode == Mode::UntilReady && ready_lines.is_empty() {
        bail!(
            "no readiness condition: give --ready-line REGEX, a --profile that knows this server, or --until exit for a job"
        );
    }
    let mut signatures = builtin_catalog().signatures;
    signatures.extend(prof.signatures.iter().cloned());
    let classifier = Classifier::new(&ClassifierSpec {
        signatures,
        fail_lines: opts.fail_lines.clone(),
        ready_lines: ready_lines.clone(),
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
    let log_grace =
        unbounded(duration_flag("--log-grace", &opts.log_grace)?).unwrap_or(DEFAULT_LOG_GRACE);
    let hold = unbounded(duration_flag("--hold", &opts.hold)?);
    if hold.is_some() && mode == Mode::UntilExit {
        bail!("--hold applies to server mode (--until ready), not to a job");
    }
    let mut judge = JudgeConfig::new(mode, log);
    judge.ready_conditions = ready_lines
        .iter()
        .map(|r| format!("ready line /{r}/"))
        .collect();
    judge.phases = classifier.phase_names().to_vec();
    judge.stall = stall;
    judge.timeout = timeout;
    judge.log_grace = log_grace;
    judge.hold = hold;
    judge.expect_process = expect_process;
    Ok(Plan {
        judge,
        classifier,
        profile: prof.name,
        line_cap: DEFAULT_LINE_CAP,
        from_end: opts.from_end,
    })
}

/// Parses `KEY=VALUE`.
pub fn parse_env(pair: &str) -> Result<(String, String)> {
    match pair.split_once('=') {
        Some((k, v)) if !k.is_empty() && !k.contains(char::is_whitespace) => {
            Ok((k.to_string(), v.to_string()))
        }
        _ => bail!("--env '{pair}' is not KEY=VALUE"),
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
    }
}
