//! The run directory: one per run, mode 0700, under `$FIREDUP_STATE_DIR` or
//! `$XDG_STATE_HOME/firedup/runs` (default `~/.local/state/firedup/runs`).
//!
//! Files: `meta.json` (written by the launcher: command, cwd, redacted env overrides, log path,
//! profile, start time), `process.json` (written by the supervisor once the command runs: pid and
//! its start time, against pid reuse), `exit.json` (written by the supervisor when the command ends:
//! exit code or signal, core dump flag, end time; or the reason it could not start). Files are
//! written atomically (temp file + rename), so a reader never sees half of one.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

use crate::verdict::ExitInfo;

/// What the launcher records about a run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunMeta {
    pub run_id: String,
    pub command: Vec<String>,
    pub cwd: String,
    /// `--env` overrides, secret-looking values replaced by `<redacted>`.
    pub env: Vec<(String, String)>,
    pub log: String,
    pub profile: String,
    pub mode: String,
    /// Unix time in seconds.
    pub started_at: f64,
    pub firedup_version: String,
    /// The judging flags of the launch, so that `firedup watch RUN_ID` judges the same way.
    #[serde(default)]
    pub ready_lines: Vec<String>,
    #[serde(default)]
    pub fail_lines: Vec<String>,
    #[serde(default)]
    pub stall: Option<String>,
    #[serde(default)]
    pub timeout: Option<String>,
    /// All judging options of the launch (newer runs; the fields above stay for older readers).
    #[serde(default)]
    pub options: Option<crate::plan::WatchOptions>,
    /// The name a person gave the run (`run --name`).
    #[serde(default)]
    pub name: Option<String>,
}

/// What the supervisor records once the command runs.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct ProcessRecord {
    pub pid: u32,
    pub start_ticks: u64,
    pub supervisor_pid: u32,
}

/// What the supervisor records when the command ends (or could not start).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ExitRecord {
    #[serde(default)]
    pub exit: Option<ExitInfo>,
    #[serde(default)]
    pub spawn_error: Option<String>,
    pub ended_at: f64,
}

/// Where run directories live.
pub fn runs_root() -> PathBuf {
    state_root().join("runs")
}

/// firedup's state dir: `$FIREDUP_STATE_DIR`, else `$XDG_STATE_HOME/firedup`, else
/// `~/.local/state/firedup`.
pub fn state_root() -> PathBuf {
    if let Some(d) = std::env::var_os("FIREDUP_STATE_DIR") {
        return PathBuf::from(d);
    }
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("/tmp"));
            home.join(".local/state")
        });
    base.join("firedup")
}

/// A run directory.
#[derive(Debug, Clone)]
pub struct RunDir {
    pub id: String,
    pub path: PathBuf,
}

pub fn now_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

impl RunDir {
    /// Creates a fresh run directory named after the command.
    pub fn create(command: &[String]) -> Result<RunDir> {
        let root = runs_root();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&root)
            .with_context(|| format!("cannot create the state directory {}", root.display()))?;
        // Name the run after the server, not a wrapper in front of it.
        const WRAPPERS: [&str; 10] = [
            "setpriv", "runuser", "sudo", "env", "nohup", "numactl", "taskset", "nice", "stdbuf",
            "timeout",
        ];
        let program = command
            .iter()
            .map(|c| {
                Path::new(c)
                    .file_name()
                    .map(|f| f.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
            .find(|c| {
                !c.starts_with('-')
                    && !c.contains('=')
                    && !WRAPPERS.contains(&c.as_str())
                    && !c.is_empty()
                    && !c.chars().all(|ch| ch.is_ascii_digit())
            });
        let stem: String = program
            .or_else(|| command.first().cloned())
            .unwrap_or_default()
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .take(24)
            .collect();
        let stem = if stem.is_empty() {
            "run".to_string()
        } else {
            stem
        };
        for attempt in 0..100u64 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let mix =
                (nanos ^ ((std::process::id() as u64) << 20) ^ attempt.wrapping_mul(0x9e37_79b9))
                    .wrapping_mul(0x2545_f491_4f6c_dd1d);
            let id = format!("{stem}-{:06x}", (mix >> 40) & 0xff_ffff);
            let path = root.join(&id);
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
                    return Ok(RunDir { id, path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| {
                        format!("cannot create run directory {}", path.display())
                    });
                }
            }
        }
        bail!("cannot find a free run id under {}", root.display())
    }

    /// Opens an existing run by id.
    pub fn open(id: &str) -> Result<RunDir> {
        if id.is_empty() || id.contains('/') || id.starts_with('.') {
            bail!("'{id}' is not a run id: see `firedup ps` for the runs there are");
        }
        let path = runs_root().join(id);
        if !path.join("meta.json").is_file() {
            bail!(
                "no run '{id}' under {}: see `firedup ps` for the runs there are",
                runs_root().display()
            );
        }
        Ok(RunDir {
            id: id.to_string(),
            path,
        })
    }

    /// Every run, newest first.
    pub fn list() -> Vec<RunDir> {
        let root = runs_root();
        let Ok(rd) = fs::read_dir(&root) else {
            return Vec::new();
        };
        let mut runs: Vec<(f64, RunDir)> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let id = e.file_name().to_string_lossy().into_owned();
                let run = RunDir { id, path: e.path() };
                let meta = run.meta().ok()?;
                Some((meta.started_at, run))
            })
            .collect();
        runs.sort_by(|a, b| b.0.total_cmp(&a.0));
        runs.into_iter().map(|(_, r)| r).collect()
    }

    pub fn meta(&self) -> Result<RunMeta> {
        read_json(&self.path.join("meta.json"))
    }
    pub fn write_meta(&self, meta: &RunMeta) -> Result<()> {
        write_json(&self.path.join("meta.json"), meta)
    }
    pub fn process(&self) -> Option<ProcessRecord> {
        read_json(&self.path.join("process.json")).ok()
    }
    pub fn write_process(&self, rec: &ProcessRecord) -> Result<()> {
        write_json(&self.path.join("process.json"), rec)
    }
    pub fn exit(&self) -> Option<ExitRecord> {
        read_json(&self.path.join("exit.json")).ok()
    }
    pub fn write_exit(&self, rec: &ExitRecord) -> Result<()> {
        write_json(&self.path.join("exit.json"), rec)
    }
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T> {
    let text =
        fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid", path.display()))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    {
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .with_context(|| format!("cannot write {}", tmp.display()))?;
        f.write_all(serde_json::to_string_pretty(value)?.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_data().ok();
    }
    fs::rename(&tmp, path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
