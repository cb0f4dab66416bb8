//! The relabel's planning and its wait conditions, without a cluster.

use super::*;
use crate::model::operator::{ClusterPolicy, PolicyStatus};
use crate::model::workload::{LABEL_KEY, WorkloadConfig};

fn relabel(s: &str) -> Relabel {
    s.parse().unwrap()
}

fn vmi_holder() -> Holder {
    Holder {
        pod: "gpu-vm/virt-launcher-vm1-abcde".into(),
        vmi: Some("vm1".into()),
        owned_by_vm: Some(true),
        resources: BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 1)]),
        leaving: false,
    }
}

fn pod_holder() -> Holder {
    Holder {
        pod: "gpu-vm/vmi-passthrough".into(),
        vmi: None,
        owned_by_vm: None,
        resources: BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 1)]),
        leaving: false,
    }
}

fn passthrough_node() -> Observed {
    Observed {
        label: Some("vm-passthrough".into()),
        ..Observed::default()
    }
}

fn expect() -> Expect {
    Expect {
        names: BTreeMap::from([("nvidia.com/gpu".into(), 2)]),
        old: vec!["nvidia.com/GA102GL_A10".into()],
    }
}

/// [`decide`] with nothing standing in the way of the relabel.
fn decide_ok(r: &Relabel, obs: &Observed, fresh: &Expect, how: &Disruption, now: &str) -> Decision {
    decide(r, obs, fresh, None, how, now)
}

fn go(d: Decision) -> NodePlan {
    match d {
        Decision::Go(p) => *p,
        other => panic!("{other:?}"),
    }
}

fn statuses(p: &NodePlan) -> Vec<(StepKind, Status)> {
    p.steps.iter().map(|s| (s.step, s.status)).collect()
}

#[test]
fn a_fresh_relabel_plans_every_step_and_records_that_it_cordons() {
    let r = relabel("lab-node-1=container");
    let p = go(decide_ok(
        &r,
        &passthrough_node(),
        &expect(),
        &Disruption::default(),
        "t0",
    ));
    assert!(!p.resuming);
    assert_eq!(
        statuses(&p),
        vec![
            (StepKind::Cordon, Status::Planned),
            (StepKind::Holders, Status::AlreadyDone),
            (StepKind::Relabel, Status::Planned),
            (StepKind::Operands, Status::Planned),
            (StepKind::Advertised, Status::Planned),
            (StepKind::Uncordon, Status::Planned),
        ]
    );
    assert_eq!(p.record.from.as_deref(), Some("vm-passthrough"));
    assert_eq!(p.record.to, "container");
    assert!(p.record.cordoned);
    assert_eq!(p.record.started, "t0");
    assert_eq!(p.steps[2].detail, "label vm-passthrough → container");
    assert_eq!(
        p.steps[4].detail,
        "wait until it advertises nvidia.com/gpu 2 (nvidia.com/GA102GL_A10 gone or 0)"
    );
    assert!(
        p.steps[3].detail.contains("driver, device-plugin")
            && p.steps[3].detail.contains("no sandbox-device-plugin pod"),
        "{}",
        p.steps[3].detail
    );
}

