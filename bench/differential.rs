//! Dev tool: the differential test of `explain` against the real kube-scheduler at scale
//! (the generator and the comparison are tests/it/differential_harness.rs; the `--ignored`
//! test runs 240 scenarios of seed 22). Prints the agreement figures, and each
//! disagreement with its manifest.
//!
//! ```text
//! cargo run --release --example differential -- --kubeconfig KC [--seed 1] [--rounds 200] [--targets 10]
//! ```
//! bench/differential.sh starts a local control plane, runs this and stops it. With
//! `GPUWL_DISPROVE=1` every "no tested change serves" verdict is put to the disprover
//! (each single change within reach tried on the real scheduler; `DISPROVED` lines), and
//! the verdicts are counted by their `reasonCode`.

#[path = "../tests/it/differential_harness.rs"]
mod harness;

use std::time::Instant;

fn main() {
    let mut kubeconfig = None;
    let mut seed = 1u64;
    let mut rounds = 200usize;
    let mut targets = 10usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().expect("a value after the flag");
        match a.as_str() {
            "--kubeconfig" => kubeconfig = Some(v()),
            "--seed" => seed = v().parse().expect("--seed N"),
            "--rounds" => rounds = v().parse().expect("--rounds N"),
            "--targets" => targets = v().parse().expect("--targets N"),
            other => panic!("unknown argument {other}"),
        }
    }
    let kubeconfig = kubeconfig.expect("--kubeconfig FILE");
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let client = gpuwl::cluster::client(std::path::Path::new(&kubeconfig), None)
            .await
            .unwrap();
        let mut rng = harness::Rng::new(seed);
        let mut all = Vec::new();
        let start = Instant::now();
        for id in 0..rounds {
            // Round ids are offset by the seed so that reruns on one cluster never meet a
            // node name still being deleted.
            let round = harness::generate(&mut rng, id + (seed as usize % 1000) * 100_000, targets);
            match harness::run_round(&client, &round).await {
                Ok(v) => {
                    for o in v.iter().filter(|o| !(o.outcome_ok && o.causes_ok && o.reasons_ok && o.consistent)) {
                        println!(
                            "DISAGREE {}: placed={} refused={} code={} codes={:?} {}\n  scheduler: {}\n  predicted {:?}\n  actual    {:?}\n  manifest {}",
                            o.name, o.placed, o.refused, o.code, o.codes, o.inconsistency, o.message, o.predicted, o.actual, o.manifest
                        );
                    }
                    for o in &v {
                        match &o.disproved {
                            Some(Ok(c)) if !c.is_empty() => println!(
                                "DISPROVED {}: code={} reasonCode={} bound by {c:?}\n  manifest {}",
                                o.name, o.code, o.reason_code, o.manifest
                            ),
                            Some(Err(e)) => println!("DISPROVER-FAILED {}: {e}", o.name),
                            _ => {}
                        }
                        if let Some(x) = o.fix.as_ref().filter(|x| !x.sufficient) {
                            let _ = x;
                            println!("NONE {}: code={} reasonCode={}", o.name, o.code, o.reason_code);
                        }
                    }
                    all.extend(v);
                }
                Err(e) => println!("round {id} failed: {e}"),
            }
            if (id + 1) % 20 == 0 {
                eprintln!("{} rounds, {}", id + 1, harness::figures(&all));
            }
        }
        let f = harness::figures(&all);
        println!("seed {seed}: {f}");
        println!(
            "said none serves, by reasonCode: {:?}",
            harness::none_by_reason(&all)
        );
        println!(
            "outcome {:.2}%, reasons {:.2}%, causes {:.2}%, one verdict {:.2}%, {:.1} s ({:.0} ms per scenario)",
            100.0 * f.outcome as f64 / f.total.max(1) as f64,
            100.0 * f.reasons as f64 / f.pending.max(1) as f64,
            100.0 * f.causes as f64 / f.pending.max(1) as f64,
            100.0 * f.consistent as f64 / f.pending.max(1) as f64,
            start.elapsed().as_secs_f64(),
            1000.0 * start.elapsed().as_secs_f64() / f.total.max(1) as f64
        );
    });
}
