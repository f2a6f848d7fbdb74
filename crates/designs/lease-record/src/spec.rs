//! The lease-record design ([`Design`]): `kind = "lease-record"`, its knobs, the shape of its
//! service, its store node and its candidates.

use fencesim_design::{
    ClientInfo, ClientWorkload, Design, KnobError, Knobs, SafeKnob, SafeValue, ServiceShape,
};

use crate::{ExpiryJudgement, RecordClient, StoreNode, Takeover};

/// The store's node.
pub const STORE_NODE: &str = "lease-service";

/// Leases as records in a linearizable compare-and-swap store on `lease-service`, with expiry
/// judged by the candidates (Kubernetes Lease objects, the DynamoDB Lock Client; case K11).
/// The token is the record version at which the holder took it.
#[derive(Clone, Copy, Debug, Default)]
pub struct LeaseRecordDesign;

impl LeaseRecordDesign {
    /// Its knobs.
    pub const KNOBS: &'static [&'static str] = &["expiry_judged_by"];

    /// How the candidates judge a silent holder gone, from the knobs.
    pub fn judgement(knobs: &mut Knobs) -> Result<ExpiryJudgement, KnobError> {
        knobs.one_node()?;
        let options = [
            ("recorded-duration", ExpiryJudgement::RecordedDuration),
            ("own-duration", ExpiryJudgement::OwnDuration),
            ("claimant-deadline", ExpiryJudgement::ClaimantDeadline),
        ];
        knobs.choice(
            "expiry_judged_by",
            &options,
            ExpiryJudgement::RecordedDuration,
        )
    }
}

/// How a candidate claims a record it judged free or expired, from one `[[clients]]` table's
/// knobs (`takeover`; K21's defect is `"unconditional"`).
pub fn record_client_settings(knobs: &mut Knobs) -> Result<Takeover, KnobError> {
    let options = [
        ("compare-and-swap", Takeover::CompareAndSwap),
        ("unconditional", Takeover::Unconditional),
    ];
    knobs.choice("takeover", &options, Takeover::CompareAndSwap)
}

impl Design for LeaseRecordDesign {
    type Node = StoreNode;
    type Client = RecordClient;
    type Settings = ExpiryJudgement;
    type ClientSettings = Takeover;

    fn kind(&self) -> &'static str {
        "lease-record"
    }

    fn about(&self) -> &'static str {
        "lease records in a compare-and-swap store, expiry judged by the candidates"
    }

    fn knob_names(&self) -> &'static [&'static str] {
        Self::KNOBS
    }

    fn client_knob_names(&self) -> &'static [&'static str] {
        &["takeover"]
    }

    /// A claim conditional on the version the candidate read (K21's knob off).
    fn safe_client_knobs(&self) -> &'static [SafeKnob] {
        &[SafeKnob {
            name: "takeover",
            values: &[SafeValue::Text("compare-and-swap")],
        }]
    }

    /// A silent holder judged gone by the duration it recorded, on the candidate's
    /// monotonic clock.
    fn safe_knobs(&self) -> &'static [SafeKnob] {
        &[SafeKnob {
            name: "expiry_judged_by",
            values: &[SafeValue::Text("recorded-duration")],
        }]
    }

    /// The store node and the candidate client own all their data (the records, the
    /// candidate's memory of the version it saw) and derive `Clone` and `Debug`: `fencesim
    /// verify` copies and fingerprints them.
    fn explorable(&self) -> Option<fencesim_design::Explorable<Self::Node, Self::Client>> {
        Some(fencesim_design::Explorable::by_clone_and_debug())
    }

    fn settings(
        &self,
        knobs: &mut Knobs,
        _: u64,
    ) -> Result<(ExpiryJudgement, ServiceShape), KnobError> {
        // The store never expires anything: the candidates judge expiry.
        let shape = ServiceShape {
            safepoints: &[crate::client::CLAIM_SENT, crate::client::RENEWAL_SENT],
            ..ServiceShape::single(STORE_NODE)
        };
        Ok((Self::judgement(knobs)?, shape))
    }

    fn client_settings(
        &self,
        knobs: &mut Knobs,
        _: &ClientWorkload,
        _: u64,
    ) -> Result<Takeover, KnobError> {
        record_client_settings(knobs)
    }

    /// The store has no settings of its own.
    fn node_config(_: &ExpiryJudgement) {}

    fn client(judgement: &ExpiryJudgement, takeover: &Takeover, info: ClientInfo) -> RecordClient {
        RecordClient::new(info, *judgement, *takeover)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_judge_by_the_recorded_duration_unless_told_otherwise() {
        let mut knobs = Knobs::default();
        assert_eq!(
            LeaseRecordDesign::judgement(&mut knobs),
            Ok(ExpiryJudgement::RecordedDuration)
        );
        let mut knobs = Knobs::from_toml("expiry_judged_by = \"own-duration\"").unwrap();
        assert_eq!(
            LeaseRecordDesign::judgement(&mut knobs),
            Ok(ExpiryJudgement::OwnDuration)
        );
    }
}
