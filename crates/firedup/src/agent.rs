//! `firedup __agent`: the remote side of a watch over SSH. It reads an `AgentSpec` on stdin,
//! observes the target with the same `LocalObserver` a local watch uses (so probes run from the
//! server's own machine), or, for a Slurm job (`run --slurm --host LOGIN`), the same
//! `SlurmSource` a watch on the login node uses (the job's log and `scontrol`, there), and
//! streams what it sees as `WireEvent`s on stdout until the process's exit (or the job's end)
//! was observed (the command line hands it its standard streams: the library prints nothing
//! itself). It judges nothing: the local firedup does, so a reconnect resumes the
//! judgement where it was. If the link drops, the next write fails and the agent exits; the
//! server and its log are untouched.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::{Context, Error, Result, chain};

use crate::judge::Observation;
use crate::observe::{LocalObserver, ObserveSettings};
use crate::rundir::{RunDir, now_unix};
use crate::slurm::source::SlurmSource;
use crate::source::{Seen, Source};
use crate::target::Target;
use crate::wire::{AgentSpec, Resume, WireEvent};

/// Heartbeats keep a quiet link visibly alive.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// Runs the agent: its spec is the first line of `input`, its stream goes to `out`; returns its
/// exit code.
pub fn run(input: &mut dyn BufRead, out: &mut dyn Write) -> Result<i32> {
    let mut line = String::new();
    input
        .read_line(&mut line)
        .context("cannot read the agent spec on stdin")?;
    let spec: AgentSpec = serde_json::from_str(&line).context("bad agent spec")?;
    match serve(&spec, out) {
        Ok(()) => Ok(0),
        // A write that fails means the other end is gone: nothing more to do.
        Err(_) => Ok(0),
    }
}

fn send(out: &mut dyn Write, e: &WireEvent) -> std::io::Result<()> {
    writeln!(out, "{}", e.to_line())
}

/// What the agent observes: a process and its log, or a Slurm job (its log and its state, read
/// here, on the login node: the job's log is on its shared file system, and the log is read to
/// its end before the job's end is sent, as a local watch does).
enum Watched {
    Process(Box<LocalObserver>),
    Job(Box<SlurmSource>),
}

impl Watched {
    fn new(target: &Target, job: Option<&str>, settings: &ObserveSettings, start: Instant) -> Self {
        match job {
            Some(id) => Watched::Job(Box::new(SlurmSource::with_settings(settings, target, id))),
            None => Watched::Process(Box::new(LocalObserver::new(target, settings, start))),
        }
    }

    fn collect(&mut self, out: &mut Vec<Seen>) {
        match self {
            Watched::Process(o) => {
                let mut buf = Vec::new();
                o.collect(&mut buf);
                out.extend(buf.into_iter().map(|(at, obs)| Seen::Obs(at, obs)));
            }
            Watched::Job(j) => j.collect(out),
        }
    }

    fn resume_point(&self) -> (u64, u64) {
        match self {
            Watched::Process(o) => o.resume_point(),
            Watched::Job(j) => j.resume_point(),
        }
    }

    fn ended(&self) -> bool {
        match self {
            Watched::Process(o) => o.ended(),
            Watched::Job(j) => j.ended(),
        }
    }

    fn caught_up(&self) -> bool {
        match self {
            Watched::Process(o) => o.caught_up(),
            Watched::Job(j) => crate::source::Source::caught_up(j.as_ref()),
        }
    }

    fn read_through(&self) -> Option<Duration> {
        match self {
            Watched::Process(o) => o.read_through(),
            Watched::Job(j) => crate::source::Source::read_through(j.as_ref()),
        }
    }

    fn next_wake(&self) -> Instant {
        match self {
            Watched::Process(o) => o.next_wake(),
            Watched::Job(j) => j.next_wake(),
        }
    }

    fn wait(&mut self, until: Instant) {
        match self {
            Watched::Process(o) => o.wait(until),
            Watched::Job(j) => j.wait(until),
        }
    }
}

