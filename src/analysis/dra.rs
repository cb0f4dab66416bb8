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

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::model::dra::{
    Amount, AttrValue, Device, DraObjects, DraSource, RequestSpec, ResourceClaim, ResourceSlice,
    TYPE_ATTRIBUTE,
};
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::pool::Pool;

/// A device's address: `driver/pool/device` (what allocation results name).
pub type DeviceKey = (String, String, String);

/// A counter's address: driver, pool, counter set, counter.
type CounterKey = (String, String, String, String);

/// A row being summed: the row, its nodes, its physical devices.
type RowAcc = (DraRow, BTreeSet<String>, BTreeSet<String>);

/// One device with what gpuwl derived about it.
#[derive(Debug, Clone)]
pub struct DeviceInfo<'a> {
    /// The slice it is published in.
    pub slice: &'a ResourceSlice,
    /// The device.
    pub device: &'a Device,
    /// The node it is local to (`None`: not node-local).
    pub node: Option<&'a str>,
    /// Its type: the `type` attribute, else the DeviceClass that selects it, else `-`.
    pub device_type: String,
    /// The physical device it is: `counters:<driver>/<pool>/<set>`, `uuid:<..>`,
    /// `pcieBusID:<..>` or `device:<driver>/<pool>/<name>`.
    pub physical: String,
    /// The claims (`ns/name`) it is allocated to.
    pub allocated_to: Vec<String>,
    /// When not allocated but blocked by a counter: the sibling holders, as
    /// `vfio by ns/claim`.
    pub blocked_by: Vec<String>,
}

impl DeviceInfo<'_> {
    /// `driver/pool/device`.
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}",
            self.slice.driver, self.slice.pool, self.device.name
        )
    }

    /// Neither allocated nor blocked.
    pub fn is_free(&self) -> bool {
        self.allocated_to.is_empty() && self.blocked_by.is_empty()
    }
}

/// Compiled selectors and the devices as CEL values, for matching.
pub struct Matcher<'a> {
    /// The devices, indexed like `cel_devices`.
    pub devices: Vec<DeviceInfo<'a>>,
    cel_devices: Vec<cel::Value>,
    programs: std::cell::RefCell<HashMap<String, Result<std::rc::Rc<cel::Program>, String>>>,
}

fn attr_cel(v: &AttrValue) -> cel::Value {
    match v {
        AttrValue::Int(i) => cel::Value::Int(*i),
        AttrValue::Bool(b) => cel::Value::Bool(*b),
        AttrValue::String(s) | AttrValue::Version(s) => cel::Value::from(s.clone()),
    }
}

fn amount_cel(a: &Amount) -> cel::Value {
    match a.value {
        Some(v) => cel::Value::Int(v),
        None => cel::Value::from(a.raw.clone()),
    }
}

/// The CEL `device` variable: `driver`, `attributes` and `capacity` as maps of domain →
/// (name → value); every domain of `domains` is present (an empty map when the device has
/// none in it), as the API server's environment answers unknown domains.
fn device_value(driver: &str, d: &Device, domains: &BTreeSet<String>) -> cel::Value {
    fn split(q: &str) -> (String, String) {
        match q.rsplit_once('/') {
            Some((d, n)) => (d.to_owned(), n.to_owned()),
            None => (String::new(), q.to_owned()),
        }
    }
    let mut attrs: HashMap<String, HashMap<String, cel::Value>> = domains
        .iter()
        .map(|d| (d.clone(), HashMap::new()))
        .collect();
    for (q, v) in &d.attributes {
        let (dom, n) = split(q);
        attrs.entry(dom).or_default().insert(n, attr_cel(v));
    }
    let mut caps: HashMap<String, HashMap<String, cel::Value>> = domains
        .iter()
        .map(|d| (d.clone(), HashMap::new()))
        .collect();
    for (q, v) in &d.capacity {
        let (dom, n) = split(q);
        caps.entry(dom).or_default().insert(n, amount_cel(v));
    }
    let to_map = |m: HashMap<String, HashMap<String, cel::Value>>| {
        cel::Value::from(
            m.into_iter()
                .map(|(k, v)| (k, cel::Value::from(v)))
                .collect::<HashMap<String, cel::Value>>(),
        )
    };
    let mut top: HashMap<String, cel::Value> = HashMap::new();
    top.insert("driver".into(), cel::Value::from(driver.to_owned()));
    top.insert("attributes".into(), to_map(attrs));
    top.insert("capacity".into(), to_map(caps));
    top.insert("allowMultipleAllocations".into(), cel::Value::Bool(false));
    cel::Value::from(top)
}

