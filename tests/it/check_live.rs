//! `gpuwl check` against a live API server: the project's local control plane
//! (`gpuwl cluster`, real etcd + kube-apiserver, kwok nodes), under its own cluster name
//! `gpuwl-test-check`. Builds the control plane first when it is not cached (minutes).

use std::collections::BTreeMap;
use std::process::Command;

use assert_cmd::cargo::cargo_bin;
use gpuwl::cluster::{self, UpOptions};
use gpuwl_core::model::workload::LABEL_KEY;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

use crate::kit::one_cluster_at_a_time;

const NAME: &str = "gpuwl-test-check";

async fn setup(kubeconfig: &std::path::Path) {
    let client = cluster::client(kubeconfig, None).await.expect("client");
    let nodes: Api<Node> = Api::all(client.clone());
    for (name, label, resource, amount) in [
        ("live-0", Some("container"), "nvidia.com/gpu", "4"),
        ("live-1", Some("vm-passthrough"), "nvidia.com/gpu", "2"),
        ("live-2", Some("vm-vgpu"), "nvidia.com/NVIDIA_A10-12Q", "4"),
        ("live-3", None, "nvidia.com/GA102GL_A10", "2"),
        (
            "live-4",
            Some("vm-passthrough"),
            "nvidia.com/GA102GL_A10",
            "2",
        ),
    ] {
        let mut labels = BTreeMap::from([("kubernetes.io/hostname".to_string(), name.to_string())]);
        if let Some(l) = label {
            labels.insert(LABEL_KEY.into(), l.into());
        }
        let node: Node = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": { "name": name, "labels": labels },
        }))
        .unwrap();
        nodes
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        let res = BTreeMap::from([
            ("cpu".to_string(), Quantity("32".into())),
            ("pods".to_string(), Quantity("110".into())),
            (resource.to_string(), Quantity(amount.into())),
        ]);
        let patch = serde_json::json!({ "status": { "capacity": res, "allocatable": res } });
        nodes
            .patch_status(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patch node status");
    }
    // Pagination: pages of 2 give the same nodes as one list.
    let mut paged = Vec::new();
    let n = gpuwl::input::live::for_each_node_paged(&client, 2, |n| paged.push(n.name))
        .await
        .expect("paged list");
    let all = gpuwl::input::live::list_nodes(&client).await.expect("list");
    assert_eq!(n, all.len());
    assert_eq!(
        paged,
        all.iter().map(|n| n.name.clone()).collect::<Vec<_>>()
    );
    assert!(n >= 5);
}

#[test]
#[ignore = "needs local control plane"]
fn check_reads_the_live_cluster() {
    let _serial = one_cluster_at_a_time();
    let _ = cluster::down(NAME);
    let handle = cluster::up(&UpOptions {
        name: NAME.into(),
        progress: false,
        ..Default::default()
    })
    .expect("cluster up");
    let result = std::panic::catch_unwind(|| {
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(setup(&handle.kubeconfig));
        let kc = handle.kubeconfig.to_str().unwrap();
        let out = Command::new(cargo_bin("gpuwl"))
            .args(["check", "--kubeconfig", kc])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(1),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "MISMATCH=live-1 label vm-passthrough expects a device-model resource, but the node advertises nvidia.com/gpu=2 (container GPU)\n"
        );
        let out = Command::new(cargo_bin("gpuwl"))
            .args(["check", "-o", "json"])
            .env("KUBECONFIG", kc)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["summary"]["labelled"], 4);
        assert_eq!(v["summary"]["mismatched"], 1);
        let unl = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == "live-3")
            .unwrap();
        // Errors first: the default workload (container) does not serve its passthrough
        // name (effective-workload-differs), then the unlabelled-node warning.
        let codes: Vec<&str> = unl["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["code"].as_str().unwrap())
            .collect();
        assert_eq!(codes, ["effective-workload-differs", "unlabelled-gpu-node"]);
        let out = Command::new(cargo_bin("gpuwl"))
            .args(["check", "--kubeconfig", kc, "--context", "no-such-context"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2));
        assert!(out.stdout.is_empty());
    });
    cluster::down(NAME).expect("cluster down");
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
}
