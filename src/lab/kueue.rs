//! `gpuwl lab --kueue`: the quota layer on the same cluster, after the eight steps (their
//! files unchanged), with the real Kueue running on the local control plane
//! ([`crate::cluster::kueue`]).
//!
//! - One ResourceFlavor per workload pool ([`FLAVORS`]: `container`, `vm-passthrough`,
//!   `vm-vgpu`, each selecting its pool by `nvidia.com/gpu.workload.config`), a ClusterQueue
//!   [`CLUSTER_QUEUE`] with one resource group covering `nvidia.com/gpu` — the container
//!   flavor 4 of it, the passthrough flavor 2 of it: the quota the passthrough pool would
//!   need on its device-model name, written on the container name (the mis-named quota),
//!   the vGPU flavor none — and a LocalQueue [`LOCAL_QUEUE`] in namespace [`NAMESPACE`].
//! - Job `kueue-container` asks `nvidia.com/gpu: 1`: Kueue admits it in flavor
//!   `container`, unsuspends it with the flavor's node selector, the Job controller makes
//!   its pod, the scheduler binds it to the container node.
//! - Job `kueue-passthrough` asks the passthrough name (`nvidia.com/GA102GL_A10: 1`): no
//!   flavor of the ClusterQueue has quota on it, so Kueue holds it (suspended, no pod;
//!   its Workload's `QuotaReserved=False` message says why).
//! - [`KUEUE_FILE`] (`out/kueue.txt`, written atomically): one line per Job,
//!   `<job> <resource> <ADMITTED|HELD> <flavor|none> <node|none> [<Kueue's message>]`.
//!
//! `gpuwl check --effective` on the cluster then reports the mis-named quota
//! (`kueue-quota-not-advertised` on `ClusterQueue/lab-gpus`).

use std::time::{Duration, Instant};

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::input::live::{already_exists, api_err};
use crate::lab::files::{self, LabDirs};
use crate::lab::kubeops;
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::kueue::{QUEUE_LABEL, Workload};
use gpuwl_core::model::workload::LABEL_KEY;

/// The namespace of the Kueue step's LocalQueue and Jobs.
pub const NAMESPACE: &str = "gpu-kueue";
/// The ClusterQueue.
pub(crate) const CLUSTER_QUEUE: &str = "lab-gpus";
/// The LocalQueue.
pub(crate) const LOCAL_QUEUE: &str = "lab";
/// The result file, under `out/`.
pub(crate) const KUEUE_FILE: &str = "kueue.txt";
/// The flavors: (name = the pool's workload config, `nvidia.com/gpu` quota).
pub(crate) const FLAVORS: [(&str, &str); 3] = [
    ("container", "4"),
    ("vm-passthrough", "2"),
    ("vm-vgpu", "0"),
];
/// How long one Job is awaited (admitted and its pod bound, or held with a message).
pub const WAIT: Duration = Duration::from_secs(90);

/// One Job of the step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LabJob {
    /// The Job's name.
    pub name: String,
    /// The resource name it asks one of.
    pub resource: String,
    /// Whether the lab expects Kueue to admit it.
    pub admitted: bool,
}

/// The two Jobs: the container one (admitted), the passthrough one (held).
pub(crate) fn lab_jobs(container: &str, passthrough: &str) -> [LabJob; 2] {
    [
        LabJob {
            name: "kueue-container".into(),
            resource: container.into(),
            admitted: true,
        },
        LabJob {
            name: "kueue-passthrough".into(),
            resource: passthrough.into(),
            admitted: false,
        },
    ]
}

/// What one Job came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutcome {
    /// The Job.
    pub(crate) job: LabJob,
    /// Whether its Workload is admitted.
    pub admitted: bool,
    /// The flavor Kueue assigned to the resource, when admitted.
    pub flavor: Option<String>,
    /// The node its pod is bound to.
    pub node: Option<String>,
    /// Kueue's message on `QuotaReserved` when held; empty when admitted.
    pub message: String,
}

