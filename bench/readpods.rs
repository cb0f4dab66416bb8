//! Reads a pod dump with gpuwl's pod reader and prints how many pods it kept, so that the
//! reader's own time and peak memory can be measured apart from an analysis
//! (`bench/pods-memory.sh`, BENCHMARKS.md).
//!
//! ```text
//! cargo run --release --example readpods -- pods.json
//! ```

fn main() {
    let path = std::env::args().nth(1).expect("usage: readpods FILE");
    match gpuwl_core::decode::pods::read_pods_path(std::path::Path::new(&path)) {
        Ok(pods) => {
            let units: i64 = pods
                .iter()
                .flat_map(|p| p.requests.values())
                .fold(0i64, |s, v| s.saturating_add(*v));
            println!("pods={} units={units}", pods.len());
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    }
}
