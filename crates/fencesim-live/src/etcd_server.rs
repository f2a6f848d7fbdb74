//! A throwaway etcd cluster for a live trial: one `etcd` process per member (Debian's
//! `etcd-server`), on 127.0.0.1 at free client and peer ports, each with its data folder in a
//! temporary folder, all named in one `--initial-cluster`. The harness pauses a member
//! (SIGSTOP/SIGCONT), kills it (SIGKILL: etcd syncs its write-ahead log before it answers, so
//! a killed member keeps every acknowledged entry) and starts it again on the same ports and
//! folder, where it rejoins the cluster. Dropping a member kills it and deletes its folder.
//!
//! The cluster is asked over etcd's JSON gateway (`/health`, `/v3/maintenance/status`,
//! `/v3/cluster/member/list`): which member leads, so that `node = "leader"` faults strike it.

use std::fs;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::pg_server::{free_port, temp_folder};
use crate::redis_server::which;
use crate::LiveError;

/// The Debian package of `etcd`.
const PACKAGE: &str = "etcd-server";

/// How long a cluster may take to elect a leader and answer `/health`.
const READY_WITHIN: Duration = Duration::from_secs(20);

/// One member's ports and name, as the cluster's configuration lists it.
#[derive(Clone, Debug)]
struct Seat {
    name: String,
    client_port: u16,
    peer_port: u16,
}

/// One etcd member.
#[derive(Debug)]
pub struct EtcdMember {
    seat: Seat,
    /// Every member's `name=http://127.0.0.1:PEER`, joined by commas.
    initial_cluster: String,
    folder: PathBuf,
    child: Option<Child>,
    /// Its folder's and its process's entries in [`crate::reaper`]'s list.
    owned: Vec<u64>,
}

/// Start a cluster of members named `names` (`etcd-1`..), and wait until every member
/// answers healthy (a leader is elected).
///
/// # Errors
/// `etcd` is not installed, or a member did not start or the cluster did not become healthy
/// within 20 s (with the member's log).
pub fn start_cluster(names: &[String]) -> Result<Vec<EtcdMember>, LiveError> {
    which("etcd").ok_or(LiveError::Missing {
        what: "etcd",
        package: PACKAGE,
    })?;
    let seats = names
        .iter()
        .map(|name| {
            Ok(Seat {
                name: name.clone(),
                client_port: free_port()?,
                peer_port: free_port()?,
            })
        })
        .collect::<Result<Vec<Seat>, LiveError>>()?;
    let initial_cluster = seats
        .iter()
        .map(|s| format!("{}=http://127.0.0.1:{}", s.name, s.peer_port))
        .collect::<Vec<_>>()
        .join(",");
    let mut members = Vec::new();
    for seat in seats {
        let (folder, owned) = temp_folder(&seat.name)?;
        let mut member = EtcdMember {
            seat,
            initial_cluster: initial_cluster.clone(),
            folder,
            child: None,
            owned: vec![owned],
        };
        // From here on, an error drops the members, which removes their folders.
        member.spawn()?;
        members.push(member);
    }
    for member in &mut members {
        member.wait_healthy()?;
    }
    Ok(members)
}

impl EtcdMember {
    /// Its name in the scenario (`etcd-2`).
    pub fn name(&self) -> &str {
        &self.seat.name
    }

