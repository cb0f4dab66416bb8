//! The quota layer as pools: which nodes each Kueue ResourceFlavor selects and which GPU
//! names they advertise ([`FlavorOffer`]), and the check of every ClusterQueue's GPU quota
//! against them ([`QuotaLayer::findings`]).
//!
//! Kueue admits a workload against quota alone: it never looks at what the nodes
//! advertise (kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go`
//! compares requests with the ClusterQueue's quota and the flavor's taints, not with
//! nodes). Once admitted, the pods get the flavor's `nodeLabels` as node selector and its
//! `tolerations` (`pkg/podset/podset.go`), and the scheduler decides. So a quota on a name
//! the flavor's nodes never advertise admits workloads that then wait forever.
//!
//! Which nodes a flavor selects: every node carrying all of its `nodeLabels` whose
//! `NoSchedule` / `NoExecute` taints are each tolerated by the flavor's `tolerations` or
//! declared in its `nodeTaints` (a workload admitted there tolerates those: Kueue checks it,
//! `flavorassigner.go` `checkFlavorForPodSets`). A node matching the labels with another
//! taint is counted apart (`tainted`): only a workload tolerating it by itself lands there.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::analysis::check::finding::Finding;
use crate::analysis::placement::tolerates;
use crate::model::finding::Code;
use crate::model::kueue::{KueueObjects, ResourceFlavor, Workload, milli_str};
use crate::model::node::{NodeInfo, ResourceField};
use crate::model::operator::ClusterPolicy;
use crate::model::resource::classify;

/// How many node names a [`FlavorOffer`] keeps for messages.
const NAMES_KEPT: usize = 5;

/// What one ResourceFlavor's nodes offer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorOffer {
    /// The flavor's name.
    pub flavor: String,
    /// Nodes selected (labels match, taints tolerated or declared).
    pub nodes: usize,
    /// The first [`NAMES_KEPT`] of them, in the order read.
    pub node_names: Vec<String>,
    /// Of those, GPU nodes (check's GPU-node evidence).
    pub gpu_nodes: usize,
    /// The pools (effective workload configs) of the selected GPU nodes.
    pub pools: BTreeSet<String>,
    /// Per GPU resource name advertised on the selected nodes (allocatable, else
    /// capacity; quantity > 0): the sum over those nodes.
    pub advertised: BTreeMap<String, i64>,
    /// Nodes matching the labels but carrying a taint the flavor neither tolerates nor
    /// declares.
    pub tainted: usize,
}

/// Whether `flavor` selects `node` (see the module docs): `Some(true)` selected,
/// `Some(false)` labels match but a taint keeps the flavor's pods off, `None` labels do
/// not match.
pub fn selects(flavor: &ResourceFlavor, node: &NodeInfo) -> Option<bool> {
    if !flavor
        .node_labels
        .iter()
        .all(|(k, v)| node.labels.get(k) == Some(v))
    {
        return None;
    }
    let ok = node
        .taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .all(|t| {
            flavor.tolerations.iter().any(|tol| tolerates(tol, t))
                || flavor
                    .node_taints
                    .iter()
                    .any(|d| d.key == t.key && d.value == t.value && d.effect == t.effect)
        });
    Some(ok)
}

/// The GPU names `node` advertises with a whole count > 0 (allocatable, else capacity).
pub fn advertised_gpus(node: &NodeInfo) -> BTreeMap<String, i64> {
    let field = if node.allocatable.is_some() {
        ResourceField::Allocatable
    } else {
        ResourceField::Capacity
    };
    let names: Vec<&String> = match field {
        ResourceField::Allocatable => node.allocatable.iter().flat_map(|a| a.keys()).collect(),
        ResourceField::Capacity => node.capacity.keys().collect(),
    };
    names
        .into_iter()
        .filter(|n| classify(n).is_gpu())
        .filter_map(|n| {
            let c = node.quantity(field, n)?.ok()?.to_i64()?;
            (c > 0).then(|| (n.clone(), c))
        })
        .collect()
}

impl FlavorOffer {
    /// Adds `node` when the flavor selects it; `gpu_node` and `pool` are check's verdict
    /// on the node (its GPU-node evidence, its effective workload).
    pub fn add(&mut self, flavor: &ResourceFlavor, node: &NodeInfo, gpu_node: bool, pool: &str) {
        match selects(flavor, node) {
            None => {}
            Some(false) => self.tainted += 1,
            Some(true) => {
                self.nodes += 1;
                if self.node_names.len() < NAMES_KEPT {
                    self.node_names.push(node.name.clone());
                }
                if gpu_node {
                    self.gpu_nodes += 1;
                    if !pool.is_empty() {
                        self.pools.insert(pool.to_owned());
                    }
                }
                for (name, n) in advertised_gpus(node) {
                    let e = self.advertised.entry(name).or_default();
                    *e = e.saturating_add(n);
                }
            }
        }
    }

    /// `3 node(s) (a, b, c)`, `0 nodes`.
    fn nodes_str(&self) -> String {
        if self.nodes == 0 {
            return "no node".into();
        }
        let more = if self.nodes > self.node_names.len() {
            ", …"
        } else {
            ""
        };
        format!(
            "{} node(s) ({}{more})",
            self.nodes,
            self.node_names.join(", ")
        )
    }