impl JobOutcome {
    /// The line in [`KUEUE_FILE`].
    pub fn line(&self) -> String {
        let mut l = format!(
            "{} {} {} {} {}",
            self.job.name,
            self.job.resource,
            if self.admitted { "ADMITTED" } else { "HELD" },
            self.flavor.as_deref().unwrap_or("none"),
            self.node.as_deref().unwrap_or("none"),
        );
        if !self.message.is_empty() {
            l.push(' ');
            l.push_str(&self.message);
        }
        l
    }
}

fn ar(kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kueue.x-k8s.io", "v1beta2", kind),
        plural,
    )
}

/// The Kueue objects of the step, as applied.
pub fn objects(container: &str) -> Vec<Value> {
    let mut out: Vec<Value> = FLAVORS
        .iter()
        .map(|(f, _)| {
            json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                   "metadata": {"name": f}, "spec": {"nodeLabels": {LABEL_KEY: f}}})
        })
        .collect();
    let flavors: Vec<Value> = FLAVORS
        .iter()
        .map(|(f, q)| json!({"name": f, "resources": [{"name": container, "nominalQuota": q}]}))
        .collect();
    out.push(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {"namespaceSelector": {},
                 "resourceGroups": [{"coveredResources": [container], "flavors": flavors}]}}),
    );
    out.push(
        json!({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": LOCAL_QUEUE, "namespace": NAMESPACE},
        "spec": {"clusterQueue": CLUSTER_QUEUE}}),
    );
    out
}

/// The Job `j`: one pod asking `1` of its resource, labelled for the LocalQueue.
pub(crate) fn job_object(j: &LabJob) -> Value {
    json!({"apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": j.name, "namespace": NAMESPACE, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0,
            "template": {"spec": {"restartPolicy": "Never",
                "containers": [{"name": "cuda", "image": crate::lab::manifests::IMAGE,
                    "resources": {"limits": {j.resource.as_str(): "1"}}}]}}}})
}

/// Applies [`objects`] (server-side, field manager `gpuwl-lab`).
async fn apply_objects(client: &Client, container: &str) -> Result<()> {
    for o in objects(container) {
        let kind = o["kind"].as_str().unwrap_or_default();
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        let plural = match kind {
            "ResourceFlavor" => "resourceflavors",
            "ClusterQueue" => "clusterqueues",
            _ => "localqueues",
        };
        let api: Api<DynamicObject> = match o["metadata"]["namespace"].as_str() {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar(kind, plural)),
            None => Api::all_with(client.clone(), &ar(kind, plural)),
        };
        api.patch(
            name,
            &PatchParams::apply("gpuwl-lab").force(),
            &Patch::Apply(&o),
        )
        .await
        .map_err(api_err(&format!("apply {kind} {name}")))?;
    }
    Ok(())
}

/// The Workload of Job `job` (owned by it), if Kueue has made one.
async fn workload_of(client: &Client, job: &str) -> Result<Option<Workload>> {
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), NAMESPACE, &ar("Workload", "workloads"));
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(api_err(&format!("list workloads in {NAMESPACE}")))?;
    for w in list.items {
        let mut v = serde_json::to_value(&w)
            .map_err(|e| Error::failed("reading a Workload from the API", e))?;
        v["kind"] = json!("Workload");
        let wl = gpuwl_core::decode::kueue::workload(&v)
            .map_err(|e| Error::failed("reading a Workload from the API", e))?;
        if wl.owner.as_deref() == Some(&format!("Job/{job}")) {
            return Ok(Some(wl));
        }
    }
    Ok(None)
}

/// The node of the Job's pod (label `job-name`), if bound.
async fn job_pod_node(client: &Client, job: &str) -> Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let list = pods
        .list(&ListParams::default().labels(&format!("batch.kubernetes.io/job-name={job}")))
        .await
        .map_err(api_err(&format!("list the pods of Job {job}")))?;
    Ok(list
        .items
        .iter()
        .filter_map(|p| p.spec.as_ref()?.node_name.clone())
        .find(|n| !n.is_empty()))
}

