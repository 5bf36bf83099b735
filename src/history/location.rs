//! Where the history database lives, and who may read it: `$FIREDUP_HISTORY`, else the state
//! dir, moved to `/var/tmp/firedup-UID/` when the state dir is on a network file system (SQLite
//! cannot lock there); the database and its `-wal`/`-shm` files are readable by their owner only.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// Where the database lives, or `None` when history is off.
pub fn database_path() -> Option<PathBuf> {
    match std::env::var_os("FIREDUP_HISTORY") {
        Some(v) if v == "off" || v == "0" => return None,
        Some(v) if !v.is_empty() => return Some(PathBuf::from(v)),
        _ => {}
    }
    let dir = crate::rundir::state_root();
    if let Some(fs) = network_fs(&dir) {
        let uid = rustix::process::getuid().as_raw();
        note_once(&format!(
            "the state dir {} is on {fs}, where SQLite cannot lock safely; history is kept in /var/tmp/firedup-{uid}",
            dir.display()
        ));
        return Some(PathBuf::from(format!(
            "/var/tmp/firedup-{uid}/history.sqlite"
        )));
    }
    Some(dir.join("history.sqlite"))
}

/// Notes about where history lives go to stderr once per process.
fn note_once(text: &str) {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| eprintln!("firedup: note: {text}"));
}

/// The network file system `dir` (or its nearest existing ancestor) is on, if any.
fn network_fs(dir: &Path) -> Option<&'static str> {
    let existing = dir.ancestors().find(|a| a.exists())?;
    let st = rustix::fs::statfs(existing).ok()?;
    // f_type magic numbers from statfs(2).
    const NETWORK: [(i64, &str); 9] = [
        (0x6969, "NFS"),
        (0x517b, "SMB"),
        (0xff53_4d42, "CIFS"),
        (0xfe53_4d42, "SMB2"),
        (0x0bd0_0bd0, "Lustre"),
        (0x4750_4653, "GPFS"),
        (0x00c3_6400, "CephFS"),
        (0x0102_1997, "9p"),
        (0x6573_5546, "FUSE"),
    ];
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    NETWORK.iter().find(|(m, _)| *m == magic).map(|(_, n)| *n)
}

/// Makes the database readable by its owner only: created 0600 before SQLite opens it (its
/// `-wal` and `-shm` files take the database's mode), and an older 0644 one of ours narrowed,
/// with its `-wal` and `-shm`: run history holds commands, paths and log lines.
pub(super) fn restrict_to_owner(db: &Path) -> Result<()> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(db)
    {
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        // Let SQLite say what is wrong with the path.
        Err(_) => return Ok(()),
    }
    let me = rustix::process::geteuid().as_raw();
    for suffix in ["", "-wal", "-shm"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let p = PathBuf::from(p);
        if let Ok(m) = std::fs::metadata(&p) {
            if m.is_file() && m.uid() == me && m.mode() & 0o077 != 0 {
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600))
                    .with_context(|| format!("cannot make {} private", p.display()))?;
            }
        }
    }
    Ok(())
}
