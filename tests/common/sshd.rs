//! A real `sshd` for the remote tests, and a real network link whose faults the tests control.
//!
//! `Sshd::start()` runs `/usr/sbin/sshd -D` on 127.0.0.1 with its own host key, client key,
//! `authorized_keys` and `known_hosts` in a temp dir, and writes an ssh client config in which
//! the host `fdtest` reaches it: `ssh -F sshd.config_path() fdtest cmd`.
//!
//! `NetLink::new()` makes a network namespace joined to the root namespace by a veth pair on a
//! private /30; `Sshd::start_in(&link)` runs sshd inside it, on the namespace's address, so that
//! `link.freeze()` (every packet silently dropped, both ways: no RST, no FIN, like a frozen
//! network), `link.thaw()` and `link.add_latency(ms)` act on the real TCP connection. Latency is
//! split evenly between the two directions (a round trip gains `ms`): netem qdiscs on both veth
//! ends where the kernel has sch_netem; where it has not (this VM and CI: no netem, no loadable
//! modules), the traffic is routed over a tun pair joined by a delay line in the test process
//! (see `add_latency`). `freeze` needs only the `blackhole` qdisc, built into every
//! kernel with traffic control.
//!
//! Everything is torn down on Drop (processes killed, namespace and veth deleted, temp dir
//! removed), also when the test panics.
//!
//! Observed behaviour worth knowing (OpenSSH 9.2, Debian 12):
//! - `stop()` sends SIGTERM to the listening sshd only. Its per-connection children (one per
//!   established connection, e.g. a ControlMaster's) are not killed: they keep serving their
//!   sessions, like `systemctl restart ssh` on a real host. Drop kills them all: sshd's processes are found by
//!   their open `sshd.log` (-E), the users' commands by `FDT_SSHD_TAG` in their environment
//!   (`SetEnv`); sshd's own environment is overwritten by its setproctitle.
//! - The per-connection sshd calls setsid(), and so do the users' commands (each its own
//!   session): none of them is in the test's or the listener's process group.
//! - The sessions skip the login user's `~/.bashrc` (`SHLVL=1`: bash sources it for an sshd
//!   command only as a top-level shell). Root's rc on this VM and CI runs `pyenv init`, whose
//!   rehash takes a lock file: a session killed mid-rc (Drop kills every tagged process) left it
//!   behind, and every later session then waited 60 s for it, failing whole test binaries. The
//!   developer's dotfiles are not under test; a slow login shell is, on purpose, in
//!   tests/remote.rs (`ForceCommand`).
//! - A frozen link is noticed by ssh only through its own keepalives: with
//!   `ServerAliveInterval=1 ServerAliveCountMax=2` ssh exits 255 with "Timeout, server ... not
//!   responding" 2.2-2.3 s after the freeze; without them it hangs. A new connection during the
//!   freeze ends in "Connection timed out" (ConnectTimeout), never "refused".
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

pub const SSHD: &str = "/usr/sbin/sshd";
const HOST_ALIAS: &str = "fdtest";
/// sshd's port inside a namespace (which has nothing else listening).
const NETNS_PORT: u16 = 2222;

/// The output of a command run with a bound on its duration.
#[derive(Debug)]
pub struct Bounded {
    /// None when it was killed at the deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub took: Duration,
}

impl Bounded {
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }
    pub fn timed_out(&self) -> bool {
        self.status.is_none()
    }
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }
    pub fn explain(&self) -> String {
        format!(
            "status {:?} after {:?}\nstdout: {}\nstderr: {}",
            self.status, self.took, self.stdout, self.stderr
        )
    }
}

fn drain<R: Read + Send + 'static>(r: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut r) = r {
            let _ = r.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// Runs `cmd` (stdin null, stdout and stderr captured), killing it after `limit`.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Bounded {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = wait_bounded(&mut child, limit);
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    // A grandchild may hold the pipes open after the kill: don't wait for it forever.
    let join = |h: std::thread::JoinHandle<String>| {
        let deadline = Instant::now() + Duration::from_secs(2);
        while !h.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if h.is_finished() {
            h.join().unwrap_or_default()
        } else {
            "<output still open>".to_string()
        }
    };
    Bounded {
        status,
        stdout: join(out),
        stderr: join(err),
        took: started.elapsed(),
    }
}

