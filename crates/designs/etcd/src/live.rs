//! The etcd design's live form (`kind = "etcd"` in live mode, docs/live.md): the lock recipe
//! against a real etcd cluster that live mode starts (Debian's `etcd-server`), through etcd's
//! JSON gateway (gRPC-gateway over HTTP) rather than its gRPC API: the same server-side calls
//! (`LeaseGrant`, `Lock`, `LeaseKeepAlive`, `Unlock`, `LeaseRevoke`, `Range`), at the price of
//! one more JSON hop, and no protobuf toolchain in the build.
//!
//! An acquire grants a session lease of the client's TTL (whole seconds, rounded up), calls
//! `Lock(name = lock, lease)`, which blocks in the server until every earlier key under the
//! lock is gone, keeping the lease alive beside it (a thread, every third of the TTL, as
//! clientv3's session does: the server does not), then reads its key's `create_revision`: the
//! fencing token. etcd 3.4.23's lock API returns even if the caller's lease expired while it
//! waited and its key is gone (tried by hand: docs/etcd.md); the client checks
//! (`lock_checks_own_key`, the fixed `concurrency.Mutex`) or trusts it (etcd 3.4.3's client,
//! its token then read from the store's history). Once it holds, a keepalive sent at once
//! gives the time its deadline counts from. A renewal is a keepalive; a release unlocks (deletes
//! the key) and revokes the lease. A lock call that times out revokes its lease, as
//! `concurrency.Mutex` deletes its key when its wait fails.
//!
//! The history has what the clients saw: their operations and beliefs, and the resource's
//! decisions. etcd's own decisions (a lease expired by the lessor, a key deleted, which member
//! leads) have no reply and are not in it; the trial says so.

use std::time::Duration;

use base64::Engine as _;
use fencesim_live::etcd_gateway::{agent, keeping_alive, Gateway};
use fencesim_live::form::{
    only_knobs, Endpoints, EtcdNeeds, Grant, LiveLockService, LockAnswer, LockCall,
    LockServiceForm, LockSession, Needs, Unknown,
};
use fencesim_live::serde_json::{json, Value};
use fencesim_live::toml;

/// The etcd design's entry in a registry's live forms.
pub const ETCD_LIVE: LockServiceForm = LockServiceForm {
    make: make_etcd,
    client: check_client,
};

/// The etcd design against real members `etcd-1`..`etcd-N`.
#[derive(Clone, Copy, Debug)]
pub struct LiveEtcd {
    members: usize,
    /// Whether the client checks, when its lock call returns, that its key still exists
    /// (`lock_checks_own_key`): the fixed `concurrency.Mutex` does; without it the client
    /// trusts the server's answer, as etcd 3.4.3's did.
    checks_own_key: bool,
}

fn make_etcd(knobs: &toml::Table) -> Result<Box<dyn LiveLockService>, String> {
    only_knobs(
        "[lock_service]",
        knobs,
        &[
            ("members", &["1", "3", "5"]),
            // The client's check of its own key when its lock call returns (the server's lock
            // API returns all the same: etcd 3.4.23 does, docs/etcd.md).
            ("lock_checks_own_key", &["true", "false"]),
        ],
    )?;
    let members = knobs
        .get("members")
        .and_then(toml::Value::as_integer)
        .map_or(3, |n| n as usize);
    let checks_own_key = knobs
        .get("lock_checks_own_key")
        .and_then(toml::Value::as_bool)
        .unwrap_or(true);
    Ok(Box::new(LiveEtcd {
        members,
        checks_own_key,
    }))
}

/// The live client keeps the lease services' defaults, as the single service's live form.
fn check_client(name: &str, knobs: &toml::Table) -> Result<(), String> {
    only_knobs(
        &format!("[[clients]] {name}:"),
        knobs,
        &[
            ("deadline_from", &["request"]),
            ("renew_after_failure", &["retry"]),
            ("reclaim", &["by-session"]),
            ("on_lost_lease", &["stop"]),
        ],
    )
}

impl LiveLockService for LiveEtcd {
    fn needs(&self) -> Needs {
        Needs {
            etcd: Some(EtcdNeeds {
                nodes: (1..=self.members).map(|n| format!("etcd-{n}")).collect(),
            }),
            ..Needs::default()
        }
    }

