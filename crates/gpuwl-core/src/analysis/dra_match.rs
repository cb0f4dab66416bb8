//! Which DRA devices a DeviceClass and a request's CEL selectors match: every published
//! device with what gpuwl derived about it (node, physical device, counters), and the
//! [`Matcher`] that evaluates selectors on them, caching compiled programs and results.
//! The CEL facts and the differences from the API server's environment are in
//! [`crate::analysis::dra`]'s module documentation.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

use crate::analysis::{dra_cel, names};
use crate::model::dra::{
    self, AttrValue, Device, DraObjects, IDENTITY_ATTRIBUTES, RequestSpec, ResourceSlice,
    TYPE_ATTRIBUTE,
};

/// A device's address: `driver/pool/device` (what allocation results name).
pub(crate) type DeviceKey = (String, String, String);

/// A counter's address: driver, pool, counter set, counter.
pub(crate) type CounterKey = (String, String, String, String);

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
    pub(crate) fn is_free(&self) -> bool {
        self.allocated_to.is_empty() && self.blocked_by.is_empty()
    }
}

/// Compiled selectors and the devices as CEL values, for matching.
pub struct Matcher<'a> {
    /// The devices, indexed like `cel_devices`.
    pub devices: Vec<DeviceInfo<'a>>,
    cel_devices: Vec<Box<dyn cel::common::value::Val>>,
    programs: std::cell::RefCell<HashMap<String, Result<std::rc::Rc<cel::Program>, String>>>,
    /// Results of [`Matcher::eval`], by expression and device.
    results: std::cell::RefCell<HashMap<(String, usize), Result<bool, String>>>,
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

/// The attribute and capacity domains a device's CEL value holds: every driver and every
/// domain a device qualifies a name with, and the domains the selectors look up (those
/// answer with an empty map, as unknown domains do on the API server).
fn cel_domains(dra: &DraObjects) -> BTreeSet<String> {
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
    let exprs = dra
        .device_classes
        .iter()
        .flat_map(|c| c.selectors.iter())
        .chain(dra.resource_claims.iter().flat_map(|c| {
            c.requests
                .iter()
                .flat_map(|r| r.alternatives.iter().flat_map(|a| a.selectors.iter()))
        }))
        .chain(dra.resource_claim_templates.iter().flat_map(|c| {
            c.requests
                .iter()
                .flat_map(|r| r.alternatives.iter().flat_map(|a| a.selectors.iter()))
        }));
    for e in exprs {
        domains.extend(looked_up_domains(e));
    }
    domains
}

/// Allocations: each allocated device → the claims (`namespace/name`) holding it.
fn allocations(dra: &DraObjects) -> BTreeMap<DeviceKey, Vec<String>> {
    let mut allocated: BTreeMap<DeviceKey, Vec<String>> = BTreeMap::new();
    for c in &dra.resource_claims {
        for r in &c.results {
            allocated
                .entry((r.driver.clone(), r.pool.clone(), r.device.clone()))
                .or_default()
                .push(c.key());
        }
    }
    allocated
}

/// The physical GPU a device is part of ([`DeviceInfo::physical`]): its first counter set
/// (`counters:driver/pool/set`), else its first identity attribute
/// ([`crate::model::dra::IDENTITY_ATTRIBUTES`], e.g. `uuid:GPU-…`), else the device itself.
fn physical_identity(s: &ResourceSlice, d: &Device) -> String {
    if let Some(c) = d.consumes_counters.first() {
        format!("counters:{}/{}/{}", s.driver, s.pool, c.counter_set)
    } else if let Some((a, v)) = IDENTITY_ATTRIBUTES.iter().find_map(|a| {
        d.attributes
            .get(&dra::qualify(&s.driver, a))
            .map(|v| (a, v.text()))
    }) {
        format!("{a}:{v}")
    } else {
        format!("device:{}/{}/{}", s.driver, s.pool, d.name)
    }
}

/// The counters a device consumes: each counter's address (its slice's driver and pool,
/// the counter set, the counter) and the amount (an amount without a value consumes 0).
pub(crate) fn consumption<'x>(
    d: &'x DeviceInfo<'_>,
) -> impl Iterator<Item = (CounterKey, i64)> + 'x {
    d.device.consumes_counters.iter().flat_map(move |cu| {
        cu.counters.iter().map(move |(n, a)| {
            (
                (
                    d.slice.driver.clone(),
                    d.slice.pool.clone(),
                    cu.counter_set.clone(),
                    n.clone(),
                ),
                a.value.unwrap_or(0),
            )
        })
    })
}

