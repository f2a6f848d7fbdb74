//! The design as one value ([`Design`]): its kind, its knobs (read with located errors, once,
//! when a scenario is parsed), the shape of its service, and its server and clients.

use fencesim::design::{ClientInfo, ClientWorkload, Design, KnobError, Knobs, ServiceShape};

use crate::client::{ClientConfig, OnPredecessorGone, ZkClient};
use crate::server::{ServerConfig, ZkServer};

/// The `[lock_service] kind` of this design.
pub const KIND: &str = "zookeeper";

/// The server's node name.
pub const SERVER_NODE: &str = "zk-1";

/// The `[lock_service]` knobs.
const SERVICE_KNOBS: &[&str] = &["fsync", "fsync_every_ms"];

/// The `[[clients]]` knobs.
const CLIENT_KNOBS: &[&str] = &["predecessor_gone", "acquire_wait_ms"];

/// ZooKeeper's lock recipe on one standalone server.
#[derive(Debug)]
pub struct ZookeeperDesign;

impl ZookeeperDesign {
    /// The server's settings from `[lock_service]`: `fsync` (`"always"`, the default, or
    /// `"periodic"` with `fsync_every_ms`, or `"never"`).
    pub fn server_settings(knobs: &mut Knobs) -> Result<ServerConfig, KnobError> {
        knobs.one_node()?;
        Ok(ServerConfig {
            fsync: knobs.fsync()?,
        })
    }

    /// A client's settings from its `[[clients]]` table: `predecessor_gone` (`"recheck"`, the
    /// default, or the defect `"take"`) and `acquire_wait_ms` (default 10000).
    pub fn client_config(knobs: &mut Knobs) -> Result<ClientConfig, KnobError> {
        let options = [
            ("recheck", OnPredecessorGone::Recheck),
            ("take", OnPredecessorGone::Take),
        ];
        Ok(ClientConfig {
            on_predecessor_gone: knobs.choice(
                "predecessor_gone",
                &options,
                OnPredecessorGone::Recheck,
            )?,
            acquire_wait_ms: knobs.integer("acquire_wait_ms", 1, 10_000)?,
        })
    }
}

impl Design for ZookeeperDesign {
    type Node = ZkServer;
    type Client = ZkClient;
    type Settings = ServerConfig;
    type ClientSettings = ClientConfig;

    fn kind(&self) -> &'static str {
        KIND
    }

    fn about(&self) -> &'static str {
        "ZooKeeper's lock recipe: ephemeral sequential children, session heartbeats, \
         predecessor watches, czxid tokens (an example of a user's design)"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        SERVICE_KNOBS
    }

    fn client_knob_names(&self) -> &'static [&'static str] {
        CLIENT_KNOBS
    }

    fn settings(
        &self,
        knobs: &mut Knobs,
        _: u64,
    ) -> Result<(ServerConfig, ServiceShape), KnobError> {
        let shape = ServiceShape {
            // Sessions expire on the server, recorded as `expire`.
            node_expires: true,
            ..ServiceShape::single(SERVER_NODE)
        };
        Ok((Self::server_settings(knobs)?, shape))
    }

    fn client_settings(
        &self,
        knobs: &mut Knobs,
        _: &ClientWorkload,
        _: u64,
    ) -> Result<ClientConfig, KnobError> {
        Self::client_config(knobs)
    }

    fn node_config(settings: &ServerConfig) -> ServerConfig {
        *settings
    }

    fn client(_: &ServerConfig, client: &ClientConfig, info: ClientInfo) -> ZkClient {
        ZkClient::new(*client, info)
    }
}
