//! Model-based property tests for [`LeaseService`].
//!
//! The reference model below is written from the lease specification, not from the
//! implementation: a flat `Vec` of locks searched linearly, no maps, no shared helpers. Random
//! operation sequences run against both, and every answer must agree. Two safety properties
//! (tokens strictly increase per lock; at most one unexpired holder per lock) are also checked
//! from the observed outcomes alone, so they hold even if model and implementation shared a
//! misreading of the spec.

use fencesim_lease::{
    AcquireOutcome, Expired, Lease, LeaseConfig, LeaseService, ReleaseOutcome, RenewOutcome,
};
use proptest::prelude::*;

const LOCKS: [&str; 3] = ["alpha", "beta", "gamma"];
const HOLDERS: [&str; 3] = ["ann", "bob", "cat"];

// ---------------------------------------------------------------------------------------------
// Reference model
// ---------------------------------------------------------------------------------------------

/// One lease as the spec describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct ModelLease {
    holder: String,
    token: u64,
    ttl: u64,
    expires_at: i64,
}

/// One lock: its lease (if any) and the last token it ever issued (0: none).
#[derive(Clone, Debug)]
struct ModelLock {
    name: String,
    lease: Option<ModelLease>,
    last_token: u64,
}

/// The whole service as a list of locks, found by linear scan.
#[derive(Clone, Debug)]
struct Model {
    max_ttl: u64,
    locks: Vec<ModelLock>,
}

impl Model {
    fn new(max_ttl: u64) -> Self {
        Model {
            max_ttl,
            locks: Vec::new(),
        }
    }

    /// The lock's record, creating an empty one on first use.
    fn lock_mut(&mut self, name: &str) -> &mut ModelLock {
        let pos = match self.locks.iter().position(|l| l.name == name) {
            Some(pos) => pos,
            None => {
                self.locks.push(ModelLock {
                    name: name.to_string(),
                    lease: None,
                    last_token: 0,
                });
                self.locks.len() - 1
            }
        };
        &mut self.locks[pos]
    }

    fn lock(&self, name: &str) -> Option<&ModelLock> {
        self.locks.iter().find(|l| l.name == name)
    }

    /// The spec's validity rule: a lease is valid while `now < expires_at`.
    fn is_valid(lease: &ModelLease, now: i64) -> bool {
        now < lease.expires_at
    }

    /// True iff `lock` has a valid lease held by `holder` with `token`.
    fn owns(&self, lock: &str, holder: &str, token: u64, now: i64) -> bool {
        match self.lock(lock).and_then(|l| l.lease.as_ref()) {
            Some(lease) => {
                lease.holder == holder && lease.token == token && Self::is_valid(lease, now)
            }
            None => false,
        }
    }

    fn acquire(&mut self, lock: &str, holder: &str, ttl: u64, now: i64) -> AcquireOutcome {
        let ttl = if ttl > self.max_ttl {
            self.max_ttl
        } else {
            ttl
        };
        let record = self.lock_mut(lock);
        if let Some(lease) = &record.lease {
            if Self::is_valid(lease, now) {
                return AcquireOutcome::Held {
                    holder: lease.holder.clone(),
                    token: lease.token,
                    expires_at_ms: lease.expires_at,
                };
            }
        }
        let token = record.last_token + 1;
        // max_ttl is at most MAX_TTL_BOUND, so the capped TTL fits an i64.
        let expires_at = now + ttl as i64;
        record.last_token = token;
        record.lease = Some(ModelLease {
            holder: holder.to_string(),
            token,
            ttl,
            expires_at,
        });
        AcquireOutcome::Granted {
            token,
            expires_at_ms: expires_at,
        }
    }

    fn renew(&mut self, lock: &str, holder: &str, token: u64, now: i64) -> RenewOutcome {
        if !self.owns(lock, holder, token, now) {
            return RenewOutcome::Lost;
        }
        let lease = self.lock_mut(lock).lease.as_mut().unwrap();
        lease.expires_at = now + lease.ttl as i64;
        RenewOutcome::Renewed {
            expires_at_ms: lease.expires_at,
        }
    }

