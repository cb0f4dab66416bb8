//! The relabel's planning and its wait conditions, without a cluster.

use super::*;
use crate::model::workload::LABEL_KEY;

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
    let p = go(decide(
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
    let Decision::Stop(_, msg) = decide(&r, &obs, &expect(), &Disruption::default(), "t") else {
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
    let Decision::Stop(_, msg) = decide(&r, &obs, &expect(), &stop, "t") else {
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
    let p = go(decide(&r, &obs, &expect(), &both, "t"));
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
    let p = go(decide(&r, &obs, &expect(), &allow, "t"));
    assert!(p.steps[1].detail.ends_with("(--allow-disruption)"));
    assert!(still_there(&p.actions, &obs.holders).is_empty());
    // A pod being deleted needs no flag: it is only waited for.
    let mut leaving = passthrough_node();
    leaving.holders = vec![Holder {
        leaving: true,
        ..pod_holder()
    }];
    let p = go(decide(&r, &leaving, &expect(), &Disruption::default(), "t"));
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
    let p = go(decide(
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
    let Decision::Stop(_, msg) = decide(
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
            && msg.contains("gpuwl relabel lab-node-1=container")
            && msg.contains("kubectl annotate node lab-node-1 gpuwl.io/relabel-"),
        "{msg}"
    );
    // An annotation that is not a record: stopped.
    let bad = Observed {
        record: Some(Record::parse("{nope")),
        ..obs
    };
    assert!(matches!(
        decide(&r, &bad, &expect(), &Disruption::default(), "t"),
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
    let p = go(decide(&r, &obs, &expect(), &Disruption::default(), "t"));
    assert!(!p.record.cordoned);
    assert_eq!(p.steps[0].status, Status::AlreadyDone);
    assert!(p.steps[0].detail.contains("it stays cordoned"));
    assert_eq!(p.steps[5].status, Status::Skipped);
    let done = Observed {
        label: Some("container".into()),
        ..Observed::default()
    };
    assert!(matches!(
        decide(&r, &done, &expect(), &Disruption::default(), "t"),
        Decision::NothingToDo(m) if m.contains("labelled container already")
    ));
    // vm-vgpu with another type than the node's is not done.
    let vg = Observed {
        label: Some("vm-vgpu".into()),
        vgpu_type: Some("A10-4Q".into()),
        ..Observed::default()
    };
    let p = go(decide(
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
        live::done_message(&done, Duration::from_millis(1300), None),
        "relabelled lab-node-1 vm-passthrough → container in 1.3 s"
    );
    assert_eq!(
        live::done_message(
            &done,
            Duration::from_millis(1300),
            Some(("2026-12-02T15:21:52Z".into(), Duration::from_secs(400)))
        ),
        "relabelled lab-node-1 vm-passthrough → container in 400 s since it started (2026-12-02T15:21:52Z; this run 1.3 s)"
    );
}
