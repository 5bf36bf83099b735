//! Which real-server test groups must run rather than say "not run": `FIREDUP_TEST_REQUIRE_SERVERS`
//! is `1` (every group) or the names of the groups, separated by commas or spaces (`vllm`,
//! `sglang`, `llamacpp`, `llama-cpp-python`). `.ci/run` names each group whose server it installed, so a
//! block skipped with its `FIREDUP_CI_...=0` leaves that group "not run" instead of failing it.

/// Whether the group `group` must run (its inputs missing is then a failure).
pub fn required(group: &str) -> bool {
    required_by(
        std::env::var("FIREDUP_TEST_REQUIRE_SERVERS")
            .ok()
            .as_deref(),
        group,
    )
}

/// [`required`] for the setting `setting`.
pub fn required_by(setting: Option<&str>, group: &str) -> bool {
    let Some(setting) = setting else { return false };
    setting.trim() == "1" || setting.split([',', ' ']).any(|name| name.trim() == group)
}
