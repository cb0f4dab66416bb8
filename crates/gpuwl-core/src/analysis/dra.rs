//! DRA analysis: which devices a DeviceClass and a request's CEL selectors match, which
//! devices are allocated, which are blocked because a sibling consumed their shared
//! counter, the DRA rows of `inventory` (driver × device type × node pool) and the claim
//! views of `explain`.
//!
//! Facts used:
//! - a device is allocated when a claim's `status.allocation.devices.results[]` names it
//!   (driver, pool, device); kubernetes/kubernetes
//!   `staging/src/k8s.io/api/resource/v1/types.go` (`DeviceRequestAllocationResult`);
//! - a device that consumes counters can be allocated only while every counter it
//!   consumes has that much left in its pool's `sharedCounters` after the allocated
//!   devices' consumption (`types.go`, `Device.ConsumesCounters`: "the sum of all consumed
//!   counters across all allocated devices must not exceed the counter's value"); so a
//!   GPU published as a `gpu` device and a `vfio` device that each consume the GPU's whole
//!   counter is one GPU: allocating one blocks the other;
//! - a shared counter set stands for one physical device (NVIDIA/k8s-dra-driver-gpu
//!   publishes one counter set per GPU); devices consuming none are told apart by their
//!   `uuid`, else `pcieBusID` attribute (NVIDIA/k8s-dra-driver-gpu
//!   `cmd/gpu-kubelet-plugin/deviceinfo.go`), else they are their own device;
//! - selectors are CEL over `device.driver`, `device.attributes[domain][name]`,
//!   `device.capacity[domain][name]`
//!   (kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`);
//!   an unknown domain yields an empty map, an unknown attribute is an evaluation error
//!   (the device does not match; the error is reported).
//!
//! CEL is evaluated with the `cel` crate (cel-rust/cel-rust). Differences from the API
//! server's environment, stated: `version` attributes are strings (no `semver()`
//! functions), capacities are whole numbers of units (bytes for memory; no `quantity()`
//! functions); a selector using those fails to evaluate and is reported as such.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::model::dra::{
    ClaimRequest, DraObjects, DraSource, PodClaim, RequestSpec, ResourceClaim,
};
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::pool::Pool;

use crate::analysis::dra_hints::{self, Hint};
use crate::analysis::dra_match::{CounterKey, consumption, left_after_allocations};
pub(crate) use crate::analysis::dra_match::{Matcher, SelectorFailure};
use crate::analysis::names;

/// A row being summed: the row, its nodes, its physical devices.
type RowAcc = (DraRow, BTreeSet<String>, BTreeSet<String>);

/// One DRA row of `inventory`: driver × device type × node pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraRow {
    /// The driver, e.g. `gpu.nvidia.com`.
    pub driver: String,
    /// The device type (the `type` attribute, else the DeviceClass selecting it, else `-`).
    pub device_type: String,
    /// The node pool ([`Pool::name`]) of the devices' node; `(not node-local)` for devices
    /// without a node, `(node not read)` when the node is not in the node list.
    pub pool: String,
    /// Nodes with such devices.
    pub nodes: usize,
    /// Devices published.
    pub devices: usize,
    /// Physical devices behind them, each counted once across all rows of the driver and
    /// pool (see [`DraInventory::physical_gpus`]).
    pub physical: usize,
    /// Devices allocated to claims.
    pub allocated: usize,
    /// Devices not allocated but blocked: a sibling consumed their shared counter.
    pub blocked: usize,
    /// Devices neither allocated nor blocked.
    pub free: usize,
    /// Devices asked for by unallocated claims whose selectors match devices of this row
    /// (a claim matching several rows counts in each).
    pub pending: i64,
    /// Those claims, `namespace/name`.
    pub pending_claims: Vec<String>,
}

/// A device blocked by its sibling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockedDevice {
    /// `driver/pool/device`.
    pub device: String,
    /// Its type.
    pub device_type: String,
    /// Its node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `in use as vfio by ns/claim`.
    pub reason: String,
}

/// The DRA part of `inventory`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraInventory {
    /// Where the objects came from, or why they were not read.
    pub source: DraSource,
    /// DeviceClasses, ResourceSlices and ResourceClaims read.
    pub device_classes: usize,
    /// ResourceSlices read.
    pub resource_slices: usize,
    /// ResourceClaims read.
    pub resource_claims: usize,
    /// Rows, by driver, type, pool.
    pub rows: Vec<DraRow>,
    /// Physical devices (GPUs) behind all devices, each counted once: a GPU offered as a
    /// `gpu` and a `vfio` device is one.
    pub physical_gpus: usize,
    /// Physical devices of which some device is allocated.
    pub physical_in_use: usize,
    /// Devices blocked by a sibling's allocation.
    pub blocked: Vec<BlockedDevice>,
    /// Selectors that could not be evaluated, and other remarks.
    pub notes: Vec<String>,
}

