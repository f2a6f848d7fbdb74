//! Throwaway `redis-server` nodes for a live trial: one process per node, on 127.0.0.1 at a
//! free port, its data folder in a temporary folder, with the scenario's persistence. The
//! harness pauses a node (SIGSTOP/SIGCONT), crashes it (SIGKILL) and starts it again on the
//! same port and folder, and steps its wall clock through libfaketime. Dropping a node kills
//! it and deletes its folder.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::form::RedisPersistence;
use crate::pg_server::{free_port, temp_folder};
use crate::LiveError;

/// The Debian package of `redis-server`.
const PACKAGE: &str = "redis-server";

/// Where Debian's `faketime` package puts the multi-threaded library.
const FAKETIME_GLOB_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib/faketime",
];

/// One Redis node.
#[derive(Debug)]
pub struct RedisNode {
    /// Its name in the scenario (`redis-3`).
    pub name: String,
    folder: PathBuf,
    port: u16,
    persistence: RedisPersistence,
    /// The library that steps the node's clock, if it may be stepped.
    faker: Option<ClockFaker>,
    /// The node's clock offset so far, ms (what the timestamp file says).
    offset_ms: i64,
    child: Option<Child>,
    /// Its folder's and its process's entries in [`crate::reaper`]'s list.
    owned: Vec<u64>,
}

impl RedisNode {
    /// Start node `name`. `clock_faults`: run it under fencesim's clock shim (or libfaketime)
    /// so that its wall clock can be stepped (its monotonic clock stays real).
    ///
    /// # Errors
    /// `redis-server` (or, with `clock_faults`, a clock library) is not installed, or the node
    /// did not start.
    pub fn start(
        name: &str,
        persistence: RedisPersistence,
        clock_faults: bool,
    ) -> Result<Self, LiveError> {
        which("redis-server").ok_or(LiveError::Missing {
            what: "redis-server",
            package: PACKAGE,
        })?;
        let (folder, owned) = temp_folder(name)?;
        let mut node = RedisNode {
            owned: vec![owned],
            name: name.to_owned(),
            folder,
            port: 0,
            persistence,
            faker: None,
            offset_ms: 0,
            child: None,
        };
        // From here on, an error drops the node, which removes its folder.
        node.port = free_port()?;
        if clock_faults {
            node.faker = Some(ClockFaker::find(&node.folder)?);
        }
        node.write_offset()?;
        node.spawn()?;
        if node.faker.is_some() {
            node.verify_clock()?;
        }
        Ok(node)
    }

    /// Check that the clock library really steps the node's clock: a day ahead, the node's
    /// `TIME` must say so (a file that is no such library is ignored by the loader, and the
    /// node would run on the real clock).
    fn verify_clock(&mut self) -> Result<(), LiveError> {
        const DAY_MS: i64 = 86_400_000;
        self.offset_ms = DAY_MS;
        self.write_offset()?;
        let seen = redis::Client::open(self.url())
            .and_then(|c| c.get_connection_with_timeout(Duration::from_secs(2)))
            .and_then(|mut c| redis::cmd("TIME").query::<(u64, u64)>(&mut c));
        self.offset_ms = 0;
        self.write_offset()?;
        let real_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        match seen {
            Ok((node_s, _)) if node_s >= real_s + 80_000 => Ok(()),
            _ => Err(LiveError::Unsupported(format!(
                "{}: {} does not step redis-server's clock (its TIME stayed real)",
                self.name,
                self.faker
                    .as_ref()
                    .map_or(String::new(), ClockFaker::describe)
            ))),
        }
    }