    /// `nvidia.com/GA102GL_A10 ×4, …` or `no GPU name`.
    fn advertised_str(&self) -> String {
        if self.advertised.is_empty() {
            return "no GPU name".into();
        }
        self.advertised
            .iter()
            .map(|(n, c)| format!("{n} ×{c}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// `in pool vm-passthrough` / `in pools container, vm-passthrough` / empty.
    fn pools_str(&self) -> String {
        match self.pools.len() {
            0 => String::new(),
            1 => format!(
                " in pool {}",
                self.pools.iter().next().unwrap_or(&String::new())
            ),
            _ => format!(
                " in pools {}",
                self.pools.iter().cloned().collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// The findings of one Kueue object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaReport {
    /// `ResourceFlavor/<name>` or `ClusterQueue/<name>`.
    pub object: String,
    /// Its findings, errors first.
    pub findings: Vec<Finding>,
}

/// The quota layer being checked: the Kueue objects and, per flavor, what its nodes offer
/// (fed node by node, [`QuotaLayer::add`]).
#[derive(Debug, Clone, Default)]
pub struct QuotaLayer {
    objects: KueueObjects,
    offers: Vec<FlavorOffer>,
}

fn finding(code: Code, resource: Option<&str>, message: String) -> Finding {
    Finding {
        code,
        severity: code.severity(),
        resource: resource.map(str::to_owned),
        message,
    }
}

impl QuotaLayer {
    /// A layer for `objects`, with no node yet.
    pub fn new(objects: KueueObjects) -> QuotaLayer {
        let offers = objects
            .flavors
            .iter()
            .map(|f| FlavorOffer {
                flavor: f.name.clone(),
                ..FlavorOffer::default()
            })
            .collect();
        QuotaLayer { objects, offers }
    }

    /// Feeds one node to every flavor ([`FlavorOffer::add`]). Fed with check's verdict on
    /// the node, and the layer over a node list: `add_judged` and `of_nodes`, in
    /// `analysis/check/quota.rs` beside the checker they call.
    pub fn add(&mut self, node: &NodeInfo, gpu_node: bool, pool: &str) {
        for (f, o) in self.objects.flavors.iter().zip(self.offers.iter_mut()) {
            o.add(f, node, gpu_node, pool);
        }
    }

    /// The Kueue objects judged.
    pub fn objects(&self) -> &KueueObjects {
        &self.objects
    }

    /// What each flavor's nodes offer, by flavor name.
    pub fn offers(&self) -> &[FlavorOffer] {
        &self.offers
    }

    fn offer(&self, flavor: &str) -> Option<&FlavorOffer> {
        self.offers.iter().find(|o| o.flavor == flavor)
    }

    /// The flavors some ClusterQueue gives quota on a GPU name.
    fn gpu_flavors(&self) -> BTreeSet<&str> {
        self.objects
            .cluster_queues
            .iter()
            .flat_map(|cq| &cq.groups)
            .flat_map(|g| &g.flavors)
            .filter(|fq| {
                fq.resources
                    .iter()
                    .any(|r| classify(&r.name).is_gpu() && r.nominal_milli > 0)
            })
            .map(|fq| fq.flavor.as_str())
            .collect()
    }

    /// The flavor findings: `kueue-flavor-no-gpu-node` and `kueue-flavor-spans-pools`,
    /// for the flavors some ClusterQueue gives GPU quota.
    fn flavor_findings(&self) -> Vec<QuotaReport> {
        let mut out = Vec::new();
        for name in self.gpu_flavors() {
            let Some(o) = self.offer(name) else { continue };
            let mut findings = Vec::new();
            if o.gpu_nodes == 0 {
                let tainted = if o.tainted > 0 {
                    format!(
                        "; {} more node(s) match its nodeLabels but carry a taint it neither tolerates nor declares",
                        o.tainted
                    )
                } else {
                    String::new()
                };
                findings.push(finding(
                    Code::KueueFlavorNoGpuNode,
                    None,
                    format!(
                        "flavor {name} carries GPU quota but selects no GPU node ({} selected{tainted}): a workload admitted in it waits at the scheduler",
                        o.nodes_str()
                    ),
                ));
            }
            if o.pools.len() > 1 {
                findings.push(finding(
                    Code::KueueFlavorSpansPools,
                    None,
                    format!(
                        "flavor {name} selects GPU nodes of several pools ({}): they advertise different GPU names ({}), so its quota counts GPUs a workload cannot use on every node",
                        o.pools.iter().cloned().collect::<Vec<_>>().join(", "),
                        o.advertised_str()
                    ),
                ));
            }
            if !findings.is_empty() {
                out.push(QuotaReport {
                    object: format!("ResourceFlavor/{name}"),
                    findings,
                });
            }
        }
        out
    }

    /// The ClusterQueue findings: per GPU quota of a flavor, `kueue-quota-not-advertised`
    /// (error) when the flavor's nodes advertise none of that name, else
    /// `kueue-quota-above-capacity` (warning) when the nominal quota exceeds what they
    /// advertise in all.
    fn queue_findings(&self) -> Vec<QuotaReport> {
        let mut out = Vec::new();
        for cq in &self.objects.cluster_queues {
            let mut findings = Vec::new();
            for fq in cq.groups.iter().flat_map(|g| &g.flavors) {
                let Some(o) = self.offer(&fq.flavor) else {
                    continue;
                };
                for r in fq
                    .resources
                    .iter()
                    .filter(|r| classify(&r.name).is_gpu() && r.nominal_milli > 0)
                {
                    let have = o.advertised.get(&r.name).copied().unwrap_or(0);
                    if have == 0 {
                        findings.push(finding(
                            Code::KueueQuotaNotAdvertised,
                            Some(&r.name),
                            if o.nodes == 0 {
                                format!(
                                    "quota {} {} in flavor {}, but the flavor selects no node: Kueue admits workloads for it that no node can run",
                                    r.nominal_raw, r.name, fq.flavor
                                )
                            } else {
                                format!(
                                    "quota {} {} in flavor {}, but its {}{} advertise {}: Kueue admits workloads for it that no node can run",
                                    r.nominal_raw,
                                    r.name,
                                    fq.flavor,
                                    o.nodes_str(),
                                    o.pools_str(),
                                    o.advertised_str()
                                )
                            },
                        ));
                    } else if r.nominal_milli > have.saturating_mul(1000) {
                        findings.push(finding(
                            Code::KueueQuotaAboveCapacity,
                            Some(&r.name),
                            format!(
                                "quota {} {} in flavor {}, but its {} advertise {} in all: Kueue admits {} more than the nodes can place",
                                r.nominal_raw,
                                r.name,
                                fq.flavor,
                                o.nodes_str(),
                                have,
                                milli_str(r.nominal_milli - have * 1000)
                            ),
                        ));
                    }
                }
            }
            if !findings.is_empty() {
                findings.sort_by_key(|f| f.severity);
                out.push(QuotaReport {
                    object: format!("ClusterQueue/{}", cq.name),
                    findings,
                });
            }
        }
        out
    }

    /// Every finding of the quota layer: the flavors', then the ClusterQueues', each by
    /// name.
    pub fn findings(&self) -> Vec<QuotaReport> {
        let mut v = self.flavor_findings();
        v.extend(self.queue_findings());
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::kueue::read_str;
    use crate::model::node::Taint;

    fn node(name: &str, workload: &str, res: &[(&str, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named(name);
        n.labels
            .insert("nvidia.com/gpu.workload.config".into(), workload.into());
        n.allocatable = Some(
            res.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        n
    }

    /// The lab's shape: one flavor per pool, the passthrough flavor with quota on the
    /// container name.
    const LAB: &str = "
kind: List
items:
- {kind: ResourceFlavor, metadata: {name: container}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: container}}}
- {kind: ResourceFlavor, metadata: {name: passthrough}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: vm-passthrough}}}
- {kind: ResourceFlavor, metadata: {name: any-gpu}, spec: {}}
- kind: ClusterQueue
  metadata: {name: gpus}
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: container, resources: [{name: nvidia.com/gpu, nominalQuota: 8}]}
      - {name: passthrough, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
- kind: ClusterQueue
  metadata: {name: wide}
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: any-gpu, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
";

    fn layer() -> QuotaLayer {
        let mut l = QuotaLayer::new(read_str(LAB, "lab.yaml").unwrap());
        l.add(
            &node("gpu-a", "container", &[("nvidia.com/gpu", "4")]),
            true,
            "container",
        );
        l.add(
            &node("gpu-b", "container", &[("nvidia.com/gpu", "2")]),
            true,
            "container",
        );
        l.add(
            &node("pt-a", "vm-passthrough", &[("nvidia.com/GA102GL_A10", "2")]),
            true,
            "vm-passthrough",
        );
        l
    }

    #[test]
    fn each_flavor_offers_what_its_nodes_advertise() {
        let l = layer();
        let c = &l.offers()[1];
        assert_eq!(c.flavor, "container");
        assert_eq!((c.nodes, c.gpu_nodes), (2, 2));
        assert_eq!(c.advertised["nvidia.com/gpu"], 6);
        let any = &l.offers()[0];
        assert_eq!(any.flavor, "any-gpu");
        assert_eq!(any.nodes, 3);
        assert_eq!(
            any.pools.iter().map(String::as_str).collect::<Vec<_>>(),
            ["container", "vm-passthrough"]
        );
    }

    #[test]
    fn the_misnamed_passthrough_quota_is_an_error_with_what_the_nodes_advertise() {
        let r = layer().findings();
        let gpus = r.iter().find(|q| q.object == "ClusterQueue/gpus").unwrap();
        let codes: Vec<Code> = gpus.findings.iter().map(|f| f.code).collect();
        assert_eq!(
            codes,
            [Code::KueueQuotaNotAdvertised, Code::KueueQuotaAboveCapacity]
        );
        assert_eq!(
            gpus.findings[0].message,
            "quota 2 nvidia.com/gpu in flavor passthrough, but its 1 node(s) (pt-a) in pool vm-passthrough advertise nvidia.com/GA102GL_A10 ×2: Kueue admits workloads for it that no node can run"
        );
        assert_eq!(
            gpus.findings[1].message,
            "quota 8 nvidia.com/gpu in flavor container, but its 2 node(s) (gpu-a, gpu-b) advertise 6 in all: Kueue admits 2 more than the nodes can place"
        );
    }

    #[test]
    fn a_flavor_over_two_pools_is_a_warning() {
        let r = layer().findings();
        let any = r
            .iter()
            .find(|q| q.object == "ResourceFlavor/any-gpu")
            .unwrap();
        assert_eq!(any.findings[0].code, Code::KueueFlavorSpansPools);
        assert!(
            any.findings[0]
                .message
                .contains("several pools (container, vm-passthrough)"),
            "{}",
            any.findings[0].message
        );
        // 4 ≤ 6 + 2 advertised nvidia.com/gpu: no capacity warning for "wide".
        assert!(!r.iter().any(|q| q.object == "ClusterQueue/wide"));
    }

    #[test]
    fn a_flavor_selecting_no_gpu_node_and_taints() {
        let mut l = QuotaLayer::new(read_str(LAB, "lab.yaml").unwrap());
        let mut tainted = node("pt-a", "vm-passthrough", &[("nvidia.com/GA102GL_A10", "2")]);
        tainted.taints.push(Taint {
            key: "gpu".into(),
            value: None,
            effect: "NoSchedule".into(),
        });
        l.add(&tainted, true, "vm-passthrough");
        let r = l.findings();
        let pt = r
            .iter()
            .find(|q| q.object == "ResourceFlavor/passthrough")
            .unwrap();
        assert_eq!(pt.findings[0].code, Code::KueueFlavorNoGpuNode);
        assert!(
            pt.findings[0].message.contains(
                "no node selected; 1 more node(s) match its nodeLabels but carry a taint"
            ),
            "{}",
            pt.findings[0].message
        );
        let f = &l.objects.flavors[2];
        assert_eq!(f.name, "passthrough");
        let mut tolerating = f.clone();
        tolerating.tolerations.push(crate::model::pod::Toleration {
            key: Some("gpu".into()),
            operator: Some("Exists".into()),
            value: None,
            effect: None,
        });
        assert_eq!(selects(&tolerating, &tainted), Some(true));
        assert_eq!(selects(f, &tainted), Some(false));
        assert_eq!(selects(f, &node("c", "container", &[])), None);
    }
}

/// Why Kueue holds (or would admit) a workload, as a stable code; explain's cause codes
/// `kueue-*` ([`crate::analysis::diagnosis::CauseCode`]) are these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuotaCause {
    /// Admitted: quota reserved in a flavor (the scheduler decides from here).
    Admitted,
    /// The workload names no LocalQueue, or one (or its ClusterQueue) that does not exist.
    NoQueue,
    /// No resource group of the ClusterQueue covers a requested name: Kueue says
    /// `resource <name> unavailable in ClusterQueue`.
    NameNotCovered,
    /// In every flavor the request exceeds the nominal quota: it never fits without more
    /// quota (`… > maximum capacity (…)`).
    QuotaTooSmall,
    /// A flavor's quota would fit the request, but admitted workloads hold it
    /// (`insufficient unused quota …`).
    QuotaExhausted,
    /// A flavor has the quota free: Kueue admits it at its next attempt.
    Fits,
    /// Admitted (or fitting) in a flavor whose nodes advertise none of a requested GPU
    /// name: Kueue lets it through, the scheduler never places its pods.
    FlavorCannotServe,
}

impl Serialize for QuotaCause {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl QuotaCause {
    /// Every cause of a workload Kueue has not admitted, in this order (serve's
    /// `gpuwl_kueue_workloads_pending` has a series for each).
    pub const WAITING: [QuotaCause; 6] = [
        QuotaCause::NoQueue,
        QuotaCause::NameNotCovered,
        QuotaCause::QuotaTooSmall,
        QuotaCause::QuotaExhausted,
        QuotaCause::Fits,
        QuotaCause::FlavorCannotServe,
    ];

    /// The stable code: `kueue-admitted`, `kueue-no-queue`, `kueue-name-not-covered`,
    /// `kueue-quota-too-small`, `kueue-quota-exhausted`, `kueue-fits`.
    pub fn as_str(self) -> &'static str {
        match self {
            QuotaCause::Admitted => "kueue-admitted",
            QuotaCause::NoQueue => "kueue-no-queue",
            QuotaCause::NameNotCovered => "kueue-name-not-covered",
            QuotaCause::QuotaTooSmall => "kueue-quota-too-small",
            QuotaCause::QuotaExhausted => "kueue-quota-exhausted",
            QuotaCause::Fits => "kueue-fits",
            QuotaCause::FlavorCannotServe => "kueue-flavor-cannot-serve",
        }
    }

    /// Whether Kueue holds the workload (every code but admitted, fits and
    /// flavor-cannot-serve).
    pub fn holds(self) -> bool {
        !matches!(
            self,
            QuotaCause::Admitted | QuotaCause::Fits | QuotaCause::FlavorCannotServe
        )
    }
}

/// How one flavor of the ClusterQueue was judged for the workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorTried {
    /// The flavor.
    pub flavor: String,
    /// Empty when it fits; else why not, as Kueue words it (`insufficient quota for …`).
    pub reason: String,
    /// Whether the flavor's nodes advertise every requested GPU name (`None`: no node data).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nodes_serve: Option<bool>,
}

/// The quota layer's verdict on one workload ([`judge_workload`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct QuotaVerdict {
    /// The workload, `namespace/name`.
    pub workload: String,
    /// Whether Kueue has reserved quota for it (`QuotaReserved` or `Admitted` true).
    pub admitted: bool,
    /// Its cause.
    pub cause: QuotaCause,
    /// One sentence: why.
    pub message: String,
    /// The LocalQueue, `namespace/name`.
    pub local_queue: String,
    /// The ClusterQueue, when the LocalQueue names one that exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_queue: Option<String>,
    /// Kueue's own words: the `QuotaReserved` condition's message (`Admitted`'s when
    /// admitted), when the workload carries one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kueue_message: Option<String>,
    /// The flavors tried, in the ClusterQueue's order.
    pub flavors: Vec<FlavorTried>,
    /// The flavor admitted in (or that fits), per resource name.
    pub flavor: BTreeMap<String, String>,
    /// With [`QuotaCause::QuotaExhausted`]: the admitted workloads holding the quota, as
    /// `namespace/name (<amount> <resource> in flavor <f>)`.
    pub holders: Vec<String>,
    /// The admitted (or fitting) flavor's nodes advertise none of a requested GPU name:
    /// admitted, the pods would wait at the scheduler (the name, the flavor).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unservable: Option<(String, String)>,
}

/// Judges `w` as Kueue's flavor assignment would (kubernetes-sigs/kueue v0.17
/// `pkg/scheduler/flavorassigner/flavorassigner.go` `findFlavorForPodSets`,
/// `fitsResourceQuota`): the LocalQueue's ClusterQueue; per resource group covering the
/// requested names, its flavors in order — each name's request (over all pod sets)
/// against the most the ClusterQueue could take there (its nominal quota, plus what its
/// cohort lends within its `borrowingLimit`: `… > maximum capacity`) and against what is
/// unused now (its own quota and the cohort's, less what admitted workloads reserve,
/// `status.flavorsReservation`: `insufficient unused quota`, see [`capacity`]) — the first
/// flavor where every name fits is the one (a borrowing fit too, unless
/// `flavorFungibility.whenCanBorrow: TryNextFlavor`). `offers` (when nodes were read) says
/// whether that flavor's nodes advertise the GPU names. Not modelled: preemption (Kueue's
/// default is none; a ClusterQueue with `preemption` may admit what this calls exhausted
/// by evicting others), hierarchical cohorts (`kind: Cohort` objects with quota or a
/// parent), fair sharing, partial admission, admission checks, topology, the flavors'
/// `nodeTaints` against the pods' tolerations and their node affinity.
pub fn judge_workload(
    w: &Workload,
    objects: &KueueObjects,
    offers: Option<&[FlavorOffer]>,
) -> QuotaVerdict {
    let mut v = QuotaVerdict {
        workload: w.key(),
        admitted: false,
        cause: QuotaCause::Fits,
        message: String::new(),
        local_queue: format!("{}/{}", w.namespace, w.queue_name),
        cluster_queue: None,
        kueue_message: w
            .condition("QuotaReserved")
            .or(w.condition("Admitted"))
            .map(|c| c.message.clone())
            .filter(|m| !m.is_empty()),
        flavors: Vec::new(),
        flavor: BTreeMap::new(),
        holders: Vec::new(),
        unservable: None,
    };
    let cq = objects
        .local_queue(&w.namespace, &w.queue_name)
        .and_then(|lq| objects.cluster_queue(&lq.cluster_queue));
    let cq = match (w.admitted_to.as_deref(), cq) {
        (Some(name), _) => objects.cluster_queue(name),
        (None, cq) => cq,
    };
    let Some(cq) = cq else {
        v.cause = QuotaCause::NoQueue;
        v.message = format!(
            "LocalQueue {} (or its ClusterQueue) does not exist: Kueue never considers the workload",
            v.local_queue
        );
        return v;
    };
    v.cluster_queue = Some(cq.name.clone());
    if w.is("QuotaReserved") || w.is("Admitted") {
        admitted(w, offers, &mut v);
        return v;
    }
    assign(w, objects, cq, offers, &mut v);
    v
}

fn admitted(w: &Workload, offers: Option<&[FlavorOffer]>, v: &mut QuotaVerdict) {
    v.cause = QuotaCause::Admitted;
    v.admitted = true;
    for a in &w.assignments {
        for (r, f) in &a.flavors {
            v.flavor.insert(r.clone(), f.clone());
        }
    }
    v.message = format!(
        "admitted in ClusterQueue {}{}",
        v.cluster_queue.as_deref().unwrap_or("?"),
        flavors_said(&v.flavor)
    );
    v.unservable = unservable(&v.flavor, offers);
    if v.unservable.is_some() {
        v.cause = QuotaCause::FlavorCannotServe;
    }
}

fn flavors_said(f: &BTreeMap<String, String>) -> String {
    if f.is_empty() {
        return String::new();
    }
    let parts: Vec<String> = f
        .iter()
        .map(|(r, f)| format!("{r} in flavor {f}"))
        .collect();
    format!(" ({})", parts.join(", "))
}

/// The first GPU name of `flavor` whose flavor's nodes advertise none of it.
fn unservable(
    flavor: &BTreeMap<String, String>,
    offers: Option<&[FlavorOffer]>,
) -> Option<(String, String)> {
    let offers = offers?;
    flavor
        .iter()
        .filter(|(r, _)| classify(r).is_gpu())
        .find(|(r, f)| {
            offers
                .iter()
                .find(|o| &&o.flavor == f)
                .is_some_and(|o| o.advertised.get(*r).copied().unwrap_or(0) == 0)
        })
        .map(|(r, f)| (r.clone(), f.clone()))
}

/// What admitted workloads of `cq` reserve of `resource` in `flavor`, in thousandths:
/// the ClusterQueue's `status.flavorsReservation`, else the admitted workloads' totals.
pub(crate) fn reserved(
    objects: &KueueObjects,
    cq: &crate::model::kueue::ClusterQueue,
    flavor: &str,
    resource: &str,
) -> i64 {
    if let Some(r) = cq.reserved.get(flavor).and_then(|m| m.get(resource)) {
        return *r;
    }
    holders(objects, &cq.name, flavor, resource)
        .iter()
        .map(|(_, m)| *m)
        .fold(0, i64::saturating_add)
}

/// The admitted workloads of ClusterQueue `cq` with `resource` in `flavor`, and how much.
pub(crate) fn holders(
    objects: &KueueObjects,
    cq: &str,
    flavor: &str,
    resource: &str,
) -> Vec<(String, i64)> {
    objects
        .workloads
        .iter()
        .filter(|w| {
            w.admitted_to.as_deref() == Some(cq) && (w.is("QuotaReserved") || w.is("Admitted"))
        })
        .filter(|w| {
            w.assignments
                .iter()
                .any(|a| a.flavors.get(resource).map(String::as_str) == Some(flavor))
        })
        .map(|w| (w.key(), w.total_milli(resource)))
        .filter(|(_, m)| *m > 0)
        .collect()
}

/// One (flavor, resource) of a ClusterQueue as Kueue's scheduler cache sees it
/// (kubernetes-sigs/kueue `pkg/cache/scheduler/resource_node.go`, one cohort level), in
/// thousandths.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Capacity {
    /// `nominalQuota`.
    pub nominal: i64,
    /// What the ClusterQueue's admitted workloads reserve now.
    pub used: i64,
    /// `Available`: what it can take now without preempting — its unused quota plus what
    /// its cohort has unused, within its `borrowingLimit` (never below 0).
    pub available: i64,
    /// `PotentialAvailable`: the most it could ever take with no usage anywhere — its
    /// quota plus what the cohort can lend, within its `borrowingLimit`.
    pub potential: i64,
}

/// The `lendingLimit`-guarded part of a quota: `max(0, nominal - lendingLimit)`, kept from
/// the cohort (`resourceNode.localQuota`); 0 without a lending limit.
fn local_quota(q: Option<&crate::model::kueue::ResourceQuota>) -> i64 {
    q.and_then(|q| q.lending_limit_milli.map(|l| (q.nominal_milli - l).max(0)))
        .unwrap_or(0)
}

/// The quota of `resource` in `flavor` in `cq`'s resource groups.
fn quota_of<'a>(
    cq: &'a crate::model::kueue::ClusterQueue,
    flavor: &str,
    resource: &str,
) -> Option<&'a crate::model::kueue::ResourceQuota> {
    cq.groups
        .iter()
        .flat_map(|g| &g.flavors)
        .filter(|f| f.flavor == flavor)
        .flat_map(|f| &f.resources)
        .find(|q| q.name == resource)
}