    fn release(&mut self, lock: &str, holder: &str, token: u64, now: i64) -> ReleaseOutcome {
        if !self.owns(lock, holder, token, now) {
            return ReleaseOutcome::NotHolder;
        }
        self.lock_mut(lock).lease = None;
        ReleaseOutcome::Released
    }

    /// Reap every lease with `expires_at <= now`; the result is sorted by lock name explicitly
    /// because the model's `Vec` is in first-use order, not name order.
    fn expire_due(&mut self, now: i64) -> Vec<Expired> {
        let mut reaped = Vec::new();
        for record in &mut self.locks {
            let due = matches!(&record.lease, Some(l) if l.expires_at <= now);
            if due {
                let l = record.lease.take().unwrap();
                reaped.push(Expired {
                    lock: record.name.clone(),
                    lease: Lease {
                        holder: l.holder,
                        token: l.token,
                        ttl_ms: l.ttl,
                        expires_at_ms: l.expires_at,
                    },
                });
            }
        }
        reaped.sort_by(|a, b| a.lock.cmp(&b.lock));
        reaped
    }

    fn next_expiry(&self) -> Option<i64> {
        let mut min: Option<i64> = None;
        for record in &self.locks {
            if let Some(l) = &record.lease {
                min = Some(match min {
                    Some(m) if m <= l.expires_at => m,
                    _ => l.expires_at,
                });
            }
        }
        min
    }

    /// The lease on `lock` in the implementation's public shape, for comparing with `lease()`.
    fn lease_view(&self, lock: &str) -> Option<Lease> {
        let l = self.lock(lock)?.lease.as_ref()?;
        Some(Lease {
            holder: l.holder.clone(),
            token: l.token,
            ttl_ms: l.ttl,
            expires_at_ms: l.expires_at,
        })
    }

    fn last_token(&self, lock: &str) -> u64 {
        self.lock(lock).map_or(0, |l| l.last_token)
    }
}

// ---------------------------------------------------------------------------------------------
// Operations and their generators
// ---------------------------------------------------------------------------------------------

/// How far the clock moves before an operation. Time never goes backwards.
#[derive(Clone, Debug)]
enum Step {
    /// Advance by a fixed amount (often 0).
    By(u64),
    /// Land exactly on the earliest lease expiry, the boundary where `now == expires_at`.
    ToNextExpiry,
    /// Land exactly on this lock's lease expiry (or stay put if it is already past).
    ToExpiryOf(usize),
    /// Stop one ms short of the earliest expiry: the last instant the lease is still valid.
    JustBeforeNextExpiry,
}

/// Which token a renew/release presents. Purely random tokens would almost never match, so
/// the generator can pick the lock's current token or a stale one.
#[derive(Clone, Debug)]
enum TokenPick {
    /// The token of the lock's current lease (or its last token if there is none).
    Current,
    /// One less than the lock's last issued token.
    Stale,
    /// An arbitrary small token.
    Literal(u64),
}

/// Which holder a renew/release claims to be: random, or the lock's actual current holder.
#[derive(Clone, Debug)]
enum HolderPick {
    Index(usize),
    CurrentHolder,
}

#[derive(Clone, Debug)]
enum Action {
    Acquire {
        lock: usize,
        holder: usize,
        ttl: u64,
    },
    Renew {
        lock: usize,
        holder: HolderPick,
        token: TokenPick,
    },
    Release {
        lock: usize,
        holder: HolderPick,
        token: TokenPick,
    },
    ExpireDue,
    /// Only let time pass.
    Tick,
}

#[derive(Clone, Debug)]
struct Op {
    step: Step,
    action: Action,
}

