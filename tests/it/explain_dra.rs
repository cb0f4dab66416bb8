//! `explain --dra` on files, to the attribute: a pod not created yet whose claim comes
//! from a ResourceClaimTemplate, on two nodes with one GPU each (`gpu-node-1` publishes
//! `index`, `gpu-node-2` does not), and the allocator's rules: a count no single node
//! serves is `too-large`; a version compared with a string is a runtime error
//! (`selector-error`) with the corrected expression; a missing attribute on a device the
//! allocator tries aborts too; `fitting` lists only the node whose device matches. Every
//! fix printed is a tested change (`remedy.actions`, issue 49): the count lowered, the
//! selector corrected or guarded with `has()`; where none places the pod, the rule's text
//! is a hint, said so.

use serde_json::{Value, json};

use crate::kit::gpuwl;

fn slice(node: &str, index: bool) -> Value {
    let mut attrs = json!({
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "driverVersion": {"version": "580.95.5"}
    });
    if index {
        attrs["index"] = json!({"int": 0});
    }
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": format!("{node}-gpus")},
        "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "pool": {"name": node},
            "devices": [{"name": "gpu-0", "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}}]}})
}

fn explain(selector: &str, count: i64, nodes: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut items = vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}),
    ];
    items.push(slice("gpu-node-1", true));
    items.push(slice("gpu-node-2", false));
    items.push(
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "a100", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": count,
            "selectors": [{"cel": {"expression": selector}}]}}]}}}}),
    );
    let dra = json!({"apiVersion": "v1", "kind": "List", "items": items});
    let node_items: Vec<Value> = nodes
        .iter()
        .map(|n| {
            json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": n, "labels": {"kubernetes.io/hostname": n}},
            "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"}}})
        })
        .collect();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"claims": [{"name": "gpu"}]}}],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "a100"}]}});
    let w = |n: &str, v: &Value| {
        let p = dir.path().join(n);
        std::fs::write(&p, v.to_string()).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let (d, n, p) = (
        w("dra.json", &dra),
        w(
            "nodes.json",
            &json!({"apiVersion": "v1", "kind": "List", "items": node_items}),
        ),
        w("pod.json", &pod),
    );
    let (code, out, err) = gpuwl(&[
        "explain", "--pod", &p, "--nodes", &n, "--dra", &d, "-o", "json",
    ]);
    // Exit 0: scheduled or fits now; 1: a blocking cause was found; never 2 or 3 here.
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let fits = matches!(doc["causeCode"].as_str(), Some("scheduled" | "fits-now"));
    assert_eq!(code, if fits { 0 } else { 1 }, "{err}");
    doc
}

#[test]
fn a_template_pod_is_explained_with_the_templates_requests() {
    let doc = explain(
        "device.attributes['gpu.nvidia.com'].index == 0",
        1,
        &["gpu-node-1"],
    );
    assert_eq!(doc["causeCode"], "fits-now", "{doc}");
    assert_eq!(doc["fitting"], json!(["gpu-node-1"]));
    assert_eq!(doc["claims"][0]["fromTemplate"], true);
}

#[test]
fn a_count_no_single_node_has_is_too_large() {
    let doc = explain("true", 2, &["gpu-node-1", "gpu-node-2"]);
    assert_eq!(doc["causeCode"], "too-large", "{doc}");
    assert_eq!(doc["fitting"], json!([]));
    let cause = doc["cause"].as_str().unwrap();
    assert!(cause.contains("at most 1 on one node"), "{cause}");
    // The tested fix: count 1, placed on the first node.
    let r = &doc["remedy"];
    assert_eq!(r["sufficient"], true, "{r}");
    assert_eq!(r["actions"][0]["kind"], "count", "{r}");
    assert_eq!(r["actions"][0]["from"], 2);
    assert_eq!(r["actions"][0]["to"], 1);
    assert_eq!(r["actions"][0]["claim"], "template a100");
    assert_eq!(r["node"], "gpu-node-1");
}

fn action(doc: &Value) -> &Value {
    assert_eq!(doc["remedy"]["sufficient"], true, "{doc}");
    &doc["remedy"]["actions"][0]
}

#[test]
fn a_missing_attribute_on_one_node_is_fixed_with_a_has_guard_else_it_is_a_hint() {
    let sel = "device.attributes['gpu.nvidia.com'].index == 0";
    let doc = explain(sel, 1, &["gpu-node-1", "gpu-node-2"]);
    assert_eq!(doc["causeCode"], "selector-error", "{doc}");
    let a = action(&doc);
    assert_eq!(a["kind"], "selector");
    assert_eq!(a["from"], sel);
    assert_eq!(
        a["to"],
        format!("has(device.attributes['gpu.nvidia.com'].index) && ({sel})")
    );
    assert_eq!(doc["remedy"]["node"], "gpu-node-1");
    // Only the node without the attribute: the guard turns the error into no match, which
    // places nothing; the rule's text is then a hint, not a fix.
    let doc = explain(sel, 1, &["gpu-node-2"]);
    assert_eq!(doc["causeCode"], "selector-error", "{doc}");
    assert_eq!(doc["remedy"]["sufficient"], false, "{doc}");
    let fix = doc["fix"].as_str().unwrap();
    assert!(fix.starts_with("hint, not a tested fix"), "{fix}");
}

#[test]
fn a_version_compared_with_a_string_is_a_selector_error_with_the_fix() {
    let doc = explain(
        "device.attributes['gpu.nvidia.com'].driverVersion == '580.95.5'",
        1,
        &["gpu-node-1", "gpu-node-2"],
    );
    assert_eq!(doc["causeCode"], "selector-error", "{doc}");
    let cause = doc["cause"].as_str().unwrap();
    assert!(cause.contains("no such overload"), "{cause}");
    assert!(cause.contains("gpu.nvidia.com/gpu-node-1/gpu-0"), "{cause}");
    let fix = doc["fix"].as_str().unwrap();
    assert!(
        fix.contains(
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.95.5')) == 0"
        ),
        "{fix}"
    );
    // Tested: the typed comparison places the pod.
    let a = action(&doc);
    assert_eq!(a["kind"], "selector");
    assert_eq!(
        a["to"],
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('580.95.5')) == 0"
    );
    // A missing attribute on a device the allocator tries aborts too.
    let doc = explain(
        "device.attributes['gpu.nvidia.com'].index == 0",
        1,
        &["gpu-node-2"],
    );
    assert_eq!(doc["causeCode"], "selector-error", "{doc}");
    assert!(
        doc["cause"]
            .as_str()
            .unwrap()
            .contains("no such key: index"),
        "{doc}"
    );
}

#[test]
fn a_misspelled_value_names_the_published_one() {
    let doc = explain(
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-A100-SXM4-80GB'",
        1,
        &["gpu-node-1", "gpu-node-2"],
    );
    assert_eq!(doc["causeCode"], "no-matching-device", "{doc}");
    assert!(
        doc["fix"]
            .as_str()
            .unwrap()
            .contains("productName == 'NVIDIA A100-SXM4-80GB'"),
        "{doc}"
    );
    let a = action(&doc);
    assert_eq!(a["kind"], "selector");
    assert_eq!(
        a["to"],
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB'"
    );
}
