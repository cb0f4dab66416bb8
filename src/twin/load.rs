//! The twin's API writes: what one run copies into the twin ([`Trial`]) and the running
//! twin ([`Twin`]), creating namespaces, nodes and pods with bounded parallelism, waiting
//! for nodes to be Ready and the scheduler to settle, and applying a relabel to a twin
//! node (its labels and, by gpuwl's model, the names it then advertises).

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};

use crate::cluster::{self, ClusterInfo, accounts, nodes};
use crate::input::live::{self, api_error};
use crate::input::virt;
use crate::twin::{Options, kubevirt, objects};
use gpuwl_core::analysis::twin::predict;
use gpuwl_core::analysis::twin::report::{NodeChange, PendingByTwin, Relabel, pending_by_twin_key};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::gpusim;
use gpuwl_core::model::node::NodeInfo;
use gpuwl_core::model::operator::ClusterPolicy;
use gpuwl_core::model::pod::PodInfo;
use gpuwl_core::model::snapshot::Snapshot;
use gpuwl_core::model::workload::LABEL_KEY;

/// How many API calls the twin makes at once while loading.
pub(crate) const PARALLEL: usize = 16;

/// Creates `items` with at most [`PARALLEL`] calls at once.
pub(crate) async fn create_all<K>(
    api: Api<K>,
    items: Vec<serde_json::Value>,
    what: &str,
) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    stream::iter(items)
        .map(|v| {
            let api = api.clone();
            async move {
                let name = v["metadata"]["name"].as_str().unwrap_or("").to_string();
                let obj: K = serde_json::from_value(v)
                    .map_err(|e| Error::failed(format!("{what} {name}: cannot build"), e))?;
                match api.create(&PostParams::default(), &obj).await {
                    Ok(_) => Ok(()),
                    Err(e) if live::already_exists(&e) => Ok(()),
                    Err(e) => Err(api_error(&format!("create {what} {name} in the twin"), &e)),
                }
            }
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Creates pods (namespaced) with at most [`PARALLEL`] calls at once.
pub(crate) async fn create_pods(client: &Client, items: Vec<serde_json::Value>) -> Result<()> {
    stream::iter(items)
        .map(|v| {
            let ns = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            create_all(api, vec![v], "pod")
        })
        .buffer_unordered(PARALLEL)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Waits until every node in `names` is schedulable ([`crate::cluster::nodes::is_schedulable`]).
pub(crate) async fn wait_nodes(
    client: &Client,
    names: &BTreeSet<String>,
    timeout: Duration,
) -> Result<()> {
    let api: Api<Node> = Api::all(client.clone());
    let start = Instant::now();
    loop {
        let mut ready = 0;
        live::list_all(&api, ListParams::default(), "list the twin's nodes", |n| {
            if names.contains(n.metadata.name.as_deref().unwrap_or("")) && nodes::is_schedulable(&n)
            {
                ready += 1;
            }
        })
        .await?;
        if ready == names.len() {
            return Ok(());
        }
        if start.elapsed() > timeout {
            return Err(Error::Runtime(format!(
                "the twin's nodes are not ready after {} s ({ready} of {}): kwok or \
                 kube-controller-manager did not act",
                timeout.as_secs(),
                names.len()
            )));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Number of pods not bound in the twin (metadata only, selected by the API server: the
/// pending ones are few, the bound ones many).
pub(crate) async fn unbound_count(client: &Client) -> Result<usize> {
    let api: Api<Pod> = Api::all(client.clone());
    let list = api
        .list_metadata(&ListParams::default().fields("spec.nodeName="))
        .await
        .map_err(|e| api_error("list the twin's pending pods", &e))?;
    Ok(list.items.len())
}

/// Waits until the twin's scheduler has nothing in its active and backoff queues and the
/// number of unbound pods has stopped changing, at least `min` after the last change. Returns
/// whether it settled within `timeout` (else the report says so).
pub(crate) async fn settle(
    client: &Client,
    info: &ClusterInfo,
    min: Duration,
    timeout: Duration,
) -> Result<bool> {
    let start = Instant::now();
    tokio::time::sleep(min).await;
    let mut quiet = 0;
    let mut last = unbound_count(client).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let busy = cluster::scheduler_busy(info).await;
        let now = unbound_count(client).await?;
        if busy == Some(0) && now == last {
            quiet += 1;
            if quiet >= 3 {
                return Ok(true);
            }
        } else {
            quiet = 0;
        }
        last = now;
        if start.elapsed() > timeout {
            return Ok(false);
        }
    }
}

/// What [`build_and_try`] copies into the twin and tries there (chosen by [`run`]).
pub(crate) struct Trial<'a> {
    pub(crate) source: &'a Snapshot,
    pub(crate) relabels: &'a [Relabel],
    /// The GPUs of each relabelled node, by node name.
    pub(crate) hardware: &'a BTreeMap<String, predict::Inferred>,
    /// The source's GPU nodes (and relabelled nodes) to copy.
    pub(crate) twin_nodes: &'a [&'a NodeInfo],
    /// Non-terminal pods bound to `twin_nodes`.
    pub(crate) bound: &'a [&'a PodInfo],
    /// Pending pods that ask for an `nvidia.com/` name.
    pub(crate) pending: &'a [&'a PodInfo],
    /// Pending VMs created as VMIs in a twin with KubeVirt (empty without).
    pub(crate) vmis: &'a [&'a PodInfo],
}

/// The running twin: its API client, its cluster facts and the run's options.
pub(crate) struct Twin<'a> {
    pub(crate) client: &'a Client,
    pub(crate) info: &'a ClusterInfo,
    pub(crate) opts: &'a Options,
}