/// The ClusterQueues of `cq`'s cohort, `cq` included (only `cq` when it has none).
fn cohort_members<'a>(
    objects: &'a KueueObjects,
    cq: &'a crate::model::kueue::ClusterQueue,
) -> Vec<&'a crate::model::kueue::ClusterQueue> {
    match &cq.cohort {
        None => vec![cq],
        Some(c) => objects
            .cluster_queues
            .iter()
            .filter(|m| m.cohort.as_deref() == Some(c))
            .collect(),
    }
}

/// Kueue's `Available` and `PotentialAvailable` of `resource` in `flavor` for `cq`
/// (kubernetes-sigs/kueue `pkg/cache/scheduler/resource_node.go` `available`,
/// `potentialAvailable`, `accumulateFromChild`): without a cohort, the nominal quota less
/// what is reserved; in a cohort (every ClusterQueue with the same `cohortName`, the
/// cohort itself without quota of its own), the cohort's quota is what its members lend
/// (`nominal - max(0, nominal - lendingLimit)` each) and its usage what they use past
/// their guarded part; the ClusterQueue gets its guarded part unused plus the cohort's
/// unused quota, that capped by `nominal - guarded - (used past guarded) +
/// borrowingLimit` when it has a borrowing limit. Cohort objects (`kind: Cohort`, with
/// quota or a parent of their own) are not read: a hierarchy of cohorts is not modelled.
pub(crate) fn capacity(
    objects: &KueueObjects,
    cq: &crate::model::kueue::ClusterQueue,
    flavor: &str,
    resource: &str,
) -> Capacity {
    let q = quota_of(cq, flavor, resource);
    let nominal = q.map_or(0, |q| q.nominal_milli);
    let used = reserved(objects, cq, flavor, resource);
    if cq.cohort.is_none() {
        return Capacity {
            nominal,
            used,
            available: (nominal - used).max(0),
            potential: nominal,
        };
    }
    let local = local_quota(q);
    let (mut subtree, mut cohort_used) = (0i64, 0i64);
    for m in cohort_members(objects, cq) {
        let Some(mq) = quota_of(m, flavor, resource) else {
            continue;
        };
        let ml = local_quota(Some(mq));
        subtree = subtree.saturating_add(mq.nominal_milli - ml);
        cohort_used =
            cohort_used.saturating_add((reserved(objects, m, flavor, resource) - ml).max(0));
    }
    let mut parent = subtree - cohort_used;
    let mut potential = local.saturating_add(subtree);
    if let Some(bl) = q.and_then(|q| q.borrowing_limit_milli) {
        let with_max = (nominal - local) - (used - local).max(0) + bl;
        parent = parent.min(with_max);
        potential = potential.min(nominal.saturating_add(bl));
    }
    Capacity {
        nominal,
        used,
        available: ((local - used).max(0) + parent).max(0),
        potential,
    }
}