/// Waits for `child` at most `limit`; None when it is still running.
pub fn wait_bounded(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs a setup command that must succeed (bounded at 10 s); panics with its output otherwise.
fn must(args: &[&str]) -> String {
    let r = run_bounded(
        Command::new(args[0]).args(&args[1..]),
        Duration::from_secs(10),
    );
    assert!(r.ok(), "{args:?} failed: {}", r.explain());
    r.stdout
}

fn current_user() -> String {
    must(&["id", "-un"]).trim().to_string()
}

fn keygen(path: &Path) -> String {
    let p = path.to_str().unwrap();
    must(&[
        "ssh-keygen",
        "-q",
        "-t",
        "ed25519",
        "-N",
        "",
        "-C",
        "fdtest",
        "-f",
        p,
    ]);
    let pubkey = std::fs::read_to_string(format!("{p}.pub")).unwrap();
    pubkey.trim().to_string()
}

fn known_hosts_line(addr: &str, port: u16, host_pub: &str) -> String {
    // "ed25519-type base64 comment" -> "[addr]:port type base64"
    let mut it = host_pub.split_whitespace();
    let (kind, key) = (it.next().unwrap(), it.next().unwrap());
    if port == 22 {
        format!("{addr} {kind} {key}\n")
    } else {
        format!("[{addr}]:{port} {kind} {key}\n")
    }
}

/// Processes with `FDT_SSHD_TAG=tag` in their environment (the listener as started, the users'
/// commands via `SetEnv`), or with `log` open (sshd's processes: their setproctitle overwrites
/// the environment).
fn pids_tagged(tag: &str, log: &Path) -> Vec<i32> {
    let needle = format!("FDT_SSHD_TAG={tag}");
    let mut pids = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let tagged = std::fs::read(format!("/proc/{pid}/environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == needle.as_bytes()));
        let logs = || {
            std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
                fds.flatten()
                    .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|t| t == log))
            })
        };
        if tagged || logs() {
            pids.push(pid);
        }
    }
    pids
}

fn signal(pid: i32, sig: i32) {
    // SAFETY: kill(2) has no memory-safety preconditions.
    unsafe {
        libc::kill(pid, sig);
    }
}

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A running sshd (see the module doc).
#[derive(Debug)]
pub struct Sshd {
    dir: tempfile::TempDir,
    addr: String,
    port: u16,
    netns: Option<String>,
    user: String,
    tag: String,
    /// More `NAME=VALUE`s for the sessions' environment (sshd's `SetEnv`).
    set_env: String,
    child: Option<Child>,
}

impl Sshd {
    /// sshd on 127.0.0.1, a free port.
    pub fn start() -> Sshd {
        Sshd::start_with("")
    }

    /// sshd inside `link`'s namespace, on its address.
    pub fn start_in(link: &NetLink) -> Sshd {
        Sshd::start_in_with(link, "")
    }

    /// Like `start`, with `extra` sshd_config lines placed first (sshd takes the first value of
    /// a keyword, so these override the harness's own settings).
    pub fn start_with(extra: &str) -> Sshd {
        Sshd::new(None, "127.0.0.1".to_string(), extra, &[])
    }

    /// Like `start`, the sessions' environment also holding `vars` (as a login node's has, say,
    /// `SLURM_CONF`).
    pub fn start_with_env(vars: &[(&str, &str)]) -> Sshd {
        Sshd::new(None, "127.0.0.1".to_string(), "", vars)
    }

    pub fn start_in_with(link: &NetLink, extra: &str) -> Sshd {
        Sshd::new(Some(link.ns.clone()), link.server_addr(), extra, &[])
    }

    fn new(netns: Option<String>, addr: String, extra: &str, vars: &[(&str, &str)]) -> Sshd {
        assert!(
            Path::new(SSHD).exists(),
            "{SSHD} is missing: install openssh-server (see .ci/run)"
        );
        // sshd refuses to start without its privilege separation directory.
        std::fs::create_dir_all("/run/sshd").ok();
        let dir = tempfile::Builder::new()
            .prefix("fdt-sshd-")
            .tempdir()
            .unwrap();
        let host_pub = keygen(&dir.path().join("host_ed25519"));
        let client_pub = keygen(&dir.path().join("client_ed25519"));
        std::fs::write(
            dir.path().join("authorized_keys"),
            format!("{client_pub}\n"),
        )
        .unwrap();
        let tag = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let mut s = Sshd {
            dir,
            addr,
            port: 0,
            netns,
            user: current_user(),
            tag,
            set_env: vars.iter().map(|(k, v)| format!(" {k}={v}")).collect(),
            child: None,
        };
        // On loopback the free port found may be taken before sshd binds it: retry then.
        let mut last = String::new();
        for _ in 0..5 {
            s.port = match s.netns {
                Some(_) => NETNS_PORT,
                None => free_port(),
            };
            s.write_configs(&host_pub, extra);
            match s.spawn_and_wait() {
                Ok(()) => return s,
                Err(e) => {
                    s.kill_all();
                    let in_use = e.contains("Address already in use");
                    last = e;
                    if !in_use || s.netns.is_some() {
                        break;
                    }
                }
            }
        }
        panic!("sshd did not start: {last}");
    }

