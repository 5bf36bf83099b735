//! The one signal handler of a process that owns runs (`firedup run`, `firedup matrix`):
//! SIGINT (Ctrl-C), SIGTERM and SIGHUP (a closed terminal) end every run registered with it the
//! same way, whatever the main thread is doing (launching, watching, running `--then`, a bench):
//!
//! 1. the cancel flag is set ([`Interrupts::cancelled`]: start nothing new) and the caller hears
//!    [`Heard::Signal`];
//! 2. a `then` command that runs is sent SIGTERM (it shares the terminal's Ctrl-C, not a SIGTERM
//!    or SIGHUP sent to firedup alone);
//! 3. every registered run is stopped on its host and its teardown verified, or left running
//!    where it was registered to be kept ([`OnSignal::Keep`]);
//! 4. the caller hears [`Heard::Ended`] with what each stop found (to say it and record it);
//! 5. with [`AfterSignal::Exit`], the process exits 128 + the signal (130, 143, 129).
//!
//! A signal the process was started with ignored stays ignored ([`ignored_at_start`]): under
//! `nohup` (SIGHUP) or as a shell script's background job (SIGINT), the user asked for the run to
//! outlive a hangup or a Ctrl-C, and the supervisor and the server inherit the same.
//!
//! Nothing the caller does with what it hears can keep the runs from being ended or the process
//! from exiting: its callback runs on a thread of its own, a panic in it (a print to a closed
//! pipe) is caught, and one that blocks (a full pipe nobody reads) is given [`REPORT_WAIT`], then
//! left behind.
//! The main thread that ends a run itself first takes the ending over ([`Interrupts::finish`]); if a
//! signal came first it waits there for the exit.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::host::{Host, HostError, RunStop};
use crate::target::Target;

/// How long the caller's report of an interrupt may take before the process exits without it.
pub const REPORT_WAIT: Duration = Duration::from_secs(5);

/// How long a signal waits for a launch under way to register its run (or fail): a launch's own
/// steps are bounded (a host's connect timeout), this only guards against one that is not.
pub const LAUNCH_WAIT: Duration = Duration::from_secs(120);

/// What happens to the process once the runs are ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterSignal {
    /// It exits 128 + the signal (`firedup run`).
    Exit,
    /// It carries on: the main thread sees [`Interrupts::cancelled`] and winds down (a matrix
    /// keeps its finished cells and prints its table).
    CarryOn,
}

/// What a signal does to one registered run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnSignal {
    /// Stop it on its host and verify the teardown.
    Stop,
    /// Leave it running (`--keep`).
    Keep,
    /// Cancel it on its host ([`Host::cancel`]: a matrix cell's bench and server, at once); the
    /// cell's own teardown verifies.
    Cancel,
}

/// How a signal ended one run.
#[derive(Debug)]
pub enum RunEnded {
    /// Left running ([`OnSignal::Keep`]).
    Kept,
    /// Stopped on its host: what the stop found, or why it failed.
    Stopped(Result<RunStop, String>),
    /// Cancelled ([`OnSignal::Cancel`]): its own teardown says what is left.
    Cancelled,
}

/// What the caller hears.
#[derive(Debug, Clone)]
pub enum Heard {
    /// A signal came: nothing is stopped yet.
    Signal(i32),
    /// The runs were ended.
    Ended(Arc<Interrupted>),
}

/// What a signal ended.
#[derive(Debug)]
pub struct Interrupted {
    /// The signal.
    pub signal: i32,
    /// Each registered run, in the order registered.
    pub runs: Vec<InterruptedRun>,
}

/// One run a signal ended.
#[derive(Debug)]
pub struct InterruptedRun {
    /// Its key from [`Interrupts::register`].
    pub key: u64,
    /// The run.
    pub target: Target,
    /// Its host's name (`None`: this machine).
    pub host: Option<String>,
    /// How it was ended.
    pub ended: RunEnded,
}

type Callback = Box<dyn Fn(Heard) + Send + Sync>;

struct Registered {
    key: u64,
    host: Arc<dyn Host>,
    target: Target,
    grace: Duration,
    on_signal: OnSignal,
}

#[derive(Default)]
struct State {
    next_key: u64,
    runs: Vec<Registered>,
    then_child: Option<u32>,
    /// A signal is being handled, or the main thread ended the runs itself.
    ending: bool,
    /// Launches under way ([`Interrupts::launching`]): their runs may be running and not yet
    /// registered.
    launching: u32,
    /// How long the caller's report may take ([`Interrupts::allow_report`]; `None`:
    /// [`REPORT_WAIT`]).
    report_wait: Option<Duration>,
}

