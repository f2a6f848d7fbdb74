//! A throwaway PostgreSQL server for a live run: `initdb` and `postgres` from the machine's
//! installation, on a data folder in a temporary folder, its socket inside that folder and TCP
//! on 127.0.0.1 at a free port. Dropping the [`PgServer`] stops the server (its whole process
//! group) and deletes the folder, also when the run panics or is interrupted.
//!
//! As root (CI runs as root, and PostgreSQL refuses to), the server runs as the `postgres`
//! user that Debian's package creates, on a folder that user owns.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::{Gid, Pid, Uid};

use crate::LiveError;

/// The Debian package that provides the server binaries.
const PACKAGE: &str = "postgresql";

/// The environment variable that names the folder of `initdb` and `postgres`.
pub const BINDIR_VARIABLE: &str = "FENCESIM_PG_BINDIR";

/// A running PostgreSQL server, stopped and deleted on drop.
#[derive(Debug)]
pub struct PgServer {
    folder: PathBuf,
    /// `postgres`'s folder, and the user it runs as (for a restart after a crash).
    bin: PathBuf,
    owner: Option<(Uid, Gid)>,
    /// Its entries in [`crate::reaper`]'s list (folder, then process group).
    owned: Vec<u64>,
    child: Option<Child>,
    port: u16,
    /// libpq connection string for it (user `fencesim`, database `postgres`).
    pub conninfo: String,
}

impl PgServer {
    /// Start a fresh server and wait (up to 30 s) until it accepts connections.
    ///
    /// # Errors
    /// [`LiveError::Missing`] if the binaries are not installed (naming the package),
    /// [`LiveError::Server`] if it would not start (with the tail of its log).
    pub fn start() -> Result<PgServer, LiveError> {
        let bin = bindir()?;
        let owner = owner()?;
        let (folder, owned) = temp_folder("pg")?;
        let mut server = PgServer {
            owned: vec![owned],
            folder: folder.clone(),
            bin: bin.clone(),
            owner,
            child: None,
            port: 0,
            conninfo: String::new(),
        };
        if let Some((uid, gid)) = owner {
            nix::unistd::chown(&folder, Some(uid), Some(gid))
                .map_err(|e| LiveError::Server(format!("chown {}: {e}", folder.display())))?;
        }
        let data = folder.join("data");
        let mut initdb = as_owner(Command::new(bin.join("initdb")), owner);
        initdb.args([
            "-D",
            &path_str(&data),
            "-U",
            "fencesim",
            "-A",
            "trust",
            "-E",
            "UTF8",
        ]);
        initdb.args(["--no-sync", "--no-instructions"]);
        crate::reaper::die_with_parent(&mut initdb);
        let running = initdb
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| LiveError::Server(format!("initdb: {e}")))?;
        // Noted, so that quitting at once kills it before removing its folder.
        let noted = crate::reaper::own(crate::reaper::Owned::Process(running.id() as i32));
        let out = running.wait_with_output();
        crate::reaper::forget(noted);
        let out = out.map_err(|e| LiveError::Server(format!("initdb: {e}")))?;
        if !out.status.success() {
            return Err(LiveError::Server(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        server.port = free_port()?;
        server.conninfo = conninfo(server.port);
        server.spawn()?;
        Ok(server)
    }

    /// Start `postgres` on the data folder and wait until it accepts connections (after a
    /// crash it first recovers from its write-ahead log, as a real server does).
    fn spawn(&mut self) -> Result<(), LiveError> {
        let (data, log) = (self.folder.join("data"), self.folder.join("server.log"));
        let log_file = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| LiveError::Server(format!("{}: {e}", log.display())))?;
        if let Some((uid, gid)) = self.owner {
            let _ = nix::unistd::chown(&log, Some(uid), Some(gid));
        }
        let mut postgres = as_owner(Command::new(self.bin.join("postgres")), self.owner);
        postgres.args(["-D", &path_str(&data), "-k", &path_str(&self.folder)]);
        postgres.args(["-h", "127.0.0.1", "-p", &self.port.to_string()]);
        // Durable as a production server: every commit is on disk before it is acknowledged.
        postgres.args(["-c", "fsync=on", "-c", "synchronous_commit=on"]);
        postgres.args(["-c", "max_connections=60", "-c", "shared_buffers=16MB"]);
        // Its own process group, so that a terminal's Ctrl-C reaches fencesim only.
        std::os::unix::process::CommandExt::process_group(&mut postgres, 0);
        crate::reaper::die_with_parent(&mut postgres);
        let child = postgres
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| LiveError::Server(format!("postgres: {e}")))?;
        let group = crate::reaper::Owned::Group(child.id() as i32);
        self.owned.push(crate::reaper::own(group));
        self.child = Some(child);
        self.wait_ready(&log)
    }