    fn write_configs(&self, host_pub: &str, extra: &str) {
        let d = self.dir.path().display();
        let penalties = if per_source_penalties_supported() {
            // OpenSSH >= 9.8 would otherwise refuse 127.0.0.1 for a while after a failed
            // authentication (the no-key tests make some on purpose).
            "PerSourcePenalties no\n"
        } else {
            ""
        };
        let sshd_config = format!(
            "{extra}\n\
             Port {port}\n\
             ListenAddress {addr}\n\
             HostKey {d}/host_ed25519\n\
             PidFile {d}/sshd.pid\n\
             StrictModes no\n\
             UsePAM no\n\
             PubkeyAuthentication yes\n\
             PasswordAuthentication no\n\
             KbdInteractiveAuthentication no\n\
             AuthenticationMethods publickey\n\
             AuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin yes\n\
             ClientAliveInterval 5\n\
             ClientAliveCountMax 3\n\
             MaxSessions 50\n\
             MaxStartups 50\n\
             MaxAuthTries 10\n\
             LoginGraceTime 30\n\
             AllowTcpForwarding yes\n\
             AllowStreamLocalForwarding yes\n\
             X11Forwarding no\n\
             PrintMotd no\n\
             PrintLastLog no\n\
             UseDNS no\n\
             SetEnv FDT_SSHD_TAG={tag} SHLVL=1{set_env}\n\
             {penalties}\
             LogLevel VERBOSE\n",
            port = self.port,
            addr = self.addr,
            tag = self.tag,
            set_env = self.set_env,
        );
        std::fs::write(self.dir.path().join("sshd_config"), sshd_config).unwrap();
        std::fs::write(
            self.dir.path().join("known_hosts"),
            known_hosts_line(&self.addr, self.port, host_pub),
        )
        .unwrap();
        self.write_client_config("ssh_config", "known_hosts", "client_ed25519");
    }

    fn write_client_config(&self, name: &str, known_hosts: &str, identity: &str) -> PathBuf {
        let d = self.dir.path().display();
        let cfg = format!(
            "Host {HOST_ALIAS}\n\
             \x20 HostName {addr}\n\
             \x20 Port {port}\n\
             \x20 User {user}\n\
             \x20 IdentityFile {d}/{identity}\n\
             \x20 IdentitiesOnly yes\n\
             \x20 UserKnownHostsFile {d}/{known_hosts}\n\
             \x20 GlobalKnownHostsFile /dev/null\n\
             \x20 StrictHostKeyChecking yes\n\
             \x20 UpdateHostKeys no\n\
             \x20 CheckHostIP no\n\
             \x20 BatchMode yes\n\
             \x20 ConnectTimeout 5\n",
            addr = self.addr,
            port = self.port,
            user = self.user,
        );
        let p = self.dir.path().join(name);
        std::fs::write(&p, cfg).unwrap();
        p
    }