#[test]
fn holders_without_a_flag_are_refused_and_each_flag_covers_them() {
    let r = relabel("lab-node-1=container");
    let mut obs = passthrough_node();
    obs.holders = vec![pod_holder(), vmi_holder()];
    let Decision::Stop(_, msg) = decide_ok(&r, &obs, &expect(), &Disruption::default(), "t") else {
        panic!("not refused");
    };
    assert!(msg.starts_with("refused: 2 running pod(s)"), "{msg}");
    assert!(
        msg.contains("gpu-vm/vmi-passthrough (nvidia.com/GA102GL_A10 1)"),
        "{msg}"
    );
    assert!(msg.contains("VM gpu-vm/vm1"), "{msg}");
    assert!(
        msg.contains("--evict") && msg.contains("--stop-vm") && msg.contains("--allow-disruption"),
        "{msg}"
    );
    // --stop-vm covers the VM only: the plain pod is still refused.
    let stop = Disruption {
        stop_vms: vec!["gpu-vm/vm1".into()],
        ..Disruption::default()
    };
    let Decision::Stop(_, msg) = decide_ok(&r, &obs, &expect(), &stop, "t") else {
        panic!("not refused");
    };
    assert!(
        msg.contains("1 running pod(s)") && !msg.contains("vm1"),
        "{msg}"
    );
    // --evict and --stop-vm together: the VM stopped, the pod evicted.
    let both = Disruption {
        evict: true,
        ..stop.clone()
    };
    let p = go(decide_ok(&r, &obs, &expect(), &both, "t"));
    assert_eq!(
        p.actions.iter().map(|(_, a)| a.clone()).collect::<Vec<_>>(),
        vec![
            HolderAction::Evict,
            HolderAction::StopVm("gpu-vm/vm1".into())
        ]
    );
    assert_eq!(
        p.steps[1].detail,
        "evict gpu-vm/vmi-passthrough; stop VM gpu-vm/vm1; wait until gone"
    );
    // --allow-disruption leaves them and does not wait.
    let allow = Disruption {
        allow: true,
        ..Disruption::default()
    };
    let p = go(decide_ok(&r, &obs, &expect(), &allow, "t"));
    assert!(p.steps[1].detail.ends_with("(--allow-disruption)"));
    assert!(still_there(&p.actions, &obs.holders).is_empty());
    // A pod being deleted needs no flag: it is only waited for.
    let mut leaving = passthrough_node();
    leaving.holders = vec![Holder {
        leaving: true,
        ..pod_holder()
    }];
    let p = go(decide_ok(
        &r,
        &leaving,
        &expect(),
        &Disruption::default(),
        "t",
    ));
    assert_eq!(p.actions[0].1, HolderAction::Wait);
}

#[test]
fn a_second_run_resumes_from_the_record_and_knows_it_cordoned() {
    let r = relabel("lab-node-1=container");
    let rec = Record {
        from: Some("vm-passthrough".into()),
        to: "container".into(),
        vgpu_type: None,
        step: StepKind::Relabel,
        cordoned: true,
        expect: BTreeMap::from([("nvidia.com/gpu".into(), 2)]),
        old: vec!["nvidia.com/GA102GL_A10".into()],
        started: "t0".into(),
        from_vgpu: None,
        abort: false,
    };
    // The record survives the annotation's round trip.
    assert_eq!(Record::parse(&rec.to_json()).unwrap(), rec);
    let obs = Observed {
        label: Some("container".into()),
        unschedulable: true,
        record: Some(Ok(rec.clone())),
        ..Observed::default()
    };
    // Worked out again now, the expectation would differ (the node changed): the record's
    // is kept.
    let p = go(decide_ok(
        &r,
        &obs,
        &Expect::default(),
        &Disruption::default(),
        "t1",
    ));
    assert!(p.resuming);
    assert_eq!(p.record, rec);
    assert_eq!(
        statuses(&p),
        vec![
            (StepKind::Cordon, Status::AlreadyDone),
            (StepKind::Holders, Status::AlreadyDone),
            (StepKind::Relabel, Status::AlreadyDone),
            (StepKind::Operands, Status::Planned),
            (StepKind::Advertised, Status::Planned),
            (StepKind::Uncordon, Status::Planned),
        ]
    );
    assert_eq!(
        p.steps[0].detail,
        "cordoned already (by this relabel, started t0; resuming after step relabel)"
    );
    // Another target while this one is under way: stopped, saying where it stands.
    let Decision::Stop(_, msg) = decide_ok(
        &relabel("lab-node-1=vm-vgpu"),
        &obs,
        &expect(),
        &Disruption::default(),
        "t1",
    ) else {
        panic!("not stopped");
    };
    assert!(
        msg.contains("a relabel to container is under way (started t0, last step relabel)")
            && msg.contains("gpuwl relabel lab-node-1=container;")
            && msg.ends_with("gpuwl relabel lab-node-1 --abort"),
        "{msg}"
    );
    // An annotation that is not a record: stopped.
    let bad = Observed {
        record: Some(Record::parse("{nope")),
        ..obs
    };
    assert!(matches!(
        decide_ok(&r, &bad, &expect(), &Disruption::default(), "t"),
        Decision::Stop(_, m) if m.contains("is not gpuwl's record")
    ));
}

