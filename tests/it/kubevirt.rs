//! `gpuwl kubevirt generate|check` on files (tests/data/explain/vgpu-type-not-permitted and
//! tests/data/kubevirt), both CR kinds, bad input; and `kubevirt check` live against the
//! local control plane (`#[ignore]`d: a KubeVirt CRD and CR installed beside the lab).

use std::path::Path;

use serde_json::{Value, json};

use crate::kit::{
    ClusterDown, client_for, create_node, gpuwl, gpuwl_ok, node, one_cluster_at_a_time,
    set_node_resources,
};

const CASE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/explain/vgpu-type-not-permitted"
);
const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/kubevirt");

fn case(f: &str) -> String {
    format!("{CASE}/{f}")
}

fn data(f: &str) -> String {
    format!("{DATA}/{f}")
}

#[test]
fn generate_keeps_the_crs_entries_and_adds_the_missing_names() {
    // Without the CR there is no whole list to carry: a clear error, nothing on stdout.
    let (rc, out, err) = gpuwl(&["kubevirt", "generate", "--nodes", &case("nodes.json")]);
    assert_eq!((rc, out.as_str()), (2, ""), "{err}");
    assert!(
        err.contains("the merged list needs the CR's current entries")
            && err.contains("--patch json-add"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    // The CR permits GA102GL_A10 and NVIDIA_A10-24Q; the nodes advertise GA102GL_A10 and
    // NVIDIA_A10-12Q: the mediatedDevices list is carried whole, A10-24Q kept first.
    let args = [
        "kubevirt",
        "generate",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &case("kubevirt.yaml"),
    ];
    let (rc, out, err) = gpuwl(&args);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        err,
        "gpuwl: nvidia.com/GA102GL_A10: already listed in KubeVirt kubevirt/kubevirt: left as it is (`gpuwl kubevirt check` judges it)\n"
    );
    assert!(
        out.contains(
            "# Apply: kubectl patch kubevirt kubevirt -n kubevirt --type merge --patch-file FILE\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(
            "spec:
  configuration:
    permittedHostDevices:
      mediatedDevices:
      - externalResourceProvider: true
        mdevNameSelector: NVIDIA A10-24Q
        resourceName: nvidia.com/NVIDIA_A10-24Q
      - externalResourceProvider: true
        mdevNameSelector: NVIDIA A10-12Q
        resourceName: nvidia.com/NVIDIA_A10-12Q
"
        ),
        "{out}"
    );
    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let (rc, out, err) = gpuwl(&json_args);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        json!({"spec": {"configuration": {"permittedHostDevices": {
            "mediatedDevices": [
                {"mdevNameSelector": "NVIDIA A10-24Q", "resourceName": "nvidia.com/NVIDIA_A10-24Q",
                 "externalResourceProvider": true},
                {"mdevNameSelector": "NVIDIA A10-12Q", "resourceName": "nvidia.com/NVIDIA_A10-12Q",
                 "externalResourceProvider": true}]
        }}}})
    );
    assert!(
        err.contains("Apply: kubectl patch kubevirt kubevirt -n kubevirt --type merge"),
        "{err}"
    );
    // Deterministic: the same bytes twice.
    assert_eq!(gpuwl_ok(&json_args), out);

    // JSON-patch add operations: only the missing name, appended.
    let mut add_args = json_args.clone();
    add_args.extend(["--patch", "json-add"]);
    let (rc, out, err) = gpuwl(&add_args);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap(),
        json!([{"op": "add",
                "path": "/spec/configuration/permittedHostDevices/mediatedDevices/-",
                "value": {"mdevNameSelector": "NVIDIA A10-12Q",
                          "resourceName": "nvidia.com/NVIDIA_A10-12Q",
                          "externalResourceProvider": true}}])
    );
    assert!(err.contains("--type json --patch-file FILE"), "{err}");
    // Without the CR: every name appended, and a warning that says what that risks.
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "generate",
        "--nodes",
        &case("nodes.json"),
        "--patch",
        "json-add",
    ]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(out.matches("- op: add").count(), 2, "{out}");
    assert!(err.contains("no CR read: every entry is appended"), "{err}");
    // --for contradicting the CR read.
    let (rc, _, err) = gpuwl(&[
        "kubevirt",
        "generate",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &case("kubevirt.yaml"),
        "--for",
        "hyperconverged",
    ]);
    assert_eq!(rc, 2, "{err}");
    assert!(
        err.contains("--for hyperconverged but the CR read is KubeVirt \"kubevirt/kubevirt\""),
        "{err}"
    );
}

