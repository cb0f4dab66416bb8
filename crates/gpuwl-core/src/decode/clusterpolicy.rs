//! Reading the GPU Operator's ClusterPolicy (`nvidia.com/v1`, cluster-scoped) from a file
//! (`kubectl get clusterpolicies -o yaml`: one object, or a List holding one) or an API object
//! (the live read is gpuwl's `input::clusterpolicy`), into [`ClusterPolicy`].
//!
//! Fields (NVIDIA/gpu-operator `api/nvidia/v1/clusterpolicy_types.go`):
//! `spec.sandboxWorkloads.{enabled, defaultWorkload, mode}`, `spec.vgpuManager.enabled`,
//! `spec.vgpuDeviceManager.config.default`, `spec.migManager.config.default`.

use std::path::Path;

use serde_json::Value;

use crate::decode::document::{self, array, get, opt_scalar, opt_str};
use crate::error::{Error, FieldError, Result};
use crate::model::operator::{ClusterPolicy, PolicyStatus};
use crate::model::workload::{DEFAULT_WORKLOAD, WorkloadConfig};

const EXPECTING: &str = "a ClusterPolicy (nvidia.com/v1)";

/// Reads the ClusterPolicy in `path` (`-` for stdin).
///
/// Errors: [`Error::Input`] naming the file and field: unreadable, empty, invalid
/// JSON/YAML, another kind, a List with no or several ClusterPolicies, a field of the
/// wrong type.
pub fn read_path(path: &Path) -> Result<PolicyStatus> {
    let name = path.display().to_string();
    let text = document::read_text(path)?;
    read_str(&text, &name)
}

/// Parses a ClusterPolicy from text; `name` starts every error message. See [`read_path`].
pub(crate) fn read_str(text: &str, name: &str) -> Result<PolicyStatus> {
    let doc = document::parse(text, name, EXPECTING)?;
    let err = |e: FieldError| Error::field(name, e);
    let obj = match opt_str(&doc, "kind").map_err(err)? {
        Some("List" | "ClusterPolicyList") => {
            match array(doc.get("items"), "items").map_err(err)? {
                [one] => one,
                [] => {
                    return Err(err(FieldError::new(
                        "items",
                        format!("empty, expected {EXPECTING}"),
                    )));
                }
                many => {
                    return Err(err(FieldError::new(
                        "items",
                        format!("{} objects, expected one ClusterPolicy", many.len()),
                    )));
                }
            }
        }
        _ => &doc,
    };
    Ok(PolicyStatus {
        status: "file",
        policy: Some(from_object(obj).map_err(err)?),
        note: None,
    })
}

/// Reads one ClusterPolicy object (as JSON).
///
/// Errors: the wrong field, without the source name (the caller adds it).
pub fn from_object(v: &Value) -> std::result::Result<ClusterPolicy, FieldError> {
    match opt_str(v, "kind")? {
        Some("ClusterPolicy") => {}
        Some(k) => {
            return Err(FieldError::object(format!(
                "kind {} is not ClusterPolicy",
                document::cut(k)
            )));
        }
        None => {
            return Err(FieldError::object(format!(
                "no kind field: expected {EXPECTING}"
            )));
        }
    }
    let flag = |path: &str| -> std::result::Result<Option<bool>, FieldError> {
        match get(v, path) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::String(s)) if s == "true" || s == "false" => Ok(Some(s == "true")),
            Some(_) => Err(FieldError::new(path, "expected true or false")),
        }
    };
    let scalar = |path: &str| opt_scalar(get(v, path), path);
    let raw = scalar("spec.sandboxWorkloads.defaultWorkload")?;
    Ok(ClusterPolicy {
        name: opt_str(v, "metadata.name")?.unwrap_or("").to_owned(),
        sandbox_enabled: flag("spec.sandboxWorkloads.enabled")?.unwrap_or(false),
        // An invalid value is rejected by the CRD's enum; if one got through, the
        // operator's fallback is the CRD default.
        default_workload: raw
            .as_deref()
            .and_then(|r| r.parse::<WorkloadConfig>().ok())
            .unwrap_or(DEFAULT_WORKLOAD),
        default_workload_raw: raw,
        mode: scalar("spec.sandboxWorkloads.mode")?,
        vgpu_manager_enabled: flag("spec.vgpuManager.enabled")?,
        vgpu_default_config: scalar("spec.vgpuDeviceManager.config.default")?,
        mig_default_config: scalar("spec.migManager.config.default")?,
        state: scalar("status.state")?,
        components: {
            let mut m = std::collections::BTreeMap::new();
            for (op, key, _) in crate::model::operator::POLICY_COMPONENTS {
                if let Some(on) = flag(&format!("spec.{key}.enabled"))? {
                    m.insert(op.to_owned(), on);
                }
            }
            m
        },
    })
}