/// The installed handler. Dropping it does not uninstall it: a signal after the main thread's
/// [`Interrupts::finish`] is ignored.
pub struct Interrupts {
    state: Arc<Mutex<State>>,
    /// Signalled when a launch under way ends.
    launched: Arc<Condvar>,
    cancelled: Arc<AtomicBool>,
}

/// A launch under way ([`Interrupts::launching`]); dropping it ends it.
#[derive(Debug)]
pub struct Launching<'a> {
    interrupts: &'a Interrupts,
}

impl Drop for Launching<'_> {
    fn drop(&mut self) {
        if let Ok(mut s) = self.interrupts.state.lock() {
            s.launching = s.launching.saturating_sub(1);
        }
        self.interrupts.launched.notify_all();
    }
}

impl std::fmt::Debug for Interrupts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interrupts")
            .field("cancelled", &self.cancelled())
            .finish_non_exhaustive()
    }
}

/// The signals that end runs.
pub const SIGNALS: [i32; 3] = [SIGINT, SIGTERM, SIGHUP];

impl Interrupts {
    /// Catches SIGINT, SIGTERM and SIGHUP from now on; `heard` is told of each signal and of what
    /// ending the runs found.
    pub fn install(
        after: AfterSignal,
        heard: impl Fn(Heard) + Send + Sync + 'static,
    ) -> Result<Interrupts, crate::Error> {
        let caught: Vec<i32> = SIGNALS
            .into_iter()
            .filter(|s| !ignored_at_start(*s))
            .collect();
        let mut signals =
            signal_hook::iterator::Signals::new(caught).map_err(|e| crate::Error::Io {
                context: "cannot handle Ctrl-C, SIGTERM and SIGHUP, so nothing was launched".into(),
                source: e,
            })?;
        let state = Arc::new(Mutex::new(State::default()));
        let launched = Arc::new(Condvar::new());
        let launch_done = Arc::clone(&launched);
        let cancelled = Arc::new(AtomicBool::new(false));
        let heard: Arc<Callback> = Arc::new(Box::new(heard));
        let (shared, flag) = (Arc::clone(&state), Arc::clone(&cancelled));
        std::thread::spawn(move || {
            for sig in signals.forever() {
                let (runs, report_wait) = {
                    let Ok(mut s) = shared.lock() else { return };
                    // A launch under way may have started its command and not registered it
                    // yet: its run is ended with the others, never left behind unnamed.
                    let waited_from = Instant::now();
                    while s.launching > 0 && waited_from.elapsed() < LAUNCH_WAIT {
                        let Ok((guard, _)) =
                            launch_done.wait_timeout(s, LAUNCH_WAIT - waited_from.elapsed())
                        else {
                            return;
                        };
                        s = guard;
                    }
                    if s.ending {
                        continue;
                    }
                    s.ending = after == AfterSignal::Exit;
                    flag.store(true, Ordering::SeqCst);
                    if let Some(child) = s.then_child.take() {
                        if let Some(p) = rustix::process::Pid::from_raw(child as i32) {
                            let _ = rustix::process::kill_process(p, rustix::process::Signal::TERM);
                        }
                    }
                    (std::mem::take(&mut s.runs), s.report_wait)
                };
                tell(&heard, Heard::Signal(sig), REPORT_WAIT);
                let ended = Arc::new(Interrupted {
                    signal: sig,
                    runs: end_all(runs),
                });
                tell(
                    &heard,
                    Heard::Ended(ended),
                    report_wait.unwrap_or(REPORT_WAIT),
                );
                if after == AfterSignal::Exit {
                    std::process::exit(exit_code(sig));
                }
            }
        });
        Ok(Interrupts {
            state,
            launched,
            cancelled,
        })
    }

