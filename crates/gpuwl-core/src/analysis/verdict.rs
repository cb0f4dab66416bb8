//! One verdict per pending GPU pod, used by every command that judges pods: the class of
//! its wait ([`PodClass`]) and whether it can pass on its own ([`Verdict::transient`]),
//! derived from `explain`'s diagnosis ([`crate::analysis::explain`], the code that agrees
//! with the real kube-scheduler) and from nothing else.
//!
//! `explain` prints it; `inventory` counts only [`PodClass::Demand`] as pending demand of
//! a pool and only [`PodClass::Unservable`] as "no node can serve"; `serve` exports one
//! series per class and cause; the admission guard in enforce mode denies only what is
//! [`Verdict::permanent`]; `plan` calls short only the pods this verdict calls demand or
//! unservable.
//!
//! | class | cause codes | meaning |
//! |-------|-------------|---------|
//! | `demand` | `in-use`, `insufficient`, `devices-in-use`, `counter-exhausted`, `fits-now` | waits on GPU units (or devices) its pool has and will free |
//! | `blocked` | `excluded` (only cordons or taints keep it off nodes that offer its names), `node-conditions`, `virt-handler` | a drain, a taint or maintenance holds it; not unservable |
//! | `gated` | `gated` | `spec.schedulingGates` hold it (Kueue, a quota manager) |
//! | `other-resource` | `other-resource` | its GPU units are free; cpu, memory, pods or storage are short: not GPU demand |
//! | `unservable` | `unadvertised-name`, `stale-only`, `operator-state`, `excluded` (by nodeSelector / affinity: the split), `not-co-located`, `too-large`, `not-permitted`, `no-matching-device`, `claim-not-found` | no pool offers what it asks, whatever is freed |
//! | `invalid-spec` | `invalid-spec`, `selector-error` | the API server (or the scheduler's CEL) refuses it |
//! | `not-judged` | `scheduled`, `admission-rejected`, `no-gpu-request`, `no-node-data` | not a pending GPU pod, or nothing to judge it by |
//!
//! Transient (can pass without a change to the pod or the cluster's configuration):
//! `stale-only` (a device plugin restarting lists its name with `"0"` for a moment:
//! kubernetes/kubernetes `pkg/kubelet/cm/devicemanager/manager.go` zeroes a resource whose
//! plugin endpoint went away), `operator-state` (the GPU Operator's MIG / vGPU manager and
//! operands roll), `claim-not-found` (a template's claim is made by the resourceclaim
//! controller), `node-conditions`, `virt-handler`, and every `demand` and `blocked`
//! verdict; a `gated` verdict is as transient as the cause that would hold the pod once
//! its gates are removed (`then`). Everything else is permanent: only a change to the object or to the
//! cluster's configuration lets it run.

use std::fmt;

use serde::Serialize;

use crate::analysis::diagnosis::CauseCode;

/// The class of a pod's wait (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum PodClass {
    /// Waits on GPU units its pool will free (or fits now: the next attempt binds it).
    Demand,
    /// Kept off nodes that offer its names by a cordon, taint or node condition.
    Blocked,
    /// Held by `spec.schedulingGates`.
    Gated,
    /// Its GPU units are free; another resource is short. Not GPU demand.
    OtherResource,
    /// No pool offers what it asks, whatever is freed.
    Unservable,
    /// Refused by the API server (or its CEL selectors fail).
    InvalidSpec,
    /// Not a pending GPU pod, or no node data to judge it by.
    NotJudged,
}

impl PodClass {
    /// Every class, in the order reports list them.
    pub const ALL: [PodClass; 7] = [
        PodClass::Demand,
        PodClass::Blocked,
        PodClass::Gated,
        PodClass::OtherResource,
        PodClass::Unservable,
        PodClass::InvalidSpec,
        PodClass::NotJudged,
    ];

    /// The stable name, e.g. `other-resource`.
    pub fn as_str(self) -> &'static str {
        match self {
            PodClass::Demand => "demand",
            PodClass::Blocked => "blocked",
            PodClass::Gated => "gated",
            PodClass::OtherResource => "other-resource",
            PodClass::Unservable => "unservable",
            PodClass::InvalidSpec => "invalid-spec",
            PodClass::NotJudged => "not-judged",
        }
    }
}

impl fmt::Display for PodClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The verdict on one pod: its class, the cause code it rests on, and whether the wait can
/// pass on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The class.
    pub class: PodClass,
    /// The primary cause code (explain's `causeCode`); for a gated pod, the code that
    /// would hold it once the gates are removed.
    pub code: CauseCode,
    /// Whether the wait can pass without a change to the object or the cluster's
    /// configuration (see the module docs).
    pub transient: bool,
    /// For a gated pod: the cause that would hold it once its gates are removed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub then: Option<CauseCode>,
}

impl Verdict {
    /// Whether nothing short of a change to the object or the configuration lets it run:
    /// what the admission guard in enforce mode may deny.
    pub fn permanent(&self) -> bool {
        match (self.class, self.then) {
            // A gate only delays: a pod that could never run without it never will.
            (PodClass::Gated, Some(_)) => !self.transient,
            (class, _) => {
                !self.transient && matches!(class, PodClass::Unservable | PodClass::InvalidSpec)
            }
        }
    }
}