/// How one flavor of a resource group came out for the names the group covers.
struct FlavorFit {
    /// Kueue's reasons, joined (empty: it fits).
    reasons: Vec<String>,
    /// The (name, flavor) pairs whose quota other workloads hold.
    exhausted: Vec<(String, String)>,
    /// It fits only by borrowing from the cohort (`usage + request > nominal`).
    borrows: bool,
}

/// One flavor against the requests of one resource group, as `fitsResourceQuota` judges
/// it (kubernetes-sigs/kueue `pkg/scheduler/flavorassigner/flavorassigner.go`): above
/// `PotentialAvailable` never fits (`… > maximum capacity`), above `Available` waits for
/// quota others hold (`insufficient unused quota …, N more needed`).
fn flavor_fit(
    objects: &KueueObjects,
    cq: &crate::model::kueue::ClusterQueue,
    flavor: &str,
    in_group: &[(&str, i64)],
) -> FlavorFit {
    let mut fit = FlavorFit {
        reasons: Vec::new(),
        exhausted: Vec::new(),
        borrows: false,
    };
    if objects.flavor(flavor).is_none() {
        fit.reasons.push(format!("flavor {flavor} not found"));
    }
    for (name, want) in in_group {
        let c = capacity(objects, cq, flavor, name);
        if *want > c.potential {
            fit.reasons.push(format!(
                "insufficient quota for {name} in flavor {flavor}, request {} > maximum capacity {}",
                milli_str(*want),
                milli_str(c.potential)
            ));
        } else if *want > c.available {
            fit.reasons.push(format!(
                "insufficient unused quota for {name} in flavor {flavor}, {} more needed",
                milli_str(want - c.available)
            ));
            fit.exhausted.push((name.to_string(), flavor.to_string()));
        } else if c.used.saturating_add(*want) > c.nominal {
            fit.borrows = true;
        }
    }
    fit
}