#[test]
fn a_node_cordoned_before_is_left_cordoned_and_a_done_node_is_nothing_to_do() {
    let r = relabel("lab-node-1=container");
    let obs = Observed {
        unschedulable: true,
        ..passthrough_node()
    };
    let p = go(decide_ok(&r, &obs, &expect(), &Disruption::default(), "t"));
    assert!(!p.record.cordoned);
    assert_eq!(p.steps[0].status, Status::AlreadyDone);
    assert!(p.steps[0].detail.contains("it stays cordoned"));
    assert_eq!(p.steps[5].status, Status::Skipped);
    let done = Observed {
        label: Some("container".into()),
        ..Observed::default()
    };
    assert!(matches!(
        decide_ok(&r, &done, &expect(), &Disruption::default(), "t"),
        Decision::NothingToDo(m) if m.contains("labelled container already")
    ));
    // vm-vgpu with another type than the node's is not done.
    let vg = Observed {
        label: Some("vm-vgpu".into()),
        vgpu_type: Some("A10-4Q".into()),
        ..Observed::default()
    };
    let p = go(decide_ok(
        &relabel("n=vm-vgpu:A10-12Q"),
        &vg,
        &Expect::default(),
        &Disruption::default(),
        "t",
    ));
    assert!(
        p.steps[2]
            .detail
            .ends_with("nvidia.com/vgpu.config=A10-12Q")
    );
}

fn operand(op: &str, health: OperandHealth) -> OperandPod {
    OperandPod {
        operand: op.into(),
        pod: format!("gpu-operator/{op}-x"),
        node: "n".into(),
        health,
        phase: Some("Running".into()),
        restarts: 0,
        reason: None,
    }
}

#[test]
fn operands_are_ready_when_the_new_configs_run_and_the_old_plugin_left() {
    let deployed: BTreeSet<String> = ["driver", "device-plugin", "sandbox-device-plugin"]
        .map(String::from)
        .into();
    let ready = [
        operand("driver", OperandHealth::Ready),
        operand("device-plugin", OperandHealth::Ready),
    ];
    assert_eq!(
        operands_state(&ready, WorkloadConfig::Container, &deployed),
        Ok(())
    );
    let mixed = [
        operand("driver", OperandHealth::Ready),
        operand("device-plugin", OperandHealth::NotReady),
        operand("sandbox-device-plugin", OperandHealth::Ready),
    ];
    assert_eq!(
        operands_state(&mixed, WorkloadConfig::Container, &deployed),
        Err(
            "device-plugin pod gpu-operator/device-plugin-x not-ready; sandbox-device-plugin \
             pod gpu-operator/sandbox-device-plugin-x still there"
                .into()
        )
    );
    // A driver the cluster does not deploy (pre-installed) is not waited for.
    let no_driver: BTreeSet<String> = ["device-plugin".to_string()].into();
    assert_eq!(
        operands_state(&ready[1..], WorkloadConfig::Container, &no_driver),
        Ok(())
    );
    // The plugin is always waited for; without its DaemonSet the reason says so.
    let err = operands_state(
        &[operand("vfio-manager", OperandHealth::Ready)],
        WorkloadConfig::VmPassthrough,
        &["vfio-manager".to_string()].into(),
    )
    .unwrap_err();
    assert!(
        err.contains(
            "no sandbox-device-plugin pod on the node, and no sandbox-device-plugin \
                      DaemonSet in the cluster"
        ),
        "{err}"
    );
}

