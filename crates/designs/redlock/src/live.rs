//! Redlock's live form (`kind = "redlock"` in live mode, docs/live.md): the Redlock algorithm
//! of the Redis documentation against real `redis-server` nodes, one connection per node
//! through the `redis` crate. The decision is the simulated client's own sans-IO core
//! ([`Redlock`]): SET the lock's key with a random value, NX and PX the TTL, on every node at once, each
//! with the node timeout; a majority within the validity (TTL - elapsed - drift) holds the lock;
//! otherwise the value is deleted everywhere. Renewal extends the key where it still holds the
//! client's value, release deletes it there (both by Lua compare-and-set scripts, as the
//! documentation's). With `token_source = "counter"` the token is an INCR on the first node.
//!
//! Redis decides expiry by its own wall clock, which live mode can step (libfaketime).
//!
//! What each node's replies show of its key is recorded as that node's key events
//! ([`LockCall::observe`]): `key-set` for a SET NX that answered OK, `key-extend` and
//! `key-delete` for scripts that answered 1, `key-refuse` for those that answered no. A node
//! that does not answer says nothing. A key's expiry on the node, or its loss in a restart,
//! has no reply and so no record: the checker sees a loss as the key set again for another
//! client with no end in between, as it does in simulation (docs/live.md).

use std::time::Duration;

use fencesim_live::form::{
    only_knobs, Endpoints, Grant, LiveLockService, LockAnswer, LockCall, LockServiceForm,
    LockSession, Needs, RedisNeeds, RedisPersistence, Unknown,
};
use fencesim_live::history::{Event, EventKind};
use fencesim_live::redis::{self, Connection, FromRedisValue};
use fencesim_live::toml;

use crate::{Decision, Redlock, RedlockConfig};

/// Redlock's entry in a registry's live forms.
pub const REDLOCK_LIVE: LockServiceForm = LockServiceForm {
    make,
    client: |name, knobs| only_knobs(&format!("[[clients]] {name}:"), knobs, &[]),
};

/// The settings the live form honours.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveRedlock {
    replicas: usize,
    persistence: RedisPersistence,
    drift_ppm: u64,
    node_timeout_ms: u64,
    recheck_elapsed: bool,
    counter_token: bool,
}

fn make(knobs: &toml::Table) -> Result<Box<dyn LiveLockService>, String> {
    only_knobs(
        "[lock_service]",
        knobs,
        &[
            ("replicas", &[]),
            // A node's unsynced writes are emulated as all lost (no persistence) or none
            // (appendfsync always); the last sync point of `periodic` is not.
            ("fsync", &["always", "never"]),
            // Real Redis expires keys by its wall clock.
            ("expiry_clock", &["wall"]),
            ("recheck_elapsed", &[]),
            ("drift_ppm", &[]),
            ("node_timeout_ms", &[]),
            ("token_source", &["random", "counter"]),
            ("restart_delay_ms", &["0"]),
        ],
    )?;
    let int = |name: &str, default: i64| {
        knobs
            .get(name)
            .and_then(toml::Value::as_integer)
            .unwrap_or(default)
            .max(0) as u64
    };
    let text = |name: &str| knobs.get(name).and_then(toml::Value::as_str).unwrap_or("");
    Ok(Box::new(LiveRedlock {
        replicas: int("replicas", 5) as usize,
        persistence: match text("fsync") {
            "always" => RedisPersistence::Always,
            _ => RedisPersistence::None,
        },
        drift_ppm: int("drift_ppm", 10_000),
        node_timeout_ms: int("node_timeout_ms", 50).max(1),
        recheck_elapsed: knobs
            .get("recheck_elapsed")
            .and_then(toml::Value::as_bool)
            .unwrap_or(true),
        counter_token: text("token_source") == "counter",
    }))
}

impl LiveLockService for LiveRedlock {
    fn needs(&self) -> Needs {
        Needs {
            postgres_schema: None,
            redis: Some(RedisNeeds {
                nodes: (1..=self.replicas).map(|n| format!("redis-{n}")).collect(),
                persistence: self.persistence,
            }),
            ..Needs::default()
        }
    }

    fn token_order(&self) -> fencesim_live::form::TokenOrder {
        if self.counter_token {
            fencesim_live::form::TokenOrder::Value
        } else {
            fencesim_live::form::TokenOrder::Acquisition
        }
    }

    fn unobserved(&self) -> Vec<String> {
        vec![
            "a Redis node's own expiry of a key has no reply and no key-expire record; a key \
             that a jumped clock expired early shows as the key set for another client before \
             its TTL ran out"
                .to_owned(),
            "a key lost in a restart has no record of its own; it shows as the key set again for \
             another client with no end in between, after the node's crash"
                .to_owned(),
            "a node that did not answer has no key event; a key event is stamped when the client \
             had the reply, a few ms after the node acted"
                .to_owned(),
        ]
    }

    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn LockSession>, String> {
        if endpoints.redis.len() != self.replicas {
            return Err(format!(
                "Redlock needs {} Redis nodes, the trial started {}",
                self.replicas,
                endpoints.redis.len()
            ));
        }
        Ok(Box::new(RedlockSession {
            settings: *self,
            nodes: endpoints.redis.iter().map(|url| Node::new(url)).collect(),
            value: None,
            prefix: endpoints.key_prefix.clone(),
        }))
    }
}