#[test]
fn generate_for_hyperconverged_and_several_ids() {
    // An HCO CR with no list yet: the patch holds the new lists only.
    let dir = tempfile::tempdir().unwrap();
    let hco = dir.path().join("hco.json");
    std::fs::write(
        &hco,
        r#"{"kind": "HyperConverged", "metadata": {"name": "kubevirt-hyperconverged", "namespace": "openshift-cnv"}, "spec": {}}"#,
    )
    .unwrap();
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "generate",
        "--nodes",
        &data("nodes-many.yaml"),
        "--kubevirt",
        hco.to_str().unwrap(),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let pci = &v["spec"]["permittedHostDevices"]["pciHostDevices"];
    let got: Vec<(&str, &str)> = pci
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e["externalResourceProvider"], true);
            assert!(e.get("pciVendorSelector").is_none(), "{e}");
            (
                e["resourceName"].as_str().unwrap(),
                e["pciDeviceSelector"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("nvidia.com/26b5", "10DE:26B5"),
            ("nvidia.com/GA100_A100_PCIE_40GB", "10DE:20B1"),
            ("nvidia.com/GA100_A100_PCIE_40GB", "10DE:20F1"),
            ("nvidia.com/TU104GL_TESLA_T4", "10DE:1EB8"),
        ]
    );
    assert_eq!(
        v["spec"]["permittedHostDevices"]["mediatedDevices"],
        json!([
            {"mdevNameSelector": "GRID T4-2Q", "resourceName": "nvidia.com/GRID_T4-2Q",
             "externalResourceProvider": true},
            {"mdevNameSelector": "NVIDIA A100-1-5C", "resourceName": "nvidia.com/NVIDIA_A100-1-5C",
             "externalResourceProvider": true},
        ])
    );
    assert!(
        err.contains("gpuwl: nvidia.com/GA100_A100_PCIE_40GB: the name stands for 2 PCI devices (10DE:20B1 (GA100 [A100 PCIe 40GB]), 10DE:20F1 (GA100 [A100 PCIe 40GB])); one pciHostDevices entry each\n"),
        "{err}"
    );
    assert!(
        err.contains(
            "Apply: kubectl patch hyperconverged kubevirt-hyperconverged -n openshift-cnv"
        ),
        "{err}"
    );
    // Container GPUs and stale zeros are not permitted.
    assert!(
        !out.contains("nvidia.com/gpu") && !out.contains("GA102GL_A10"),
        "{out}"
    );
}