/// Upper bound of generated `max_ttl_ms`; TTLs are drawn up to twice that so both capped and
/// uncapped requests occur.
const MAX_TTL_BOUND: u64 = 120;

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => Just(Step::By(0)),
        // Mostly small steps so leases live across several operations...
        6 => (1..=15u64).prop_map(Step::By),
        // ...and sometimes long ones that outlast any TTL.
        1 => (0..=2 * MAX_TTL_BOUND).prop_map(Step::By),
        1 => Just(Step::ToNextExpiry),
        1 => (0..LOCKS.len()).prop_map(Step::ToExpiryOf),
        2 => Just(Step::JustBeforeNextExpiry),
    ]
}

fn ttl() -> impl Strategy<Value = u64> {
    prop_oneof![
        6 => 0..=2 * MAX_TTL_BOUND,
        1 => Just(0u64),
        1 => Just(u64::MAX),
    ]
}

fn holder_pick() -> impl Strategy<Value = HolderPick> {
    prop_oneof![
        1 => (0..HOLDERS.len()).prop_map(HolderPick::Index),
        2 => Just(HolderPick::CurrentHolder),
    ]
}

fn token_pick() -> impl Strategy<Value = TokenPick> {
    prop_oneof![
        6 => Just(TokenPick::Current),
        1 => Just(TokenPick::Stale),
        1 => (0u64..6).prop_map(TokenPick::Literal),
    ]
}

fn action() -> impl Strategy<Value = Action> {
    let lock = 0..LOCKS.len();
    prop_oneof![
        4 => (lock.clone(), 0..HOLDERS.len(), ttl())
            .prop_map(|(lock, holder, ttl)| Action::Acquire { lock, holder, ttl }),
        3 => (lock.clone(), holder_pick(), token_pick())
            .prop_map(|(lock, holder, token)| Action::Renew { lock, holder, token }),
        2 => (lock, holder_pick(), token_pick())
            .prop_map(|(lock, holder, token)| Action::Release { lock, holder, token }),
        2 => Just(Action::ExpireDue),
        1 => Just(Action::Tick),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (step(), action()).prop_map(|(step, action)| Op { step, action }),
        0..60,
    )
}

// ---------------------------------------------------------------------------------------------
// Driver
// ---------------------------------------------------------------------------------------------

/// What the test has seen granted for one lock, independent of both model and implementation.
#[derive(Default)]
struct Observed {
    /// Every token granted so far, in grant order.
    tokens: Vec<u64>,
    /// Grants that may still be live: (holder, token, expires_at), updated by renewals and
    /// dropped on release.
    claims: Vec<(String, u64, i64)>,
}

/// Resolve a `Step` to the new clock value; never earlier than `now`.
fn advance(now: i64, step: &Step, model: &Model) -> i64 {
    let target = match step {
        Step::By(d) => now + *d as i64,
        Step::ToNextExpiry => model.next_expiry().unwrap_or(now),
        Step::JustBeforeNextExpiry => model.next_expiry().map_or(now, |e| e.saturating_sub(1)),
        Step::ToExpiryOf(i) => model
            .lock(LOCKS[*i])
            .and_then(|l| l.lease.as_ref())
            .map_or(now, |l| l.expires_at),
    };
    target.max(now)
}

fn resolve_holder(pick: &HolderPick, lock: &str, model: &Model) -> String {
    match pick {
        HolderPick::Index(i) => HOLDERS[*i].to_string(),
        HolderPick::CurrentHolder => model
            .lock(lock)
            .and_then(|l| l.lease.as_ref())
            .map_or(HOLDERS[0].to_string(), |l| l.holder.clone()),
    }
}

fn resolve_token(pick: &TokenPick, lock: &str, model: &Model) -> u64 {
    let record = model.lock(lock);
    match pick {
        TokenPick::Current => record.map_or(0, |l| {
            l.lease.as_ref().map_or(l.last_token, |lease| lease.token)
        }),
        TokenPick::Stale => record.map_or(0, |l| l.last_token.saturating_sub(1)),
        TokenPick::Literal(t) => *t,
    }
}

