//! Dev tool (not a user command): writes realistic, deterministic
//! `kubectl get nodes -o json` / `kubectl get pods -A -o json` dumps for the benchmarks.
//!
//! ```text
//! cargo run --release --example gendump -- --nodes 5000 [--pods 20000] [--seed 1]
//!     [--mismatch-pct 2] [--out nodes.json] [--pods-out pods.json] [--compact]
//! ```
//!
//! Nodes are spread over the three pools and unlabelled CPU nodes (30 % container,
//! 20 % vm-passthrough, 20 % vm-vgpu, 5 % unlabelled GPU nodes, 25 % CPU-only), with
//! kubelet / NFD / GFD-like labels, annotations, conditions, addresses, nodeInfo and 30-60
//! images each, so one node is 5-20 KB of pretty JSON (kubectl indents by 4). A share of
//! the labelled nodes (`--mismatch-pct`) mismatches in one of three ways: wrong-class
//! resource, invalid label value, or only a stale `"0"`. Pods are bound by
//! `spec.nodeName` to GPU nodes, request the node's GPU resource, and carry
//! kubelet-like status. The same seed always gives the same bytes.
//!
//! Scale mode (`bench/scale.sh`): `--scale --nodes N [--from-node K] [--per-node 30]
//! --out nodes.json --pods-out pods.json` writes ~20 % GPU nodes (MIG, vGPU, taints,
//! cordons) and `--per-node` pods per node (GPU holders, CPU pods, one pending GPU pod
//! per ten nodes), only for nodes `K..N` (see `gen::generate_scale`), always compact.
//!
//! On stderr: the number of nodes, labelled nodes and planted mismatches (so a run can
//! check the checker's output).

use std::fs::File;
use std::io::{self, BufWriter, Write};

#[allow(dead_code)]
#[path = "gen.rs"]
mod r#gen;

fn main() -> io::Result<()> {
    let mut nodes = 500usize;
    let mut pods = 0usize;
    let mut seed = 1u64;
    let mut mismatch_pct = 2.0f64;
    let mut out = String::from("-");
    let mut pods_out: Option<String> = None;
    let mut compact = false;
    let mut scale = false;
    let mut from_node = 0usize;
    let mut per_node = 30usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().expect("missing value");
        match a.as_str() {
            "--nodes" => nodes = val().parse().expect("--nodes N"),
            "--pods" => pods = val().parse().expect("--pods N"),
            "--seed" => seed = val().parse().expect("--seed N"),
            "--mismatch-pct" => mismatch_pct = val().parse().expect("--mismatch-pct P"),
            "--out" => out = val(),
            "--pods-out" => pods_out = Some(val()),
            "--compact" => compact = true,
            "--scale" => scale = true,
            "--from-node" => from_node = val().parse().expect("--from-node K"),
            "--per-node" => per_node = val().parse().expect("--per-node P"),
            "-h" | "--help" => {
                eprintln!(
                    "gendump --nodes N [--pods N --pods-out FILE] [--seed S] [--mismatch-pct P] [--out FILE|-] [--compact]"
                );
                return Ok(());
            }
            other => panic!("unknown argument {other}"),
        }
    }
    let open = |p: &str| -> io::Result<Box<dyn Write>> {
        Ok(if p == "-" {
            Box::new(BufWriter::with_capacity(1 << 20, io::stdout().lock()))
        } else {
            Box::new(BufWriter::with_capacity(1 << 20, File::create(p)?))
        })
    };
    if scale {
        let po = pods_out.as_deref().expect("--scale needs --pods-out FILE");
        let (_, written, pending) =
            r#gen::generate_scale(nodes, from_node, per_node, seed, open(&out)?, open(po)?)?;
        eprintln!(
            "nodes={} pods={written} pending={pending}",
            nodes - from_node.min(nodes)
        );
        return Ok(());
    }
    let pods = match &pods_out {
        Some(p) if pods > 0 => Some((pods, open(p)?)),
        _ => None,
    };
    let (g, pods_written) = r#gen::generate(nodes, seed, mismatch_pct, compact, open(&out)?, pods)?;
    eprintln!(
        "nodes={nodes} labelled={} mismatches={} pods={pods_written}",
        g.labelled, g.mismatches
    );
    Ok(())
}
