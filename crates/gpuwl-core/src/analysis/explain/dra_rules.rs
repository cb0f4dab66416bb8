//! The DRA rules of `explain`: a pod's resource claims against the DRA filter of the
//! scheduler, as [`crate::analysis::dra::placement`] simulates it per allowed node.
//!
//! - [`claim_not_found`]: a claim (or the template it comes from) does not exist;
//! - [`selector_error`]: a selector fails to evaluate on a device of an allowed node —
//!   the allocator returns the error and the scheduler aborts the attempt
//!   (`SchedulerError`), whatever the other nodes offer;
//! - [`cannot_allocate`]: no allowed node can hold the claims now, for the first reason
//!   of: a shared claim already allocated on nodes the pod may not use (`excluded`); a
//!   request that matches no device (`no-matching-device`, to the attribute); a count no
//!   single node has that many matching devices for (`too-large`: one claim's devices come
//!   from one node, slices are node-local); matching devices blocked by a sibling's shared
//!   counter (`counter-exhausted`); matching devices allocated to other claims
//!   (`devices-in-use`).

use std::collections::{BTreeMap, BTreeSet};

use crate::analysis::diagnosis::{CauseCode, Diagnosis};
use crate::analysis::dra::{AlternativeView, ClaimView, DraRequestView, MatchedDevice};
use crate::analysis::dra_hints;
use crate::analysis::explain::facts::Facts;
use crate::model::pod::ObjectKind;

fn what(f: &Facts<'_>) -> &'static str {
    match f.pod.kind {
        ObjectKind::Pod => "pod",
        ObjectKind::VirtualMachineInstance => "VMI",
        ObjectKind::VirtualMachine => "VM",
    }
}

fn claim_name(c: &ClaimView) -> String {
    match (&c.claim, &c.template) {
        (Some(n), _) => n.clone(),
        (None, Some(t)) => format!("{} (from template {t})", c.name),
        (None, None) => c.name.clone(),
    }
}

/// `claim-not-found`: a resource claim of the pod does not exist: the named ResourceClaim
/// is missing, or the template's claim is not made yet and the template is not among the
/// objects read (with the template, its requests stand for the claim).
pub(crate) fn claim_not_found(f: &Facts<'_>) -> Option<Diagnosis> {
    if !f.e.dra_known {
        return None;
    }
    let c = f.e.claims.iter().find(|c| !c.found)?;
    let (cause, fix) = match (&c.claim, &c.template) {
        (Some(name), None) => (
            format!(
                "the {}'s resource claim {} names ResourceClaim {name}, which does not exist",
                what(f),
                c.name
            ),
            format!(
                "create ResourceClaim {name}, or point spec.resourceClaims[].resourceClaimName at an existing claim"
            ),
        ),
        (Some(name), Some(t)) => (
            format!(
                "the {}'s resource claim {} was made from template {t} as {name}, which no longer exists",
                what(f),
                c.name
            ),
            "delete and re-create the pod so that a new claim is made from the template".into(),
        ),
        (None, t) => (
            format!(
                "the {}'s resource claim {} comes from template {}, which is not among the objects read, and no claim was made from it yet (status.resourceClaimStatuses names none)",
                what(f),
                c.name,
                t.as_deref().unwrap_or("(none)")
            ),
            format!(
                "create ResourceClaimTemplate {} in namespace {} (or pass it with --dra), and check that kube-controller-manager (its resource claim controller) runs",
                t.as_deref().unwrap_or("(none)"),
                f.pod.namespace
            ),
        ),
    };
    Some(Diagnosis::new(CauseCode::ClaimNotFound, cause, fix))
}

/// The corrected selector for a runtime error, when the hints give one.
fn corrected_for(f: &Facts<'_>, expr: &str) -> Option<String> {
    f.e.claims
        .iter()
        .flat_map(|c| c.requests.iter())
        .flat_map(|r| r.alternatives.iter())
        .flat_map(|a| a.hints.iter())
        .find(|h| h.selector == expr && h.corrected.is_some())
        .and_then(|h| h.corrected.clone())
}

/// The other DeviceClasses under which the pod's unmatched requests would match devices
/// ([`AlternativeView::other_classes`]); with `class`, those of the alternatives naming it.
fn other_classes(f: &Facts<'_>, class: Option<&str>) -> Vec<String> {
    distinct_other_classes(
        f.e.claims
            .iter()
            .flat_map(|c| c.requests.iter())
            .flat_map(|r| r.alternatives.iter())
            .filter(|a| class.is_none_or(|c| a.device_class == c)),
    )
}

/// The `other_classes` of `alternatives`, each once, in the order met.
fn distinct_other_classes<'a>(
    alternatives: impl Iterator<Item = &'a AlternativeView>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for o in alternatives.flat_map(|a| a.other_classes.iter()) {
        if !out.contains(o) {
            out.push(o.clone());
        }
    }
    out
}

