//! The quota layer in front of an explanation: for a pod or Job Kueue manages, what Kueue
//! says of its Workload ([`QuotaVerdict`], judged by [`crate::analysis::kueue`]) goes
//! before the scheduler's verdict in the cause, the fix and the evidence.

use crate::analysis::diagnosis::CauseCode;
use crate::analysis::explain::Explanation;
use crate::analysis::kueue::{QuotaCause, QuotaVerdict};
use crate::model::kueue::QUEUE_LABEL;

/// Puts the quota layer in front of `e`, the explanation of a pod Kueue manages (or of the
/// pod a Job's template makes): `v` becomes [`Explanation::quota`]; when Kueue holds the
/// workload ([`QuotaCause::holds`]) the cause and fix say so first, then what would hold
/// the pods once admitted (the scheduler verdict `e` already holds, judged on the
/// flavor's nodes when the caller put them in the pod's node selector); when it is
/// admitted (or fits) in a flavor whose nodes advertise none of a requested GPU name, that
/// is said first: the pods will wait at the scheduler. `what`: `pod` or `Job`.
pub fn with_quota(e: &mut Explanation, v: QuotaVerdict, what: &str) {
    // A gated pod's cause already says what would hold it once its gates are gone.
    let after_gates = (e.cause_code == CauseCode::Gated)
        .then(|| {
            e.cause
                .split_once("once they are removed, ")
                .map(|(_, t)| t.to_owned())
        })
        .flatten();
    let then = match after_gates {
        Some(t) => t,
        None if e.cause_code == CauseCode::FitsNow || e.cause.is_empty() => {
            "the scheduler would place its pods now".to_owned()
        }
        None => format!("the pods would wait on `{}`: {}", e.cause_code, e.cause),
    };
    let mut evidence = vec![format!(
        "Kueue: LocalQueue {}, ClusterQueue {}",
        &v.local_queue,
        v.cluster_queue.as_deref().unwrap_or("none")
    )];
    if let Some(m) = &v.kueue_message {
        evidence.push(format!("Kueue says: {}", m));
    }
    for f in &v.flavors {
        evidence.push(format!(
            "flavor {}: {}",
            &f.flavor,
            if f.reason.is_empty() {
                "fits".to_owned()
            } else {
                f.reason.clone()
            }
        ));
    }
    if v.cause.holds() {
        e.cause = format!(
            "Kueue holds the {what} (`{}`): {}; once admitted, {then}",
            v.cause.as_str(),
            &v.message
        );
        let fix = match v.cause {
            QuotaCause::NoQueue => format!(
                "create LocalQueue {} pointing at a ClusterQueue, or set the {QUEUE_LABEL} label to an existing one",
                &v.local_queue
            ),
            QuotaCause::NameNotCovered => format!(
                "give ClusterQueue {} quota on the name in a flavor whose nodes advertise it; gpuwl check --effective judges each flavor's quota against its nodes",
                v.cluster_queue.as_deref().unwrap_or("?")
            ),
            QuotaCause::QuotaExhausted => {
                "wait for the admitted workloads holding the quota to finish, or raise the flavor's nominalQuota (as far as its nodes advertise)".to_owned()
            }
            _ => "raise the flavor's nominalQuota to the request (as far as its nodes advertise), or ask for less".to_owned(),
        };
        e.fix = if e.fix.is_empty() || e.cause_code == CauseCode::FitsNow {
            fix
        } else {
            format!("{fix}; then: {}", e.fix)
        };
    } else if let Some((r, f)) = &v.unservable {
        e.cause = format!(
            "Kueue {} the {what} in flavor {}, whose nodes advertise no {}: {then}",
            if v.admitted { "admitted" } else { "will admit" },
            f,
            r
        );
        e.fix = format!(
            "move the quota on {} in flavor {} to the name its nodes advertise, or point the flavor's nodeLabels at nodes that advertise it (gpuwl check --effective reports kueue-quota-not-advertised)",
            r, f
        );
    }
    for (i, l) in evidence.into_iter().enumerate() {
        e.evidence.insert(i, l);
    }
    e.quota = Some(v);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::explain::{Inputs, explain};
    use crate::analysis::kueue::{QuotaCause, judge_workload, workload_of};
    use crate::decode::kueue::read_str;
    use crate::model::node::NodeInfo;

    /// The lab's held Job, as `explain job` puts it together: the pod its template makes
    /// (asking the passthrough name, which lab-node-1 has free) and the Workload Kueue holds.
    #[test]
    fn a_held_job_says_kueue_first_and_what_the_scheduler_would_do_after() {
        let pod = crate::decode::pods::read_pods_str(
            r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "kueue-passthrough", "namespace": "gpu-kueue"},
                "spec": {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]}}"#,
            "pod.json",
        )
        .unwrap()
        .remove(0);
        let mut node = NodeInfo::named("lab-node-1");
        node.labels.insert(
            "nvidia.com/gpu.workload.config".into(),
            "vm-passthrough".into(),
        );
        node.allocatable = Some(
            [("nvidia.com/GA102GL_A10".to_owned(), "2".to_owned())]
                .into_iter()
                .collect(),
        );
        node.capacity = node.allocatable.clone().unwrap();
        let nodes = [node];
        let mut e = explain(
            &pod,
            Inputs {
                nodes: Some(&nodes),
                pods: Some(&[]),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(e.cause_code, CauseCode::FitsNow);
        let objects = read_str(
            &format!(
                "{}\n- kind: Workload\n  metadata: {{name: job-kueue-passthrough-1, namespace: gpu-kueue, ownerReferences: [{{kind: Job, name: kueue-passthrough, controller: true}}]}}\n  spec:\n    queueName: lab\n    podSets: [{{name: main, count: 1, template: {{spec: {{containers: [{{name: c, resources: {{limits: {{nvidia.com/GA102GL_A10: \"1\"}}}}}}]}}}}}}]\n  status:\n    conditions: [{{type: QuotaReserved, status: \"False\", reason: Pending, message: \"couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue\"}}]\n",
                include_str!("../../../../../tests/data/kueue/kueue.yaml").trim_end()
            ),
            "lab.yaml",
        )
        .unwrap();
        let w = workload_of(&objects, "gpu-kueue", "Job/kueue-passthrough").unwrap();
        let v = judge_workload(w, &objects, None);
        assert_eq!(v.cause, QuotaCause::NameNotCovered);
        with_quota(&mut e, v, "Job");
        assert!(
            e.cause.starts_with("Kueue holds the Job (`kueue-name-not-covered`): ClusterQueue lab-gpus has no quota on nvidia.com/GA102GL_A10")
                && e.cause.ends_with("; once admitted, the scheduler would place its pods now"),
            "{}",
            e.cause
        );
        assert_eq!(
            e.evidence[0],
            "Kueue: LocalQueue gpu-kueue/lab, ClusterQueue lab-gpus"
        );
        assert_eq!(
            e.evidence[1],
            "Kueue says: couldn't assign flavors to pod set main: resource nvidia.com/GA102GL_A10 unavailable in ClusterQueue"
        );
        assert!(
            e.fix
                .starts_with("give ClusterQueue lab-gpus quota on the name"),
            "{}",
            e.fix
        );
    }
}
