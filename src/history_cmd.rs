//! `firedup history`, `firedup show RUN_ID` and `firedup compare RUN_A RUN_B`: reading the run
//! history back, for people (tables) and scripts (`--json`).

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use clap::Args;

use crate::duration::{format_duration, parse_duration};
use crate::fitted_table::{Fit, fitted, table_width};
use crate::history::{Filter, History, RunRecord, phase_durations};

#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// Only runs of this profile.
    #[arg(long)]
    pub profile: Option<String>,
    /// Only runs on this SSH host.
    #[arg(long)]
    pub host: Option<String>,
    /// Only runs that ended in this verdict.
    #[arg(long)]
    pub verdict: Option<String>,
    /// Only runs with this failure signature.
    #[arg(long)]
    pub signature: Option<String>,
    /// Only runs that ended since: a duration ago (`2h`, `7d` as `168h`) or a time
    /// (`2026-12-01`, `2026-12-01T09:00:00Z`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// Only the cells of this matrix.
    #[arg(long, value_name = "MATRIX_ID")]
    pub matrix: Option<String>,
    /// Only the run of this batch job (a Slurm job id, `run --slurm`, `watch --slurm-job`).
    #[arg(long, value_name = "JOBID")]
    pub job: Option<String>,
    /// At most this many runs (0: all).
    #[arg(long, default_value_t = 30)]
    pub limit: u32,
    /// One JSON object per run, one per line.
    #[arg(long)]
    pub json: bool,
    /// Every column, whole, whatever the terminal's width.
    #[arg(long)]
    pub wide: bool,
}

fn open() -> Result<History> {
    // A run whose caller was just told its verdict is in what is read (`src/front.rs`).
    crate::history::wait_for_records_in_flight();
    match History::open_default()? {
        Some(h) => Ok(h),
        None => bail!("history is off (FIREDUP_HISTORY=off)"),
    }
}

/// `firedup history`.
pub fn history(a: &HistoryArgs) -> Result<i32> {
    let since = a.since.as_deref().map(parse_since).transpose()?;
    if let Some(v) = &a.verdict {
        check_verdict_name(v)?;
    }
    let h = open()?;
    let runs = h.list(&Filter {
        profile: a.profile.clone(),
        host: a.host.clone(),
        verdict: a.verdict.clone(),
        signature: a.signature.clone(),
        since,
        matrix: a.matrix.clone(),
        job: a.job.clone(),
        limit: a.limit,
    })?;
    if a.json {
        for r in &runs {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(0);
    }
    if runs.is_empty() {
        println!("no runs recorded yet match (history: {})", h.path.display());
        return Ok(0);
    }
    // Matrix cells say which cell they were.
    let cells = runs.iter().any(|r| r.cell.is_some());
    let mut header = vec![
        "run",
        "command",
        "ended",
        "verdict",
        "signature",
        "phase",
        "ready",
        "elapsed",
        "where",
        "metrics",
    ];
    if cells {
        header.insert(1, "cell");
    }
    let now = crate::rundir::now_unix();
    let width = table_width();
    let mut body = Vec::new();
    for r in &runs {
        let o = &r.outcome;
        let run = match &r.name {
            Some(n) => format!("{} ({n})", r.run_id),
            None => r.run_id.clone(),
        };
        let mut row = vec![
            run,
            command_text(&r.command, a.wide || width.is_some()),
            ago(now - r.ended_at),
            r.verdict_text().to_string(),
            o.signature.map(|s| s.as_str()).unwrap_or("").to_string(),
            o.phase.clone().unwrap_or_default(),
            o.ready_s.map(secs).unwrap_or_default(),
            secs(o.elapsed_s),
            where_(r),
            metrics_text(r),
        ];
        if cells {
            row.insert(
                1,
                r.cell.as_ref().map(|c| c.label.clone()).unwrap_or_default(),
            );
        }
        body.push(row);
    }
    let fit = Fit {
        whole: vec![0],
        elastic: Some(if cells { 2 } else { 1 }),
        wide: a.wide,
        ..Fit::default()
    };
    let header = header.into_iter().map(String::from).collect();
    println!("{}", fitted(header, body, &fit, width));
    Ok(0)
}

/// `firedup show RUN_ID`.
pub fn show(run_id: &str, json: bool) -> Result<i32> {
    let r = open()?.find(run_id)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(0);
    }
    let o = &r.outcome;
    let sig = o.signature.map(|s| format!(" ({s})")).unwrap_or_default();
    println!("{}: {}{sig}: {}", r.run_id, r.verdict_text(), o.reason);
    if let Some(n) = &r.name {
        println!("  name      {n}");
    }
    println!("  ended     {}", when(r.ended_at));
    println!("  command   {}", crate::secrets::shown_command(&r.command));
    for (k, v) in &r.env {
        println!("  env       {k}={v}");
    }
    println!("  where     {}", where_(&r));
    if let Some(node) = &o.node {
        let rank = o.rank.map(|r| format!(", rank {r}")).unwrap_or_default();
        println!("  cause on  {node}{rank}");
    }
    for n in o.nodes.iter().flatten() {
        println!("  node {:<4} {}", n.node_rank, node_text(n));
        let phases: Vec<String> = n
            .timeline
            .iter()
            .map(|p| format!("{} at {}", p.phase, secs(p.at_s)))
            .collect();
        if !phases.is_empty() {
            println!("            phases {}", phases.join(", "));
        }
    }
    if let Some(j) = &o.job {
        println!("  job       {}", job_text(j));
    }
    if let Some(p) = &r.profile {
        println!("  profile   {p}");
    }
    if let Some(c) = &r.cell {
        println!(
            "  matrix    {} cell {} (repeat {})",
            c.matrix_id,
            c.label,
            c.repeat + 1
        );
    }
    if let Some(l) = &o.line {
        println!("  line {:<5} {}", l.number, l.text);
    }
    if let Some(r) = o.ready_s {
        println!("  ready     after {}", secs(r));
    }
    println!("  elapsed   {}", secs(o.elapsed_s));
    let end = o.ready_s.unwrap_or(o.elapsed_s);
    for (phase, took) in phase_durations(&o.timeline, end)
        .into_iter()
        .filter(|(p, _)| p != "ready")
    {
        println!("  phase     {phase:<24} {}", secs(took));
    }
    for (k, v) in &r.metrics {
        println!("  metric    {k} = {v}");
    }
    if let Some(t) = &r.teardown {
        println!("  teardown  {t}");
    }
    println!("  log       {}", o.log);
    Ok(0)
}