#[test]
fn check_finds_the_missing_and_the_stray_vgpu_type() {
    let args = [
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &case("kubevirt.yaml"),
    ];
    let (rc, out, err) = gpuwl(&args);
    assert_eq!(rc, 1, "{out}{err}");
    assert_eq!(err, "");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with("ERROR advertised-not-permitted nvidia.com/NVIDIA_A10-12Q: advertised by gpu-vg-1 (4) but not permitted in KubeVirt kubevirt/kubevirt spec.configuration.permittedHostDevices"),
        "{out}"
    );
    assert!(
        lines[0].ends_with("; add to spec.configuration.permittedHostDevices: mediatedDevices: {mdevNameSelector: \"NVIDIA A10-12Q\", resourceName: nvidia.com/NVIDIA_A10-12Q, externalResourceProvider: true}"),
        "{out}"
    );
    assert!(
        lines[1].starts_with(
            "WARNING permitted-not-advertised nvidia.com/NVIDIA_A10-24Q: permitted (mediatedDevices[0])"
        ),
        "{out}"
    );
    assert!(
        lines[1].ends_with("; did you mean nvidia.com/NVIDIA_A10-12Q (2 edits away)?"),
        "{out}"
    );

    let mut json_args = args.to_vec();
    json_args.extend(["-o", "json"]);
    let (rc, out, _) = gpuwl(&json_args);
    assert_eq!(rc, 1);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["exitCode"], 1);
    assert_eq!(v["source"], "KubeVirt");
    assert_eq!(v["object"], "kubevirt/kubevirt");
    let findings: Vec<(&str, &str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            assert!(
                f["message"].is_string() && f.get("suggestion").is_some(),
                "{f}"
            );
            (
                f["code"].as_str().unwrap(),
                f["severity"].as_str().unwrap(),
                f["resource"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        findings,
        [
            (
                "advertised-not-permitted",
                "error",
                "nvidia.com/NVIDIA_A10-12Q"
            ),
            (
                "permitted-not-advertised",
                "warning",
                "nvidia.com/NVIDIA_A10-24Q"
            ),
        ]
    );
    assert_eq!(
        v["summary"],
        json!({"advertised": 2, "permittedAdvertised": 1, "entries": 2, "errors": 1, "warnings": 1})
    );

    let mut yaml_args = args.to_vec();
    yaml_args.extend(["-o", "yaml"]);
    let (rc, out, _) = gpuwl(&yaml_args);
    assert_eq!(rc, 1);
    assert!(out.contains("- code: advertised-not-permitted\n"), "{out}");
}

#[test]
fn check_hyperconverged_file() {
    // A HyperConverged CR (in a List) that permits both names: OK, exit 0.
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &data("hyperconverged.yaml"),
    ]);
    assert_eq!((rc, err.as_str()), (0, ""), "{out}");
    assert_eq!(
        out,
        "OK: all 2 passthrough model and vGPU type names the nodes advertise are permitted in HyperConverged openshift-cnv/kubevirt-hyperconverged\n"
    );
    // The same names with KubeVirt's field name, a wrong id, the internal provider and a
    // duplicate: every error code once.
    let (rc, out, _) = gpuwl(&[
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &data("hyperconverged-wrong.json"),
    ]);
    assert_eq!(rc, 1, "{out}");
    let codes: Vec<&str> = out
        .lines()
        .map(|l| l.splitn(4, ' ').take(3).last().unwrap())
        .collect();
    let heads: Vec<String> = out
        .lines()
        .map(|l| l.splitn(4, ' ').take(3).collect::<Vec<_>>().join(" "))
        .collect();
    assert_eq!(
        heads,
        [
            "ERROR duplicate-resource-name nvidia.com/GA102GL_A10:",
            "ERROR internal-provider-for-operator-resource nvidia.com/GA102GL_A10:",
            "ERROR selector-mismatch nvidia.com/GA102GL_A10:",
            "ERROR selector-mismatch nvidia.com/NVIDIA_A10-12Q:",
        ],
        "{out} {codes:?}"
    );
    assert!(
        out.contains("pciHostDevices[1] pciDeviceSelector \"10DE:1EB8\" is not the PCI id of nvidia.com/GA102GL_A10 (10DE:2236 (GA102GL [A10])) (\"10DE:1EB8\" is TU104GL [Tesla T4], advertised as nvidia.com/TU104GL_TESLA_T4); set pciDeviceSelector: \"10DE:2236\""),
        "{out}"
    );
}

#[test]
fn bad_input_exits_2_naming_the_file() {
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        &case("vm.yaml"),
    ]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert!(
        err.starts_with("gpuwl: ")
            && err.contains("vm.yaml: kind \"VirtualMachine\" is not KubeVirt or HyperConverged"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("kv.yaml");
    std::fs::write(
        &bad,
        "kind: KubeVirt\nspec: {configuration: {permittedHostDevices: {mediatedDevices: [{mdevNameSelector: [x]}]}}}\n",
    )
    .unwrap();
    let (rc, _, err) = gpuwl(&[
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        bad.to_str().unwrap(),
    ]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("kv.yaml: spec.configuration.permittedHostDevices.mediatedDevices[0].mdevNameSelector: expected a scalar"),
        "{err}"
    );

    let bad_nodes = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/check/bad-quantity.json"
    );
    for sub in [
        vec!["kubevirt", "generate", "--nodes", bad_nodes],
        vec![
            "kubevirt",
            "check",
            "--nodes",
            bad_nodes,
            "--kubevirt",
            &case("kubevirt.yaml"),
        ],
    ] {
        let (rc, out, err) = gpuwl(&sub);
        assert_eq!((rc, out.as_str()), (2, ""), "{sub:?}");
        assert!(
            err.contains("bad-quantity.json: node n-bad: status.allocatable[\"nvidia.com/gpu\"]"),
            "{err}"
        );
    }

    let missing = dir.path().join("absent.json");
    let (rc, _, err) = gpuwl(&["kubevirt", "generate", "--nodes", missing.to_str().unwrap()]);
    assert_eq!(rc, 2);
    assert!(err.contains("absent.json: cannot read"), "{err}");

    // --nodes without --kubevirt, two stdins, an unknown --for: usage errors, exit 2.
    let (rc, _, _) = gpuwl(&["kubevirt", "check", "--nodes", &case("nodes.json")]);
    assert_eq!(rc, 2);
    let (rc, _, err) = gpuwl(&["kubevirt", "check", "--nodes", "-", "--kubevirt", "-"]);
    assert_eq!(rc, 2);
    assert!(err.contains("stdin is read once"), "{err}");
    let (rc, _, _) = gpuwl(&["kubevirt", "generate", "--for", "openshift"]);
    assert_eq!(rc, 2);
}

