//! fencesim's own TCP proxy, one per link between a client and a server (`client-1` →
//! `redis-3`, `client-1` → `lease-service`, ...), so that the network faults of a scenario act
//! on real connections: a partition stops a direction of a link, a latency window delays what
//! crosses it, loss resets its connections. It runs in the harness's process, on threads of
//! its own.
//!
//! A stopped direction keeps its bytes and delivers them, in order, when the link heals, as TCP
//! does over a partition that ends before the connection times out. A client waits for a
//! stalled answer as long as its own timeout lets it: the Redis client's read timeout; the
//! PostgreSQL client library has none per call, so a link to PostgreSQL that a partition cuts
//! resets its connections instead of stalling them (the call ends `info` at once, not after
//! `timeout_ms`), and refuses new ones until it heals.
//!
//! Between etcd members, a proxy stands in front of each member's peer port (the port the
//! cluster's configuration advertises for it) and holds one link per other member
//! ([`Proxy::for_peers`]). A connection belongs to the member whose process owns its other
//! end, read from `/proc` ([`Owners`]): etcd's peer requests do not all name their sender
//! (lease forwarding, probes and version checks carry no `X-Server-From`), and Go reuses one
//! connection for named and unnamed requests alike, so a header cannot tell them apart.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::{Rng, SeedableRng};

use crate::LiveError;

/// How often a pump looks at its link's state while it has nothing to read.
const POLL: Duration = Duration::from_millis(5);

/// One direction of a link, as the faults set it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Direction {
    /// Bytes wait (a partition of this direction).
    pub stopped: bool,
    /// Extra delay of each chunk, ms.
    pub delay_ms: u64,
    /// Probability that a chunk resets the connection instead of crossing.
    pub loss: f64,
}

/// The state of a link, shared by the proxy's threads and the harness.
#[derive(Debug, Default)]
pub struct LinkState {
    /// From the client to the server.
    pub up: Direction,
    /// From the server to the client.
    pub down: Direction,
    /// Reset and refuse connections while either direction is stopped (links to PostgreSQL,
    /// whose client cannot time a call out).
    pub reset_when_stopped: bool,
    /// Bumped to reset every open connection of the link.
    pub resets: u64,
}

