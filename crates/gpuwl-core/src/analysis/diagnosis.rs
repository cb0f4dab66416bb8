//! The typed result of a diagnosis rule: a stable [`CauseCode`], the cause and the one fix
//! in words, and the evidence (facts read from the input) that led there. Rules build
//! these; `render/` prints them.

use std::fmt;

use serde::Serialize;

/// Why a GPU pod or VM is not running where it should, as a stable code for scripts and
/// tests (`explain -o json` → `causeCode`). Rules are tried in the order of this table
/// ([`CauseCode::ALL`]); the first that applies wins.
///
/// | code | meaning |
/// |------|---------|
/// | `invalid-spec` | the API server refuses the manifest (an extended resource in requests without limits, or different from them; a request above its limit): there is no pod to schedule |
/// | `admission-rejected` | the pod was bound, then the kubelet refused it (phase `Failed`, e.g. `UnexpectedAdmissionError` from a device plugin's Allocate) |
/// | `scheduled` | the pod is bound to a node: nothing to explain |
/// | `no-gpu-request` | it requests no extended resource: its wait is not about GPUs |
/// | `gated` | `spec.schedulingGates` hold it: the scheduler does not consider it until every gate is removed (by the controller that added it, e.g. Kueue); the causes after it say what would hold it then |
/// | `not-permitted` | a VMI's GPU/host-device name is not in the KubeVirt CR's `permittedHostDevices`: KubeVirt refuses the VMI, no launcher pod exists |
/// | `claim-not-found` | a resource claim of the pod does not exist (a missing ResourceClaim, or a template whose claim is not made yet) |
/// | `selector-error` | a claim's or DeviceClass's CEL selector fails to evaluate on a device of an allowed node (a missing attribute, a version compared with a string): the scheduler aborts every attempt (`SchedulerError`) |
/// | `no-matching-device` | a claim's request matches no device (its DeviceClass's and its own CEL selectors) on a node the pod may use |
/// | `counter-exhausted` | the matching devices are blocked: the physical GPU behind each is taken under another device type (its shared counter consumed, e.g. by a `gpu` claim when a `vfio` device is asked) |
/// | `devices-in-use` | the matching devices are allocated to other claims |
/// | `no-node-data` | no nodes were given: nothing can be said about names |
/// | `node-conditions` | every node carries a `node.kubernetes.io/*` condition taint the pod does not tolerate |
/// | `virt-handler` | a virt-launcher pod (or a VMI/VM) and no node advertising its GPU names has virt-handler ready: `kubevirt.io/schedulable=true` and `devices.kubevirt.io/kvm`, both virt-handler's |
/// | `operator-state` | the GPU Operator's own state keeps the name from being advertised: `nvidia.com/mig.config.state` / `vgpu.config.state` failed or pending, sandbox workloads off while nodes are labelled for VMs, an operand disabled by `nvidia.com/gpu.deploy.*=false` |
/// | `unadvertised-name` | no node advertises a requested name (non-zero) |
/// | `stale-only` | the name is only listed with a stale `0` (its device plugin left) |
/// | `excluded` | nodes advertise it, but a cordon, nodeSelector / required affinity or untolerated taints exclude all of them; or a cordoned node is the only one that would fit (fix: `kubectl uncordon`) |
/// | `not-co-located` | each requested name is advertised on an allowed node, but no single node has all of them |
/// | `too-large` | the request is larger than any allowed node's allocatable: no amount of freeing helps |
/// | `in-use` | the right name on allowed nodes, but every unit is allocated |
/// | `insufficient` | free units exist on allowed nodes, but fewer than requested on each |
/// | `other-resource` | the GPU units are free on an allowed node, but it is short of cpu, memory, ephemeral-storage, hugepages or pod slots |
/// | `fits-now` | an allowed node has the units free now: the wait is elsewhere (next attempt, cpu/memory) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CauseCode {
    /// Bound to a node.
    Scheduled,
    /// No extended-resource request.
    NoGpuRequest,
    /// Not in KubeVirt's `permittedHostDevices`.
    NotPermitted,
    /// A resource claim of the pod does not exist.
    ClaimNotFound,
    /// A CEL selector fails on a device: the scheduling attempt is aborted.
    SelectorError,
    /// A claim's request matches no device on an allowed node.
    NoMatchingDevice,
    /// The matching devices' shared counters are consumed by sibling devices.
    CounterExhausted,
    /// The matching devices are allocated to other claims.
    DevicesInUse,
    /// No node data.
    NoNodeData,
    /// Node-condition taints on every node.
    NodeConditions,
    /// No node advertises the name.
    UnadvertisedName,
    /// Only stale `0` entries.
    StaleOnly,
    /// Constraints exclude every advertiser.
    Excluded,
    /// No single node advertises all requested names.
    NotCoLocated,
    /// Larger than any node's allocatable.
    TooLarge,
    /// Every unit allocated.
    InUse,
    /// Some free units, fewer than asked.
    Insufficient,
    /// Fits now.
    FitsNow,
    // Added for issue 22 (rule positions are in ALL, not in this declaration order).
    /// The API server refuses the manifest.
    InvalidSpec,
    /// Bound, then refused by the kubelet.
    AdmissionRejected,
    /// The GPU Operator's own state keeps the name from being advertised.
    OperatorState,
    /// GPU units fit, another resource (cpu, memory, pods, ...) does not.
    OtherResource,
    // Added for issue 28.
    /// virt-handler is not ready on the nodes a VM needs.
    VirtHandler,
    // Added for issue 34.
    /// Held by `spec.schedulingGates`.
    Gated,
}

