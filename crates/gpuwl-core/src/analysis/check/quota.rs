//! The quota layer ([`QuotaLayer`]) fed with check's verdict on each node: its GPU-node
//! evidence and its pool. An `impl` of the quota layer's own here, beside the checker, so
//! that [`crate::analysis::kueue`] (whose findings `check` reports) does not name the
//! checker.

use crate::analysis::check::{NodeReport, judge_node};
use crate::analysis::kueue::QuotaLayer;
use crate::model::kueue::KueueObjects;
use crate::model::node::NodeInfo;
use crate::model::operator::ClusterPolicy;
use crate::model::resource::Classifier;

impl QuotaLayer {
    /// Feeds one node with check's verdict on it ([`judge_node`]): its GPU-node evidence
    /// and its pool (the effective workload config). `check`'s
    /// [`Checker`](crate::analysis::check::Checker) and [`QuotaLayer::of_nodes`] (explain,
    /// inventory, serve) both feed it so.
    pub fn add_judged(&mut self, node: &NodeInfo, r: &NodeReport) {
        let pool = r.effective_workload.map(|w| w.as_str()).unwrap_or_default();
        self.add(node, r.gpu_node.is_some(), pool);
    }

    /// The layer of `objects` over `nodes`, each judged as `check` judges it under `policy`
    /// (default classifier, no DRA objects): the one assembly of the flavors' offers and
    /// the findings for every command but `check` (which feeds its own checker's verdicts).
    pub fn of_nodes(
        objects: &KueueObjects,
        nodes: &[NodeInfo],
        policy: Option<&ClusterPolicy>,
    ) -> QuotaLayer {
        let classifier = Classifier::default();
        let mut l = QuotaLayer::new(objects.clone());
        for n in nodes {
            l.add_judged(n, &judge_node(n, &classifier, policy, None));
        }
        l
    }
}