    /// Its client port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.seat.client_port
    }

    /// Its client URL.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.seat.client_port)
    }

    fn spawn(&mut self) -> Result<(), LiveError> {
        let seat = &self.seat;
        let client = format!("http://127.0.0.1:{}", seat.client_port);
        let peer = format!("http://127.0.0.1:{}", seat.peer_port);
        let mut command = Command::new("etcd");
        // Its own process group: a Ctrl-C reaches fencesim, which stops the members itself;
        // and killed if fencesim dies.
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        crate::reaper::die_with_parent(&mut command);
        command
            .args(["--name", &seat.name])
            .arg("--data-dir")
            .arg(self.folder.join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-state", "new"])
            .args([
                "--initial-cluster-token",
                &format!("fencesim-{}", std::process::id()),
            ])
            .args(["--log-level", "warn", "--logger", "zap"]);
        let log = fs::File::create(self.folder.join("etcd.log"))
            .map_err(|e| LiveError::Server(format!("{}: {e}", seat.name)))?;
        let errors = log
            .try_clone()
            .map_err(|e| LiveError::Server(format!("{}: {e}", seat.name)))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(errors)
            .spawn()
            .map_err(|e| LiveError::Server(format!("{}: etcd: {e}", seat.name)))?;
        let process = crate::reaper::Owned::Process(child.id() as i32);
        self.owned.push(crate::reaper::own(process));
        self.child = Some(child);
        Ok(())
    }

    /// Wait until the member answers `/health` with `true` (it has a leader).
    fn wait_healthy(&mut self) -> Result<(), LiveError> {
        let deadline = Instant::now() + READY_WITHIN;
        let agent = agent(Duration::from_millis(500));
        while Instant::now() < deadline {
            let healthy = agent
                .get(&format!("{}/health", self.url()))
                .call()
                .ok()
                .and_then(|r| r.into_string().ok())
                .is_some_and(|body| body.contains("\"true\""));
            if healthy {
                return Ok(());
            }
            if let Some(status) = self.exited() {
                return Err(LiveError::Server(format!(
                    "{}: etcd exited ({status}): {}",
                    self.seat.name,
                    self.log_tail()
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(LiveError::Server(format!(
            "{}: etcd was not healthy within {} s: {}",
            self.seat.name,
            READY_WITHIN.as_secs(),
            self.log_tail()
        )))
    }

    fn log_tail(&self) -> String {
        let log = fs::read_to_string(self.folder.join("etcd.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    fn pid(&self) -> Option<Pid> {
        self.child.as_ref().map(|c| Pid::from_raw(c.id() as i32))
    }

    /// SIGSTOP: a process pause.
    pub fn pause(&self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGSTOP);
        }
    }

    /// SIGCONT.
    pub fn resume(&self) {
        if let Some(pid) = self.pid() {
            let _ = kill(pid, Signal::SIGCONT);
        }
    }

    /// How it ended, if it has (`None` while it runs or after [`Self::crash`]).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// SIGKILL (continued first, so that a paused member dies too).
    pub fn crash(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGCONT);
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Start a crashed member again, on its folder: it replays its log and rejoins. Returns
    /// at once; the member serves once it has caught up.
    ///
    /// # Errors
    /// The process could not start.
    pub fn restart(&mut self) -> Result<(), LiveError> {
        if self.child.is_some() {
            return Ok(());
        }
        self.spawn()
    }
}

impl Drop for EtcdMember {
    fn drop(&mut self) {
        self.crash();
        let _ = fs::remove_dir_all(&self.folder);
        for id in self.owned.drain(..) {
            crate::reaper::forget(id);
        }
    }
}

/// An HTTP agent whose every call gives up after `timeout`.
pub fn agent(timeout: Duration) -> ureq::Agent {
    ureq::AgentBuilder::new().timeout(timeout).build()
}

/// POST `body` (JSON) to `url` + `path` and parse the answer.
///
/// # Errors
/// The call failed or timed out, or the answer is not JSON (one line).
pub fn post(
    agent: &ureq::Agent,
    url: &str,
    path: &str,
    body: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let answer = agent
        .post(&format!("{url}{path}"))
        .set("Content-Type", "application/json")
        .send_string(&body.to_string());
    let text = match answer {
        Ok(response) => response.into_string().map_err(|e| e.to_string())?,
        Err(ureq::Error::Status(code, response)) => {
            let text = response.into_string().unwrap_or_default();
            return Err(format!("HTTP {code}: {}", text.trim()));
        }
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&text).map_err(|e| format!("{path}: not JSON ({e}): {text}"))
}

/// Run `call` (a blocking lock call) while a thread keeps `lease` alive on the member at `url`,
/// one keepalive every third of `ttl_ms` (as clientv3's session does), until `call` returns:
/// etcd keeps no blocked caller's lease alive itself. Live mode is the one place with threads.
pub fn keeping_alive<T>(url: &str, lease: &str, ttl_ms: u64, call: impl FnOnce() -> T) -> T {
    let every = Duration::from_millis((ttl_ms / 3).max(1));
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let agent = agent(every);
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                let _ = post(
                    &agent,
                    url,
                    "/v3/lease/keepalive",
                    &serde_json::json!({ "ID": lease }),
                );
            }
        });
        let answer = call();
        let _ = stop.send(());
        answer
    })
}

/// The name of the member that leads, asked of the members at `urls` in turn (the first that
/// answers says which member id leads; the member list names it). `None`: no member answered
/// or none leads.
pub fn leader(urls: &[String]) -> Option<String> {
    let agent = agent(Duration::from_millis(1_000));
    for url in urls {
        let Ok(status) = post(
            &agent,
            url,
            "/v3/maintenance/status",
            &serde_json::json!({}),
        ) else {
            continue;
        };
        let Some(leader) = status.get("leader").and_then(|l| l.as_str()) else {
            continue;
        };
        let Ok(list) = post(
            &agent,
            url,
            "/v3/cluster/member/list",
            &serde_json::json!({}),
        ) else {
            continue;
        };
        let members = list.get("members").and_then(|m| m.as_array())?;
        return members
            .iter()
            .find(|m| m.get("ID").and_then(|id| id.as_str()) == Some(leader))
            .and_then(|m| m.get("name").and_then(|n| n.as_str()))
            .map(str::to_owned);
    }
    None
}
