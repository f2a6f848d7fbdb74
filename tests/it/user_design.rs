//! A lock design of a user's own, written against the public API only (`fencesim::design`,
//! `fencesim::registry`, `fencesim::Engine`), one value registered beside the built-in designs
//! and run by an engine's `check_scenario` as the built-ins are: its knobs parsed and refused with located
//! errors, its service events in the history, the checkers judging it. The design is a single
//! lease server (`toy-1`) that expires leases by its monotonic clock, with one defect knob,
//! `grant_while_held`, which grants over a live lease.

use std::collections::BTreeMap;

use fencesim::design::{
    ClientCtx, ClientInfo, ClientProtocol, ClientWorkload, Clock, Deadline, Design, DesignMessage,
    Durability, FencedResource, KnobError, Knobs, LockNode, LockOp, MessageKind, NodeCtx,
    NodeStart, OpResult, Origin, ReadValue, RequestId, ResourceDesign, Safepoint, SafepointSide,
    ServiceEvent, ServiceEventKind, ServiceShape, TimerId, WriteDecision, WriteOutcome,
};
use fencesim::registry::Registry;
use fencesim::{Engine, ScenarioCheckError};

#[derive(Clone, Debug)]
enum ToyMsg {
    Acquire {
        holder: String,
        ttl_ms: u64,
    },
    Renew {
        holder: String,
        token: u64,
        ttl_ms: u64,
    },
    Release {
        holder: String,
        token: u64,
    },
    Granted {
        token: u64,
    },
    Refused {
        why: String,
    },
    Done,
}

impl DesignMessage for ToyMsg {
    fn kind(&self) -> MessageKind {
        match self {
            ToyMsg::Acquire { .. } => MessageKind::Acquire,
            ToyMsg::Renew { .. } => MessageKind::Renew,
            ToyMsg::Release { .. } => MessageKind::Release,
            // One reply kind per request would let `hold` faults tell them apart; the toy
            // answers every request with these three.
            ToyMsg::Granted { .. } | ToyMsg::Refused { .. } | ToyMsg::Done => {
                MessageKind::AcquireReply
            }
        }
    }
}

/// The toy's settings, from its knobs.
#[derive(Clone, Copy, Debug)]
struct ToyConfig {
    grant_while_held: bool,
    /// A second defect, in the client: it presents this epoch of its own (when set) instead
    /// of the token it was granted, as a client that remembers an epoch across restarts does.
    present_epoch: Option<u64>,
}

/// The lease: holder, token, expiry on the monotonic clock.
#[derive(Clone, Debug)]
struct Lease {
    holder: String,
    token: u64,
    until_ms: i64,
}

const WAKE: TimerId = TimerId(1);
const LOCK: &str = "lock";

struct ToyNode {
    config: ToyConfig,
    last_token: u64,
    lease: Option<Lease>,
}

impl ToyNode {
    fn event(&self, kind: ServiceEventKind, lease: &Lease, op: Option<u64>) -> ServiceEvent {
        let mut event = ServiceEvent::new(kind, LOCK, &lease.holder, lease.token, op);
        event.expires_at_ms = Some(lease.until_ms);
        event
    }

    fn holds(&self, holder: &str, token: u64) -> bool {
        self.lease
            .as_ref()
            .is_some_and(|l| l.holder == holder && l.token == token)
    }
}

impl LockNode for ToyNode {
    type Msg = ToyMsg;
    type Durable = u64;
    type Config = ToyConfig;

    fn start(config: &ToyConfig, start: NodeStart<u64>, _: &mut NodeCtx<'_, ToyMsg, u64>) -> Self {
        ToyNode {
            config: *config,
            last_token: start.durable.unwrap_or(0),
            lease: None,
        }
    }