/// The flavor assignment of a workload not admitted (see [`judge_workload`]).
fn assign(
    w: &Workload,
    objects: &KueueObjects,
    cq: &crate::model::kueue::ClusterQueue,
    offers: Option<&[FlavorOffer]>,
    v: &mut QuotaVerdict,
) {
    let wanted: Vec<(&str, i64)> = w
        .resources()
        .into_iter()
        .map(|r| (r, w.total_milli(r)))
        .filter(|(_, m)| *m > 0)
        .collect();
    if let Some((r, _)) = wanted.iter().find(|(r, _)| cq.group_of(r).is_none()) {
        v.cause = QuotaCause::NameNotCovered;
        v.message = format!(
            "ClusterQueue {} has no quota on {r} in any flavor (no resource group covers it): Kueue holds the workload (\"resource {r} unavailable in ClusterQueue\")",
            cq.name
        );
        return;
    }
    let mut exhausted: Vec<(String, String)> = Vec::new();
    let mut borrowed: Vec<String> = Vec::new();
    let mut groups_done: Vec<*const crate::model::kueue::ResourceGroup> = Vec::new();
    for (r, _) in &wanted {
        let Some(g) = cq.group_of(r) else { continue };
        if groups_done.contains(&(g as *const _)) {
            continue;
        }
        groups_done.push(g as *const _);
        let in_group: Vec<(&str, i64)> = wanted
            .iter()
            .copied()
            .filter(|(n, _)| g.covered.iter().any(|c| c == n))
            .collect();
        // Kueue's flavor fungibility: the first flavor that fits stops the search, one
        // that fits by borrowing too unless `whenCanBorrow: TryNextFlavor` (then the first
        // borrowing fit is kept in case none fits without borrowing).
        let (mut chosen, mut borrowing_fit) = (None, None);
        for fq in &g.flavors {
            let fit = flavor_fit(objects, cq, &fq.flavor, &in_group);
            exhausted.extend(fit.exhausted.iter().cloned());
            let served = offers.map(|o| {
                let by_name: BTreeMap<String, String> = in_group
                    .iter()
                    .map(|(n, _)| (n.to_string(), fq.flavor.clone()))
                    .collect();
                unservable(&by_name, Some(o)).is_none()
            });
            let fits = fit.reasons.is_empty();
            v.flavors.push(FlavorTried {
                flavor: fq.flavor.clone(),
                reason: fit.reasons.join(", "),
                nodes_serve: served,
            });
            if fits && (!fit.borrows || !cq.try_next_flavor_when_borrowing) {
                chosen = Some((fq.flavor.clone(), fit.borrows));
                break;
            }
            if fits && borrowing_fit.is_none() {
                borrowing_fit = Some((fq.flavor.clone(), true));
            }
        }
        match chosen.or(borrowing_fit) {
            Some((f, borrows)) => {
                for (n, _) in &in_group {
                    v.flavor.insert(n.to_string(), f.clone());
                    if borrows {
                        borrowed.push(format!("{n} in flavor {f}"));
                    }
                }
            }
            None => {
                held(objects, cq, &exhausted, v);
                return;
            }
        }
    }
    v.cause = QuotaCause::Fits;
    v.message = format!(
        "ClusterQueue {} has the quota free{}{}: Kueue admits it at its next attempt",
        cq.name,
        flavors_said(&v.flavor),
        match (&cq.cohort, borrowed.is_empty()) {
            (Some(c), false) => format!(", borrowing from cohort {c} ({})", borrowed.join(", ")),
            _ => String::new(),
        }
    );
    v.unservable = unservable(&v.flavor, offers);
    if v.unservable.is_some() {
        v.cause = QuotaCause::FlavorCannotServe;
    }
}

