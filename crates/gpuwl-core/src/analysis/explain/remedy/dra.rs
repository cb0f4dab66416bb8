//! Fixes of DRA pods as tested changes: each candidate change is made on copies of the
//! pod, the pods and the DRA objects, and the whole explanation re-run
//! ([`crate::analysis::explain::Shared`]); a change is kept only when the pod is then
//! `fits-now`. Candidates, in the order of the harm ranking (changes to the pod's own
//! claim before changes to where it may run, those before ending other workloads):
//!
//! - the pod's node constraints aimed at a node where the claim's devices are (a
//!   nodeSelector entry, a toleration, the required affinity), found by the same
//!   filter-lifting search as a device-plugin pod's ([`super::plan_for_node`]) — and where
//!   that alone does not place the pod, the same change followed by one of the claim-level
//!   changes below, searched on the pod so changed;
//! - another DeviceClass in the claim's request (its own selectors unchanged);
//! - one of the claim's own CEL selectors replaced: the hints' correction, another value
//!   the devices publish (nearest first), a `has()` guard before an attribute some devices
//!   lack; a DeviceClass's selectors are never rewritten (cluster-wide);
//! - a smaller count (≥ 1), the largest that places the pod;
//! - the pods holding the devices on one node ended, fewest first: the resource claim
//!   controller then deallocates their claims (kubernetes/kubernetes
//!   `pkg/controller/resourceclaim/controller.go`: a claim no pod reserves any longer has
//!   its allocation removed), modelled as the claims deallocated.
//!
//! A claim change (class, selector) after which the pod is still held — its devices now
//! matched but taken, too few on one node, or on a node it may not use — is followed by one
//! more change searched on the changed claim (a count, the holders ended, the node
//! constraints); a smaller count whose devices are taken, by the holders ended; the two
//! together are the fix, tried only after every one-change candidate. At most [`RERUNS`] re-runs per pod. When none places the pod the remedy says so
//! (`sufficient: false`) and the rule's text becomes a hint ([`super::DRA_HINT`]).

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};

use crate::analysis::diagnosis::CauseCode;
use crate::analysis::dra::{AlternativeView, ClaimView};
use crate::analysis::dra_hints;
use crate::analysis::explain::{Explanation, Inputs, Shared};
use crate::analysis::fit::Requested;
use crate::model::dra::{ClaimRequest, DraObjects, RequestSpec};
use crate::model::node::NodeInfo;
use crate::model::pod::PodInfo;

use super::{Action, ActionView, NodeCtx, Plan, Remedy, plan_for_node, verify};

/// At most this many whole explanations are re-run for one pod's DRA fix.
const RERUNS: usize = 24;
/// At most this many values a selector is tried with.
const VALUES: usize = 4;
/// At most this many holders ended on one node.
const HOLDERS: usize = 4;

/// The causes a DRA pod's fix is searched for.
fn applies(code: CauseCode) -> bool {
    matches!(
        code,
        CauseCode::NoMatchingDevice
            | CauseCode::SelectorError
            | CauseCode::Excluded
            | CauseCode::TooLarge
            | CauseCode::DevicesInUse
            | CauseCode::CounterExhausted
            | CauseCode::ClaimNotFound
    )
}

/// The tested fix of a pending DRA pod explained as `e`; `None` when the cause is not a
/// DRA one or no DRA objects were read.
pub(super) fn remedy(
    pod: &PodInfo,
    inputs: Inputs<'_>,
    e: &Explanation,
    requested: Option<&BTreeMap<String, Requested>>,
) -> Option<Remedy> {
    let dra = inputs.dra?;
    if !applies(e.cause_code) {
        return None;
    }
    let by_node = crate::model::pod::by_node(inputs.pods.unwrap_or(&[]));
    let s = Search {
        pod,
        inputs,
        dra,
        e,
        reruns: Cell::new(0),
        requested,
        by_node: &by_node,
        chained: false,
        no_chain: Cell::new(false),
    };
    let found = match e.cause_code {
        CauseCode::Excluded => s.reach(),
        // One change before two: each class and selector alone first.
        CauseCode::NoMatchingDevice | CauseCode::SelectorError => s
            .reach()
            .or_else(|| s.single(|| s.classes()))
            .or_else(|| s.single(|| s.selectors()))
            .or_else(|| s.classes())
            .or_else(|| s.selectors()),
        CauseCode::TooLarge => s.single(|| s.lower_count()).or_else(|| s.lower_count()),
        CauseCode::DevicesInUse => s
            .single(|| s.lower_count())
            .or_else(|| s.free_devices())
            .or_else(|| s.lower_count()),
        CauseCode::CounterExhausted => s.free_devices(),
        _ => None,
    };
    Some(found.unwrap_or_else(|| Remedy {
        sufficient: false,
        node: None,
        actions: Vec::new(),
        disrupts: Vec::new(),
        reason_code: Some(s.no_fix_code().to_owned()),
        reason: Some(if s.reruns.get() == 0 {
            "no change to the pod's claim, its node constraints or the pods holding devices applies to this cause".into()
        } else {
            format!(
                "none of the {} changes tried on the model (the claim's class, selectors or count, the pod's node constraints, the pods holding devices) places the pod",
                s.reruns.get()
            )
        }),
    }))
}

