//! kwok's node leases: when one counts as not renewed ([`lease_stale_after`]), the finding
//! that kwok stopped heartbeating its nodes ([`kwok_wedged`]), and clearing them before a
//! restarted kwok makes them afresh.

use std::path::Path;
use std::time::Duration;

use super::health;
use super::kubeconfig::client;
use super::runtime::block_on_own_thread;
use super::state::kubeconfig_path;

/// What [`kwok_leases`] finds on running cluster `name`, `None` when kwok renews every
/// node lease (or nothing can be asked).
pub(super) fn kwok_wedged(name: &str) -> Option<String> {
    let kubeconfig = kubeconfig_path(name);
    block_on_own_thread(async move { kwok_leases(&kubeconfig).await })
        .ok()
        .flatten()
}

/// The age at which a node lease of unknown duration counts as one kwok has stopped
/// renewing (a lease of the kubelet's default 40 s); [`lease_stale_after`].
pub const LEASE_STALE_AFTER: Duration = Duration::from_secs(40);

/// When a node lease of `duration_seconds` (`spec.leaseDurationSeconds`; `None`: unknown)
/// counts as not renewed: after half of it, never before [`LEASE_STALE_MIN`]; an unknown
/// duration, after [`LEASE_STALE_AFTER`]. kwok
/// renews a lease every quarter of its duration, ±4 % (kwok v0.8.0
/// `pkg/kwok/controllers/controller.go`, as the kubelet does): half is two renewals
/// missed. The local control plane's kwok runs 200 s leases ([`recipe::kwok_controller`]),
/// so 100 s (at least [`LEASE_STALE_MIN`] for a short lease, e.g. a test's); with the
/// supervisor's two findings [`supervisor::KWOK_CHECK_EVERY`] (15 s)
/// apart, a wedged kwok is restarted at most ~142 s after its last renewal
/// ([`supervisor::worst_kwok_restart`]), well inside
/// kube-controller-manager's `--node-monitor-grace-period` (as long as the lease here,
/// 200 s), so no node goes NotReady (three quarters, 150 s, with checks 30 s apart restarted
/// it 180-210 s after: at the edge of the grace period). With 40 s for every lease, a
/// healthy kwok renewing every 50 s was called wedged.
pub fn lease_stale_after(duration_seconds: Option<i32>) -> Duration {
    match duration_seconds.and_then(|d| u64::try_from(d).ok()) {
        Some(d) if d > 0 => Duration::from_secs(d / 2).max(LEASE_STALE_MIN),
        _ => LEASE_STALE_AFTER,
    }
}

/// The least age at which a lease of known duration counts as not renewed (a 20 s lease
/// is renewed every 5 s: 10 s is two renewals missed).
pub const LEASE_STALE_MIN: Duration = Duration::from_secs(10);

/// The finding when kwok renews none of the node leases: every lease in `kube-node-lease`
/// of a node that exists is older than [`lease_stale_after`] its duration, e.g. `4 of 4
/// node leases not renewed for 52 s or more (lab-node-0, …): kwok stopped heartbeating its
/// nodes; …`. `None` when at least one was renewed in time, or there is none, or the API
/// server cannot say.
///
/// A kwok that renews some leases and not others is behind, not wedged: at 5,000 nodes on
/// a busy 2-core machine (issue 51's scale bench) it renewed about a third of them in time
/// while it also marked 90,000 new pods Running. Restarting it there made it list every
/// node and pod again, fall further behind and be restarted again: 21 times in 17 minutes.
/// A stopped or hung kwok (SIGSTOP in the live test) renews none.
pub(super) async fn kwok_leases(kubeconfig: &Path) -> Option<String> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let api = client(kubeconfig, None).await.ok()?;
    let lp = kube::api::ListParams::default();
    let nodes: kube::Api<Node> = kube::Api::all(api.clone());
    let leases: kube::Api<Lease> = kube::Api::namespaced(api, "kube-node-lease");
    let (nodes, leases) = tokio::time::timeout(health::TIMEOUT, async {
        (nodes.list_metadata(&lp).await, leases.list(&lp).await)
    })
    .await
    .ok()?;
    let names: std::collections::BTreeSet<String> = nodes
        .ok()?
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut stale: Vec<(String, i64)> = Vec::new();
    let mut total = 0;
    for l in leases.ok()?.items {
        let Some(name) = l.metadata.name.filter(|n| names.contains(n)) else {
            continue;
        };
        total += 1;
        let duration = l.spec.as_ref().and_then(|s| s.lease_duration_seconds);
        let renewed = l.spec.and_then(|s| s.renew_time).map(|t| t.0);
        let age = renewed.map_or(i64::MAX, |t| now.duration_since(t).as_secs());
        if age >= lease_stale_after(duration).as_secs() as i64 {
            stale.push((name, age));
        }
    }
    if stale.len() < total {
        return None;
    }
    kwok_lease_finding(&stale, total)
}

