//! Which nodes a pod's placement constraints allow: `spec.nodeSelector`, required node
//! affinity, and taints against tolerations.
//!
//! Sources (kubernetes/kubernetes):
//! - node selector and required affinity:
//!   `staging/src/k8s.io/component-helpers/scheduling/corev1/nodeaffinity/nodeaffinity.go`
//!   (selector entries ANDed; `nodeSelectorTerms` ORed, a term's requirements ANDed, an
//!   empty term matches nothing; operators `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`,
//!   `Lt`; `matchFields` only on `metadata.name`);
//! - taints: `staging/src/k8s.io/api/core/v1/toleration.go` (`ToleratesTaint`: empty
//!   effect matches all effects, `Exists` with empty key matches all keys, `Equal` compares
//!   key and value) and the scheduler's `tainttoleration` plugin, which filters on
//!   `NoSchedule` and `NoExecute` only (`PreferNoSchedule` only scores).
//!
//! - cordon: `pkg/scheduler/framework/plugins/nodeunschedulable` (`spec.unschedulable`
//!   unless `node.kubernetes.io/unschedulable:NoSchedule` is tolerated).
//!
//! Capacity is not considered here: that is [`crate::analysis::fit`]'s.

use std::fmt;

use serde::Serialize;

use crate::model::node::{NodeInfo, Taint};
use crate::model::pod::{PodInfo, SelectorRequirement, SelectorTerm, Toleration};

/// Why a node is excluded by the pod's constraints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "by", rename_all = "kebab-case")]
pub enum Exclusion {
    /// The node is cordoned (`spec.unschedulable`) and the pod does not tolerate
    /// `node.kubernetes.io/unschedulable:NoSchedule` (the NodeUnschedulable filter).
    Unschedulable,
    /// A `spec.nodeSelector` entry the node's labels do not satisfy.
    NodeSelector {
        /// Label key.
        key: String,
        /// Value the pod wants.
        want: String,
        /// The node's value (`None`: label absent).
        #[serde(skip_serializing_if = "Option::is_none")]
        have: Option<String>,
    },
    /// No term of the required node affinity matches.
    Affinity,
    /// A `NoSchedule`/`NoExecute` taint no toleration tolerates.
    Taint {
        /// The taint, verbatim.
        taint: Taint,
    },
}

impl fmt::Display for Exclusion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exclusion::Unschedulable => f.write_str("cordoned (spec.unschedulable)"),
            Exclusion::NodeSelector { key, want, have } => match have {
                Some(h) => write!(f, "nodeSelector {key}={want} (node has {key}={h})"),
                None => write!(f, "nodeSelector {key}={want} (node lacks the label)"),
            },
            Exclusion::Affinity => f.write_str("required node affinity matches no term"),
            Exclusion::Taint { taint } => write!(f, "untolerated taint {}", taint_str(taint)),
        }
    }
}

impl Exclusion {
    /// The constraint itself, without the node's side: `nodeSelector k=v`,
    /// `required node affinity`, `untolerated taint {k: v}:NoSchedule`.
    pub fn constraint(&self) -> String {
        match self {
            Exclusion::Unschedulable => "cordon (spec.unschedulable)".into(),
            Exclusion::NodeSelector { key, want, .. } => format!("nodeSelector {key}={want}"),
            Exclusion::Affinity => "required node affinity".into(),
            Exclusion::Taint { taint } => format!("untolerated taint {}", taint_str(taint)),
        }
    }
}

/// `{key: value}` with its effect, as the scheduler writes taints: `{k: v}:NoSchedule`.
pub(crate) fn taint_str(t: &Taint) -> String {
    match &t.value {
        Some(v) => format!("{{{}: {v}}}:{}", t.key, t.effect),
        None => format!("{{{}}}:{}", t.key, t.effect),
    }
}

/// The taint `kubectl cordon` stands for (`node.kubernetes.io/unschedulable:NoSchedule`);
/// the scheduler treats `spec.unschedulable` as this taint (kubernetes/kubernetes
/// `pkg/scheduler/framework/plugins/nodeunschedulable/node_unschedulable.go`).
pub(crate) const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// Every constraint of `pod` that excludes `node` (empty: the node is allowed).
pub fn exclusions(pod: &PodInfo, node: &NodeInfo) -> Vec<Exclusion> {
    let mut out = Vec::new();
    let cordon = Taint {
        key: UNSCHEDULABLE_TAINT.into(),
        value: None,
        effect: "NoSchedule".into(),
    };
    let cordoned = node.unschedulable && !pod.tolerations.iter().any(|t| tolerates(t, &cordon));
    if cordoned {
        out.push(Exclusion::Unschedulable);
    }
    for (k, v) in &pod.node_selector {
        let have = node.label(k);
        if have != Some(v.as_str()) {
            out.push(Exclusion::NodeSelector {
                key: k.clone(),
                want: v.clone(),
                have: have.map(str::to_owned),
            });
        }
    }
    if let Some(terms) = &pod.required_affinity
        && !terms.iter().any(|t| term_matches(t, node))
    {
        out.push(Exclusion::Affinity);
    }
    for t in &node.taints {
        // The cordon's own taint is the cordon, said once.
        if cordoned && t.key == cordon.key {
            continue;
        }
        if matches!(t.effect.as_str(), "NoSchedule" | "NoExecute")
            && !pod.tolerations.iter().any(|tol| tolerates(tol, t))
        {
            out.push(Exclusion::Taint { taint: t.clone() });
        }
    }
    out
}

/// Whether `pod`'s constraints allow `node`.
pub fn allows(pod: &PodInfo, node: &NodeInfo) -> bool {
    exclusions(pod, node).is_empty()
}