/// No flavor of a group fits: quota exhausted (with the workloads holding it, in the
/// cohort too) when some flavor's quota would fit were it unused, else too small.
fn held(
    objects: &KueueObjects,
    cq: &crate::model::kueue::ClusterQueue,
    exhausted: &[(String, String)],
    v: &mut QuotaVerdict,
) {
    let cause = if exhausted.is_empty() {
        QuotaCause::QuotaTooSmall
    } else {
        QuotaCause::QuotaExhausted
    };
    v.cause = cause;
    for (name, flavor) in exhausted {
        for m in cohort_members(objects, cq) {
            for (key, milli) in holders(objects, &m.name, flavor, name) {
                let of = if m.name == cq.name {
                    String::new()
                } else {
                    format!(", ClusterQueue {}", m.name)
                };
                v.holders.push(format!(
                    "{key} ({} {name} in flavor {flavor}{of})",
                    milli_str(milli)
                ));
            }
        }
    }
    let tried: Vec<String> = v
        .flavors
        .iter()
        .filter(|f| !f.reason.is_empty())
        .map(|f| f.reason.clone())
        .collect();
    let scope = match &cq.cohort {
        Some(c) => format!(
            "ClusterQueue {}'s quota (with what cohort {c} lends)",
            cq.name
        ),
        None => format!("ClusterQueue {}'s quota", cq.name),
    };
    v.message = match cause {
        QuotaCause::QuotaExhausted => format!(
            "{scope} is held by admitted workloads{}: {}",
            if v.holders.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.holders.join("; "))
            },
            tried.join("; ")
        ),
        _ => format!(
            "the request is larger than {scope} in every flavor: {}",
            tried.join("; ")
        ),
    };
}

#[cfg(test)]
mod quota_tests {
    use super::*;
    use crate::decode::kueue::read_str;

    const QUEUES: &str = r#"
kind: List
items:
- {kind: ResourceFlavor, metadata: {name: container}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: container}}}
- {kind: ResourceFlavor, metadata: {name: vm-passthrough}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: vm-passthrough}}}
- kind: ClusterQueue
  metadata: {name: lab-gpus}
  spec:
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: container, resources: [{name: nvidia.com/gpu, nominalQuota: 4}]}
      - {name: vm-passthrough, resources: [{name: nvidia.com/gpu, nominalQuota: 2}]}
  status:
    flavorsReservation:
    - {name: container, resources: [{name: nvidia.com/gpu, total: "3"}]}
- {kind: LocalQueue, metadata: {name: lab, namespace: ml}, spec: {clusterQueue: lab-gpus}}
- kind: Workload
  metadata: {name: holder, namespace: ml}
  spec:
    queueName: lab
    podSets: [{name: main, count: 3, template: {spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: "1"}}}]}}}]
  status:
    conditions: [{type: QuotaReserved, status: "True", reason: QuotaReserved, message: "Quota reserved in ClusterQueue lab-gpus"}, {type: Admitted, status: "True", reason: Admitted, message: ok}]
    admission: {clusterQueue: lab-gpus, podSetAssignments: [{name: main, flavors: {nvidia.com/gpu: container}}]}
"#;

    fn wl(resource: &str, count: i64) -> Workload {
        let mut requests = BTreeMap::new();
        requests.insert(resource.to_owned(), 1000);
        Workload {
            namespace: "ml".into(),
            name: "w".into(),
            queue_name: "lab".into(),
            pod_sets: vec![crate::model::kueue::PodSet {
                name: "main".into(),
                count,
                requests,
            }],
            ..Workload::default()
        }
    }

    fn offers() -> Vec<FlavorOffer> {
        let mut c = FlavorOffer {
            flavor: "container".into(),
            ..FlavorOffer::default()
        };
        c.advertised.insert("nvidia.com/gpu".into(), 4);
        let mut p = FlavorOffer {
            flavor: "vm-passthrough".into(),
            ..FlavorOffer::default()
        };
        p.advertised.insert("nvidia.com/GA102GL_A10".into(), 2);
        vec![c, p]
    }

    #[test]
    fn a_name_no_group_covers_is_held_as_kueue_says() {
        let o = read_str(QUEUES, "q.yaml").unwrap();
        let v = judge_workload(&wl("nvidia.com/GA102GL_A10", 1), &o, None);
        assert_eq!(v.cause, QuotaCause::NameNotCovered);
        assert!(
            v.message
                .contains("resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue"),
            "{}",
            v.message
        );
        assert_eq!(v.cluster_queue.as_deref(), Some("lab-gpus"));
    }

    #[test]
    fn one_gpu_fits_in_container_two_spill_into_the_misnamed_passthrough_flavor() {
        let o = read_str(QUEUES, "q.yaml").unwrap();
        let off = offers();
        let one = judge_workload(&wl("nvidia.com/gpu", 1), &o, Some(&off));
        assert_eq!(one.cause, QuotaCause::Fits);
        assert_eq!(one.flavor["nvidia.com/gpu"], "container");
        assert_eq!(one.unservable, None);
        // 3 of 4 reserved: two more do not fit in container, and go to vm-passthrough,
        // whose nodes advertise no nvidia.com/gpu.
        let two = judge_workload(&wl("nvidia.com/gpu", 2), &o, Some(&off));
        assert_eq!(two.cause, QuotaCause::FlavorCannotServe);
        assert_eq!(two.flavor["nvidia.com/gpu"], "vm-passthrough");
        assert_eq!(
            two.flavors[0].reason,
            "insufficient unused quota for nvidia.com/gpu in flavor container, 1 more needed"
        );
        assert_eq!(
            two.unservable,
            Some(("nvidia.com/gpu".into(), "vm-passthrough".into()))
        );
    }

    #[test]
    fn exhausted_names_the_holders_and_too_small_says_maximum_capacity() {
        let o = read_str(QUEUES, "q.yaml").unwrap();
        let three = judge_workload(&wl("nvidia.com/gpu", 3), &o, None);
        assert_eq!(three.cause, QuotaCause::QuotaExhausted);
        assert_eq!(
            three.holders,
            ["ml/holder (3 nvidia.com/gpu in flavor container)"]
        );
        let five = judge_workload(&wl("nvidia.com/gpu", 5), &o, None);
        assert_eq!(five.cause, QuotaCause::QuotaTooSmall);
        assert!(
            five.message.contains("request 5 > maximum capacity 4"),
            "{}",
            five.message
        );
        let mut lost = wl("nvidia.com/gpu", 1);
        lost.queue_name = "nope".into();
        assert_eq!(judge_workload(&lost, &o, None).cause, QuotaCause::NoQueue);
        let holder = &o.workloads[0];
        let v = judge_workload(holder, &o, Some(&offers()));
        assert_eq!(v.cause, QuotaCause::Admitted);
        assert!(v.admitted);
        assert_eq!(
            v.message,
            "admitted in ClusterQueue lab-gpus (nvidia.com/gpu in flavor container)"
        );
    }
}

#[cfg(test)]
mod cohort_tests {
    use super::*;
    use crate::decode::kueue::read_str;

    /// Two ClusterQueues in cohort `team`: `a` (2 in container, may borrow 1), `b` (2 in
    /// container, lends at most 1); `a`'s one admitted workload uses its 2.
    const COHORT: &str = r#"
kind: List
items:
- {kind: ResourceFlavor, metadata: {name: container}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: container}}}
- {kind: ResourceFlavor, metadata: {name: spare}, spec: {nodeLabels: {nvidia.com/gpu.workload.config: container}}}
- kind: ClusterQueue
  metadata: {name: a}
  spec:
    cohortName: team
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: container, resources: [{name: nvidia.com/gpu, nominalQuota: 2, borrowingLimit: 1}]}
- kind: ClusterQueue
  metadata: {name: b}
  spec:
    cohortName: team
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: container, resources: [{name: nvidia.com/gpu, nominalQuota: 2, lendingLimit: 1}]}
- kind: ClusterQueue
  metadata: {name: c}
  spec:
    cohortName: team
    flavorFungibility: {whenCanBorrow: TryNextFlavor}
    resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
      - {name: container, resources: [{name: nvidia.com/gpu, nominalQuota: 0}]}
      - {name: spare, resources: [{name: nvidia.com/gpu, nominalQuota: 1}]}