/// Creates Job `j` (kept when it exists) and waits ([`WAIT`] at most) until it is admitted
/// and its pod bound, or held with Kueue's message; returns what it came to.
///
/// Errors: [`Error::Runtime`] when a call fails or neither happens in time.
pub(crate) async fn create_and_await(client: &Client, j: &LabJob) -> Result<JobOutcome> {
    let jobs: Api<Job> = Api::namespaced(client.clone(), NAMESPACE);
    let job: Job = serde_json::from_value(job_object(j))
        .map_err(|e| Error::failed(format!("Job {}: cannot build the object", j.name), e))?;
    match jobs.create(&PostParams::default(), &job).await {
        Ok(_) => {}
        Err(e) if already_exists(&e) => {}
        Err(e) => return Err(api_err(&format!("create Job {NAMESPACE}/{}", j.name))(e)),
    }
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(w) = workload_of(client, &j.name).await? {
            let flavor = w
                .assignments
                .iter()
                .find_map(|a| a.flavors.get(&j.resource).cloned());
            if w.is("Admitted") {
                if let Some(node) = job_pod_node(client, &j.name).await? {
                    return Ok(JobOutcome {
                        job: j.clone(),
                        admitted: true,
                        flavor,
                        node: Some(node),
                        message: String::new(),
                    });
                }
            } else if let Some(c) = w
                .condition("QuotaReserved")
                .filter(|c| c.status == "False" && !c.message.is_empty())
            {
                return Ok(JobOutcome {
                    job: j.clone(),
                    admitted: false,
                    flavor: None,
                    node: None,
                    message: c.message.clone(),
                });
            }
        }
        if Instant::now() > deadline {
            return Err(Error::Runtime(format!(
                "Job {NAMESPACE}/{} neither admitted and placed nor held with a message after {} s (see `kubectl get workloads -n {NAMESPACE} -o yaml` and the kueue-manager log)",
                j.name,
                WAIT.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The step: namespace, flavors, queues, the two Jobs awaited, [`KUEUE_FILE`] written.
/// `container` / `passthrough`: the lab's resource names.
///
/// Errors: [`Error::Runtime`] when a call fails, a Job is not awaited in time, or a Job
/// comes out otherwise than the lab expects (the container Job held, the passthrough Job
/// admitted).
pub async fn run(
    client: &Client,
    dirs: &LabDirs,
    container: &str,
    passthrough: &str,
) -> Result<Vec<JobOutcome>> {
    kubeops::ensure_namespace(client, NAMESPACE).await?;
    apply_objects(client, container).await?;
    let mut out = Vec::new();
    for j in lab_jobs(container, passthrough) {
        let o = create_and_await(client, &j).await?;
        if o.admitted != j.admitted {
            return Err(Error::Runtime(format!(
                "Job {} was {} by Kueue, the lab expects it {}: {}",
                j.name,
                if o.admitted { "admitted" } else { "held" },
                if j.admitted { "admitted" } else { "held" },
                o.line()
            )));
        }
        out.push(o);
    }
    let lines: Vec<String> = out.iter().map(JobOutcome::line).collect();
    files::write_lines(&dirs.out.join(KUEUE_FILE), &lines)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_objects_put_the_passthrough_quota_on_the_container_name() {
        let o = objects("nvidia.com/gpu");
        assert_eq!(o.len(), 5);
        assert_eq!(o[1]["spec"]["nodeLabels"][LABEL_KEY], "vm-passthrough");
        let cq = &o[3]["spec"]["resourceGroups"][0];
        assert_eq!(cq["coveredResources"], json!(["nvidia.com/gpu"]));
        assert_eq!(
            cq["flavors"][1],
            json!({"name": "vm-passthrough", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]})
        );
        // What check makes of them: the passthrough flavor's quota is the mis-named one.
        let k = gpuwl_core::decode::kueue::from_values(&o).unwrap();
        assert_eq!(k.cluster_queues[0].groups[0].flavors.len(), 3);
    }

    #[test]
    fn a_held_job_line_carries_kueues_message() {
        let j = lab_jobs("nvidia.com/gpu", "nvidia.com/GA102GL_A10");
        let o = JobOutcome {
            job: j[1].clone(),
            admitted: false,
            flavor: None,
            node: None,
            message: "couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue".into(),
        };
        assert_eq!(
            o.line(),
            "kueue-passthrough nvidia.com/GA102GL_A10 HELD none none couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue"
        );
        assert_eq!(job_object(&j[0])["metadata"]["labels"][QUEUE_LABEL], "lab");
    }
}