    fn spawn_and_wait(&mut self) -> Result<(), String> {
        let d = self.dir.path();
        let mut cmd = match &self.netns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns, SSHD]);
                c
            }
            None => Command::new(SSHD),
        };
        cmd.arg("-D")
            .arg("-f")
            .arg(d.join("sshd_config"))
            .arg("-E")
            .arg(d.join("sshd.log"))
            .env("FDT_SSHD_TAG", &self.tag)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = cmd.spawn().map_err(|e| format!("cannot run {SSHD}: {e}"))?;
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(5);
        let sa: SocketAddr = format!("{}:{}", self.addr, self.port).parse().unwrap();
        loop {
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("sshd exited ({st}); log:\n{}", self.log_text()));
            }
            if TcpStream::connect_timeout(&sa, Duration::from_millis(200)).is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "sshd not listening on {sa} after 5 s; log:\n{}",
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = run_bounded(
            self.ssh().args([HOST_ALIAS, "true"]),
            Duration::from_secs(10),
        );
        if !r.ok() {
            return Err(format!(
                "`ssh -F {} {HOST_ALIAS} true` failed: {}\nsshd log:\n{}",
                self.config_path().display(),
                r.explain(),
                self.log_text()
            ));
        }
        Ok(())
    }

    /// The ssh client config in which `host_alias()` reaches this sshd.
    pub fn config_path(&self) -> PathBuf {
        self.dir.path().join("ssh_config")
    }

    pub fn host_alias(&self) -> &'static str {
        HOST_ALIAS
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The address sshd listens on (127.0.0.1, or the namespace's address).
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// sshd's log (LogLevel VERBOSE).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `ssh -F config_path()`: add options, the host alias and the command.
    pub fn ssh(&self) -> Command {
        let mut c = Command::new("ssh");
        c.arg("-F").arg(self.config_path());
        c
    }

    /// `ssh -F config_path() fdtest ARGS...`, bounded by `limit`.
    pub fn run(&self, args: &[&str], limit: Duration) -> Bounded {
        run_bounded(self.ssh().arg(HOST_ALIAS).args(args), limit)
    }

    /// A client config whose known_hosts holds another key for this host: ssh fails with
    /// "Host key verification failed.".
    pub fn config_with_wrong_host_key(&self) -> PathBuf {
        let other = keygen(&self.fresh_path("other_host_ed25519"));
        let kh = self.fresh_name("known_hosts_wrong");
        std::fs::write(
            self.dir.path().join(&kh),
            known_hosts_line(&self.addr, self.port, &other),
        )
        .unwrap();
        self.write_client_config(
            &self.fresh_name("ssh_config_wrong_host_key"),
            &kh,
            "client_ed25519",
        )
    }

    /// A client config whose identity is not in authorized_keys: ssh fails with
    /// "Permission denied (publickey).".
    pub fn config_without_client_key(&self) -> PathBuf {
        let id = self.fresh_name("stranger_ed25519");
        keygen(&self.dir.path().join(&id));
        self.write_client_config(&self.fresh_name("ssh_config_no_key"), "known_hosts", &id)
    }

    fn fresh_name(&self, base: &str) -> String {
        let n = SEQ.fetch_add(1, Ordering::SeqCst);
        format!("{base}.{n}")
    }

    fn fresh_path(&self, base: &str) -> PathBuf {
        self.dir.path().join(self.fresh_name(base))
    }

    /// The listening sshd's pid (None when stopped). In a namespace it is `ip netns exec`'s,
    /// which execs sshd, so the same process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// The pids of this sshd's processes: the listener, the per-connection sshd processes and
    /// the users' commands.
    pub fn pids(&self) -> Vec<i32> {
        pids_tagged(&self.tag, &self.dir.path().join("sshd.log"))
    }

    /// SIGTERM to the listening sshd, and waits (5 s, then SIGKILL) for it to exit. Established
    /// connections are kept (see the module doc).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            signal(c.id() as i32, libc::SIGTERM);
            if wait_bounded(&mut c, Duration::from_secs(5)).is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Starts it again, with the same keys, port and configs.
    pub fn restart(&mut self) {
        self.stop();
        // The old listener's port is free once it exited (sshd sets SO_REUSEADDR, so the
        // connections kept from before don't block it).
        if let Err(e) = self.spawn_and_wait() {
            self.kill_all();
            panic!("sshd did not restart: {e}");
        }
    }

    /// Kills every process of this sshd (listener, connections, users' commands).
    pub fn kill_all(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for _ in 0..3 {
            let pids = self.pids();
            if pids.is_empty() {
                break;
            }
            for p in pids {
                signal(p, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        self.kill_all();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn per_source_penalties_supported() -> bool {
    static SUPPORTED: Mutex<Option<bool>> = Mutex::new(None);
    let mut g = SUPPORTED.lock().unwrap();
    *g.get_or_insert_with(|| {
        // `sshd -T` needs a host key; -G only parses (OpenSSH >= 9.?); use -t with a key.
        let d = tempfile::tempdir().unwrap();
        keygen(&d.path().join("k"));
        let cfg = d.path().join("c");
        std::fs::write(
            &cfg,
            format!("HostKey {}/k\nPerSourcePenalties no\n", d.path().display()),
        )
        .unwrap();
        run_bounded(
            Command::new(SSHD).arg("-t").arg("-f").arg(&cfg),
            Duration::from_secs(10),
        )
        .ok()
    })
}

// ---------------------------------------------------------------------------------------------
// The link.

/// Whether this process may create network namespaces (root with CAP_NET_ADMIN, iproute2).
/// Checked once by creating and deleting one.
pub fn netns_available() -> Result<(), String> {
    static CHECKED: Mutex<Option<Result<(), String>>> = Mutex::new(None);
    let mut g = CHECKED.lock().unwrap();
    g.get_or_insert_with(|| {
        let name = format!("fdt-{}-probe", std::process::id());
        let r = run_bounded(
            Command::new("ip").args(["netns", "add", &name]),
            Duration::from_secs(10),
        );
        if !r.ok() {
            return Err(format!(
                "cannot create a network namespace (`ip netns add`: {}): needs root with \
                 CAP_NET_ADMIN and iproute2",
                r.stderr.trim()
            ));
        }
        let _ = run_bounded(
            Command::new("ip").args(["netns", "del", &name]),
            Duration::from_secs(10),
        );
        Ok(())
    })
    .clone()
}

/// For tests that need a `NetLink`: prints `SKIP: ...` and returns false when namespaces can't
/// be made here. Use: `if !sshd::netns_or_skip("test name") { return; }`.
pub fn netns_or_skip(test: &str) -> bool {
    match netns_available() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("SKIP: {test}: {e}");
            println!("SKIP: {test}: {e}");
            false
        }
    }
}

static LINKS: AtomicU32 = AtomicU32::new(0);

/// A network namespace joined to the root namespace by a veth pair (see the module doc).
#[derive(Debug)]
pub struct NetLink {
    ns: String,
    /// The veth end in the root namespace, and the one in `ns`.
    root_dev: String,
    ns_dev: String,
    root_addr: String,
    ns_addr: String,
    state: Mutex<LinkState>,
}

#[derive(Debug, Default)]
struct LinkState {
    frozen: bool,
    latency_ms: u32,
    /// The userspace delay line used for latency where netem is missing.
    delayer: Option<Delayer>,
}

impl NetLink {
    /// Creates the namespace `fdt-<pid>-<n>` and the veth pair `fdt<pid>x<n>a|b` on a free /30 in
    /// 10.213.0.0/16. Panics when that fails (call `netns_or_skip` first to skip instead).
    pub fn new() -> NetLink {
        if let Err(e) = netns_available() {
            panic!("{e}");
        }
        sweep_stale();
        let pid = std::process::id();
        let n = LINKS.fetch_add(1, Ordering::SeqCst);
        let ns = format!("fdt-{pid}-{n}");
        let root_dev = format!("fdt{pid}x{n}a");
        let ns_dev = format!("fdt{pid}x{n}b");
        assert!(root_dev.len() <= 15, "interface name too long: {root_dev}");
        let (root_addr, ns_addr) = free_subnet(pid, n);
        // Built as it goes, so that a failure half way is cleaned up by Drop.
        let link = NetLink {
            ns: ns.clone(),
            root_dev: root_dev.clone(),
            ns_dev: ns_dev.clone(),
            root_addr: root_addr.clone(),
            ns_addr: ns_addr.clone(),
            state: Mutex::new(LinkState::default()),
        };
        must(&["ip", "netns", "add", &ns]);
        #[rustfmt::skip]
        must(&["ip", "link", "add", &root_dev, "type", "veth", "peer", "name", &ns_dev, "netns", &ns]);
        must(&[
            "ip",
            "addr",
            "add",
            &format!("{root_addr}/30"),
            "dev",
            &root_dev,
        ]);
        must(&["ip", "link", "set", &root_dev, "up"]);
        let nsx = |args: &[&str]| {
            let mut v = vec!["ip", "netns", "exec", &ns];
            v.extend_from_slice(args);
            must(&v);
        };
        nsx(&[
            "ip",
            "addr",
            "add",
            &format!("{ns_addr}/30"),
            "dev",
            &ns_dev,
        ]);
        nsx(&["ip", "link", "set", &ns_dev, "up"]);
        nsx(&["ip", "link", "set", "lo", "up"]);
        // Wait (bounded) until the namespace's address answers: veth carrier and DAD done.
        let deadline = Instant::now() + Duration::from_secs(5);
        let sa: SocketAddr = format!("{ns_addr}:9").parse().unwrap();
        loop {
            // A closed port answers RST: ConnectionRefused means the path works.
            match TcpStream::connect_timeout(&sa, Duration::from_millis(200)) {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => break,
                Ok(_) => break,
                Err(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) => panic!("{ns_addr} unreachable over {root_dev}: {e}"),
            }
        }
        link
    }

    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// The namespace's address (where `Sshd::start_in` listens).
    pub fn server_addr(&self) -> String {
        self.ns_addr.clone()
    }

    /// The root namespace's address on the link (the client's source address).
    pub fn client_addr(&self) -> String {
        self.root_addr.clone()
    }

    /// Every packet on the link silently dropped, both ways (a `blackhole` qdisc on both veth
    /// ends): TCP sees neither RST nor FIN, only silence.
    pub fn freeze(&self) {
        self.state.lock().unwrap().frozen = true;
        self.apply();
    }

    /// Undoes `freeze` (the latency, if any, stays).
    pub fn thaw(&self) {
        self.state.lock().unwrap().frozen = false;
        self.apply();
    }

    /// Adds `ms` to the link's round trip: the packets of each direction are delayed by `ms / 2`
    /// (so a stream from the server, such as a log line, arrives `ms / 2` later, and a request's
    /// answer `ms` later). With netem (`latency_supported()`): a netem qdisc on each veth end's
    /// egress. Without it (kernels without sch_netem, e.g. the CI VM): the
    /// traffic between the two addresses is routed (/32 routes) over a pair of tun devices, one
    /// in each namespace, joined by a delay line in this process; the TCP connections already
    /// established move over to it. `FDT_LATENCY=tun` forces the latter.
    pub fn add_latency(&self, ms: u32) {
        self.state.lock().unwrap().latency_ms += ms;
        self.apply();
    }

    pub fn clear_latency(&self) {
        self.state.lock().unwrap().latency_ms = 0;
        self.apply();
    }

    /// Whether the link still delays packets, asked of the system (not of this struct): a netem
    /// qdisc on a veth end, or the delay line's /32 route.
    pub fn delay_in_place(&self) -> bool {
        let out = |args: &[&str]| {
            run_bounded(
                Command::new(args[0]).args(&args[1..]),
                Duration::from_secs(10),
            )
            .stdout
        };
        let qdisc_root = out(&["tc", "qdisc", "show", "dev", &self.root_dev]);
        #[rustfmt::skip]
        let qdisc_ns = out(&["ip", "netns", "exec", &self.ns, "tc", "qdisc", "show", "dev", &self.ns_dev]);
        let route = out(&["ip", "route", "show", &format!("{}/32", self.ns_addr)]);
        qdisc_root.contains("netem") || qdisc_ns.contains("netem") || !route.trim().is_empty()
    }

    fn apply(&self) {
        let mut st = self.state.lock().unwrap();
        let ns = self.ns.as_str();
        let netem = latency_supported() && std::env::var("FDT_LATENCY").as_deref() != Ok("tun");
        let mut root_q: Vec<String> = vec![];
        let mut ns_q: Vec<String> = vec![];
        if st.frozen {
            root_q = vec!["blackhole".into()];
            ns_q = vec!["blackhole".into()];
        } else if st.latency_ms > 0 && netem {
            let d = format!("{}us", one_way_us(st.latency_ms));
            root_q = ["netem", "delay", &d, "limit", "100000"]
                .map(String::from)
                .to_vec();
            ns_q = root_q.clone();
        }
        if netem || st.latency_ms == 0 {
            if let Some(d) = st.delayer.take() {
                // Routes first, so that no packet goes to a closed tun.
                self.delayer_routes(&d, false);
                drop(d);
            }
        } else {
            if st.delayer.is_none() {
                let d = Delayer::new(
                    &self.ns,
                    &format!("{}c", &self.root_dev[..self.root_dev.len() - 1]),
                    &format!("{}d", &self.root_dev[..self.root_dev.len() - 1]),
                );
                self.delayer_routes(&d, true);
                st.delayer = Some(d);
            }
            let d = st.delayer.as_ref().unwrap();
            d.shared
                .one_way_us
                .store(one_way_us(st.latency_ms), Ordering::SeqCst);
        }
        if let Some(d) = &st.delayer {
            d.shared.frozen.store(st.frozen, Ordering::SeqCst);
        }
        let set = |prefix: &[&str], dev: &str, q: &[String]| {
            let mut del: Vec<&str> = prefix.to_vec();
            del.extend(["tc", "qdisc", "del", "dev", dev, "root"]);
            if q.is_empty() {
                // Fails harmlessly when there is none.
                let _ = run_bounded(
                    Command::new(del[0]).args(&del[1..]),
                    Duration::from_secs(10),
                );
            } else {
                let mut add: Vec<&str> = prefix.to_vec();
                add.extend(["tc", "qdisc", "replace", "dev", dev, "root"]);
                add.extend(q.iter().map(|s| s.as_str()));
                must(&add);
            }
        };
        set(&[], &self.root_dev, &root_q);
        set(&["ip", "netns", "exec", ns], &self.ns_dev, &ns_q);
    }

    /// Adds (or deletes) the /32 routes that send the traffic between the two addresses over
    /// the delayer's tun devices instead of the veth.
    fn delayer_routes(&self, d: &Delayer, add: bool) {
        let verb = if add { "add" } else { "del" };
        let (ra, na) = (
            format!("{}/32", self.ns_addr),
            format!("{}/32", self.root_addr),
        );
        let root = [
            "ip",
            "route",
            verb,
            &ra,
            "dev",
            &d.root_dev,
            "src",
            &self.root_addr,
        ];
        let ns = [
            "ip",
            "netns",
            "exec",
            &self.ns,
            "ip",
            "route",
            verb,
            &na,
            "dev",
            &d.ns_dev,
            "src",
            &self.ns_addr,
        ];
        if add {
            must(&root);
            must(&ns);
        } else {
            let _ = run_bounded(
                Command::new(root[0]).args(&root[1..]),
                Duration::from_secs(10),
            );
            let _ = run_bounded(Command::new(ns[0]).args(&ns[1..]), Duration::from_secs(10));
        }
    }
}

/// Half of a round trip's added latency, in microseconds: what each direction is delayed by.
fn one_way_us(round_trip_ms: u32) -> u32 {
    round_trip_ms * 1000 / 2
}

/// A delay line between two tun devices: `root_dev` in the root namespace and `ns_dev` in the
/// link's namespace. Packets read from either device are written into the other `one_way_us`
/// later (each direction has its own pump, so the two ways do not queue behind each other).
/// Frozen: all dropped. The devices belong to this process's file descriptors: they go with it.
#[derive(Debug)]
struct Delayer {
    root_dev: String,
    ns_dev: String,
    shared: std::sync::Arc<DelayShared>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

#[derive(Debug, Default)]
struct DelayShared {
    one_way_us: AtomicU32,
    frozen: std::sync::atomic::AtomicBool,
    stop: std::sync::atomic::AtomicBool,
}

fn tun_open(name: &str) -> std::fs::File {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct IfReq {
        name: [u8; 16],
        flags: libc::c_short,
        _pad: [u8; 22],
    }
    const TUNSETIFF: libc::c_ulong = 0x400454ca;
    const IFF_TUN: libc::c_short = 0x0001;
    const IFF_NO_PI: libc::c_short = 0x1000;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/net/tun")
        .unwrap_or_else(|e| panic!("/dev/net/tun: {e}"));
    let mut req = IfReq {
        name: [0; 16],
        flags: IFF_TUN | IFF_NO_PI,
        _pad: [0; 22],
    };
    assert!(name.len() < 16);
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: TUNSETIFF reads and writes a struct ifreq, which IfReq lays out.
    let r = unsafe { libc::ioctl(f.as_raw_fd(), TUNSETIFF as _, &mut req as *mut IfReq) };
    assert!(
        r == 0,
        "TUNSETIFF {name}: {}",
        std::io::Error::last_os_error()
    );
    f
}

impl Delayer {
    fn new(ns: &str, root_dev: &str, ns_dev: &str) -> Delayer {
        let a = tun_open(root_dev);
        let b = tun_open(ns_dev);
        must(&["ip", "link", "set", "dev", ns_dev, "netns", ns]);
        must(&["ip", "link", "set", "dev", root_dev, "up"]);
        must(&[
            "ip", "netns", "exec", ns, "ip", "link", "set", "dev", ns_dev, "up",
        ]);
        let shared = std::sync::Arc::new(DelayShared::default());
        let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
        let threads = vec![pump(a, b2, shared.clone()), pump(b, a2, shared.clone())];
        Delayer {
            root_dev: root_dev.to_string(),
            ns_dev: ns_dev.to_string(),
            shared,
            threads,
        }
    }
}

impl Drop for Delayer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Moves packets from `from` to `to` after the one-way delay. Returns when told to stop (within
/// 100 ms).
fn pump(
    from: std::fs::File,
    to: std::fs::File,
    shared: std::sync::Arc<DelayShared>,
) -> std::thread::JoinHandle<()> {
    use std::io::Write;
    use std::os::fd::AsRawFd;
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    let writer = std::thread::spawn(move || {
        let mut to = to;
        for (due, pkt) in rx {
            // Emulated propagation time, not synchronisation.
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            let _ = to.write(&pkt);
        }
    });
    std::thread::spawn(move || {
        let mut from = from;
        let mut buf = vec![0u8; 65536];
        while !shared.stop.load(Ordering::SeqCst) {
            let mut pfd = libc::pollfd {
                fd: from.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut pfd, 1, 100) } <= 0 {
                continue;
            }
            let Ok(n) = from.read(&mut buf) else { break };
            if shared.frozen.load(Ordering::SeqCst) {
                continue;
            }
            let delay = Duration::from_micros(shared.one_way_us.load(Ordering::SeqCst) as u64);
            if tx
                .send((Instant::now() + delay, buf[..n].to_vec()))
                .is_err()
            {
                break;
            }
        }
        drop(tx);
        let _ = writer.join();
    })
}

impl Drop for NetLink {
    fn drop(&mut self) {
        let quiet = |args: &[&str]| {
            let _ = run_bounded(
                Command::new(args[0]).args(&args[1..]),
                Duration::from_secs(10),
            );
        };
        if let Some(d) = self
            .state
            .get_mut()
            .map(|s| s.delayer.take())
            .ok()
            .flatten()
        {
            self.delayer_routes(&d, false);
            drop(d);
        }
        // Deleting one end deletes the pair; the namespace goes when its last process does.
        quiet(&["ip", "link", "del", &self.root_dev]);
        quiet(&["ip", "netns", "del", &self.ns]);
    }
}

/// Whether `tc ... netem` works here (it needs the sch_netem kernel module).
pub fn latency_supported() -> bool {
    static SUPPORTED: Mutex<Option<bool>> = Mutex::new(None);
    let mut g = SUPPORTED.lock().unwrap();
    *g.get_or_insert_with(|| {
        let dev = format!("fdt{}nq", std::process::id());
        if !run_bounded(
            Command::new("ip").args(["link", "add", &dev, "type", "dummy"]),
            Duration::from_secs(10),
        )
        .ok()
        {
            return false;
        }
        let ok = run_bounded(
            Command::new("tc").args(["qdisc", "add", "dev", &dev, "root", "netem", "delay", "1ms"]),
            Duration::from_secs(10),
        )
        .ok();
        let _ = run_bounded(
            Command::new("ip").args(["link", "del", &dev]),
            Duration::from_secs(10),
        );
        ok
    })
}

/// A /30 in 10.213.0.0/16 that no interface uses: (root side, namespace side).
fn free_subnet(pid: u32, n: u32) -> (String, String) {
    let used = must(&["ip", "-4", "-o", "addr", "show"]);
    // 16384 /30s; start at a place that differs between concurrent test processes.
    let start = (pid.wrapping_mul(64).wrapping_add(n * 7919)) % 16384;
    for i in 0..16384 {
        let k = (start + i) % 16384;
        let base = k * 4;
        let (c, d) = (base / 256, base % 256);
        let prefix = format!("10.213.{c}.");
        let taken = (0..4).any(|j| used.contains(&format!(" {prefix}{}/", d + j)));
        if !taken {
            return (format!("{prefix}{}", d + 1), format!("{prefix}{}", d + 2));
        }
    }
    panic!("no free /30 in 10.213.0.0/16");
}

/// Deletes namespaces and veths left by test processes that died without their Drop.
fn sweep_stale() {
    let Ok(list) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for e in list.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("fdt-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = run_bounded(
                Command::new("ip").args(["netns", "del", &name]),
                Duration::from_secs(10),
            );
        }
    }
}

/// Reads `child`'s stdout line by line on a thread; the receiver gets each line.
pub fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let out = child.stdout.take().expect("stdout piped");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            match line {
                Ok(l) => {
                    if tx.send(l).is_err() {
                        break;
                    }
                }
                Err(_) => break,
            }
        }
    });
    rx
}