#[test]
fn names_from_files_cannot_forge_lines() {
    let dir = tempfile::tempdir().unwrap();
    let kv = dir.path().join("kv.json");
    std::fs::write(
        &kv,
        r#"{"kind":"KubeVirt","metadata":{"name":"kubevirt","namespace":"kubevirt"},
            "spec":{"configuration":{"permittedHostDevices":{"pciHostDevices":[
              {"pciVendorSelector":"10DE:2236","resourceName":"nvidia.com/GA102GL_A10","externalResourceProvider":true},
              {"pciVendorSelector":"\u001b[2J","resourceName":"nvidia.com/X\nOK: all fine\u001b[0m","externalResourceProvider":true}],
              "mediatedDevices":[{"mdevNameSelector":"NVIDIA A10-12Q","resourceName":"nvidia.com/NVIDIA_A10-12Q","externalResourceProvider":true}]}}}}"#,
    )
    .unwrap();
    let (rc, out, _) = gpuwl(&[
        "kubevirt",
        "check",
        "--nodes",
        &case("nodes.json"),
        "--kubevirt",
        kv.to_str().unwrap(),
    ]);
    assert_eq!(rc, 0, "{out}");
    assert!(!out.contains('\u{1b}'), "{out:?}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(
        lines[0].starts_with(
            "WARNING permitted-not-advertised nvidia.com/X\\nOK: all fine\\u{1b}[0m: "
        ),
        "{out}"
    );
    assert!(lines[1].starts_with("OK: "), "{out}");
}

/// A CustomResourceDefinition for `kubevirts.kubevirt.io` with an open schema: enough for
/// the API server to store a KubeVirt CR (KubeVirt's own CRD validates much more).
const KUBEVIRT_CRD: &str = r#"{
  "apiVersion": "apiextensions.k8s.io/v1",
  "kind": "CustomResourceDefinition",
  "metadata": {"name": "kubevirts.kubevirt.io"},
  "spec": {
    "group": "kubevirt.io",
    "names": {"kind": "KubeVirt", "listKind": "KubeVirtList", "plural": "kubevirts",
              "singular": "kubevirt"},
    "scope": "Namespaced",
    "versions": [{"name": "v1", "served": true, "storage": true,
      "schema": {"openAPIV3Schema": {"type": "object",
        "x-kubernetes-preserve-unknown-fields": true}}}]
  }
}"#;

/// The lab's cluster advertises nvidia.com/GA102GL_A10 (lab-node-1) and
/// nvidia.com/NVIDIA_A10-12Q (lab-node-2). The CR permits the passthrough name with
/// KubeVirt's own device plugin and a T4 no node has.
const KUBEVIRT_CR: &str = r#"{
  "apiVersion": "kubevirt.io/v1",
  "kind": "KubeVirt",
  "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
  "spec": {"configuration": {"permittedHostDevices": {
    "pciHostDevices": [
      {"pciVendorSelector": "10DE:2236", "resourceName": "nvidia.com/GA102GL_A10"},
      {"pciVendorSelector": "10DE:1EB8", "resourceName": "nvidia.com/TU104GL_TESLA_T4",
       "externalResourceProvider": true}
    ]
  }}}
}"#;

/// Installs the KubeVirt CRD (open schema), the `kubevirt` namespace and the CR above.
pub(crate) async fn install_kubevirt(kubeconfig: &Path) {
    install_kubevirt_with(kubeconfig, KUBEVIRT_CR).await
}

/// The KubeVirt CRs' API (`kubevirt` namespace).
fn kubevirts(client: kube::Client) -> kube::Api<kube::api::DynamicObject> {
    let ar = kube::api::ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("kubevirt.io", "v1", "KubeVirt"),
        "kubevirts",
    );
    kube::Api::namespaced_with(client, "kubevirt", &ar)
}

/// Applies `patch` to the CR kubevirt/kubevirt as a JSON merge patch (RFC 7386).
pub(crate) async fn merge_patch_kubevirt(
    kubeconfig: &Path,
    patch: &Value,
) -> Result<(), kube::Error> {
    let api = kubevirts(client_for(kubeconfig).await);
    api.patch(
        "kubevirt",
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(patch),
    )
    .await
    .map(|_| ())
}

