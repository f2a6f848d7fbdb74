//! The client side of Redlock (antirez's algorithm, as Kleppmann 2016 examines it): the client
//! itself locks N independent Redis-like nodes and decides, by the sans-IO [`Redlock`], whether
//! it holds the lock. Each step is still one Jepsen operation (acquire, renew, release); the
//! per-node requests it fans out are not operations of their own.

use std::time::Duration;

use fencesim_history::{OpFn, OpType};
use fencesim_redlock::{Decision, Redlock, RedlockConfig};
use fencesim_scenario::{NodeEvent, RedlockSpec, TokenSource};
use rand::Rng;

use super::Client;
use crate::message::Message;
use crate::nemesis::When;
use crate::recorder::true_ns;

impl Client {
    fn redlock_config(&self, spec: RedlockSpec) -> RedlockConfig {
        RedlockConfig {
            nodes: self.lease_nodes.len(),
            ttl_ms: self.spec.ttl_ms,
            drift_ppm: spec.drift_ppm,
            recheck_elapsed: spec.recheck_elapsed,
        }
    }

    /// Lock a majority of the nodes with a fresh random value, retrying with backoff; returns
    /// the token to present: the value itself, or a counter from `redis-1`.
    pub(super) async fn redlock_acquire(&mut self, spec: RedlockSpec) -> u64 {
        loop {
            self.safepoint(When::Before, NodeEvent::Acquire).await;
            let op = self.template(OpFn::Acquire, None, None);
            let invoke = self.world.op(op.record(OpType::Invoke));
            // 53 bits, so the value survives JSON tools that read numbers as doubles (jq, JS).
            let value: u64 = self.rng.gen_range(1..1 << 53);
            let started_ms = self.world.mono_ms(&self.spec.name);
            let mut redlock = Redlock::begin(self.redlock_config(spec), started_ms);
            let requests = self
                .lease_nodes
                .iter()
                .map(|_| Message::RedisSet {
                    key: self.spec.lock.clone(),
                    value,
                    ttl_ms: self.spec.ttl_ms,
                })
                .collect();
            let replies = self.ask(invoke, requests, spec.node_timeout_ms).await;
            for (node, reply) in replies.iter().enumerate() {
                redlock.on_reply(node, matches!(reply, Some(Message::RedisSetReply(true))));
            }
            let error = match redlock.decide(self.world.mono_ms(&self.spec.name)) {
                Decision::Acquired { valid_until_ms, .. } => {
                    match self.redlock_token(spec, invoke, value).await {
                        Some(token) => {
                            self.lock_value = Some(value);
                            self.complete(&op, OpType::Ok, |o| o.token = Some(token));
                            self.believe_until(
                                token,
                                valid_until_ms - self.spec.safety_margin_ms as i64,
                            );
                            self.safepoint(When::After, NodeEvent::Grant).await;
                            return token;
                        }
                        None => "no token from the counter node".to_owned(),
                    }
                }
                Decision::NoMajority { granted } => {
                    format!("only {granted} of {} nodes granted", self.lease_nodes.len())
                }
                Decision::Expired { validity_ms } => {
                    format!("a majority granted, but the validity had run out ({validity_ms} ms)")
                }
            };
            self.complete(&op, OpType::Fail, |o| o.error = Some(error));
            // Undo the partial acquisition everywhere, without waiting: the keys expire anyway.
            self.send_all(invoke, |key| Message::RedisDelete { key, value });
            self.backoff().await;
        }
    }

    /// The token for an acquisition with `value`: the value, or `INCR` on the first node.
    async fn redlock_token(&mut self, spec: RedlockSpec, invoke: u64, value: u64) -> Option<u64> {
        match spec.token_source {
            TokenSource::Random => Some(value),
            TokenSource::Counter => {
                let incr = Message::RedisIncr {
                    counter: format!("{}:token", self.spec.lock),
                };
                let mut requests = vec![None; self.lease_nodes.len()];
                requests[0] = Some(incr);
                match self.ask_some(invoke, requests, spec.node_timeout_ms).await[0] {
                    Some(Message::RedisIncrReply(token)) => Some(token),
                    _ => None,
                }
            }
        }
    }