/// Deletes every lease in `kube-node-lease` (each is a kwok node's: these clusters have
/// no kubelet), within [`health::TIMEOUT`]; errors are ignored (best effort).
pub(super) async fn delete_node_leases(kubeconfig: &Path) {
    use k8s_openapi::api::coordination::v1::Lease;
    let Ok(api) = client(kubeconfig, None).await else {
        return;
    };
    let leases: kube::Api<Lease> = kube::Api::namespaced(api, "kube-node-lease");
    let _ = tokio::time::timeout(
        health::TIMEOUT,
        leases.delete_collection(
            &kube::api::DeleteParams::default(),
            &kube::api::ListParams::default(),
        ),
    )
    .await;
}

/// The finding [`kwok_leases`] words from the stale leases (name, age in s) among `total`.
fn kwok_lease_finding(stale: &[(String, i64)], total: usize) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let youngest = stale.iter().map(|(_, a)| *a).min().unwrap_or(0);
    let mut names: Vec<&str> = stale.iter().take(3).map(|(n, _)| n.as_str()).collect();
    if stale.len() > 3 {
        names.push("…");
    }
    Some(format!(
        "{} of {total} node leases not renewed for {youngest} s or more ({}): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it",
        stale.len(),
        names.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{recipe, supervisor};
    use crate::testing::{self, FakeApi};
    use serde_json::json;

    #[test]
    fn a_lease_is_stale_after_half_its_duration() {
        // kwok's 200 s leases here: renewed every 50 s, so 100 s is two renewals missed;
        // with two findings 15 s apart, restarted by ~130 s, inside the 200 s grace period.
        assert_eq!(lease_stale_after(Some(200)), Duration::from_secs(100));
        assert!(
            lease_stale_after(Some(200)) + 2 * crate::cluster::supervisor::KWOK_CHECK_EVERY
                < Duration::from_secs(200) * 3 / 4
        );
        // A kubelet's 40 s lease, renewed every 10 s: two renewals missed at 20 s.
        assert_eq!(lease_stale_after(Some(40)), Duration::from_secs(20));
        assert_eq!(lease_stale_after(Some(4)), LEASE_STALE_MIN);
        assert_eq!(lease_stale_after(None), LEASE_STALE_AFTER);
        assert_eq!(lease_stale_after(Some(-5)), LEASE_STALE_AFTER);
        assert_eq!(lease_stale_after(Some(0)), LEASE_STALE_AFTER);
    }

    #[test]
    fn a_wedged_kwok_is_restarted_well_inside_the_node_grace_period() {
        use crate::cluster::supervisor::{KWOK_CHECK_EVERY, POLL, worst_kwok_restart};
        // The defaults (no test knob in this process): 200 s leases and grace period, the
        // leases read every 15 s.
        assert_eq!(recipe::node_lease_seconds(), 200);
        assert_eq!(supervisor::kwok_check_every(), KWOK_CHECK_EVERY);
        let grace = Duration::from_secs(200);
        let worst = worst_kwok_restart(grace, KWOK_CHECK_EVERY);
        assert_eq!(worst, Duration::from_secs(100 + 30 + 2 + 10));
        // Well inside: under three quarters of the grace period (142 s of 200 s).
        assert!(worst < grace * 3 / 4, "{worst:?}");
        // kube-controller-manager's flags say the same grace period as kwok's leases.
        let info = recipe::golden_info();
        let l = recipe::Layout {
            info: &info,
            state: Path::new("/s"),
        };
        let kcm = recipe::kube_controller_manager(&l);
        assert!(
            kcm.args
                .contains(&"--node-monitor-grace-period=200s".to_string())
        );
        assert!(kcm.args.contains(&"--node-monitor-period=25s".to_string()));
        let kwok = recipe::kwok_controller(&l);
        assert!(
            kwok.args
                .contains(&"--node-lease-duration-seconds=200".to_string())
        );
        // The live test's 40 s leases (checks every 3 s): still inside its 40 s grace.
        let check = KWOK_CHECK_EVERY * 40 / 200;
        assert_eq!(check, Duration::from_secs(3));
        assert!(check >= POLL);
        assert!(worst_kwok_restart(Duration::from_secs(40), check) < Duration::from_secs(40));
    }

    #[test]
    fn stale_leases_are_a_finding_fresh_ones_none() {
        assert_eq!(kwok_lease_finding(&[], 4), None);
        let stale: Vec<(String, i64)> = (0..4).map(|i| (format!("n-{i}"), 50 + i)).collect();
        assert_eq!(
            kwok_lease_finding(&stale, 5).unwrap(),
            "4 of 5 node leases not renewed for 50 s or more (n-0, n-1, n-2, …): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it"
        );
    }

    #[test]
    fn kwok_is_wedged_when_the_leases_of_existing_nodes_go_stale() {
        let api = FakeApi::new();
        let https = testing::https(&api);
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = testing::kubeconfig(dir.path(), https.port);
        let rt = testing::rt();
        let now = k8s_openapi::jiff::Timestamp::now();
        let ago = |s: i64| (now - k8s_openapi::jiff::SignedDuration::from_secs(s)).to_string();
        for n in ["n-a", "n-b", "n-c"] {
            api.insert("/api/v1", "nodes", json!({"metadata": {"name": n}}));
        }
        let lease = |name: &str, ns: &str, renewed: i64, duration: i32| {
            api.insert(
                "/apis/coordination.k8s.io/v1",
                "leases",
                json!({"metadata": {"name": name, "namespace": ns},
                       "spec": {"holderIdentity": name, "leaseDurationSeconds": duration,
                                "renewTime": ago(renewed)}}),
            );
        };
        lease("n-a", "kube-node-lease", 10, 200);
        lease("n-b", "kube-node-lease", 90, 200); // under 100 s: renewed in time
        assert_eq!(rt.block_on(kwok_leases(&kubeconfig)), None);
        lease("n-c", "kube-node-lease", 100, 40); // a 40 s lease: stale after 40 s
        lease("gone", "kube-node-lease", 9000, 40); // no such node: not kwok's to renew
        lease("kube-scheduler", "kube-system", 9000, 15); // not a node lease
        // One stale beside two renewed in time: kwok is behind, not wedged.
        assert_eq!(rt.block_on(kwok_leases(&kubeconfig)), None);
        // Every lease of an existing node stale: kwok renews none.
        lease("n-a", "kube-node-lease", 150, 200);
        lease("n-b", "kube-node-lease", 120, 200);
        let finding = rt.block_on(kwok_leases(&kubeconfig)).unwrap();
        assert!(
            finding.starts_with("3 of 3 node leases not renewed for 10"),
            "{finding}"
        );
        assert!(
            finding.ends_with(
                "s or more (n-a, n-b, n-c): kwok stopped heartbeating its nodes; `gpuwl cluster up` restarts it"
            ),
            "{finding}"
        );
        // A restart deletes the node leases, and only those.
        rt.block_on(delete_node_leases(&kubeconfig));
        assert_eq!(
            api.writes(),
            ["DELETE /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases"]
        );
        for (ns, name, left) in [
            ("kube-node-lease", "n-a", false),
            ("kube-node-lease", "gone", false),
            ("kube-system", "kube-scheduler", true),
        ] {
            let path = format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/{name}");
            assert_eq!(api.get(&path).is_some(), left, "{path}");
        }
        assert_eq!(rt.block_on(kwok_leases(&kubeconfig)), None);
        // An API server that does not answer cannot say.
        let unreachable =
            testing::kubeconfig(tempfile::tempdir().unwrap().path(), testing::closed_port());
        assert_eq!(rt.block_on(kwok_leases(&unreachable)), None);
    }
}