/// The quoted domains an expression looks up: `attributes['d']`, `capacity["d"]`.
fn looked_up_domains(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for key in ["attributes[", "capacity["] {
        let mut rest = expr;
        while let Some(i) = rest.find(key) {
            rest = &rest[i + key.len()..];
            let mut chars = rest.chars();
            if let Some(q @ ('\'' | '"')) = chars.next()
                && let Some(end) = rest[1..].find(q)
            {
                out.push(rest[1..1 + end].to_owned());
            }
        }
    }
    out
}

impl<'a> Matcher<'a> {
    /// Indexes every device of `dra`: its node, allocation, blocking counter, physical
    /// identity and type.
    pub fn new(dra: &'a DraObjects) -> Matcher<'a> {
        let mut domains = BTreeSet::new();
        for s in &dra.resource_slices {
            domains.insert(s.driver.clone());
            for d in &s.devices {
                for q in d.attributes.keys().chain(d.capacity.keys()) {
                    if let Some((dom, _)) = q.rsplit_once('/') {
                        domains.insert(dom.to_owned());
                    }
                }
            }
        }
        // Domains the selectors look up answer with an empty map, as unknown domains do
        // on the API server.
        let exprs = dra
            .device_classes
            .iter()
            .flat_map(|c| c.selectors.iter())
            .chain(dra.resource_claims.iter().flat_map(|c| {
                c.requests
                    .iter()
                    .flat_map(|r| r.alternatives.iter().flat_map(|a| a.selectors.iter()))
            }));
        for e in exprs {
            domains.extend(looked_up_domains(e));
        }
        // Allocations: device → claims.
        let mut allocated: BTreeMap<DeviceKey, Vec<String>> = BTreeMap::new();
        for c in &dra.resource_claims {
            for r in &c.results {
                allocated
                    .entry((r.driver.clone(), r.pool.clone(), r.device.clone()))
                    .or_default()
                    .push(c.key());
            }
        }
        let mut devices = Vec::new();
        let mut cel_devices = Vec::new();
        for s in &dra.resource_slices {
            for d in &s.devices {
                let key = (s.driver.clone(), s.pool.clone(), d.name.clone());
                let physical = if let Some(c) = d.consumes_counters.first() {
                    format!("counters:{}/{}/{}", s.driver, s.pool, c.counter_set)
                } else if let Some((a, v)) =
                    crate::model::dra::IDENTITY_ATTRIBUTES.iter().find_map(|a| {
                        d.attributes
                            .get(&crate::model::dra::qualify(&s.driver, a))
                            .map(|v| (a, v.text()))
                    })
                {
                    format!("{a}:{v}")
                } else {
                    format!("device:{}/{}/{}", s.driver, s.pool, d.name)
                };
                devices.push(DeviceInfo {
                    slice: s,
                    device: d,
                    node: d.node_name.as_deref().or(s.node_name.as_deref()),
                    device_type: match d
                        .attributes
                        .get(&crate::model::dra::qualify(&s.driver, TYPE_ATTRIBUTE))
                    {
                        Some(AttrValue::String(t)) if !t.is_empty() => t.clone(),
                        _ => String::new(),
                    },
                    physical,
                    allocated_to: allocated.get(&key).cloned().unwrap_or_default(),
                    blocked_by: Vec::new(),
                });
                cel_devices.push(device_value(&s.driver, d, &domains));
            }
        }
        // Counters: what each (driver, pool, set, counter) offers and what allocated
        // devices consume.
        let mut offered: BTreeMap<CounterKey, i64> = BTreeMap::new();
        for s in &dra.resource_slices {
            for cs in &s.shared_counters {
                for (n, a) in &cs.counters {
                    let e = offered
                        .entry((s.driver.clone(), s.pool.clone(), cs.name.clone(), n.clone()))
                        .or_default();
                    *e = e.saturating_add(a.value.unwrap_or(i64::MAX));
                }
            }
        }
        let mut used: BTreeMap<CounterKey, (i64, Vec<String>)> = BTreeMap::new();
        for d in devices.iter().filter(|d| !d.allocated_to.is_empty()) {
            for cu in &d.device.consumes_counters {
                for (n, a) in &cu.counters {
                    let e = used
                        .entry((
                            d.slice.driver.clone(),
                            d.slice.pool.clone(),
                            cu.counter_set.clone(),
                            n.clone(),
                        ))
                        .or_default();
                    e.0 = e.0.saturating_add(a.value.unwrap_or(0));
                    let t = if d.device_type.is_empty() {
                        d.device.name.clone()
                    } else {
                        d.device_type.clone()
                    };
                    for c in &d.allocated_to {
                        let h = format!("{t} by {c}");
                        if !e.1.contains(&h) {
                            e.1.push(h);
                        }
                    }
                }
            }
        }
        for d in devices.iter_mut().filter(|d| d.allocated_to.is_empty()) {
            let mut by = Vec::new();
            for cu in &d.device.consumes_counters {
                for (n, a) in &cu.counters {
                    let k = (
                        d.slice.driver.clone(),
                        d.slice.pool.clone(),
                        cu.counter_set.clone(),
                        n.clone(),
                    );
                    let have = offered.get(&k).copied().unwrap_or(0);
                    let (taken, holders) = used.get(&k).cloned().unwrap_or_default();
                    if have.saturating_sub(taken) < a.value.unwrap_or(0) {
                        for h in holders {
                            if !by.contains(&h) {
                                by.push(h);
                            }
                        }
                        if by.is_empty() {
                            by.push(format!("counter {}/{n} too small", cu.counter_set));
                        }
                    }
                }
            }
            d.blocked_by = by;
        }
        let m = Matcher {
            devices,
            cel_devices,
            programs: Default::default(),
        };
        // Devices without a `type` attribute take the name of the first class selecting them.
        let types: Vec<Option<String>> = (0..m.devices.len())
            .map(|i| {
                if !m.devices[i].device_type.is_empty() {
                    return None;
                }
                Some(
                    dra.device_classes
                        .iter()
                        .find(|c| {
                            !c.selectors.is_empty()
                                && c.selectors.iter().all(|s| m.eval(s, i) == Ok(true))
                        })
                        .map(|c| c.name.clone())
                        .unwrap_or_else(|| "-".into()),
                )
            })
            .collect();
        let mut m = m;
        for (d, t) in m.devices.iter_mut().zip(types) {
            if let Some(t) = t {
                d.device_type = t;
            }
        }
        m
    }

    fn program(&self, expr: &str) -> Result<std::rc::Rc<cel::Program>, String> {
        self.programs
            .borrow_mut()
            .entry(expr.to_owned())
            .or_insert_with(|| {
                cel::Program::compile(expr)
                    .map(std::rc::Rc::new)
                    .map_err(|e| {
                        format!(
                            "does not compile: {}",
                            crate::input::document::one_line(&e.to_string())
                        )
                    })
            })
            .clone()
    }

    /// Evaluates CEL `expr` for device `i`: `Ok(true|false)`, or why it cannot be
    /// evaluated (does not compile, an evaluation error, not a bool).
    pub fn eval(&self, expr: &str, i: usize) -> Result<bool, String> {
        let p = self.program(expr)?;
        let mut ctx = cel::Context::default();
        ctx.add_variable_from_value("device", self.cel_devices[i].clone());
        match p.execute(&ctx) {
            Ok(cel::Value::Bool(b)) => Ok(b),
            Ok(other) => Err(format!("gives {other:?}, not a bool")),
            Err(e) => Err(crate::input::document::one_line(&e.to_string())),
        }
    }

    /// The devices a request alternative can take: its DeviceClass exists and all of the
    /// class's selectors and its own are true. Returns the indexes and the evaluation errors met (each once).
    pub fn matching(&self, dra: &DraObjects, spec: &RequestSpec) -> (Vec<usize>, Vec<String>) {
        let mut exprs: Vec<&str> = Vec::new();
        // A request whose DeviceClass does not exist cannot be allocated at all.
        let Some(c) = dra.class(&spec.device_class) else {
            return (Vec::new(), Vec::new());
        };
        exprs.extend(c.selectors.iter().map(String::as_str));
        exprs.extend(spec.selectors.iter().map(String::as_str));
        let mut out = Vec::new();
        let mut errors = BTreeSet::new();
        for i in 0..self.devices.len() {
            let mut ok = true;
            for e in &exprs {
                match self.eval(e, i) {
                    Ok(true) => {}
                    Ok(false) => {
                        ok = false;
                        break;
                    }
                    Err(m) => {
                        errors.insert(format!("{e}: {m}"));
                        ok = false;
                        break;
                    }
                }
            }
            if ok {
                out.push(i);
            }
        }
        (out, errors.into_iter().collect())
    }
}

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
    /// Whether the ResourceClaim exists in the DRA objects read.
    pub found: bool,
    /// Whether it is allocated.
    pub allocated: bool,
    /// Its allocated devices, `driver/pool/device (request)`.
    pub allocated_devices: Vec<String>,
    /// Its requests.
    pub requests: Vec<DraRequestView>,
}