    /// Kill the whole server (SIGKILL of its process group), as a power cut would stop it:
    /// what it acknowledged is on disk (`fsync=on`), the rest is gone.
    pub fn crash(&mut self) {
        self.signal_all(Signal::SIGCONT);
        self.signal_all(Signal::SIGKILL);
        if let Some(mut child) = self.child.take() {
            let _ = child.wait();
            // Backends die with the group; the postmaster's shared memory goes with them.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Start it again after a crash (crash recovery first); a running server is left alone.
    ///
    /// # Errors
    /// It did not come back.
    pub fn restart(&mut self) -> Result<(), LiveError> {
        if self.child.is_some() {
            return Ok(());
        }
        // The postmaster's pid file survives a SIGKILL; PostgreSQL checks that its pid is gone.
        self.spawn()
    }

    /// The server's TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Send `signal` to the whole server: the postmaster and every process it started.
    /// PostgreSQL puts each backend in a session of its own (`setsid`), so the postmaster's
    /// process group alone misses them; its children are found by their parent in `/proc`.
    pub fn signal_all(&self, signal: Signal) {
        let Some(postmaster) = self.child.as_ref().map(|c| c.id() as i32) else {
            return;
        };
        // Stop the postmaster first (it forks no more), continue it last.
        if signal != Signal::SIGCONT {
            let _ = killpg(Pid::from_raw(postmaster), signal);
        }
        for child in children_of(postmaster) {
            let _ = nix::sys::signal::kill(Pid::from_raw(child), signal);
        }
        if signal == Signal::SIGCONT {
            let _ = killpg(Pid::from_raw(postmaster), signal);
        }
    }

    fn wait_ready(&mut self, log: &Path) -> Result<(), LiveError> {
        for _ in 0..300 {
            if let Ok(Some(status)) = self.child.as_mut().map_or(Ok(None), |c| c.try_wait()) {
                return Err(LiveError::Server(format!(
                    "postgres exited ({status}): {}",
                    tail(log)
                )));
            }
            if postgres::Client::connect(&self.conninfo, postgres::NoTls).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(LiveError::Server(format!(
            "postgres did not accept connections within 30 s: {}",
            tail(log)
        )))
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        // A paused server would ignore SIGINT until continued.
        self.signal_all(Signal::SIGCONT);
        if let Some(mut child) = self.child.take() {
            let group = Pid::from_raw(child.id() as i32);
            // Fast shutdown: roll back and exit; then make sure.
            let _ = killpg(group, Signal::SIGINT);
            for _ in 0..50 {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let _ = killpg(group, Signal::SIGKILL);
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.folder);
        for id in self.owned.drain(..) {
            crate::reaper::forget(id);
        }
    }
}

/// The processes whose parent is `parent`, from `/proc/*/stat` (its fourth field).
fn children_of(parent: i32) -> Vec<i32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // After the command's closing parenthesis: state, then the parent's pid.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            after.split_whitespace().nth(1).and_then(|p| p.parse().ok()) == Some(parent)
        })
        .collect()
}

/// libpq connection string of a server fencesim started, at `port` (its own, or a proxy's).
pub fn conninfo(port: u16) -> String {
    format!("host=127.0.0.1 port={port} user=fencesim dbname=postgres connect_timeout=5")
}

/// Where `initdb` and `postgres` are: the folder `FENCESIM_PG_BINDIR` names if it is set (to
/// pick one of several installed versions), else `pg_config --bindir`, else the newest
/// `/usr/lib/postgresql/N/bin`, else the `PATH`.
fn bindir() -> Result<PathBuf, LiveError> {
    let missing = LiveError::Missing {
        what: "PostgreSQL's server (initdb and postgres)",
        package: PACKAGE,
    };
    if let Some(dir) = std::env::var_os(BINDIR_VARIABLE) {
        let dir = PathBuf::from(dir);
        return if dir.join("postgres").exists() && dir.join("initdb").exists() {
            Ok(dir)
        } else {
            Err(missing)
        };
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("postgres").exists() {
            return Ok(dir);
        }
    }
    let mut versions: Vec<PathBuf> = fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    versions.sort();
    if let Some(dir) = versions
        .into_iter()
        .rev()
        .find(|d| d.join("postgres").exists())
    {
        return Ok(dir);
    }
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    on_path
        .into_iter()
        .find(|d| d.join("postgres").exists() && d.join("initdb").exists())
        .ok_or(missing)
}

/// The user the server runs as: `None` for the current user, or (as root, which PostgreSQL
/// refuses) the `postgres` user's ids.
fn owner() -> Result<Option<(Uid, Gid)>, LiveError> {
    if !Uid::effective().is_root() {
        return Ok(None);
    }
    match nix::unistd::User::from_name("postgres") {
        Ok(Some(user)) => Ok(Some((user.uid, user.gid))),
        _ => Err(LiveError::Missing {
            what: "the `postgres` user (PostgreSQL will not run as root)",
            package: PACKAGE,
        }),
    }
}

fn as_owner(mut command: Command, owner: Option<(Uid, Gid)>) -> Command {
    if let Some((uid, gid)) = owner {
        std::os::unix::process::CommandExt::uid(&mut command, uid.as_raw());
        std::os::unix::process::CommandExt::gid(&mut command, gid.as_raw());
    }
    command
}

/// A new, empty folder under the system's temporary folder, readable by other users (the
/// server's user must reach it), and its id in [`crate::reaper`]'s list, which removes it if
/// the run quits at once.
pub(crate) fn temp_folder(what: &str) -> Result<(PathBuf, u64), LiveError> {
    let base = std::env::temp_dir();
    for n in 0..1000u32 {
        let path = base.join(format!(
            "{}{what}-{}-{n}",
            crate::reaper::FOLDER_PREFIX,
            std::process::id()
        ));
        match crate::reaper::create_folder(&path) {
            Ok(id) => return Ok((path, id)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(LiveError::Server(format!("{}: {e}", path.display()))),
        }
    }
    Err(LiveError::Server(format!(
        "no free folder name under {}",
        base.display()
    )))
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, LiveError> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| LiveError::Server(format!("no free port on 127.0.0.1: {e}")))
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn tail(log: &Path) -> String {
    let text = fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}
