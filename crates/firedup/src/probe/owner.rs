//! Whether the server answering a local HTTP address is the watched one.
//!
//! The HTTP and request probes ask a URL, and on this machine someone else's server can answer it
//! (a stale `python3 -m http.server` on the port, the previous run's server still running): a 200
//! from it is not this server being ready. Contract of [`guarded`]: before the probe, and again
//! after an `Up` answer (the listener may have appeared in between), the listener that the URL's
//! address reaches is looked up as the port probe does ([`super::tcp::owner_at`]): the first
//! address of the URL's host (in resolution order, as a connection tries them) that has one. A listener
//! held by a process outside the run is `Foreign` ("port 8000 is answered by pid 123 (python3 -m
//! http.server), not by the watched process"), whatever it would have answered, and the judge
//! keeps waiting with that reason. Unchanged, the probe's own answer stands when no process is
//! watched (an attach by log alone), when the host is not this machine (its owner cannot be
//! checked from here), when the socket table shows no listener (another network namespace), when
//! a process of the tree cannot be read (a server under `sudo`: it may well be the owner), and
//! when the URL does not parse or resolve (the probe reports that itself). An `Up` answer whose
//! listener was seen to be the run's says so (`ours`), and only then: the judge takes it as
//! direct evidence that the run serves.

use super::ProbeOutcome;
use super::http::Target;
use super::tcp::{self, Ours};

/// Runs `probe` for `url` unless the listener behind the URL belongs to someone else (see the
/// module doc); with `ours` `None`, just runs it.
pub fn guarded(
    url: &str,
    ours: Option<&Ours>,
    probe: impl FnOnce() -> ProbeOutcome,
) -> ProbeOutcome {
    let Some(ours) = ours else {
        return probe();
    };
    if let Some(foreign @ ProbeOutcome::Foreign { .. }) = listener_owner(url, ours) {
        return foreign;
    }
    let mut outcome = probe();
    if outcome.is_up() {
        // Looked up again after the answer: the listener may have appeared in between.
        match listener_owner(url, ours) {
            Some(foreign @ ProbeOutcome::Foreign { .. }) => return foreign,
            Some(ProbeOutcome::Up { ours: true, .. }) => {
                // The run's own process holds the listener that answered: direct evidence.
                if let ProbeOutcome::Up { ours, .. } = &mut outcome {
                    *ours = true;
                }
            }
            // No listener in the table, an owner not checked, or a tree firedup cannot fully
            // read: the probe's answer stands, its owner unchecked.
            _ => {}
        }
    }
    outcome
}

/// Runs `probe` with the run's secret (`key`: the server's API key) only once the listener
/// behind `url` is seen to be the run's own, checked just before; else asks nothing (`NotYet`).
/// A secret never goes to a listener whose owner was not seen: a port that no one held at the
/// guard's first look can be taken by someone else's listener before the probe connects (seen in
/// CI under load: another user's listener received the key). Without a key, `probe` runs as
/// [`guarded`] runs it.
pub fn with_secret(
    url: &str,
    ours: Option<&Ours>,
    key: Option<&str>,
    probe: impl FnOnce(Option<&str>) -> ProbeOutcome,
) -> ProbeOutcome {
    let Some(key) = key else {
        return guarded(url, ours, || probe(None));
    };
    let seen_ours = ours.is_some_and(|o| {
        matches!(
            listener_owner(url, o),
            Some(ProbeOutcome::Up { ours: true, .. })
        )
    });
    if !seen_ours {
        return guarded(url, ours, || ProbeOutcome::NotYet {
            detail:
                "no listener of the run's own on the port yet: its API key is sent to none other"
                    .into(),
        });
    }
    guarded(url, ours, || probe(Some(key)))
}