    fn on_message(&mut self, origin: &Origin, msg: ToyMsg, ctx: &mut NodeCtx<'_, ToyMsg, u64>) {
        let now_ms = ctx.now().mono_ms;
        let reply = match msg {
            ToyMsg::Acquire { holder, ttl_ms } => match &self.lease {
                Some(l) if !self.config.grant_while_held => ToyMsg::Refused {
                    why: format!("held by {}", l.holder),
                },
                _ => {
                    self.last_token += 1;
                    ctx.persist(self.last_token, Durability::Synced);
                    // The token is on disk; nobody has it yet.
                    ctx.safepoint(TOKEN_ISSUED.name);
                    let lease = Lease {
                        holder,
                        token: self.last_token,
                        until_ms: now_ms + ttl_ms as i64,
                    };
                    ctx.record(self.event(ServiceEventKind::Grant, &lease, origin.op()));
                    let token = lease.token;
                    self.lease = Some(lease);
                    ToyMsg::Granted { token }
                }
            },
            ToyMsg::Renew {
                holder,
                token,
                ttl_ms,
            } if self.holds(&holder, token) => {
                let mut lease = self.lease.take().expect("held");
                lease.until_ms = now_ms + ttl_ms as i64;
                ctx.record(self.event(ServiceEventKind::Renew, &lease, origin.op()));
                self.lease = Some(lease);
                ToyMsg::Granted { token }
            }
            ToyMsg::Renew { .. } => ToyMsg::Refused { why: "lost".into() },
            ToyMsg::Release { holder, token } if self.holds(&holder, token) => {
                let lease = self.lease.take().expect("held");
                ctx.record(self.event(ServiceEventKind::Release, &lease, origin.op()));
                ToyMsg::Done
            }
            ToyMsg::Release { .. } => ToyMsg::Done,
            ToyMsg::Granted { .. } | ToyMsg::Refused { .. } | ToyMsg::Done => return,
        };
        ctx.reply(origin, reply);
    }

    /// Expire the lease once the monotonic clock passes it; wake up then.
    fn settle(&mut self, ctx: &mut NodeCtx<'_, ToyMsg, u64>) -> bool {
        if let Some(lease) = self.lease.clone() {
            if ctx.now().mono_ms >= lease.until_ms {
                ctx.record(self.event(ServiceEventKind::Expire, &lease, None));
                self.lease = None;
            } else {
                let at = Deadline {
                    clock: Clock::Monotonic,
                    at_ms: lease.until_ms,
                };
                ctx.set_timer_at(WAKE, at);
            }
        }
        false
    }
}

/// The toy node's own point in time: it has issued (and synced) a token, and neither recorded
/// the grant nor answered.
const TOKEN_ISSUED: Safepoint = Safepoint {
    name: "token-issued",
    side: SafepointSide::Service,
    about: "the node synced a new token and has not granted it yet",
};

const REPLY: TimerId = TimerId(1);

/// One request per operation to the one node; believes its lease until the request was sent
/// plus its TTL.
struct ToyClient {
    info: ClientInfo,
    waiting: Option<(RequestId, LockOp, i64)>,
    present_epoch: Option<u64>,
}

impl ClientProtocol for ToyClient {
    type Msg = ToyMsg;

    fn begin(&mut self, op: LockOp, ctx: &mut ClientCtx<'_, ToyMsg>) {
        let (holder, ttl_ms) = (self.info.name.clone(), self.info.ttl_ms);
        let msg = match op {
            LockOp::Acquire => ToyMsg::Acquire { holder, ttl_ms },
            LockOp::Renew { token } => ToyMsg::Renew {
                holder,
                token,
                ttl_ms,
            },
            LockOp::Release { token } => ToyMsg::Release { holder, token },
        };
        let sent_ms = ctx.now().mono_ms;
        self.waiting = Some((ctx.request(0, msg), op, sent_ms));
        ctx.set_timer(REPLY, self.info.timeout_ms);
    }

    fn on_reply(&mut self, request: RequestId, msg: ToyMsg, ctx: &mut ClientCtx<'_, ToyMsg>) {
        let Some((id, op, sent_ms)) = self.waiting else {
            return;
        };
        if id != request {
            return;
        }
        self.waiting = None;
        ctx.cancel_timer(REPLY);
        match (op, msg) {
            (LockOp::Release { .. }, _) => ctx.complete(OpResult::Ok { token: None }),
            (op, ToyMsg::Granted { token }) => {
                // The defect: the epoch it keeps stands in for the token it was granted.
                let token = self.present_epoch.unwrap_or(token);
                // An acquire names its token; a renewal's operation already does.
                let named = (op == LockOp::Acquire).then_some(token);
                ctx.complete(OpResult::Ok { token: named });
                ctx.believe(token, self.info.valid_until_ms(sent_ms));
            }
            (LockOp::Renew { .. }, ToyMsg::Refused { why }) => {
                ctx.lost(why.clone());
                ctx.complete(OpResult::Fail { error: why });
            }
            (_, ToyMsg::Refused { why }) => ctx.complete(OpResult::Fail { error: why }),
            (_, other) => panic!("unexpected answer {other:?}"),
        }
    }

