//! The local control plane: upstream etcd, kube-apiserver, kube-controller-manager and
//! kube-scheduler with kwok simulating every node, all on 127.0.0.1, started as detached
//! processes.
//!
//! Design decisions:
//! - The binaries come from the pinned Go module `controlplane/` ([`build`]), embedded
//!   into gpuwl and built into a cache keyed by the pins. Nothing is downloaded at run time.
//! - gpuwl starts the processes itself with the flags kwokctl's binary runtime uses
//!   (kwok's `test/e2e/kwokctl/dryrun/testdata/binary/create_cluster.txt` and
//!   `pkg/kwokctl/components/*.go`), but binds everything to 127.0.0.1 on free ports
//!   ([`ports`]). Each component's command line, ports and readiness are one value built
//!   by [`recipe`]; [`up`] starts them in order and waits for each. This is simpler and more robust than driving kwokctl (which wants to
//!   download artifacts and edits `~/.kube/config`); kwokctl is still built and can be
//!   pointed at the same binaries.
//! - kube-controller-manager runs with every default controller, as in a kubeadm
//!   cluster: a new namespace gets its `default` ServiceAccount, a Deployment gets its
//!   ReplicaSet and Pods, a deleted namespace is emptied and finalized. It authenticates
//!   with its own client certificate as `system:kube-controller-manager` and gives each
//!   controller its own ServiceAccount token (`--use-service-account-credentials`), signed
//!   with the key the API server verifies (`sa.key` / `sa.pub`, [`pki`]). Leader election
//!   is off (one instance).
//! - The node-lifecycle controller watches the node leases kwok renews every 50 s
//!   (`--node-lease-duration-seconds=200`, renewed at a quarter of it, kwok
//!   `pkg/kwok/controllers/controller.go`); it runs with kwokctl's periods for that lease
//!   (`--node-monitor-period=25s`, `--node-monitor-grace-period=200s`: kwokctl's defaults
//!   5 s / 40 s times its default heartbeat factor 5, kwok
//!   `pkg/apis/config/v1alpha1/zz_generated.defaults.go`, `pkg/kwokctl/cmd/create/cluster/cluster.go`),
//!   so a simulated node is never marked unreachable and its pods are never evicted.
//! - All default admission plugins are on, `ServiceAccount` and `TaintNodesByCondition`
//!   included: a new Node starts tainted `node.kubernetes.io/not-ready:NoSchedule` and the
//!   node-lifecycle controller lifts the taint once kwok reports it Ready
//!   ([`nodes::wait_schedulable`]).
//! - kwok runs with `--manage-all-nodes=true`: every Node becomes Ready and every Pod
//!   bound to a Node becomes Running, without annotations.
//! - Certificates come from the one generator ([`crate::pki`], rcgen), written into
//!   `pki/` by [`pki`]; the kubeconfig authenticates with a client certificate in
//!   `system:masters`.
//!
//! State of cluster `NAME` lives in [`state_dir`]`(NAME)`: `kubeconfig`,
//! `controller-manager.kubeconfig`, `pki/`, `etcd/`, `pids/<component>.pid`,
//! `logs/<component>.log`, `cluster.json`, and `user-context.json` after `--set-context`
//! ([`userconfig`]).

/// Progress line on stderr; a closed stderr (e.g. `| head`) must not abort the command.
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod accounts;
pub mod build;
mod go;
pub mod gpu_operator;
pub mod gpusim;
pub mod health;
pub mod index;
pub mod install;
pub mod kubeconfig;
pub mod kubevirt;
pub mod kueue;
mod leases;
pub mod lifecycle;
pub mod lock;
pub mod nodes;
pub mod pki;
pub mod ports;
pub mod probe;
pub mod process;
mod readiness;
pub mod recipe;
mod restart;
pub(crate) mod runtime;
pub mod state;
pub mod supervisor;
pub mod userconfig;

pub use crate::files::state_root;
pub use index::{
    Status, at_server, info, list, local_hint, running_elsewhere_hint, server_hint, status,
};
pub use kubeconfig::client;
pub use leases::{LEASE_STALE_AFTER, LEASE_STALE_MIN, lease_stale_after};
pub use lifecycle::{UpOptions, down, up};
pub use probe::{ComponentReport, Health, probe, scheduler_busy};
pub use state::{
    ClusterHandle, ClusterInfo, DEFAULT_NAME, kubeconfig_path, restarts, state_dir, validate_name,
};
