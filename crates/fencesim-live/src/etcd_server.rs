//! A throwaway etcd cluster for a live trial: one `etcd` process per member (Debian's
//! `etcd-server`), on 127.0.0.1 at free client and peer ports, each with its data folder in a
//! temporary folder, all named in one `--initial-cluster`. The harness pauses a member
//! (SIGSTOP/SIGCONT), kills it (SIGKILL: etcd syncs its write-ahead log before it answers, so
//! a killed member keeps every acknowledged entry) and starts it again on the same ports and
//! folder, where it rejoins the cluster. Dropping a member kills it and deletes its folder.
//!
//! The cluster is asked over etcd's JSON gateway ([`crate::etcd_gateway`]): `/health` here,
//! and which member leads, so that `node = "leader"` faults strike it.

use std::fs;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::etcd_gateway::agent;
use crate::pg_server::{free_port, temp_folder};
use crate::proxy::{Owners, Proxy};
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
    /// Where it listens for its peers.
    peer_port: u16,
    /// Where its peers reach it: `peer_port`, or its peer proxy's port.
    advertised_peer_port: u16,
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
    /// Where its process is told to the peer proxies, if the cluster has them.
    owners: Option<Owners>,
}

/// A started cluster: its members, and the proxies in front of their peer ports (one per
/// ordered pair of members, `client` the member that connects) if it was asked for them.
pub struct Cluster {
    /// The members, in the order of their names.
    pub members: Vec<EtcdMember>,
    /// The links between members, for partitions between them.
    pub peer_links: Vec<Proxy>,
}

/// Start a cluster of members named `names` (`etcd-1`..), and wait until every member
/// answers healthy (a leader is elected). With `peer_proxies`, each member's peer port is
/// reached through a proxy ([`Proxy::for_peers`]) that partitions between members stop.
///
/// # Errors
/// `etcd` is not installed, or a member did not start or the cluster did not become healthy
/// within 20 s (with the member's log).
pub fn start_cluster(
    names: &[String],
    peer_proxies: bool,
    seed: u64,
) -> Result<Cluster, LiveError> {
    which("etcd").ok_or(LiveError::Missing {
        what: "etcd",
        package: PACKAGE,
    })?;
    let mut seats = names
        .iter()
        .map(|name| {
            let peer_port = free_port()?;
            Ok(Seat {
                name: name.clone(),
                client_port: free_port()?,
                peer_port,
                advertised_peer_port: peer_port,
            })
        })
        .collect::<Result<Vec<Seat>, LiveError>>()?;
    let owners = peer_proxies.then(Owners::default);
    let mut peer_links = Vec::new();
    if let Some(owners) = &owners {
        for (i, seat) in seats.iter_mut().enumerate() {
            // Bound before any member starts: the members dial the advertised port at once.
            let listener = TcpListener::bind("127.0.0.1:0")
                .map_err(|e| LiveError::Server(format!("peer proxy of {}: {e}", seat.name)))?;
            let others: Vec<String> = names.iter().filter(|n| **n != seat.name).cloned().collect();
            let links = Proxy::for_peers(
                &seat.name,
                listener,
                seat.peer_port,
                &others,
                owners,
                seed ^ ((i as u64) << 24),
            )?;
            seat.advertised_peer_port = links[0].port;
            peer_links.extend(links);
        }
    }
    let initial_cluster = seats
        .iter()
        .map(|s| format!("{}=http://127.0.0.1:{}", s.name, s.advertised_peer_port))
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
            owners: owners.clone(),
        };
        // From here on, an error drops the members, which removes their folders.
        member.spawn()?;
        members.push(member);
    }
    for member in &mut members {
        member.wait_healthy()?;
    }
    Ok(Cluster {
        members,
        peer_links,
    })
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
        let advertised = format!("http://127.0.0.1:{}", seat.advertised_peer_port);
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
            .args(["--initial-advertise-peer-urls", &advertised])
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
        if let Some(owners) = &self.owners {
            owners.set(&seat.name, child.id());
        }
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