    fn on_timer(&mut self, id: TimerId, ctx: &mut ClientCtx<'_, ToyMsg>) {
        if id == REPLY && self.waiting.take().is_some() {
            ctx.complete(OpResult::Unknown {
                error: "no reply".into(),
            });
        }
    }
}

/// The toy as one value: its kind and knob, its server and its client.
struct ToyDesign;

impl Design for ToyDesign {
    type Node = ToyNode;
    type Client = ToyClient;
    type Settings = ToyConfig;
    type ClientSettings = ();

    fn kind(&self) -> &'static str {
        "toy-lease"
    }

    fn about(&self) -> &'static str {
        "a user's one-node lease server"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        &["grant_while_held", "present_epoch"]
    }

    fn settings(&self, knobs: &mut Knobs, _: u64) -> Result<(ToyConfig, ServiceShape), KnobError> {
        let config = ToyConfig {
            grant_while_held: knobs.boolean("grant_while_held", false)?,
            present_epoch: knobs.optional_integer("present_epoch", 1)?,
        };
        let shape = ServiceShape {
            node_expires: true,
            safepoints: &[TOKEN_ISSUED],
            ..ServiceShape::single("toy-1")
        };
        Ok((config, shape))
    }

    fn client_settings(&self, _: &mut Knobs, _: &ClientWorkload, _: u64) -> Result<(), KnobError> {
        Ok(())
    }

    fn node_config(settings: &ToyConfig) -> ToyConfig {
        *settings
    }

    fn client(config: &ToyConfig, _: &(), info: ClientInfo) -> ToyClient {
        ToyClient {
            info,
            waiting: None,
            present_epoch: config.present_epoch,
        }
    }
}

/// An engine of the built-in designs, the toy and the strict resource: made by each test,
/// beside the other tests of this binary, whose engines know only the built-in designs.
fn engine() -> Engine {
    Engine::new(
        Registry::built_in()
            .with_design(&ToyDesign)
            .with_resource(&StrictSpec),
    )
}

/// A resource of the user's own: a key-value store that accepts a mutation only with a token
/// strictly above every token it accepted before, so a holder cannot write twice under one
/// lease; token-less deletes are refused.
#[derive(Debug, Default)]
struct StrictStore {
    cells: BTreeMap<String, (ReadValue, u64)>,
}

impl StrictStore {
    fn decide(&mut self, key: &str, token: u64, value: Option<&str>) -> WriteOutcome {
        let cell = self.cells.entry(key.to_owned()).or_default();
        if token <= cell.1 {
            return WriteOutcome::Rejected {
                presented: token,
                highest: cell.1,
            };
        }
        *cell = (
            ReadValue {
                value: value.map(str::to_owned),
                token: Some(token),
            },
            token,
        );
        WriteOutcome::Accepted { highest: token }
    }
}

impl FencedResource for StrictStore {
    type Config = ();

    fn new(_: &()) -> Self {
        StrictStore::default()
    }

    fn write(&mut self, key: &str, token: u64, value: &str) -> WriteDecision {
        WriteDecision::Now(self.decide(key, token, Some(value)))
    }

    fn apply_due(&mut self, key: &str, token: u64, value: &str) -> WriteOutcome {
        self.decide(key, token, Some(value))
    }

    fn delete(&mut self, key: &str, token: Option<u64>) -> WriteOutcome {
        match token {
            Some(token) => self.decide(key, token, None),
            None => WriteOutcome::Rejected {
                presented: 0,
                highest: self.cells.get(key).map_or(0, |c| c.1),
            },
        }
    }

    fn read(&self, key: &str) -> ReadValue {
        self.cells.get(key).map(|c| c.0.clone()).unwrap_or_default()
    }
}

/// `[resource] mode = "strict"`, with no knobs.
struct StrictSpec;

impl ResourceDesign for StrictSpec {
    type State = StrictStore;

