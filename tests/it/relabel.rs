//! `gpuwl relabel` (issues 40 and 48) on the real GPU Operator (`gpuwl lab --operator`):
//! one lab shared by the scenarios, in order — a KubeVirt VM's launcher pod added on
//! lab-node-1 (schemaless KubeVirt CRDs; the test plays virt-controller); a node argument
//! that is no node name is exit 2; the dry run changes nothing; lab-node-1 → container with
//! vmi-passthrough and the VM running is refused without a flag, and a --stop-vm naming no
//! VM there is bad input; the way back (labelled container by hand, then the relabel
//! `check --effective` prints) needs no flag; the twin's `not recommended` gates the run;
//! with `--evict --stop-vm` while a PodDisruptionBudget refuses the eviction it stops
//! cordoned, another target is refused naming `--abort`, and `--abort` puts it back; stuck
//! again, once the budget is gone the same command run again resumes and completes
//! (operands swapped by the real operator, `nvidia.com/gpu` advertised, node uncordoned,
//! `check --effective` clean for the node); a third run has nothing to do; two nodes go
//! one after the other; NVIDIA/gpu-operator#2272 emulated (the stuck wait names it); with the sandbox device plugin disabled in the ClusterPolicy, and
//! then sandbox workloads disabled, relabels that could never complete are refused before
//! any change (the dry run too).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams,
};
use serde_json::{Value, json};

use crate::kit::{ClusterDown, gpuwl, gpuwl_ok, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-relabel-it";
const TWIN: &str = "gpuwl-relabel-it-twin";
const NODE: &str = "lab-node-1";

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

async fn client(kc: &str) -> kube::Client {
    gpuwl::cluster::client(std::path::Path::new(kc), None)
        .await
        .unwrap()
}

/// The node as the API has it: cordoned, workload label, gpuwl's annotation, allocatable.
struct NodeState {
    cordoned: bool,
    label: Option<String>,
    record: Option<String>,
    allocatable: std::collections::BTreeMap<String, String>,
}

fn node_state(kc: &str) -> NodeState {
    node_state_of(kc, NODE)
}

fn node_state_of(kc: &str, node: &str) -> NodeState {
    rt().block_on(async {
        let n = Api::<Node>::all(client(kc).await).get(node).await.unwrap();
        NodeState {
            cordoned: n.spec.and_then(|s| s.unschedulable).unwrap_or(false),
            label: n
                .metadata
                .labels
                .and_then(|l| l.get("nvidia.com/gpu.workload.config").cloned()),
            record: n
                .metadata
                .annotations
                .and_then(|a| a.get("gpuwl.io/relabel").cloned()),
            allocatable: n
                .status
                .and_then(|s| s.allocatable)
                .unwrap_or_default()
                .into_iter()
                .filter(|(k, _)| k.starts_with("nvidia.com/"))
                .map(|(k, v)| (k, v.0))
                .collect(),
        }
    })
}

fn pod_exists(kc: &str, ns: &str, name: &str) -> bool {
    rt().block_on(async {
        Api::<Pod>::namespaced(client(kc).await, ns)
            .get_opt(name)
            .await
            .unwrap()
            .is_some()
    })
}

fn operands_on(kc: &str) -> Vec<String> {
    rt().block_on(async {
        let ops = gpuwl::lab::operator::running_operands(&client(kc).await)
            .await
            .unwrap();
        ops.get(NODE)
            .map(|s| s.iter().cloned().collect())
            .unwrap_or_default()
    })
}

/// Merges `spec` into the lab's ClusterPolicy (the operator reacts in its own time; the
/// relabel reads the policy itself).
fn patch_policy(kc: &str, spec: Value) {
    rt().block_on(async {
        let c = client(kc).await;
        let policies: Api<DynamicObject> =
            Api::all_with(c, &gpuwl::cluster::gpu_operator::policy_resource());
        let name = policies.list(&Default::default()).await.unwrap().items[0]
            .metadata
            .name
            .clone()
            .unwrap();
        policies
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .unwrap();
    });
}

/// Sets `nvidia.com/gpu.deploy.<operand>` on `node` by hand.
fn deploy_label(kc: &str, node: &str, operand: &str, value: &str) {
    rt().block_on(async {
        Api::<Node>::all(client(kc).await)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {format!("nvidia.com/gpu.deploy.{operand}"): value}}}),
                ),
            )
            .await
            .unwrap();
    });
}

