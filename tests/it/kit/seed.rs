//! The lab's seed files: what a lab run writes that holds no timestamps or uids, so that two
//! runs (a plain lab, one with the GPU Operator, KubeVirt or Kueue) can be compared byte for
//! byte.

use std::path::Path;

/// All of `out/` but the node dump (`out/nodes.json` holds uids and timestamps), the
/// checker, then the pod manifests (the last [`POD_MANIFESTS`]).
const SEED_FILES: [&str; 13] = [
    "out/01-nodes.txt",
    "out/operands.txt",
    "out/03-resources.txt",
    "out/04-container.txt",
    "out/05-passthrough.txt",
    "out/06-placement.txt",
    "out/07-cross.txt",
    "out/consistency.txt",
    "bin/check-config.sh",
    "k8s/pod-container.yaml",
    "k8s/pod-passthrough.yaml",
    "k8s/pod-vgpu.yaml",
    "k8s/pod-cross.yaml",
];

/// How many of [`SEED_FILES`], at its end, are pod manifests (`k8s/pod-*.yaml`).
const POD_MANIFESTS: usize = 4;

/// Which of the seed files a comparison reads.
#[derive(Debug, Clone, Copy)]
pub enum Seed {
    /// Every seed file.
    All,
    /// The results and the checker, not the pod manifests (`k8s/`): the Kueue lab's
    /// comparison.
    WithoutPodManifests,
}

/// The seed files `which` names, as paths relative to a lab's root.
pub fn seed_files(which: Seed) -> &'static [&'static str] {
    match which {
        Seed::All => &SEED_FILES,
        Seed::WithoutPodManifests => &SEED_FILES[..SEED_FILES.len() - POD_MANIFESTS],
    }
}

/// Asserts that the lab roots `a` and `b` hold the same seed files (`which`), byte for
/// byte; panics naming the first file that differs, with both texts (or the file that is
/// missing).
pub fn assert_same_seed(a: &Path, b: &Path, which: Seed) {
    for f in seed_files(which) {
        let x = std::fs::read(a.join(f)).unwrap();
        let y = std::fs::read(b.join(f)).unwrap();
        assert!(
            x == y,
            "{f} differs:\n{}\nvs\n{}",
            String::from_utf8_lossy(&x),
            String::from_utf8_lossy(&y)
        );
    }
}
