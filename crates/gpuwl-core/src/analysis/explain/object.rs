//! `explain` on an object named on the live cluster ([`Object`]: a pod, a VM or VMI, a Job
//! Kueue manages), against the records read with it: the explanation
//! ([`super::explain`], [`super::vm::explain_vm`]) with Kueue's quota layer in front
//! ([`super::quota::with_quota`]) where Kueue holds the workload.

use std::collections::BTreeMap;

use serde_json::json;

use crate::analysis::explain::{self, Explanation, Inputs, quota};
use crate::analysis::kueue::{self, FlavorOffer, QuotaLayer};
use crate::decode::object::{JobRead, Object};
use crate::error::{Error, Result};
use crate::model::kueue::{ADMISSION_GATE, KueueObjects, QUEUE_LABEL};
use crate::model::pod::PodInfo;

/// Explains `object` against `inputs`, with Kueue's objects (`kueue`, when read) for the
/// quota layer: a pod Kueue's pod integration holds (its admission gate, unbound) gets its
/// Workload's verdict in front; a Job is explained as Kueue and the scheduler see it
/// ([`explain_job`]); a VM or VMI through its VMI and launcher pod.
///
/// Errors: as [`explain::explain`] and [`explain::vm::explain_vm`]; for a Job, as
/// [`explain_job`].
pub fn explain_object(
    object: Object,
    inputs: Inputs<'_>,
    kueue: Option<&KueueObjects>,
) -> Result<Explanation> {
    match object {
        Object::Pod(pod) => explain_pod(&pod, inputs, kueue),
        Object::Virt(objects) => explain::vm::explain_vm(&objects, inputs),
        Object::Job(job) => explain_job(job, inputs, kueue),
    }
}

/// Explains `pod` ([`explain::explain`]); when Kueue's pod integration holds it (its
/// admission gate, unbound) and its Workload is among `kueue`, the quota layer first.
fn explain_pod(
    pod: &PodInfo,
    inputs: Inputs<'_>,
    kueue: Option<&KueueObjects>,
) -> Result<Explanation> {
    let mut e = explain::explain(pod, inputs)?;
    let kueue_managed = pod.scheduling_gates.iter().any(|g| g == ADMISSION_GATE);
    if kueue_managed
        && pod.node_name.is_none()
        && let Some(k) = kueue
        && let Some(w) = kueue::workload_of(k, &pod.namespace, &format!("Pod/{}", pod.name))
    {
        let offers = flavor_offers(&inputs, k);
        quota::with_quota(&mut e, kueue::judge_workload(w, k, Some(&offers)), "pod");
    }
    Ok(e)
}

/// What each Kueue flavor's nodes offer, from the nodes of `inputs` (check's GPU-node
/// evidence and pools).
fn flavor_offers(inputs: &Inputs<'_>, k: &KueueObjects) -> Vec<FlavorOffer> {
    QuotaLayer::of_nodes(k, inputs.nodes.unwrap_or_default(), inputs.cluster_policy)
        .offers()
        .to_vec()
}

/// The pod a Job's template makes (`metadata.name` the Job's), with `selector` added to
/// its node selector (a Kueue flavor's `nodeLabels`): what explain judges for a Job.
///
/// Errors: [`Error::Runtime`] when the template is not a pod spec.
fn job_pod(job: &serde_json::Value, selector: &BTreeMap<String, String>) -> Result<PodInfo> {
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
    crate::decode::pods::from_object(&pod)
        .map_err(|e| Error::failed("reading the Job's pod template", e))
}

/// Explains Job `j` as Kueue and the scheduler see it: its Workload judged by the quota
/// layer ([`kueue::judge_workload`]: LocalQueue, ClusterQueue, Kueue's message, the
/// flavors tried), and its first pod (by name) when it has one and `inputs` hold it, else
/// the pod its template makes, with the admitted (or fitting) flavor's `nodeLabels` as node
/// selector, explained against `inputs`: what would hold it after admission
/// ([`quota::with_quota`]).
///
/// Errors: [`Error::Input`] when Kueue is not installed (`kueue` is `None`) or manages no
/// Workload of the Job; the error listing the Job's pods, after those
/// ([`JobRead::first_pod`]); as [`explain::explain`] otherwise.
pub fn explain_job(
    j: JobRead,
    inputs: Inputs<'_>,
    kueue: Option<&KueueObjects>,
) -> Result<Explanation> {
    let (namespace, name) = (j.namespace.as_str(), j.name.as_str());
    let Some(k) = kueue else {
        return Err(Error::Input(format!(
            "Job {namespace}/{name}: Kueue is not installed (no kueue.x-k8s.io objects): explain its pods instead"
        )));
    };
    let Some(w) = kueue::workload_of(k, namespace, &format!("Job/{name}")) else {
        return Err(Error::Input(format!(
            "Job {namespace}/{name}: no Kueue Workload owns it (is it labelled {QUEUE_LABEL}?)"
        )));
    };
    let offers = flavor_offers(&inputs, k);
    let v = kueue::judge_workload(w, k, Some(&offers));
    // The flavor admitted in (or that fits): its nodeLabels, as Kueue injects them.
    let mut selector = BTreeMap::new();
    if let Some(f) = v.flavor.values().next().and_then(|f| k.flavor(f)) {
        selector.extend(f.node_labels.clone());
    }
    // A Job with pods (admitted): its first pod as it is; else the pod its template makes.
    let first = j.first_pod?;
    let running = first.and_then(|n| {
        inputs
            .pods
            .unwrap_or_default()
            .iter()
            .find(|p| p.namespace == namespace && p.name == n)
    });
    let mut e = match running {
        Some(p) => explain::explain(p, inputs)?,
        None => {
            let mut e = explain::explain(&job_pod(&j.job, &selector)?, inputs)?;
            e.pod = format!("{namespace}/{name} (Job, its pod template)");
            if let Some(n) = j
                .job
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