/// Run `ops` against both, checking properties (a), (b) and (c) after every operation.
/// `start` is the service clock's first reading: negative as often as not, because a wall clock
/// stepped back past its start reads below zero and expiry must work the same there.
fn run(max_ttl: u64, start: i64, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut service = LeaseService::new(LeaseConfig {
        max_ttl_ms: max_ttl,
    });
    let mut model = Model::new(max_ttl);
    let mut observed: Vec<Observed> = LOCKS.iter().map(|_| Observed::default()).collect();
    let mut now = start;

    for (i, op) in ops.iter().enumerate() {
        now = advance(now, &op.step, &model);
        match &op.action {
            Action::Acquire { lock, holder, ttl } => {
                let (name, who) = (LOCKS[*lock], HOLDERS[*holder]);
                let got = service.acquire(name, who, *ttl, now);
                let want = model.acquire(name, who, *ttl, now);
                prop_assert_eq!(&got, &want, "op {} acquire at now={}", i, now);
                if let AcquireOutcome::Granted {
                    token,
                    expires_at_ms,
                } = got
                {
                    let obs = &mut observed[*lock];
                    // (b) strictly increasing, hence never reissued.
                    if let Some(&prev) = obs.tokens.last() {
                        prop_assert!(token > prev, "token {} after {} on {}", token, prev, name);
                    }
                    prop_assert!(!obs.tokens.contains(&token));
                    obs.tokens.push(token);
                    // (c) nobody else may still be live at the instant of a grant.
                    for (h, t, exp) in &obs.claims {
                        prop_assert!(
                            now >= *exp,
                            "op {}: {} granted {} token {} while {} token {} live until {}",
                            i,
                            name,
                            who,
                            token,
                            h,
                            t,
                            exp
                        );
                    }
                    obs.claims.push((who.to_string(), token, expires_at_ms));
                }
            }
            Action::Renew {
                lock,
                holder,
                token,
            } => {
                let name = LOCKS[*lock];
                let who = resolve_holder(holder, name, &model);
                let tok = resolve_token(token, name, &model);
                let got = service.renew(name, &who, tok, now);
                let want = model.renew(name, &who, tok, now);
                prop_assert_eq!(&got, &want, "op {} renew at now={}", i, now);
                if let RenewOutcome::Renewed { expires_at_ms } = got {
                    for claim in &mut observed[*lock].claims {
                        if claim.0 == who && claim.1 == tok {
                            claim.2 = expires_at_ms;
                        }
                    }
                }
            }
            Action::Release {
                lock,
                holder,
                token,
            } => {
                let name = LOCKS[*lock];
                let who = resolve_holder(holder, name, &model);
                let tok = resolve_token(token, name, &model);
                let got = service.release(name, &who, tok, now);
                let want = model.release(name, &who, tok, now);
                prop_assert_eq!(&got, &want, "op {} release at now={}", i, now);
                if got == ReleaseOutcome::Released {
                    observed[*lock]
                        .claims
                        .retain(|(h, t, _)| !(*h == who && *t == tok));
                }
            }
            Action::ExpireDue => {
                let got = service.expire_due(now);
                let want = model.expire_due(now);
                prop_assert_eq!(&got, &want, "op {} expire_due at now={}", i, now);
            }
            Action::Tick => {}
        }

        // (a) the whole visible state agrees after every step.
        prop_assert_eq!(service.next_expiry(), model.next_expiry(), "op {}", i);
        for (li, name) in LOCKS.iter().enumerate() {
            prop_assert_eq!(service.lease(name).cloned(), model.lease_view(name));
            prop_assert_eq!(service.last_token(name), model.last_token(name));

            // (c) at this instant at most one observed grant is unexpired, and if the
            // implementation shows a valid lease it is exactly that grant.
            let live: Vec<_> = observed[li]
                .claims
                .iter()
                .filter(|(_, _, exp)| now < *exp)
                .collect();
            prop_assert!(
                live.len() <= 1,
                "op {}: two live holders of {}: {:?}",
                i,
                name,
                live
            );
            if let Some(lease) = service.lease(name).filter(|l| now < l.expires_at_ms) {
                prop_assert_eq!(live.len(), 1);
                let (h, t, exp) = live[0];
                prop_assert_eq!(
                    (&lease.holder, lease.token, lease.expires_at_ms),
                    (h, *t, *exp)
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Implementation and model agree on every answer, and the safety properties hold.
    #[test]
    fn service_matches_model(max_ttl in 0..=MAX_TTL_BOUND, start in -10_000i64..10_000, ops in ops()) {
        run(max_ttl, start, &ops)?;
    }
}

/// A fixed scenario with exact expected values, so a regression shows up without shrinking.
#[test]
fn hand_written_sequence() {
    let mut s = LeaseService::new(LeaseConfig { max_ttl_ms: 100 });

    // ttl above the cap is capped: 10 + 100.
    assert_eq!(
        s.acquire("beta", "ann", 500, 10),
        AcquireOutcome::Granted {
            token: 1,
            expires_at_ms: 110
        }
    );
    assert_eq!(
        s.acquire("alpha", "bob", 30, 10),
        AcquireOutcome::Granted {
            token: 1,
            expires_at_ms: 40
        }
    );
    assert_eq!(s.next_expiry(), Some(40));

    // Not reentrant: the holder itself gets Held.
    assert_eq!(
        s.acquire("alpha", "bob", 30, 39),
        AcquireOutcome::Held {
            holder: "bob".into(),
            token: 1,
            expires_at_ms: 40
        }
    );
    // Renew at the last valid instant extends by the lease's own (capped) ttl.
    assert_eq!(
        s.renew("alpha", "bob", 1, 39),
        RenewOutcome::Renewed { expires_at_ms: 69 }
    );
    // Renew exactly at expiry is too late.
    assert_eq!(s.renew("alpha", "bob", 1, 69), RenewOutcome::Lost);
    // Expired but not yet reaped: it does not block a new grant, and the token moves on.
    assert_eq!(
        s.acquire("alpha", "cat", 200, 69),
        AcquireOutcome::Granted {
            token: 2,
            expires_at_ms: 169
        }
    );
    // The old holder cannot release the new lease; a wrong token cannot either.
    assert_eq!(s.release("alpha", "bob", 1, 70), ReleaseOutcome::NotHolder);
    assert_eq!(s.release("alpha", "cat", 1, 70), ReleaseOutcome::NotHolder);

    // At 110 exactly, beta's lease is due; alpha's (169) is not.
    assert_eq!(
        s.expire_due(110),
        vec![Expired {
            lock: "beta".into(),
            lease: Lease {
                holder: "ann".into(),
                token: 1,
                ttl_ms: 100,
                expires_at_ms: 110
            }
        }]
    );
    assert_eq!(s.next_expiry(), Some(169));
    assert_eq!(s.lease("beta"), None);
    assert_eq!(s.last_token("beta"), 1);

    assert_eq!(s.release("alpha", "cat", 2, 120), ReleaseOutcome::Released);
    assert_eq!(s.next_expiry(), None);
    assert_eq!(
        s.acquire("alpha", "ann", 0, 120),
        AcquireOutcome::Granted {
            token: 3,
            expires_at_ms: 120
        }
    );
    // A zero-ttl lease is never valid, so the next acquire at the same instant wins again.
    assert_eq!(
        s.acquire("alpha", "bob", 5, 120),
        AcquireOutcome::Granted {
            token: 4,
            expires_at_ms: 125
        }
    );
    assert_eq!(s.expire_due(130).len(), 1);
    assert_eq!(s.last_token("alpha"), 4);
    assert_eq!(s.last_token("never-used"), 0);
}