/// One Redis node as a client reaches it: a connection, opened again after any failure (a
/// timed-out request leaves its answer on the old connection).
struct Node {
    url: String,
    connection: Option<Connection>,
}

impl Node {
    fn new(url: &str) -> Self {
        Node {
            url: url.to_owned(),
            connection: None,
        }
    }

    /// Run `cmd` within `timeout`; `None` if the node did not answer in time or failed.
    fn query<T: FromRedisValue>(&mut self, cmd: &redis::Cmd, timeout: Duration) -> Option<T> {
        self.run(timeout, |c| cmd.query::<T>(c))
    }

    fn script<T: FromRedisValue>(
        &mut self,
        script: &redis::Script,
        key: &str,
        args: &[String],
        timeout: Duration,
    ) -> Option<T> {
        let mut invocation = script.key(key);
        for a in args {
            invocation.arg(a);
        }
        self.run(timeout, |c| invocation.invoke::<T>(c))
    }

    /// Run `f` on the node's connection. A connection that was open before and fails at once
    /// (not by a timeout) died while idle, as when the node restarted: `f` runs once more on a
    /// new one, which a client library's reconnect would do too. A timeout is the node's
    /// answer being late: that is not retried (the command may still run).
    fn run<T>(
        &mut self,
        timeout: Duration,
        f: impl Fn(&mut Connection) -> redis::RedisResult<T>,
    ) -> Option<T> {
        let reused = self.connection.is_some();
        let first = self.connection(timeout).map(&f);
        let answer = match first {
            Some(Ok(v)) => Some(v),
            Some(Err(e)) if reused && !e.is_timeout() => {
                self.connection = None;
                self.connection(timeout).and_then(|c| f(c).ok())
            }
            _ => None,
        };
        if answer.is_none() {
            self.connection = None;
        }
        answer
    }

    fn connection(&mut self, timeout: Duration) -> Option<&mut Connection> {
        if self.connection.is_none() {
            let client = redis::Client::open(self.url.as_str()).ok()?;
            let c = client.get_connection_with_timeout(timeout).ok()?;
            self.connection = Some(c);
        }
        let c = self.connection.as_mut()?;
        c.set_read_timeout(Some(timeout)).ok()?;
        c.set_write_timeout(Some(timeout)).ok()?;
        Some(c)
    }
}

/// A client's Redlock: its nodes, and the value it holds the lock with.
struct RedlockSession {
    settings: LiveRedlock,
    nodes: Vec<Node>,
    value: Option<u64>,
    /// Before every key (servers of the user's keep their own keys apart).
    prefix: String,
}

/// Extend the key by ARGV[2] ms if it still holds ARGV[1].
const EXTEND: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
                      return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
/// Delete the key if it still holds ARGV[1].
const DELETE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then \
                      return redis.call('del', KEYS[1]) else return 0 end";

impl RedlockSession {
    fn timeout(&self) -> Duration {
        Duration::from_millis(self.settings.node_timeout_ms)
    }

    fn redlock(&self, call: &LockCall<'_>) -> Redlock {
        let config = RedlockConfig {
            nodes: self.nodes.len(),
            ttl_ms: call.ttl_ms,
            drift_ppm: self.settings.drift_ppm,
            recheck_elapsed: self.settings.recheck_elapsed,
        };
        Redlock::begin(config, (call.now_ms)())
    }

    /// Delete `value` everywhere, without looking at the answers: a partial acquisition's
    /// keys would expire anyway. How many nodes deleted it.
    fn unlock_everywhere(&mut self, call: &LockCall<'_>, value: u64) -> usize {
        let args = [value.to_string()];
        let answered = (EventKind::KeyDelete, "delete: not its value");
        let replies = self.script_everywhere(call, DELETE, &args, answered, value, None);
        replies.iter().filter(|r| **r == Some(1)).count()
    }