/// What one pod's search works on.
struct Search<'a> {
    pod: &'a PodInfo,
    inputs: Inputs<'a>,
    dra: &'a DraObjects,
    e: &'a Explanation,
    reruns: Cell<usize>,
    /// What each node's pods request (for the node-constraint plans).
    requested: Option<&'a BTreeMap<String, Requested>>,
    /// Each node's pods that have not finished ([`crate::model::pod::by_node`] of `inputs.pods`, built
    /// once per search: the searches chained below read the same pods).
    by_node: &'a HashMap<String, Vec<&'a PodInfo>>,
    /// A second step already: no further one is chained.
    chained: bool,
    /// While set, a claim change is tried alone ([`Search::single`]).
    no_chain: Cell<bool>,
}

/// One claim-level candidate: the actions and the changed DRA objects and pods.
struct Candidate {
    actions: Vec<Action>,
    dra: DraObjects,
    /// `namespace/name` of pods ended.
    stopped: Vec<String>,
}

impl Search<'_> {
    /// Why no candidate placed the pod, as a code ([`Remedy::reason_code`]):
    /// `asks-for-what-no-device-is` (no published device matches the request's own
    /// selectors under any class, and no selector change is known: only asking for other
    /// hardware serves), `more-than-any-node-has` (a count above the matching devices of
    /// every node, where a smaller count is not a change the search may make: count 1 or
    /// `All`), `holders-not-found` (devices in use whose holders are not read),
    /// `claim-not-found`, `search-budget-spent` (the re-runs ran out: [`RERUNS`]),
    /// `no-change-applies` (no candidate at all), `needs-more-than-two-changes` (candidates
    /// were re-run, none — alone or followed by one more change — placed the pod).
    fn no_fix_code(&self) -> &'static str {
        let reqs = self.requests();
        let no_selector_change = reqs.iter().all(|(_, _, a)| {
            a.other_classes.is_empty()
                && a.hints
                    .iter()
                    .all(|h| h.corrected.is_none() && h.published.is_empty())
        });
        let nothing_matches = reqs
            .iter()
            .any(|(_, _, a)| a.matching.is_empty() && a.other_classes.is_empty());
        match self.e.cause_code {
            CauseCode::ClaimNotFound => "claim-not-found",
            CauseCode::NoMatchingDevice | CauseCode::SelectorError
                if nothing_matches && no_selector_change =>
            {
                "asks-for-what-no-device-is"
            }
            CauseCode::TooLarge
                if reqs.iter().any(|(_, _, a)| {
                    (a.all || a.count <= 1) && a.count > a.max_on_one_node as i64
                }) =>
            {
                "more-than-any-node-has"
            }
            _ if self.reruns.get() >= RERUNS => "search-budget-spent",
            _ if self.reruns.get() == 0 => match self.e.cause_code {
                CauseCode::DevicesInUse | CauseCode::CounterExhausted => "holders-not-found",
                _ => "no-change-applies",
            },
            _ => "needs-more-than-two-changes",
        }
    }

    /// The unallocated requests of the pod's found claims, each with its one
    /// alternative (`exactly`; `firstAvailable` lists are left to the rule).
    fn requests(&self) -> Vec<(&ClaimView, &str, &AlternativeView)> {
        self.e
            .claims
            .iter()
            .filter(|c| c.found && !c.allocated)
            .flat_map(|c| {
                c.requests
                    .iter()
                    .filter_map(move |r| match r.alternatives.as_slice() {
                        [a] => Some((c, r.request.as_str(), a)),
                        _ => None,
                    })
            })
            .collect()
    }

    /// Re-runs the explanation on the candidate (`pod` instead of the search's pod when
    /// given); `None` past [`RERUNS`] or when the explanation fails.
    fn rerun(&self, c: &Candidate, pod: Option<&PodInfo>) -> Option<Explanation> {
        if self.reruns.get() >= RERUNS {
            return None;
        }
        self.reruns.set(self.reruns.get() + 1);
        let pods: Option<Vec<PodInfo>> = self.inputs.pods.map(|ps| {
            ps.iter()
                .filter(|p| !c.stopped.contains(&p.key()))
                .cloned()
                .collect()
        });
        let inputs = Inputs {
            dra: Some(&c.dra),
            pods: pods.as_deref().or(self.inputs.pods),
            ..self.inputs
        };
        Shared::new(inputs).explain(pod.unwrap_or(self.pod)).ok()
    }

    /// Tries `c`; the remedy when the re-run places the pod. A changed claim (class or
    /// selector) that now matches devices which are taken, too few on one node, or on
    /// nodes the pod may not use gets one more change, searched on the changed claim
    /// ([`Search::next_step`]): the two together are the fix.
    fn tried(&self, c: Candidate) -> Option<Remedy> {
        let after = self.rerun(&c, None)?;
        if let Some(node) = placed(&after) {
            return Some(self.view(c.actions, node, c.stopped));
        }
        let claim_changed = c.actions.iter().any(|a| {
            matches!(
                a,
                Action::DeviceClass { .. } | Action::Selector { .. } | Action::Count { .. }
            )
        });
        if self.chained || self.no_chain.get() || !claim_changed {
            return None;
        }
        let counted = matches!(c.actions.as_slice(), [Action::Count { .. }]);
        let sub = Search {
            pod: self.pod,
            inputs: Inputs {
                dra: Some(&c.dra),
                ..self.inputs
            },
            dra: &c.dra,
            e: &after,
            reruns: Cell::new(self.reruns.get()),
            requested: self.requested,
            by_node: self.by_node,
            chained: true,
            no_chain: Cell::new(false),
        };
        // After a smaller count, only the holders ended (never a second count).
        let found = if counted {
            match after.cause_code {
                CauseCode::DevicesInUse | CauseCode::CounterExhausted => sub.free_devices(),
                _ => None,
            }
        } else {
            sub.next_step()
        };
        self.reruns.set(sub.reruns.get());
        let r = found?;
        let mut first = self.view(c.actions, String::new(), Vec::new());
        first.actions.extend(r.actions);
        first.node = r.node;
        first.disrupts = r.disrupts;
        Some(first)
    }

    /// `f` with every claim change tried alone (no second step chained).
    fn single(&self, f: impl FnOnce() -> Option<Remedy>) -> Option<Remedy> {
        self.no_chain.set(true);
        let r = f();
        self.no_chain.set(false);
        r
    }

    /// The second step of a chained fix, by the cause the first left.
    fn next_step(&self) -> Option<Remedy> {
        match self.e.cause_code {
            CauseCode::DevicesInUse => self.lower_count().or_else(|| self.free_devices()),
            CauseCode::CounterExhausted => self.free_devices(),
            CauseCode::TooLarge => self.lower_count(),
            CauseCode::NoMatchingDevice | CauseCode::Excluded => self.reach(),
            _ => None,
        }
    }

    fn view(&self, actions: Vec<Action>, node: String, disrupts: Vec<String>) -> Remedy {
        let pods = self.inputs.pods.unwrap_or(&[]);
        Remedy {
            sufficient: true,
            node: Some(node),
            actions: actions
                .into_iter()
                .map(|a| ActionView {
                    target: match &a {
                        Action::FreeDevices { node, .. } => format!("node {node}"),
                        _ => format!("pod {}/{}", self.pod.namespace, self.pod.name),
                    },
                    apply: a.apply().into(),
                    description: a.describe(self.pod),
                    commands: a.commands(self.pod, pods),
                    action: a,
                })
                .collect(),
            disrupts,
            reason: None,
            reason_code: None,
        }
    }

    /// The pod's node constraints aimed at a node holding the claim's devices (matching
    /// devices on nodes it may not use, or the nodes a shared claim is allocated on): the
    /// cheapest plan of the filter-lifting search that the re-run confirms.
    fn reach(&self) -> Option<Remedy> {
        let requested = self.requested;
        let nodes = self.inputs.nodes?;
        let mut targets: Vec<&str> = Vec::new();
        for c in &self.e.claims {
            if c.allocated {
                targets.extend(c.allocated_nodes.iter().map(String::as_str));
            }
        }
        for (_, _, a) in self.requests() {
            targets.extend(
                a.matching
                    .iter()
                    .filter(|d| !d.allowed)
                    .filter_map(|d| d.node.as_deref()),
            );
        }
        targets.sort_unstable();
        targets.dedup();
        let empty = BTreeMap::new();
        let mut plans: Vec<Plan> = nodes
            .iter()
            .filter(|n| targets.contains(&n.name.as_str()))
            .filter_map(|n| {
                let ctx = NodeCtx {
                    on_node: self.by_node.get(n.name.as_str()).map_or(&[], Vec::as_slice),
                    renames: &empty,
                    requested: requested
                        .and_then(|m| m.get(&n.name))
                        .cloned()
                        .unwrap_or_default(),
                };
                plan_for_node(self.pod, n, &ctx).ok()
            })
            .filter(|p| !p.actions.is_empty())
            .collect();
        plans.sort_by(|a, b| (a.cost(), &a.node).cmp(&(b.cost(), &b.node)));
        for plan in plans.iter().take(4) {
            if self.reruns.get() >= RERUNS {
                break;
            }
            self.reruns.set(self.reruns.get() + 1);
            if verify(self.pod, self.inputs, plan) {
                return Some(plan.view(self.pod, self.inputs.pods.unwrap_or(&[])));
            }
        }
        plans
            .iter()
            .filter(|p| p.actions.iter().all(Action::on_pod))
            .take(2)
            .find_map(|plan| self.reach_then_claim(plan))
    }

    /// Where aiming the pod at a node is not enough (the devices there are taken, or match
    /// only under another class): the plan's changes made on the pod, the pod explained
    /// again, and the claim-level search run on that explanation; the plan's actions, then
    /// the search's.
    fn reach_then_claim(&self, plan: &Plan) -> Option<Remedy> {
        if self.reruns.get() >= RERUNS {
            return None;
        }
        self.reruns.set(self.reruns.get() + 1);
        let mut pod = self.pod.clone();
        let mut scratch_node = NodeInfo::named(plan.node.as_str());
        let mut scratch = Requested::default();
        for a in &plan.actions {
            super::apply(a, &mut pod, &mut scratch_node, &mut scratch, &[]);
        }
        let e = Shared::new(self.inputs).explain(&pod).ok()?;
        let sub = Search {
            pod: &pod,
            inputs: self.inputs,
            dra: self.dra,
            e: &e,
            reruns: Cell::new(self.reruns.get()),
            requested: self.requested,
            by_node: self.by_node,
            chained: true,
            no_chain: Cell::new(false),
        };
        let found = match e.cause_code {
            CauseCode::NoMatchingDevice | CauseCode::SelectorError => {
                sub.classes().or_else(|| sub.selectors())
            }
            CauseCode::TooLarge => sub.lower_count(),
            CauseCode::DevicesInUse => sub.lower_count().or_else(|| sub.free_devices()),
            CauseCode::CounterExhausted => sub.free_devices(),
            _ => None,
        };
        self.reruns.set(sub.reruns.get());
        let r = found?;
        let mut whole = plan.view(self.pod, self.inputs.pods.unwrap_or(&[]));
        whole.node = r.node;
        whole.actions.extend(r.actions);
        whole.disrupts.extend(r.disrupts);
        Some(whole)
    }

    /// Another DeviceClass in the request, each the explanation found to match (nearest
    /// name first).
    fn classes(&self) -> Option<Remedy> {
        for (c, request, a) in self.requests() {
            for class in &a.other_classes {
                let mut dra = self.dra.clone();
                let Some(claim) = edit_request(&mut dra, self.pod, c, request, |r| {
                    r.device_class = class.clone()
                }) else {
                    continue;
                };
                let action = Action::DeviceClass {
                    claim,
                    request: request.to_owned(),
                    from: a.device_class.clone(),
                    to: class.clone(),
                };
                let found = self.tried(Candidate {
                    actions: vec![action],
                    dra,
                    stopped: Vec::new(),
                });
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// The claim's own selectors replaced, one at a time: the hint's correction, other
    /// published values (nearest first), a `has()` guard for a missing attribute.
    fn selectors(&self) -> Option<Remedy> {
        for (c, request, a) in self.requests() {
            let own = own_selectors(self.dra, self.pod, c, request);
            for (from, to) in self.selector_candidates(a, &own) {
                let mut dra = self.dra.clone();
                let Some(claim) = edit_request(&mut dra, self.pod, c, request, |r| {
                    for s in r.selectors.iter_mut().filter(|s| **s == from) {
                        s.clone_from(&to);
                    }
                }) else {
                    continue;
                };
                let action = Action::Selector {
                    claim,
                    request: request.to_owned(),
                    from,
                    to,
                };
                let found = self.tried(Candidate {
                    actions: vec![action],
                    dra,
                    stopped: Vec::new(),
                });
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// (selector now, selector instead) pairs for the claim's own selectors `own`.
    fn selector_candidates(&self, a: &AlternativeView, own: &[String]) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut push = |from: &str, to: String| {
            if to != from && !out.iter().any(|(f, t)| f == from && *t == to) {
                out.push((from.to_owned(), to));
            }
        };
        for h in a
            .hints
            .iter()
            .filter(|h| h.device_class.is_none() && own.contains(&h.selector))
        {
            if let Some(cx) = &h.corrected {
                push(&h.selector, cx.clone());
            }
            // A version compared with a string (`type-mismatch`), corrected to the typed
            // comparison, or one no device meets (`version-not-met`): the typed comparison
            // with each published version too (the free devices' first).
            if let Some(cx) = &h.corrected
                && (h.problem == "version-not-met"
                    || h.problem == "type-mismatch" && cx.contains("semver("))
                && let Some(lit) = h
                    .value
                    .as_deref()
                    .map(|v| v.rsplit(' ').next().unwrap_or(v))
            {
                // The selector itself holds `semver('LIT')` (version-not-met), the
                // corrected one does (type-mismatch).
                let base = if h.problem == "version-not-met" {
                    &h.selector
                } else {
                    cx
                };
                let at = base.find(&format!("semver('{lit}')"));
                for p in h.published.iter().take(VALUES) {
                    if let Some(i) = at
                        && !p.contains('\'')
                        && !p.contains('\\')
                    {
                        let mut to = base.clone();
                        to.replace_range(i..i + lit.len() + 10, &format!("semver('{p}')"));
                        push(&h.selector, to);
                    }
                }
            }
            if h.problem == "value-not-published"
                && let Some(v) = &h.value
            {
                for p in h.published.iter().take(VALUES) {
                    for q in ['\'', '"'] {
                        let lit = format!("{q}{v}{q}");
                        if h.selector.contains(&lit) && !p.contains(q) && !p.contains('\\') {
                            push(&h.selector, h.selector.replace(&lit, &format!("{q}{p}{q}")));
                        }
                    }
                }
            }
        }
        if let Some(err) = self.e.dra.as_ref().and_then(|p| p.selector_error.as_ref())
            && own.contains(&err.expression)
            && let Some(key) = err.error.strip_prefix("no such key: ")
            && let Some(g) = dra_hints::guarded(&err.expression, key.trim())
        {
            push(&err.expression, g);
        }
        out
    }

    /// A smaller count in one request: the largest below the count (and not above the
    /// most matching devices on one allowed node) that places the pod.
    fn lower_count(&self) -> Option<Remedy> {
        for (c, request, a) in self.requests() {
            if a.all || a.count <= 1 {
                continue;
            }
            let top = (a.count - 1).min(a.max_on_one_node as i64);
            for to in (1..=top).rev().take(VALUES) {
                let mut dra = self.dra.clone();
                let Some(claim) = edit_request(&mut dra, self.pod, c, request, |r| r.count = to)
                else {
                    continue;
                };
                let found = self.tried(Candidate {
                    actions: vec![Action::Count {
                        claim,
                        request: request.to_owned(),
                        from: a.count,
                        to,
                    }],
                    dra,
                    stopped: Vec::new(),
                });
                if found.is_some() {
                    return found;
                }
            }
        }
        None
    }

    /// The holders of matching devices on one allowed node ended, fewest first: per node,
    /// the claims holding its matching devices (allocated to them, or blocking them through
    /// a shared counter), in device order; the first `k` released, for `k` = 1, 2, ….
    fn free_devices(&self) -> Option<Remedy> {
        let mut per_node: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (_, _, a) in self.requests() {
            for d in a.matching.iter().filter(|d| d.allowed && !d.free) {
                let Some(node) = d.node.clone() else {
                    continue;
                };
                let holders: Vec<String> = if d.holders.is_empty() {
                    d.state
                        .rsplit_once(" by ")
                        .map(|(_, h)| vec![h.to_owned()])
                        .unwrap_or_default()
                } else {
                    d.holders.clone()
                };
                let list = per_node.entry(node).or_default();
                for h in holders {
                    if !list.contains(&h) {
                        list.push(h);
                    }
                }
            }
        }
        for k in 1..=HOLDERS {
            for (node, holders) in &per_node {
                if holders.len() < k {
                    continue;
                }
                let claims: Vec<String> = holders[..k].to_vec();
                let found = self.tried(self.release(node, claims));
                if found.is_some() || self.reruns.get() >= RERUNS {
                    return found;
                }
            }
        }
        None
    }

    /// The candidate that ends the pods reserving `claims` (`namespace/name`) and
    /// deallocates the claims.
    fn release(&self, node: &str, claims: Vec<String>) -> Candidate {
        let mut dra = self.dra.clone();
        for c in dra
            .resource_claims
            .iter_mut()
            .filter(|c| claims.contains(&c.key()))
        {
            c.allocated = false;
            c.results.clear();
            c.reserved_for.clear();
            c.allocated_nodes.clear();
        }
        let mut pods: Vec<String> = Vec::new();
        for k in &claims {
            let (ns, name) = k.split_once('/').unwrap_or(("", k.as_str()));
            for p in self.inputs.pods.unwrap_or(&[]).iter().filter(|p| {
                p.namespace == ns
                    && !p.is_terminal()
                    && p.key() != self.pod.key()
                    && p.resource_claims
                        .iter()
                        .any(|c| c.claim_name() == Some(name))
            }) {
                if !pods.contains(&p.key()) {
                    pods.push(p.key());
                }
            }
        }
        Candidate {
            actions: vec![Action::FreeDevices {
                node: node.to_owned(),
                claims,
                pods: pods.clone(),
            }],
            dra,
            stopped: pods,
        }
    }
}

/// The node an explanation places the pod on: the first it can be scheduled on, when it
/// is `fits-now`.
fn placed(after: &Explanation) -> Option<String> {
    (after.cause_code == CauseCode::FitsNow)
        .then(|| after.schedulable.first().cloned())
        .flatten()
}

/// The request's own selectors (the claim's or the template's; a DeviceClass's aside).
fn own_selectors(dra: &DraObjects, pod: &PodInfo, c: &ClaimView, request: &str) -> Vec<String> {
    let mut copy = dra.clone();
    let mut out = Vec::new();
    edit_request(&mut copy, pod, c, request, |r| out = r.selectors.clone());
    out
}

/// Changes request `request` of the pod's claim `c` in `dra` with `f`: the ResourceClaim
/// when it exists, else the template its claim is made from (a claim already made from the
/// template is dropped: the pod is re-created and gets a new one). Returns how the claim is
/// named in the action (`namespace/name` or `template NAME`); `None` when neither is found
/// or the request is not one `exactly` alternative.
pub(super) fn edit_request(
    dra: &mut DraObjects,
    pod: &PodInfo,
    c: &ClaimView,
    request: &str,
    f: impl FnOnce(&mut RequestSpec),
) -> Option<String> {
    let set = |reqs: &mut Vec<ClaimRequest>| {
        let r = reqs.iter_mut().find(|r| r.name == request)?;
        let [alt] = r.alternatives.as_mut_slice() else {
            return None;
        };
        f(alt);
        Some(())
    };
    if let Some(key) = c.claim.as_deref().filter(|_| !c.from_template) {
        let claim = dra.resource_claims.iter_mut().find(|x| x.key() == key)?;
        set(&mut claim.requests)?;
        return Some(key.to_owned());
    }
    let t = c.template.as_deref()?;
    let template = dra
        .resource_claim_templates
        .iter_mut()
        .find(|x| x.namespace == pod.namespace && x.name == t)?;
    set(&mut template.requests)?;
    if let Some(key) = c.claim.as_deref() {
        dra.resource_claims.retain(|x| x.key() != key);
    }
    Some(format!("template {t}"))
}