/// Sets the workload label of `node` by hand, as `kubectl label --overwrite` does.
fn label_by_hand(kc: &str, node: &str, config: &str) {
    rt().block_on(async {
        Api::<Node>::all(client(kc).await)
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(
                    json!({"metadata": {"labels": {"nvidia.com/gpu.workload.config": config}}}),
                ),
            )
            .await
            .unwrap();
    });
}

fn vm_api(c: &kube::Client, kind: &str, plural: &str) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("kubevirt.io", "v1", kind),
        plural,
    );
    Api::namespaced_with(c.clone(), "gpu-vm", &ar)
}

/// KubeVirt's VirtualMachine and VMI types (schemaless CRDs), a VM `vm1` that runs, its
/// VMI and its virt-launcher pod on lab-node-1 holding one A10 (no KubeVirt controllers:
/// the test plays them).
fn start_a_vm(kc: &str) {
    rt().block_on(async {
        let c = client(kc).await;
        let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
        for (kind, plural) in [
            ("VirtualMachine", "virtualmachines"),
            ("VirtualMachineInstance", "virtualmachineinstances"),
        ] {
            let crd = json!({
              "metadata": {"name": format!("{plural}.kubevirt.io")},
              "spec": {"group": "kubevirt.io", "scope": "Namespaced",
                "names": {"kind": kind, "plural": plural, "listKind": format!("{kind}List")},
                "versions": [{"name": "v1", "served": true, "storage": true,
                  "schema": {"openAPIV3Schema": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}}}]}
            });
            crds.create(&Default::default(), &serde_json::from_value(crd).unwrap())
                .await
                .unwrap();
        }
        let vm = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "vm1", "namespace": "gpu-vm"},
            "spec": {"runStrategy": "Always", "template": {"spec": {}}}});
        let uid = create_retrying(&vm_api(&c, "VirtualMachine", "virtualmachines"), vm).await;
        let vmi = json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "vm1", "namespace": "gpu-vm", "ownerReferences": [{
                "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine", "name": "vm1",
                "uid": uid, "controller": true}]},
            "spec": {}});
        create_retrying(
            &vm_api(&c, "VirtualMachineInstance", "virtualmachineinstances"),
            vmi,
        )
        .await;
        let pod = json!({
            "metadata": {"name": "virt-launcher-vm1-abcde", "namespace": "gpu-vm",
                "labels": {"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": "vm1"}},
            "spec": {"nodeName": NODE, "containers": [{"name": "compute", "image": "virt-launcher",
                "resources": {"limits": {"nvidia.com/GA102GL_A10": "1"}}}]}
        });
        Api::<Pod>::namespaced(c, "gpu-vm")
            .create(&Default::default(), &serde_json::from_value(pod).unwrap())
            .await
            .unwrap();
    });
}