    /// Run `script` on the lock's key at every node with `args`, and record each answer as
    /// that node's key event: `done.0` for 1, a `key-refuse` saying `done.1` otherwise (the
    /// key held `value`, with PX `ttl_ms` where the script sets one). The answers in the
    /// nodes' order, `None` where a node did not answer in time.
    fn script_everywhere(
        &mut self,
        call: &LockCall<'_>,
        script: &str,
        args: &[String],
        done: (EventKind, &'static str),
        value: u64,
        ttl_ms: Option<u64>,
    ) -> Vec<Option<i64>> {
        let script = redis::Script::new(script);
        let timeout = self.timeout();
        let key = format!("{}{}", self.prefix, call.lock);
        let replies = fan_out(&mut self.nodes, |node| {
            node.script::<i64>(&script, &key, args, timeout)
        });
        let (kind, refused) = done;
        let what = |reply: &i64| match reply {
            1 => Some((kind, None)),
            _ => Some((EventKind::KeyRefuse, Some(refused))),
        };
        observe_each(call, &replies, what, value, ttl_ms);
        replies
    }
}

/// Ask every node at once, each on a thread of its own, and wait for all (each within its
/// timeout), as the Redlock documentation advises and the simulated client does: a slow or
/// stalled node costs its timeout once, not once per node before it. The answers come back in
/// the nodes' order. Live code only: a live form never runs inside a simulation.
fn fan_out<T: Send>(nodes: &mut [Node], ask: impl Fn(&mut Node) -> T + Sync) -> Vec<T> {
    let ask = &ask;
    std::thread::scope(|scope| {
        let asked: Vec<_> = nodes
            .iter_mut()
            .map(|node| scope.spawn(move || ask(node)))
            .collect();
        asked
            .into_iter()
            .map(|a| a.join().expect("a Redis call does not panic"))
            .collect()
    })
}

impl LockSession for RedlockSession {
    fn acquire(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Grant>, Unknown> {
        let key = format!("{}{}", self.prefix, call.lock);
        let value = call.random;
        let mut redlock = self.redlock(call);
        let timeout = self.timeout();
        let mut set = redis::cmd("SET");
        set.arg(&key)
            .arg(value.to_string())
            .arg("NX")
            .arg("PX")
            .arg(call.ttl_ms);
        let replies = fan_out(&mut self.nodes, |node| {
            node.query::<Option<String>>(&set, timeout)
        });
        observe_each(
            call,
            &replies,
            |reply| match reply {
                Some(_) => Some((EventKind::KeySet, None)),
                None => Some((EventKind::KeyRefuse, Some("SET NX: held by another value"))),
            },
            value,
            Some(call.ttl_ms),
        );
        for (i, reply) in replies.iter().enumerate() {
            redlock.on_reply(i, matches!(reply, Some(Some(_))));
        }
        let error = match redlock.decide((call.now_ms)()) {
            Decision::Acquired { valid_until_ms, .. } => {
                let token = if self.settings.counter_token {
                    let counter = format!("{key}:token");
                    let incr = redis::cmd("INCR").arg(counter).clone();
                    self.nodes[0].query::<u64>(&incr, timeout)
                } else {
                    Some(value)
                };
                match token {
                    Some(token) => {
                        self.value = Some(value);
                        return Ok(Ok(Grant {
                            token,
                            valid_until_ms: Some(valid_until_ms),
                        }));
                    }
                    None => "no token from the counter node".to_owned(),
                }
            }
            Decision::NoMajority { granted } => {
                format!("only {granted} of {} nodes granted", self.nodes.len())
            }
            Decision::Expired { validity_ms } => {
                format!("a majority granted, but the validity had run out ({validity_ms} ms)")
            }
        };
        self.unlock_everywhere(call, value);
        Ok(Err(error))
    }

    fn renew(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Option<i64>>, Unknown> {
        let value = self.value.unwrap_or(call.token);
        let mut redlock = self.redlock(call);
        let args = [value.to_string(), call.ttl_ms.to_string()];
        let answered = (EventKind::KeyExtend, "extend: not its value");
        let replies =
            self.script_everywhere(call, EXTEND, &args, answered, value, Some(call.ttl_ms));
        for (i, reply) in replies.iter().enumerate() {
            redlock.on_reply(i, *reply == Some(1));
        }
        Ok(match redlock.decide((call.now_ms)()) {
            Decision::Acquired { valid_until_ms, .. } => Ok(Some(valid_until_ms)),
            _ => Err("lock lost".to_owned()),
        })
    }

    fn release(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<()>, Unknown> {
        let value = self.value.take().unwrap_or(call.token);
        let deleted = self.unlock_everywhere(call, value);
        Ok(if deleted > self.nodes.len() / 2 {
            Ok(())
        } else {
            Err(format!("our value was on only {deleted} nodes"))
        })
    }
}

/// Record, as node `redis-N`'s key event, what each node's answer (`Some`: it answered) shows
/// of its key of `call.lock` with `value`: `what` gives the kind (and a refusal's reason) for
/// an answer. The names are the design's own (`redis-1` .. `redis-N`, in the nodes' order),
/// as in simulation.
fn observe_each<R>(
    call: &LockCall<'_>,
    replies: &[Option<R>],
    what: impl Fn(&R) -> Option<(EventKind, Option<&'static str>)>,
    value: u64,
    ttl_ms: Option<u64>,
) {
    let nodes = u32::try_from(replies.len()).unwrap_or(u32::MAX);
    for (i, reply) in replies.iter().enumerate() {
        let Some((kind, why)) = reply.as_ref().and_then(&what) else {
            continue;
        };
        (call.observe)(Event {
            node: format!("redis-{}", i + 1).into(),
            lock: Some(call.lock.into()),
            holder: Some(call.holder.into()),
            token: Some(value),
            ttl_ms: ttl_ms.filter(|_| matches!(kind, EventKind::KeySet | EventKind::KeyExtend)),
            nodes: Some(nodes).filter(|_| kind == EventKind::KeySet),
            detail: why.map(str::to_owned),
            ..Event::new(kind)
        });
    }
}
