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
    /// The client's end of the link (its name, for faults).
    pub client: String,
    /// The server's end (`lease-service`, `resource`, `redis-3`).
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
        let (s, st) = (state.clone(), stop.clone());
        std::thread::spawn(move || accept(listener, target, s, st, seed));
        Ok(Proxy {
            client: client.to_owned(),
            server: server.to_owned(),
            port,
            state,
            stop,
        })
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

fn accept(
    listener: TcpListener,
    target: u16,
    state: Arc<Mutex<LinkState>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
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
        let refused = state
            .lock()
            .map(|s| s.reset_when_stopped && (s.up.stopped || s.down.stopped))
            .unwrap_or(true);
        if refused {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        }
        let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        n += 1;
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
                rng: rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(
                    seed ^ (n << 1 | u64::from(up)),
                ),
            };
            std::thread::spawn(move || pump.run(from, to));
        }
    }
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