    fn unobserved(&self) -> Vec<String> {
        vec![
            "etcd's own decisions (a lease its lessor expired, the keys that went with it, \
             which member leads) have no reply to a client and are not in the history: \
             writes after a lease's end are not measured"
                .to_owned(),
            "lock_checks_own_key is the client's check, once the server's lock call returns, \
             that its key still exists (the server's lock API returns whether or not it does)"
                .to_owned(),
        ]
    }

    fn session(&self, endpoints: &Endpoints) -> Result<Box<dyn LockSession>, String> {
        if endpoints.etcd.is_empty() {
            return Err("no etcd member to connect to".to_owned());
        }
        Ok(Box::new(EtcdSession {
            members: endpoints.etcd.iter().map(|url| Gateway::new(url)).collect(),
            member: 0,
            timeout_ms: endpoints.timeout_ms.max(1),
            checks_own_key: self.checks_own_key,
            prefix: endpoints.key_prefix.clone(),
            held: Vec::new(),
        }))
    }
}

/// A lock this client holds: its token, its key (base64, as the gateway names it) and its
/// session lease.
#[derive(Clone, Debug)]
struct Held {
    token: u64,
    key: String,
    lease: String,
}

/// A client's connection to the cluster: the member it asks (the next one after a call that
/// got no answer), and the locks it holds.
struct EtcdSession {
    members: Vec<Gateway>,
    member: usize,
    timeout_ms: u64,
    checks_own_key: bool,
    /// Put before every lock name: a trial's locks on a cluster of the user's
    /// ([`Endpoints::key_prefix`]).
    prefix: String,
    held: Vec<Held>,
}

impl EtcdSession {
    /// POST to the member asked now, within `timeout_ms`; a call without an answer moves the
    /// session to the next member for the following calls.
    fn call(&mut self, path: &str, body: &Value, timeout_ms: u64) -> Result<Value, Unknown> {
        let agent = agent(Duration::from_millis(timeout_ms));
        let answer = self.members[self.member].post(&agent, path, body);
        if answer.is_err() {
            self.member = (self.member + 1) % self.members.len();
        }
        answer.map_err(|e| format!("{path}: {e}"))
    }

    fn grant_lease(&mut self, ttl_ms: u64) -> Result<String, Unknown> {
        let ttl_s = ttl_ms.div_ceil(1000).max(1);
        let answer = self.call("/v3/lease/grant", &json!({ "TTL": ttl_s }), self.timeout_ms)?;
        text(&answer, "ID").ok_or_else(|| format!("/v3/lease/grant: no lease ID in {answer}"))
    }

    /// A keepalive: `Ok(true)` if the lease is still alive (its TTL left is positive).
    fn keep_alive(&mut self, lease: &str) -> Result<bool, Unknown> {
        let body = json!({ "ID": lease });
        let answer = self.call("/v3/lease/keepalive", &body, self.timeout_ms)?;
        let result = answer.get("result").unwrap_or(&answer);
        Ok(number(result, "TTL").is_some_and(|ttl| ttl > 0))
    }

    /// Revoke `lease`, deleting its keys; an error is ignored (the lease then runs out).
    fn revoke(&mut self, lease: &str) {
        let _ = self.call("/v3/lease/revoke", &json!({ "ID": lease }), self.timeout_ms);
    }

    fn create_revision(&mut self, key: &str) -> Result<Option<u64>, Unknown> {
        let answer = self.call("/v3/kv/range", &json!({ "key": key }), self.timeout_ms)?;
        let kvs = answer.get("kvs").and_then(Value::as_array);
        Ok(kvs
            .and_then(|kvs| kvs.first())
            .and_then(|kv| number(kv, "create_revision")))
    }

    /// The create revision a deleted `key` had, read from the store's history (nothing is
    /// compacted in a trial): the latest revision before `revision` at which it existed.
    fn created_before(&mut self, key: &str, revision: u64) -> Result<Option<u64>, Unknown> {
        for at in (1..revision).rev() {
            let body = json!({ "key": key, "revision": at });
            let answer = self.call("/v3/kv/range", &body, self.timeout_ms)?;
            let kvs = answer.get("kvs").and_then(Value::as_array);
            if let Some(kv) = kvs.and_then(|kvs| kvs.first()) {
                return Ok(number(kv, "create_revision"));
            }
        }
        Ok(None)
    }

