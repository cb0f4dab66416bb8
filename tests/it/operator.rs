//! The GPU Operator's own state: the operator-state dump of tests/data/operator (one node
//! per state, README.md there), `--cluster-policy` files, and the live ClusterPolicy on the
//! local control plane (CRD installed by the test).

use std::collections::BTreeMap;

use gpuwl::cluster::{self, UpOptions};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::{Value, json};

use crate::kit::{ClusterDown, gpuwl, one_cluster_at_a_time};

const D: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/operator");

fn data(f: &str) -> String {
    format!("{D}/{f}")
}

fn json_of(args: &[&str]) -> (i32, Value) {
    let (rc, out, err) = gpuwl(args);
    assert!(rc == 0 || rc == 1, "{args:?}: {err}");
    (rc, serde_json::from_str(&out).unwrap())
}

fn node<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == name)
        .unwrap_or_else(|| panic!("no node {name}"))
}

fn codes(n: &Value) -> Vec<&str> {
    n["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect()
}

#[test]
fn each_state_gets_its_code_and_the_lines_keep_their_contract() {
    let (rc, out, _) = gpuwl(&["check", &data("nodes.json")]);
    assert_eq!(rc, 1);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert!(lines.iter().all(|l| l.starts_with("MISMATCH=")), "{out}");
    assert!(lines.contains(&"MISMATCH=vg-failed label vm-vgpu expects a vGPU type resource, but the node advertises no GPU resource (operator state: vgpu.config.state=failed)"), "{out}");
    assert!(lines.contains(&"MISMATCH=ops-disabled label container expects a container-GPU resource, but the node advertises no GPU resource (operator state: nvidia.com/gpu.deploy.operands=false)"), "{out}");

    let (rc, doc) = json_of(&["check", &data("nodes.json"), "-o", "json"]);
    assert_eq!(rc, 1);
    assert_eq!(doc["clusterPolicy"]["status"], "not-read");
    for (name, code) in [
        ("vg-failed", "vgpu-config-failed"),
        ("mig-failed", "mig-config-failed"),
        ("mig-rebooting", "config-pending"),
        ("mig-rebooting", "operand-paused"),
        ("ops-disabled", "operands-disabled"),
        ("pt-ignored", "label-ignored"),
        ("vg-differs", "vgpu-config-type-differs"),
        ("gpu-no-operands", "gpu-present-without-operands"),
    ] {
        assert!(
            codes(node(&doc, name)).contains(&code),
            "{name}: {:?}",
            codes(node(&doc, name))
        );
    }
    // State findings never decide the verdict: mig-failed still advertises its GPU.
    assert_eq!(node(&doc, "mig-failed")["verdict"], "ok");
    assert_eq!(node(&doc, "vg-differs")["verdict"], "ok");
    let pt = node(&doc, "pt-by-deploy");
    assert_eq!(
        (&pt["effectiveWorkload"], &pt["workloadSource"]),
        (&json!("vm-passthrough"), &json!("deploy-labels"))
    );
}

#[test]
fn inventory_pools_follow_deploy_labels_and_the_cluster_policy() {
    let row = |doc: &Value, resource: &str| -> String {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == resource)
            .unwrap()["pool"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (_, doc) = json_of(&["inventory", "--nodes", &data("nodes.json"), "-o", "json"]);
    assert_eq!(row(&doc, "nvidia.com/GA102GL_A10"), "vm-passthrough");
    let (_, doc) = json_of(&[
        "inventory",
        "--nodes",
        &data("nodes.json"),
        "--cluster-policy",
        &data("clusterpolicy-disabled.yaml"),
        "-o",
        "json",
    ]);
    assert_eq!(doc["clusterPolicy"]["status"], "file");
    assert_eq!(doc["clusterPolicy"]["policy"]["sandboxEnabled"], false);
    for r in ["nvidia.com/GA102GL_A10", "nvidia.com/NVIDIA_A10-12Q"] {
        assert_eq!(row(&doc, r), "container", "{r}");
    }
    let (rc, text, _) = gpuwl(&[
        "inventory",
        "--nodes",
        &data("nodes.json"),
        "--cluster-policy",
        &data("clusterpolicy-passthrough-default.yaml"),
    ]);
    assert_eq!(rc, 0);
    assert!(
        text.contains(
            "Pools follow ClusterPolicy cluster-policy: sandbox workloads enabled, unlabelled nodes get vm-passthrough."
        ),
        "{text}"
    );
}

#[test]
fn disabled_sandbox_workloads_mark_every_vm_label_ignored() {
    let (_, doc) = json_of(&[
        "check",
        &data("nodes.json"),
        "--cluster-policy",
        &data("clusterpolicy-disabled.yaml"),
        "-o",
        "json",
    ]);
    for name in ["vg-failed", "pt-ignored", "vg-differs"] {
        let n = node(&doc, name);
        assert!(codes(n).contains(&"label-ignored"), "{name}");
        assert_eq!(n["workloadSource"], "cluster-policy");
        assert_eq!(n["effectiveWorkload"], "container");
    }
    assert!(!codes(node(&doc, "mig-failed")).contains(&"label-ignored"));
}

#[test]
fn explain_proposes_no_selector_value_that_no_node_carries() {
    // An unlabelled node is vm-passthrough by the ClusterPolicy default: a pod selecting
    // `...=vm-passthrough` cannot reach it, and the fix must not name that value.
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "kind: Pod\nmetadata: {name: p, namespace: d}\nspec:\n  nodeSelector: {nvidia.com/gpu.workload.config: container}\n  containers: [{name: c, resources: {limits: {nvidia.com/GA102GL_A10: 1}}}]\n",
    )
    .unwrap();
    let (rc, out, err) = gpuwl(&[
        "explain",
        "--pod",
        pod.to_str().unwrap(),
        "--nodes",
        &data("nodes.json"),
        "--cluster-policy",
        &data("clusterpolicy-passthrough-default.yaml"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "excluded: {err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["causeCode"], "excluded");
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        !fix.contains("workload.config=vm-passthrough"),
        "no node carries that label value: {fix}"
    );
    assert!(fix.starts_with("remove the nodeSelector"), "{fix}");
}

#[test]
fn bad_cluster_policy_file_is_exit_2_naming_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("cp.yaml");
    std::fs::write(
        &p,
        "kind: ClusterPolicy\nspec: {sandboxWorkloads: {enabled: maybe}}\n",
    )
    .unwrap();
    let (rc, out, err) = gpuwl(&[
        "check",
        &data("nodes.json"),
        "--cluster-policy",
        p.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2);
    assert!(out.is_empty());
    assert_eq!(
        err,
        format!(
            "gpuwl: {}: spec.sandboxWorkloads.enabled: expected true or false\n",
            p.display()
        )
    );
}

const NAME: &str = "gpuwl-test-operator";

/// A minimal ClusterPolicy CRD with an open schema (the real one is far larger; gpuwl
/// reads only a few fields).
pub(crate) fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterpolicies.nvidia.com"},
        "spec": {
            "group": "nvidia.com",
            "scope": "Cluster",
            "names": {"plural": "clusterpolicies", "singular": "clusterpolicy",
                      "kind": "ClusterPolicy", "listKind": "ClusterPolicyList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .unwrap()
}

async fn setup(kubeconfig: &std::path::Path, enabled: bool) {
    let client = cluster::client(kubeconfig, None).await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, label, resource) in [
        ("op-0", Some("vm-passthrough"), "nvidia.com/GA102GL_A10"),
        ("op-1", None, "nvidia.com/GA102GL_A10"),
    ] {
        let mut labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]);
        if let Some(l) = label {
            labels.insert("nvidia.com/gpu.workload.config".into(), l.into());
        }
        let node: Node = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
        }))
        .unwrap();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("node");
        let res = BTreeMap::from([(resource.to_string(), Quantity("2".into()))]);
        let patch = json!({"status": {"capacity": res, "allocatable": res}});
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("node status");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd())
        .await
        .expect("crd");
    let gvk = GroupVersionKind::gvk("nvidia.com", "v1", "ClusterPolicy");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusterpolicies");
    let api: Api<DynamicObject> = Api::all_with(client, &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy",
        "metadata": {"name": "cluster-policy"},
        "spec": {"sandboxWorkloads": {"enabled": enabled, "defaultWorkload": "vm-passthrough"}}
    }))
    .unwrap();
    // The CRD takes a moment to be served.
    for attempt in 0.. {
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => break,
            Err(e) if attempt < 50 => {
                let _ = e;
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Err(e) => panic!("create ClusterPolicy: {e}"),
        }
    }
}