- {kind: LocalQueue, metadata: {name: a, namespace: ml}, spec: {clusterQueue: a}}
- {kind: LocalQueue, metadata: {name: b, namespace: ml}, spec: {clusterQueue: b}}
- {kind: LocalQueue, metadata: {name: c, namespace: ml}, spec: {clusterQueue: c}}
- kind: Workload
  metadata: {name: first, namespace: ml}
  spec:
    queueName: a
    podSets: [{name: main, count: 2, template: {spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: "1"}}}]}}}]
  status:
    conditions: [{type: QuotaReserved, status: "True", reason: QuotaReserved, message: ok}]
    admission: {clusterQueue: a, podSetAssignments: [{name: main, flavors: {nvidia.com/gpu: container}}]}
"#;

    fn wl(queue: &str, count: i64) -> Workload {
        Workload {
            namespace: "ml".into(),
            name: "w".into(),
            queue_name: queue.into(),
            pod_sets: vec![crate::model::kueue::PodSet {
                name: "main".into(),
                count,
                requests: [("nvidia.com/gpu".to_owned(), 1000)].into(),
            }],
            ..Workload::default()
        }
    }

    #[test]
    fn borrowing_within_the_limit_fits_past_it_is_exhausted_or_too_small() {
        let o = read_str(COHORT, "q.yaml").unwrap();
        let a = o.cluster_queue("a").unwrap();
        // b lends 1 of its 2 (the other is guarded), c lends nothing; a has used its 2.
        let cap = capacity(&o, a, "container", "nvidia.com/gpu");
        assert_eq!((cap.available, cap.potential), (1000, 3000), "{cap:?}");
        let one = judge_workload(&wl("a", 1), &o, None);
        assert_eq!(one.cause, QuotaCause::Fits, "{}", one.message);
        assert!(
            one.message
                .ends_with("borrowing from cohort team (nvidia.com/gpu in flavor container): Kueue admits it at its next attempt"),
            "{}",
            one.message
        );
        let two = judge_workload(&wl("a", 2), &o, None);
        assert_eq!(two.cause, QuotaCause::QuotaExhausted);
        assert_eq!(
            two.flavors[0].reason,
            "insufficient unused quota for nvidia.com/gpu in flavor container, 1 more needed"
        );
        assert_eq!(
            two.holders,
            ["ml/first (2 nvidia.com/gpu in flavor container)"]
        );
        let four = judge_workload(&wl("a", 4), &o, None);
        assert_eq!(four.cause, QuotaCause::QuotaTooSmall);
        assert!(
            four.message.contains("request 4 > maximum capacity 3"),
            "{}",
            four.message
        );
    }

    #[test]
    fn a_lender_finds_its_guarded_part_and_a_peer_names_the_borrower_as_holder() {
        let mut o = read_str(COHORT, "q.yaml").unwrap();
        // a borrows one more: 3 used in all, the cohort's lendable 3 are gone.
        o.workloads[0].pod_sets[0].count = 3;
        let b = judge_workload(&wl("b", 2), &o, None);
        assert_eq!(b.cause, QuotaCause::QuotaExhausted, "{}", b.message);
        assert_eq!(
            b.holders,
            ["ml/first (3 nvidia.com/gpu in flavor container, ClusterQueue a)"]
        );
        assert_eq!(
            judge_workload(&wl("b", 1), &o, None).cause,
            QuotaCause::Fits
        );
    }

    #[test]
    fn try_next_flavor_when_borrowing_prefers_a_flavor_of_its_own() {
        let o = read_str(COHORT, "q.yaml").unwrap();
        let c = judge_workload(&wl("c", 1), &o, None);
        assert_eq!(c.cause, QuotaCause::Fits);
        assert_eq!(c.flavor["nvidia.com/gpu"], "spare");
        // Without TryNextFlavor the borrowing fit in container stops the search.
        let mut o2 = o.clone();
        o2.cluster_queues
            .iter_mut()
            .for_each(|q| q.try_next_flavor_when_borrowing = false);
        let c = judge_workload(&wl("c", 1), &o2, None);
        assert_eq!(c.flavor["nvidia.com/gpu"], "container");
    }
}

/// The Workload of `pod` (owned by it: Kueue's pod integration, `Pod/<name>`) or of its
/// owner (`Job/<name>`…), among `objects`' workloads in the pod's namespace.
pub fn workload_of<'a>(
    objects: &'a KueueObjects,
    namespace: &str,
    owner: &str,
) -> Option<&'a Workload> {
    objects
        .workloads
        .iter()
        .find(|w| w.namespace == namespace && w.owner.as_deref() == Some(owner))
}

/// What a relabel does to the quota layer on one node: the Kueue flavors that select it
/// before and after its workload label becomes `value` ([`selects`]), and the admitted
/// workloads of the flavors it leaves (their pods keep the left flavor's node selector:
/// one that restarts cannot come back to this node).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FlavorMove {
    /// The node.
    pub node: String,
    /// Flavors that select it now and not after.
    pub leaves: Vec<String>,
    /// Flavors that select it after and not now.
    pub joins: Vec<String>,
    /// Admitted workloads (`namespace/name`) with a resource in a flavor it leaves.
    pub admitted_in_left: Vec<String>,
}

impl FlavorMove {
    /// One sentence, e.g. `Kueue: lab-node-1 leaves flavor vm-passthrough and joins flavor
    /// container; admitted in vm-passthrough: gpu-kueue/job-a`; `None` when nothing moves.
    pub fn sentence(&self) -> Option<String> {
        if self.leaves.is_empty() && self.joins.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        if !self.leaves.is_empty() {
            parts.push(format!("leaves flavor {}", self.leaves.join(", ")));
        }
        if !self.joins.is_empty() {
            parts.push(format!("joins flavor {}", self.joins.join(", ")));
        }
        let mut s = format!("Kueue: {} {}", self.node, parts.join(" and "));
        if !self.admitted_in_left.is_empty() {
            s.push_str(&format!(
                "; workloads admitted in the flavor it leaves (their pods keep its node selector, so none comes back to this node): {}",
                self.admitted_in_left.join(", ")
            ));
        }
        Some(s)
    }
}

/// The [`FlavorMove`] of setting `node`'s label `key` to `value`.
pub fn relabel_moves(
    objects: &KueueObjects,
    node: &NodeInfo,
    key: &str,
    value: &str,
) -> FlavorMove {
    let mut after = node.clone();
    after.labels.insert(key.to_owned(), value.to_owned());
    let mut m = FlavorMove {
        node: node.name.clone(),
        ..FlavorMove::default()
    };
    for f in &objects.flavors {
        let (was, is) = (
            selects(f, node) == Some(true),
            selects(f, &after) == Some(true),
        );
        if was && !is {
            m.leaves.push(f.name.clone());
        }
        if is && !was {
            m.joins.push(f.name.clone());
        }
    }
    m.admitted_in_left = objects
        .workloads
        .iter()
        .filter(|w| w.is("QuotaReserved") || w.is("Admitted"))
        .filter(|w| {
            w.assignments
                .iter()
                .any(|a| a.flavors.values().any(|f| m.leaves.contains(f)))
        })
        .map(Workload::key)
        .collect();
    m
}

/// An admitted workload whose pool goes with a relabel: the flavor it was admitted in
/// advertised the GPU name before and advertises none of it after ([`lost_pools`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LostPool {
    /// The Workload, `namespace/name`.
    pub workload: String,
    /// The flavor it was admitted in.
    pub flavor: String,
    /// The GPU name it was admitted for there.
    pub resource: String,
    /// Units of the name the flavor's nodes advertise before the relabel.
    pub advertised_before: i64,
}

impl LostPool {
    /// One sentence, e.g. `Kueue: gpu-kueue/job-a was admitted for nvidia.com/gpu in flavor
    /// container, whose nodes advertise 4 of it now and none after the relabel: …`.
    pub fn sentence(&self) -> String {
        format!(
            "Kueue: {} was admitted for {} in flavor {}, whose nodes advertise {} of it now and none after the relabel: its pods keep the flavor's node selector, and one that restarts waits at the scheduler (its quota stays reserved)",
            self.workload, self.resource, self.flavor, self.advertised_before
        )
    }
}