    fn mode(&self) -> &'static str {
        "strict"
    }

    fn about(&self) -> &'static str {
        "a user's store: a token strictly above every accepted one, or nothing"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        &[]
    }

    fn config(&self, _: &mut Knobs) -> Result<(), KnobError> {
        Ok(())
    }
}

/// The toy's scenario with `knobs` in its `[lock_service]` and `expect` as its `[expect]`.
fn scenario_file(test: &str, knobs: &str, expect: &str) -> String {
    let text = format!(
        "name = \"{test}\"\nduration_ms = 30000\nseeds = \"0..10\"\n\
         [lock_service]\nkind = \"toy-lease\"\nmax_ttl_ms = 5000\n{knobs}\n\
         [[clients]]\ncount = 3\nttl_ms = 2000\nwork_ms = 300\nrenew_ms = 500\ncycles = 3\n\
         [[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nbefore = \"write\"\nduration_ms = 3000\n\
         [expect]\n{expect}\n"
    );
    let dir = crate::support::out_dir(test);
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("toy.toml");
    std::fs::write(&file, text).unwrap();
    file.display().to_string()
}

#[test]
fn a_users_safe_design_meets_its_expectation_on_every_seed() {
    let engine = engine();
    let file = scenario_file("toy-safe", "", "verdict = \"valid\"");
    let checked = engine
        .check_scenario(&file, 0..10)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(checked.seeds_run, 10);
    // The toy's own events reach the history: its grants, and the expiry of the paused
    // client's lease.
    let scenario = engine.load_scenario(std::path::Path::new(&file)).unwrap();
    assert_eq!(scenario.lock_service.nodes(), ["toy-1"]);
    let history = engine.simulate(&scenario, 0).history;
    let kinds: Vec<String> = history
        .events()
        .filter(|e| &*e.node == "toy-1")
        .map(|e| format!("{:?}", e.event))
        .collect();
    assert!(kinds.iter().any(|k| k == "Grant"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "Expire"), "{kinds:?}");
}

#[test]
fn a_users_defect_knob_is_caught_by_the_checkers() {
    let engine = engine();
    let file = scenario_file(
        "toy-defect",
        "grant_while_held = true",
        "verdict = \"valid\"",
    );
    let err = engine.check_scenario(&file, 0..10).unwrap_err();
    let ScenarioCheckError::Counterexample { summary, .. } = &err else {
        panic!("expected a counterexample, got {err}");
    };
    assert!(summary.contains("mutual-exclusion"), "{summary}");
}

/// Tokens are judged as presented: a client that writes with an epoch it keeps, not the token
/// the service granted it, is `token-not-granted`, although every grant is in order and the
/// fenced resource accepts the (ever higher) epoch.
#[test]
fn a_users_client_that_presents_its_own_epoch_is_token_not_granted() {
    let engine = engine();
    let file = scenario_file("toy-epoch", "present_epoch = 1000", "verdict = \"valid\"");
    let scenario = engine.load_scenario(std::path::Path::new(&file)).unwrap();
    let result = fencesim_checker::check(&engine.simulate(&scenario, 0).history);
    let found: Vec<&fencesim_checker::Violation> = result
        .violations
        .iter()
        .filter(|v| v.kind == fencesim::ViolationKind::TokenNotGranted)
        .collect();
    assert!(!found.is_empty(), "{:#?}", result.violations);
    assert!(
        found[0]
            .explanation
            .contains(" presented token 1000 in its write at index ")
            && found[0].explanation.contains(
                "but the lock service never granted it that token: its last grant was token "
            ),
        "{}",
        found[0].explanation
    );
    // Without the defect the same schedule is valid.
    let file = scenario_file("toy-no-epoch", "", "verdict = \"valid\"");
    assert!(engine.check_scenario(&file, 0..3).is_ok());
}

#[test]
fn a_users_knobs_are_refused_with_located_errors() {
    let engine = engine();
    let file = scenario_file(
        "toy-bad-knob",
        "grant_while_held = 1",
        "verdict = \"valid\"",
    );
    let err = engine.check_scenario(&file, 0..1).unwrap_err().to_string();
    assert!(
        err.contains(
            ":7:20: field `lock_service.grant_while_held`: expected true or false, found integer 1"
        ),
        "{err}"
    );
    let file = scenario_file("toy-other-knob", "fsync = \"never\"", "verdict = \"valid\"");
    let err = engine.check_scenario(&file, 0..1).unwrap_err().to_string();
    assert!(
        err.contains("only a kind = \"single\" or \"redlock\" lock service uses `fsync`"),
        "{err}"
    );
}