/// Whether one node selector term matches (an empty term matches nothing).
pub(crate) fn term_matches(term: &SelectorTerm, node: &NodeInfo) -> bool {
    if term.match_expressions.is_empty() && term.match_fields.is_empty() {
        return false;
    }
    term.match_expressions
        .iter()
        .all(|r| requirement_matches(r, node.label(&r.key)))
        && term
            .match_fields
            .iter()
            .all(|r| r.key == "metadata.name" && requirement_matches(r, Some(node.name.as_str())))
}

fn requirement_matches(r: &SelectorRequirement, have: Option<&str>) -> bool {
    let int = |s: &str| s.parse::<i64>().ok();
    match r.operator.as_str() {
        "In" => have.is_some_and(|h| r.values.iter().any(|v| v == h)),
        "NotIn" => !have.is_some_and(|h| r.values.iter().any(|v| v == h)),
        "Exists" => have.is_some(),
        "DoesNotExist" => have.is_none(),
        "Gt" | "Lt" => match (have.and_then(int), r.values.first().and_then(|v| int(v))) {
            (Some(h), Some(v)) if r.values.len() == 1 => {
                if r.operator == "Gt" {
                    h > v
                } else {
                    h < v
                }
            }
            _ => false,
        },
        _ => false,
    }
}

/// `ToleratesTaint`: effect (empty = all), then `Exists` (empty key = all keys) or
/// `Equal` (default; key and value equal, absent value = "").
pub fn tolerates(tol: &Toleration, taint: &Taint) -> bool {
    if tol.effect.as_deref().is_some_and(|e| e != taint.effect) {
        return false;
    }
    if tol.key.as_deref().is_some_and(|k| k != taint.key) {
        return false;
    }
    match tol.operator.as_deref() {
        Some("Exists") => true,
        None | Some("Equal") => {
            tol.key.is_some()
                && tol.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or("")
        }
        _ => false,
    }
}

/// One-line description of the pod's required node affinity, e.g.
/// `a In [x, y] AND b Exists  OR  metadata.name In [n1]`.
pub(crate) fn affinity_str(terms: &[SelectorTerm]) -> String {
    let req = |r: &SelectorRequirement| {
        if r.values.is_empty() {
            format!("{} {}", r.key, r.operator)
        } else {
            format!("{} {} [{}]", r.key, r.operator, r.values.join(", "))
        }
    };
    terms
        .iter()
        .map(|t| {
            t.match_expressions
                .iter()
                .chain(&t.match_fields)
                .map(req)
                .collect::<Vec<_>>()
                .join(" AND ")
        })
        .map(|s| {
            if s.is_empty() {
                "(empty term)".into()
            } else {
                s
            }
        })
        .collect::<Vec<_>>()
        .join("  OR  ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::pods::read_pods_str;

    fn node(labels: &[(&str, &str)], taints: &[(&str, Option<&str>, &str)]) -> NodeInfo {
        let mut n = NodeInfo::named("n1");
        for (k, v) in labels {
            n.labels.insert((*k).into(), (*v).into());
        }
        for (k, v, e) in taints {
            n.taints.push(Taint {
                key: (*k).into(),
                value: v.map(str::to_owned),
                effect: (*e).into(),
            });
        }
        n
    }

    fn pod(spec: &str) -> PodInfo {
        read_pods_str(
            &format!(r#"{{"kind":"Pod","metadata":{{"name":"p"}},"spec":{spec}}}"#),
            "t",
        )
        .unwrap()
        .remove(0)
    }

    #[test]
    fn selector_affinity_taints() {
        let p = pod(r#"{"nodeSelector":{"w":"vm"},
            "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[
               {"matchExpressions":[{"key":"gpus","operator":"Gt","values":["2"]}]},
               {"matchFields":[{"key":"metadata.name","operator":"In","values":["n1"]}]}]}}},
            "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]}"#);
        let ok = node(
            &[("w", "vm")],
            &[
                ("nvidia.com/gpu", Some("present"), "NoSchedule"),
                ("soft", None, "PreferNoSchedule"),
            ],
        );
        assert!(allows(&p, &ok));
        let bad = {
            let mut n = node(
                &[("w", "ct"), ("gpus", "1")],
                &[("dedicated", Some("ml"), "NoExecute")],
            );
            n.name = "n2".into();
            n
        };
        let ex = exclusions(&p, &bad);
        assert_eq!(ex.len(), 3, "{ex:?}");
        assert_eq!(ex[0].to_string(), "nodeSelector w=vm (node has w=ct)");
        assert_eq!(ex[1], Exclusion::Affinity);
        assert_eq!(
            ex[2].to_string(),
            "untolerated taint {dedicated: ml}:NoExecute"
        );
        assert_eq!(
            affinity_str(p.required_affinity.as_deref().unwrap()),
            "gpus Gt [2]  OR  metadata.name In [n1]"
        );
    }

    #[test]
    fn toleration_rules() {
        let t = Taint {
            key: "k".into(),
            value: Some("v".into()),
            effect: "NoSchedule".into(),
        };
        let tol =
            |k: Option<&str>, op: Option<&str>, v: Option<&str>, e: Option<&str>| Toleration {
                key: k.map(Into::into),
                operator: op.map(Into::into),
                value: v.map(Into::into),
                effect: e.map(Into::into),
            };
        assert!(tolerates(&tol(None, Some("Exists"), None, None), &t));
        assert!(tolerates(&tol(Some("k"), None, Some("v"), None), &t));
        assert!(!tolerates(&tol(Some("k"), None, Some("w"), None), &t));
        assert!(!tolerates(
            &tol(Some("k"), Some("Exists"), None, Some("NoExecute")),
            &t
        ));
        assert!(!tolerates(&tol(None, None, None, None), &t));
    }
}
