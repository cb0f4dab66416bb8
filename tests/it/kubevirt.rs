//! `gpuwl kubevirt generate|check` on files (tests/data/explain/vgpu-type-not-permitted and
//! tests/data/kubevirt), both CR kinds, bad input; and `kubevirt check` live against the
//! local control plane (`#[ignore]`d: a KubeVirt CRD and CR installed beside the lab).

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{ClusterDown, gpuwl, gpuwl_ok, one_cluster_at_a_time};

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
fn generate_permits_both_advertised_names() {
    let (rc, out, err) = gpuwl(&["kubevirt", "generate", "--nodes", &case("nodes.json")]);
    assert_eq!(rc, 0, "{err}");
    assert_eq!(err, "", "no note for names with one PCI id");
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
      pciHostDevices:
      - pciVendorSelector: 10DE:2236
        resourceName: nvidia.com/GA102GL_A10
        externalResourceProvider: true
      mediatedDevices:
      - mdevNameSelector: NVIDIA A10-12Q
        resourceName: nvidia.com/NVIDIA_A10-12Q
        externalResourceProvider: true
"
        ),
        "{out}"
    );

    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "generate",
        "--nodes",
        &case("nodes.json"),
        "-o",
        "json",
    ]);
    assert_eq!(rc, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        json!({"spec": {"configuration": {"permittedHostDevices": {
            "pciHostDevices": [{"pciVendorSelector": "10DE:2236",
                "resourceName": "nvidia.com/GA102GL_A10", "externalResourceProvider": true}],
            "mediatedDevices": [{"mdevNameSelector": "NVIDIA A10-12Q",
                "resourceName": "nvidia.com/NVIDIA_A10-12Q", "externalResourceProvider": true}]
        }}}})
    );
    assert!(
        err.contains("Apply: kubectl patch kubevirt kubevirt -n kubevirt --type merge"),
        "{err}"
    );
    // Deterministic: the same bytes twice.
    let again = gpuwl_ok(&[
        "kubevirt",
        "generate",
        "--nodes",
        &case("nodes.json"),
        "-o",
        "json",
    ]);
    assert_eq!(again, out);
}

#[test]
fn generate_for_hyperconverged_and_several_ids() {
    let (rc, out, err) = gpuwl(&[
        "kubevirt",
        "generate",
        "--nodes",
        &data("nodes-many.yaml"),
        "--for",
        "hyperconverged",
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
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};

    let kc = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .unwrap();
    let client = kube::Client::try_from(config).unwrap();
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
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", "KubeVirt"),
        "kubevirts",
    );
    let kvs: Api<DynamicObject> = Api::namespaced_with(client, "kubevirt", &ar);
    let cr: DynamicObject = serde_json::from_str(KUBEVIRT_CR).unwrap();
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
    let (root, kubeconfig) = crate::common::lab_cluster(CLUSTER);
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

    // The generated patch, merged into the live CR's list, passes.
    let patch = gpuwl_ok(&["kubevirt", "generate", "--kubeconfig", kubeconfig]);
    assert!(
        patch.contains("resourceName: nvidia.com/NVIDIA_A10-12Q"),
        "{patch}"
    );
    let file = root.path().join("kubevirt-fixed.yaml");
    std::fs::write(
        &file,
        format!("apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {{name: kubevirt, namespace: kubevirt}}\n{patch}"),
    )
    .unwrap();
    let out = gpuwl_ok(&[
        "kubevirt",
        "check",
        "--kubeconfig",
        kubeconfig,
        "--kubevirt",
        file.to_str().unwrap(),
    ]);
    assert_eq!(
        out,
        "OK: all 2 passthrough model and vGPU type names the nodes advertise are permitted in KubeVirt kubevirt/kubevirt\n"
    );
}
