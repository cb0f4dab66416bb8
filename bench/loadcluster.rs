//! Dev tool: creates every item of a generated `List` (Nodes or Pods, from `gendump`) on
//! a cluster with bounded parallelism. `resourceVersion`/`uid` are dropped; pods keep
//! `spec.nodeName`, so they are bound without the scheduler; their namespaces are
//! created first. Objects that already exist are counted and skipped (rerunnable).
//!
//! ```text
//! cargo run --release --example loadcluster -- --kubeconfig KC [--parallel 16] FILE...
//! ```

use std::collections::BTreeSet;
use std::time::Instant;

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde::Deserialize;

#[derive(Deserialize)]
struct List {
    items: Vec<serde_json::Value>,
}

enum Outcome {
    Created,
    Exists,
}

async fn create(client: Client, mut v: serde_json::Value) -> anyhow::Result<Outcome> {
    if let Some(m) = v.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        m.remove("resourceVersion");
        m.remove("uid");
        m.remove("creationTimestamp");
    }
    let pp = PostParams::default();
    let res = match v["kind"].as_str() {
        Some("Node") => Api::<Node>::all(client)
            .create(&pp, &serde_json::from_value(v)?)
            .await
            .map(|_| ()),
        Some("Pod") => {
            let ns = v["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string();
            Api::<Pod>::namespaced(client, &ns)
                .create(&pp, &serde_json::from_value(v)?)
                .await
                .map(|_| ())
        }
        k => anyhow::bail!("unsupported kind {k:?}"),
    };
    match res {
        Ok(()) => Ok(Outcome::Created),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(Outcome::Exists),
        Err(e) => Err(e.into()),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut kubeconfig = None;
    let mut parallel = 16usize;
    let mut files = vec![];
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--kubeconfig" => kubeconfig = args.next(),
            "--parallel" => parallel = args.next().expect("--parallel N").parse()?,
            _ => files.push(a),
        }
    }
    let config = match kubeconfig {
        Some(p) => {
            Config::from_custom_kubeconfig(Kubeconfig::read_from(p)?, &KubeConfigOptions::default())
                .await?
        }
        None => Config::infer().await?,
    };
    let client = Client::try_from(config)?;
    for f in files {
        let t = Instant::now();
        let list: List = serde_json::from_slice(&std::fs::read(&f)?)?;
        let namespaces: BTreeSet<String> = list
            .items
            .iter()
            .filter_map(|v| v["metadata"]["namespace"].as_str().map(str::to_owned))
            .collect();
        for ns in namespaces {
            let nsobj: Namespace =
                serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?;
            match Api::<Namespace>::all(client.clone())
                .create(&PostParams::default(), &nsobj)
                .await
            {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            }
        }
        let total = list.items.len();
        let results: Vec<anyhow::Result<Outcome>> = stream::iter(list.items)
            .map(|v| create(client.clone(), v))
            .buffer_unordered(parallel)
            .collect()
            .await;
        let (mut created, mut exists) = (0, 0);
        for r in results {
            match r? {
                Outcome::Created => created += 1,
                Outcome::Exists => exists += 1,
            }
        }
        eprintln!(
            "{f}: {total} items, {created} created, {exists} already there, {:.1} s, parallel {parallel}",
            t.elapsed().as_secs_f64()
        );
    }
    Ok(())
}