/// The DRA inventory of `dra` (`source` says where it came from) with nodes' pools from
/// `nodes` (and `policy`).
pub fn inventory(
    dra: &DraObjects,
    source: DraSource,
    nodes: &[NodeInfo],
    policy: Option<&ClusterPolicy>,
) -> DraInventory {
    let m = Matcher::new(dra);
    let pool_of = |node: Option<&str>| -> String {
        match node {
            None => "(not node-local)".into(),
            Some(n) => nodes
                .iter()
                .find(|x| x.name == n)
                .map(|x| Pool::of(x, policy).name())
                .unwrap_or_else(|| "(node not read)".into()),
        }
    };
    let mut rows: BTreeMap<(String, String, String), RowAcc> = BTreeMap::new();
    let mut row_of = Vec::new();
    for d in &m.devices {
        let pool = pool_of(d.node);
        let key = (d.slice.driver.clone(), d.device_type.clone(), pool.clone());
        row_of.push(key.clone());
        let e = rows.entry(key).or_insert_with(|| {
            (
                DraRow {
                    driver: d.slice.driver.clone(),
                    device_type: d.device_type.clone(),
                    pool,
                    nodes: 0,
                    devices: 0,
                    physical: 0,
                    allocated: 0,
                    blocked: 0,
                    free: 0,
                    pending: 0,
                    pending_claims: Vec::new(),
                },
                BTreeSet::new(),
                BTreeSet::new(),
            )
        });
        e.0.devices += 1;
        if !d.allocated_to.is_empty() {
            e.0.allocated += 1;
        } else if !d.blocked_by.is_empty() {
            e.0.blocked += 1;
        } else {
            e.0.free += 1;
        }
        if let Some(n) = d.node {
            e.1.insert(n.to_owned());
        }
        e.2.insert(d.physical.clone());
    }
    let mut notes = BTreeSet::new();
    for c in dra.resource_claims.iter().filter(|c| !c.allocated) {
        for r in &c.requests {
            let mut hit: BTreeSet<(String, String, String)> = BTreeSet::new();
            let mut want = 0i64;
            for alt in &r.alternatives {
                let (idx, errs) = m.matching(dra, alt);
                notes.extend(
                    errs.into_iter()
                        .map(|e| format!("claim {}: request {}: selector {e}", c.key(), r.name)),
                );
                if idx.is_empty() {
                    continue;
                }
                want = if alt.all { idx.len() as i64 } else { alt.count };
                hit.extend(idx.iter().map(|i| row_of[*i].clone()));
                break;
            }
            for k in hit {
                if let Some(e) = rows.get_mut(&k) {
                    e.0.pending = e.0.pending.saturating_add(want);
                    if !e.0.pending_claims.contains(&c.key()) {
                        e.0.pending_claims.push(c.key());
                    }
                }
            }
        }
    }
    let physical_gpus: BTreeSet<&str> = m.devices.iter().map(|d| d.physical.as_str()).collect();
    let in_use: BTreeSet<&str> = m
        .devices
        .iter()
        .filter(|d| !d.allocated_to.is_empty())
        .map(|d| d.physical.as_str())
        .collect();
    let blocked = m
        .devices
        .iter()
        .filter(|d| d.allocated_to.is_empty() && !d.blocked_by.is_empty())
        .map(|d| BlockedDevice {
            device: d.id(),
            device_type: d.device_type.clone(),
            node: d.node.map(str::to_owned),
            reason: format!("in use as {}", d.blocked_by.join(", ")),
        })
        .collect();
    DraInventory {
        source,
        device_classes: dra.device_classes.len(),
        resource_slices: dra.resource_slices.len(),
        resource_claims: dra.resource_claims.len(),
        rows: rows
            .into_values()
            .map(|(mut r, n, p)| {
                r.nodes = n.len();
                r.physical = p.len();
                r
            })
            .collect(),
        physical_gpus: physical_gpus.len(),
        physical_in_use: in_use.len(),
        blocked,
        notes: notes.into_iter().collect(),
    }
}

/// A device a request matches, with its state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MatchedDevice {
    /// `driver/pool/device`.
    pub device: String,
    /// Its type.
    pub device_type: String,
    /// Its node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Whether the pod's constraints allow its node (true when nodes are unknown or the
    /// device is not node-local).
    pub allowed: bool,
    /// `free`, `allocated to ns/claim`, or `in use as vfio by ns/claim`.
    pub state: String,
    /// Neither allocated nor blocked.
    pub free: bool,
    /// Blocked by a sibling's allocation (its shared counter is consumed).
    pub blocked: bool,
    /// The other claims it is allocated to (`ns/claim`; this pod's own claim left out).
    #[serde(skip)]
    pub holders: Vec<String>,
}

