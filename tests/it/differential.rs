//! explain against the real kube-scheduler, on random situations (see
//! differential_harness.rs): 11 rounds × 10 targets = 110 scenarios, seed 22 (the suite's
//! CI size; it was 24 rounds, then 20, then 15, cut as the test command's time mattered:
//! issues 38 and 51; the bench runs 520 and more, BENCHMARKS.md). Every
//! outcome (placed / not placed / gated / refused by the API server) must agree, every
//! reason the scheduler names must have a code in causeCodes, the reason counts gpuwl
//! predicts must be the scheduler's, and for every pod left pending inventory, serve, the
//! admission guard and plan must agree with explain's verdict (one verdict per pod). `bench/differential.rs` runs thousands and prints the figures.

#[path = "differential_harness.rs"]
pub(crate) mod harness;

use crate::kit::{ClusterDown, one_cluster_at_a_time, own_cluster};

const CLUSTER: &str = "gpuwl-it-differential";

#[test]
#[ignore = "needs local control plane"]
fn explain_agrees_with_the_real_scheduler() {
    let _serial = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let kubeconfig = own_cluster(CLUSTER, &["--nodes", "0"]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let outcomes = rt.block_on(async {
        let client = gpuwl::cluster::client(std::path::Path::new(&kubeconfig), None)
            .await
            .unwrap();
        let mut rng = harness::Rng::new(22);
        let mut all = Vec::new();
        for id in 0..11 {
            let round = harness::generate(&mut rng, id, 10);
            all.extend(harness::run_round(&client, &round).await.unwrap());
        }
        all
    });
    let f = harness::figures(&outcomes);
    eprintln!("differential: {f}");
    let bad: Vec<String> = outcomes
        .iter()
        .filter(|o| !(o.outcome_ok && o.causes_ok && o.reasons_ok && o.consistent))
        .map(|o| {
            format!(
                "{}: placed={} refused={} code={} codes={:?} {}\n  scheduler: {}\n  predicted {:?}\n  actual    {:?}\n  manifest {}",
                o.name, o.placed, o.refused, o.code, o.codes, o.inconsistency, o.message, o.predicted, o.actual, o.manifest
            )
        })
        .collect();
    assert!(bad.is_empty(), "{f}\n{}", bad.join("\n"));
    // Issue 35: every fix explain claims sufficient is applied on the real cluster; the pod
    // must be bound after it (95 % at least: the rest are listed), and no fix breaks a
    // harm rule.
    let unbound: Vec<String> = outcomes
        .iter()
        .filter_map(|o| {
            let x = o.fix.as_ref()?;
            (x.sufficient && !x.bound || !x.harm.is_empty()).then(|| {
                format!(
                    "{}: code={} harm={:?}\n  actions {}\n  after: {}\n  manifest {}",
                    o.name, o.code, x.harm, x.actions, x.message, o.manifest
                )
            })
        })
        .collect();
    let mut none: std::collections::BTreeMap<String, usize> = Default::default();
    for o in &outcomes {
        if o.fix.as_ref().is_some_and(|x| !x.sufficient) {
            *none.entry(o.code.to_string()).or_default() += 1;
        }
    }
    eprintln!("no tested change serves, by cause: {none:?}");
    assert_eq!(f.harmful, 0, "{f}\n{}", unbound.join("\n"));
    assert!(
        f.fixes >= 40 && f.fixes_bound * 100 >= f.fixes * 95,
        "{f}\n{}",
        unbound.join("\n")
    );
    assert!(f.total >= 110, "{f}");
    // How many targets get placed varies between runs of the same seed (30 on one, 24 on
    // another at 15 rounds; 8 at 11 rounds): the live state a target meets (node readiness and taints set by kwok and
    // the controllers) is timing-dependent. gpuwl reads that same state, so agreement is
    // asserted above whatever the count; this only guards that both sides are exercised.
    assert!(
        f.placed >= 4 && f.pending >= 60 && f.refused >= 1 && f.gated >= 1,
        "a generator that exercises every side: {f}"
    );
}
