//! Redlock as a design ([`Design`]): `kind = "redlock"`, its knobs (read from
//! `[lock_service]` with located errors, with the Redlock documentation's defaults), the shape
//! of its service, its Redis nodes and its client.

use fencesim_design::{
    ClientInfo, ClientWorkload, Clock, Design, KnobError, Knobs, SafeKnob, SafeValue, ServiceShape,
    TokenKind,
};

use crate::{RedisConfig, RedisServer, RedlockClient, RedlockClientConfig, TokenSource};

/// Independent Redis-like nodes `redis-1`..`redis-N`, locked by the clients with the Redlock
/// algorithm (antirez; critiqued by Kleppmann 2016).
#[derive(Clone, Copy, Debug, Default)]
pub struct RedlockDesign;

/// A Redlock scenario's settings, read from its knobs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RedlockSettings {
    /// How many Redis nodes: 1, 3, 5 or 7.
    pub replicas: u64,
    /// Every node's settings.
    pub node: RedisConfig,
    /// Every client's settings.
    pub client: RedlockClientConfig,
}

impl RedlockDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &[
        "replicas",
        "fsync",
        "fsync_every_ms",
        "expiry_clock",
        "recheck_elapsed",
        "drift_ppm",
        "node_timeout_ms",
        "token_source",
        "restart_delay_ms",
    ];

    /// The settings from the knobs.
    pub fn read_settings(knobs: &mut Knobs) -> Result<RedlockSettings, KnobError> {
        let replicas = knobs.one_of("replicas", &[1, 3, 5, 7], 5, |n| {
            format!("expected 1, 3, 5 or 7 Redlock nodes, found {n}")
        })?;
        let fsync = knobs.fsync()?;
        // Redis judges key expiry by its wall clock.
        let expiry_clock = knobs.expiry_clock(Clock::Wall)?;
        let restart_delay_ms = knobs.integer("restart_delay_ms", 0, 0)?;
        let recheck_elapsed = knobs.boolean("recheck_elapsed", true)?;
        // At 10^6 ppm the allowance is the whole TTL and no client could ever hold the lock.
        let drift_ppm =
            knobs
                .integer_in("drift_ppm", 0, 999_999, 10_000)
                .map_err(
                    |e| match knobs.given("drift_ppm").and_then(|v| v.as_integer()) {
                        Some(n) if n >= 1_000_000 => KnobError {
                            message: format!(
                        "expected less than 1000000 ppm, found {n}: the allowance would be the \
                         whole TTL"
                    ),
                            ..e
                        },
                        _ => e,
                    },
                )?;
        let node_timeout_ms = knobs.integer("node_timeout_ms", 1, 50)?;
        let sources = [
            ("random", TokenSource::Random),
            ("counter", TokenSource::Counter),
        ];
        let token_source = knobs.choice("token_source", &sources, TokenSource::Random)?;
        Ok(RedlockSettings {
            replicas,
            node: RedisConfig {
                fsync,
                restart_delay_ms,
                expiry_clock,
            },
            client: RedlockClientConfig {
                drift_ppm,
                recheck_elapsed,
                node_timeout_ms,
                token_source,
            },
        })
    }
}

impl Design for RedlockDesign {
    type Node = RedisServer;
    type Client = RedlockClient;
    type Settings = RedlockSettings;
    type ClientSettings = ();

    fn kind(&self) -> &'static str {
        "redlock"
    }

    fn about(&self) -> &'static str {
        "Redlock over independent Redis nodes redis-1..N"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    /// Redlock used as safely as it can be (its random nemesis's scenario): any majority
    /// size, synced writes, expiry by each node's monotonic clock, the elapsed time checked
    /// after the majority answered, and a fencing token from the first node's counter. The
    /// drift allowance is the scenario's (at least the nemesis's drift), not drawn.
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[
            SafeKnob {
                name: "replicas",
                values: &[
                    SafeValue::Integer(3),
                    SafeValue::Integer(5),
                    SafeValue::Integer(7),
                ],
            },
            SafeKnob {
                name: "fsync",
                values: &[SafeValue::Text("always")],
            },
            SafeKnob {
                name: "expiry_clock",
                values: &[SafeValue::Text("monotonic")],
            },
            SafeKnob {
                name: "recheck_elapsed",
                values: &[SafeValue::Flag(true)],
            },
            SafeKnob {
                name: "token_source",
                values: &[SafeValue::Text("counter")],
            },
        ]
    }

    /// The Redis node and the Redlock client own all their data (the key store, the client's
    /// replies so far) and derive `Clone` and `Debug`: `fencesim verify` copies and
    /// fingerprints them.
    fn explorable(&self) -> Option<fencesim_design::Explorable<Self::Node, Self::Client>> {
        Some(fencesim_design::Explorable::by_clone_and_debug())
    }

    fn settings(
        &self,
        knobs: &mut Knobs,
        _: u64,
    ) -> Result<(RedlockSettings, ServiceShape), KnobError> {
        let settings = Self::read_settings(knobs)?;
        // A lock's random value is opaque; a counter token is a fencing token.
        let tokens = match settings.client.token_source {
            TokenSource::Random => TokenKind::Opaque,
            TokenSource::Counter => TokenKind::Fencing,
        };
        let shape = ServiceShape {
            nodes: ServiceShape::numbered("redis", settings.replicas),
            tokens,
            ..ServiceShape::single("")
        };
        Ok((settings, shape))
    }

    /// The client's knobs are `[lock_service]`'s (Redlock has one algorithm for every client).
    fn client_settings(&self, _: &mut Knobs, _: &ClientWorkload, _: u64) -> Result<(), KnobError> {
        Ok(())
    }

    fn node_config(settings: &RedlockSettings) -> RedisConfig {
        settings.node
    }

    fn client(settings: &RedlockSettings, _: &(), info: ClientInfo) -> RedlockClient {
        RedlockClient::new(info, settings.client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_redlock_documentations() {
        let settings = RedlockDesign::read_settings(&mut Knobs::default()).unwrap();
        assert_eq!(settings.replicas, 5);
        assert_eq!(settings.client.drift_ppm, 10_000);
        assert_eq!(settings.client.node_timeout_ms, 50);
        assert_eq!(settings.node.expiry_clock, Clock::Wall);
        let (_, shape) = RedlockDesign.settings(&mut Knobs::default(), 1).unwrap();
        assert_eq!(shape.tokens, TokenKind::Opaque);
        assert_eq!(shape.nodes.last().map(String::as_str), Some("redis-5"));
    }

    #[test]
    fn a_drift_allowance_of_the_whole_ttl_is_refused() {
        let mut knobs = Knobs::from_toml("drift_ppm = 1000000").unwrap();
        let e = RedlockDesign::read_settings(&mut knobs).unwrap_err();
        assert_eq!(e.field, "drift_ppm");
        assert!(
            e.message.starts_with("expected less than 1000000 ppm"),
            "{}",
            e.message
        );
    }
}
