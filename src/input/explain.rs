//! `gpuwl explain` on the live cluster: the object and everything its explanation reads, listed at
//! once (each call with the client's timeouts), then the same analysis as on files.

use std::collections::BTreeMap;

use serde_json::json;

use crate::input::{self, virt};
use gpuwl_core::analysis::explain::quota;
use gpuwl_core::analysis::explain::{self, Explanation, Inputs};
use gpuwl_core::analysis::explain_scope::{self, PodScope};
use gpuwl_core::analysis::kueue;
use gpuwl_core::decode::snapshot::Snapshot;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::dra::DraSource;
use gpuwl_core::model::kueue::{ADMISSION_GATE, KueueObjects, QUEUE_LABEL};
use gpuwl_core::model::operand::{self, OperandsByNode};
use gpuwl_core::model::pod::ObjectKind;
use gpuwl_core::model::pod::PodInfo;

/// The cluster's side of a live explanation: nodes, pods (VM launchers marked with their
/// VM), KubeVirt CR, ClusterPolicy, DRA objects and the GPU Operator's operand pods.
struct Cluster {
    snapshot: Snapshot,
    operands: Option<OperandsByNode>,
}

impl Cluster {
    /// Reads it beside `object` (the object's own read, run at the same time).
    ///
    /// Errors: `object`'s; [`gpuwl_core::error::Error::Runtime`] when the API cannot be reached.
    async fn read_with<T>(
        client: &kube::Client,
        object: impl std::future::Future<Output = Result<T>>,
    ) -> Result<(T, Cluster)> {
        // The snapshot marks VM launchers with their VM itself (how a holding VM is
        // stopped).
        let (object, snapshot, operands) = futures::try_join!(
            object,
            input::snapshot::read(client, true),
            // Operand pods unreadable (forbidden, timed out): explained without them.
            async {
                Ok(input::operands::list(client)
                    .await
                    .ok()
                    .map(operand::by_node))
            }
        )?;
        Ok((object, Cluster { snapshot, operands }))
    }

    /// Reads pod `namespace/name` and what its explanation needs: the nodes and the
    /// snapshot's other parts first, then the pods
    /// [`explain_scope::pods_to_read`] says the explanation can depend on (every pod, or
    /// those bound to the nodes it names and those bound to none, with the operand pods
    /// among them: [`input::pods::list_on_nodes`]).
    ///
    /// Errors: [`gpuwl_core::error::Error::Input`] when the pod does not exist;
    /// [`gpuwl_core::error::Error::Runtime`] when the API cannot be reached.
    async fn read_for_pod(
        client: &kube::Client,
        namespace: &str,
        name: &str,
    ) -> Result<(PodInfo, Cluster)> {
        let (pod, nodes, parts) = futures::try_join!(
            input::pods::get_pod(client, namespace, name),
            input::live::list_nodes(client),
            async { Ok(input::snapshot::read_parts(client, true).await) }
        )?;
        let (pods, operands) = match explain_scope::pods_to_read(&pod, &nodes) {
            PodScope::All(_) => {
                let (listed, finished) = futures::join!(
                    input::pods::list_pods_with_operands(client),
                    input::operands::list_finished(client)
                );
                let (pods, listed) = listed?;
                // Operand pods unreadable (forbidden, timed out): explained without them.
                let operands = input::operands::merge(listed, finished).ok();
                (pods, operands.map(operand::by_node))
            }
            PodScope::Nodes(on) => {
                let (pods, operands) = input::pods::list_on_nodes(client, &on).await?;
                (pods, Some(operand::by_node(operands)))
            }
        };
        let snapshot = parts.finish(client, nodes, pods).await?;
        Ok((pod, Cluster { snapshot, operands }))
    }

    fn inputs(&self) -> Inputs<'_> {
        let c = &self.snapshot;
        Inputs {
            operand_pods: self.operands.as_ref(),
            nodes: Some(&c.nodes),
            pods: Some(&c.pods),
            kubevirt: c.kubevirt.as_ref(),
            cluster_policy: c.policy.policy(),
            dra: matches!(c.dra_source, DraSource::Cluster).then_some(&c.dra),
        }
    }
}

/// Explains pod `namespace/name` on the live cluster ([`explain::explain`]).
///
/// Errors: [`gpuwl_core::error::Error::Input`] when the pod does not exist;
/// [`gpuwl_core::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Explanation> {
    let (pod, c) = Cluster::read_for_pod(client, namespace, name).await?;
    let mut e = explain::explain(&pod, c.inputs())?;
    // A pod Kueue's pod integration holds (its admission gate): the quota layer first.
    let kueue_managed = pod.scheduling_gates.iter().any(|g| g == ADMISSION_GATE);
    if kueue_managed
        && pod.node_name.is_none()
        && let Some(k) = &c.snapshot.kueue
        && let Some(w) = kueue::workload_of(k, namespace, &format!("Pod/{name}"))
    {
        let offers = flavor_offers(&c.snapshot, k);
        quota::with_quota(&mut e, kueue::judge_workload(w, k, Some(&offers)), "pod");
    }
    Ok(e)
}