/// Who holds the listener that `url` reaches on this machine, as [`tcp::owner_at`] says (`Up`:
/// ours, `Foreign`: someone else's, `Fault`: a tree firedup cannot fully read); `None` when the
/// table shows none or the URL does not parse or resolve.
fn listener_owner(url: &str, ours: &Ours) -> Option<ProbeOutcome> {
    let target = Target::parse(url).ok()?;
    let addrs = super::resolve(&target.host, target.port, super::PROBE_TIMEOUT).ok()?;
    addrs.into_iter().find_map(|a| tcp::owner_at(a, ours))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::time::Duration;

    fn up() -> ProbeOutcome {
        ProbeOutcome::Up {
            detail: "HTTP 200 OK".into(),
            latency: Duration::from_millis(1),
            ours: false,
        }
    }

    #[test]
    fn a_listener_outside_the_run_is_foreign_whatever_it_answers() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        let url = format!("http://127.0.0.1:{port}/health");
        let table: [(&[u32], bool); 2] = [
            // A tree whose one pid does not exist holds no socket: the listener is this test's.
            (&[u32::MAX], false),
            // This process holds it: ours.
            (&[me], true),
        ];
        for (tree, want_up) in table {
            let mut probed = false;
            let out = guarded(&url, Some(&Ours::tree(tree)), || {
                probed = true;
                up()
            });
            assert_eq!(out.is_up(), want_up, "{tree:?}: {out:?}");
            // An answer from the run's own listener says so: direct evidence for the judge.
            assert_eq!(
                matches!(out, ProbeOutcome::Up { ours: true, .. }),
                want_up,
                "{tree:?}: {out:?}"
            );
            assert_eq!(
                probed, want_up,
                "{tree:?}: the probe ran against a foreign listener"
            );
            if !want_up {
                let ProbeOutcome::Foreign { detail } = &out else {
                    panic!("expected Foreign, got {out:?}");
                };
                assert!(
                    detail.starts_with(&format!("port {port} is answered by pid {me} (")),
                    "{detail}"
                );
            }
        }
        // Nothing watched, a remote host, a URL that does not parse: the probe decides.
        // Their owner is unchecked: never direct evidence.
        let unchecked = |o: ProbeOutcome| matches!(o, ProbeOutcome::Up { ours: false, .. });
        assert!(unchecked(guarded(&url, None, up)));
        let tree = [u32::MAX];
        assert!(unchecked(guarded(
            "http://192.0.2.1:9/health",
            Some(&Ours::tree(&tree)),
            up
        )));
        assert!(unchecked(guarded(
            "not a url",
            Some(&Ours::tree(&tree)),
            up
        )));
    }

    #[test]
    fn a_secret_goes_only_to_a_listener_seen_to_be_the_runs() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        let url = format!("http://127.0.0.1:{port}/v1");
        let free = TcpListener::bind("127.0.0.1:0").unwrap();
        let nobody = format!("http://127.0.0.1:{}/v1", free.local_addr().unwrap().port());
        drop(free);
        let (mine, other) = ([me], [u32::MAX]);
        // (url, the run's tree (None: nothing watched), key given, the key the probe may send)
        let cases: [(&str, Option<&[u32]>, Option<&str>, Option<&str>); 6] = [
            (&url, Some(&mine), Some("sk-1"), Some("sk-1")),
            // Someone else's listener: not asked at all.
            (&url, Some(&other), Some("sk-1"), None),
            // No listener yet (one may appear before a connect): not sent.
            (&nobody, Some(&mine), Some("sk-1"), None),
            // Nothing watched: its owner cannot be seen, so neither is the key sent.
            (&url, None, Some("sk-1"), None),
            // No key: the probe runs as guarded() runs it.
            (&url, Some(&mine), None, None),
            (&url, None, None, None),
        ];
        for (url, tree, key, may_send) in cases {
            let ours = tree.map(Ours::tree);
            let mut sent = None;
            let out = with_secret(url, ours.as_ref(), key, |k| {
                sent = k.map(str::to_string);
                up()
            });
            assert_eq!(sent.as_deref(), may_send, "{url} {tree:?} {key:?}: {out:?}");
        }
    }
}