    /// What steps its clock, as the history's event says it.
    pub fn clock_library(&self) -> &'static str {
        match self.faker {
            Some(ClockFaker::Shim(_)) => "fencesim's clock shim",
            Some(ClockFaker::Faketime(_)) => "libfaketime",
            None => "no clock library",
        }
    }

    /// Its TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// What it keeps over a crash.
    pub fn persistence(&self) -> RedisPersistence {
        self.persistence
    }

    /// Its URL for the `redis` crate.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn spawn(&mut self) -> Result<(), LiveError> {
        let mut command = Command::new("redis-server");
        // Its own process group: a Ctrl-C in the terminal reaches fencesim, which stops the
        // nodes itself; and killed if fencesim dies.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        crate::reaper::die_with_parent(&mut command);
        command.args(["--bind", "127.0.0.1", "--port", &self.port.to_string()]);
        command.args(["--dir", &self.folder.to_string_lossy(), "--save", ""]);
        command.args([
            "--protected-mode",
            "no",
            "--daemonize",
            "no",
            "--loglevel",
            "warning",
        ]);
        match self.persistence {
            RedisPersistence::Always => {
                command.args(["--appendonly", "yes", "--appendfsync", "always"]);
            }
            RedisPersistence::None => {
                command.args(["--appendonly", "no"]);
            }
        }
        match &self.faker {
            Some(ClockFaker::Shim(library)) => {
                command
                    .env("LD_PRELOAD", library)
                    .env("FENCESIM_CLOCK_OFFSET_FILE", self.folder.join("faketime"));
            }
            Some(ClockFaker::Faketime(library)) => {
                command
                    .env("LD_PRELOAD", library)
                    .env("FAKETIME_TIMESTAMP_FILE", self.folder.join("faketime"))
                    .env("FAKETIME_NO_CACHE", "1")
                    .env("DONT_FAKE_MONOTONIC", "1");
            }
            None => {}
        }
        let log = fs::File::create(self.folder.join("redis.log"))
            .map_err(|e| LiveError::Server(format!("{}: {e}", self.name)))?;
        let errors = log
            .try_clone()
            .map_err(|e| LiveError::Server(format!("{}: {e}", self.name)))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(errors)
            .spawn()
            .map_err(|e| LiveError::Server(format!("{}: redis-server: {e}", self.name)))?;
        let process = crate::reaper::Owned::Process(child.id() as i32);
        self.owned.push(crate::reaper::own(process));
        self.child = Some(child);
        self.wait_ready()
    }

    fn wait_ready(&mut self) -> Result<(), LiveError> {
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return Ok(());
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                let log = fs::read_to_string(self.folder.join("redis.log")).unwrap_or_default();
                return Err(LiveError::Server(format!(
                    "{}: redis-server exited ({status}): {}",
                    self.name,
                    log.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = fs::read_to_string(self.folder.join("redis.log")).unwrap_or_default();
        if log.contains("libfaketime: Unexpected recursive calls") {
            // Known upstream: libfaketime cannot initialise inside a process whose malloc is
            // jemalloc (libfaketime issues #130, #327, #478), and Debian's redis-server is
            // linked with jemalloc.
            return Err(LiveError::Unsupported(format!(
                "{}: redis-server cannot run under libfaketime on this machine: it is linked \
                 with jemalloc, which libfaketime does not support (libfaketime issue #130); \
                 fencesim's own clock shim does: build it (`cargo build -p fencesim-clockshim`) \
                 and name it with FENCESIM_CLOCKSHIM=PATH",
                self.name
            )));
        }
        Err(LiveError::Server(format!(
            "{}: redis-server did not listen within 2 s: {}",
            self.name,
            log.trim()
        )))
    }

    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    /// Stop the process (SIGSTOP).
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGSTOP);
        }
    }

    /// Continue it (SIGCONT).
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGCONT);
        }
    }

    /// The node's exit status if its process has ended (it runs otherwise, or was crashed by
    /// a fault: then there is no process to ask).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kill it (SIGKILL). What it keeps is what its persistence put on disk: with
    /// `appendfsync always` every acknowledged write, without persistence nothing.
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start it again on the same port and folder (after a crash; a running node is left as
    /// it is).
    ///
    /// # Errors
    /// It did not start.
    pub fn restart(&mut self) -> Result<(), LiveError> {
        if self.child.is_some() {
            return Ok(());
        }
        self.spawn()
    }

    /// Step its wall clock by `delta_ms` (the clock library reads its file at every call).
    ///
    /// # Errors
    /// The node runs without a clock library, or the file could not be written.
    pub fn jump_clock(&mut self, delta_ms: i64) -> Result<(), LiveError> {
        if self.faker.is_none() {
            return Err(LiveError::Server(format!(
                "{} runs without a clock library",
                self.name
            )));
        }
        self.offset_ms += delta_ms;
        self.write_offset()
    }

    fn write_offset(&self) -> Result<(), LiveError> {
        let text = match self.faker {
            // libfaketime's relative form: a sign and seconds, fractions allowed.
            Some(ClockFaker::Faketime(_)) => format!("{:+.3}\n", self.offset_ms as f64 / 1000.0),
            _ => format!("{:+}\n", self.offset_ms),
        };
        fs::write(self.folder.join("faketime"), text)
            .map_err(|e| LiveError::Server(format!("{}: faketime file: {e}", self.name)))
    }
}

