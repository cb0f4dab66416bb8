//! `gpuwl policy`'s output: the ValidatingAdmissionPolicy and its binding
//! ([`crate::analysis::policy`]) as YAML documents or one JSON `List`.

use serde::Serialize;

use crate::analysis::policy::{Action, BindingSpec, Object, PolicySpec, manifests};
use crate::model::operator::VGPU_CONFIG_LABEL;
use crate::model::workload::LABEL_KEY;

/// The header of the YAML output: what it is and how to apply it.
fn header(name: &str, action: Action) -> String {
    format!(
        "# gpuwl policy --name {name} --action {action:?}: refuses a Node whose\n\
         # {LABEL_KEY} is set to anything but container, vm-passthrough or vm-vgpu,\n\
         # or whose {VGPU_CONFIG_LABEL} is not a vGPU type. Needs Kubernetes >= 1.30.\n\
         # Apply: gpuwl policy | kubectl apply -f -\n"
    )
}

/// Both objects as YAML documents (`---` between them, a comment header first).
pub fn yaml(name: &str, action: Action) -> String {
    let (p, b) = manifests(name, action);
    let mut out = header(name, action);
    out.push_str(&serde_saphyr::to_string(&p).unwrap_or_else(|e| format!("# error: {e}\n")));
    out.push_str("---\n");
    out.push_str(&serde_saphyr::to_string(&b).unwrap_or_else(|e| format!("# error: {e}\n")));
    out
}

/// Both objects as one pretty JSON `v1` `List` (what `kubectl apply -f` takes).
pub fn json(name: &str, action: Action) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct List {
        api_version: &'static str,
        kind: &'static str,
        items: (Object<PolicySpec>, Object<BindingSpec>),
    }
    let list = List {
        api_version: "v1",
        kind: "List",
        items: manifests(name, action),
    };
    let mut s = serde_json::to_string_pretty(&list).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::policy::DEFAULT_NAME;

    #[test]
    fn yaml_is_two_documents_and_json_a_list() {
        let y = yaml(DEFAULT_NAME, Action::Deny);
        assert!(y.starts_with("# gpuwl policy --name gpuwl-workload-label --action Deny"));
        assert_eq!(y.matches("\n---\n").count(), 1);
        assert_eq!(y.matches("kind: ValidatingAdmissionPolicy\n").count(), 1);
        assert_eq!(
            y.matches("kind: ValidatingAdmissionPolicyBinding\n")
                .count(),
            1
        );
        let j: serde_json::Value = serde_json::from_str(&json(DEFAULT_NAME, Action::Deny)).unwrap();
        assert_eq!(j["kind"], "List");
        assert_eq!(j["items"].as_array().unwrap().len(), 2);
        assert_eq!(j["items"][1]["spec"]["validationActions"][0], "Deny");
    }
}