/// One alternative of a request (`exactly`, or one `firstAvailable` entry).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AlternativeView {
    /// Subrequest name (`firstAvailable`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub subrequest: Option<String>,
    /// `deviceClassName`.
    pub device_class: String,
    /// Whether the DeviceClass exists.
    pub class_found: bool,
    /// The class's selectors, then the request's own.
    pub selectors: Vec<String>,
    /// Devices asked for (`All`: every matching device).
    pub count: i64,
    /// `allocationMode: All`.
    pub all: bool,
    /// The devices all selectors match.
    pub matching: Vec<MatchedDevice>,
    /// Matching devices on allowed nodes that are free.
    pub free: usize,
    /// Selectors that could not be evaluated.
    pub errors: Vec<String>,
    /// The most matching devices (free or not) on any one allowed node: a count above it
    /// can never be served (one claim's devices come from one node).
    pub max_on_one_node: usize,
    /// Devices on allowed nodes the DeviceClass's selectors alone accept (the request's own
    /// selectors aside), and how many of them are free.
    pub class_matches: usize,
    /// Of [`AlternativeView::class_matches`], the free ones.
    pub class_free: usize,
    /// When nothing matches: why, per attribute the selectors reference.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hints: Vec<Hint>,
    /// When no device on an allowed node matches: the other DeviceClasses (by name) under
    /// which this request, its own selectors unchanged, would match at least one device
    /// on an allowed node — evaluated on the same devices, so naming one of them in the
    /// claim's `deviceClassName` is a tested change (not that enough of them are free).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_classes: Vec<String>,
}

/// One request of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraRequestView {
    /// `name`.
    pub request: String,
    /// The alternatives, in order.
    pub alternatives: Vec<AlternativeView>,
}

/// One of the pod's `spec.resourceClaims`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClaimView {
    /// The pod's name for it (`spec.resourceClaims[].name`).
    pub name: String,
    /// The ResourceClaim, `namespace/name`, when it resolves to one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<String>,
    /// `resourceClaimTemplateName`, when the claim comes from a template.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
    /// Whether the ResourceClaim exists in the DRA objects read (or, for a template
    /// whose claim is not made yet, whether the template does: its requests are then the
    /// template's, as the claim made from it will carry).
    pub found: bool,
    /// The requests come from the ResourceClaimTemplate (no claim made from it yet).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_template: bool,
    /// For an allocated claim: the nodes its allocation is bound to
    /// (`status.allocation.nodeSelector`), else the nodes of its devices.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub allocated_nodes: Vec<String>,
    /// For an allocated claim: the pods it is reserved for (`status.reservedFor`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reserved_for: Vec<String>,
    /// Whether it is allocated.
    pub allocated: bool,
    /// Its allocated devices, `driver/pool/device (request)`.
    pub allocated_devices: Vec<String>,
    /// Its requests.
    pub requests: Vec<DraRequestView>,
}

/// The requests of one of the pod's claims: the ResourceClaim's, or — when no claim was
/// made from the pod's template yet (a pod not created yet, or the controller has not run)
/// — the template's, with the name the claim will be known by.
fn pod_claim_source<'d>(
    dra: &'d DraObjects,
    namespace: &str,
    pc: &PodClaim,
) -> Option<(String, &'d [ClaimRequest], Option<&'d ResourceClaim>)> {
    if let Some(c) = pc.claim_name().and_then(|n| dra.claim(namespace, n)) {
        return Some((c.key(), c.requests.as_slice(), Some(c)));
    }
    if pc.claim_name().is_none()
        && let Some(t) = pc
            .resource_claim_template_name
            .as_deref()
            .and_then(|t| dra.template(namespace, t))
    {
        return Some((
            format!("{namespace}/(from template {})", t.name),
            t.requests.as_slice(),
            None,
        ));
    }
    None
}