#[test]
#[ignore = "needs local control plane"]
fn live_cluster_policy_decides_pools_and_label_ignored() {
    let _serial = one_cluster_at_a_time();
    let _ = cluster::down(NAME);
    // Stopped however the test ends.
    let _down = ClusterDown(NAME);
    let handle = cluster::up(&UpOptions {
        name: NAME.into(),
        progress: false,
        ..Default::default()
    })
    .expect("cluster up");
    let kc = handle.kubeconfig.to_str().unwrap();
    // No CRD yet: said so, never a failure.
    let (_, doc) = json_of(&["check", "--kubeconfig", kc, "-o", "json"]);
    assert_eq!(doc["clusterPolicy"]["status"], "absent-crd");
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(setup(&handle.kubeconfig, false));
    let (rc, doc) = json_of(&["check", "--kubeconfig", kc, "-o", "json"]);
    assert_eq!(doc["clusterPolicy"]["status"], "cluster");
    assert_eq!(doc["clusterPolicy"]["policy"]["name"], "cluster-policy");
    let op0 = node(&doc, "op-0");
    assert!(codes(op0).contains(&"label-ignored"), "{op0}");
    assert_eq!(op0["effectiveWorkload"], "container");
    // The line contract is the label's: op-0 advertises its device model.
    assert_eq!(rc, 0);
    let (_, inv) = json_of(&["inventory", "--kubeconfig", kc, "-o", "json"]);
    assert_eq!(inv["clusterPolicy"]["status"], "cluster");
    let pools: Vec<&str> = inv["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pool"].as_str().unwrap())
        .collect();
    assert_eq!(pools, ["container"], "sandbox workloads disabled: {inv}");
}
