//! What identifies "the same launch" across runs, for the ETA and `compare`: a hash of the
//! command, env (secret values reduced to their names), working dir, host, profile and judging
//! options, computed the same way for a launch and for its record.

use std::path::Path;

use sha2::{Digest, Sha256};

/// Env that firedup itself sets per run: not part of what the user launched.
pub(super) const UNSTABLE_ENV: [&str; 1] = ["NOTIFY_SOCKET"];

/// What identifies "the same launch" across runs: command, env (secret values reduced to their
/// names), working dir, host, profile and the judging options. Hex, 16 digits.
pub fn spec_hash(
    command: &[String],
    env: &[(String, String)],
    cwd: Option<&Path>,
    host: Option<&str>,
    judging: &serde_json::Value,
) -> String {
    let mut env: Vec<(String, String)> = env
        .iter()
        .filter(|(k, _)| !UNSTABLE_ENV.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), crate::secrets::shown_value(k, v).to_string()))
        .collect();
    env.sort();
    let canonical = serde_json::json!({
        // As recorded (secrets redacted), so a launch and its record hash the same.
        "command": crate::secrets::redact_args(command),
        "env": env,
        "cwd": cwd.map(|c| c.display().to_string()),
        "host": host,
        "judging": judging,
    });
    let digest = Sha256::digest(canonical.to_string().as_bytes());
    digest[..8].iter().map(|b| format!("{b:02x}")).collect()
}

/// The spec hash of a launch: what `run` launches, judged as it is judged, where.
pub fn launch_hash(spec: &crate::launch::LaunchSpec, host: Option<&str>) -> String {
    let judging = serde_json::json!({
        "options": spec.judging,
        "profile": spec.profile,
        "mode": spec.mode,
    });
    // A local launch without --cwd runs where firedup was started: that dir is part of it.
    let cwd = match (&spec.cwd, host) {
        (Some(c), _) => Some(c.clone()),
        (None, None) => std::env::current_dir().ok(),
        (None, Some(_)) => None,
    };
    spec_hash(&spec.command, &spec.env, cwd.as_deref(), host, &judging)
}

/// The spec hash of an attach by log path (`watch --log`): the same log, judged the same way.
pub fn attach_hash(
    log: &Path,
    command: &[String],
    profile: Option<&str>,
    host: Option<&str>,
) -> String {
    let judging = serde_json::json!({"attach": log.display().to_string(), "profile": profile});
    spec_hash(command, &[], None, host, &judging)
}