/// Whether a Redis node can run under libfaketime here (for clock faults), found before any
/// trial by starting one and stopping it.
///
/// # Errors
/// [`LiveError::Unsupported`] (Debian's jemalloc-linked `redis-server`), or what is missing.
pub fn probe_faketime() -> Result<(), LiveError> {
    RedisNode::start("redis-probe", RedisPersistence::None, true).map(drop)
}

impl Drop for RedisNode {
    fn drop(&mut self) {
        self.crash();
        let _ = fs::remove_dir_all(&self.folder);
        for id in self.owned.drain(..) {
            crate::reaper::forget(id);
        }
    }
}

/// The path of `binary` on the `PATH`, if it is there.
pub(crate) fn which(binary: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(binary))
        .find(|p| p.exists())
}

/// fencesim's clock shim, compiled by the build script and embedded in the binary (`None` on
/// a target it is not written for).
#[cfg(fencesim_embedded_clockshim)]
pub const EMBEDDED_SHIM: Option<&[u8]> = Some(include_bytes!(concat!(
    env!("OUT_DIR"),
    "/libfencesim_clockshim.so"
)));
/// fencesim's clock shim, compiled by the build script and embedded in the binary (`None` on
/// a target it is not written for).
#[cfg(not(fencesim_embedded_clockshim))]
pub const EMBEDDED_SHIM: Option<&[u8]> = None;

/// What steps a node's wall clock.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ClockFaker {
    /// fencesim's own shim (`crates/fencesim-clockshim`), at a path: runs under any malloc.
    Shim(PathBuf),
    /// Debian's libfaketime: not under a jemalloc-linked `redis-server`.
    Faketime(PathBuf),
}

/// The environment variable that names fencesim's clock shim.
pub const SHIM_VARIABLE: &str = "FENCESIM_CLOCKSHIM";

impl ClockFaker {
    /// The library's path, as an error names it.
    fn describe(&self) -> String {
        match self {
            ClockFaker::Shim(p) | ClockFaker::Faketime(p) => p.display().to_string(),
        }
    }

    /// fencesim's shim (`FENCESIM_CLOCKSHIM`, else the one embedded in the binary, written
    /// into the node's `folder` and removed with it), else libfaketime.
    fn find(folder: &Path) -> Result<ClockFaker, LiveError> {
        if let Some(named) = std::env::var_os(SHIM_VARIABLE).map(PathBuf::from) {
            // Named: that one or nothing, never a silent fallback.
            return match named.exists() {
                true => Ok(ClockFaker::Shim(named)),
                false => Err(LiveError::Unsupported(format!(
                    "{SHIM_VARIABLE}={}: no such file",
                    named.display()
                ))),
            };
        }
        if let Some(bytes) = EMBEDDED_SHIM {
            let path = folder.join("libfencesim_clockshim.so");
            fs::write(&path, bytes)
                .map_err(|e| LiveError::Server(format!("{}: {e}", path.display())))?;
            return Ok(ClockFaker::Shim(path));
        }
        faketime_library()
            .map(ClockFaker::Faketime)
            .ok_or(LiveError::Missing {
                what: "a clock library for clock faults on Redis nodes (this build embeds no \
                       clock shim: build one with `cargo build -p fencesim-clockshim` and name it \
                       with FENCESIM_CLOCKSHIM=PATH, or install libfaketime)",
                package: "faketime",
            })
    }
}

fn faketime_library() -> Option<PathBuf> {
    FAKETIME_GLOB_DIRS
        .iter()
        .map(|d| Path::new(d).join("libfaketimeMT.so.1"))
        .find(|p| p.exists())
}