fn node_with(res: &[(&str, &str)]) -> NodeInfo {
    let mut n = NodeInfo::named("n");
    for (k, v) in res {
        n.capacity.insert(k.to_string(), v.to_string());
    }
    n.allocatable = Some(n.capacity.clone());
    n
}

#[test]
fn advertised_waits_for_the_new_units_and_the_old_name_at_zero() {
    let e = expect();
    let before = node_with(&[("nvidia.com/GA102GL_A10", "2")]);
    let err = advertised_state(&before, &e.names, &e.old).unwrap_err();
    assert_eq!(
        err,
        "it advertises nvidia.com/GA102GL_A10 2; waiting until it advertises nvidia.com/gpu 2 \
         (nvidia.com/GA102GL_A10 gone or 0)"
    );
    let half = node_with(&[("nvidia.com/GA102GL_A10", "2"), ("nvidia.com/gpu", "2")]);
    assert!(advertised_state(&half, &e.names, &e.old).is_err());
    let short = node_with(&[("nvidia.com/GA102GL_A10", "0"), ("nvidia.com/gpu", "1")]);
    assert!(advertised_state(&short, &e.names, &e.old).is_err());
    let done = node_with(&[("nvidia.com/GA102GL_A10", "0"), ("nvidia.com/gpu", "2")]);
    assert_eq!(advertised_state(&done, &e.names, &e.old), Ok(()));
    // Nothing expected by name: any new name, the old one gone.
    assert_eq!(advertised_state(&done, &BTreeMap::new(), &e.old), Ok(()));
    assert!(advertised_state(&before, &BTreeMap::new(), &e.old).is_err());
}

#[test]
fn the_expectation_comes_from_the_twins_model() {
    let mut n = node_with(&[("nvidia.com/GA102GL_A10", "2")]);
    n.labels.insert(LABEL_KEY.into(), "vm-passthrough".into());
    let e = expectation(&n, &relabel("n=container"), None);
    assert_eq!(e, expect());
    // Nothing to go by: no name expected, the old ones still listed.
    let bare = node_with(&[("cpu", "4")]);
    assert_eq!(
        expectation(&bare, &relabel("n=container"), None),
        Expect::default()
    );
}

#[test]
fn stop_vm_values_that_name_no_vm_or_a_bare_vmi_are_refused() {
    let how = Disruption {
        stop_vms: vec![
            "gpu-vm/vm1".into(),
            "gpu-vm/vm2".into(),
            "gpu-vm/bare".into(),
        ],
        ..Disruption::default()
    };
    let mut bare = vmi_holder();
    bare.pod = "gpu-vm/virt-launcher-bare-fghij".into();
    bare.vmi = Some("bare".into());
    bare.owned_by_vm = Some(false);
    assert_eq!(
        stop_vm_problems(&how, &[vmi_holder(), pod_holder(), bare.clone()]),
        vec![
            "--stop-vm gpu-vm/vm2: no VM of that name runs on the node(s) to relabel; did you mean gpu-vm/vm1?".to_string(),
            "--stop-vm gpu-vm/bare: no VirtualMachine owns VMI gpu-vm/bare, and a VM is what is stopped; use --evict, or delete the VMI: kubectl delete vmi bare -n gpu-vm".to_string(),
        ]
    );
    assert!(
        bare.describe().contains("(VMI gpu-vm/bare;"),
        "{}",
        bare.describe()
    );
    assert!(vmi_holder().describe().contains("(VM gpu-vm/vm1;"));
}

#[test]
fn a_resumed_relabel_is_timed_from_its_first_start() {
    use std::time::Duration;
    let done = vec!["lab-node-1 vm-passthrough → container".to_string()];
    assert_eq!(
        done_message(&done, Duration::from_millis(1300), None),
        "relabelled lab-node-1 vm-passthrough → container in 1.3 s"
    );
    assert_eq!(
        done_message(
            &done,
            Duration::from_millis(1300),
            Some(("2026-12-02T15:21:52Z".into(), Duration::from_secs(400)))
        ),
        "relabelled lab-node-1 vm-passthrough → container in 400 s since it started (2026-12-02T15:21:52Z; this run 1.3 s)"
    );
}

