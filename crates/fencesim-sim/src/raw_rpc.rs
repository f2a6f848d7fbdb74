//! A plain request/response workload on raw madsim (its own `net::Endpoint`), with no history,
//! no checker and none of fencesim's transport: the baseline `fencesim bench` compares a
//! fencesim run's cost per message against (issue 9's `ratio`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;

use madsim::net::Endpoint;

use crate::seeds::{self, Stream};

const PORT: u16 = 7000;
const REQUEST: u64 = 1;
const REPLY: u64 = 2;

fn addr(group: u8, i: usize) -> SocketAddr {
    SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, group, i as u8 + 1)), PORT)
}

/// Run `clients` clients that each send `requests` requests, round-robin over `servers`
/// servers, each waiting for its reply, under madsim seeded from `seed`. Returns the number of
/// messages sent (requests and replies). Runs on a fresh thread, as fencesim's runs do.
pub fn run(seed: u64, servers: usize, clients: usize, requests: u64) -> u64 {
    // Outside any simulation, as in `runner::run`: madsim's runtime is per thread.
    // Named, so that a profiler can tell its samples from fencesim's (`fencesim-seed-N`).
    #[allow(clippy::disallowed_methods)]
    let joined = std::thread::Builder::new()
        .name(format!("raw-madsim-{seed}"))
        .spawn(move || {
            let rt = madsim::runtime::Runtime::with_seed_and_config(
                seeds::sub_seed(seed, Stream::Runtime),
                madsim::Config::default(),
            );
            rt.block_on(workload(servers, clients, requests))
        })
        .and_then(|thread| thread.join().map_err(|_| std::io::Error::other("panicked")));
    joined.unwrap_or(0)
}

async fn workload(servers: usize, clients: usize, requests: u64) -> u64 {
    let handle = madsim::runtime::Handle::current();
    for s in 0..servers {
        let node = handle
            .create_node()
            .name(format!("server-{s}"))
            .ip(addr(1, s).ip())
            .build();
        node.spawn(serve(addr(1, s)));
    }
    let mut done = Vec::new();
    for c in 0..clients {
        let node = handle
            .create_node()
            .name(format!("client-{c}"))
            .ip(addr(2, c).ip())
            .build();
        done.push(node.spawn(call(addr(2, c), servers, requests)));
    }
    let mut messages = 0;
    for d in done {
        messages += d.await.unwrap_or(0);
    }
    messages
}

async fn serve(me: SocketAddr) {
    let Ok(ep) = Endpoint::bind(me).await else {
        return;
    };
    let mut buf = [0u8; 64];
    while let Ok((len, from)) = ep.recv_from(REQUEST, &mut buf).await {
        let _ = ep.send_to(from, REPLY, &buf[..len]).await;
    }
}

async fn call(me: SocketAddr, servers: usize, requests: u64) -> u64 {
    // Let the servers bind first. (Raw madsim, as the baseline must be.)
    #[allow(clippy::disallowed_methods)]
    madsim::time::sleep(Duration::from_millis(1)).await;
    let Ok(ep) = Endpoint::bind(me).await else {
        return 0;
    };
    let mut buf = [0u8; 64];
    let mut sent = 0;
    for r in 0..requests {
        let server = addr(1, (r as usize) % servers);
        if ep.send_to(server, REQUEST, &r.to_le_bytes()).await.is_err() {
            break;
        }
        if ep.recv_from(REPLY, &mut buf).await.is_err() {
            break;
        }
        sent += 2;
    }
    sent
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_request_gets_its_reply() {
        assert_eq!(super::run(1, 2, 3, 10), 60);
        assert_eq!(super::run(2, 1, 1, 0), 0);
    }
}