/// A link's proxy: it listens on a port of its own and forwards to the server's.
pub struct Proxy {
    /// The client's end of the link (its name, for faults): the member that opens the
    /// connections, for a link between etcd members.
    pub client: String,
    /// The server's end (`lease-service`, `resource`, `redis-3`; `etcd-2` in front of its
    /// peer port).
    pub server: String,
    /// The port the client connects to.
    pub port: u16,
    /// The link's state.
    pub state: Arc<Mutex<LinkState>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Listen on a free loopback port and forward each connection to `127.0.0.1:target`.
    ///
    /// # Errors
    /// No port could be bound.
    pub fn start(client: &str, server: &str, target: u16, seed: u64) -> Result<Proxy, LiveError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| LiveError::Server(format!("proxy {client} -> {server}: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| LiveError::Server(e.to_string()))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(|e| LiveError::Server(e.to_string()))?;
        let state = Arc::new(Mutex::new(LinkState::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let route = Route::One(state.clone());
        let st = stop.clone();
        std::thread::spawn(move || accept(listener, target, route, st, seed));
        Ok(Proxy {
            client: client.to_owned(),
            server: server.to_owned(),
            port,
            state,
            stop,
        })
    }

    /// In front of etcd member `member`'s peer port: listen on `listener` (the port the
    /// cluster advertises for it), forward each connection to `127.0.0.1:target` (where the
    /// member listens), on the link from the member in `senders` whose process opened it.
    /// One [`Proxy`] per sender, all on the one listener; dropping any stops them all. A
    /// connection whose owner is not found (a process not among `owners`) crosses on a link
    /// of its own that no fault touches.
    ///
    /// # Errors
    /// The listener could not be set up.
    pub fn for_peers(
        member: &str,
        listener: TcpListener,
        target: u16,
        senders: &[String],
        owners: &Owners,
        seed: u64,
    ) -> Result<Vec<Proxy>, LiveError> {
        let port = listener
            .local_addr()
            .map_err(|e| LiveError::Server(format!("peer proxy of {member}: {e}")))?
            .port();
        listener
            .set_nonblocking(true)
            .map_err(|e| LiveError::Server(e.to_string()))?;
        let stop = Arc::new(AtomicBool::new(false));
        let links: Vec<(String, Arc<Mutex<LinkState>>)> = senders
            .iter()
            .map(|s| (s.clone(), Arc::new(Mutex::new(LinkState::default()))))
            .collect();
        let proxies = links
            .iter()
            .map(|(sender, state)| Proxy {
                client: sender.clone(),
                server: member.to_owned(),
                port,
                state: state.clone(),
                stop: stop.clone(),
            })
            .collect();
        let route = Route::BySender {
            links,
            owners: owners.clone(),
        };
        std::thread::spawn(move || accept(listener, target, route, stop, seed));
        Ok(proxies)
    }

    /// Change the link's state.
    pub fn set(&self, f: impl FnOnce(&mut LinkState)) {
        if let Ok(mut s) = self.state.lock() {
            f(&mut s);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Where an accepted connection's bytes go: every connection of a client's link to its one
/// state; in front of an etcd member's peer port, to the link from the member that opened it.
enum Route {
    One(Arc<Mutex<LinkState>>),
    BySender {
        links: Vec<(String, Arc<Mutex<LinkState>>)>,
        owners: Owners,
    },
}

fn accept(listener: TcpListener, target: u16, route: Route, stop: Arc<AtomicBool>, seed: u64) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        let client = match listener.accept() {
            Ok((c, _)) => c,
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(_) => return,
        };
        n += 1;
        let seed = seed ^ (n << 1);
        match &route {
            Route::One(state) => forward(client, target, state.clone(), stop.clone(), seed),
            Route::BySender { links, owners } => {
                // Reading /proc takes a few ms: not on the accepting thread.
                let (links, owners, stop) = (links.clone(), owners.clone(), stop.clone());
                std::thread::spawn(move || {
                    let sender = owners.of_connection(&client);
                    let state = links
                        .iter()
                        .find(|(name, _)| Some(name) == sender.as_ref())
                        .map_or_else(Default::default, |(_, state)| state.clone());
                    forward(client, target, state, stop, seed);
                });
            }
        }
    }
}

/// Connect `client` to `127.0.0.1:target` and pump both directions under `state`; or refuse
/// it, if the link resets while stopped and is.
fn forward(
    client: TcpStream,
    target: u16,
    state: Arc<Mutex<LinkState>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let refused = state
        .lock()
        .map(|s| s.reset_when_stopped && (s.up.stopped || s.down.stopped))
        .unwrap_or(true);
    if refused {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    let resets = state.lock().map(|s| s.resets).unwrap_or(0);
    for (from, to, up) in [
        (client.try_clone(), server.try_clone(), true),
        (server.try_clone(), client.try_clone(), false),
    ] {
        let (Ok(from), Ok(to)) = (from, to) else {
            continue;
        };
        let pump = Pump {
            state: state.clone(),
            stop: stop.clone(),
            up,
            resets,
            rng: rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed | u64::from(up)),
        };
        std::thread::spawn(move || pump.run(from, to));
    }
}

/// The processes of an etcd cluster's members, by name, as they start (a restarted member
/// is a new process): who opened a connection to a peer proxy.
#[derive(Clone, Debug, Default)]
pub struct Owners(Arc<Mutex<Vec<(String, u32)>>>);

impl Owners {
    /// Member `name` runs now as process `pid`.
    pub fn set(&self, name: &str, pid: u32) {
        if let Ok(mut owners) = self.0.lock() {
            owners.retain(|(n, _)| n != name);
            owners.push((name.to_owned(), pid));
        }
    }

    /// The member whose process owns the other end of `connection` (a loopback TCP
    /// connection accepted by a proxy): the socket's inode from `/proc/net/tcp`, then the
    /// process with a descriptor on it. Asked a few times: the connecting side's socket is in
    /// the table by the time the connection is accepted, but a member may be just starting.
    pub fn of_connection(&self, connection: &TcpStream) -> Option<String> {
        let (peer, local) = (connection.peer_addr().ok()?, connection.local_addr().ok()?);
        for _ in 0..5 {
            let found = socket_inode(peer, local).and_then(|inode| {
                let owners = self.0.lock().ok()?.clone();
                owners
                    .into_iter()
                    .find(|(_, pid)| holds_socket(*pid, inode))
                    .map(|(name, _)| name)
            });
            if found.is_some() {
                return found;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

/// The inode of the IPv4 socket bound at `local` and connected to `remote`, from
/// `/proc/net/tcp` (addresses in hex, as the kernel stores them; ports in hex).
fn socket_inode(local: std::net::SocketAddr, remote: std::net::SocketAddr) -> Option<u64> {
    let hex = |addr: std::net::SocketAddr| -> Option<String> {
        let std::net::IpAddr::V4(ip) = addr.ip() else {
            return None;
        };
        // The kernel prints the address's bytes (network order) read as a native u32.
        let word = u32::from_ne_bytes(ip.octets());
        Some(format!("{word:08X}:{:04X}", addr.port()))
    };
    let (local, remote) = (hex(local)?, hex(remote)?);
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        (fields.get(1) == Some(&local.as_str()) && fields.get(2) == Some(&remote.as_str()))
            .then(|| fields.get(9)?.parse().ok())
            .flatten()
    })
}

/// Whether process `pid` has a descriptor on socket `inode`.
fn holds_socket(pid: u32, inode: u64) -> bool {
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir(format!("/proc/{pid}/fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|link| link.as_os_str() == wanted.as_str())
        })
    })
}

/// One direction of one connection.
struct Pump {
    state: Arc<Mutex<LinkState>>,
    stop: Arc<AtomicBool>,
    up: bool,
    resets: u64,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl Pump {
    fn direction(&self) -> Option<(Direction, bool)> {
        let s = self.state.lock().ok()?;
        if s.resets != self.resets || self.stop.load(Ordering::SeqCst) {
            return None;
        }
        let d = if self.up { s.up } else { s.down };
        let reset = s.reset_when_stopped && (s.up.stopped || s.down.stopped);
        Some((d, reset))
    }

    fn run(mut self, mut from: TcpStream, mut to: TcpStream) {
        let _ = from.set_read_timeout(Some(POLL));
        let mut pending: Vec<u8> = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        // Until the link resets (or the proxy stops).
        while let Some((direction, false)) = self.direction() {
            if !direction.stopped && !pending.is_empty() {
                if to.write_all(&pending).is_err() {
                    break;
                }
                pending.clear();
            }
            match from.read(&mut buf) {
                Ok(0) => {
                    // The sender closed: pass what is held on, then the close.
                    if !pending.is_empty() && !direction.stopped {
                        let _ = to.write_all(&pending);
                    }
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
                Ok(n) => {
                    if direction.loss > 0.0 && self.rng.gen_bool(direction.loss.min(1.0)) {
                        break;
                    }
                    if direction.delay_ms > 0 {
                        std::thread::sleep(Duration::from_millis(direction.delay_ms));
                    }
                    pending.extend_from_slice(&buf[..n]);
                    if !direction.stopped {
                        if to.write_all(&pending).is_err() {
                            break;
                        }
                        pending.clear();
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        // A reset: both ends see the connection end.
        let _ = from.shutdown(Shutdown::Both);
        let _ = to.shutdown(Shutdown::Both);
    }
}