/// A policy with sandbox workloads on and the given components set.
fn policy(sandbox: bool, components: &[(&str, bool)]) -> PolicyStatus {
    PolicyStatus {
        status: "cluster",
        policy: Some(ClusterPolicy {
            name: "cluster-policy".into(),
            sandbox_enabled: sandbox,
            default_workload: WorkloadConfig::Container,
            default_workload_raw: None,
            mode: None,
            vgpu_manager_enabled: None,
            vgpu_default_config: None,
            mig_default_config: None,
            state: None,
            components: components
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .collect(),
        }),
        note: None,
    }
}

fn a10_node(label: Option<&str>) -> NodeInfo {
    let mut n = node_with(&[("nvidia.com/GA102GL_A10", "2")]);
    n.name = "lab-node-1".into();
    if let Some(l) = label {
        n.labels.insert(LABEL_KEY.into(), l.into());
    }
    n
}

const ALL_ON: [(&str, bool); 4] = [
    ("sandbox-device-plugin", true),
    ("vfio-manager", true),
    ("vgpu-manager", true),
    ("vgpu-device-manager", true),
];

#[test]
fn a_relabel_that_could_never_complete_is_named_before_any_change() {
    let n = a10_node(Some("vm-passthrough"));
    let to_container = relabel("lab-node-1=container");
    // All in place: nothing stands in the way.
    assert_eq!(
        cannot_finish(&n, &to_container, &policy(true, &ALL_ON), true),
        None
    );
    // No GPU Operator.
    let absent = PolicyStatus {
        status: "absent-crd",
        policy: None,
        note: None,
    };
    let why = cannot_finish(&n, &to_container, &absent, true).unwrap();
    assert!(
        why.starts_with("no GPU Operator in the cluster (no ClusterPolicy: absent-crd)"),
        "{why}"
    );
    // Sandbox workloads off: the operator ignores the label (check --effective's rule).
    let why = cannot_finish(
        &n,
        &relabel("lab-node-1=vm-vgpu"),
        &policy(false, &ALL_ON),
        true,
    )
    .unwrap();
    assert!(
        why.contains("sandboxWorkloads.enabled=false") && why.contains("label-ignored"),
        "{why}"
    );
    // The target's plugin disabled in the policy, or by the node's deploy label.
    let why = cannot_finish(
        &a10_node(Some("container")),
        &relabel("lab-node-1=vm-passthrough"),
        &policy(true, &[("sandbox-device-plugin", false)]),
        true,
    )
    .unwrap();
    assert!(
        why.contains("does not deploy the sandbox-device-plugin"),
        "{why}"
    );
    assert!(
        why.ends_with("-p '{\"spec\":{\"sandboxDevicePlugin\":{\"enabled\":true}}}'"),
        "{why}"
    );
    let mut off = a10_node(Some("container"));
    off.labels.insert(
        "nvidia.com/gpu.deploy.sandbox-device-plugin".into(),
        "false".into(),
    );
    let why = cannot_finish(
        &off,
        &relabel("lab-node-1=vm-passthrough"),
        &policy(true, &ALL_ON),
        true,
    )
    .unwrap();
    assert!(
        why.contains("nvidia.com/gpu.deploy.sandbox-device-plugin=false"),
        "{why}"
    );
    // vm-vgpu with no vGPU manager and no host driver.
    let why = cannot_finish(
        &n,
        &relabel("lab-node-1=vm-vgpu"),
        &policy(
            true,
            &[("sandbox-device-plugin", true), ("vgpu-manager", false)],
        ),
        true,
    )
    .unwrap();
    assert!(why.contains("does not deploy the vGPU manager"), "{why}");
    // Not a GPU node to the operator.
    let mut cpu = node_with(&[("cpu", "4")]);
    cpu.name = "cpu-1".into();
    let why = cannot_finish(
        &cpu,
        &relabel("cpu-1=container"),
        &policy(true, &ALL_ON),
        true,
    )
    .unwrap();
    assert!(why.contains("is not a GPU node"), "{why}");
    // decide() turns the reason into a refusal that changes nothing.
    let Decision::Stop(step, msg) = decide(
        &to_container,
        &passthrough_node(),
        &expect(),
        Some(why.clone()),
        &Disruption {
            evict: true,
            ..Disruption::default()
        },
        "t",
    ) else {
        panic!("not refused");
    };
    assert_eq!(step, StepKind::Relabel);
    assert!(
        msg.starts_with("refused, nothing was changed: the relabel could never complete"),
        "{msg}"
    );
}