/// A [`PolicyStatus`] with no policy: `status` and a remark.
pub fn none(status: &'static str, note: Option<String>) -> PolicyStatus {
    PolicyStatus {
        status,
        policy: None,
        note,
    }
}

/// The [`PolicyStatus`] when the API serves no `clusterpolicies.nvidia.com` (404).
pub fn absent_crd() -> PolicyStatus {
    none(
        "absent-crd",
        Some("the API has no clusterpolicies.nvidia.com (GPU Operator not installed?)".into()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sandbox_settings() {
        let p = read_str(
            "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata: {name: cluster-policy}\nspec:\n  sandboxWorkloads: {enabled: true, defaultWorkload: vm-passthrough, mode: kubevirt}\n  vgpuManager: {enabled: false}\n  vgpuDeviceManager: {config: {name: vgpu-config, default: A10-12Q}}\n",
            "cp.yaml",
        )
        .unwrap();
        assert_eq!(p.status, "file");
        let p = p.policy.unwrap();
        assert!(p.sandbox_enabled);
        assert_eq!(p.default_workload, WorkloadConfig::VmPassthrough);
        assert_eq!(p.mode.as_deref(), Some("kubevirt"));
        assert_eq!(p.vgpu_manager_enabled, Some(false));
        assert_eq!(p.vgpu_default_config.as_deref(), Some("A10-12Q"));
        // Components: what is set, and the CRD's defaults for the rest.
        assert_eq!(p.components.get("vgpu-manager"), Some(&false));
        assert!(!p.operand_enabled("vgpu-manager"));
        assert!(p.operand_enabled("device-plugin"));
        assert!(p.operand_enabled("driver"));
        assert!(!p.operand_enabled("sandbox-device-plugin"));
        let sdp = read_str(
            "kind: ClusterPolicy\nspec:\n  sandboxDevicePlugin: {enabled: true}\n  devicePlugin: {enabled: false}\n",
            "cp.yaml",
        )
        .unwrap()
        .policy
        .unwrap();
        assert!(sdp.operand_enabled("sandbox-device-plugin"));
        assert!(!sdp.operand_enabled("device-plugin"));
        let off = read_str(
            r#"{"kind":"List","items":[{"kind":"ClusterPolicy","metadata":{"name":"cp"},"spec":{}}]}"#,
            "cp.json",
        )
        .unwrap()
        .policy
        .unwrap();
        assert!(!off.sandbox_enabled);
        assert_eq!(off.default_workload, WorkloadConfig::Container);
    }

    #[test]
    fn bad_input_names_file_and_field() {
        let e = read_str("kind: KubeVirt\n", "x.yaml")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "x.yaml: kind \"KubeVirt\" is not ClusterPolicy");
        let e = read_str(
            "kind: ClusterPolicy\nspec: {sandboxWorkloads: {enabled: [1]}}\n",
            "cp.yaml",
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            e,
            "cp.yaml: spec.sandboxWorkloads.enabled: expected true or false"
        );
        assert!(
            read_str("  \n", "e.yaml")
                .unwrap_err()
                .to_string()
                .starts_with("e.yaml: empty input")
        );
    }
}