/// The claim views of `pod_claims` (namespace `namespace`); `allowed(node)` says whether
/// the pod's constraints allow a node.
pub(crate) fn claim_views(
    dra: &DraObjects,
    namespace: &str,
    pod_claims: &[PodClaim],
    allowed: &dyn Fn(&str) -> bool,
) -> Vec<ClaimView> {
    let m = Matcher::new(dra);
    pod_claims
        .iter()
        .map(|pc| {
            let source = pod_claim_source(dra, namespace, pc);
            let claim: Option<&ResourceClaim> = source.as_ref().and_then(|s| s.2);
            let mut v = ClaimView {
                name: pc.name.clone(),
                claim: pc.claim_name().map(|n| format!("{namespace}/{n}")),
                template: pc.resource_claim_template_name.clone(),
                found: source.is_some(),
                from_template: source.as_ref().is_some_and(|s| s.2.is_none()),
                allocated_nodes: claim.map(|c| allocated_nodes(&m, c)).unwrap_or_default(),
                reserved_for: claim.map(|c| c.reserved_for.clone()).unwrap_or_default(),
                allocated: claim.is_some_and(|c| c.allocated),
                allocated_devices: claim
                    .map(|c| {
                        c.results
                            .iter()
                            .map(|r| {
                                format!("{}/{}/{} ({})", r.driver, r.pool, r.device, r.request)
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                requests: Vec::new(),
            };
            let Some((key, requests, _)) = source else {
                return v;
            };
            for r in requests {
                let mut alts = Vec::new();
                for alt in &r.alternatives {
                    let (idx, errors) = m.matching(dra, alt);
                    let mut selectors: Vec<String> = dra
                        .class(&alt.device_class)
                        .map(|c| c.selectors.clone())
                        .unwrap_or_default();
                    selectors.extend(alt.selectors.iter().cloned());
                    let matching: Vec<MatchedDevice> = idx
                        .iter()
                        .map(|&i| {
                            let d = &m.devices[i];
                            let mine = d.allocated_to.contains(&key);
                            MatchedDevice {
                                device: d.id(),
                                device_type: d.device_type.clone(),
                                node: d.node.map(str::to_owned),
                                allowed: d.node.is_none_or(allowed),
                                state: if !d.allocated_to.is_empty() {
                                    format!(
                                        "allocated to {}{}",
                                        d.allocated_to.join(", "),
                                        if mine { " (this claim)" } else { "" }
                                    )
                                } else if !d.blocked_by.is_empty() {
                                    format!("in use as {}", d.blocked_by.join(", "))
                                } else {
                                    "free".into()
                                },
                                free: d.is_free(),
                                blocked: d.allocated_to.is_empty() && !d.blocked_by.is_empty(),
                                holders: d
                                    .allocated_to
                                    .iter()
                                    .filter(|k| **k != key)
                                    .cloned()
                                    .collect(),
                            }
                        })
                        .collect();
                    let hints = if matching.is_empty() {
                        dra_hints::hints(&m, dra, alt)
                    } else {
                        Vec::new()
                    };
                    let by_class: Vec<usize> = match dra.class(&alt.device_class) {
                        Some(c) => (0..m.devices.len())
                            .filter(|&i| {
                                m.devices[i].node.is_none_or(allowed)
                                    && c.selectors.iter().all(|e| m.eval(e, i) == Ok(true))
                            })
                            .collect(),
                        None => Vec::new(),
                    };
                    // Where nothing matches: the other DeviceClasses under which the same
                    // request (its own selectors kept) would match a device on an allowed
                    // node — the fix is the claim's deviceClassName, never a class's
                    // selectors (a cluster-wide object every claim of that class uses).
                    let other_classes: Vec<String> = if matching.iter().any(|d| d.allowed) {
                        Vec::new()
                    } else {
                        let named: Vec<String> = dra
                            .device_classes
                            .iter()
                            .filter(|c| c.name != alt.device_class)
                            .filter(|c| {
                                (0..m.devices.len()).any(|i| {
                                    m.devices[i].node.is_none_or(allowed)
                                        && c.selectors
                                            .iter()
                                            .chain(&alt.selectors)
                                            .all(|e| m.eval(e, i) == Ok(true))
                                })
                            })
                            .map(|c| c.name.clone())
                            .collect();
                        // Nearest to the name asked first (a typo's class leads).
                        names::nearest_first(named, &alt.device_class)
                    };
                    alts.push(AlternativeView {
                        other_classes,
                        subrequest: alt.subrequest.clone(),
                        device_class: alt.device_class.clone(),
                        class_found: dra.class(&alt.device_class).is_some(),
                        selectors,
                        count: alt.count,
                        all: alt.all,
                        free: matching.iter().filter(|d| d.free && d.allowed).count(),
                        max_on_one_node: max_on_one_node(&matching),
                        matching,
                        errors,
                        hints,
                        class_matches: by_class.len(),
                        class_free: by_class.iter().filter(|&&i| m.devices[i].is_free()).count(),
                    });
                }
                v.requests.push(DraRequestView {
                    request: r.name.clone(),
                    alternatives: alts,
                });
            }
            v
        })
        .collect()
}

/// The most matching devices (free or not) on one allowed node (devices reachable from
/// every node count on each).
fn max_on_one_node(matching: &[MatchedDevice]) -> usize {
    let shared = matching
        .iter()
        .filter(|d| d.allowed && d.node.is_none())
        .count();
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for d in matching.iter().filter(|d| d.allowed) {
        if let Some(n) = d.node.as_deref() {
            *per.entry(n).or_default() += 1;
        }
    }
    per.values().max().copied().unwrap_or(0) + shared
}

/// The nodes an allocated claim is bound to: its allocation's node selector, else the
/// nodes of its devices.
fn allocated_nodes(m: &Matcher<'_>, c: &ResourceClaim) -> Vec<String> {
    if !c.allocated_nodes.is_empty() {
        return c.allocated_nodes.clone();
    }
    let mut out: Vec<String> = Vec::new();
    for r in &c.results {
        if let Some(n) = m
            .devices
            .iter()
            .find(|d| {
                d.slice.driver == r.driver && d.slice.pool == r.pool && d.device.name == r.device
            })
            .and_then(|d| d.node)
            && !out.iter().any(|o| o == n)
        {
            out.push(n.to_owned());
        }
    }
    out
}

/// What allocating the pod's claims on one node gives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "verdict")]
pub enum NodeAllocation {
    /// Every claim can be allocated (or is allocated) here.
    Fits,
    /// An allocated claim of the pod is bound to other nodes.
    ClaimElsewhere {
        /// The claim, `ns/name`.
        claim: String,
        /// The nodes it is bound to.
        nodes: Vec<String>,
    },
    /// No allocation of the unallocated claims exists here now.
    CannotAllocate,
    /// A selector failed to evaluate before an allocation was found: the scheduler aborts.
    SelectorError(SelectorFailure),
    /// The search was cut short (more than [`SEARCH_LIMIT`] steps).
    Unknown,
}

/// The most devices tried in one node's allocation search before giving up.
pub(crate) const SEARCH_LIMIT: usize = 200_000;

/// The DRA part of scheduling the pod: per allowed node, whether its claims can be
/// allocated there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DraPlacement {
    /// Per node the pod's constraints allow, in node order.
    pub nodes: Vec<(String, NodeAllocation)>,
    /// The nodes where every claim can be allocated now.
    pub fits: Vec<String>,
    /// The first selector error met on an allowed node, if any: the scheduler's attempt
    /// ends in `SchedulerError` with it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector_error: Option<SelectorFailure>,
}

/// One claim to allocate: its key and requests.
struct Pending<'d> {
    key: String,
    requests: &'d [ClaimRequest],
}

/// The search state on one node.
struct Search<'m, 'd> {
    m: &'m Matcher<'d>,
    dra: &'d DraObjects,
    /// Device indexes visible from the node, in slice and device order.
    visible: Vec<usize>,
    claims: Vec<Pending<'d>>,
    /// Devices taken by this search.
    taking: BTreeSet<usize>,
    /// Counter amounts left: (driver, pool, set, counter) → amount.
    left: BTreeMap<CounterKey, i64>,
    steps: usize,
}

enum Stop {
    Error(Box<SelectorFailure>),
    Limit,
}

impl<'d> Search<'_, 'd> {
    fn counters_ok(&self, i: usize) -> bool {
        consumption(&self.m.devices[i])
            .all(|(k, amount)| self.left.get(&k).copied().unwrap_or(0) >= amount)
    }

    fn take(&mut self, i: usize, sign: i64) {
        for (k, amount) in consumption(&self.m.devices[i]) {
            let e = self.left.entry(k).or_default();
            *e = e.saturating_sub(sign.saturating_mul(amount));
        }
        if sign > 0 {
            self.taking.insert(i);
        } else {
            self.taking.remove(&i);
        }
    }

    fn in_use(&self, i: usize) -> bool {
        !self.m.devices[i].allocated_to.is_empty() || self.taking.contains(&i)
    }

    fn step(&mut self) -> Result<(), Stop> {
        self.steps += 1;
        if self.steps > SEARCH_LIMIT {
            Err(Stop::Limit)
        } else {
            Ok(())
        }
    }

    /// Allocates request `ri` of claim `ci` and everything after it.
    fn solve(&mut self, ci: usize, ri: usize) -> Result<bool, Stop> {
        if ci == self.claims.len() {
            return Ok(true);
        }
        if ri == self.claims[ci].requests.len() {
            return self.solve(ci + 1, 0);
        }
        let requests: &'d [ClaimRequest] = self.claims[ci].requests;
        let alts = &requests[ri].alternatives;
        for alt in alts {
            if alt.all {
                let mut all = Vec::new();
                for &i in &self.visible.clone() {
                    self.step()?;
                    if self
                        .m
                        .selectable(self.dra, alt, &self.claims[ci].key, i)
                        .map_err(Stop::Error)?
                    {
                        all.push(i);
                    }
                }
                if all.is_empty() {
                    continue;
                }
                let mut taken = Vec::new();
                let mut ok = true;
                for &i in &all {
                    if self.in_use(i) || !self.counters_ok(i) {
                        ok = false;
                        break;
                    }
                    self.take(i, 1);
                    taken.push(i);
                }
                if ok && self.solve(ci, ri + 1)? {
                    return Ok(true);
                }
                for i in taken {
                    self.take(i, -1);
                }
            } else if self.pick(ci, ri, alt, alt.count, 0)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Picks `need` more devices for `alt` from visible position `start` on.
    fn pick(
        &mut self,
        ci: usize,
        ri: usize,
        alt: &RequestSpec,
        need: i64,
        start: usize,
    ) -> Result<bool, Stop> {
        if need <= 0 {
            return self.solve(ci, ri + 1);
        }
        for pos in start..self.visible.len() {
            self.step()?;
            let i = self.visible[pos];
            if self.in_use(i) {
                continue;
            }
            if !self
                .m
                .selectable(self.dra, alt, &self.claims[ci].key, i)
                .map_err(Stop::Error)?
            {
                continue;
            }
            if !self.counters_ok(i) {
                continue;
            }
            self.take(i, 1);
            let done = self.pick(ci, ri, alt, need - 1, pos + 1);
            match done {
                Ok(true) => return Ok(true),
                Ok(false) => self.take(i, -1),
                Err(e) => {
                    self.take(i, -1);
                    return Err(e);
                }
            }
        }
        Ok(false)
    }
}

/// Simulates the scheduler's DRA filter on every node of `allowed` (the nodes the pod's
/// other constraints allow, in order) for the pod's claims: an allocated claim must be
/// bound to the node; the unallocated ones (a template's requests for a claim not made
/// yet) must all be allocated from devices visible from that one node — its own slices
/// and those of every node (`allNodes`); slices behind a `nodeSelector` are not modelled —
/// skipping allocated devices, trying devices in slice order, checking each one's class
/// and request selectors, then its shared counters, backtracking as the allocator does
/// (kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/structured/
/// internal/incubating/allocator_incubating.go`, `allocateOne`; the DynamicResources
/// plugin `pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go` runs it per
/// node in Filter and turns an allocator error into a scheduling error).
pub fn placement(
    dra: &DraObjects,
    namespace: &str,
    pod_claims: &[PodClaim],
    allowed: &[String],
) -> DraPlacement {
    let m = Matcher::new(dra);
    let offered = left_after_allocations(dra, &m.devices);
    let mut bound: Vec<(String, Vec<String>)> = Vec::new();
    let mut pending = Vec::new();
    for pc in pod_claims {
        let Some((key, requests, claim)) = pod_claim_source(dra, namespace, pc) else {
            continue;
        };
        match claim {
            Some(c) if c.allocated => bound.push((key, allocated_nodes(&m, c))),
            _ => pending.push(Pending { key, requests }),
        }
    }
    let mut out = DraPlacement {
        nodes: Vec::new(),
        fits: Vec::new(),
        selector_error: None,
    };
    for node in allowed {
        if let Some((claim, nodes)) = bound
            .iter()
            .find(|(_, nodes)| !nodes.is_empty() && !nodes.iter().any(|n| n == node))
        {
            out.nodes.push((
                node.clone(),
                NodeAllocation::ClaimElsewhere {
                    claim: claim.clone(),
                    nodes: nodes.clone(),
                },
            ));
            continue;
        }
        let visible: Vec<usize> = (0..m.devices.len())
            .filter(|&i| {
                let d = &m.devices[i];
                d.node == Some(node.as_str()) || (d.node.is_none() && d.slice.all_nodes)
            })
            .collect();
        let mut search = Search {
            m: &m,
            dra,
            visible,
            claims: pending
                .iter()
                .map(|p| Pending {
                    key: p.key.clone(),
                    requests: p.requests,
                })
                .collect(),
            taking: BTreeSet::new(),
            left: offered.clone(),
            steps: 0,
        };
        let verdict = match search.solve(0, 0) {
            Ok(true) => NodeAllocation::Fits,
            Ok(false) => NodeAllocation::CannotAllocate,
            Err(Stop::Error(e)) => NodeAllocation::SelectorError(*e),
            Err(Stop::Limit) => NodeAllocation::Unknown,
        };
        match &verdict {
            NodeAllocation::Fits => out.fits.push(node.clone()),
            NodeAllocation::SelectorError(e) if out.selector_error.is_none() => {
                out.selector_error = Some(e.clone());
            }
            _ => {}
        }
        out.nodes.push((node.clone(), verdict));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> DraObjects {
        crate::decode::dra::read_str(
            include_str!("../../../../tests/data/dra/two-gpus.json"),
            "two-gpus.json",
        )
        .unwrap()
    }

    #[test]
    fn each_physical_gpu_counted_once_and_siblings_blocked() {
        let d = objects();
        let inv = inventory(&d, DraSource::File("f".into()), &[], None);
        assert_eq!(
            inv.physical_gpus, 2,
            "gpu-0/gpu-vfio-0 and gpu-1/gpu-vfio-1"
        );
        assert_eq!(inv.physical_in_use, 2);
        let row = |t: &str| inv.rows.iter().find(|r| r.device_type == t).unwrap();
        let gpu = row("gpu");
        assert_eq!(
            (
                gpu.devices,
                gpu.physical,
                gpu.allocated,
                gpu.blocked,
                gpu.free
            ),
            (2, 2, 1, 1, 0)
        );
        assert_eq!(gpu.pool, "(node not read)");
        assert_eq!(gpu.nodes, 1);
        // two-a100 matches nothing; want-gpu-0 matches gpu-0 (1 device).
        assert_eq!(gpu.pending, 1);
        assert_eq!(gpu.pending_claims, vec!["gpu-jobs/want-gpu-0".to_string()]);
        let vfio = row("vfio");
        assert_eq!(
            (vfio.allocated, vfio.blocked, vfio.free, vfio.pending),
            (1, 1, 0, 1)
        );
        assert_eq!(vfio.pending_claims, vec!["gpu-vm/vm-vfio-2".to_string()]);
        let reasons: Vec<(&str, &str)> = inv
            .blocked
            .iter()
            .map(|b| (b.device.as_str(), b.reason.as_str()))
            .collect();
        assert_eq!(
            reasons,
            vec![
                (
                    "gpu.nvidia.com/gpu-node-1/gpu-vfio-0",
                    "in use as gpu by gpu-jobs/job-gpu"
                ),
                (
                    "gpu.nvidia.com/gpu-node-1/gpu-1",
                    "in use as vfio by gpu-vm/vm-vfio"
                ),
            ]
        );
    }

    #[test]
    fn without_counters_uuid_then_pci_bus_id_name_the_gpu() {
        let mut d = objects();
        for s in &mut d.resource_slices {
            s.shared_counters.clear();
            for dev in &mut s.devices {
                dev.consumes_counters.clear();
            }
            // gpu-1's pair keeps only the PCI bus id.
            for dev in &mut s.devices {
                if dev.name.ends_with('1') {
                    dev.attributes.remove("gpu.nvidia.com/uuid");
                }
            }
        }
        let inv = inventory(&d, DraSource::File("f".into()), &[], None);
        assert_eq!(inv.physical_gpus, 2);
        assert!(inv.blocked.is_empty(), "no counters, nothing blocked");
    }

    #[test]
    fn cel_selectors_match_by_type_and_report_errors() {
        let mut d = objects();
        // The domains a selector looks up are known from the objects read.
        d.device_classes.push(crate::model::dra::DeviceClass {
            name: "probe".into(),
            selectors: vec!["!('x' in device.attributes['other.example.com'])".into()],
            extended_resource_name: None,
        });
        let m = Matcher::new(&d);
        let names = |spec: &RequestSpec| -> (Vec<String>, Vec<String>) {
            let (idx, errs) = m.matching(&d, spec);
            (
                idx.iter()
                    .map(|i| m.devices[*i].device.name.clone())
                    .collect(),
                errs,
            )
        };
        let spec = |class: &str, sel: &[&str]| RequestSpec {
            subrequest: None,
            device_class: class.into(),
            selectors: sel.iter().map(|s| s.to_string()).collect(),
            all: false,
            count: 1,
        };
        assert_eq!(
            names(&spec("vfio.gpu.nvidia.com", &[])).0,
            vec!["gpu-vfio-0", "gpu-vfio-1"]
        );
        assert_eq!(
            names(&spec(
                "gpu.nvidia.com",
                &["device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0"]
            ))
            .0,
            vec!["gpu-0", "gpu-1"]
        );
        // An attribute no device has: an evaluation error, reported, no match.
        let (hit, errs) = names(&spec(
            "gpu.nvidia.com",
            &["device.attributes['gpu.nvidia.com'].nope == 1"],
        ));
        assert!(hit.is_empty());
        assert_eq!(errs.len(), 1, "{errs:?}");
        // An unknown domain is an empty map, not an error.
        let (hit, errs) = names(&spec("probe", &[]));
        assert_eq!(hit.len(), 4);
        assert!(errs.is_empty(), "{errs:?}");
        let (_, errs) = names(&spec("gpu.nvidia.com", &["device.driver =="]));
        assert!(errs[0].contains("does not compile"), "{errs:?}");
    }

    /// Three nodes with one free GPU each, a claim for two, a template, a shared claim
    /// allocated on node c, a node without `index`.
    fn three_nodes(selector: &str, count: i64) -> DraObjects {
        let slice = |node: &str, index: bool| {
            format!(
                r#"{{"kind":"ResourceSlice","metadata":{{"name":"{node}"}},"spec":{{"driver":"gpu.nvidia.com","nodeName":"{node}","pool":{{"name":"{node}"}},
                "devices":[{{"name":"gpu-0","attributes":{{"type":{{"string":"gpu"}},"productName":{{"string":"NVIDIA A10"}},"driverVersion":{{"version":"580.95.5"}}{}}}}}]}}}}"#,
                if index { r#","index":{"int":0}"# } else { "" }
            )
        };
        let text = format!(
            r#"{{"kind":"List","items":[
            {{"kind":"DeviceClass","metadata":{{"name":"gpu.nvidia.com"}},"spec":{{"selectors":[{{"cel":{{"expression":"device.attributes['gpu.nvidia.com'].type == 'gpu'"}}}}]}}}},
            {},{},{},
            {{"kind":"ResourceClaimTemplate","metadata":{{"name":"t","namespace":"ns"}},"spec":{{"spec":{{"devices":{{"requests":[{{"name":"gpu","exactly":{{"deviceClassName":"gpu.nvidia.com","count":{count},"selectors":[{{"cel":{{"expression":"{selector}"}}}}]}}}}]}}}}}}}},
            {{"kind":"ResourceClaim","metadata":{{"name":"shared","namespace":"ns"}},"spec":{{"devices":{{"requests":[{{"name":"gpu","exactly":{{"deviceClassName":"gpu.nvidia.com"}}}}]}}}},
             "status":{{"allocation":{{"devices":{{"results":[{{"request":"gpu","driver":"gpu.nvidia.com","pool":"c","device":"gpu-0"}}]}},
               "nodeSelector":{{"nodeSelectorTerms":[{{"matchFields":[{{"key":"metadata.name","operator":"In","values":["c"]}}]}}]}}}},
               "reservedFor":[{{"resource":"pods","name":"holder","uid":"u"}}]}}}}]}}"#,
            slice("a", true),
            slice("b", true),
            slice("c", false),
        );
        crate::decode::dra::read_str(&text, "t.json").unwrap()
    }

    fn template_claim() -> Vec<crate::model::dra::PodClaim> {
        vec![crate::model::dra::PodClaim {
            name: "gpu".into(),
            resource_claim_name: None,
            resource_claim_template_name: Some("t".into()),
            generated_claim_name: None,
        }]
    }

    fn nodes() -> Vec<String> {
        ["a", "b", "c"].map(String::from).to_vec()
    }

    #[test]
    fn a_claims_devices_come_from_one_node() {
        let d = three_nodes("device.driver == 'gpu.nvidia.com'", 2);
        let p = placement(&d, "ns", &template_claim(), &nodes());
        assert!(p.fits.is_empty(), "{p:?}");
        // a and b each have their GPU free; c's is allocated to the shared claim.
        assert!(
            p.nodes
                .iter()
                .all(|(_, v)| *v == NodeAllocation::CannotAllocate)
        );
        let d = three_nodes("device.driver == 'gpu.nvidia.com'", 1);
        let p = placement(&d, "ns", &template_claim(), &nodes());
        assert_eq!(p.fits, vec!["a".to_string(), "b".to_string()]);
        let v = claim_views(&d, "ns", &template_claim(), &|_| true);
        assert!(v[0].found && v[0].from_template);
        assert_eq!(v[0].requests[0].alternatives[0].max_on_one_node, 1);
    }

    #[test]
    fn a_runtime_error_on_a_tried_device_aborts() {
        // c publishes no index, but its only GPU is allocated: skipped before selectors.
        let d = three_nodes("device.attributes['gpu.nvidia.com'].index == 0", 1);
        let p = placement(&d, "ns", &template_claim(), &nodes());
        assert_eq!(p.fits, vec!["a".to_string(), "b".to_string()]);
        assert!(p.selector_error.is_none());
        // A version compared with a string fails on the first device tried.
        let d = three_nodes(
            "device.attributes['gpu.nvidia.com'].driverVersion == '580.95.5'",
            1,
        );
        let p = placement(&d, "ns", &template_claim(), &nodes());
        let e = p.selector_error.expect("selector error");
        assert_eq!(e.device, "gpu.nvidia.com/a/gpu-0");
        assert_eq!(e.source, "claim ns/(from template t)");
        assert!(e.error.starts_with("no such overload"), "{}", e.error);
        let v = claim_views(&d, "ns", &template_claim(), &|_| true);
        let h = &v[0].requests[0].alternatives[0].hints[0];
        assert_eq!(h.problem, "type-mismatch");
        assert_eq!(
            h.corrected.as_deref(),
            Some(
                "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.95.5')) == 0"
            )
        );
    }

    #[test]
    fn a_version_no_device_meets_names_the_published_one() {
        let d = three_nodes(
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('590.0.0')) >= 0",
            1,
        );
        let p = placement(&d, "ns", &template_claim(), &nodes());
        assert!(p.fits.is_empty(), "{p:?}");
        assert!(p.selector_error.is_none());
        let v = claim_views(&d, "ns", &template_claim(), &|_| true);
        let h = &v[0].requests[0].alternatives[0].hints[0];
        assert_eq!(h.problem, "version-not-met");
        assert_eq!(h.value.as_deref(), Some(">= 590.0.0"));
        assert_eq!(h.published, vec!["580.95.5".to_string()]);
        assert_eq!(
            h.corrected.as_deref(),
            Some(
                "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.95.5')) >= 0"
            )
        );
    }

    #[test]
    fn a_shared_claim_binds_the_pod_to_its_node() {
        let d = three_nodes("true", 1);
        let shared = vec![crate::model::dra::PodClaim {
            name: "gpu".into(),
            resource_claim_name: Some("shared".into()),
            resource_claim_template_name: None,
            generated_claim_name: None,
        }];
        let p = placement(&d, "ns", &shared, &nodes());
        assert_eq!(p.fits, vec!["c".to_string()]);
        let p = placement(&d, "ns", &shared, &["a".to_string()]);
        assert_eq!(
            p.nodes[0].1,
            NodeAllocation::ClaimElsewhere {
                claim: "ns/shared".into(),
                nodes: vec!["c".into()]
            }
        );
    }
}