/// Whether the hints say no candidate device publishes `key` in `expression` (then a
/// `has()` guard cannot make the selector match).
fn published_nowhere(f: &Facts<'_>, expression: &str, key: &str) -> bool {
    f.e.claims
        .iter()
        .flat_map(|c| c.requests.iter())
        .flat_map(|r| r.alternatives.iter())
        .flat_map(|a| a.hints.iter())
        .any(|h| {
            h.selector == expression
                && h.problem == "not-published"
                && h.attribute.rsplit('/').next() == Some(key)
        })
}

/// `selector-error`: a selector fails to evaluate on a device of an allowed node before
/// any allocation is found there: the allocator returns "CEL runtime error" and the
/// scheduler aborts the attempt (`SchedulerError`), on every retry.
pub(crate) fn selector_error(f: &Facts<'_>) -> Option<Diagnosis> {
    let p = f.e.dra.as_ref()?;
    let e = p.selector_error.as_ref()?;
    let on = e
        .node
        .as_deref()
        .map(|n| format!(" on {n}"))
        .unwrap_or_default();
    let cause = format!(
        "selector #{} of {} fails on device {}{on}: {} (expression: {}); a CEL runtime error is not a non-match — the allocator stops and the scheduler aborts the attempt (SchedulerError), on every retry, whatever other devices and nodes offer",
        e.index, e.source, e.device, e.error, e.expression
    );
    let class_of_source = e.source.strip_prefix("DeviceClass ");
    let others = other_classes(f, class_of_source);
    let fix = if let Some(class) = class_of_source {
        // The class's own selector: cluster-wide, every claim of the class fails the same
        // way; the claim names another class instead.
        let instead = if others.is_empty() {
            "no other DeviceClass matches a device on an allowed node with the claim's own selectors; the class's owner must guard the selector (has(...))".to_string()
        } else {
            format!(
                "set the claim's deviceClassName to {} (its selectors match devices on allowed nodes; tested on the devices read)",
                others.join(" or ")
            )
        };
        format!(
            "leave DeviceClass {class} as it is (its selectors apply to every claim of the class): {instead}"
        )
    } else if let Some(c) = corrected_for(f, &e.expression) {
        format!("change the selector of {} to: {c}", e.source)
    } else if let Some(key) = e
        .error
        .strip_prefix("no such key: ")
        .filter(|key| !published_nowhere(f, &e.expression, key))
    {
        let published = if e.published.is_empty() {
            String::new()
        } else {
            format!(
                " (it publishes {}, nearest first)",
                e.published
                    .iter()
                    .take(6)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        format!(
            "{} does not publish {key}{published}: test for it first in {} — has(device.attributes[...].{key}) && (...) — or select on an attribute every device publishes",
            e.device, e.source
        )
    } else if let Some(key) = e.error.strip_prefix("no such key: ") {
        // No candidate device publishes it: a has() guard would only turn the error into
        // a non-match.
        format!(
            "no device the request could use publishes {key}: select in {} on an attribute they publish{}",
            e.source,
            if e.published.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    e.published
                        .iter()
                        .take(6)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        )
    } else {
        format!(
            "correct the expression of {} to the attribute's type (a version compares with semver('1.2.3'), a capacity with quantity('80Gi'))",
            e.source
        )
    };
    Some(
        Diagnosis::new(CauseCode::SelectorError, cause, fix).with_evidence([format!(
            "{}: selector #{} on device {}: CEL runtime error: {}",
            e.source, e.index, e.device, e.error
        )]),
    )
}

/// The unallocated requests of the pod's claims, each with its claim.
fn requests<'a>(f: &'a Facts<'_>) -> Vec<(&'a ClaimView, &'a DraRequestView)> {
    f.e.claims
        .iter()
        .filter(|c| c.found && !c.allocated)
        .flat_map(|c| c.requests.iter().map(move |r| (c, r)))
        .collect()
}

fn per_node(a: &AlternativeView) -> BTreeMap<String, (usize, usize)> {
    let mut m: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for d in a.matching.iter().filter(|d| d.allowed) {
        let e = m
            .entry(d.node.clone().unwrap_or_else(|| "(every node)".into()))
            .or_default();
        e.0 += 1;
        if d.free {
            e.1 += 1;
        }
    }
    m
}

fn count_text(a: &AlternativeView) -> String {
    if a.all {
        "all".into()
    } else {
        a.count.to_string()
    }
}

/// No allowed node can hold the claims: `excluded`, `no-matching-device`, `too-large`,
/// `counter-exhausted` or `devices-in-use` (see the module documentation).
pub(crate) fn cannot_allocate(f: &Facts<'_>) -> Option<Diagnosis> {
    let p = f.e.dra.as_ref()?;
    // Without an allowed node, a pod that also asks for extended resources is explained
    // by the node constraints (`excluded`); a DRA-only one by where its devices are.
    if !p.fits.is_empty()
        || (p.nodes.is_empty() && !f.e.requests.is_empty())
        || p.selector_error.is_some()
    {
        return None;
    }
    let allowed: BTreeSet<&str> = p.nodes.iter().map(|(n, _)| n.as_str()).collect();
    // A shared claim allocated on nodes the pod may not use.
    if let Some(c) = f.e.claims.iter().find(|c| {
        c.allocated
            && !c.allocated_nodes.is_empty()
            && !c
                .allocated_nodes
                .iter()
                .any(|n| allowed.contains(n.as_str()))
    }) {
        let nodes = c.allocated_nodes.join(", ");
        let users = if c.reserved_for.is_empty() {
            String::new()
        } else {
            format!(" (reserved for {})", c.reserved_for.join(", "))
        };
        return Some(
            Diagnosis::new(
                CauseCode::Excluded,
                format!(
                    "resource claim {} is already allocated on {nodes}{users}: a claim's devices stay on that node, so the {} can run only there, and its nodeSelector, affinity or taints exclude {nodes}",
                    claim_name(c),
                    what(f)
                ),
                format!(
                    "let the {} reach {nodes} (relax its nodeSelector/affinity or tolerate the taint), or give it a claim of its own (a ResourceClaimTemplate) instead of sharing {}",
                    what(f),
                    claim_name(c)
                ),
            )
            .with_evidence(c.allocated_devices.iter().map(|d| format!("{}: {d}", claim_name(c)))),
        );
    }
    let reqs = requests(f);
    // A request no alternative of which matches a device on an allowed node.
    if let Some((c, r)) = reqs.iter().find(|(_, r)| {
        r.alternatives
            .iter()
            .all(|a| !a.matching.iter().any(|d| d.allowed))
    }) {
        return Some(no_matching_device(f, c, r));
    }
    // A count larger than what any one node has.
    if let Some((c, r)) = reqs.iter().find(|(_, r)| {
        r.alternatives
            .iter()
            .all(|a| !a.all && (a.max_on_one_node as i64) < a.count)
    }) {
        let a = &r.alternatives[0];
        let nodes: Vec<String> = per_node(a)
            .into_iter()
            .map(|(n, (k, _))| format!("{n}: {k}"))
            .collect();
        return Some(
            Diagnosis::new(
                CauseCode::TooLarge,
                format!(
                    "request {} of claim {} asks for {} device(s) of DeviceClass {}, but no allowed node has that many matching devices, even with nothing allocated (at most {} on one node: {}): one claim's devices all come from one node, so devices on different nodes do not add up",
                    r.request,
                    claim_name(c),
                    a.count,
                    a.device_class,
                    a.max_on_one_node,
                    nodes.join(", ")
                ),
                too_large_fix(a),
            )
            .with_evidence(nodes),
        );
    }
    // Blocked by a sibling's counter.
    if let Some((c, r)) = reqs.iter().find(|(_, r)| {
        r.alternatives
            .iter()
            .any(|a| a.matching.iter().any(|d| d.allowed && d.blocked))
            && !r.alternatives.iter().any(|a| {
                per_node(a)
                    .values()
                    .any(|(_, free)| a.all || *free as i64 >= a.count)
            })
    }) {
        return Some(counter_exhausted(c, r));
    }
    // Allocated to other claims.
    let (c, r) = reqs
        .iter()
        .find(|(_, r)| {
            !r.alternatives.iter().any(|a| {
                per_node(a)
                    .values()
                    .any(|(_, free)| a.all || *free as i64 >= a.count)
            })
        })
        .copied()
        .or_else(|| reqs.first().copied())?;
    let a = r
        .alternatives
        .iter()
        .find(|a| a.matching.iter().any(|d| d.allowed))
        .unwrap_or(&r.alternatives[0]);
    let nodes: Vec<String> = per_node(a)
        .into_iter()
        .map(|(n, (k, free))| format!("{n}: {k} match, {free} free"))
        .collect();
    let used: Vec<&MatchedDevice> = a.matching.iter().filter(|d| d.allowed && !d.free).collect();
    let several = reqs.len() > 1;
    Some(
        Diagnosis::new(
            CauseCode::DevicesInUse,
            format!(
                "request {} of claim {} asks for {} device(s) of DeviceClass {}; no allowed node has that many free at once{} ({})",
                r.request,
                claim_name(c),
                count_text(a),
                a.device_class,
                if several {
                    " together with the pod's other requests"
                } else {
                    ""
                },
                nodes.join("; ")
            ),
            devices_in_use_fix(f, a),
        )
        .with_evidence(used.iter().map(|d| format!("{}: {}", d.device, d.state))),
    )
}

/// The fix of `too-large`: at most what one node has free now when that is less than its
/// matching devices (lowering onto devices that are taken only trades too-large for
/// devices-in-use), else at most the most one node has.
fn too_large_fix(a: &AlternativeView) -> String {
    let free_max = per_node(a)
        .into_iter()
        .max_by_key(|(_, (_, free))| *free)
        .filter(|(_, (_, free))| *free >= 1);
    match free_max {
        Some((n, (_, free))) if free < a.max_on_one_node => format!(
            "ask for at most {free} device(s) per claim — what {n} has free now ({} once the \
             claims holding the others there end) — or split the request across pods, or add \
             a node with {} matching devices",
            a.max_on_one_node, a.count
        ),
        _ => format!(
            "ask for at most {} device(s) per claim (or split the request across pods), or add a node with {} matching devices",
            a.max_on_one_node, a.count
        ),
    }
}

/// The fix of `devices-in-use`: on the allowed node where the fewest other claims hold the
/// devices still lacking, the claims to free and the pods they are reserved for (ending a
/// pod frees a claim made from a template; a standalone claim is freed when its last pod
/// ends); lowering the count is offered only when the count is above the free devices
/// somewhere (never below 1).
fn devices_in_use_fix(f: &Facts<'_>, a: &AlternativeView) -> String {
    let mut best: Option<(usize, String, Vec<String>)> = None;
    for (node, (_, free)) in per_node(a) {
        if a.all {
            break;
        }
        let need = usize::try_from(a.count)
            .unwrap_or(usize::MAX)
            .saturating_sub(free);
        let mut claims: Vec<String> = a
            .matching
            .iter()
            .filter(|d| d.allowed && !d.free && !d.blocked)
            .filter(|d| d.node.clone().unwrap_or_else(|| "(every node)".into()) == node)
            .filter_map(|d| d.holders.first().cloned())
            .collect();
        claims.sort();
        claims.dedup();
        if need == 0 || claims.len() < need {
            continue;
        }
        claims.truncate(need);
        if best.as_ref().is_none_or(|(n, _, _)| need < *n) {
            best = Some((need, node, claims));
        }
    }
    let free_max = per_node(a)
        .values()
        .map(|(_, free)| *free)
        .max()
        .unwrap_or(0);
    let lower = if !a.all && free_max >= 1 && (free_max as i64) < a.count {
        format!(", or lower the request's count to {free_max}")
    } else {
        String::new()
    };
    let Some((_, node, claims)) = best else {
        return format!("wait for the claims holding them to be released (their pods end){lower}");
    };
    let pods: Vec<String> = claims
        .iter()
        .flat_map(|k| {
            let (ns, name) = k.split_once('/').unwrap_or(("", k.as_str()));
            f.pods
                .iter()
                .filter(move |p| {
                    p.namespace == ns
                        && !p.is_terminal()
                        && p.resource_claims
                            .iter()
                            .any(|c| c.claim_name() == Some(name))
                })
                .map(|p| format!("{}/{}", p.namespace, p.name))
        })
        .collect();
    let by = if pods.is_empty() {
        format!("claim(s) {}", claims.join(", "))
    } else {
        format!(
            "claim(s) {} (reserved for pod {})",
            claims.join(", "),
            pods.join(", ")
        )
    };
    format!(
        "free a device on {node}: end the workload holding {by} — its device returns to the \
         pool and this claim can be allocated there{lower}"
    )
}

fn no_matching_device(f: &Facts<'_>, c: &ClaimView, r: &DraRequestView) -> Diagnosis {
    let mut evidence = Vec::new();
    let mut elsewhere = 0;
    for a in &r.alternatives {
        if !a.class_found {
            evidence.push(format!("DeviceClass {} does not exist", a.device_class));
        }
        evidence.push(format!(
            "DeviceClass {}: selectors {}",
            a.device_class,
            if a.selectors.is_empty() {
                "(none)".to_string()
            } else {
                a.selectors.join(" && ")
            }
        ));
        evidence.extend(a.errors.iter().map(|e| format!("cannot evaluate: {e}")));
        evidence.extend(a.hints.iter().map(dra_hints::describe));
        elsewhere += a.matching.len();
    }
    // The claim's own selectors first: a fix may change those; a DeviceClass's it may not.
    let hints = || {
        r.alternatives
            .iter()
            .flat_map(|a| a.hints.iter())
            .filter(|h| h.device_class.is_none())
    };
    let hint = hints()
        .find(|h| {
            matches!(
                h.problem.as_str(),
                "value-not-published" | "type-mismatch" | "version-not-met"
            )
        })
        .or_else(|| hints().next())
        .or_else(|| r.alternatives.iter().flat_map(|a| a.hints.iter()).next());
    let others = distinct_other_classes(r.alternatives.iter());
    let missing_class = r.alternatives.iter().find(|a| !a.class_found);
    let class_part = {
        let a = &r.alternatives[0];
        format!(
            "DeviceClass {} alone matches {} device(s) on allowed nodes, {} free, but the claim's own selectors none",
            a.device_class, a.class_matches, a.class_free
        )
    };
    let cause = if elsewhere > 0 {
        format!(
            "request {} of claim {} matches {elsewhere} device(s), all on nodes the {}'s nodeSelector, affinity or taints exclude",
            r.request,
            claim_name(c),
            what(f)
        )
    } else if r.alternatives.iter().any(|a| !a.class_found) {
        format!(
            "request {} of claim {} names a DeviceClass that does not exist, so no device matches",
            r.request,
            claim_name(c)
        )
    } else if let Some(h) = hint {
        format!(
            "request {} of claim {} matches no device ({class_part}): {}",
            r.request,
            claim_name(c),
            dra_hints::describe(h)
        )
    } else {
        format!(
            "request {} of claim {} matches no published device: no ResourceSlice offers a device its selectors accept",
            r.request,
            claim_name(c)
        )
    };
    let rename = |why: &str| {
        format!(
            "{why}: set deviceClassName of request {} in claim {} to {} (with the claim's own selectors it matches devices on allowed nodes; tested on the devices read)",
            r.request,
            claim_name(c),
            others.join(" or ")
        )
    };
    let fix = if elsewhere > 0 {
        "relax the pod's node constraints to reach the nodes with matching devices".to_string()
    } else if let Some(a) = missing_class {
        if others.is_empty() {
            format!(
                "create DeviceClass {}, or name an existing one in the claim's deviceClassName (kubectl get deviceclasses); no existing class matches a device on an allowed node with the claim's selectors",
                a.device_class
            )
        } else {
            rename(&format!("DeviceClass {} does not exist", a.device_class))
        }
    } else if let Some(class) = hint.and_then(|h| h.device_class.as_deref()) {
        // Only the class's own selector fails: never rewritten here (cluster-wide).
        if others.is_empty() {
            format!(
                "the selector of DeviceClass {class} itself matches no published device, and no other class matches with the claim's selectors: the class's owner must correct it (kubectl get resourceslices -o yaml shows what the drivers publish)"
            )
        } else {
            rename(&format!(
                "leave DeviceClass {class} as it is (its selectors apply to every claim of the class)"
            ))
        }
    } else if let Some(h) = hint {
        match (&h.corrected, h.problem.as_str()) {
            (Some(cx), "value-not-published")
                if h
                    .published
                    .first()
                    .is_some_and(|nearest| !cx.contains(&format!("'{nearest}'")))
                    && h.published.len() > 1 =>
            {
                format!(
                    "change the selector to a value whose devices are free (the nearest \
                     published value, '{}', has none free): {cx}",
                    h.published[0]
                )
            }
            (Some(cx), _) => format!("change the selector to: {cx}"),
            (None, "not-published") if !h.published.is_empty() => format!(
                "select on an attribute the driver publishes ({}), e.g. instead of {}",
                h.published
                    .iter()
                    .take(5)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
                h.attribute
            ),
            _ => "correct the CEL selectors to what the drivers publish (kubectl get resourceslices -o yaml)".to_string(),
        }
    } else {
        "correct the DeviceClass name or the CEL selectors to what the drivers publish (kubectl get resourceslices -o yaml), or install the DRA driver on the nodes".to_string()
    };
    Diagnosis::new(CauseCode::NoMatchingDevice, cause, fix).with_evidence(evidence)
}

fn counter_exhausted(c: &ClaimView, r: &DraRequestView) -> Diagnosis {
    let blocked: Vec<&MatchedDevice> = r
        .alternatives
        .iter()
        .flat_map(|a| a.matching.iter())
        .filter(|d| d.allowed && d.blocked)
        .collect();
    let types: BTreeSet<&str> = blocked.iter().map(|d| d.device_type.as_str()).collect();
    let holders: BTreeSet<&str> = blocked
        .iter()
        .filter_map(|d| d.state.rsplit_once(" by ").map(|(_, h)| h))
        .collect();
    let reachable = r
        .alternatives
        .iter()
        .flat_map(|a| a.matching.iter())
        .filter(|d| d.allowed)
        .count();
    let cause = format!(
        "request {} of claim {} matches {reachable} device(s) on allowed nodes, too few free on any one node; {} {} device(s) among them are not allocated but blocked: the physical GPU behind each is taken under another device type, its shared counter consumed ({})",
        r.request,
        claim_name(c),
        blocked.len(),
        types.into_iter().collect::<Vec<_>>().join("/"),
        blocked
            .iter()
            .map(|d| format!("{} {}", d.device, d.state))
            .collect::<Vec<_>>()
            .join("; ")
    );
    let fix = format!(
        "free a GPU: end the workload holding claim {} (its device then returns the counter), or add GPUs; the scheduler allocates the first claim that asks, whatever the device type",
        holders.into_iter().collect::<Vec<_>>().join(", ")
    );
    Diagnosis::new(CauseCode::CounterExhausted, cause, fix).with_evidence(blocked.iter().map(|d| {
        format!(
            "{} ({}{}): {}",
            d.device,
            d.device_type,
            d.node
                .as_deref()
                .map(|n| format!(" on {n}"))
                .unwrap_or_default(),
            d.state
        )
    }))
}