/// The quota layer's side of a relabel (`whatif relabel`, `plan`): per relabelled node the
/// flavors it leaves and joins ([`relabel_moves`]), and the admitted workloads that lose
/// their pool ([`lost_pools`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RelabelQuota {
    /// Per relabelled node (only those that leave or join a flavor).
    pub moves: Vec<FlavorMove>,
    /// Admitted workloads whose flavor's nodes stop advertising a name they were admitted
    /// for.
    pub lose_pool: Vec<LostPool>,
}

impl RelabelQuota {
    /// Its sentences, moves first ([`FlavorMove::sentence`], [`LostPool::sentence`]).
    pub fn sentences(&self) -> Vec<String> {
        self.moves
            .iter()
            .filter_map(FlavorMove::sentence)
            .chain(self.lose_pool.iter().map(LostPool::sentence))
            .collect()
    }
}

/// The admitted workloads (quota reserved, not finished) whose assignment puts a GPU name
/// in a flavor whose nodes advertise some of it in `before` and none in `after` (the
/// flavors' offers over the nodes before and after a relabel, [`QuotaLayer::of_nodes`]).
pub fn lost_pools(
    objects: &KueueObjects,
    before: &[FlavorOffer],
    after: &[FlavorOffer],
) -> Vec<LostPool> {
    let units = |offers: &[FlavorOffer], flavor: &str, resource: &str| {
        offers
            .iter()
            .find(|o| o.flavor == flavor)
            .and_then(|o| o.advertised.get(resource).copied())
            .unwrap_or(0)
    };
    let mut out = Vec::new();
    for w in objects
        .workloads
        .iter()
        .filter(|w| (w.is("QuotaReserved") || w.is("Admitted")) && !w.is("Finished"))
    {
        let assigned: BTreeSet<(&String, &String)> = w
            .assignments
            .iter()
            .flat_map(|a| &a.flavors)
            .filter(|(r, _)| classify(r).is_gpu())
            .collect();
        for (resource, flavor) in assigned {
            let was = units(before, flavor, resource);
            if was > 0 && units(after, flavor, resource) == 0 {
                out.push(LostPool {
                    workload: w.key(),
                    flavor: flavor.clone(),
                    resource: resource.clone(),
                    advertised_before: was,
                });
            }
        }
    }
    out
}

/// [`RelabelQuota`] of relabelling `relabels` (node, new workload config) among `before`,
/// the nodes after being `after` (their labels and advertised names as the relabel leaves
/// them).
pub fn relabel_quota(
    objects: &KueueObjects,
    before: &[NodeInfo],
    after: &[NodeInfo],
    relabels: &[(String, String)],
    policy: Option<&ClusterPolicy>,
) -> RelabelQuota {
    let moves = relabels
        .iter()
        .filter_map(|(node, value)| {
            let n = before.iter().find(|n| &n.name == node)?;
            let m = relabel_moves(objects, n, crate::model::workload::LABEL_KEY, value);
            m.sentence().map(|_| m)
        })
        .collect();
    let was = QuotaLayer::of_nodes(objects, before, policy);
    let is = QuotaLayer::of_nodes(objects, after, policy);
    RelabelQuota {
        moves,
        lose_pool: lost_pools(objects, was.offers(), is.offers()),
    }
}

#[cfg(test)]
mod relabel_tests {
    use super::*;
    use crate::decode::kueue::read_str;

    #[test]
    fn relabelling_the_passthrough_node_moves_it_between_flavors() {
        let text = format!(
            "{}\n- kind: Workload\n  metadata: {{name: held-gpu, namespace: ml}}\n  spec: {{queueName: lab}}\n  status:\n    conditions: [{{type: QuotaReserved, status: \"True\"}}]\n    admission: {{clusterQueue: lab-gpus, podSetAssignments: [{{name: main, flavors: {{nvidia.com/gpu: vm-passthrough}}}}]}}\n",
            include_str!("../../../../tests/data/kueue/kueue.yaml").trim_end()
        );
        let o = read_str(&text, "lab.yaml").unwrap();
        let mut n = NodeInfo::named("lab-node-1");
        n.labels.insert(
            "nvidia.com/gpu.workload.config".into(),
            "vm-passthrough".into(),
        );
        let m = relabel_moves(&o, &n, "nvidia.com/gpu.workload.config", "container");
        assert_eq!(m.leaves, ["vm-passthrough"]);
        assert_eq!(m.joins, ["container"]);
        assert_eq!(m.admitted_in_left, ["ml/held-gpu"]);
        assert_eq!(
            m.sentence().unwrap(),
            "Kueue: lab-node-1 leaves flavor vm-passthrough and joins flavor container; workloads admitted in the flavor it leaves (their pods keep its node selector, so none comes back to this node): ml/held-gpu"
        );
        let same = relabel_moves(&o, &n, "nvidia.com/gpu.workload.config", "vm-passthrough");
        assert_eq!(same.sentence(), None);
    }

    /// The lab's container node relabelled to vm-passthrough: the Job admitted in flavor
    /// container for nvidia.com/gpu loses its pool (its only node advertises the
    /// passthrough name after); the node leaves container and joins vm-passthrough.
    #[test]
    fn a_workload_admitted_in_a_flavor_whose_nodes_stop_advertising_loses_its_pool() {
        let text = format!(
            "{}\n- kind: Workload\n  metadata: {{name: job-a, namespace: gpu-kueue}}\n  spec: {{queueName: lab}}\n  status:\n    conditions: [{{type: QuotaReserved, status: \"True\"}}, {{type: Admitted, status: \"True\"}}]\n    admission: {{clusterQueue: lab-gpus, podSetAssignments: [{{name: main, flavors: {{nvidia.com/gpu: container}}}}]}}\n",
            include_str!("../../../../tests/data/kueue/kueue.yaml").trim_end()
        );
        let o = read_str(&text, "lab.yaml").unwrap();
        let node = |workload: &str, res: &str| {
            let mut n = NodeInfo::named("lab-node-0");
            n.labels
                .insert("nvidia.com/gpu.workload.config".into(), workload.into());
            n.allocatable = Some([(res.to_owned(), "4".to_owned())].into_iter().collect());
            n.capacity = n.allocatable.clone().unwrap();
            n
        };
        let before = [node("container", "nvidia.com/gpu")];
        let after = [node("vm-passthrough", "nvidia.com/GA102GL_A10")];
        let q = relabel_quota(
            &o,
            &before,
            &after,
            &[("lab-node-0".into(), "vm-passthrough".into())],
            None,
        );
        assert_eq!(q.moves.len(), 1);
        assert_eq!(q.moves[0].leaves, ["container"]);
        assert_eq!(q.moves[0].joins, ["vm-passthrough"]);
        assert_eq!(
            q.lose_pool,
            [LostPool {
                workload: "gpu-kueue/job-a".into(),
                flavor: "container".into(),
                resource: "nvidia.com/gpu".into(),
                advertised_before: 4,
            }]
        );
        assert!(
            q.sentences()[1].starts_with("Kueue: gpu-kueue/job-a was admitted for nvidia.com/gpu in flavor container, whose nodes advertise 4 of it now and none after the relabel"),
            "{:?}",
            q.sentences()
        );
        // Relabelled to what it is: nothing moves, nothing is lost.
        let same = relabel_quota(
            &o,
            &before,
            &before,
            &[("lab-node-0".into(), "container".into())],
            None,
        );
        assert_eq!(same, RelabelQuota::default());
    }
}
