//! Bench peer (b): the straightforward way to read a node dump in Rust —
//! `serde_json::from_reader` into a list of k8s-openapi `Node`s — then the seed's
//! count of labelled nodes, so the work is not optimised away.
//!
//! ```text
//! cargo run --release --example openapi_decode -- nodes.json
//! ```

use std::fs::File;
use std::io::BufReader;

use k8s_openapi::api::core::v1::Node;
use serde::Deserialize;

/// `kubectl get nodes -o json` is a `List`; only its `items` matter here.
#[derive(Deserialize)]
struct NodeList {
    items: Vec<Node>,
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: openapi_decode FILE");
    let f = File::open(&path).expect("open");
    let list: NodeList =
        serde_json::from_reader(BufReader::with_capacity(64 * 1024, f)).expect("decode");
    let labelled = list
        .items
        .iter()
        .filter(|n| {
            n.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("nvidia.com/gpu.workload.config"))
        })
        .count();
    println!("nodes={} labelled={labelled}", list.items.len());
}
