//! A server process of the design's own that a live trial starts and faults strike: a Redis
//! node ([`RedisNode`]) or an etcd member ([`EtcdMember`]). PostgreSQL, shared by the lock
//! tables and the resource, is apart (`pg_server.rs`).

use std::process::ExitStatus;

use crate::etcd_server::EtcdMember;
use crate::form::RedisPersistence;
use crate::redis_server::RedisNode;
use crate::LiveError;

/// What the harness does to one of the design's server processes.
pub trait ServerProcess: Send + std::fmt::Debug {
    /// Its name in the scenario (`redis-3`, `etcd-2`).
    fn name(&self) -> &str;
    /// Its port on 127.0.0.1, for the proxies on its links.
    fn port(&self) -> u16;
    /// Its URL for a client (`redis://127.0.0.1:PORT/`, `http://127.0.0.1:PORT`), with
    /// `port` instead of its own (a proxy's).
    fn url_at(&self, port: u16) -> String;
    /// SIGSTOP.
    fn pause(&self);
    /// SIGCONT.
    fn resume(&self);
    /// SIGKILL.
    fn crash(&mut self);
    /// Start it again after a crash.
    ///
    /// # Errors
    /// It could not start.
    fn restart(&mut self) -> Result<(), LiveError>;
    /// How it ended, if it has.
    fn exited(&mut self) -> Option<ExitStatus>;
    /// Step its wall clock by `delta_ms`.
    ///
    /// # Errors
    /// It runs without a clock library.
    fn jump_clock(&mut self, delta_ms: i64) -> Result<(), LiveError>;
    /// What steps its clock, as the history's event says it.
    fn clock_library(&self) -> &'static str;
    /// What a SIGKILL loses, for the history's crash event.
    fn crash_loses(&self) -> &'static str;
}

impl ServerProcess for RedisNode {
    fn name(&self) -> &str {
        &self.name
    }
    fn port(&self) -> u16 {
        RedisNode::port(self)
    }
    fn url_at(&self, port: u16) -> String {
        format!("redis://127.0.0.1:{port}/")
    }
    fn pause(&self) {
        RedisNode::pause(self)
    }
    fn resume(&self) {
        RedisNode::resume(self)
    }
    fn crash(&mut self) {
        RedisNode::crash(self)
    }
    fn restart(&mut self) -> Result<(), LiveError> {
        RedisNode::restart(self)
    }
    fn exited(&mut self) -> Option<ExitStatus> {
        RedisNode::exited(self)
    }
    fn jump_clock(&mut self, delta_ms: i64) -> Result<(), LiveError> {
        RedisNode::jump_clock(self, delta_ms)
    }
    fn clock_library(&self) -> &'static str {
        RedisNode::clock_library(self)
    }
    fn crash_loses(&self) -> &'static str {
        match self.persistence() {
            RedisPersistence::Always => "appendfsync always: every acknowledged key kept",
            RedisPersistence::None => {
                "no persistence: every key lost, as unsynced writes are in a power loss"
            }
        }
    }
}

impl ServerProcess for EtcdMember {
    fn name(&self) -> &str {
        EtcdMember::name(self)
    }
    fn port(&self) -> u16 {
        EtcdMember::port(self)
    }
    fn url_at(&self, port: u16) -> String {
        format!("http://127.0.0.1:{port}")
    }
    fn pause(&self) {
        EtcdMember::pause(self)
    }
    fn resume(&self) {
        EtcdMember::resume(self)
    }
    fn crash(&mut self) {
        EtcdMember::crash(self)
    }
    fn restart(&mut self) -> Result<(), LiveError> {
        EtcdMember::restart(self)
    }
    fn exited(&mut self) -> Option<ExitStatus> {
        EtcdMember::exited(self)
    }
    /// Refused: etcd is a Go binary, which reads the clock without libc, so no preloaded
    /// library moves it (the plan refuses clock faults on members before a trial starts).
    fn jump_clock(&mut self, _: i64) -> Result<(), LiveError> {
        Err(LiveError::Unsupported(format!(
            "{}: etcd reads its clock without libc; no clock library moves it",
            self.name()
        )))
    }
    fn clock_library(&self) -> &'static str {
        "no clock library"
    }
    fn crash_loses(&self) -> &'static str {
        "its write-ahead log is synced before it answers: every acknowledged entry kept"
    }
}
