//! A design as one value: the kind, knobs and shape the scenario parser asks for, the node type
//! and client protocol the simulator runs, and the typed settings that tie them together.
//!
//! A lock design implements [`Design`], a resource [`ResourceDesign`]; both are all a design
//! crate exports (one value, `pub static` or a unit struct) and all a registry needs
//! (`fencesim::registry::Registry::with_design`). Their knobs are read once, with located
//! errors, when a scenario is parsed: the parser calls [`DesignSpec::resolve`] (implemented
//! here for every [`Design`]), which keeps the design's typed [`Design::Settings`] in the
//! scenario as [`Settings`], and every node and client of every run is built from those. The
//! simulator never reads a knob.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::client::{ClientInfo, ClientProtocol};
use crate::explore::Explorable;
use crate::knobs::{KnobError, Knobs};
use crate::node::LockNode;
use crate::resource::{FencedResource, ResourceModeSpec};
use crate::safe::SafeKnob;
use crate::spec::{ClientWorkload, DesignSpec, ServiceShape};

/// A design's settings as its knobs made them, kept in the parsed scenario without its type
/// (the scenario crate knows no design): [`Design::Settings`], [`Design::ClientSettings`] or a
/// resource's config, taken back out with [`Settings::get`] by the design that made it.
///
/// Two `Settings` always compare equal: they follow from the resolved knobs kept beside them
/// in the scenario, which are compared. A scenario read back from JSON (or built by hand) has
/// none; it must be parsed again before it runs.
#[derive(Clone, Default)]
pub struct Settings(Option<Arc<dyn Any + Send + Sync>>);

impl Settings {
    /// `value`, kept for the design that made it.
    pub fn new<T: Any + Send + Sync>(value: T) -> Self {
        Settings(Some(Arc::new(value)))
    }

    /// The value, if it is a `T`; `None` for a scenario that was not parsed, or for another
    /// design's settings.
    pub fn get<T: Any>(&self) -> Option<&T> {
        self.0.as_deref().and_then(|v| v.downcast_ref::<T>())
    }
}

impl PartialEq for Settings {
    fn eq(&self, _: &Settings) -> bool {
        true
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(_) => f.write_str("Settings(..)"),
            None => f.write_str("Settings(none)"),
        }
    }
}

/// A lock design: a lock service's nodes ([`Design::Node`]), the client protocol that talks to
/// them ([`Design::Client`]), and the knobs that configure both, read once into typed settings.
///
/// This is the whole of what a design implements; the scenario parser sees it through
/// [`DesignSpec`] (implemented for every `Design`), the simulator through the `fencesim-sim`
/// crate's `SimDesign` (likewise). The built-in designs are written against it exactly as a
/// user's design is (docs/designs.md walks through one).
pub trait Design: Send + Sync + 'static {
    /// The lock-service node ([`LockNode`]); every node of the service runs one.
    type Node: LockNode;
    /// The client protocol ([`ClientProtocol`]), one per client process start.
    type Client: ClientProtocol;
    /// What the `[lock_service]` knobs say, typed: made once per parsed scenario.
    type Settings: Clone + Send + Sync + 'static;
    /// What one `[[clients]]` table's knobs say, typed (`()` for a protocol without knobs).
    type ClientSettings: Clone + Send + Sync + 'static;

    /// The `[lock_service] kind` that selects it (`"raft"`): lower case, words joined by `-`.
    fn kind(&self) -> &'static str;
    /// One line on what it is, for listings and error messages.
    fn about(&self) -> &'static str;
    /// Every `[lock_service]` knob [`settings`](Design::settings) may read: a knob written for
    /// another design is refused naming the designs that take it, and one no design lists is
    /// refused as unknown before `settings` runs.
    fn knob_names(&self) -> &'static [&'static str];
    /// Every `[[clients]]` knob [`client_settings`](Design::client_settings) may read (its
    /// defect knobs, such as `reclaim`); none by default.
    fn client_knob_names(&self) -> &'static [&'static str] {
        &[]
    }
    /// The `[lock_service]` knob values it claims safe under its random nemesis
    /// ([`crate::safe`]); none by default (no claim).
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[]
    }
    /// The `[[clients]]` knob values it claims safe, as [`safe_knobs`](Design::safe_knobs);
    /// none by default.
    fn safe_client_knobs(&self) -> &'static [SafeKnob] {
        &[]
    }

    /// Read the `[lock_service]` knobs, with located errors ([`Knobs`] keeps every value read,
    /// default or given, for the report), into the settings and the shape of the service they
    /// make. `max_ttl_ms` is `[lock_service] max_ttl_ms`, the longest TTL granted.
    ///
    /// # Errors
    /// A knob's value is refused ([`Knobs::error`] locates it).
    fn settings(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(Self::Settings, ServiceShape), KnobError>;

    /// Read one `[[clients]]` table's knobs (its fields other than the workload's: `name`,
    /// `ttl_ms`, `renew_ms`, ...). `workload` says what the client does, for knobs that mean
    /// something only with it; `max_ttl_ms` is `[lock_service]`'s.
    ///
    /// # Errors
    /// A knob's value is refused, or means nothing with this workload.
    fn client_settings(
        &self,
        knobs: &mut Knobs,
        workload: &ClientWorkload,
        max_ttl_ms: u64,
    ) -> Result<Self::ClientSettings, KnobError>;

    /// The nodes' configuration (the same for every node and every start).
    fn node_config(settings: &Self::Settings) -> <Self::Node as LockNode>::Config;

    /// How `fencesim verify` may copy and tell apart this design's node and client states
    /// ([`crate::explore`]): `None` (the default) has every step re-executed from the start and
    /// no two schedules merged; a design whose node and client own all their data can give
    /// [`Explorable::by_clone_and_hash`] (they derive `Hash`) or
    /// [`Explorable::by_clone_and_debug`] (their `Debug` shows every field).
    fn explorable(&self) -> Option<Explorable<Self::Node, Self::Client>> {
        None
    }

    /// A client's protocol, made at each start of the client process.
    fn client(
        settings: &Self::Settings,
        client: &Self::ClientSettings,
        info: ClientInfo,
    ) -> Self::Client;
}

