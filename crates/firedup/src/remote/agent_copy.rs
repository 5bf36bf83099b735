//! Putting firedup on a host: which binary is copied, how it travels, and the one sentence a
//! host gets when that binary cannot run there.
//!
//! The binary copied is `$FIREDUP_REMOTE_BIN` when set (a portable build kept beside a developer
//! build), else the running firedup (a library launch: the firedup it would supervise with). The
//! portable build (README: `scripts/build-portable.sh`, also the binary inside the pip wheel) runs
//! from glibc 2.17; a developer `cargo build` needs this machine's glibc.
//!
//! One round trip learns the host's architecture, `$HOME`, whether this exact binary (version and
//! hash of its bytes in the name) is there already, whether `gzip` is, and the host's glibc. A host
//! of another architecture, or with an older glibc than the binary needs, is refused before
//! anything is sent, in one sentence saying what to do. Otherwise the binary is sent once,
//! gzip-compressed when the host has `gzip` (`gzip -dc` there), into
//! `~/.cache/firedup/bin/` (mode 0700, written to a temporary name and moved into place), and run
//! once (`--version`) before it is used.

use std::io::Write;
use std::path::PathBuf;

use openssh::Session;

use super::glibc_need::{GlibcVersion, binary_needs, host_glibc};
use super::shell::{first_line, run_sh};

/// The firedup binary to copy.
#[derive(Debug)]
struct LocalAgent {
    path: PathBuf,
    /// `firedup-VERSION-HASH`: a rebuilt firedup is copied again.
    name: String,
    bytes: Vec<u8>,
}

/// `$FIREDUP_REMOTE_BIN`, else this program when it is firedup (the command line), else the
/// binary a library launch would supervise with (a Rust test's own program is not firedup).
fn local_agent() -> Result<LocalAgent, String> {
    let path = match std::env::var_os("FIREDUP_REMOTE_BIN").filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => {
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot find firedup's own executable: {e}"))?;
            if exe.file_name() == Some("firedup".as_ref()) {
                exe
            } else {
                crate::firedup_bin::find_firedup(None).map_err(|e| e.to_string())?
            }
        }
    };
    let bytes = std::fs::read(&path).map_err(|e| {
        format!(
            "cannot read the firedup to copy to the host, {}: {e} (FIREDUP_REMOTE_BIN names it when set)",
            path.display()
        )
    })?;
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    bytes.hash(&mut h);
    Ok(LocalAgent {
        name: format!("firedup-{}-{:016x}", env!("CARGO_PKG_VERSION"), h.finish()),
        path,
        bytes,
    })
}

/// What the host said to the probe.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Probe {
    arch: String,
    home: String,
    present: bool,
    gzip: bool,
    glibc: Option<GlibcVersion>,
}

/// The probe: one line each for `uname -m`, `$HOME`, present/absent, gzip/nogzip, and the first
/// line of `getconf GNU_LIBC_VERSION` (or of `ldd --version`, or nothing).
fn probe_script(name: &str) -> String {
    format!(
        "uname -m; printf '%s\\n' \"$HOME\"; test -x \"$HOME/.cache/firedup/bin/{name}\" && echo present || echo absent; \
         command -v gzip >/dev/null 2>&1 && echo gzip || echo nogzip; \
         {{ getconf GNU_LIBC_VERSION || ldd --version; }} 2>/dev/null | head -n 1"
    )
}

fn parse_probe(stdout: &str) -> Probe {
    let mut lines = stdout.lines().map(str::trim);
    let mut next = || lines.next().unwrap_or("").to_string();
    Probe {
        arch: next(),
        home: next(),
        present: next() == "present",
        gzip: next() == "gzip",
        glibc: host_glibc(&next()),
    }
}

/// The sentence that refuses the copy, when the binary cannot run on the host: another
/// architecture, or a glibc older than the binary needs. `None` when it may run (an unknown
/// glibc is left to the `--version` check).
fn refusal(
    host: &str,
    probe: &Probe,
    local_arch: &str,
    binary: &str,
    needs: Option<GlibcVersion>,
) -> Option<String> {
    if probe.arch != local_arch {
        return Some(format!(
            "{host} is {} and this firedup is built for {local_arch}: install firedup on {host} (or run a firedup built for {})",
            probe.arch, probe.arch
        ));
    }
    match (probe.glibc, needs) {
        (Some(has), Some(needs)) if has < needs => Some(format!(
            "{host} has glibc {has} and {binary} needs glibc {needs}: {}",
            PORTABLE_HINT
        )),
        _ => None,
    }
}

/// What to do when the binary is too new for the host's C library.
const PORTABLE_HINT: &str = "use the portable firedup (runs from glibc 2.17): run the one the pip wheel installs, or build it with `bash scripts/build-portable.sh` and set FIREDUP_REMOTE_BIN=target/portable/firedup";

/// The binary as it travels: gzip-compressed when the host can decompress it. The fastest level:
/// measured on the 11 MB portable binary, level 1 gives 5.0 MB in 0.5 s, level 6 4.6 MB in 4.5 s
/// (gzip(1), a loaded 2-core machine); the copy is once per host and version.
fn payload(bytes: &[u8], gzip: bool) -> Result<Vec<u8>, String> {
    if !gzip {
        return Ok(bytes.to_vec());
    }
    let mut enc = flate2::write::GzEncoder::new(
        Vec::with_capacity(bytes.len() / 3),
        flate2::Compression::fast(),
    );
    enc.write_all(bytes)
        .and_then(|()| enc.finish())
        .map_err(|e| format!("cannot compress firedup for the copy: {e}"))
}

