//! The lab's Pod manifests (`R/k8s/*.yaml`): built from the lab plan, written as YAML, and
//! read back from the written file before they are applied, so what runs is what is on disk.

use std::collections::BTreeMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde::Serialize;

use gpuwl_core::error::{Error, Result};

/// Namespace every lab pod lives in (lab step 1).
pub const NAMESPACE: &str = "gpu-vm";
/// Name of the single container of every lab pod (lab step 4).
pub(crate) const CONTAINER_NAME: &str = "cuda";
/// Image of every lab pod (lab step 4; never pulled on the local control plane, where kwok
/// fakes the kubelet).
pub const IMAGE: &str = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04";

/// One lab pod: what a manifest under `R/k8s/` holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabPod {
    /// Pod name, e.g. `job-container`.
    pub name: String,
    /// Manifest file name under `R/k8s/`, e.g. `pod-container.yaml`.
    pub file: String,
    /// The extended resource requested in `resources.limits`, e.g. `nvidia.com/gpu`.
    pub resource: String,
    /// Units requested (always 1 in the lab).
    pub count: u32,
    /// `spec.nodeSelector`, empty for all but `job-cross`.
    pub node_selector: BTreeMap<String, String>,
}

// Serialization shapes, in the field order a person writes a manifest in.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Manifest<'a> {
    api_version: &'a str,
    kind: &'a str,
    metadata: Meta<'a>,
    spec: Spec<'a>,
}
#[derive(Serialize)]
struct Meta<'a> {
    name: &'a str,
    namespace: &'a str,
}
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    node_selector: &'a BTreeMap<String, String>,
    containers: [Container<'a>; 1],
}
#[derive(Serialize)]
struct Container<'a> {
    name: &'a str,
    image: &'a str,
    resources: Resources<'a>,
}
#[derive(Serialize)]
struct Resources<'a> {
    limits: BTreeMap<&'a str, u32>,
}

impl LabPod {
    /// The manifest as YAML: one `v1` Pod in [`NAMESPACE`], container [`CONTAINER_NAME`]
    /// running [`IMAGE`], `resources.limits` `{resource: count}`, and a `nodeSelector`
    /// only when one is set.
    ///
    /// Errors: [`Error::Runtime`] if the YAML serializer fails (it does not for these shapes).
    pub fn to_yaml(&self) -> Result<String> {
        let m = Manifest {
            api_version: "v1",
            kind: "Pod",
            metadata: Meta {
                name: &self.name,
                namespace: NAMESPACE,
            },
            spec: Spec {
                node_selector: &self.node_selector,
                containers: [Container {
                    name: CONTAINER_NAME,
                    image: IMAGE,
                    resources: Resources {
                        limits: BTreeMap::from([(self.resource.as_str(), self.count)]),
                    },
                }],
            },
        };
        serde_saphyr::to_string(&m)
            .map_err(|e| Error::failed(format!("cannot render manifest {}", self.file), e))
    }
}

/// Reads a Pod manifest back from `path` (YAML), as it will be applied.
///
/// Errors: [`Error::Input`] naming the file when it cannot be read or is not a Pod.
pub fn read_pod(path: &Path) -> Result<Pod> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::Input(format!("{}: cannot read: {e}", path.display())))?;
    let value: serde_json::Value = serde_saphyr::from_str(&text)
        .map_err(|e| Error::Input(format!("{}: invalid YAML: {e}", path.display())))?;
    let pod: Pod = serde_json::from_value(normalize_quantities(value))
        .map_err(|e| Error::Input(format!("{}: not a Pod: {e}", path.display())))?;
    Ok(pod)
}

/// Turns numeric scalars into strings, as kubectl does before decoding: Kubernetes
/// quantities (`nvidia.com/gpu: 1`) are strings on the wire.
fn normalize_quantities(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Number(n) => Value::String(n.to_string()),
        Value::Array(a) => Value::Array(a.into_iter().map(normalize_quantities).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, normalize_quantities(v)))
                .collect(),
        ),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cross() -> LabPod {
        LabPod {
            name: "job-cross".into(),
            file: "pod-cross.yaml".into(),
            resource: "nvidia.com/gpu".into(),
            count: 1,
            node_selector: BTreeMap::from([(
                "nvidia.com/gpu.workload.config".to_string(),
                "vm-passthrough".to_string(),
            )]),
        }
    }

    #[test]
    fn manifest_yaml_is_exact() {
        let y = cross().to_yaml().unwrap();
        assert_eq!(
            y,
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: job-cross\n  namespace: gpu-vm\nspec:\n  nodeSelector:\n    nvidia.com/gpu.workload.config: vm-passthrough\n  containers:\n  - name: cuda\n    image: nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04\n    resources:\n      limits:\n        nvidia.com/gpu: 1\n"
        );
    }

    #[test]
    fn manifest_round_trips_into_a_pod() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pod-cross.yaml");
        std::fs::write(&p, cross().to_yaml().unwrap()).unwrap();
        let pod = read_pod(&p).unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("job-cross"));
        assert_eq!(pod.metadata.namespace.as_deref(), Some("gpu-vm"));
        let spec = pod.spec.unwrap();
        assert_eq!(
            spec.node_selector.unwrap()["nvidia.com/gpu.workload.config"],
            "vm-passthrough"
        );
        let c = &spec.containers[0];
        assert_eq!(c.name, "cuda");
        assert_eq!(c.image.as_deref(), Some(IMAGE));
        let limits = c.resources.as_ref().unwrap().limits.as_ref().unwrap();
        assert_eq!(limits["nvidia.com/gpu"].0, "1");
    }

    #[test]
    fn no_node_selector_when_empty() {
        let mut p = cross();
        p.node_selector.clear();
        assert!(!p.to_yaml().unwrap().contains("nodeSelector"));
    }

    #[test]
    fn unreadable_manifest_names_the_file() {
        let e = read_pod(Path::new("/nonexistent/pod.yaml")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/nonexistent/pod.yaml: cannot read")
        );
    }
}
