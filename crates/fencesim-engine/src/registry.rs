//! The design registry: which design a scenario's `[lock_service] kind` names, what the
//! scenario parser asks of it, and how the simulator runs it.
//!
//! Each design is registered once, as one value: a [`Design`] (or a [`ResourceDesign`]),
//! which is both what the scenario parser asks ([`DesignSpec`]: its kind, its knobs read with
//! located errors into typed settings, the shape of its service) and what the simulator runs
//! ([`SimDesign`]: its node type and client protocol, built from those settings). The
//! simulator (`fencesim-sim`), the scenario crate and this engine depend on no design; the
//! built-in list (`fencesim_builtin::register`, the same list every parser-only catalog is
//! built from, and `fencesim_builtin::live_forms`, their live forms) and the design crates are
//! the only places that name one.

use fencesim_live::form::{LiveForms, LockServiceForm, ResourceForm};

use fencesim_design::{Design, DesignSpec, Designs, Register, ResourceDesign, ResourceModeSpec};
use fencesim_sim::{SimDesign, SimResource};
use fencesim_verify::{VerifyDesign, VerifyResource};

/// One design: what the scenario parser asks of it, and how the simulator runs it.
#[derive(Clone, Copy)]
pub struct Registered {
    /// Its kind, knobs and service shape.
    pub spec: &'static dyn DesignSpec,
    /// Its nodes and clients in the simulator.
    pub sim: &'static dyn SimDesign,
    /// Its nodes and clients in `fencesim verify`'s search.
    pub verify: &'static dyn VerifyDesign,
}

/// One resource: what the scenario parser asks of it, and how the simulator runs it.
#[derive(Clone, Copy)]
pub struct RegisteredResource {
    /// Its mode and knobs.
    pub spec: &'static dyn ResourceModeSpec,
    /// Its `resource` node in the simulator.
    pub sim: &'static dyn SimResource,
    /// Its state machine in `fencesim verify`'s search.
    pub verify: &'static dyn VerifyResource,
}

/// The designs and resources a scenario may name.
#[derive(Clone, Default)]
pub struct Registry {
    designs: Vec<Registered>,
    resources: Vec<RegisteredResource>,
    /// The designs' and resources' live forms (live mode), by kind and mode.
    live: LiveForms,
}

impl Registry {
    /// The five built-in designs: `single` (the default), `raft`, `redlock`,
    /// `primary-backup` and `lease-record`, in that order.
    pub fn built_in() -> Self {
        let registry = fencesim_builtin::register(Registry::default());
        Registry {
            live: fencesim_builtin::live_forms(),
            ..registry
        }
    }

    /// Add the live form of design `spec` (replacing one for the same kind): how `fencesim
    /// live` runs the design against real servers (docs/live.md).
    pub fn with_live_lock_service(mut self, spec: &dyn DesignSpec, form: LockServiceForm) -> Self {
        let kind = spec.kind();
        self.live.lock_services.retain(|(k, _)| *k != kind);
        self.live.lock_services.push((kind, form));
        self
    }

    /// Add the live form of resource `spec` (replacing one for the same mode).
    pub fn with_live_resource(mut self, spec: &dyn ResourceModeSpec, form: ResourceForm) -> Self {
        let mode = spec.mode();
        self.live.resources.retain(|(m, _)| *m != mode);
        self.live.resources.push((mode, form));
        self
    }

    /// The live forms this registry knows.
    pub fn live(&self) -> &LiveForms {
        &self.live
    }

    /// How the simulator runs the resource of `mode`, if there is one.
    pub fn resource_sim(&self, mode: &str) -> Option<&'static dyn SimResource> {
        self.resources
            .iter()
            .find(|r| r.spec.mode() == mode)
            .map(|r| r.sim)
    }

    /// Add lock design `design`, replacing a design of the same kind: one value, which the
    /// scenario parser asks and the simulator runs. A unit struct's `&MyDesign` or a static
    /// serves as the `'static` reference (as the built-in designs' do), or `Box::leak` of a
    /// value made at run time.
    pub fn with_design<D: Design>(mut self, design: &'static D) -> Self {
        let kind = Design::kind(design);
        self.designs.retain(|d| d.spec.kind() != kind);
        self.designs.push(Registered {
            spec: design,
            sim: design,
            verify: design,
        });
        self
    }

    /// Add resource `resource`, replacing a resource of the same mode.
    pub fn with_resource<R: ResourceDesign>(mut self, resource: &'static R) -> Self {
        let mode = ResourceDesign::mode(resource);
        self.resources.retain(|r| r.spec.mode() != mode);
        self.resources.push(RegisteredResource {
            spec: resource,
            sim: resource,
            verify: resource,
        });
        self
    }

    /// How `fencesim verify` runs the design of `kind` and the resource of `mode`, if both
    /// are registered.
    pub fn verify(
        &self,
        kind: &str,
        mode: &str,
    ) -> Option<(&'static dyn VerifyDesign, &'static dyn VerifyResource)> {
        let design = self.designs.iter().find(|d| d.spec.kind() == kind)?;
        let resource = self.resources.iter().find(|r| r.spec.mode() == mode)?;
        Some((design.verify, resource.verify))
    }

    /// How the simulator runs the design of `kind`, if there is one.
    pub fn sim(&self, kind: &str) -> Option<&'static dyn SimDesign> {
        self.designs
            .iter()
            .find(|d| d.spec.kind() == kind)
            .map(|d| d.sim)
    }
}

impl Register for Registry {
    fn with_design<D: Design>(self, design: &'static D) -> Self {
        Registry::with_design(self, design)
    }

    fn with_resource<R: ResourceDesign>(self, resource: &'static R) -> Self {
        Registry::with_resource(self, resource)
    }
}

impl Designs for Registry {
    fn find(&self, kind: &str) -> Option<&dyn DesignSpec> {
        self.designs
            .iter()
            .find(|d| d.spec.kind() == kind)
            .map(|d| d.spec)
    }

    fn all(&self) -> Vec<&dyn DesignSpec> {
        self.designs.iter().map(|d| d.spec).collect()
    }

    fn find_resource(&self, mode: &str) -> Option<&dyn ResourceModeSpec> {
        self.resources
            .iter()
            .find(|r| r.spec.mode() == mode)
            .map(|r| r.spec)
    }

    fn all_resources(&self) -> Vec<&dyn ResourceModeSpec> {
        self.resources.iter().map(|r| r.spec).collect()
    }
}