/// Copies the trial's namespaces (with their default service account: the ServiceAccount
/// admission plugin refuses a pod until it exists), nodes (created Ready), bound pods (left
/// `Pending` by kwok), then, once every node is checked schedulable, the pending pods into the twin; with KubeVirt, then
/// the source's permittedHostDevices and the pending VMs as VMIs
/// ([`kubevirt::vmi_object`]). Returns the pending pods and the VMIs by their twin key.
pub(crate) async fn copy_source<'a>(
    client: &Client,
    trial: &Trial<'a>,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<(PendingByTwin<'a>, PendingByTwin<'a>)> {
    let namespaces: BTreeSet<&str> = trial
        .bound
        .iter()
        .chain(trial.pending)
        .chain(trial.vmis)
        .map(|p| p.namespace.as_str())
        .collect();
    let ns_api: Api<Namespace> = Api::all(client.clone());
    create_all(
        ns_api,
        namespaces
            .iter()
            .map(|n| serde_json::json!({"metadata": {"name": n}}))
            .collect(),
        "namespace",
    )
    .await?;
    for ns in &namespaces {
        accounts::ensure_default_service_account(client, ns).await?;
    }
    progress(&format!("creating {} nodes", trial.twin_nodes.len()));
    let node_api: Api<Node> = Api::all(client.clone());
    create_all(
        node_api,
        trial
            .twin_nodes
            .iter()
            .map(|n| objects::node_object(n))
            .collect(),
        "node",
    )
    .await?;
    // The nodes are created Ready and untainted ([`objects::node_object`], the twin's API
    // server without TaintNodesByCondition); bound pods carry their node's name and
    // [`crate::cluster::recipe::KWOK_LEAVE_PENDING_LABEL`]: nothing schedules them and kwok
    // leaves their status alone. (Before, kwok wrote each node's status and each bound
    // pod's, and kube-controller-manager lifted each node's not-ready taint: at 513 nodes
    // and 3,850 pods, some 5,000 of the twin's 9,000 writes; BENCHMARKS.md, whatif.)
    progress(&format!("creating {} bound pods", trial.bound.len()));
    create_pods(
        client,
        trial
            .bound
            .iter()
            .map(|p| objects::pod_object(p, true))
            .collect(),
    )
    .await?;
    let names: BTreeSet<String> = trial.twin_nodes.iter().map(|n| n.name.clone()).collect();
    progress("checking that the nodes are schedulable");
    wait_nodes(client, &names, Duration::from_secs(120)).await?;
    let pending_by_twin = pending_by_twin_key(trial.pending);
    progress(&format!(
        "creating {} pending pod(s); the twin's scheduler tries them as the cluster is",
        trial.pending.len()
    ));
    create_pods(
        client,
        trial
            .pending
            .iter()
            .map(|p| objects::pod_object(p, false))
            .collect(),
    )
    .await?;
    let mut vmis = PendingByTwin::new();
    if !trial.vmis.is_empty() {
        progress("writing the source's permittedHostDevices into the twin's KubeVirt CR");
        kubevirt::configure(client, trial.source.kubevirt.as_ref()).await?;
        kubevirt::wait_published(client, Duration::from_secs(60)).await?;
        progress(&format!(
            "creating {} VMI(s); virt-controller renders their launcher pods",
            trial.vmis.len()
        ));
        let resource = virt::resource("VirtualMachineInstance", "virtualmachineinstances");
        for p in trial.vmis {
            let name = kubevirt::vmi_name(p).unwrap_or(p.name.as_str());
            let obj: kube::api::DynamicObject =
                serde_json::from_value(kubevirt::vmi_object(p, name))
                    .map_err(|e| Error::failed("the twin's VMI object", e))?;
            Api::namespaced_with(client.clone(), &p.namespace, &resource)
                .create(&PostParams::default(), &obj)
                .await
                .map_err(|e| api_error(&format!("create VMI {}/{name}", p.namespace), &e))?;
            vmis.insert(format!("{}/{name}", p.namespace), *p);
        }
    }
    Ok((pending_by_twin, vmis))
}

/// Waits for the twin's scheduler to settle ([`settle`]); when it has not within the
/// run's timeout, adds a note saying so, `when` ending the sentence.
pub(crate) async fn settle_or_note(
    twin: &Twin<'_>,
    min: Duration,
    when: &str,
    notes: &mut Vec<String>,
) -> Result<()> {
    if !settle(twin.client, twin.info, min, twin.opts.settle_timeout).await? {
        notes.push(format!(
            "the twin's scheduler had not settled {} s {when}",
            twin.opts.settle_timeout.as_secs()
        ));
    }
    Ok(())
}

/// The merge patch of `metadata.labels` that turns `before`'s labels into `after`'s:
/// `null` for a label removed, the new value for one added or changed.
pub(crate) fn label_patch(
    before: &BTreeMap<String, String>,
    after: &BTreeMap<String, String>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut patch = serde_json::Map::new();
    for k in before.keys() {
        if !after.contains_key(k) {
            patch.insert(k.clone(), serde_json::Value::Null);
        }
    }
    for (k, v) in after {
        if before.get(k) != Some(v) {
            patch.insert(k.clone(), serde_json::json!(v));
        }
    }
    patch
}

