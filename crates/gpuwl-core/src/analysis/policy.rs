//! `gpuwl policy`'s generator: a ValidatingAdmissionPolicy (and its binding) that makes the API server
//! itself refuse a mistyped GPU workload label, so the mistake `check` finds afterwards
//! cannot be made in the first place.
//!
//! The policy is CEL only, no webhook: `admissionregistration.k8s.io/v1`
//! `ValidatingAdmissionPolicy` + `ValidatingAdmissionPolicyBinding`, GA and on by default
//! since Kubernetes 1.30 (kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/:
//! `spec.matchConstraints`, `spec.variables`, `validations[].expression` /
//! `messageExpression` / `reason`, `oldObject` on UPDATE, the binding's
//! `validationActions` Deny / Warn / Audit, and the Kubernetes CEL string extension's
//! `lowerAscii`, `upperAscii`, `replace`, `matches`).
//!
//! Two validations, on Node CREATE and UPDATE (not `nodes/status`, so the kubelet's status
//! updates are never seen):
//! 1. `nvidia.com/gpu.workload.config`, when present, is one of `container`,
//!    `vm-passthrough`, `vm-vgpu` — the only values the GPU Operator accepts; anything else
//!    it silently treats as no label (docs/domain-facts.md §1, NVIDIA/gpu-operator
//!    `controllers/state_manager.go`, `isValidWorkloadConfig`). The message names the
//!    value meant, as [`crate::model::workload::InvalidWorkloadConfig::nearest`] does,
//!    within what CEL can compute: equal but for case, `_`/`.` for `-` or a missing `-`;
//!    or the one value that contains it (`passthrough`), it starts with (`containers`), or
//!    that starts with all of it but its last character (`vm-passthru`).
//! 2. `nvidia.com/vgpu.config`, when present, is `default` or has the shape of a vGPU type
//!    ([`VGPU_CONFIG_REGEX`]).
//!
//! Only a change is judged: an UPDATE that leaves a label as it was passes even when the
//! old value is invalid (the new and old objects are compared), so nodes labelled before
//! the policy keep working until someone touches that label.

use serde::Serialize;

use crate::model::operator::VGPU_CONFIG_LABEL;
use crate::model::workload::LABEL_KEY;

/// The policy's (and binding's) default name.
pub const DEFAULT_NAME: &str = "gpuwl-workload-label";

/// What `nvidia.com/vgpu.config` must match (RE2, as CEL's `matches`): `default`, or a vGPU
/// type as the vGPU device manager's default config map names its configs (docs/domain-facts.md
/// §7, NVIDIA/gpu-operator `assets/state-vgpu-device-manager/0500_configmap.yaml`: `A10-12Q`,
/// `A100-4C`, `L40S-48Q`; its `default` config): a board (`A10`, `A100D`, `RTX6000`), for a
/// MIG-backed type the slice count (`A100-1-5C`), the frame buffer in GB and the series
/// letter, then optionally a MIG-backed suffix (`ME`, `MEALL`, `NOME`, `GFX`:
/// NVIDIA/vgpu-device-manager `pkg/types/vgpu_type.go`, as
/// [`crate::model::resource::VGPU_MIG_SUFFIXES`]). The same shape as the repo's
/// [`crate::model::resource::is_vgpu_type_name`] (a digit, then one capital, then an
/// optional MIG suffix) and the twin's `vgpu_type_parts` (gpuwl's `src/twin/predict.rs`), without the
/// `NVIDIA_`/`GRID_` prefix a resource name has (a config name has none).
pub(crate) const VGPU_CONFIG_REGEX: &str =
    "^(default|[A-Z0-9]+(-[0-9]+)?-[0-9]+[A-Z](MEALL|NOME|ME|GFX)?)$";

