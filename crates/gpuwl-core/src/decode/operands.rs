//! Reading the GPU Operator's operand pods ([`crate::model::operand`]) from a pods dump
//! (`kubectl get pods -A -o json|yaml`) or a Pod object (the live list is gpuwl's
//! `input::operands`).

use std::path::Path;

use serde_json::Value;

use crate::decode::document;
use crate::error::{Error, Result};
use crate::model::operand::{OperandHealth, OperandPod, operand_of};
use crate::text;

const EXPECTING: &str = "a pod list (kubectl get pods -A -o json|yaml)";

/// What [`from_value`] reads of a pod, as a [`document::Keep`] rule: a reader that prunes
/// pods (the live pod list, `decode::pods::read_response`) keeps this beside its own rule
/// so that the operand pods can be found in the pruned items.
pub(crate) const READS: document::Keep = {
    use document::Keep::{All, Each, Fields};
    const CONTAINER: document::Keep = Each(&Fields(&[
        ("restartCount", All),
        ("state", Fields(&[("waiting", Fields(&[("reason", All)]))])),
    ]));
    Fields(&[
        (
            "metadata",
            Fields(&[
                ("name", All),
                ("namespace", All),
                ("labels", Fields(&[("app", All), ("name", All)])),
                ("deletionTimestamp", All),
            ]),
        ),
        ("spec", Fields(&[("nodeName", All)])),
        (
            "status",
            Fields(&[
                ("phase", All),
                ("reason", All),
                (
                    "conditions",
                    Each(&Fields(&[("type", All), ("status", All)])),
                ),
                ("containerStatuses", CONTAINER),
                ("initContainerStatuses", CONTAINER),
            ]),
        ),
    ])
};

/// The operand pod `v` (a Pod as JSON) is, or `None` for any other pod, a pod being
/// deleted, or one not bound to a node. Missing or oddly typed status fields read as
/// absent (a pod without status is `not-ready`).
pub fn from_value(v: &Value) -> Option<OperandPod> {
    let s = |p: &[&str]| -> Option<&str> {
        let mut cur = v;
        for k in p {
            cur = cur.get(k)?;
        }
        cur.as_str()
    };
    let operand = operand_of(
        s(&["metadata", "labels", "app"]),
        s(&["metadata", "labels", "name"]),
    )?;
    if v.pointer("/metadata/deletionTimestamp")
        .is_some_and(|d| !d.is_null())
    {
        return None;
    }
    let node = s(&["spec", "nodeName"])?.to_string();
    let status = v.get("status");
    let ready = status
        .and_then(|st| st.get("conditions"))
        .and_then(Value::as_array)
        .is_some_and(|cs| {
            cs.iter().any(|c| {
                c.get("type").and_then(Value::as_str) == Some("Ready")
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
        });
    let containers: Vec<&Value> = ["initContainerStatuses", "containerStatuses"]
        .iter()
        .filter_map(|k| status.and_then(|st| st.get(*k)).and_then(Value::as_array))
        .flatten()
        .collect();
    let restarts = containers
        .iter()
        .filter_map(|c| c.get("restartCount").and_then(Value::as_u64))
        .fold(0u64, u64::saturating_add);
    let waiting: Vec<&str> = containers
        .iter()
        .filter_map(|c| c.pointer("/state/waiting/reason").and_then(Value::as_str))
        .collect();
    let health = if waiting.contains(&"CrashLoopBackOff") {
        OperandHealth::CrashLooping
    } else if ready {
        OperandHealth::Ready
    } else {
        OperandHealth::NotReady
    };
    let reason = waiting
        .iter()
        .find(|r| **r == "CrashLoopBackOff")
        .or(waiting.first())
        .copied()
        .or_else(|| {
            status
                .and_then(|st| st.get("reason"))
                .and_then(Value::as_str)
        })
        .map(|r| text::esc(&r.chars().take(100).collect::<String>()));
    Some(OperandPod {
        operand: operand.to_string(),
        pod: format!(
            "{}/{}",
            s(&["metadata", "namespace"]).unwrap_or(""),
            s(&["metadata", "name"]).unwrap_or("")
        ),
        node,
        health,
        phase: s(&["status", "phase"]).map(str::to_string),
        restarts,
        reason,
    })
}

/// The operand pods of a pods dump in `path` (`-` for stdin): a List / PodList or one
/// Pod, JSON or YAML; other pods are skipped.
///
/// Errors: [`Error::File`] / [`Error::Input`] naming the file: unreadable, empty,
/// invalid JSON/YAML, `items` not a list.
pub fn read_path(path: &Path) -> Result<Vec<OperandPod>> {
    let name = path.display().to_string();
    let text = document::read_text(path)?;
    read_str(&text, &name)
}

/// [`read_path`] on text; `name` starts every error message.
pub(crate) fn read_str(text: &str, name: &str) -> Result<Vec<OperandPod>> {
    let doc = document::parse(text, name, EXPECTING)?;
    match doc.get("items") {
        Some(Value::Array(items)) => Ok(items.iter().filter_map(from_value).collect()),
        Some(_) => Err(Error::file(
            name,
            format!("items: not a list; expected {EXPECTING}"),
        )),
        None if doc.get("kind").and_then(Value::as_str) == Some("Pod") => {
            Ok(from_value(&doc).into_iter().collect())
        }
        None => Err(Error::file(name, format!("no items: expected {EXPECTING}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn health_from_conditions_and_container_states() {
        let pod = |labels: Value, status: Value| {
            json!({"metadata": {"namespace": "gpu-operator", "name": "p", "labels": labels},
                   "spec": {"nodeName": "n1"}, "status": status})
        };
        let ready = from_value(&pod(
            json!({"app": "nvidia-sandbox-device-plugin-daemonset"}),
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}),
        ))
        .unwrap();
        assert_eq!(
            (ready.operand.as_str(), ready.health, ready.node.as_str()),
            ("sandbox-device-plugin", OperandHealth::Ready, "n1")
        );
        let crash = from_value(&pod(
            json!({"name": "nvidia-vfio-manager"}),
            json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}],
                   "containerStatuses": [{"restartCount": 12, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}),
        ))
        .unwrap();
        assert_eq!(
            (crash.health, crash.restarts, crash.reason.as_deref()),
            (OperandHealth::CrashLooping, 12, Some("CrashLoopBackOff"))
        );
        let pending = from_value(&pod(
            json!({"app": "nvidia-device-plugin-daemonset"}),
            json!({"phase": "Pending"}),
        ))
        .unwrap();
        assert_eq!(pending.health, OperandHealth::NotReady);
        assert!(from_value(&pod(json!({"app": "web"}), json!({}))).is_none());
        let e = read_str("{\"kind\": \"List\", \"items\": 3}", "pods.json").unwrap_err();
        assert!(e.to_string().contains("pods.json"), "{e}");
    }
}