/// Whether a wait on `code` can pass on its own (see the module docs).
pub fn transient(code: CauseCode) -> bool {
    use CauseCode::*;
    matches!(
        code,
        StaleOnly
            | OperatorState
            | ClaimNotFound
            | NodeConditions
            | VirtHandler
            | InUse
            | Insufficient
            | DevicesInUse
            | CounterExhausted
            | FitsNow
            | Gated
    )
}

/// The class of a pod whose primary cause is `code` (explain's `causeCode`: `gated`
/// whenever scheduling gates hold a pod that is otherwise judged); `held_off_only`: for
/// `excluded`, whether some node that offers every requested name with enough allocatable
/// units is kept from the pod by cordons or taints only (then a drain or a taint blocks
/// it; else the pod's own nodeSelector / affinity confines it to pools without the name:
/// the split).
pub fn classify(code: CauseCode, held_off_only: bool) -> PodClass {
    use CauseCode::*;
    match code {
        InUse | Insufficient | DevicesInUse | CounterExhausted | FitsNow => PodClass::Demand,
        NodeConditions | VirtHandler => PodClass::Blocked,
        Excluded if held_off_only => PodClass::Blocked,
        Gated => PodClass::Gated,
        OtherResource => PodClass::OtherResource,
        UnadvertisedName | StaleOnly | OperatorState | Excluded | NotCoLocated | TooLarge
        | NotPermitted | NoMatchingDevice | ClaimNotFound => PodClass::Unservable,
        InvalidSpec | SelectorError => PodClass::InvalidSpec,
        Scheduled | AdmissionRejected | NoGpuRequest | NoNodeData => PodClass::NotJudged,
    }
}

/// The verdict of a primary cause: [`classify`] and [`transient`] together.
pub fn verdict(code: CauseCode, held_off_only: bool) -> Verdict {
    Verdict {
        class: classify(code, held_off_only),
        code,
        transient: transient(code),
        then: None,
    }
}

/// The verdict of a pod held by scheduling gates whose rules gave `then`: class `gated`,
/// permanent exactly when `then` is (the admission guard may deny a gated pod that asks
/// for a name no node offers: removing the gate will not make it run).
pub fn gated(then: CauseCode, held_off_only: bool) -> Verdict {
    let after = verdict(then, held_off_only);
    Verdict {
        class: PodClass::Gated,
        code: CauseCode::Gated,
        // Whatever can pass on its own once the gates are gone is transient; only an
        // unservable or invalid pod stays permanent behind its gates.
        transient: !after.permanent(),
        then: Some(then),
    }
}

/// Whether scheduling gates change the verdict of a pod whose rules gave `code`: only a
/// pod that is otherwise judged (not invalid, not bound, asking for GPUs) is `gated`.
pub(crate) fn gates_apply(code: CauseCode) -> bool {
    !matches!(
        classify(code, false),
        PodClass::InvalidSpec | PodClass::NotJudged
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_one_class_and_the_table_holds() {
        for c in CauseCode::ALL {
            let v = verdict(c, false);
            // Demand and blocked waits pass on their own; invalid objects never do.
            match v.class {
                PodClass::Demand | PodClass::Blocked | PodClass::Gated => {
                    assert!(v.transient, "{c}")
                }
                PodClass::InvalidSpec => assert!(v.permanent(), "{c}"),
                _ => {}
            }
        }
        assert_eq!(classify(CauseCode::InUse, false), PodClass::Demand);
        assert_eq!(classify(CauseCode::FitsNow, false), PodClass::Demand);
        assert_eq!(classify(CauseCode::Excluded, true), PodClass::Blocked);
        assert_eq!(classify(CauseCode::Excluded, false), PodClass::Unservable);
        assert_eq!(
            classify(CauseCode::OtherResource, false),
            PodClass::OtherResource
        );
        assert_eq!(
            classify(CauseCode::NotCoLocated, false),
            PodClass::Unservable
        );
        assert_eq!(classify(CauseCode::NoNodeData, false), PodClass::NotJudged);
        assert_eq!(classify(CauseCode::Gated, false), PodClass::Gated);
    }

    #[test]
    fn gates_apply_only_to_judged_pods() {
        assert!(gates_apply(CauseCode::TooLarge));
        assert!(gates_apply(CauseCode::FitsNow));
        assert!(!gates_apply(CauseCode::InvalidSpec));
        assert!(!gates_apply(CauseCode::NoGpuRequest));
        assert!(!verdict(CauseCode::Gated, false).permanent());
        // A gate only delays: what could never run without it stays permanent.
        assert!(gated(CauseCode::UnadvertisedName, false).permanent());
        assert!(!gated(CauseCode::FitsNow, false).permanent());
        assert!(!gated(CauseCode::Excluded, true).permanent());
        assert!(gated(CauseCode::Excluded, false).permanent());
        assert!(gated(CauseCode::OtherResource, false).transient);
        assert_eq!(gated(CauseCode::TooLarge, false).class, PodClass::Gated);
    }

    #[test]
    fn only_permanent_unservable_or_invalid_may_be_denied() {
        // A plugin restart lists the name with "0" for a moment: never denied.
        assert!(!verdict(CauseCode::StaleOnly, false).permanent());
        assert!(!verdict(CauseCode::OperatorState, false).permanent());
        assert!(verdict(CauseCode::UnadvertisedName, false).permanent());
        assert!(verdict(CauseCode::NotPermitted, false).permanent());
        assert!(!verdict(CauseCode::Excluded, true).permanent());
        assert!(verdict(CauseCode::Excluded, false).permanent());
        assert!(!verdict(CauseCode::OtherResource, false).permanent());
    }
}