impl CauseCode {
    /// Every code, in rule order.
    pub const ALL: [CauseCode; 24] = [
        CauseCode::InvalidSpec,
        CauseCode::AdmissionRejected,
        CauseCode::Scheduled,
        CauseCode::NoGpuRequest,
        CauseCode::Gated,
        CauseCode::NotPermitted,
        CauseCode::ClaimNotFound,
        CauseCode::SelectorError,
        CauseCode::NoMatchingDevice,
        CauseCode::CounterExhausted,
        CauseCode::DevicesInUse,
        CauseCode::NoNodeData,
        CauseCode::NodeConditions,
        CauseCode::VirtHandler,
        CauseCode::OperatorState,
        CauseCode::UnadvertisedName,
        CauseCode::StaleOnly,
        CauseCode::Excluded,
        CauseCode::NotCoLocated,
        CauseCode::TooLarge,
        CauseCode::InUse,
        CauseCode::Insufficient,
        CauseCode::OtherResource,
        CauseCode::FitsNow,
    ];

    /// Whether the code is a cause that holds the pod: every code but `scheduled` and
    /// `fits-now` (which `explain` exits 0 on, and "Also blocking" never lists).
    pub fn blocks(self) -> bool {
        !matches!(self, CauseCode::Scheduled | CauseCode::FitsNow)
    }

    /// The stable code, e.g. `unadvertised-name`.
    pub fn as_str(self) -> &'static str {
        match self {
            CauseCode::Scheduled => "scheduled",
            CauseCode::NoGpuRequest => "no-gpu-request",
            CauseCode::NoNodeData => "no-node-data",
            CauseCode::ClaimNotFound => "claim-not-found",
            CauseCode::SelectorError => "selector-error",
            CauseCode::NoMatchingDevice => "no-matching-device",
            CauseCode::CounterExhausted => "counter-exhausted",
            CauseCode::DevicesInUse => "devices-in-use",
            CauseCode::NotPermitted => "not-permitted",
            CauseCode::NodeConditions => "node-conditions",
            CauseCode::UnadvertisedName => "unadvertised-name",
            CauseCode::StaleOnly => "stale-only",
            CauseCode::Excluded => "excluded",
            CauseCode::NotCoLocated => "not-co-located",
            CauseCode::TooLarge => "too-large",
            CauseCode::InUse => "in-use",
            CauseCode::Insufficient => "insufficient",
            CauseCode::FitsNow => "fits-now",
            CauseCode::InvalidSpec => "invalid-spec",
            CauseCode::AdmissionRejected => "admission-rejected",
            CauseCode::OperatorState => "operator-state",
            CauseCode::OtherResource => "other-resource",
            CauseCode::VirtHandler => "virt-handler",
            CauseCode::Gated => "gated",
        }
    }
}

impl fmt::Display for CauseCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One diagnosis: what is wrong, what to do, and what it rests on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    /// The stable code.
    pub code: CauseCode,
    /// The cause, one paragraph.
    pub cause: String,
    /// The one fix.
    pub fix: String,
    /// Facts from the input behind the cause (node and pod names, counts), one per line.
    pub evidence: Vec<String>,
}

impl Diagnosis {
    /// A diagnosis without evidence lines.
    pub fn new(code: CauseCode, cause: impl Into<String>, fix: impl Into<String>) -> Diagnosis {
        Diagnosis {
            code,
            cause: cause.into(),
            fix: fix.into(),
            evidence: Vec::new(),
        }
    }

    /// Adds evidence lines.
    pub(crate) fn with_evidence(mut self, evidence: impl IntoIterator<Item = String>) -> Diagnosis {
        self.evidence.extend(evidence);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_kebab_strings() {
        for c in CauseCode::ALL {
            assert_eq!(
                serde_json::to_value(c).unwrap(),
                serde_json::Value::String(c.as_str().into())
            );
        }
        assert_eq!(CauseCode::NotCoLocated.to_string(), "not-co-located");
        // Every code once in ALL (its rule order), and RULES in that order.
        let mut sorted = CauseCode::ALL;
        sorted.sort();
        sorted.windows(2).for_each(|w| assert_ne!(w[0], w[1]));
        let rules: Vec<CauseCode> = crate::analysis::explain::rules::RULES
            .iter()
            .map(|(c, _)| *c)
            .collect();
        // The DRA slot (NoMatchingDevice) also answers counter-exhausted and
        // devices-in-use, so those two have no rule of their own; `gated` is put in front
        // of the rules' answer (explain's diagnose step), not a rule.
        let expected: Vec<CauseCode> = CauseCode::ALL
            .into_iter()
            .filter(|c| {
                !matches!(
                    c,
                    CauseCode::CounterExhausted | CauseCode::DevicesInUse | CauseCode::Gated
                )
            })
            .collect();
        assert_eq!(rules, expected, "RULES are in ALL's order");
    }
}