/// Streams observations of `spec`'s target to `out` until the process (or the batch job) ended
/// (or `out` fails).
pub fn serve(spec: &AgentSpec, out: &mut dyn Write) -> std::io::Result<()> {
    let (target, job) = match target_of(spec) {
        Ok(t) => t,
        Err(e) => {
            send(out, &WireEvent::Error { message: chain(&e) })?;
            return out.flush();
        }
    };
    let t0 = spec
        .t0_unix
        .or_else(|| {
            target
                .run
                .as_ref()
                .and_then(|r| r.meta().ok())
                .map(|m| m.started_at)
        })
        .unwrap_or_else(now_unix);
    send(
        out,
        &WireEvent::Hello {
            version: env!("CARGO_PKG_VERSION").to_string(),
            t0_unix: t0,
            log: target.log.display().to_string(),
            pid: target.pid,
        },
    )?;
    out.flush()?;
    let settings = ObserveSettings {
        line_cap: spec.line_cap,
        from_end: spec.from_end,
        resume: spec.resume.map(|r| (r.offset, r.line)),
        probes: spec.probes.clone(),
        sample_every: Duration::from_millis(spec.sample_every_ms.max(100)),
        // The agent's spec does not say the mode: a remote daemon is not followed (yet).
        follow_run: false,
    };
    let start = Instant::now();
    // Observation times are seconds since time zero by this host's clock.
    let offset = now_unix() - t0;
    let mut watched = Watched::new(&target, job.as_deref(), &settings, start);
    let mut seq = spec.resume.map(|r| r.seq).unwrap_or(0);
    let mut last_mark: Option<Resume> = spec.resume;
    let mut next_heartbeat = Instant::now();
    let mut buf = Vec::new();
    let mut backlog = false;
    let mut sent_through: Option<Duration> = None;
    // When the last look that ended caught up began (the heartbeat's `through`).
    let mut checked: Option<Duration> = None;
    loop {
        let look = start.elapsed();
        watched.collect(&mut buf);
        // A backlog is announced before the lines of the slice that found it (the client ticks
        // the judge only while none is announced: what it judges is then all there was) ...
        let waiting = !watched.caught_up();
        if !waiting {
            checked = Some(look);
        }
        if waiting && !backlog {
            send(
                out,
                &WireEvent::Backlog {
                    waiting,
                    through: None,
                },
            )?;
            backlog = true;
        }
        for seen in buf.drain(..) {
            let event = match seen {
                Seen::Obs(at, obs) => {
                    let s = if matches!(obs, Observation::Line { .. }) {
                        seq += 1;
                        seq
                    } else {
                        0
                    };
                    let t = offset + at.as_secs_f64();
                    WireEvent::Obs { t, seq: s, obs }
                }
                Seen::Note(at, text) => WireEvent::Note {
                    t: offset + at.as_secs_f64(),
                    text,
                },
            };
            send(out, &event)?;
        }
        let (offset_b, line) = watched.resume_point();
        let mark = Resume {
            offset: offset_b,
            line,
            seq,
        };
        if last_mark != Some(mark) {
            send(out, &WireEvent::Mark(mark))?;
            last_mark = Some(mark);
        }
        // ... and the end of a backlog after the last of its lines.
        if backlog && !waiting {
            send(
                out,
                &WireEvent::Backlog {
                    waiting,
                    through: None,
                },
            )?;
            backlog = false;
        }
        // While behind, after the lines read: up to when everything was read.
        let through = watched.read_through().filter(|_| waiting);
        if let (Some(t), true) = (through, through != sent_through) {
            send(
                out,
                &WireEvent::Backlog {
                    waiting,
                    through: Some(offset + t.as_secs_f64()),
                },
            )?;
            sent_through = through;
        }
        if watched.ended() {
            send(out, &WireEvent::End)?;
            return out.flush();
        }
        if Instant::now() >= next_heartbeat {
            let t = offset + start.elapsed().as_secs_f64();
            let through = checked.map(|c| offset + c.as_secs_f64());
            send(out, &WireEvent::Heartbeat { t, through })?;
            next_heartbeat = Instant::now() + HEARTBEAT;
        }
        out.flush()?;
        watched.wait(watched.next_wake().min(next_heartbeat));
    }
}

