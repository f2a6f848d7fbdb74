//! The design as fencesim's scenario parser sees it: its kind, its knobs (read with located
//! errors), the shape of its service, and the glue that builds its server and clients.

use fencesim::design::{ClientInfo, ClientWorkload, DesignSpec, KnobError, Knobs, ServiceShape};
use fencesim::scenario::ClientSpec;
use fencesim::{NodeDesign, Scenario};

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
    pub fn client_settings(knobs: &mut Knobs) -> Result<ClientConfig, KnobError> {
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

impl DesignSpec for ZookeeperDesign {
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

    fn resolve_client(&self, knobs: &mut Knobs, _: &ClientWorkload) -> Result<(), KnobError> {
        Self::client_settings(knobs).map(drop)
    }

    fn resolve(&self, knobs: &mut Knobs) -> Result<ServiceShape, KnobError> {
        Self::server_settings(knobs)?;
        Ok(ServiceShape {
            // Sessions expire on the server, recorded as `expire`.
            node_expires: true,
            ..ServiceShape::single(SERVER_NODE)
        })
    }
}

fn server_config(scenario: &Scenario) -> ServerConfig {
    let mut knobs = Knobs::from_resolved(&scenario.lock_service.knobs);
    ZookeeperDesign::server_settings(&mut knobs).expect("the parser accepted these knobs")
}

fn client(_: &Scenario, spec: &ClientSpec, info: ClientInfo) -> ZkClient {
    let mut knobs = Knobs::from_resolved(&spec.knobs);
    let config =
        ZookeeperDesign::client_settings(&mut knobs).expect("the parser accepted these knobs");
    ZkClient::new(config, info)
}

/// The server and client, as the simulator runs them.
pub static SIM: NodeDesign<ZkServer, ZkClient> = NodeDesign {
    node_config: server_config,
    client,
};