/// The claim views of `pod_claims` (namespace `namespace`); `allowed(node)` says whether
/// the pod's constraints allow a node.
pub fn claim_views(
    dra: &DraObjects,
    namespace: &str,
    pod_claims: &[crate::model::dra::PodClaim],
    allowed: &dyn Fn(&str) -> bool,
) -> Vec<ClaimView> {
    let m = Matcher::new(dra);
    pod_claims
        .iter()
        .map(|pc| {
            let claim: Option<&ResourceClaim> =
                pc.claim_name().and_then(|n| dra.claim(namespace, n));
            let mut v = ClaimView {
                name: pc.name.clone(),
                claim: pc.claim_name().map(|n| format!("{namespace}/{n}")),
                template: pc.resource_claim_template_name.clone(),
                found: claim.is_some(),
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
            let Some(c) = claim else { return v };
            for r in &c.requests {
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
                            let mine = d.allocated_to.contains(&c.key());
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
                            }
                        })
                        .collect();
                    alts.push(AlternativeView {
                        subrequest: alt.subrequest.clone(),
                        device_class: alt.device_class.clone(),
                        class_found: dra.class(&alt.device_class).is_some(),
                        selectors,
                        count: alt.count,
                        all: alt.all,
                        free: matching.iter().filter(|d| d.free && d.allowed).count(),
                        matching,
                        errors,
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

impl AlternativeView {
    /// Whether it can be served now: enough free matching devices on allowed nodes
    /// (`All`: at least one, and every allowed matching device free).
    pub fn satisfiable(&self) -> bool {
        if self.all {
            let allowed: Vec<_> = self.matching.iter().filter(|d| d.allowed).collect();
            !allowed.is_empty() && allowed.iter().all(|d| d.free)
        } else {
            self.free as i64 >= self.count
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn objects() -> DraObjects {
        crate::input::dra::read_str(
            include_str!("../../tests/data/dra/two-gpus.json"),
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
                &["device.capacity['gpu.nvidia.com'].memory >= 20 * 1024 * 1024 * 1024"]
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
}