/// Applies JSON-patch operations (RFC 6902) to the CR kubevirt/kubevirt (a plain PATCH with
/// `application/json-patch+json`: kube's typed JSON patch needs a feature gpuwl does not use).
async fn json_patch_kubevirt(kubeconfig: &Path, ops: &Value) -> Result<Value, kube::Error> {
    let client = client_for(kubeconfig).await;
    let req = http::Request::patch("/apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt")
        .header("Content-Type", "application/json-patch+json")
        .body(serde_json::to_vec(ops).unwrap())
        .unwrap();
    client.request::<Value>(req).await
}

/// Installs the KubeVirt CRD (open schema), the `kubevirt` namespace and `cr` (JSON).
pub(crate) async fn install_kubevirt_with(kubeconfig: &Path, cr: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, DynamicObject, PostParams};

    let client = client_for(kubeconfig).await;
    let pp = PostParams::default();
    let ok_or_exists = |r: Result<(), kube::Error>| match r {
        Ok(()) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("{e}"),
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd: CustomResourceDefinition = serde_json::from_str(KUBEVIRT_CRD).unwrap();
    ok_or_exists(crds.create(&pp, &crd).await.map(|_| ()));
    let nss: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "kubevirt"}})).unwrap();
    ok_or_exists(nss.create(&pp, &ns).await.map(|_| ()));
    let kvs: Api<DynamicObject> = kubevirts(client);
    let cr: DynamicObject = serde_json::from_str(cr).unwrap();
    // The CRD takes a moment to be served.
    for attempt in 0.. {
        match kvs.create(&pp, &cr).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 409 => break,
            Err(e) if attempt < 100 => {
                let _ = e;
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => panic!("creating the KubeVirt CR: {e}"),
        }
    }
}

const CLUSTER: &str = "gpuwl-test-kubevirt";

#[test]
#[ignore = "needs local control plane"]
fn check_live_after_the_lab() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let (_root, kubeconfig) = crate::kit::lab_cluster(CLUSTER);
    let kubeconfig = kubeconfig.as_str();

    // No KubeVirt CRD yet: a clear message, exit 2.
    let (rc, out, err) = gpuwl(&["kubevirt", "check", "--kubeconfig", kubeconfig]);
    assert_eq!((rc, out.as_str()), (2, ""), "{err}");
    assert!(
        err.starts_with("gpuwl: no KubeVirt CR found") && err.contains("pass --kubevirt FILE"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");

    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(install_kubevirt(Path::new(kubeconfig)));

    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "check",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["source"], "KubeVirt");
    assert_eq!(v["object"], "kubevirt/kubevirt");
    let findings: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["code"].as_str().unwrap(), f["resource"].as_str().unwrap()))
        .collect();
    assert_eq!(
        findings,
        [
            (
                "internal-provider-for-operator-resource",
                "nvidia.com/GA102GL_A10"
            ),
            ("advertised-not-permitted", "nvidia.com/NVIDIA_A10-12Q"),
            ("permitted-not-advertised", "nvidia.com/TU104GL_TESLA_T4"),
        ],
        "{out}"
    );

    // The generated patch, applied by the API server, adds the missing name and keeps the
    // entries the CR had (the internal provider stays an error: generate only adds).
    let patch = gpuwl_ok(&[
        "kubevirt",
        "generate",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    let patch: Value = serde_json::from_str(&patch).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(merge_patch_kubevirt(Path::new(kubeconfig), &patch))
        .unwrap();
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "check",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    assert_eq!(rc, 1, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let findings: Vec<(&str, &str)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["code"].as_str().unwrap(), f["resource"].as_str().unwrap()))
        .collect();
    assert_eq!(
        findings,
        [
            (
                "internal-provider-for-operator-resource",
                "nvidia.com/GA102GL_A10"
            ),
            ("permitted-not-advertised", "nvidia.com/TU104GL_TESLA_T4"),
        ],
        "{out}"
    );
}

const GENERATE_CLUSTER: &str = "gpuwl-it-kv-generate";