    /// Extend the lock on a majority in time; false if that failed (the lock is lost).
    pub(super) async fn redlock_extend(&mut self, spec: RedlockSpec, token: u64) -> bool {
        self.safepoint(When::Before, NodeEvent::Renew).await;
        let op = self.template(OpFn::Renew, Some(token), None);
        let invoke = self.world.op(op.record(OpType::Invoke));
        let value = self.lock_value.unwrap_or(token);
        let started_ms = self.world.mono_ms(&self.spec.name);
        let mut redlock = Redlock::begin(self.redlock_config(spec), started_ms);
        let (key, ttl_ms) = (self.spec.lock.clone(), self.spec.ttl_ms);
        let requests = self
            .lease_nodes
            .iter()
            .map(|_| Message::RedisExtend {
                key: key.clone(),
                value,
                ttl_ms,
            })
            .collect();
        let replies = self.ask(invoke, requests, spec.node_timeout_ms).await;
        for (node, reply) in replies.iter().enumerate() {
            redlock.on_reply(node, matches!(reply, Some(Message::RedisExtendReply(true))));
        }
        let kept = match redlock.decide(self.world.mono_ms(&self.spec.name)) {
            Decision::Acquired { valid_until_ms, .. } => {
                self.complete(&op, OpType::Ok, |_| {});
                self.believe_until(token, valid_until_ms - self.spec.safety_margin_ms as i64);
                true
            }
            _ => {
                self.complete(&op, OpType::Fail, |o| o.error = Some("lock lost".into()));
                self.world.end_belief(&self.spec.name, "extension failed");
                false
            }
        };
        self.safepoint(When::After, NodeEvent::Renew).await;
        kept
    }

    /// Release on every node by compare-and-delete; ok if a majority still held our value.
    pub(super) async fn redlock_release(&mut self, spec: RedlockSpec, token: u64) {
        self.safepoint(When::Before, NodeEvent::Release).await;
        self.world.end_belief(&self.spec.name, "released");
        let op = self.template(OpFn::Release, Some(token), None);
        let invoke = self.world.op(op.record(OpType::Invoke));
        let value = self.lock_value.take().unwrap_or(token);
        let key = self.spec.lock.clone();
        let requests = self
            .lease_nodes
            .iter()
            .map(|_| Message::RedisDelete {
                key: key.clone(),
                value,
            })
            .collect();
        let replies = self.ask(invoke, requests, spec.node_timeout_ms).await;
        let deleted = replies
            .iter()
            .filter(|r| matches!(r, Some(Message::RedisDeleteReply(true))))
            .count();
        if deleted > self.lease_nodes.len() / 2 {
            self.complete(&op, OpType::Ok, |_| {});
        } else {
            let error = format!("our value was on only {deleted} nodes");
            self.complete(&op, OpType::Fail, |o| o.error = Some(error));
        }
        self.safepoint(When::After, NodeEvent::Release).await;
    }

    /// Send `make(key)` to every node without waiting for the replies.
    fn send_all(&self, invoke: u64, make: impl Fn(String) -> Message) {
        for node in &self.lease_nodes {
            let body = make(self.spec.lock.clone());
            self.world
                .net
                .send(&self.spec.name, node, None, Some(invoke), body);
        }
    }

    /// Send one request to every node and gather the replies (in node order).
    async fn ask(
        &mut self,
        invoke: u64,
        requests: Vec<Message>,
        timeout_ms: u64,
    ) -> Vec<Option<Message>> {
        let requests = requests.into_iter().map(Some).collect();
        self.ask_some(invoke, requests, timeout_ms).await
    }

    /// Send `requests[i]` (if any) to node `i` at once, and gather the replies that arrive
    /// within `timeout_ms`, plus any already waiting in the inbox when the time is up: a client
    /// that was paused meanwhile finds its buffered replies (case K05).
    async fn ask_some(
        &mut self,
        invoke: u64,
        requests: Vec<Option<Message>>,
        timeout_ms: u64,
    ) -> Vec<Option<Message>> {
        let mut ids: Vec<Option<u64>> = Vec::with_capacity(requests.len());
        for (node, body) in self.lease_nodes.iter().zip(requests) {
            ids.push(body.map(|b| {
                self.world
                    .net
                    .send(&self.spec.name, node, None, Some(invoke), b)
            }));
        }
        let mut replies: Vec<Option<Message>> = vec![None; ids.len()];
        let mut waiting = ids.iter().filter(|i| i.is_some()).count();
        let deadline_ns = true_ns() + timeout_ms * 1_000_000;
        let file = |reply_to: Option<u64>, body: Message, replies: &mut Vec<Option<Message>>| {
            let slot = ids.iter().position(|i| i.is_some() && *i == reply_to);
            match slot {
                Some(n) if replies[n].is_none() => {
                    replies[n] = Some(body);
                    true
                }
                _ => false,
            }
        };
        while waiting > 0 {
            let left = Duration::from_nanos(deadline_ns.saturating_sub(true_ns()));
            match crate::timer::timeout(left, self.inbox.recv()).await {
                Ok(Ok(env)) => {
                    if file(env.reply_to, env.body, &mut replies) {
                        waiting -= 1;
                    }
                }
                _ => break,
            }
        }
        while let Ok(env) = self.inbox.try_recv() {
            file(env.reply_to, env.body, &mut replies);
        }
        replies
    }
}