/// `firedup compare RUN_A RUN_B`.
pub fn compare(a: &str, b: &str, json: bool, wide: bool) -> Result<i32> {
    let h = open()?;
    let (a, b) = (h.find(a)?, h.find(b)?);
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({"a": a, "b": b}))?
        );
        return Ok(0);
    }
    let mut t = CompareRows(Vec::new());
    let row = |t: &mut CompareRows, name: &str, x: String, y: String| {
        let mark = if x != y { " *" } else { "" };
        t.0.push(vec![format!("{name}{mark}"), x, y]);
    };
    let (oa, ob) = (&a.outcome, &b.outcome);
    row(
        &mut t,
        "verdict",
        oa.verdict.to_string(),
        ob.verdict.to_string(),
    );
    let sig = |r: &RunRecord| {
        r.outcome
            .signature
            .map(|s| s.to_string())
            .unwrap_or_default()
    };
    row(&mut t, "signature", sig(&a), sig(&b));
    row(
        &mut t,
        "phase reached",
        oa.phase.clone().unwrap_or_default(),
        ob.phase.clone().unwrap_or_default(),
    );
    let ready_ratio = match (oa.ready_s, ob.ready_s) {
        (Some(x), Some(y)) if x > 0.0 => format!(" ({:.2}x)", y / x),
        _ => String::new(),
    };
    t.0.push(vec![
        "ready after".to_string(),
        oa.ready_s.map(secs).unwrap_or_default(),
        format!("{}{ready_ratio}", ob.ready_s.map(secs).unwrap_or_default()),
    ]);
    t.0.push(vec![
        "elapsed".to_string(),
        secs(oa.elapsed_s),
        secs(ob.elapsed_s),
    ]);
    row(&mut t, "where", where_(&a), where_(&b));
    // The spec: what differs between the two launches.
    let cmd = |r: &RunRecord| crate::secrets::shown_command(&r.command);
    row(&mut t, "command", cmd(&a), cmd(&b));
    let keys: BTreeSet<&String> = a.env.keys().chain(b.env.keys()).collect();
    for k in keys {
        let v = |r: &RunRecord| r.env.get(k).cloned().unwrap_or_else(|| "(unset)".into());
        row(&mut t, &format!("env {k}"), v(&a), v(&b));
    }
    // The timeline: how long each phase took, phases in the order either run reached them.
    let da = phase_durations(&oa.timeline, oa.ready_s.unwrap_or(oa.elapsed_s));
    let db = phase_durations(&ob.timeline, ob.ready_s.unwrap_or(ob.elapsed_s));
    let mut phases: Vec<&String> = da.iter().map(|(p, _)| p).collect();
    for (p, _) in &db {
        if !phases.contains(&p) {
            phases.push(p);
        }
    }
    // Times always differ a little: they get B's ratio to A, not a difference mark.
    for p in phases.into_iter().filter(|p| *p != "ready") {
        let took = |d: &[(String, f64)]| d.iter().find(|(q, _)| q == p).map(|(_, s)| *s);
        let (x, y) = (took(&da), took(&db));
        let ratio = match (x, y) {
            (Some(x), Some(y)) if x > 0.0 => format!(" ({:.2}x)", y / x),
            _ => String::new(),
        };
        let shown = |v: Option<f64>| v.map(secs).unwrap_or_else(|| "-".into());
        t.0.push(vec![
            format!("phase {p}"),
            shown(x),
            format!("{}{ratio}", shown(y)),
        ]);
    }
    let metrics: BTreeSet<&String> = a.metrics.keys().chain(b.metrics.keys()).collect();
    for m in metrics {
        let v = |r: &RunRecord| r.metrics.get(m).map(|x| x.to_string()).unwrap_or_default();
        let ratio = match (a.metrics.get(m), b.metrics.get(m)) {
            (Some(x), Some(y)) if *x != 0.0 => format!(" ({:.2}x)", y / x),
            _ => String::new(),
        };
        row(
            &mut t,
            &format!("metric {m}"),
            v(&a),
            format!("{}{ratio}", v(&b)),
        );
    }
    let header = vec![String::new(), a.run_id.clone(), b.run_id.clone()];
    let fit = Fit {
        whole: vec![1, 2],
        whole_by_header: true,
        wide,
        ..Fit::default()
    };
    println!("{}", fitted(header, t.0, &fit, table_width()));
    println!("* differs");
    Ok(0)
}

