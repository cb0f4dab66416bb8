//! The live read of an object `explain` names ([`Named`]): the object and everything its
//! explanation reads, listed at once (each call with the client's timeouts), into a
//! [`Gathered`] whose [`Gathered::object`] holds it ([`read`]).
//!
//! For a pod the pods read are chosen from the nodes
//! ([`gpuwl_core::analysis::explain_scope::pods_to_read`]): every pod, or those bound to
//! the nodes it names and those bound to none, which give the same explanation.

use kube::Client;

use super::Gathered;
use crate::input::{live, operands, pods, snapshot, virt};
use gpuwl_core::analysis::explain_scope::{self, PodScope};
use gpuwl_core::decode::object::{JobRead, Object};
use gpuwl_core::error::{Error, Result};
use gpuwl_core::model::operand::OperandPod;
use gpuwl_core::model::pod::ObjectKind;
use gpuwl_core::model::snapshot::Snapshot;

/// What kind of object is named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pod, a VirtualMachine or a VirtualMachineInstance.
    Object(ObjectKind),
    /// A batch/v1 Job (Kueue's view of it).
    Job,
}

/// An object named on the command line, read from the live cluster with what explains it.
#[derive(Debug, Clone, Copy)]
pub struct Named<'a> {
    /// Its kind.
    pub kind: Kind,
    /// Its namespace; `None`: the kubeconfig context's, as kubectl takes it.
    pub namespace: Option<&'a str>,
    /// Its name.
    pub name: &'a str,
}

/// Reads `named` and the cluster it is explained against: for a pod, the pod, the nodes
/// and the snapshot's other parts first, then the pods its explanation can depend on (with
/// the operand pods among them); for a VM, VMI or Job, the object beside the whole
/// snapshot (VM launchers marked with their VM) and the operand pods listed by label. The
/// operand pods are kept as their list's outcome (an unreadable list: explained without
/// them).
///
/// Errors: [`Error::Input`] when the object does not exist (or, for a VM or VMI, KubeVirt
/// is not installed); [`Error::Runtime`] when the API cannot be reached.
pub async fn read(client: &Client, named: Named<'_>) -> Result<Gathered> {
    // As kubectl: the context's namespace when none is named.
    let namespace = named
        .namespace
        .map_or_else(|| client.default_namespace().to_owned(), str::to_owned);
    let (ns, name) = (namespace.as_str(), named.name);
    let (object, mut snapshot, operands) = match named.kind {
        Kind::Object(ObjectKind::Pod) => read_pod(client, ns, name).await?,
        Kind::Object(kind) => with_cluster(client, virt::read(client, kind, ns, name)).await?,
        Kind::Job => with_cluster(client, read_job(client, ns, name)).await?,
    };
    snapshot.operands = Some(operands);
    Ok(Gathered {
        snapshot,
        pods_error: None,
        kubevirt_object: None,
        object: Some(object),
    })
}

/// What [`read`] reads for one object: the object, the snapshot, the operand pods.
type Read = (Object, Snapshot, Result<Vec<OperandPod>>);

/// Reads `object` beside the whole snapshot and the operand pods (by label).
///
/// Errors: `object`'s; the snapshot's ([`Error::Runtime`] when the API cannot be reached).
async fn with_cluster<T: Into<Object>>(
    client: &Client,
    object: impl std::future::Future<Output = Result<T>>,
) -> Result<Read> {
    let (object, snapshot, operands) =
        futures::try_join!(object, snapshot::read(client, true), async {
            Ok(operands::list(client).await)
        })?;
    Ok((object.into(), snapshot, operands))
}

/// Reads pod `namespace/name`, the nodes and the snapshot's other parts, then the pods
/// [`explain_scope::pods_to_read`] says the explanation can depend on (every pod, or those
/// bound to the nodes it names and those bound to none, with the operand pods among them:
/// [`pods::list_on_nodes`]).
///
/// Errors: [`Error::Input`] when the pod does not exist; [`Error::Runtime`] when the API
/// cannot be reached.
async fn read_pod(client: &Client, namespace: &str, name: &str) -> Result<Read> {
    let (pod, nodes, parts) = futures::try_join!(
        pods::get_pod(client, namespace, name),
        live::list_nodes(client),
        async { Ok(snapshot::read_parts(client, true).await) }
    )?;
    let (pods, operands) = match explain_scope::pods_to_read(&pod, &nodes) {
        PodScope::All(_) => {
            let (listed, finished) = futures::join!(
                pods::list_pods_with_operands(client),
                operands::list_finished(client)
            );
            let (pods, listed) = listed?;
            (pods, operands::merge(listed, finished))
        }
        PodScope::Nodes(on) => {
            let (pods, operands) = pods::list_on_nodes(client, &on).await?;
            (pods, Ok(operands))
        }
    };
    let snapshot = parts.finish(client, nodes, pods).await?;
    Ok((Object::Pod(pod), snapshot, operands))
}

/// Reads Job `namespace/name` and the name of its first pod.
///
/// Errors: [`Error::Input`] when the Job does not exist; [`Error::Runtime`] when the API
/// cannot be reached (a failed list of its pods is kept in [`JobRead::first_pod`]).
async fn read_job(client: &Client, namespace: &str, name: &str) -> Result<JobRead> {
    let jobs: kube::Api<k8s_openapi::api::batch::v1::Job> =
        kube::Api::namespaced(client.clone(), namespace);
    let job = match jobs.get_opt(name).await {
        Ok(Some(j)) => serde_json::to_value(&j)
            .map_err(|e| Error::failed(format!("reading Job {namespace}/{name}"), e))?,
        Ok(None) => return Err(Error::Input(format!("Job {namespace}/{name} not found"))),
        Err(e) => return Err(live::api_error(&format!("get Job {namespace}/{name}"), &e)),
    };
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(client.clone(), namespace);
    let first_pod = pods
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("batch.kubernetes.io/job-name={name}")),
        )
        .await
        .map(|l| l.items.into_iter().filter_map(|p| p.metadata.name).min())
        .map_err(|e| live::api_error(&format!("list the pods of Job {namespace}/{name}"), &e));
    Ok(JobRead {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        job,
        first_pod,
    })
}