#[test]
fn relabelling_back_to_the_config_that_serves_the_holders_needs_no_flag() {
    // lab-node-1 was labelled container by hand under a passthrough VMI; the way back to
    // vm-passthrough keeps it: the name it holds is the one the node advertises again.
    let r = relabel("lab-node-1=vm-passthrough");
    let obs = Observed {
        label: Some("container".into()),
        holders: vec![pod_holder()],
        ..Observed::default()
    };
    let back = Expect {
        names: BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 2)]),
        old: vec!["nvidia.com/gpu".into()],
    };
    let p = go(decide_ok(&r, &obs, &back, &Disruption::default(), "t"));
    assert!(p.actions.is_empty());
    assert_eq!(p.kept, vec![pod_holder()]);
    assert!(keeps(
        &pod_holder(),
        WorkloadConfig::VmPassthrough,
        &back.names
    ));
    // The other way (to container) it would lose it: refused without a flag.
    assert!(!keeps(
        &pod_holder(),
        WorkloadConfig::Container,
        &expect().names
    ));
    // With nothing expected by name, the class of what it holds decides.
    assert!(keeps(
        &pod_holder(),
        WorkloadConfig::VmPassthrough,
        &BTreeMap::new()
    ));
    assert!(!keeps(
        &pod_holder(),
        WorkloadConfig::Container,
        &BTreeMap::new()
    ));
}

#[test]
fn abort_puts_back_the_recorded_labels_and_uncordons_only_what_it_cordoned() {
    let rec = Record {
        from: Some("vm-passthrough".into()),
        to: "vm-vgpu".into(),
        vgpu_type: Some("A10-12Q".into()),
        step: StepKind::Operands,
        cordoned: true,
        expect: BTreeMap::from([("nvidia.com/NVIDIA_A10-12Q".into(), 4)]),
        old: vec!["nvidia.com/GA102GL_A10".into()],
        started: "t0".into(),
        from_vgpu: None,
        abort: false,
    };
    let obs = Observed {
        label: Some("vm-vgpu".into()),
        vgpu_type: Some("A10-12Q".into()),
        unschedulable: true,
        record: Some(Ok(rec.clone())),
        ..Observed::default()
    };
    let back = Expect {
        names: BTreeMap::from([("nvidia.com/GA102GL_A10".into(), 2)]),
        old: vec!["nvidia.com/NVIDIA_A10-12Q".into()],
    };
    let p = go(decide_abort(
        "lab-node-1",
        &obs,
        WorkloadConfig::VmPassthrough,
        &back,
        &Disruption::default(),
    ));
    assert_eq!(
        p.restore,
        Some(Restore {
            label: Some("vm-passthrough".into()),
            vgpu: None
        })
    );
    assert!(p.write_record && p.record.abort && p.resuming);
    assert_eq!(p.record.expect, back.names);
    assert_eq!(p.relabel.config, WorkloadConfig::VmPassthrough);
    let by_step: BTreeMap<StepKind, Status> = p.steps.iter().map(|s| (s.step, s.status)).collect();
    assert_eq!(by_step[&StepKind::Relabel], Status::Planned);
    assert_eq!(by_step[&StepKind::Uncordon], Status::Planned);
    // The abort's record is itself resumable: a second --abort does not write it again.
    let again = Observed {
        record: Some(Ok(p.record.clone())),
        ..obs.clone()
    };
    let q = go(decide_abort(
        "lab-node-1",
        &again,
        WorkloadConfig::VmPassthrough,
        &back,
        &Disruption::default(),
    ));
    assert!(!q.write_record && q.record.abort);
    // A relabel asked for while an abort is under way is refused, pointing at --abort.
    let Decision::Stop(_, msg) = decide_ok(
        &relabel("lab-node-1=vm-vgpu:A10-12Q"),
        &again,
        &expect(),
        &Disruption::default(),
        "t",
    ) else {
        panic!("not refused");
    };
    assert!(msg.contains("--abort"), "{msg}");
    // No record: nothing to abort.
    let none = Observed::default();
    assert!(matches!(
        decide_abort(
            "lab-node-1",
            &none,
            WorkloadConfig::Container,
            &back,
            &Disruption::default()
        ),
        Decision::NothingToDo(_)
    ));
}