/// The binding's `validationActions` (one: Deny and Warn together are refused by the API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
pub enum Action {
    /// Refuse the request.
    #[value(name = "Deny")]
    Deny,
    /// Let it through with a warning to the client.
    #[value(name = "Warn")]
    Warn,
    /// Let it through and note the failure in the audit log.
    #[value(name = "Audit")]
    Audit,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Object<S: Serialize> {
    api_version: &'static str,
    kind: &'static str,
    metadata: Metadata,
    spec: S,
}

#[derive(Serialize)]
struct Metadata {
    name: String,
    labels: std::collections::BTreeMap<&'static str, &'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct PolicySpec {
    failure_policy: &'static str,
    match_constraints: MatchConstraints,
    variables: Vec<Variable>,
    validations: Vec<Validation>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MatchConstraints {
    resource_rules: Vec<ResourceRule>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ResourceRule {
    api_groups: Vec<&'static str>,
    api_versions: Vec<&'static str>,
    operations: Vec<&'static str>,
    resources: Vec<&'static str>,
}

#[derive(Serialize)]
struct Variable {
    name: &'static str,
    expression: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Validation {
    expression: String,
    message: String,
    message_expression: String,
    reason: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct BindingSpec {
    policy_name: String,
    validation_actions: Vec<Action>,
}

/// The variables that say whether label `key` is present (`has<Name>`), its value
/// (`<name>`, empty when absent) and whether this request sets or changes it
/// (`<name>Changed`: CREATE with the label, or UPDATE where the old object had another
/// value or none).
fn label_variables(
    key: &str,
    name: &'static str,
    has: &'static str,
    changed: &'static str,
) -> [Variable; 3] {
    [
        Variable {
            name: has,
            expression: format!("has(object.metadata.labels) && '{key}' in object.metadata.labels"),
        },
        Variable {
            name,
            expression: format!("variables.{has} ? object.metadata.labels['{key}'] : ''"),
        },
        Variable {
            name: changed,
            expression: format!(
                "variables.{has} && !(request.operation == 'UPDATE' && \
                 has(oldObject.metadata.labels) && '{key}' in oldObject.metadata.labels && \
                 oldObject.metadata.labels['{key}'] == variables.{name})"
            ),
        },
    ]
}

fn policy_spec() -> PolicySpec {
    let legal = "['container', 'vm-passthrough', 'vm-vgpu']";
    let mut variables = Vec::new();
    variables.extend(label_variables(
        LABEL_KEY,
        "workload",
        "hasWorkload",
        "workloadChanged",
    ));
    variables.push(Variable {
        name: "workloadNorm",
        expression: "variables.workload.lowerAscii().replace('_', '-').replace('.', '-')".into(),
    });
    variables.push(Variable {
        name: "workloadNear",
        expression: format!(
            "{legal}.filter(w, variables.workloadNorm == w || \
             variables.workloadNorm.replace('-', '') == w.replace('-', '') || \
             (size(variables.workloadNorm) >= 4 && (w.contains(variables.workloadNorm) || \
             variables.workloadNorm.startsWith(w))) || \
             (size(variables.workloadNorm.replace('-', '')) >= 4 && \
             w.replace('-', '').contains(variables.workloadNorm.replace('-', ''))) || \
             (size(variables.workloadNorm) >= 5 && w.startsWith(variables.workloadNorm.substring(0, \
             size(variables.workloadNorm) - 1))))"
        ),
    });
    variables.extend(label_variables(
        VGPU_CONFIG_LABEL,
        "vgpuConfig",
        "hasVgpuConfig",
        "vgpuConfigChanged",
    ));
    let not_one_of = "is not one of container, vm-passthrough, vm-vgpu (the GPU Operator \
                      would treat the node as unlabelled)";
    let vgpu_shape = "is not a vGPU type such as A10-12Q or A100-4C, nor default";
    PolicySpec {
        failure_policy: "Fail",
        match_constraints: MatchConstraints {
            resource_rules: vec![ResourceRule {
                api_groups: vec![""],
                api_versions: vec!["v1"],
                operations: vec!["CREATE", "UPDATE"],
                resources: vec!["nodes"],
            }],
        },
        variables,
        validations: vec![
            Validation {
                expression: format!("!variables.workloadChanged || variables.workload in {legal}"),
                message: format!("{LABEL_KEY}: the value {not_one_of}"),
                message_expression: format!(
                    "'{LABEL_KEY}=' + variables.workload + ' {not_one_of}' + \
                     (size(variables.workloadNear) == 1 ? '; did you mean ' + \
                     variables.workloadNear[0] + '?' : '')"
                ),
                reason: "Invalid",
            },
            Validation {
                expression: format!(
                    "!variables.vgpuConfigChanged || variables.vgpuConfig.matches('{VGPU_CONFIG_REGEX}')"
                ),
                message: format!("{VGPU_CONFIG_LABEL}: the value {vgpu_shape}"),
                message_expression: format!(
                    "'{VGPU_CONFIG_LABEL}=' + variables.vgpuConfig + ' {vgpu_shape}' + \
                     (variables.vgpuConfig.upperAscii().replace('_', '-').matches('{VGPU_CONFIG_REGEX}') ? \
                     '; did you mean ' + variables.vgpuConfig.upperAscii().replace('_', '-') + '?' : '')"
                ),
                reason: "Invalid",
            },
        ],
    }
}

fn labels() -> std::collections::BTreeMap<&'static str, &'static str> {
    [("app.kubernetes.io/managed-by", "gpuwl")]
        .into_iter()
        .collect()
}

/// The policy and its binding, in that order (fields in the order `kubectl` shows them).
pub(crate) fn manifests(name: &str, action: Action) -> (Object<PolicySpec>, Object<BindingSpec>) {
    let policy = Object {
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicy",
        metadata: Metadata {
            name: name.to_string(),
            labels: labels(),
        },
        spec: policy_spec(),
    };
    let binding = Object {
        api_version: "admissionregistration.k8s.io/v1",
        kind: "ValidatingAdmissionPolicyBinding",
        metadata: Metadata {
            name: name.to_string(),
            labels: labels(),
        },
        spec: BindingSpec {
            policy_name: name.to_string(),
            validation_actions: vec![action],
        },
    };
    (policy, binding)
}

/// The policy and its binding as JSON values, in that order.
pub fn objects(name: &str, action: Action) -> [serde_json::Value; 2] {
    let (p, b) = manifests(name, action);
    [
        serde_json::to_value(p).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_matches_node_create_and_update_only() {
        let [p, b] = objects(DEFAULT_NAME, Action::Deny);
        assert_eq!(p["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(p["apiVersion"], "admissionregistration.k8s.io/v1");
        assert_eq!(p["metadata"]["name"], "gpuwl-workload-label");
        let rule = &p["spec"]["matchConstraints"]["resourceRules"][0];
        assert_eq!(rule["resources"], serde_json::json!(["nodes"]));
        assert_eq!(rule["operations"], serde_json::json!(["CREATE", "UPDATE"]));
        assert_eq!(rule["apiGroups"], serde_json::json!([""]));
        assert_eq!(p["spec"]["failurePolicy"], "Fail");
        assert_eq!(b["kind"], "ValidatingAdmissionPolicyBinding");
        assert_eq!(b["spec"]["policyName"], "gpuwl-workload-label");
        assert_eq!(b["spec"]["validationActions"], serde_json::json!(["Deny"]));
    }

    #[test]
    fn name_and_action_are_used() {
        let [p, b] = objects("other", Action::Warn);
        assert_eq!(p["metadata"]["name"], "other");
        assert_eq!(b["metadata"]["name"], "other");
        assert_eq!(b["spec"]["policyName"], "other");
        assert_eq!(b["spec"]["validationActions"], serde_json::json!(["Warn"]));
        let [_, b] = objects("x", Action::Audit);
        assert_eq!(b["spec"]["validationActions"], serde_json::json!(["Audit"]));
    }

    #[test]
    fn validations_compare_with_the_old_object_and_name_the_values() {
        let [p, _] = objects(DEFAULT_NAME, Action::Deny);
        let v = &p["spec"]["validations"];
        assert_eq!(
            v[0]["expression"],
            "!variables.workloadChanged || variables.workload in ['container', 'vm-passthrough', 'vm-vgpu']"
        );
        assert!(
            v[0]["messageExpression"]
                .as_str()
                .unwrap()
                .contains("'; did you mean '")
        );
        assert_eq!(
            v[1]["expression"],
            format!(
                "!variables.vgpuConfigChanged || variables.vgpuConfig.matches('{VGPU_CONFIG_REGEX}')"
            )
        );
        let vars: Vec<&str> = p["spec"]["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            vars,
            [
                "hasWorkload",
                "workload",
                "workloadChanged",
                "workloadNorm",
                "workloadNear",
                "hasVgpuConfig",
                "vgpuConfig",
                "vgpuConfigChanged"
            ]
        );
        let changed = p["spec"]["variables"][2]["expression"].as_str().unwrap();
        assert!(changed.contains(
            "oldObject.metadata.labels['nvidia.com/gpu.workload.config'] == variables.workload"
        ));
    }

    /// Evaluates a constant CEL expression with the repo's CEL environment (the standard
    /// library and the strings extension, as the API server has).
    fn eval(expr: &str) -> cel::Value {
        let program = crate::analysis::dra_cel::compile(expr).expect(expr);
        let ctx = cel::Context::with_env(std::sync::Arc::clone(&crate::analysis::dra_cel::ENV));
        program.execute(&ctx).expect(expr)
    }

    fn variable(name: &str) -> String {
        let [p, _] = objects(DEFAULT_NAME, Action::Deny);
        p["spec"]["variables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap()["expression"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// The did-you-mean the policy computes for `value` (its two variables, in CEL).
    fn near(value: &str) -> Vec<String> {
        let norm = variable("workloadNorm").replace("variables.workload", &format!("'{value}'"));
        let normed = match eval(&norm) {
            cel::Value::String(s) => s.to_string(),
            other => panic!("{other:?}"),
        };
        let expr =
            variable("workloadNear").replace("variables.workloadNorm", &format!("'{normed}'"));
        match eval(&expr) {
            cel::Value::List(l) => l
                .iter()
                .map(|v| match v {
                    cel::Value::String(s) => s.to_string(),
                    other => panic!("{other:?}"),
                })
                .collect(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn did_you_mean_in_cel_agrees_with_the_repo_where_it_can() {
        for (typo, meant) in [
            ("vm_passthrough", "vm-passthrough"),
            ("Container", "container"),
            ("VM-VGPU", "vm-vgpu"),
            ("vm-passthru", "vm-passthrough"),
            ("passthrough", "vm-passthrough"),
            ("vgpu", "vm-vgpu"),
            ("vmpassthrough", "vm-passthrough"),
            ("containers", "container"),
            ("vm.vgpu", "vm-vgpu"),
            ("pass-through", "vm-passthrough"),
            ("v-gpu", "vm-vgpu"),
        ] {
            assert_eq!(near(typo), [meant], "{typo}");
            // The repo's own did-you-mean says the same.
            let e = crate::model::workload::InvalidWorkloadConfig { value: typo.into() };
            assert_eq!(e.nearest().map(|w| w.as_str()), Some(meant), "{typo}");
        }
        for nothing in ["", "gpu", "vm", "kata", "vm-"] {
            assert!(near(nothing).is_empty(), "{nothing}: {:?}", near(nothing));
        }
    }

    #[test]
    fn vgpu_regex_accepts_the_types_the_repo_uses_and_nothing_else() {
        let m = |v: &str| eval(&format!("'{v}'.matches('{VGPU_CONFIG_REGEX}')"));
        for good in [
            "A10-12Q",
            "A10-24Q",
            "A100-4C",
            "A100-1-5C",
            "A100-1-5CME",
            "T4-2Q",
            "L40S-48Q",
            "A100D-80C",
            "RTX6000-4Q",
            "H100-1-10CMEALL",
            "default",
        ] {
            assert_eq!(m(good), cel::Value::Bool(true), "{good}");
            if good != "default" {
                assert!(crate::model::resource::is_vgpu_type_name(good), "{good}");
            }
        }
        for bad in [
            "a10-12q",
            "A10_12Q",
            "A10-12",
            "A10",
            "12Q",
            "A10-Q",
            "vm-vgpu",
            "A10-12QX",
            "",
            "Default",
            "NVIDIA_A10-12Q",
        ] {
            assert_eq!(m(bad), cel::Value::Bool(false), "{bad}");
        }
    }
}