/// What the ResourceSlices offer per counter, summed over slices (a counter without a value
/// offers without limit); saturating, never wrapping.
pub(crate) fn offered(dra: &DraObjects) -> BTreeMap<CounterKey, i64> {
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
    offered
}

/// What is left of each counter once the allocated devices' consumption is taken from
/// [`offered`] (the allocator's starting point; a counter nobody offers goes negative).
pub(crate) fn left_after_allocations(
    dra: &DraObjects,
    devices: &[DeviceInfo<'_>],
) -> BTreeMap<CounterKey, i64> {
    let mut left = offered(dra);
    for d in devices.iter().filter(|d| !d.allocated_to.is_empty()) {
        for (k, amount) in consumption(d) {
            let e = left.entry(k).or_default();
            *e = e.saturating_sub(amount);
        }
    }
    left
}

/// Sets [`DeviceInfo::blocked_by`] of each unallocated device: a counter it consumes has
/// less left ([`left_after_allocations`]) than it needs; blocked by the allocated devices
/// using that counter (`TYPE by CLAIM`), or `counter SET/NAME too small` when none does.
fn mark_counter_blocked(dra: &DraObjects, devices: &mut [DeviceInfo<'_>]) {
    let left = left_after_allocations(dra, devices);
    let mut holders: BTreeMap<CounterKey, Vec<String>> = BTreeMap::new();
    for d in devices.iter().filter(|d| !d.allocated_to.is_empty()) {
        let t = if d.device_type.is_empty() {
            d.device.name.clone()
        } else {
            d.device_type.clone()
        };
        for (k, _) in consumption(d) {
            let e = holders.entry(k).or_default();
            for c in &d.allocated_to {
                let h = format!("{t} by {c}");
                if !e.contains(&h) {
                    e.push(h);
                }
            }
        }
    }
    for d in devices.iter_mut().filter(|d| d.allocated_to.is_empty()) {
        let mut by = Vec::new();
        for (k, amount) in consumption(d) {
            if left.get(&k).copied().unwrap_or(0) < amount {
                for h in holders.get(&k).into_iter().flatten() {
                    if !by.contains(h) {
                        by.push(h.clone());
                    }
                }
                if by.is_empty() {
                    by.push(format!("counter {}/{} too small", k.2, k.3));
                }
            }
        }
        d.blocked_by = by;
    }
}

impl<'a> Matcher<'a> {
    /// Indexes every device of `dra`: its node, allocation, blocking counter, physical
    /// identity and type.
    pub fn new(dra: &'a DraObjects) -> Matcher<'a> {
        let domains = cel_domains(dra);
        let allocated = allocations(dra);
        let mut devices = Vec::new();
        let mut cel_devices = Vec::new();
        for s in &dra.resource_slices {
            for d in &s.devices {
                let key = (s.driver.clone(), s.pool.clone(), d.name.clone());
                devices.push(DeviceInfo {
                    slice: s,
                    device: d,
                    node: d.node_name.as_deref().or(s.node_name.as_deref()),
                    device_type: match d.attributes.get(&dra::qualify(&s.driver, TYPE_ATTRIBUTE)) {
                        Some(AttrValue::String(t)) if !t.is_empty() => t.clone(),
                        _ => String::new(),
                    },
                    physical: physical_identity(s, d),
                    allocated_to: allocated.get(&key).cloned().unwrap_or_default(),
                    blocked_by: Vec::new(),
                });
                cel_devices.push(dra_cel::device_val(&s.driver, d, &domains));
            }
        }
        mark_counter_blocked(dra, &mut devices);
        let mut m = Matcher {
            devices,
            cel_devices,
            programs: Default::default(),
            results: Default::default(),
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
                dra_cel::compile(expr)
                    .map(std::rc::Rc::new)
                    .map_err(|e| format!("does not compile: {e}"))
            })
            .clone()
    }

    /// Evaluates CEL `expr` for device `i`: `Ok(true|false)`, or why it cannot be
    /// evaluated (does not compile, an evaluation error, not a bool).
    pub fn eval(&self, expr: &str, i: usize) -> Result<bool, String> {
        let key = (expr.to_owned(), i);
        if let Some(r) = self.results.borrow().get(&key) {
            return r.clone();
        }
        let r = self
            .program(expr)
            .and_then(|p| dra_cel::run(&p, self.cel_devices[i].as_ref()));
        self.results.borrow_mut().insert(key, r.clone());
        r
    }

    /// Whether device `i` is selectable for `spec` as the allocator decides it: the
    /// class's selectors, then the request's own, in order, stopping at the first that
    /// is false (kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/
    /// structured/internal/incubating/allocator_incubating.go`, `isSelectable` and
    /// `selectorsMatch`). `owner` names the request's claim (`ns/name`) for the error.
    ///
    /// Errors: the first selector that cannot be evaluated on the device (the
    /// allocator then aborts the whole attempt).
    pub(crate) fn selectable(
        &self,
        dra: &DraObjects,
        spec: &RequestSpec,
        owner: &str,
        i: usize,
    ) -> Result<bool, Box<SelectorFailure>> {
        let Some(class) = dra.class(&spec.device_class) else {
            return Ok(false);
        };
        let sets = [
            (format!("DeviceClass {}", class.name), &class.selectors),
            (format!("claim {owner}"), &spec.selectors),
        ];
        for (source, sels) in sets {
            for (k, e) in sels.iter().enumerate() {
                match self.eval(e, i) {
                    Ok(true) => {}
                    Ok(false) => return Ok(false),
                    Err(error) => {
                        let d = &self.devices[i];
                        let published = match error.strip_prefix("no such key: ") {
                            Some(key) => names::nearest_first(
                                d.device.attributes.keys().cloned(),
                                &dra::qualify(&d.slice.driver, key),
                            ),
                            None => Vec::new(),
                        };
                        return Err(Box::new(SelectorFailure {
                            device: d.id(),
                            node: d.node.map(str::to_owned),
                            source,
                            index: k,
                            expression: e.clone(),
                            error,
                            published,
                        }));
                    }
                }
            }
        }
        Ok(true)
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

/// A selector that cannot be evaluated on a device: the allocator stops there
/// ("CEL runtime error") and the scheduler aborts the attempt (`SchedulerError`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelectorFailure {
    /// `driver/pool/device`.
    pub device: String,
    /// Its node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// `DeviceClass NAME` or `claim NS/NAME`.
    pub source: String,
    /// The selector's index in that list (`selector #N`).
    pub index: usize,
    /// The CEL expression.
    pub expression: String,
    /// The error (`no such key: index`, `no such overload: ...`).
    pub error: String,
    /// For a missing attribute (`no such key`): the attributes the device does publish,
    /// qualified, nearest to the missing name first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub published: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One slice on node-a: partitions `mig-a` (consuming 1 of counter set `gpu-0`'s 2
    /// memory) and `mig-b` (consuming `consumed_by_b`), a whole GPU with a uuid, and a
    /// claim holding `mig-a`.
    fn objects(consumed_by_b: i64) -> DraObjects {
        crate::decode::dra::read_str(
            &serde_json::json!({"kind": "List", "items": [
                {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                 "metadata": {"name": "s"},
                 "spec": {"driver": "gpu.nvidia.com", "pool": {"name": "node-a"},
                          "nodeName": "node-a",
                          "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "2"}}}],
                          "devices": [
                    {"name": "mig-a", "attributes": {"type": {"string": "mig"}},
                     "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": "1"}}}]},
                    {"name": "mig-b", "attributes": {"type": {"string": "mig"}},
                     "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": consumed_by_b.to_string()}}}]},
                    {"name": "gpu-1", "attributes": {"type": {"string": "gpu"}, "uuid": {"string": "GPU-1"}}}
                 ]}},
                {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                 "metadata": {"name": "c", "namespace": "ns"},
                 "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "mig"}}]}},
                 "status": {"allocation": {"devices": {"results": [
                    {"request": "r", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "mig-a"}]}}}}
            ]})
            .to_string(),
            "dra.json",
        )
        .unwrap()
    }

    #[test]
    fn devices_sharing_a_counter_are_blocked_by_the_allocated_one() {
        let dra = objects(2);
        let m = Matcher::new(&dra);
        let by_name = |n: &str| m.devices.iter().find(|d| d.device.name == n).unwrap();
        assert_eq!(by_name("mig-a").allocated_to, ["ns/c"]);
        assert!(by_name("mig-a").blocked_by.is_empty());
        // 2 offered, 1 taken by mig-a: mig-b needs 2.
        assert_eq!(by_name("mig-b").blocked_by, ["mig by ns/c"]);
        assert!(by_name("gpu-1").is_free());
        // The same GPU behind both partitions; the whole GPU by its uuid.
        assert_eq!(
            by_name("mig-a").physical,
            "counters:gpu.nvidia.com/node-a/gpu-0"
        );
        assert_eq!(by_name("mig-b").physical, by_name("mig-a").physical);
        assert_eq!(by_name("gpu-1").physical, "uuid:GPU-1");
        assert_eq!(by_name("gpu-1").node, Some("node-a"));
        // Enough left when mig-b needs 1.
        let dra = objects(1);
        let m = Matcher::new(&dra);
        assert!(m.devices.iter().all(|d| d.blocked_by.is_empty()));
    }
}