/// A CR that permits a non-NVIDIA device only (an Intel QAT function), as another team
/// would have it.
const FOREIGN_CR: &str = r#"{
  "apiVersion": "kubevirt.io/v1",
  "kind": "KubeVirt",
  "metadata": {"name": "kubevirt", "namespace": "kubevirt"},
  "spec": {"configuration": {"permittedHostDevices": {
    "pciHostDevices": [
      {"pciVendorSelector": "8086:4940", "resourceName": "intel.com/qat",
       "externalResourceProvider": true}
    ]
  }}}
}"#;

/// Creates node `name` advertising `resources` (plain objects: `generate` reads only their
/// allocatable).
async fn node_advertising(client: &kube::Client, name: &str, resources: Value) {
    create_node(client, node(name, json!({}))).await;
    set_node_resources(client, name, resources).await;
}

/// The resource names of the live CR's list `list`, in order.
async fn listed(kubeconfig: &Path, list: &str) -> Vec<String> {
    let cr = kubevirts(client_for(kubeconfig).await)
        .get("kubevirt")
        .await
        .unwrap();
    cr.data["spec"]["configuration"]["permittedHostDevices"][list]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["resourceName"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "needs local control plane"]
fn generate_applied_by_the_api_server_keeps_a_foreign_device() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(GENERATE_CLUSTER);
    let kubeconfig = crate::kit::own_cluster(GENERATE_CLUSTER, &["--nodes", "0"]);
    let kubeconfig = kubeconfig.as_str();
    let kc = Path::new(kubeconfig);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = client_for(kc).await;
        node_advertising(&client, "kv-gen-pt", json!({"nvidia.com/GA102GL_A10": "2"})).await;
        node_advertising(
            &client,
            "kv-gen-vg",
            json!({"nvidia.com/NVIDIA_A10-12Q": "4"}),
        )
        .await;
        install_kubevirt_with(kc, FOREIGN_CR).await;
    });

    // The default: a merge patch carrying the pciHostDevices list whole.
    let merged = gpuwl_ok(&[
        "kubevirt",
        "generate",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    ]);
    let merged: Value = serde_json::from_str(&merged).unwrap();
    assert!(
        merged["metadata"]["resourceVersion"].is_string(),
        "{merged}"
    );
    rt.block_on(merge_patch_kubevirt(kc, &merged)).unwrap();
    assert_eq!(
        rt.block_on(listed(kc, "pciHostDevices")),
        ["intel.com/qat", "nvidia.com/GA102GL_A10"]
    );
    assert_eq!(
        rt.block_on(listed(kc, "mediatedDevices")),
        ["nvidia.com/NVIDIA_A10-12Q"]
    );
    // The same patch again, now stale (the CR changed since it was read): refused, nothing
    // dropped.
    let err = rt.block_on(merge_patch_kubevirt(kc, &merged)).unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 409),
        "{err}"
    );
    // kubevirt check agrees: every advertised name permitted, the foreign one untouched.
    let out = gpuwl_ok(&["kubevirt", "check", "--kubeconfig", kubeconfig]);
    assert_eq!(
        out,
        "OK: all 2 passthrough model and vGPU type names the nodes advertise are permitted in KubeVirt kubevirt/kubevirt\n"
    );

    // A third name, added with JSON-patch add operations.
    rt.block_on(async {
        let client = client_for(kc).await;
        node_advertising(
            &client,
            "kv-gen-t4",
            json!({"nvidia.com/TU104GL_TESLA_T4": "1"}),
        )
        .await;
    });
    let ops = gpuwl_ok(&[
        "kubevirt",
        "generate",
        "--kubeconfig",
        kubeconfig,
        "--patch",
        "json-add",
        "-o",
        "json",
    ]);
    let ops: Value = serde_json::from_str(&ops).unwrap();
    assert_eq!(
        ops.as_array().unwrap().len(),
        2,
        "a test and one add: {ops}"
    );
    assert_eq!(ops[0]["op"], "test");
    assert_eq!(
        ops[1]["path"],
        "/spec/configuration/permittedHostDevices/pciHostDevices/-"
    );
    rt.block_on(json_patch_kubevirt(kc, &ops)).unwrap();
    assert_eq!(
        rt.block_on(listed(kc, "pciHostDevices")),
        [
            "intel.com/qat",
            "nvidia.com/GA102GL_A10",
            "nvidia.com/TU104GL_TESLA_T4"
        ]
    );
    // Stale again: the test operation fails, nothing is appended twice.
    let err = rt.block_on(json_patch_kubevirt(kc, &ops)).unwrap_err();
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422 || s.code == 409),
        "{err}"
    );
    assert_eq!(rt.block_on(listed(kc, "pciHostDevices")).len(), 3);
}
