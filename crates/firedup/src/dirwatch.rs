//! Directory watches through one inotify instance per process, shared by every local observer.
//!
//! Contract: [`subscribe`] asks to be woken when something happens in a directory, to one name
//! in it (or to any name), or to the directory itself; the returned [`DirSubscription`] ends the
//! interest when dropped. A directory is watched once however many subscribe to it and unwatched
//! when the last subscription goes (an inotify instance closed with watches still in place makes
//! the process's exit wait for their destruction). A wake says only "look again": the subscriber
//! reads what changed itself. An event queue overflow, or an error from the instance, wakes every
//! subscriber. `None` from [`subscribe`] means no inotify for that directory (no instance, the
//! watch limit, a file system that refuses): the caller's own slow poll must cover it.
//!
//! Why one instance: the kernel allows a user 128 instances by default
//! (`fs.inotify.max_user_instances`) but ~190,000 watches; with an instance per watch, a process
//! running hundreds of watches (the library, a matrix) had most of them on the slow poll. The one
//! exception is the first local observer alive in a process (`firedup run`'s, `firedup watch`'s),
//! which reads an instance of its own on its judging thread (`observe/own_inotify.rs`): one wake
//! from a log line to the judge, not this hub's thread and then the observer's.
//!
//! Events are routed by name so that N subscribers in one directory (N logs side by side) do not
//! wake each other: each append to one log wakes its own observer only.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use notify::{RecursiveMode, Watcher};

/// What a subscriber is woken by.
pub(crate) type Wake = Arc<dyn Fn() + Send + Sync>;

struct Route {
    id: u64,
    /// `None`: any name in the directory.
    name: Option<OsString>,
    wake: Wake,
}

type Routes = HashMap<PathBuf, Vec<Route>>;

struct Hub {
    /// Held across watch/unwatch, so that (un)subscriptions are serialized with the kernel's view.
    /// The event callback never takes it: `notify` answers a watch call on the thread that runs
    /// the callback, and a callback waiting for this lock would deadlock with it.
    watcher: Mutex<Option<notify::RecommendedWatcher>>,
    routes: Arc<Mutex<Routes>>,
    next_id: AtomicU64,
}

fn hub() -> &'static Hub {
    static HUB: OnceLock<Hub> = OnceLock::new();
    HUB.get_or_init(|| {
        let routes: Arc<Mutex<Routes>> = Arc::default();
        let r = routes.clone();
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let wakes = match res {
                Ok(ev) if !ev.need_rescan() && !ev.paths.is_empty() => {
                    targets(&r.lock().unwrap_or_else(|e| e.into_inner()), &ev.paths)
                }
                _ => everyone(&r.lock().unwrap_or_else(|e| e.into_inner())),
            };
            for w in wakes {
                w();
            }
        })
        .ok();
        Hub {
            watcher: Mutex::new(watcher),
            routes,
            next_id: AtomicU64::new(0),
        }
    })
}

/// The subscribers an event on `paths` concerns: those of a path's directory that want its name
/// (or any), and all of a path that is itself a watched directory (deleted, moved, re-read).
fn targets(routes: &Routes, paths: &[PathBuf]) -> Vec<Wake> {
    let mut out = Vec::new();
    for p in paths {
        if let Some(all) = routes.get(p) {
            out.extend(all.iter().map(|r| r.wake.clone()));
        }
        if let (Some(dir), Some(name)) = (p.parent(), p.file_name()) {
            if let Some(rs) = routes.get(dir) {
                out.extend(
                    rs.iter()
                        .filter(|r| r.name.as_deref().is_none_or(|n| n == name))
                        .map(|r| r.wake.clone()),
                );
            }
        }
    }
    out
}

fn everyone(routes: &Routes) -> Vec<Wake> {
    routes.values().flatten().map(|r| r.wake.clone()).collect()
}

/// Interest in a directory; dropping it ends the interest.
pub(crate) struct DirSubscription {
    dir: PathBuf,
    id: u64,
}