/// Creates `obj`, retrying while its CRD is not served yet; returns its uid.
async fn create_retrying(api: &Api<DynamicObject>, obj: Value) -> String {
    let o: DynamicObject = serde_json::from_value(obj).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match api.create(&Default::default(), &o).await {
            Ok(made) => return made.metadata.uid.unwrap(),
            Err(e) => assert!(Instant::now() < deadline, "{e}"),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn vm_run_strategy(kc: &str) -> String {
    rt().block_on(async {
        let c = client(kc).await;
        let vm = vm_api(&c, "VirtualMachine", "virtualmachines")
            .get("vm1")
            .await
            .unwrap();
        vm.data["spec"]["runStrategy"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

/// What virt-controller does for a VM whose runStrategy is Halted: its VMI and launcher
/// pod go.
fn virt_controller_stops_vm1(kc: &str) {
    rt().block_on(async {
        let c = client(kc).await;
        vm_api(&c, "VirtualMachineInstance", "virtualmachineinstances")
            .delete("vm1", &Default::default())
            .await
            .unwrap();
        Api::<Pod>::namespaced(c, "gpu-vm")
            .delete(
                "virt-launcher-vm1-abcde",
                &DeleteParams::default().grace_period(0),
            )
            .await
            .unwrap();
    });
}

/// Puts a PodDisruptionBudget (minAvailable 1) over vmi-passthrough, which the lab creates
/// without labels (it gets one here), or removes it.
fn protect_with_a_pdb(kc: &str, on: bool) {
    rt().block_on(async {
        let c = client(kc).await;
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(c.clone(), "gpu-vm");
        if !on {
            pdbs.delete("keep-vmi", &Default::default()).await.unwrap();
            return;
        }
        Api::<Pod>::namespaced(c, "gpu-vm")
            .patch(
                "vmi-passthrough",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": {"app": "vmi-passthrough"}}})),
            )
            .await
            .unwrap();
        let pdb = serde_json::from_value(json!({
            "metadata": {"name": "keep-vmi", "namespace": "gpu-vm"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "vmi-passthrough"}}}
        }))
        .unwrap();
        pdbs.create(&Default::default(), &pdb).await.unwrap();
    });
}

/// `gpuwl relabel` sent SIGINT once a line of its stdout contains `at` (two seconds after);
/// returns the exit code, stdout and stderr.
fn relabel_interrupted(kc: &str, args: &[&str], at: &str) -> (Option<i32>, String, String) {
    relabel_with(kc, args, at, |pid| {
        // Into the holders' wait, so that the relabel's first start is seconds before
        // the resume below (its `Done:` line counts from there).
        std::thread::sleep(Duration::from_secs(2));
        let sent = std::process::Command::new("kill")
            .args(["-INT", pid])
            .status()
            .unwrap();
        assert!(sent.success());
    })
}

/// `gpuwl relabel` with `then` called (with its pid) once a line of its stdout contains
/// `at`; returns the exit code (`None`: killed), stdout and stderr.
fn relabel_with(
    kc: &str,
    args: &[&str],
    at: &str,
    then: impl FnOnce(&str),
) -> (Option<i32>, String, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .args(["relabel", "--kubeconfig", kc])
        .args(args)
        .env("COLUMNS", "1000")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id().to_string();
    let mut out = String::new();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    for line in lines.by_ref() {
        let line = line.unwrap();
        out.push_str(&line);
        out.push('\n');
        if line.contains(at) {
            then(&pid);
            break;
        }
    }
    for line in lines {
        out.push_str(&line.unwrap());
        out.push('\n');
    }
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    (child.wait().unwrap().code(), out, err)
}

fn relabel(kc: &str, args: &[&str]) -> (i32, String, String) {
    let mut a = vec!["relabel", "--kubeconfig", kc];
    a.extend(args);
    gpuwl(&a)
}

#[test]
#[ignore = "needs local control plane"]
fn relabel_on_the_real_operator_refuses_evicts_resumes_and_stops_cordoned() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    let _twin = ClusterDown(TWIN);
    let root = tempfile::tempdir().unwrap();
    gpuwl_ok(&[
        "lab",
        "--operator",
        "--cluster-name",
        CLUSTER,
        "--root",
        root.path().to_str().unwrap(),
    ]);
    let kc = gpuwl_ok(&["cluster", "kubeconfig", "--name", CLUSTER]);
    let kc = kc.trim();
    assert!(pod_exists(kc, "gpu-vm", "vmi-passthrough"));
    start_a_vm(kc);

    // A node argument that is no node name (a subresource path): exit 2 before any call.
    for args in [
        &["kwok-node-0/status=container"][..],
        &["lab-node-1/status", "--abort"][..],
    ] {
        let (code, out, err) = relabel(kc, args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains("not a node name"), "{err}");
    }
    // A node the cluster lacks (issue 54, item 14): exit 2, nothing on stdout (the
    // header goes out with the first step, never before an input error).
    let (code, out, err) = relabel(kc, &["lab-node-9=container", "--twin-name", TWIN]);
    assert_eq!((code, out.as_str()), (2, ""), "{err}");
    assert!(err.contains("lab-node-9"), "{err}");

    // The dry run: every step planned, nothing changed.
    let (code, out, err) = relabel(
        kc,
        &[
            "lab-node-1=container",
            "--evict",
            "--stop-vm",
            "gpu-vm/vm1",
            "--dry-run",
            "--twin-name",
            TWIN,
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    for want in [
        "preview     planned       try lab-node-1=container on a twin (gpuwl-relabel-it-twin)",
        "cordon      planned       lab-node-1: cordon",
        "holders     planned       lab-node-1: stop VM gpu-vm/vm1; evict gpu-vm/vmi-passthrough; \
         wait until gone",
        "relabel     planned       lab-node-1: label vm-passthrough → container",
        "advertised  planned       lab-node-1: wait until it advertises nvidia.com/gpu 2 \
         (nvidia.com/GA102GL_A10 gone or 0)",
        "uncordon    planned       lab-node-1: uncordon",
        "Dry run: nothing was changed",
    ] {
        assert!(out.contains(want), "{want}:\n{out}");
    }
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none());

    // Without a flag: refused before any change, exit 1, the holders and the flags named.
    let (code, out, err) = relabel(kc, &["lab-node-1=container", "--no-preview"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.starts_with(
            "gpuwl: relabel lab-node-1: refused: 2 running pod(s) hold a GPU there and would lose \
             it when the node becomes container: gpu-vm/virt-launcher-vm1-abcde (VM gpu-vm/vm1; \
             nvidia.com/GA102GL_A10 1), gpu-vm/vmi-passthrough (nvidia.com/GA102GL_A10 1)"
        ) && err.contains("--evict")
            && err.contains("--stop-vm NS/NAME")
            && err.contains("--allow-disruption"),
        "{err}"
    );
    assert!(out.contains("holders     refused"), "{out}");
    // A VM to stop that does not run there: bad input, nothing changed.
    let (code, out, err) = relabel(
        kc,
        &["lab-node-1=container", "--evict", "--stop-vm", "gpu-vm/vm2"],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        err.contains("--stop-vm gpu-vm/vm2: no VM of that name runs on the node(s) to relabel"),
        "{err}"
    );
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none(), "changed by a refusal");
    assert_eq!(s.label.as_deref(), Some("vm-passthrough"));

    // The way back: labelled container by hand under its VMs, check --effective says they
    // may lose their GPU and prints the relabel back; that command, as printed, needs no
    // flag (the holders keep the name vm-passthrough serves) and completes.
    label_by_hand(kc, NODE, "container");
    // Once the operator has swapped the node's operands, the holders run on a node that no
    // longer serves what they hold.
    let deadline = Instant::now() + Duration::from_secs(60);
    let advice = loop {
        let (_, gate, _) = gpuwl(&["check", "--effective", "--kubeconfig", kc]);
        if let Some(l) = gate
            .lines()
            .find(|l| l.contains("holder-at-risk") && l.contains(" lab-node-1"))
        {
            break l.to_string();
        }
        assert!(
            Instant::now() < deadline,
            "no holder-at-risk for lab-node-1 in 60 s:\n{gate}"
        );
        std::thread::sleep(Duration::from_millis(500));
    };
    let back = advice
        .rsplit_once(": gpuwl ")
        .map(|(_, cmd)| cmd.trim())
        .unwrap_or_else(|| panic!("no gpuwl command at the end: {advice}"));
    assert_eq!(back, "relabel lab-node-1=vm-passthrough", "{advice}");
    let (code, out, err) = relabel(
        kc,
        &[
            back.split(' ').nth(1).unwrap(),
            "--no-preview",
            "--timeout",
            "1m",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Done: relabelled lab-node-1 container → vm-passthrough"),
        "{out}"
    );
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none(), "{out}");
    assert_eq!(s.label.as_deref(), Some("vm-passthrough"));
    assert_eq!(
        s.allocatable
            .get("nvidia.com/GA102GL_A10")
            .map(String::as_str),
        Some("2"),
        "{:?}",
        s.allocatable
    );
    assert!(
        pod_exists(kc, "gpu-vm", "vmi-passthrough"),
        "a kept holder was evicted"
    );

    // The preview's verdict gates the run: `not recommended`, no --force and no terminal:
    // refused, nothing cordoned.
    let the_command = [
        "lab-node-1=container",
        "--evict",
        "--stop-vm",
        "gpu-vm/vm1",
        "--twin-name",
        TWIN,
    ];
    let mut gated: Vec<&str> = the_command.to_vec();
    gated.extend(["--timeout", "3s", "-q"]);
    let (code, out, err) = relabel(kc, &gated);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        out.contains("preview     done          Verdict: serves no pending pod, disrupts ")
            && out.contains("not recommended (twin gpuwl-relabel-it-twin)"),
        "{out}"
    );
    assert!(
        err.contains("refused, nothing was changed: the preview's verdict is ")
            && err.contains("(no terminal to ask); go on with --force"),
        "{err}"
    );
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none(), "changed by a gated run");

    // --evict and --stop-vm while a PodDisruptionBudget refuses the eviction (and no
    // virt-controller acts on the stopped VM): the holders step runs past --timeout and the
    // run stops with the node cordoned and the record on it.
    protect_with_a_pdb(kc, true);
    let mut first: Vec<&str> = the_command.to_vec();
    first.extend(["--timeout", "3s", "--no-preview"]);
    let stuck = |first: &[&str]| {
        let (code, out, err) = relabel(kc, first);
        assert_eq!(code, 1, "{out}{err}");
        assert!(out.contains("cordon      done"), "{out}");
        assert!(
            err.starts_with(
                "gpuwl: relabel lab-node-1: step holders did not complete within 3 s: still on \
                 the node: gpu-vm/virt-launcher-vm1-abcde, gpu-vm/vmi-passthrough (the eviction \
                 is refused for now: The disruption budget keep-vmi needs 1 healthy pods and \
                 has 1 currently). The node stays cordoned"
            ) && err.contains("run the same command again")
                && err.trim_end().ends_with("gpuwl relabel lab-node-1 --abort"),
            "{err}"
        );
        let s = node_state(kc);
        assert!(s.cordoned, "left uncordoned after a timeout");
        assert_eq!(s.label.as_deref(), Some("vm-passthrough"));
        let rec: Value = serde_json::from_str(s.record.as_deref().expect("no record")).unwrap();
        assert_eq!(rec["from"], "vm-passthrough");
        assert_eq!(rec["to"], "container");
        assert_eq!(rec["step"], "cordon");
        assert_eq!(rec["cordoned"], true);
        assert!(pod_exists(kc, "gpu-vm", "vmi-passthrough"));
    };
    stuck(&first);

    // Another relabel while this one is under way: refused, the ways on and out named.
    let (code, out, err) = relabel(kc, &["lab-node-1=vm-vgpu", "--no-preview"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("a relabel to container is under way")
            && err.contains("gpuwl relabel lab-node-1=container;")
            && err.trim_end().ends_with("gpuwl relabel lab-node-1 --abort"),
        "{err}"
    );
    // --abort: the label put back (it had not changed yet), its operands and names waited
    // for, the node uncordoned (gpuwl cordoned it), the record gone; the holders keep their
    // GPU on the way back, so no flag is needed.
    let (code, out, err) = relabel(kc, &["lab-node-1", "--abort", "--timeout", "1m"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("Done: aborted: lab-node-1 back to ")
            && out.contains("(the relabel to container aborted)"),
        "{out}"
    );
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none(), "{out}");
    assert_eq!(s.label.as_deref(), Some("vm-passthrough"));
    // Nothing left to abort.
    let (code, out, err) = relabel(kc, &["lab-node-1", "--abort"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("nothing to abort"), "{out}");

    // The same relabel again, stuck on the budget again — this time stopped by Ctrl-C
    // once it has cordoned: exit 130, the state of the node and both ways on said, the
    // node cordoned with the record on it (as a timeout leaves it).
    let mut long: Vec<&str> = the_command.to_vec();
    long.extend(["--timeout", "2m", "--no-preview"]);
    let (code, out, err) = relabel_interrupted(kc, &long, "cordon      done");
    assert_eq!(code, Some(130), "{out}{err}");
    assert!(
        err.contains("gpuwl: relabel lab-node-1: SIGINT stopped the run; the node is left as the last step completed left it")
            && err.trim_end().ends_with("gpuwl relabel lab-node-1 --abort"),
        "{err}"
    );
    let s = node_state(kc);
    assert!(s.cordoned && s.record.is_some(), "{out}{err}");
    // The VM was asked to stop as virtctl stop does; virt-controller (played here) then
    // removes its VMI and launcher pod.
    assert_eq!(vm_run_strategy(kc), "Halted");
    virt_controller_stops_vm1(kc);

    // The budget lifted, the same command again: it resumes where it stopped and completes.
    protect_with_a_pdb(kc, false);
    let mut again: Vec<&str> = the_command.to_vec();
    again.extend(["--timeout", "2m", "-o", "json"]);
    let (code, out, err) = relabel(kc, &again);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["result"], "done", "{out}");
    let status = |step: &str| -> String {
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["step"] == step)
            .map(|s| s["status"].as_str().unwrap().to_string())
            .unwrap_or_else(|| panic!("{step}: {out}"))
    };
    assert_eq!(status("preview"), "skipped");
    assert_eq!(status("cordon"), "already-done");
    assert_eq!(status("holders"), "done");
    assert_eq!(status("relabel"), "done");
    assert_eq!(status("operands"), "done");
    assert_eq!(status("advertised"), "done");
    assert_eq!(status("uncordon"), "done");
    // Its length counts from the relabel's first start, this run's own time beside it.
    let message = v["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("relabelled lab-node-1 vm-passthrough → container in ")
            && message.contains(" since it started (")
            && message.contains("; this run "),
        "{out}"
    );
    eprintln!("resumed: {message}");
    assert!(
        v["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["seconds"].is_number())
    );
    let s = node_state(kc);
    assert!(!s.cordoned && s.record.is_none(), "not uncordoned: {out}");
    assert_eq!(s.label.as_deref(), Some("container"));
    assert_eq!(
        s.allocatable.get("nvidia.com/gpu").map(String::as_str),
        Some("2")
    );
    assert!(
        s.allocatable
            .get("nvidia.com/GA102GL_A10")
            .is_none_or(|v| v == "0"),
        "{:?}",
        s.allocatable
    );
    assert!(!pod_exists(kc, "gpu-vm", "vmi-passthrough"));
    let ops = operands_on(kc);
    assert!(
        ops.contains(&"device-plugin".to_string())
            && !ops.contains(&"sandbox-device-plugin".to_string())
            && !ops.contains(&"vfio-manager".to_string()),
        "{ops:?}"
    );
    let (_, gate, gate_err) = gpuwl(&["check", "--effective", "--kubeconfig", kc]);
    assert!(
        !gate
            .lines()
            .any(|l| l.starts_with("ERROR ") && l.contains(" lab-node-1:")),
        "{gate}{gate_err}"
    );

    // A third run: the node is container and no relabel is under way.
    let (code, out, err) = relabel(kc, &["lab-node-1=container", "--no-preview"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("lab-node-1: labelled container already") && out.contains("Nothing to do."),
        "{out}"
    );

    // Two nodes in one call: one after the other, each node's steps before the next's.
    let (code, out, err) = relabel(
        kc,
        &[
            "lab-node-1=vm-passthrough",
            "lab-node-0=vm-passthrough",
            "--evict",
            "--no-preview",
            "--timeout",
            "1m",
            "-o",
            "json",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v["message"]
            .as_str()
            .unwrap_or_default()
            .split(" in ")
            .next(),
        Some(
            "relabelled lab-node-1 container → vm-passthrough, lab-node-0 container → vm-passthrough"
        ),
        "{out}"
    );
    let order: Vec<&str> = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["status"] == "done")
        .filter_map(|s| s["node"].as_str())
        .collect();
    let first_0 = order.iter().position(|n| *n == "lab-node-0").unwrap();
    assert!(
        order[first_0..].iter().all(|n| *n == "lab-node-0"),
        "{order:?}"
    );
    for n in ["lab-node-0", "lab-node-1"] {
        let s = node_state_of(kc, n);
        assert!(!s.cordoned && s.record.is_none(), "{n}: {out}");
        assert_eq!(s.label.as_deref(), Some("vm-passthrough"), "{n}");
    }

    // NVIDIA/gpu-operator#2272, emulated: vm-passthrough → vm-vgpu where the sandbox device
    // plugin never comes back (here its deploy label turned false right after the relabel,
    // so the operator removes it). The stuck wait names the reported fault and its way out;
    // with the plugin back, the same command resumes and completes.
    let vgpu = [
        "lab-node-1=vm-vgpu:A10-12Q",
        "--no-preview",
        "--timeout",
        "6s",
    ];
    let (code, out, err) = relabel_with(kc, &vgpu, "relabel     done", |_| {
        deploy_label(kc, "lab-node-1", "sandbox-device-plugin", "false")
    });
    assert_eq!(code, Some(1), "{out}{err}");
    assert!(
        err.contains("step operands did not complete within 6 s")
            && err.contains("no sandbox-device-plugin pod on the node")
            && err.contains("NVIDIA/gpu-operator#2272")
            && err.contains("nvidia.com/gpu.deploy.sandbox-validator"),
        "{err}"
    );
    deploy_label(kc, "lab-node-1", "sandbox-device-plugin", "true");
    let mut resume = vgpu.to_vec();
    resume[3] = "1m";
    let (code, out, err) = relabel(kc, &resume);
    assert_eq!(code, 0, "{out}{err}");
    let s = node_state(kc);
    assert_eq!(s.label.as_deref(), Some("vm-vgpu"), "{out}");
    assert!(!s.cordoned && s.record.is_none(), "{out}");

    // A relabel that could never complete is refused before any change, decided by the
    // model of check --effective: the target's device plugin disabled in the ClusterPolicy
    // (the dry run says the same), then sandbox workloads disabled (the label is ignored).
    patch_policy(kc, json!({"sandboxDevicePlugin": {"enabled": false}}));
    for dry in [false, true] {
        let mut args = vec!["lab-node-2=vm-passthrough", "--evict", "--no-preview"];
        if dry {
            args.push("--dry-run");
        }
        let (code, out, err) = relabel(kc, &args);
        assert_eq!(code, 1, "{out}{err}");
        assert!(
            err.contains("relabel lab-node-2: refused, nothing was changed: the relabel could never complete: ClusterPolicy")
                && err.contains("does not deploy the sandbox-device-plugin")
                && err.contains("\"sandboxDevicePlugin\":{\"enabled\":true}"),
            "{err}"
        );
        assert!(!out.contains("cordon      done"), "{out}");
    }
    patch_policy(kc, json!({"sandboxWorkloads": {"enabled": false}}));
    let (code, out, err) = relabel(kc, &["lab-node-0=vm-vgpu", "--evict", "--no-preview"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains(
            "the GPU Operator would not follow nvidia.com/gpu.workload.config=vm-vgpu on lab-node-0"
        ) && err.contains("label-ignored"),
        "{err}"
    );
    for n in ["lab-node-0", "lab-node-2"] {
        let s = node_state_of(kc, n);
        assert!(
            !s.cordoned && s.record.is_none(),
            "{n} changed by a refusal"
        );
    }
}