/// The rows of `compare`'s table: a label, run A's value, run B's.
struct CompareRows(Vec<Vec<String>>);

/// `--since`: a duration ago, or an RFC 3339 time (a bare date is midnight UTC).
/// What a history row's verdict column can say: every verdict, and the two endings the history
/// records beside them. A name outside these would match nothing, silently.
const RECORDED_ENDINGS: [&str; 2] = ["interrupted", "owner_gone"];

fn check_verdict_name(name: &str) -> Result<()> {
    if crate::verdict::Verdict::from_name(name).is_some() || RECORDED_ENDINGS.contains(&name) {
        return Ok(());
    }
    let valid: Vec<&str> = crate::verdict::Verdict::ALL
        .iter()
        .map(|v| v.as_str())
        .chain(RECORDED_ENDINGS)
        .collect();
    bail!(
        "--verdict {name}: no such verdict; use one of {}",
        valid.join(", ")
    )
}

fn parse_since(s: &str) -> Result<f64> {
    if let Ok(d) = parse_duration(s) {
        return Ok(crate::rundir::now_unix() - d.as_secs_f64());
    }
    let full = if s.len() == 10 {
        format!("{s}T00:00:00Z")
    } else {
        s.to_string()
    };
    let t = humantime::parse_rfc3339_weak(&full)
        .with_context(|| format!("--since {s:?}: give a duration (2h) or a time (2026-12-01)"))?;
    Ok(t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0))
}

/// The command as a shell line, secrets redacted, cut to fit a table column.
/// The command as `history` shows it: whole with `--wide` or when the table is fitted to a width
/// (the fitting cuts it to what is left), else cut at 40 characters as it always was.
fn command_text(command: &[String], whole: bool) -> String {
    const WIDTH: usize = 40;
    let full = crate::secrets::shown_command(command);
    if whole || full.chars().count() <= WIDTH {
        return full;
    }
    let cut: String = full.chars().take(WIDTH - 1).collect();
    format!("{cut}…")
}

fn secs(s: f64) -> String {
    format_duration(Duration::from_secs_f64(s.max(0.0)))
}

fn ago(s: f64) -> String {
    if s < 1.0 {
        "just now".into()
    } else {
        format!("{} ago", format_duration(Duration::from_secs(s as u64)))
    }
}

fn when(unix: f64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs_f64(unix.max(0.0));
    humantime::format_rfc3339_seconds(t.min(SystemTime::now() + Duration::from_secs(86400 * 365)))
        .to_string()
}

/// Where the run ran: the SSH host or this machine, and a batch job's id.
fn where_(r: &RunRecord) -> String {
    let nodes = r.outcome.nodes.as_ref().map(|nodes| {
        let names: Vec<&str> = nodes.iter().map(|n| n.node.as_str()).collect();
        names.join(",")
    });
    let host = nodes
        .or_else(|| r.host.clone())
        .unwrap_or_else(|| "local".into());
    match &r.outcome.job {
        Some(j) => format!("{host}, {} job {}", j.scheduler, j.id),
        None => host,
    }
}

/// A node of a multi-node run in words: `node1: pid 12, exit code 1, phase load_weights, log
/// PATH`.
fn node_text(n: &crate::verdict::NodeReport) -> String {
    let pid = n.pid.map_or_else(|| "-".into(), |p| p.to_string());
    let exit = n
        .exit
        .as_ref()
        .map_or_else(|| "no exit".into(), |x| x.describe());
    let phase = n.phase.as_deref().unwrap_or("-");
    format!(
        "{}: pid {pid}, {exit}, phase {phase}, log {}",
        n.node, n.log
    )
}

/// A batch job in words: `slurm job 12: COMPLETED on node1,node2` (with its pending reason).
fn job_text(j: &crate::verdict::JobSummary) -> String {
    let mut text = format!("{} job {}: {}", j.scheduler, j.id, j.state);
    if !j.nodes.is_empty() {
        text.push_str(&format!(" on {}", j.nodes.join(",")));
    }
    if let Some(r) = &j.reason {
        text.push_str(&format!(" ({r})"));
    }
    text
}

fn metrics_text(r: &RunRecord) -> String {
    r.metrics
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests;