impl<D: Design> DesignSpec for D {
    fn kind(&self) -> &'static str {
        Design::kind(self)
    }

    fn about(&self) -> &'static str {
        Design::about(self)
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Design::knob_names(self)
    }

    fn client_knob_names(&self) -> &'static [&'static str] {
        Design::client_knob_names(self)
    }

    fn safe_knobs(&self) -> &'static [SafeKnob] {
        Design::safe_knobs(self)
    }

    fn safe_client_knobs(&self) -> &'static [SafeKnob] {
        Design::safe_client_knobs(self)
    }

    fn resolve(
        &self,
        knobs: &mut Knobs,
        max_ttl_ms: u64,
    ) -> Result<(ServiceShape, Settings), KnobError> {
        let (settings, shape) = self.settings(knobs, max_ttl_ms)?;
        Ok((shape, Settings::new(settings)))
    }

    fn resolve_client(
        &self,
        knobs: &mut Knobs,
        workload: &ClientWorkload,
        max_ttl_ms: u64,
    ) -> Result<Settings, KnobError> {
        self.client_settings(knobs, workload, max_ttl_ms)
            .map(Settings::new)
    }
}

/// A resource design (`[resource] mode`): its state machine ([`ResourceDesign::State`]) and
/// the knobs that configure it, read once into its config. The scenario parser sees it through
/// [`ResourceModeSpec`] (implemented for every `ResourceDesign`).
pub trait ResourceDesign: Send + Sync + 'static {
    /// The resource's state machine; the harness keeps one instance across crashes.
    type State: FencedResource;

    /// The `[resource] mode` that selects it (`"fenced"`).
    fn mode(&self) -> &'static str;
    /// One line on what it does.
    fn about(&self) -> &'static str;
    /// Every knob [`config`](ResourceDesign::config) may read (besides `mode` and `keys`).
    fn knob_names(&self) -> &'static [&'static str];
    /// The knob values it claims safe ([`crate::safe`]); none by default.
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[]
    }
    /// Read its knobs, with located errors, into its state machine's configuration.
    ///
    /// # Errors
    /// A knob's value is refused.
    fn config(
        &self,
        knobs: &mut Knobs,
    ) -> Result<<Self::State as FencedResource>::Config, KnobError>;
}

impl<R: ResourceDesign> ResourceModeSpec for R {
    fn mode(&self) -> &'static str {
        ResourceDesign::mode(self)
    }

    fn about(&self) -> &'static str {
        ResourceDesign::about(self)
    }

    fn knob_names(&self) -> &'static [&'static str] {
        ResourceDesign::knob_names(self)
    }

    fn safe_knobs(&self) -> &'static [SafeKnob] {
        ResourceDesign::safe_knobs(self)
    }

    fn resolve(&self, knobs: &mut Knobs) -> Result<Settings, KnobError> {
        self.config(knobs).map(Settings::new)
    }
}
