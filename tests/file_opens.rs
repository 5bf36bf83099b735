//! Issue 24, item 2: the files firedup writes (`--log`, `--events`) are opened once, never
//! through another user's symlink and never into another user's file, whatever is swapped in at
//! the path while firedup runs. Runs as root with a second local user (tests/common/other_user.rs);
//! without root the tests say so and pass.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::Env;
use common::other_user::{OtherUser, other_user};

/// A root-only file (0600, in the test's 0700 work directory) with known contents.
fn secret(env: &Env) -> std::path::PathBuf {
    let p = env.path("root-only.conf");
    std::fs::write(&p, b"root's own contents\n").unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
    p
}

/// Runs `sh -c script` as the other user, to its end.
fn as_other(user: &OtherUser, script: &str) {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script);
    user.command(&mut c);
    assert!(c.status().unwrap().success(), "{script}");
}

fn unchanged(target: &Path) {
    assert_eq!(
        std::fs::read(target).unwrap(),
        b"root's own contents\n",
        "the root-only file was written through the other user's path"
    );
}

#[test]
fn a_log_symlink_planted_by_another_user_is_refused_and_its_target_untouched() {
    let Some(user) = other_user() else { return };
    let env = Env::new();
    let target = secret(&env);
    let theirs = user.dir();
    let log = theirs.path().join("server.log");
    as_other(
        &user,
        &format!("ln -s {} {}", target.display(), log.display()),
    );
    let r = env
        .run()
        .until("exit")
        .opt("log", log.to_str().unwrap())
        .shell("echo INJECTED")
        .output();
    assert_eq!(r.code, 2, "{}", r.explain());
    assert!(
        r.stderr.contains("symlink owned by another user"),
        "{}",
        r.explain()
    );
    unchanged(&target);
}

#[test]
fn an_events_symlink_planted_by_another_user_is_refused_and_its_target_untouched() {
    let Some(user) = other_user() else { return };
    let env = Env::new();
    let target = secret(&env);
    let theirs = user.dir();
    let events = theirs.path().join("events.jsonl");
    as_other(
        &user,
        &format!("ln -s {} {}", target.display(), events.display()),
    );
    let r = env
        .run()
        .until("exit")
        .opt("events", events.to_str().unwrap())
        .shell("echo hello")
        .output();
    assert_ne!(r.code, 0, "{}", r.explain());
    assert!(
        r.stderr.contains(&format!("--events {}", events.display()))
            && r.stderr.contains("symlink owned by another user"),
        "{}",
        r.explain()
    );
    unchanged(&target);
    // A file of the other user's is refused too, and left as it was.
    let their_file = theirs.path().join("their-events.jsonl");
    as_other(&user, &format!("echo theirs > {}", their_file.display()));
    let r = env
        .run()
        .until("exit")
        .opt("events", their_file.to_str().unwrap())
        .command(&["true"])
        .output();
    assert!(
        r.stderr.contains("belongs to another user"),
        "{}",
        r.explain()
    );
    assert_eq!(std::fs::read(&their_file).unwrap(), b"theirs\n");
}

/// The other user swaps its path between nothing and a symlink to the root-only file as fast as
/// it can while root runs firedup with that path as its log, 40 times: whichever state an open
/// meets, the root-only file is never written.
#[test]
fn a_log_path_swapped_for_a_symlink_while_firedup_runs_never_reaches_the_target() {
    let Some(user) = other_user() else { return };
    let env = Env::new();
    let target = secret(&env);
    let theirs = user.dir();
    let log = theirs.path().join("server.log");
    let mut c = Command::new("sh");
    c.arg("-c").arg(format!(
        "while :; do ln -sfn {t} {l}; rm -f {l}; ln -sfn {t} {l}; rm -f {l}; echo theirs > {l}.f; mv -f {l}.f {l}; rm -f {l}; done",
        t = target.display(),
        l = log.display()
    ));
    user.command(&mut c);
    let mut swapper = c
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut outcomes = std::collections::BTreeMap::<i32, usize>::new();
    for _ in 0..40 {
        let r = env
            .run()
            .until("exit")
            .opt("log", log.to_str().unwrap())
            .shell("echo INJECTED")
            .output();
        *outcomes.entry(r.code).or_default() += 1;
        unchanged(&target);
    }
    swapper.kill().unwrap();
    swapper.wait().unwrap();
    eprintln!("exit codes over 40 runs: {outcomes:?}");
    unchanged(&target);
}