/// Applies one relabel to the twin: the node's labels, and (when they change) the names it
/// advertises by gpuwl's model, written to its status capacity and allocatable. Returns the
/// change with `advertised_after` still empty (read back later).
pub(crate) async fn relabel_node(
    node_api: &Api<Node>,
    trial: &Trial<'_>,
    r: &Relabel,
    policy: Option<&ClusterPolicy>,
) -> Result<NodeChange> {
    let before = trial
        .source
        .nodes
        .iter()
        .find(|n| n.name == r.node)
        .expect("validated above");
    let inferred = &trial.hardware[&r.node];
    let after_labels = predict::relabelled(before, r.config, r.vgpu_type.as_deref());
    let (now, mut node_notes) = predict::advertised(&after_labels, &inferred.hw, policy);
    let patch = label_patch(&before.labels, &after_labels.labels);
    node_api
        .patch(
            &r.node,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"metadata": {"labels": patch}})),
        )
        .await
        .map_err(|e| api_error(&format!("relabel node {} in the twin", r.node), &e))?;
    let alloc = before
        .allocatable
        .clone()
        .unwrap_or(before.capacity.clone());
    if let Some(want) = gpusim::status_update(&before.capacity, &alloc, &now) {
        node_api
            .patch_status(
                &r.node,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({
                    "status": {"capacity": &want, "allocatable": &want}
                })),
            )
            .await
            .map_err(|e| {
                api_error(
                    &format!("update the status of node {} in the twin", r.node),
                    &e,
                )
            })?;
    }
    if now.is_empty() {
        node_notes.push("advertises no GPU name after the relabel".to_string());
    }
    Ok(NodeChange {
        relabel: r.clone(),
        from: before.label(LABEL_KEY).map(str::to_string),
        advertised_before: predict::listed(before),
        advertised_after: BTreeMap::new(),
        hardware: inferred.how.clone(),
        notes: node_notes,
    })
}