impl std::fmt::Debug for DirSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirSubscription")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// Wakes `wake` on events in `dir` about `name` (any name when `None`) or about `dir` itself.
pub(crate) fn subscribe(dir: &Path, name: Option<&OsStr>, wake: Wake) -> Option<DirSubscription> {
    let hub = hub();
    let mut guard = hub.watcher.lock().unwrap_or_else(|e| e.into_inner());
    let watcher = guard.as_mut()?;
    // Events carry the path the directory was watched under: one spelling per directory.
    let dir = std::fs::canonicalize(dir).ok()?;
    let id = hub.next_id.fetch_add(1, Ordering::Relaxed);
    hub.routes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(dir.clone())
        .or_default()
        .push(Route {
            id,
            name: name.map(OsStr::to_os_string),
            wake,
        });
    // Watched again even when it already is: re-arms a directory the kernel stopped watching
    // (deleted and created again) since the first subscriber came.
    if watcher.watch(&dir, RecursiveMode::NonRecursive).is_err() {
        drop(guard);
        unsubscribe(&dir, id);
        return None;
    }
    Some(DirSubscription { dir, id })
}

fn unsubscribe(dir: &Path, id: u64) {
    let hub = hub();
    let mut guard = hub.watcher.lock().unwrap_or_else(|e| e.into_inner());
    let last = {
        let mut routes = hub.routes.lock().unwrap_or_else(|e| e.into_inner());
        match routes.get_mut(dir) {
            Some(rs) => {
                rs.retain(|r| r.id != id);
                let last = rs.is_empty();
                if last {
                    routes.remove(dir);
                }
                last
            }
            None => false,
        }
    };
    if let (true, Some(w)) = (last, guard.as_mut()) {
        let _ = w.unwatch(dir);
    }
}

impl Drop for DirSubscription {
    fn drop(&mut self) {
        unsubscribe(&self.dir, self.id);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::{Duration, Instant};

    /// A wake that counts its calls, and the count (also for the observer's tests).
    pub(crate) fn counter() -> (Arc<AtomicUsize>, Wake) {
        let n = Arc::new(AtomicUsize::new(0));
        let m = n.clone();
        let wake: Wake = Arc::new(move || {
            m.fetch_add(1, Ordering::SeqCst);
        });
        (n, wake)
    }

    /// Waits until `f` holds; fails with `what` after a bound that only a lost wake reaches.
    pub(crate) fn eventually(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !f() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn events_are_routed_by_name_and_a_directory_is_watched_until_its_last_subscriber_goes() {
        let d = tempfile::tempdir().unwrap();
        let (a_n, a) = counter();
        let (b_n, b) = counter();
        let (any_n, any) = counter();
        let sa = subscribe(d.path(), Some(OsStr::new("a.log")), a).unwrap();
        let sb = subscribe(d.path(), Some(OsStr::new("b.log")), b).unwrap();
        let sany = subscribe(d.path(), None, any).unwrap();
        std::fs::write(d.path().join("a.log"), "x\n").unwrap();
        eventually("a woken", || a_n.load(Ordering::SeqCst) > 0);
        eventually("any woken", || any_n.load(Ordering::SeqCst) > 0);
        assert_eq!(b_n.load(Ordering::SeqCst), 0, "b is not woken by a.log");
        // The directory stays watched while one subscriber is left.
        drop(sa);
        drop(sany);
        std::fs::write(d.path().join("b.log"), "y\n").unwrap();
        eventually("b woken", || b_n.load(Ordering::SeqCst) > 0);
        drop(sb);
        let dir = std::fs::canonicalize(d.path()).unwrap();
        assert!(!hub().routes.lock().unwrap().contains_key(&dir));
    }

    #[test]
    fn a_directory_deleted_and_created_again_is_watched_again_by_the_next_subscriber() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("logs");
        std::fs::create_dir(&dir).unwrap();
        let (first_n, first) = counter();
        let s1 = subscribe(&dir, None, first).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        eventually("the deletion wakes", || first_n.load(Ordering::SeqCst) > 0);
        std::fs::create_dir(&dir).unwrap();
        let (second_n, second) = counter();
        let _s2 = subscribe(&dir, Some(OsStr::new("x.log")), second).unwrap();
        std::fs::write(dir.join("x.log"), "z\n").unwrap();
        eventually("the new directory's event wakes", || {
            second_n.load(Ordering::SeqCst) > 0
        });
        drop(s1);
    }
}