    /// A launch begins: a signal that comes before its run is registered
    /// ([`Interrupts::register`]) waits until the launch has ended (the guard dropped, at most
    /// [`LAUNCH_WAIT`]), so a command started just then is ended with the other runs. `None`:
    /// a signal already ends this process (under [`AfterSignal::Exit`]): launch nothing, and
    /// call [`Interrupts::finish`], which waits for the exit.
    pub fn launching(&self) -> Option<Launching<'_>> {
        let mut s = self.state.lock().ok()?;
        if s.ending {
            return None;
        }
        s.launching += 1;
        Some(Launching { interrupts: self })
    }

    /// A run to end on a signal from now on; the key unregisters it. Under
    /// [`AfterSignal::CarryOn`] a run registered after a signal was handled is not ended by the
    /// handler (it has already looked): the caller checks [`Interrupts::cancelled`] after
    /// registering and ends it itself.
    pub fn register(
        &self,
        host: Arc<dyn Host>,
        target: &Target,
        grace: Duration,
        on_signal: OnSignal,
    ) -> u64 {
        let Ok(mut s) = self.state.lock() else {
            return 0;
        };
        s.next_key += 1;
        let key = s.next_key;
        s.runs.push(Registered {
            key,
            host,
            target: target.clone(),
            grace,
            on_signal,
        });
        key
    }

    /// The run no longer needs ending on a signal (its own end is under way or done).
    pub fn unregister(&self, key: u64) {
        if let Ok(mut s) = self.state.lock() {
            s.runs.retain(|r| r.key != key);
        }
    }

    /// The caller's report of the runs' ending ([`Heard::Ended`]) may take up to `wait` before
    /// the process exits without it (default [`REPORT_WAIT`]): for a report that itself waits,
    /// bounded, for something the ending set off (each node of a group recording the verdict
    /// its watch reached once stopped).
    pub fn allow_report(&self, wait: Duration) {
        if let Ok(mut s) = self.state.lock() {
            s.report_wait = Some(wait);
        }
    }

    /// The `then` command runs as `pid` (`None`: it has ended).
    pub fn then_child(&self, pid: Option<u32>) {
        if let Ok(mut s) = self.state.lock() {
            s.then_child = pid;
        }
    }

    /// A signal came (start nothing new).
    pub fn cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    /// The main thread ends the runs itself from here on. If a signal is being handled
    /// ([`AfterSignal::Exit`]), this never returns: the signal thread exits the process once it
    /// has ended them (see the module doc: it always does).
    pub fn finish(&self) {
        let signal_first = match self.state.lock() {
            Ok(mut s) => {
                let was = s.ending;
                s.ending = true;
                s.runs.clear();
                was
            }
            Err(_) => false,
        };
        if signal_first {
            loop {
                std::thread::park();
            }
        }
    }
}

/// Tells the caller, on a thread of its own: a panic there is caught, and one that blocks (a
/// write to a full pipe nobody reads) is left behind after `wait`.
fn tell(heard: &Arc<Callback>, what: Heard, wait: Duration) {
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let heard = Arc::clone(heard);
    let spawned = std::thread::Builder::new().spawn(move || {
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| heard(what)));
        let _ = done_tx.send(());
    });
    if spawned.is_ok() {
        let _ = done_rx.recv_timeout(wait);
    }
}

/// Whether `signal` is ignored (SIG_IGN) in this process now, as `nohup` leaves SIGHUP and a
/// non-interactive shell leaves SIGINT for a background job: read before any handler is set.
pub fn ignored_at_start(signal: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the disposition into `old`.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0
            && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Ends each run as it was registered: stopped on its host (each on a thread of its own, so one
/// slow host does not hold the others), or kept.
fn end_all(runs: Vec<Registered>) -> Vec<InterruptedRun> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .into_iter()
            .map(|r| {
                scope.spawn(move || {
                    let ended = match r.on_signal {
                        OnSignal::Keep => RunEnded::Kept,
                        OnSignal::Stop => RunEnded::Stopped(
                            r.host
                                .stop(&r.target.run_id, r.grace)
                                .map_err(|e: HostError| e.to_string()),
                        ),
                        OnSignal::Cancel => {
                            r.host.cancel(&r.target, r.grace);
                            RunEnded::Cancelled
                        }
                    };
                    InterruptedRun {
                        key: r.key,
                        host: r.host.name().map(String::from),
                        target: r.target,
                        ended,
                    }
                })
            })
            .collect();
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    })
}

/// The exit code of a process ended by `sig` (128 + the signal, as a shell reports it).
pub fn exit_code(sig: i32) -> i32 {
    128 + sig
}

/// The signal's name, as a person reads it.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        SIGINT => "SIGINT",
        SIGTERM => "SIGTERM",
        SIGHUP => "SIGHUP",
        _ => "a signal",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disposition_of_sig_ign_is_read_as_ignored_and_a_default_one_is_not() {
        // SIGUSR2: no test or handler here uses it.
        let sig = libc::SIGUSR2;
        // SAFETY: plain signal(2) calls on a signal nothing else in this test binary uses.
        let before = unsafe { libc::signal(sig, libc::SIG_IGN) };
        let ignored = ignored_at_start(sig);
        unsafe { libc::signal(sig, libc::SIG_DFL) };
        let default = ignored_at_start(sig);
        unsafe { libc::signal(sig, before) };
        assert_eq!((ignored, default), (true, false));
    }

    #[test]
    fn exit_codes_and_names_are_a_shells() {
        let table = [
            (SIGINT, 130, "SIGINT"),
            (SIGTERM, 143, "SIGTERM"),
            (SIGHUP, 129, "SIGHUP"),
        ];
        for (sig, code, name) in table {
            assert_eq!(exit_code(sig), code);
            assert_eq!(signal_name(sig), name);
        }
    }
}