/// The twin's write path against the in-memory API server of the fast tier
/// (tests/it/fake_api.rs, docs/testing.md): what is created, in what order, with what.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::*;
    use gpuwl_core::model::operator::PolicyStatus;
    use gpuwl_core::model::workload::WorkloadConfig;
    use serde_json::json;

    use crate::testing::fake_api;

    const NODES: &str = r#"{"kind": "List", "apiVersion": "v1", "items": [
      {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.workload.config": "vm-passthrough",
         "nvidia.com/gpu.present": "true"}},
       "spec": {"taints": [{"key": "gpu", "value": "vm", "effect": "NoSchedule"}]},
       "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/GA102GL_A10": "2"},
                  "allocatable": {"cpu": "16", "memory": "64Gi", "pods": "110", "nvidia.com/GA102GL_A10": "2"}}},
      {"kind": "Node", "apiVersion": "v1", "metadata": {"name": "cpu-only"},
       "status": {"capacity": {"cpu": "8"}, "allocatable": {"cpu": "8"}}}]}"#;

    const PODS: &str = r#"{"kind": "List", "apiVersion": "v1", "items": [
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "vm-1", "namespace": "vms"},
       "spec": {"nodeName": "gpu-a", "tolerations": [{"key": "gpu", "operator": "Exists"}],
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]},
       "status": {"phase": "Running"}},
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "vm-2", "namespace": "vms2"},
       "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/GA102GL_A10": "2"}}}]},
       "status": {"phase": "Pending"}},
      {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web", "namespace": "web"},
       "spec": {"nodeName": "cpu-only", "containers": [{"name": "c"}]},
       "status": {"phase": "Running"}}]}"#;

    #[test]
    fn the_twin_copies_namespaces_then_ready_nodes_then_bound_then_pending_pods() {
        let mut nodes = Vec::new();
        gpuwl_core::decode::dump::read_from(NODES.as_bytes(), "nodes.json", |n| nodes.push(n))
            .unwrap();
        let pods = gpuwl_core::decode::pods::read_pods_str(PODS, "pods.json")
            .unwrap_or_else(|e| panic!("{e}"));
        let source = Snapshot::of_cluster(nodes, pods, PolicyStatus::not_read());
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, left_out) = select_pods(&source, &copied);
        assert!(left_out.is_empty(), "{left_out:?}");
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = BTreeMap::new();
        let trial = Trial {
            source: &source,
            relabels: &[],
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &[],
        };
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let mut lines = Vec::new();
        let (by_key, vmis) = rt
            .block_on(copy_source(&client, &trial, &mut |l: &str| {
                lines.push(l.to_owned())
            }))
            .unwrap();
        assert_eq!(by_key.keys().collect::<Vec<_>>(), ["vms2/vm-2"]);
        assert!(vmis.is_empty(), "no VMI without KubeVirt in the twin");
        let writes = api.writes();
        // Namespaces first (both pods' namespaces, not the CPU pod's), each with its
        // default ServiceAccount, then the GPU node, then the bound pod, then the pending one.
        let pos = |w: &str| {
            writes
                .iter()
                .position(|x| x == w)
                .unwrap_or_else(|| panic!("{w} not in {writes:?}"))
        };
        assert_eq!(
            writes
                .iter()
                .filter(|w| *w == "POST /api/v1/namespaces")
                .count(),
            2,
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/namespaces") < pos("POST /api/v1/nodes"),
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/nodes") < pos("POST /api/v1/namespaces/vms/pods"),
            "{writes:?}"
        );
        assert!(
            pos("POST /api/v1/namespaces/vms/pods") < pos("POST /api/v1/namespaces/vms2/pods"),
            "{writes:?}"
        );
        assert!(
            !writes
                .iter()
                .any(|w| w.contains("cpu-only") || w.contains("/web/")),
            "{writes:?}"
        );
        // The node keeps its taint and GPU capacity; the bound pod its node; the pending
        // pod has none.
        let node = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(node["spec"]["taints"][0]["key"], "gpu");
        assert_eq!(
            node["metadata"]["labels"]["nvidia.com/gpu.workload.config"],
            "vm-passthrough"
        );
        let requests = api.requests();
        let created = |path: &str| {
            requests
                .iter()
                .find(|r| r.method == "POST" && r.path == path)
                .map(|r| r.body.clone())
                .unwrap()
        };
        let node_sent = created("/api/v1/nodes");
        assert_eq!(
            node_sent["status"]["allocatable"]["nvidia.com/GA102GL_A10"], "2",
            "{node_sent}"
        );
        let vm1 = created("/api/v1/namespaces/vms/pods");
        assert_eq!(vm1["spec"]["nodeName"], "gpu-a", "{vm1}");
        assert_eq!(
            vm1["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/GA102GL_A10"],
            "1"
        );
        let vm2 = created("/api/v1/namespaces/vms2/pods");
        assert!(vm2["spec"]["nodeName"].is_null(), "{vm2}");
        assert!(lines.iter().any(|l| l == "creating 1 nodes"), "{lines:?}");
    }

    /// The source of these tests: [`NODES`] and [`PODS`] read as a dump is.
    fn source() -> Snapshot {
        let mut nodes = Vec::new();
        gpuwl_core::decode::dump::read_from(NODES.as_bytes(), "nodes.json", |n| nodes.push(n))
            .unwrap();
        Snapshot::of_cluster(
            nodes,
            gpuwl_core::decode::pods::read_pods_str(PODS, "pods.json").unwrap(),
            PolicyStatus::not_read(),
        )
    }

    /// Runs `f` with the trial [`run`] would make of `source` for the relabels given (the
    /// GPU node `gpu-a` copied, `vms/vm-1` bound, `vms2/vm-2` pending).
    fn with_trial<T>(
        source: &Snapshot,
        relabels: &[Relabel],
        f: impl FnOnce(&Trial<'_>) -> T,
    ) -> T {
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, _) = select_pods(source, &copied);
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = relabelled_hardware(source, relabels).unwrap();
        f(&Trial {
            source,
            relabels,
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &[],
        })
    }

    fn copy(api: &fake_api::FakeApi, trial: &Trial<'_>) -> Result<Vec<String>> {
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let mut lines = Vec::new();
        rt.block_on(copy_source(&client, trial, &mut |l: &str| {
            lines.push(l.to_owned())
        }))
        .map(|(by_key, _)| by_key.keys().cloned().collect())
    }

    #[test]
    fn objects_already_in_the_twin_are_taken_as_created() {
        let source = source();
        let api = fake_api::FakeApi::new();
        // A namespace, its service account and the node exist (a run that stopped half-way
        // through, a controller that was quicker): the creates answer 409 AlreadyExists.
        api.insert(
            "/api/v1",
            "namespaces",
            json!({"metadata": {"name": "vms"}}),
        );
        api.insert(
            "/api/v1",
            "serviceaccounts",
            json!({"metadata": {"name": "default", "namespace": "vms"}}),
        );
        api.insert(
            "/api/v1",
            "nodes",
            json!({"metadata": {"name": "gpu-a", "labels": {"kept": "yes"}},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let pending = with_trial(&source, &[], |t| copy(&api, t)).unwrap();
        assert_eq!(pending, ["vms2/vm-2"]);
        let refused: Vec<(String, String)> = api
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .map(|r| {
                (
                    r.path.clone(),
                    r.body["metadata"]["name"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        for want in [
            ("/api/v1/namespaces", "vms"),
            ("/api/v1/namespaces/vms/serviceaccounts", "default"),
            ("/api/v1/nodes", "gpu-a"),
        ] {
            assert!(
                refused
                    .iter()
                    .any(|(p, n)| (p.as_str(), n.as_str()) == want),
                "{want:?} not asked: {refused:?}"
            );
        }
        // A create is never a replace: the node there is kept as it was.
        let node = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(node["metadata"]["labels"], json!({"kept": "yes"}));
        // The rest went in.
        assert!(api.get("/api/v1/namespaces/vms2").is_some());
        assert!(api.get("/api/v1/namespaces/vms/pods/vm-1").is_some());
        assert!(api.get("/api/v1/namespaces/vms2/pods/vm-2").is_some());
    }

    #[test]
    fn a_refused_create_stops_the_copy_with_the_object_named() {
        let source = source();
        for (path, code, want, not_after) in [
            (
                "/nodes",
                403,
                "create node gpu-a in the twin: forbidden",
                "/api/v1/namespaces/vms/pods",
            ),
            (
                "/namespaces/vms2/pods",
                422,
                "create pod vm-2 in the twin: scripted failure of /api/v1/namespaces/vms2/pods (422)",
                "",
            ),
            (
                "/namespaces/vms/serviceaccounts",
                403,
                "create serviceaccount vms/default",
                "/api/v1/nodes",
            ),
        ] {
            let api = fake_api::FakeApi::new();
            api.ready_nodes();
            api.fail(http::Method::POST, path, code, 1);
            let err = with_trial(&source, &[], |t| copy(&api, t))
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
            if !not_after.is_empty() {
                assert!(
                    !api.writes().iter().any(|w| w.ends_with(not_after)),
                    "{path}: went on to {not_after}: {:?}",
                    api.writes()
                );
            }
        }
    }

    #[test]
    fn the_copy_waits_for_the_nodes_to_be_ready_and_untainted() {
        let api = fake_api::FakeApi::new();
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let names: BTreeSet<String> = ["gpu-a".to_string(), "gpu-b".to_string()].into();
        // Neither node Ready: the wait gives up after its timeout, counting those that are.
        api.insert("/api/v1", "nodes", json!({"metadata": {"name": "gpu-a"}}));
        api.insert(
            "/api/v1",
            "nodes",
            json!({"metadata": {"name": "gpu-b"},
                   "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]},
                   "status": {"conditions": [{"type": "Ready", "status": "True"}]}}),
        );
        let started = Instant::now();
        let err = rt
            .block_on(wait_nodes(&client, &names, Duration::from_millis(300)))
            .unwrap_err()
            .to_string();
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(
            err,
            "the twin's nodes are not ready after 0 s (0 of 2): kwok or kube-controller-manager did not act"
        );
        // kwok reports gpu-a Ready, kube-controller-manager lifts gpu-b's taint: the wait
        // ends.
        let controllers = api.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            controllers.modify("/api/v1/nodes/gpu-a", |n| {
                n["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
            });
            std::thread::sleep(Duration::from_millis(200));
            controllers.modify("/api/v1/nodes/gpu-b", |n| n["spec"]["taints"] = json!([]));
        });
        rt.block_on(wait_nodes(&client, &names, Duration::from_secs(10)))
            .unwrap();
        t.join().unwrap();
        assert!(api.writes().is_empty(), "{:?}", api.writes());
    }

    #[test]
    fn the_pods_keep_their_placement_and_only_pending_ones_lose_their_node() {
        let pods = r#"{"kind": "List", "apiVersion": "v1", "items": [
          {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "train", "namespace": "ml",
             "labels": {"app": "train"}},
           "spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-A10"},
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                      {"nodeSelectorTerms": [{"matchExpressions": [
                        {"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["container"]}]}]}}},
                    "tolerations": [{"key": "gpu", "operator": "Equal", "value": "vm", "effect": "NoSchedule"}],
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
           "status": {"phase": "Pending"}}]}"#;
        let mut source = source();
        source.pods = Some(gpuwl_core::decode::pods::read_pods_str(pods, "pods.json").unwrap());
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        let pending = with_trial(&source, &[], |t| copy(&api, t)).unwrap();
        assert_eq!(pending, ["ml/train"]);
        let sent = api
            .requests()
            .into_iter()
            .find(|r| r.method == "POST" && r.path == "/api/v1/namespaces/ml/pods")
            .unwrap()
            .body;
        let spec = &sent["spec"];
        assert!(spec["nodeName"].is_null(), "{sent}");
        assert_eq!(
            spec["nodeSelector"],
            json!({"nvidia.com/gpu.product": "NVIDIA-A10"})
        );
        assert_eq!(
            spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                [0]["matchExpressions"][0],
            json!({"key": "nvidia.com/gpu.workload.config", "operator": "In", "values": ["container"]})
        );
        assert_eq!(
            spec["tolerations"],
            json!([{"key": "gpu", "operator": "Equal", "value": "vm", "effect": "NoSchedule"}])
        );
        assert_eq!(
            spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
            "1"
        );
        assert_eq!(spec["containers"][0]["image"], objects::TWIN_IMAGE);
        // The twin's copy is what the scheduler sees: stored as sent.
        assert_eq!(
            api.get("/api/v1/namespaces/ml/pods/train").unwrap()["spec"]["tolerations"],
            spec["tolerations"]
        );
    }

    #[test]
    fn unbound_pods_are_counted_by_the_api_servers_field_selector() {
        let api = fake_api::FakeApi::new();
        for (ns, name, node) in [
            ("a", "p-1", None),
            ("a", "p-2", Some("n-1")),
            ("b", "p-3", None),
        ] {
            let mut spec = json!({"containers": [{"name": "c"}]});
            if let Some(n) = node {
                spec["nodeName"] = json!(n);
            }
            api.insert(
                "/api/v1",
                "pods",
                json!({"metadata": {"name": name, "namespace": ns}, "spec": spec}),
            );
        }
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        assert_eq!(rt.block_on(unbound_count(&client)).unwrap(), 2);
        let list = api.requests().pop().unwrap();
        assert_eq!(list.path, "/api/v1/pods");
        assert!(
            list.query.contains("fieldSelector=spec.nodeName%3D"),
            "{}",
            list.query
        );
        api.fail(http::Method::GET, "/api/v1/pods", 403, 1);
        let err = rt.block_on(unbound_count(&client)).unwrap_err().to_string();
        assert!(err.contains("list the twin's pending pods"), "{err}");
    }

    /// A twin's facts whose scheduler serves its metrics on `port`.
    fn info(port: u16) -> crate::cluster::ClusterInfo {
        crate::cluster::ClusterInfo {
            name: "twin-test".into(),
            apiserver_port: 0,
            etcd_port: 0,
            etcd_peer_port: 0,
            controller_manager_port: 0,
            scheduler_port: port,
            kwok_port: 0,
            bin_dir: "/nonexistent".into(),
            kubernetes_version: String::new(),
            gpu_operator_port: 0,
            kubevirt_api_port: 0,
            kubevirt_controller_port: 0,
            kueue_webhook_port: 0,
            kueue_health_port: 0,
            env: Vec::new(),
            twin: true,
        }
    }

    const SCHEDULER_METRICS: &str = "# HELP scheduler_pending_pods Number of pending pods, by the queue type.\n\
        # TYPE scheduler_pending_pods gauge\n\
        scheduler_pending_pods{queue=\"active\"} ACTIVE\n\
        scheduler_pending_pods{queue=\"backoff\"} 0\n\
        scheduler_pending_pods{queue=\"gated\"} 4\n\
        scheduler_pending_pods{queue=\"unschedulable\"} 3\n";

    #[test]
    fn the_scheduler_settles_when_its_queues_are_empty_and_the_unbound_count_stays() {
        // Four twins at once (each settle takes at least three looks 400 ms apart): one
        // idle, one with a pod in the active queue, one whose metrics cannot be read, one
        // whose unbound pods keep changing.
        let twins: Vec<(fake_api::FakeApi, crate::testing::Https)> = (0..4)
            .map(|_| {
                let api = fake_api::FakeApi::new();
                api.insert(
                    "/api/v1",
                    "pods",
                    json!({"metadata": {"name": "p", "namespace": "a"},
                           "spec": {"containers": [{"name": "c"}]}}),
                );
                let https = crate::testing::https(&api);
                (api, https)
            })
            .collect();
        // Pods in the unschedulable and gated queues wait for an event: not work.
        twins[0]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "0"));
        twins[1]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "1"));
        twins[2].0.text("/metrics", 500, "no");
        twins[3]
            .0
            .text("/metrics", 200, &SCHEDULER_METRICS.replace("ACTIVE", "0"));
        let creating = twins[3].0.clone();
        let creator = std::thread::spawn(move || {
            // Longer than the others' timeout, so that their count never stays.
            for i in 0..10 {
                std::thread::sleep(Duration::from_millis(250));
                creating.insert(
                    "/api/v1",
                    "pods",
                    json!({"metadata": {"name": format!("new-{i}"), "namespace": "a"},
                           "spec": {"containers": [{"name": "c"}]}}),
                );
            }
        });
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let clients: Vec<Client> = twins.iter().map(|(api, _)| api.client()).collect();
        let infos: Vec<crate::cluster::ClusterInfo> =
            twins.iter().map(|(_, https)| info(https.port)).collect();
        let started = Instant::now();
        // 2 s: at least two looks even when the first one waits for a core on a loaded
        // machine (1 s saw a single look at load 10-20).
        let timeout = [10_000, 2000, 2000, 2000].map(Duration::from_millis);
        let settled: Vec<bool> = rt
            .block_on(futures::future::join_all((0..4).map(|i| {
                settle(&clients[i], &infos[i], Duration::ZERO, timeout[i])
            })))
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        creator.join().unwrap();
        assert_eq!(settled, [true, false, false, false]);
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{:?}",
            started.elapsed()
        );
        for (i, (api, _)) in twins.iter().enumerate() {
            let looks = api
                .requests()
                .iter()
                .filter(|r| r.path == "/metrics")
                .count();
            // The idle one: three quiet looks; the others look until the timeout (looks
            // 400 ms apart: at most six in 2 s).
            if i == 0 {
                assert_eq!(looks, 3, "twin {i}");
            } else {
                assert!((2..=6).contains(&looks), "twin {i}: {looks} looks");
            }
        }
    }

    #[test]
    fn a_relabel_patches_the_labels_then_the_advertised_names() {
        let mut source = source();
        // gpu-a runs the passthrough operands (its deploy label), the product is known.
        let node = &mut source.nodes[0];
        node.labels.insert(
            "nvidia.com/gpu.deploy.sandbox-device-plugin".into(),
            "true".into(),
        );
        node.labels
            .insert("nvidia.com/gpu.product".into(), "NVIDIA-A10".into());
        let relabels = ["gpu-a=container".parse::<Relabel>().unwrap()];
        let api = fake_api::FakeApi::new();
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        api.insert("/api/v1", "nodes", objects::node_object(&source.nodes[0]));
        let node_api: Api<Node> = Api::all(client.clone());
        let change = with_trial(&source, &relabels, |t| {
            rt.block_on(relabel_node(&node_api, t, &relabels[0], None))
        })
        .unwrap();
        assert_eq!(
            api.writes(),
            [
                "PATCH /api/v1/nodes/gpu-a",
                "PATCH /api/v1/nodes/gpu-a/status"
            ]
        );
        let requests = api.requests();
        let writes: Vec<&fake_api::Recorded> =
            requests.iter().filter(|r| r.method == "PATCH").collect();
        assert_eq!(writes[0].content_type, "application/merge-patch+json");
        // Only what changes: the new config, the passthrough operand's deploy label gone.
        assert_eq!(
            writes[0].body,
            json!({"metadata": {"labels": {
                "nvidia.com/gpu.workload.config": "container",
                "nvidia.com/gpu.deploy.sandbox-device-plugin": null
            }}})
        );
        // The container plugin's name for both GPUs; the passthrough name kept at 0, as
        // the kubelet keeps a name whose plugin left.
        let want = json!({"nvidia.com/GA102GL_A10": "0", "nvidia.com/gpu": "2"});
        assert_eq!(
            writes[1].body,
            json!({"status": {"capacity": want, "allocatable": want}})
        );
        let stored = api.get("/api/v1/nodes/gpu-a").unwrap();
        assert_eq!(
            stored["metadata"]["labels"]["nvidia.com/gpu.workload.config"],
            "container"
        );
        assert!(
            stored["metadata"]["labels"]
                .get("nvidia.com/gpu.deploy.sandbox-device-plugin")
                .is_none()
        );
        assert_eq!(stored["status"]["capacity"]["nvidia.com/gpu"], "2");
        assert_eq!(stored["status"]["capacity"]["cpu"], "16");
        assert_eq!(change.from.as_deref(), Some("vm-passthrough"));
        assert_eq!(
            change.advertised_before,
            BTreeMap::from([("nvidia.com/GA102GL_A10".to_string(), 2)])
        );
        assert!(change.advertised_after.is_empty(), "read back later");

        // Relabelled again to what it now is: the labels are patched (nothing changes), the
        // status is not written.
        let before = api.writes().len();
        let again = relabels.clone();
        let mut now = source.nodes[0].clone();
        now.labels = predict::relabelled(&now, WorkloadConfig::Container, None).labels;
        now.capacity.insert("nvidia.com/gpu".into(), "2".into());
        now.capacity
            .insert("nvidia.com/GA102GL_A10".into(), "0".into());
        now.allocatable = Some(now.capacity.clone());
        source.nodes[0] = now;
        with_trial(&source, &again, |t| {
            rt.block_on(relabel_node(&node_api, t, &again[0], None))
        })
        .unwrap();
        assert_eq!(api.writes()[before..], ["PATCH /api/v1/nodes/gpu-a"]);

        // A node the twin lacks: the API's 404, with the node named.
        api.remove("/api/v1/nodes/gpu-a");
        let err = with_trial(&source, &again, |t| {
            rt.block_on(relabel_node(&node_api, t, &again[0], None))
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("relabel node gpu-a in the twin"), "{err}");
        assert!(err.contains("not found"), "{err}");
    }

    #[test]
    fn pending_vms_become_vmis_under_the_sources_permitted_list() {
        let vmis = r#"{"kind": "List", "apiVersion": "v1", "items": [
          {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vm-ok", "namespace": "vms"},
           "spec": {"nodeSelector": {"nvidia.com/gpu.workload.config": "vm-passthrough"},
                    "domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/GA102GL_A10"}]},
                               "resources": {"requests": {"memory": "2Gi"}}}},
           "status": {"phase": "Pending"}},
          {"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
           "metadata": {"name": "vm-no", "namespace": "vms"},
           "spec": {"domain": {"devices": {"gpus": [{"name": "g", "deviceName": "nvidia.com/TU104GL_T4"}]}}},
           "status": {"phase": "Pending"}}]}"#;
        let mut source = source();
        source.pods = Some(gpuwl_core::decode::pods::read_pods_str(vmis, "vmis.json").unwrap());
        source.kubevirt = Some(gpuwl_core::model::kubevirt::PermittedHostDevices {
            source: gpuwl_core::model::kubevirt::HostDevicesSource::KubeVirt,
            object: "kubevirt/kubevirt".into(),
            present: true,
            host_devices_gate: Some(false),
            pci_host_devices: vec![gpuwl_core::model::kubevirt::PciHostDevice {
                selector: "10DE:2236".into(),
                resource_name: "nvidia.com/GA102GL_A10".into(),
                external_resource_provider: true,
            }],
            mediated_devices: Vec::new(),
            usb_host_devices: Vec::new(),
            launcher: Default::default(),
        });
        let copied: BTreeSet<&str> = ["gpu-a"].into_iter().collect();
        let (bound, pending, left_out) = select_pods(&source, &copied);
        assert!(bound.is_empty() && left_out.is_empty(), "{left_out:?}");
        // Without KubeVirt in the twin, a VMI with no launcher pod is left out, never
        // placed as a plain pod; a pending launcher pod stays a pod.
        let (none, pods, left) = split_vmis(pending.clone(), false);
        assert!(none.is_empty());
        assert!(pods.iter().all(|p| !p.is_vm()), "{pods:?}");
        assert_eq!(left.len(), 2, "{left:?}");
        assert!(
            left.iter()
                .all(|l| l.contains("with no launcher pod; KubeVirt decides")),
            "{left:?}"
        );
        let (vmis, pending, left) = split_vmis(pending, true);
        assert!(left.is_empty(), "{left:?}");
        assert_eq!(vmis.len(), 2);
        let twin_nodes: Vec<&NodeInfo> =
            source.nodes.iter().filter(|n| n.name == "gpu-a").collect();
        let hardware = BTreeMap::new();
        let trial = Trial {
            source: &source,
            relabels: &[],
            hardware: &hardware,
            twin_nodes: &twin_nodes,
            bound: &bound,
            pending: &pending,
            vmis: &vmis,
        };
        let api = fake_api::FakeApi::new();
        api.ready_nodes();
        api.insert(
            "/apis/kubevirt.io/v1",
            "kubevirts",
            json!({"metadata": {"name": "kubevirt", "namespace": "kubevirt"},
                   "spec": {"configuration": {"developerConfiguration": {"featureGates": []}}}}),
        );
        // Plays virt-handler's node publishing (the twin's emulation) once the node is there.
        let handler = api.clone();
        let published = std::thread::spawn(move || {
            while handler.get("/api/v1/nodes/gpu-a").is_none() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let rt = crate::testing::rt();
            let _in_rt = rt.enter();
            rt.block_on(crate::cluster::kubevirt::publish_node(
                &handler.client(),
                "gpu-a",
            ))
            .unwrap();
        });
        let rt = crate::testing::rt();
        let _in_rt = rt.enter();
        let client = api.client();
        let (by_key, vmis_by_twin) = rt
            .block_on(copy_source(&client, &trial, &mut |_: &str| {}))
            .unwrap();
        published.join().unwrap();
        assert!(by_key.is_empty());
        assert_eq!(
            vmis_by_twin.keys().collect::<Vec<_>>(),
            ["vms/vm-no", "vms/vm-ok"]
        );
        // The source's list in the CR (the rest of its configuration kept), then the VMIs.
        let cr = api
            .get("/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt")
            .unwrap();
        assert_eq!(
            cr["spec"]["configuration"]["permittedHostDevices"],
            json!({"pciHostDevices": [{"pciVendorSelector": "10DE:2236",
                                       "resourceName": "nvidia.com/GA102GL_A10",
                                       "externalResourceProvider": true}],
                   "mediatedDevices": []})
        );
        assert_eq!(
            cr["spec"]["configuration"]["developerConfiguration"],
            json!({"featureGates": []})
        );
        let writes = api.writes();
        let cr_patch = writes
            .iter()
            .position(|w| w == "PATCH /apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt")
            .unwrap();
        let vmi_posts: Vec<usize> = writes
            .iter()
            .enumerate()
            .filter(|(_, w)| {
                *w == "POST /apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances"
            })
            .map(|(i, _)| i)
            .collect();
        assert_eq!(vmi_posts.len(), 2, "{writes:?}");
        assert!(cr_patch < vmi_posts[0], "{writes:?}");
        let vm_ok = api
            .get("/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-ok")
            .unwrap();
        assert_eq!(
            vm_ok["spec"]["domain"]["devices"]["gpus"],
            json!([{"name": "gpu0", "deviceName": "nvidia.com/GA102GL_A10"}])
        );
        // The VMI's own memory, as written in the source (PodInfo::vm_memory): the twin's
        // virt-controller adds the launcher's overhead to it, as the cluster's would.
        assert_eq!(
            vm_ok["spec"]["domain"]["resources"]["requests"]["memory"],
            "2Gi"
        );
        assert_eq!(
            vm_ok["spec"]["nodeSelector"],
            json!({"nvidia.com/gpu.workload.config": "vm-passthrough"})
        );
        assert_eq!(
            vm_ok["metadata"]["labels"][objects::SOURCE_KIND_LABEL],
            "VirtualMachineInstance"
        );

        // Undecided until virt-controller acts: within the timeout, both keys come back.
        let undecided = rt
            .block_on(kubevirt::wait_rendered(
                &client,
                &vmis_by_twin,
                Duration::ZERO,
            ))
            .unwrap();
        assert_eq!(undecided, ["vms/vm-no", "vms/vm-ok"]);
        // virt-controller renders vm-ok's launcher pod and refuses vm-no.
        api.insert(
            "/api/v1",
            "pods",
            json!({"metadata": {"name": "virt-launcher-vm-ok-x7k2p", "namespace": "vms",
                                "labels": {"kubevirt.io": "virt-launcher"}},
                   "spec": {"containers": [{"name": "compute", "resources":
                       {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]},
                   "status": {"phase": "Pending"}}),
        );
        let message = "failed to render launch manifest: GPU nvidia.com/TU104GL_T4 is not permitted in permittedHostDevices configuration";
        api.modify(
            "/apis/kubevirt.io/v1/namespaces/vms/virtualmachineinstances/vm-no",
            |v| {
                v["status"]["conditions"] = json!([{"type": "Synchronized", "status": "False",
                    "reason": "FailedCreate", "message": message}]);
            },
        );
        let undecided = rt
            .block_on(kubevirt::wait_rendered(
                &client,
                &vmis_by_twin,
                Duration::from_secs(5),
            ))
            .unwrap();
        assert!(undecided.is_empty(), "{undecided:?}");
        // The refused one is still pending with virt-controller's words; the rendered one
        // stands for its VMI through its launcher pod.
        let nodes = rt
            .block_on(crate::input::live::list_nodes(&client))
            .unwrap();
        let pods = rt.block_on(crate::input::pods::list_pods(&client)).unwrap();
        let inputs = explain::Inputs::of_state(&nodes, &pods, None, source.kubevirt.as_ref());
        let refused = rt
            .block_on(kubevirt::refused(&client, &vmis_by_twin, &pods, inputs))
            .unwrap();
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].pod.pod, "vms/vm-no");
        assert_eq!(refused[0].scheduler_message.as_deref(), Some(message));
        assert_eq!(refused[0].cause_code, "not-permitted");
        let with = kubevirt::with_launchers(&by_key, &vmis_by_twin, &pods);
        assert_eq!(
            with.get("vms/virt-launcher-vm-ok-x7k2p").map(|p| p.key()),
            Some("vms/vm-ok".to_string())
        );
    }
}