/// What each Kueue flavor's nodes offer, from the snapshot's nodes (check's GPU-node
/// evidence and pools).
fn flavor_offers(s: &Snapshot, k: &KueueObjects) -> Vec<kueue::FlavorOffer> {
    kueue::QuotaLayer::of_nodes(k, &s.nodes, s.policy.policy())
        .offers()
        .to_vec()
}

/// The pod a Job's template makes (`metadata.name` the Job's), with `selector` added to
/// its node selector (a Kueue flavor's `nodeLabels`): what explain judges for a Job.
///
/// Errors: [`gpuwl_core::error::Error::Runtime`] when the template is not a pod spec.
pub(crate) fn job_pod(
    job: &serde_json::Value,
    selector: &BTreeMap<String, String>,
) -> Result<PodInfo> {
    let mut spec = job
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    for (k, v) in selector {
        spec["nodeSelector"][k] = json!(v);
    }
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": job.pointer("/metadata/name").cloned().unwrap_or_default(),
                     "namespace": job.pointer("/metadata/namespace").cloned().unwrap_or_default(),
                     "labels": job.pointer("/spec/template/metadata/labels").cloned().unwrap_or_else(|| json!({}))},
        "spec": spec, "status": {"phase": "Pending"}});
    gpuwl_core::decode::pods::from_object(&pod)
        .map_err(|e| Error::failed("reading the Job's pod template", e))
}

/// Explains Job `namespace/name` as Kueue and the scheduler see it: its Workload judged by
/// the quota layer ([`kueue::judge_workload`]: LocalQueue, ClusterQueue, Kueue's message,
/// the flavors tried), and its first pod (by name) when it has one, else the pod its
/// template makes, with the admitted (or fitting) flavor's `nodeLabels` as node selector,
/// explained against the cluster: what would hold it after admission
/// ([`quota::with_quota`]).
///
/// Errors: [`gpuwl_core::error::Error::Input`] when the Job does not exist or Kueue does not
/// manage it (no Workload); [`gpuwl_core::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster_job(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Explanation> {
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(client.clone(), namespace);
    let get = async {
        match jobs.get_opt(name).await {
            Ok(Some(j)) => serde_json::to_value(&j)
                .map_err(|e| Error::failed(format!("reading Job {namespace}/{name}"), e)),
            Ok(None) => Err(Error::Input(format!("Job {namespace}/{name} not found"))),
            Err(e) => Err(crate::input::live::api_error(
                &format!("get Job {namespace}/{name}"),
                &e,
            )),
        }
    };
    let (job, c) = Cluster::read_with(client, get).await?;
    let Some(k) = &c.snapshot.kueue else {
        return Err(Error::Input(format!(
            "Job {namespace}/{name}: Kueue is not installed (no kueue.x-k8s.io objects): explain its pods instead"
        )));
    };
    let Some(w) = kueue::workload_of(k, namespace, &format!("Job/{name}")) else {
        return Err(Error::Input(format!(
            "Job {namespace}/{name}: no Kueue Workload owns it (is it labelled {QUEUE_LABEL}?)"
        )));
    };
    let offers = flavor_offers(&c.snapshot, k);
    let v = kueue::judge_workload(w, k, Some(&offers));
    // The flavor admitted in (or that fits): its nodeLabels, as Kueue injects them.
    let mut selector = BTreeMap::new();
    if let Some(f) = v.flavor.values().next().and_then(|f| k.flavor(f)) {
        selector.extend(f.node_labels.clone());
    }
    // A Job with pods (admitted): its first pod as it is; else the pod its template makes.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), namespace);
    let first = pods
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("batch.kubernetes.io/job-name={name}")),
        )
        .await
        .map_err(|e| {
            crate::input::live::api_error(&format!("list the pods of Job {namespace}/{name}"), &e)
        })?
        .items
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .min();
    let running = first.and_then(|n| {
        c.snapshot
            .pods
            .iter()
            .find(|p| p.namespace == namespace && p.name == n)
            .cloned()
    });
    let mut e = match running {
        Some(p) => explain::explain(&p, c.inputs())?,
        None => {
            let mut e = explain::explain(&job_pod(&job, &selector)?, c.inputs())?;
            e.pod = format!("{namespace}/{name} (Job, its pod template)");
            if let Some(n) = job
                .pointer("/status/succeeded")
                .and_then(serde_json::Value::as_i64)
                && n > 0
            {
                e.notes.push(format!(
                    "the Job has finished ({n} pod(s) succeeded): its pod template is judged as if it ran again"
                ));
            }
            e
        }
    };
    quota::with_quota(&mut e, v, "Job");
    Ok(e)
}

/// Explains VM or VMI (`kind`) `namespace/name` with its VMI and launcher pod
/// ([`virt::read`]) on the live cluster ([`explain::vm::explain_vm`]).
///
/// Errors: [`gpuwl_core::error::Error::Input`] when the object does not exist or KubeVirt is not
/// installed; [`gpuwl_core::error::Error::Runtime`] when the API cannot be reached.
pub async fn from_cluster_vm(
    client: &kube::Client,
    kind: ObjectKind,
    namespace: &str,
    name: &str,
) -> Result<Explanation> {
    let (objects, c) =
        Cluster::read_with(client, virt::read(client, kind, namespace, name)).await?;
    explain::vm::explain_vm(&objects, c.inputs())
}