/// The shell script that writes stdin (gzip-compressed or not) to the cache under `name`.
fn copy_script(name: &str, gzip: bool) -> String {
    let write = if gzip { "gzip -dc" } else { "cat" };
    format!(
        "set -e; umask 077; mkdir -p \"$HOME/.cache/firedup/bin\"; t=\"$HOME/.cache/firedup/bin/.{name}.$$\"; {write} > \"$t\"; chmod 700 \"$t\"; mv -f \"$t\" \"$HOME/.cache/firedup/bin/{name}\""
    )
}

/// Copies firedup to the host's cache on first use; returns its remote path.
pub(super) async fn install_agent(session: &Session, host: &str) -> Result<String, String> {
    let agent = local_agent()?;
    let out = run_sh(session, &probe_script(&agent.name), None)
        .await
        .map_err(|e| format!("{host}: {e}"))?;
    if out.code != Some(0) && out.stdout.is_empty() {
        return Err(format!(
            "{host}: cannot run a shell command there ({}): firedup needs a POSIX sh on the host",
            first_line(&out.stderr)
        ));
    }
    let probe = parse_probe(&out.stdout);
    let binary = format!("the firedup to copy ({})", agent.path.display());
    if let Some(no) = refusal(
        host,
        &probe,
        std::env::consts::ARCH,
        &binary,
        binary_needs(&agent.bytes),
    ) {
        return Err(no);
    }
    let path = format!("{}/.cache/firedup/bin/{}", probe.home, agent.name);
    if !probe.present {
        let sent = payload(&agent.bytes, probe.gzip)?;
        let out = run_sh(session, &copy_script(&agent.name, probe.gzip), Some(&sent))
            .await
            .map_err(|e| format!("{host}: cannot copy firedup there: {e}"))?;
        if out.code != Some(0) {
            return Err(format!(
                "{host}: cannot copy firedup into ~/.cache/firedup/bin: {}",
                first_line(&out.stderr)
            ));
        }
    }
    let check = session
        .command(&path)
        .arg("--version")
        .output()
        .await
        .map_err(|e| format!("{host}: cannot run firedup there: {e}"))?;
    if !check.status.success() {
        let said = first_line(&String::from_utf8_lossy(&check.stderr));
        let what = if said.contains("GLIBC_") {
            PORTABLE_HINT.to_string()
        } else {
            format!("install firedup on {host}")
        };
        return Err(format!(
            "{host}: the copied firedup does not run there ({said}): {what}"
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(arch: &str, glibc: Option<GlibcVersion>) -> Probe {
        Probe {
            arch: arch.into(),
            home: "/home/u".into(),
            present: false,
            gzip: true,
            glibc,
        }
    }

    #[test]
    fn the_probe_answer_is_read_line_by_line() {
        for (stdout, want) in [
            (
                "x86_64\n/home/u\nabsent\ngzip\nglibc 2.31\n",
                Probe {
                    arch: "x86_64".into(),
                    home: "/home/u".into(),
                    present: false,
                    gzip: true,
                    glibc: Some(GlibcVersion(2, 31)),
                },
            ),
            (
                "aarch64\n/root\npresent\nnogzip\n",
                Probe {
                    arch: "aarch64".into(),
                    home: "/root".into(),
                    present: true,
                    gzip: false,
                    glibc: None,
                },
            ),
        ] {
            assert_eq!(parse_probe(stdout), want, "{stdout:?}");
        }
    }

    #[test]
    fn a_host_the_binary_cannot_run_on_gets_one_sentence_before_any_copy() {
        let v = |a, b| Some(GlibcVersion(a, b));
        for (p, needs, refused_with) in [
            (probe("x86_64", v(2, 31)), v(2, 17), None),
            (probe("x86_64", v(2, 31)), v(2, 31), None),
            (probe("x86_64", None), v(2, 34), None),
            (probe("x86_64", v(2, 31)), None, None),
            (
                probe("x86_64", v(2, 31)),
                v(2, 34),
                Some("gpu has glibc 2.31 and BIN needs glibc 2.34: use the portable firedup"),
            ),
            (
                probe("aarch64", v(2, 39)),
                v(2, 17),
                Some("gpu is aarch64 and this firedup is built for x86_64"),
            ),
        ] {
            let got = refusal("gpu", &p, "x86_64", "BIN", needs);
            match refused_with {
                None => assert_eq!(got, None),
                Some(start) => {
                    let got = got.expect("refused");
                    assert!(got.starts_with(start), "{got}");
                    assert_eq!(got.lines().count(), 1, "{got}");
                }
            }
        }
    }

    #[test]
    fn the_payload_is_gzip_when_the_host_has_gzip_and_decompresses_to_the_binary() {
        use std::io::Read;
        let bytes: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let gz = payload(&bytes, true).unwrap();
        assert!(gz.len() < bytes.len() / 4);
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_end(&mut back)
            .unwrap();
        assert_eq!(back, bytes);
        assert_eq!(payload(&bytes, false).unwrap(), bytes);
    }

    #[test]
    fn the_copy_decompresses_only_when_sent_compressed() {
        assert!(copy_script("firedup-x", true).contains("gzip -dc > \"$t\""));
        assert!(copy_script("firedup-x", false).contains("cat > \"$t\""));
    }
}