/// The target, and the Slurm job to watch it as (the spec's, or the one its run's record names).
fn target_of(spec: &AgentSpec) -> Result<(Target, Option<String>)> {
    if let Some(id) = &spec.run_id {
        let run = RunDir::open(id)?;
        let meta = run.meta()?;
        let proc_rec = run.process();
        let job = spec
            .slurm_job
            .clone()
            .or_else(|| meta.job.as_ref().map(|j| j.id.clone()));
        let target = Target {
            log: PathBuf::from(&meta.log),
            pid: proc_rec.map(|p| p.pid),
            start_ticks: proc_rec.map(|p| p.start_ticks).filter(|t| *t != 0),
            spawn_error: run.exit().and_then(|e| e.spawn_error),
            run_id: run.id.clone(),
            run: Some(run),
            notify: None,
            exit_pipe: None,
            log_start: meta.log_start,
            log_file: meta.log_file,
            // Found again after the launch: the watch's own baseline.
            oom_kills_before: None,
        };
        Ok((target, job))
    } else {
        let log = spec
            .log
            .clone()
            .ok_or_else(|| Error::usage("the agent needs a run id or a log path"))?;
        let start_ticks = spec
            .pid
            .and_then(|p| crate::process::stat(p).map(|s| s.start_ticks));
        let target = Target {
            log,
            pid: spec.pid,
            start_ticks,
            ..Default::default()
        };
        Ok((target, spec.slurm_job.clone()))
    }
}

/// What `firedup __remote-launch` answers (JSON on stdout).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RemoteLaunched {
    /// The run's id on the remote host.
    pub run_id: String,
    /// Path of the run's log on the remote host.
    pub log: String,
    /// Pid of the launched command on the remote host; `None` when it never started.
    pub pid: Option<u32>,
    /// Why the command could not be started, one sentence; `None` when it started.
    pub spawn_error: Option<String>,
}

/// `firedup __remote-launch`: launches the [`crate::launch::LaunchSpec`] read on `input` (stdin),
/// under the supervisor, exactly as a local `firedup run` does, and answers on `out` (stdout)
/// with the run's id, log and pid.
pub fn remote_launch(input: &mut dyn Read, out: &mut dyn Write) -> Result<i32> {
    let mut text = String::new();
    input
        .read_to_string(&mut text)
        .context("cannot read the launch spec on stdin")?;
    let spec: crate::launch::LaunchSpec = serde_json::from_str(&text).context("bad launch spec")?;
    let launched = crate::launch::launch(&spec)?;
    let (pid, spawn_error) = match &launched.started {
        Ok(p) => (Some(p.pid), None),
        Err(e) => (None, Some(e.clone())),
    };
    let answer = RemoteLaunched {
        run_id: launched.run.id.clone(),
        log: launched.log.display().to_string(),
        pid,
        spawn_error,
    };
    writeln!(out, "{}", serde_json::to_string(&answer)?)?;
    Ok(0)
}

/// `firedup __record-verdict RUN_ID`: the verdict a launch over SSH reached (JSON on `input`),
/// recorded in the run's directory here (see [`crate::reattach`]).
pub fn record_verdict(run_id: &str, input: &mut dyn std::io::Read) -> Result<i32> {
    let run = RunDir::open(run_id)?;
    let outcome: crate::verdict::Outcome = serde_json::from_reader(input)?;
    run.record_verdict(&outcome)?;
    Ok(0)
}

/// `firedup __meta RUN_ID`: writes a run's `meta.json` to `out` (stdout; the local firedup judges
/// a remote run the way it was launched), with whether it has ended and its records
/// ([`crate::rundir::RunRecords`]).
pub fn meta(run_id: &str, out: &mut dyn Write) -> Result<i32> {
    let run = RunDir::open(run_id)?;
    // The record, and whether the run has ended since (a re-attach then judges how it ended).
    let mut v = serde_json::to_value(run.meta()?)?;
    if let Some(map) = v.as_object_mut() {
        let live = match run.meta()?.job {
            // A batch job's run lives while Slurm runs the job (its watcher may be gone).
            Some(job) => run.is_live() && crate::slurm::job_active(&job.id),
            None => run.is_live(),
        };
        map.insert("ended".into(), serde_json::Value::Bool(!live));
        let records = crate::rundir::RunRecords::of(&run);
        map.insert("records".into(), serde_json::to_value(records)?);
    }
    writeln!(out, "{v}")?;
    Ok(0)
}