/// A user's resource registered beside the built-in ones runs as theirs do: the harness's
/// resource node asks it and records its decisions; here a paused holder's late write is
/// refused.
#[test]
fn a_users_resource_decides_writes_and_the_history_records_it() {
    let engine = engine();
    let text = "name = \"strict\"\nduration_ms = 40000\nseeds = \"0..5\"\n\
                [lock_service]\nkind = \"single\"\nmax_ttl_ms = 30000\n\
                [resource]\nmode = \"strict\"\n\
                [[clients]]\nname = \"client-1\"\nttl_ms = 10000\nwork_ms = 1000\n\
                [[clients]]\nname = \"client-2\"\nttl_ms = 10000\nwork_ms = 1000\nstart_ms = 100\n\
                [[faults]]\nkind = \"pause\"\nnode = \"client-1\"\nbefore = \"write\"\nnth = 1\nduration_ms = 15000\n\
                [expect]\nverdict = \"valid\"\n";
    let dir = crate::support::out_dir("user-resource");
    let file = dir.join("strict.toml");
    std::fs::write(&file, text).unwrap();
    engine
        .check_scenario(&file.display().to_string(), 0..5)
        .unwrap_or_else(|e| panic!("{e}"));
    let scenario = engine.load_scenario(&file).unwrap();
    let history = engine.simulate(&scenario, 0).history;
    let decisions: Vec<String> = history
        .events()
        .filter(|e| &*e.node == "resource")
        .map(|e| {
            format!(
                "{} {} {:?}",
                e.event.as_str(),
                e.holder.as_deref().unwrap_or(""),
                e.token
            )
        })
        .collect();
    assert_eq!(
        decisions,
        ["accept client-2 Some(2)", "reject client-1 Some(1)",],
        "client-2 writes under token 2 while client-1 is paused; client-1's late write is refused"
    );
}

/// A user's design names its own point in time through the public API, as the built-in
/// designs do: a crash of toy-1 right after its first `token-issued` (the token synced, the
/// grant not yet recorded or answered) is triggered by that name, the effects the node pushed
/// after the point are lost with the crash, so token 1 is never granted and the first grant
/// is token 2, after the restart. A name the toy does not declare is refused with the list of
/// what toy-1 reaches, its own point included.
#[test]
fn a_users_design_names_its_own_safepoint_and_a_fault_strikes_there() {
    let engine = engine();
    let text = |event: &str| {
        format!(
            "name = \"toy-safepoint\"\nduration_ms = 10000\nseeds = \"0..3\"\n\
             [lock_service]\nkind = \"toy-lease\"\nmax_ttl_ms = 5000\n\
             [[clients]]\ncount = 1\nttl_ms = 2000\nwork_ms = 300\ncycles = 2\n\
             [[faults]]\nkind = \"crash\"\nnode = \"toy-1\"\nafter = \"{event}\"\nduration_ms = 200\n\
             [expect]\nverdict = \"valid\"\n"
        )
    };
    let scenario = engine
        .parse_scenario(&text("token-issued"), "toy-safepoint.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    for seed in 0..3 {
        let history = engine.simulate(&scenario, seed).history;
        let crash = history
            .events()
            .find(|e| format!("{:?}", e.event) == "Crash")
            .expect("the crash struck");
        assert_eq!(
            crash.detail.as_deref(),
            Some("killed for 200 ms at token-issued")
        );
        let granted: Vec<u64> = history
            .events()
            .filter(|e| format!("{:?}", e.event) == "Grant")
            .filter_map(|e| e.token)
            .collect();
        assert_eq!(granted.first(), Some(&2), "seed {seed}: {granted:?}");
    }
    let err = engine
        .parse_scenario(&text("token-isued"), "toy-safepoint.toml")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("toy-safepoint.toml:")
            && err.contains("field `faults.after`")
            && err.contains(
                "node \"toy-1\" never reaches after \"token-isued\"; its safepoints after \
                 events are grant, renew, release, expire, token-issued"
            ),
        "{err}"
    );
}