    fn held(&self, token: u64) -> Option<Held> {
        self.held.iter().find(|h| h.token == token).cloned()
    }
}

impl LockSession for EtcdSession {
    fn acquire(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Grant>, Unknown> {
        let lease = self.grant_lease(call.ttl_ms)?;
        let name = format!("{}{}", self.prefix, call.lock);
        let name = base64::engine::general_purpose::STANDARD.encode(name);
        // It blocks until the lock is free, at most twice its TTL and its timeout (the simulated
        // client waits twice the service's longest TTL).
        let wait_ms = 2 * call.ttl_ms + self.timeout_ms;
        let body = json!({ "name": name, "lease": lease });
        // The server does not keep the lease alive while the call blocks: the session does,
        // beside it, as clientv3's does (a stopped process keeps nothing alive).
        let member = self.members[self.member].clone();
        let answer = keeping_alive(&member, &lease, call.ttl_ms, || {
            self.call("/v3/lock/lock", &body, wait_ms)
        });
        let (revision, key) = match answer {
            Ok(answer) => (text(&answer["header"], "revision"), text(&answer, "key")),
            Err(e) => {
                self.revoke(&lease);
                return Err(e);
            }
        };
        let (Some(revision), Some(key)) = (revision.and_then(|r| r.parse().ok()), key) else {
            self.revoke(&lease);
            return Ok(Err("the lock call returned no key".to_owned()));
        };
        let token = match self.create_revision(&key)? {
            Some(token) => token,
            // Its key is gone: its lease expired while the call waited, and the server's lock
            // call returned all the same. The fixed recipe fails here.
            None if self.checks_own_key => {
                self.revoke(&lease);
                let lost = "waited until its own lease expired: its lock key was gone";
                return Ok(Err(lost.to_owned()));
            }
            // etcd 3.4.3's client: it holds the lock, it believes, with its key's revision.
            None => match self.created_before(&key, revision)? {
                Some(token) => {
                    self.held.push(Held { token, key, lease });
                    return Ok(Ok(Grant {
                        token,
                        valid_until_ms: None,
                    }));
                }
                None => return Ok(Err("its lock key was never found".to_owned())),
            },
        };
        // The deadline counts from a keepalive of its own, sent now: the last one the thread
        // sent while the call blocked may not have been answered.
        let sent_ms = (call.now_ms)();
        if !self.keep_alive(&lease)? {
            return Ok(Err(
                "its session lease had expired when the lock call returned".to_owned(),
            ));
        }
        let valid_until_ms =
            sent_ms.saturating_add_unsigned(call.ttl_ms.saturating_sub(call.safety_margin_ms));
        self.held.push(Held { token, key, lease });
        Ok(Ok(Grant {
            token,
            valid_until_ms: Some(valid_until_ms),
        }))
    }

    fn renew(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<Option<i64>>, Unknown> {
        let Some(held) = self.held(call.token) else {
            return Ok(Err("not the holder".to_owned()));
        };
        Ok(match self.keep_alive(&held.lease)? {
            true => Ok(None),
            false => Err("lease lost".to_owned()),
        })
    }

    fn release(&mut self, call: &LockCall<'_>) -> Result<LockAnswer<()>, Unknown> {
        let Some(held) = self.held(call.token) else {
            return Ok(Err("not the holder".to_owned()));
        };
        self.held.retain(|h| h.token != call.token);
        // etcd's unlock deletes the key whether or not it still exists; a key already gone
        // with its lease is told apart, as the simulated service refuses such a release.
        if self.create_revision(&held.key)? != Some(held.token) {
            self.revoke(&held.lease);
            return Ok(Err("not the holder".to_owned()));
        }
        self.call(
            "/v3/lock/unlock",
            &json!({ "key": held.key }),
            self.timeout_ms,
        )?;
        self.revoke(&held.lease);
        Ok(Ok(()))
    }
}

/// A field the gateway writes as a string (int64s and keys are strings in its JSON).
fn text(value: &Value, field: &str) -> Option<String> {
    value.get(field).and_then(Value::as_str).map(str::to_owned)
}

/// An integer field, written as a string or a number.
fn number(value: &Value, field: &str) -> Option<u64> {
    match value.get(field)? {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_u64(),
        _ => None,
    }
}