#[test]
fn stuck_waits_that_match_a_reported_operator_fault_name_it() {
    let rec = |from: &str| Record {
        from: Some(from.into()),
        to: "vm-vgpu".into(),
        vgpu_type: None,
        step: StepKind::Relabel,
        cordoned: true,
        expect: BTreeMap::new(),
        old: Vec::new(),
        started: "t0".into(),
        from_vgpu: None,
        abort: false,
    };
    let missing = "no sandbox-device-plugin pod on the node";
    let f = known_fault(&rec("vm-passthrough"), WorkloadConfig::VmVgpu, missing, &[]).unwrap();
    assert!(
        f.contains("NVIDIA/gpu-operator#2272")
            && f.contains("nvidia.com/gpu.deploy.sandbox-validator"),
        "{f}"
    );
    // From container the same wait is no known fault.
    assert_eq!(
        known_fault(&rec("container"), WorkloadConfig::VmVgpu, missing, &[]),
        None
    );
    // A crash-looping sandbox plugin with a VM kept on the node.
    let crash = "sandbox-device-plugin pod nvidia-sandbox-device-plugin-x crash-looping";
    let f = known_fault(
        &rec("container"),
        WorkloadConfig::VmVgpu,
        crash,
        &[vmi_holder()],
    )
    .unwrap();
    assert!(
        f.contains("NVIDIA/gpu-operator#1187") && f.contains("gpu-vm/vm1"),
        "{f}"
    );
    assert_eq!(
        known_fault(&rec("container"), WorkloadConfig::VmVgpu, crash, &[]),
        None
    );
}

/// Issue 54, item 14: a vGPU type change on a node that is vm-vgpu already says that the
/// vGPU config changes, never "when the node becomes vm-vgpu" (it is that now).
#[test]
fn a_refused_vgpu_type_change_says_what_changes() {
    let obs = Observed {
        label: Some("vm-vgpu".into()),
        vgpu_type: Some("A10-12Q".into()),
        ..Observed::default()
    };
    let who = ["gpu-vm/virt-launcher-vm1-abcde".to_owned()];
    let m = refusal(&relabel("gpu-a=vm-vgpu:A10-24Q"), &obs, &who);
    assert!(
        m.starts_with("refused: 1 running pod(s) hold a GPU there and would lose it when the node's vGPU config becomes A10-24Q: gpu-vm/virt-launcher-vm1-abcde; "),
        "{m}"
    );
    assert!(!m.contains("becomes vm-vgpu"), "{m}");
    // From another workload, the workload change is what is said.
    let m = refusal(&relabel("gpu-a=vm-vgpu:A10-24Q"), &passthrough_node(), &who);
    assert!(
        m.contains("would lose it when the node becomes vm-vgpu: "),
        "{m}"
    );
}
