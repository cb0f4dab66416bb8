//! `explain vmi` against the real virt-controller and kube-scheduler (KubeVirt v1.7.0 on the
//! local control plane), on random situations: node advertisements (names, counts, stale
//! `0`s), the KubeVirt CR's permittedHostDevices (absent, or a random list of PCI, mediated
//! and `usb` entries, externalResourceProvider true or false, typo and case variants) and the
//! VMI's `gpus[].deviceName`s. What KubeVirt and the scheduler did — refused (virt-controller's
//! `FailedCreate`, no launcher pod), placed (launcher pod bound), unschedulable (launcher pod
//! `PodScheduled=False`) — must be what gpuwl's cause code says (`not-permitted`, or
//! `invalid-spec` for a launcher pod the API server refused, [`refused_code`];
//! `scheduled`; a scheduler cause), and `kubevirt check`'s findings on the same cluster
//! must not contradict it ([`check_disagreements`]). The same holds before the VMI exists
//! (`explain --pod` of its manifest: the launcher virt-controller will render, issue 47),
//! and inventory lists a refused VMI as `not-permitted`.
//!
//! Issue 47's kinds, drawn by a third generator ([`kinds`]; seed 37's earlier scenarios keep
//! their names, lists and devices): the CR's launcher settings (`useEmulation`,
//! `memoryOvercommit`, `cpuAllocationRatio`, `cpuRequest`,
//! `additionalGuestMemoryOverheadRatio`, the console-log sidecar's `supportContainerResources`
//! and `disableSerialConsoleLog`, cluster-wide `nodeSelectors`), a VMI asking its memory as
//! `memory.guest` only (what overcommit scales), nodes with memory and cpu near what the
//! launcher asks, `usb` entries, a stopped VirtualMachine judged (`explain vm`, and its
//! manifest) before it is started, and the CR edited under a waiting launcher (the live
//! explanation must keep following the launcher that exists). Where a launcher exists, the
//! model's render of the VMI as read (under the CR as gpuwl reads it) must ask what the real
//! one asks ([`launcher_disagrees`]); the admission guard's review of the manifest must not
//! warn of a permanent cause for a VMI that was placed, and must warn `not-permitted` for
//! one refused ([`admission_disagrees`]); inventory's code for the VMI or its launcher must
//! be explain's, and so must plan's (a bench run). CI size: seed 37, [`CI_SCENARIOS`] scenarios;
//! `GPUWL_KV_DIFF_SCENARIOS=N` runs more (the bench run: bench/differential-kubevirt.sh).

use std::time::{Duration, Instant};

use crate::kit::{ClusterDown, gpuwl, gpuwl_ok, kubectl, one_cluster_at_a_time};

const CLUSTER: &str = "gpuwl-it-kvdiff";

/// Scenarios in the suite.
const CI_SCENARIOS: usize = 4;

/// The names drawn from: the lab's two VM names, two more real ones, a typo and a case
/// variant.
const NAMES: [&str; 6] = [
    "nvidia.com/GA102GL_A10",
    "nvidia.com/NVIDIA_A10-12Q",
    "nvidia.com/TU104GL_TESLA_T4",
    "nvidia.com/NVIDIA_A10-24Q",
    "nvidia.com/GA102GL_A1O",
    "nvidia.com/ga102gl_a10",
];

const NODES: [&str; 3] = ["kwok-node-0", "kwok-node-1", "kwok-node-2"];

/// xorshift64*: deterministic per seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[self.below(v.len() as u64) as usize]
    }
}

#[derive(Debug)]
struct Scenario {
    /// Per node: (name, count) advertised.
    adv: Vec<Vec<(&'static str, u64)>>,
    /// permittedHostDevices: None = absent; else (name, under pciHostDevices, external).
    permitted: Option<Vec<(&'static str, bool, bool)>>,
    /// The VMI's gpus[].deviceName, in order.
    devices: Vec<&'static str>,
    /// Per node, what the virt-launcher pod needs beyond the GPU (issue 47): drawn from a
    /// second generator, so the first's scenarios stay those of earlier runs.
    launcher_needs: Vec<Needs>,
    /// Issue 47's kinds (a third generator, [`kinds`]).
    kinds: Kinds,
}

/// A node's side of what virt-controller adds to a launcher pod: its `kubernetes.io/arch`
/// (the launcher selects amd64), `devices.kubevirt.io/kvm`, `ephemeral-storage` (the
/// launcher asks 50M) and memory near the VMI's 128Mi plus KubeVirt's overhead (~1.4Gi).
#[derive(Debug, Clone, Copy)]
struct Needs {
    arm64: bool,
    no_kvm: bool,
    no_ephemeral: bool,
    small_memory: bool,
}

fn needs(rng: &mut Rng) -> Vec<Needs> {
    NODES
        .iter()
        .map(|_| Needs {
            arm64: rng.below(6) == 0,
            no_kvm: rng.below(8) == 0,
            no_ephemeral: rng.below(8) == 0,
            small_memory: rng.below(6) == 0,
        })
        .collect()
}

/// The CR's launcher settings, the VMI's form and what the nodes offer the launcher beyond
/// the GPU, drawn for one scenario (issue 47).
#[derive(Debug, Clone, Default)]
struct Kinds {
    /// `developerConfiguration.useEmulation`.
    use_emulation: bool,
    /// `developerConfiguration.memoryOvercommit`.
    memory_overcommit: Option<i64>,
    /// `developerConfiguration.cpuAllocationRatio`.
    cpu_allocation_ratio: Option<i64>,
    /// `spec.configuration.cpuRequest`.
    cpu_request: Option<&'static str>,
    /// `additionalGuestMemoryOverheadRatio`.
    overhead_ratio: Option<&'static str>,
    /// The console-log sidecar's requests (memory, cpu) in `supportContainerResources`.
    console_log: Option<(&'static str, &'static str)>,
    /// `virtualMachineOptions.disableSerialConsoleLog`.
    disable_console_log: bool,
    /// `developerConfiguration.nodeSelectors: {gpuwl.test/zone: a}`, and per node whether it
    /// is labelled zone `a` (else `b`).
    zone_selector: bool,
    zone_a: Vec<bool>,
    /// The VMI asks `memory.guest: 1Gi` and no memory request (what overcommit scales).
    guest_only: bool,
    /// Per node: allocatable memory and cpu.
    node_memory: Vec<&'static str>,
    node_cpu: Vec<&'static str>,
    /// Per permitted entry: listed under `usb` instead.
    usb: Vec<bool>,
    /// A VirtualMachine created stopped (`runStrategy: Halted`), judged, then started.
    vm: bool,
    /// Under a launcher left Pending, the CR drops every name and changes its settings.
    edit_under_waiting: bool,
    /// Every asked name permitted and advertised on one node (2 units each): the launcher's
    /// other needs decide (most random lists refuse).
    reach: bool,
}

fn kinds(rng: &mut Rng, permitted: usize) -> Kinds {
    // Near the launcher's memory: 128Mi + about 1,292Mi of overhead + the 35M sidecar is
    // about 1,454Mi; a guest-only 1Gi about 2,350Mi (about 1,840Mi at 200 % overcommit).
    let mems = [
        "1400Mi", "1460Mi", "1500Mi", "1700Mi", "1900Mi", "2400Mi", "2600Mi",
    ];
    let cpus = ["104m", "150m", "300m", "600m", "1100m"];
    let mut opt = |n: u64| rng.below(n) == 0;
    let (oc, ratio, cpu_req, oh, log) = (opt(3), opt(4), opt(6), opt(5), opt(6));
    Kinds {
        use_emulation: rng.below(5) == 0,
        memory_overcommit: oc.then(|| [150, 200][rng.below(2) as usize]),
        cpu_allocation_ratio: ratio.then(|| [1, 4][rng.below(2) as usize]),
        cpu_request: cpu_req.then(|| rng.pick(&["250m", "1500m"])),
        overhead_ratio: oh.then(|| rng.pick(&["1.5", "2"])),
        console_log: log.then(|| (rng.pick(&["20M", "100M"]), rng.pick(&["1m", "50m"]))),
        disable_console_log: rng.below(8) == 0,
        zone_selector: rng.below(6) == 0,
        zone_a: NODES.iter().map(|_| rng.below(2) == 0).collect(),
        guest_only: rng.below(3) == 0,
        node_memory: NODES
            .iter()
            .map(|_| {
                if rng.below(3) == 0 {
                    rng.pick(&mems)
                } else {
                    "256Gi"
                }
            })
            .collect(),
        node_cpu: NODES
            .iter()
            .map(|_| {
                if rng.below(4) == 0 {
                    rng.pick(&cpus)
                } else {
                    "64"
                }
            })
            .collect(),
        usb: (0..permitted).map(|_| rng.below(5) == 0).collect(),
        vm: rng.below(4) == 0,
        edit_under_waiting: rng.below(2) == 0,
        reach: rng.below(2) == 0,
    }
}

/// Makes every name `s` asks permitted (when the CR has a list) and advertised on one node
/// with 2 units each ([`Kinds::reach`]), `node` drawn by the caller.
fn reach(s: &mut Scenario, node: usize) {
    for d in s.devices.clone() {
        if let Some(list) = &mut s.permitted
            && !list.iter().any(|e| e.0 == d)
        {
            list.push((d, true, true));
            s.kinds.usb.push(false);
        }
        s.adv[node].push((d, 2));
    }
}

fn generate(rng: &mut Rng) -> Scenario {
    let adv = NODES
        .iter()
        .map(|_| {
            (0..rng.below(3))
                .map(|_| (rng.pick(&NAMES[..4]), rng.below(3)))
                .collect()
        })
        .collect();
    let permitted = (rng.below(4) != 0).then(|| {
        (0..rng.below(4))
            .map(|_| (rng.pick(&NAMES), rng.below(2) == 0, rng.below(4) != 0))
            .collect()
    });
    let devices = (0..1 + rng.below(2)).map(|_| rng.pick(&NAMES)).collect();
    Scenario {
        adv,
        permitted,
        devices,
        launcher_needs: Vec::new(),
        kinds: Kinds::default(),
    }
}

fn ok(kubeconfig: &str, args: &[&str], stdin: &str) -> String {
    let (code, out, err) = kubectl(kubeconfig, args, stdin);
    assert_eq!(code, 0, "kubectl {args:?}: {err}");
    out
}

/// Applies the scenario's advertisements, node labels and CR (the VMI is [`vmi_yaml`]).
fn apply(kc: &str, s: &Scenario) {
    for (i, (node, adv)) in NODES.iter().zip(&s.adv).enumerate() {
        let mut res = serde_json::Map::new();
        for n in NAMES {
            res.insert(n.into(), serde_json::Value::Null);
        }
        for (n, c) in adv {
            res.insert((*n).into(), serde_json::json!(c.to_string()));
        }
        if let Some(need) = s.launcher_needs.get(i) {
            let q = |on: bool, v: &str| {
                if on {
                    serde_json::Value::Null
                } else {
                    serde_json::json!(v)
                }
            };
            res.insert("devices.kubevirt.io/kvm".into(), q(need.no_kvm, "1k"));
            res.insert("ephemeral-storage".into(), q(need.no_ephemeral, "100Gi"));
            let memory = if need.small_memory {
                "1300Mi"
            } else {
                s.kinds.node_memory.get(i).copied().unwrap_or("256Gi")
            };
            res.insert("memory".into(), serde_json::json!(memory));
            res.insert(
                "cpu".into(),
                serde_json::json!(s.kinds.node_cpu.get(i).copied().unwrap_or("64")),
            );
            let arch = if need.arm64 { "arm64" } else { "amd64" };
            let zone = if s.kinds.zone_a.get(i).copied().unwrap_or(true) {
                "a"
            } else {
                "b"
            };
            ok(
                kc,
                &[
                    "label",
                    "node",
                    node,
                    &format!("kubernetes.io/arch={arch}"),
                    &format!("gpuwl.test/zone={zone}"),
                    "--overwrite",
                ],
                "",
            );
        }
        let patch = serde_json::json!({"status": {"capacity": res, "allocatable": res}});
        ok(
            kc,
            &[
                "patch",
                "node",
                node,
                "--subresource=status",
                "--type",
                "merge",
                "-p",
                &patch.to_string(),
            ],
            "",
        );
    }
    patch_cr(kc, &cr_configuration(s));
}

/// The scenario's `spec.configuration` as a merge patch: its permittedHostDevices and the
/// launcher settings of [`Kinds`] (`null` removes a setting the previous scenario made).
fn cr_configuration(s: &Scenario) -> serde_json::Value {
    use serde_json::{Value, json};
    let phd = match &s.permitted {
        None => Value::Null,
        Some(list) => {
            let (mut pci, mut mdev, mut usb) = (Vec::new(), Vec::new(), Vec::new());
            for (i, (n, under_pci, ext)) in list.iter().enumerate() {
                if s.kinds.usb.get(i).copied().unwrap_or(false) {
                    usb.push(json!({"resourceName": n, "externalResourceProvider": ext,
                        "selectors": [{"vendor": "0951", "product": "1666"}]}));
                } else if *under_pci {
                    pci.push(json!({"pciVendorSelector": "10DE:2236", "resourceName": n,
                        "externalResourceProvider": ext}));
                } else {
                    let sel = n.trim_start_matches("nvidia.com/").replace('_', " ");
                    mdev.push(json!({"mdevNameSelector": sel, "resourceName": n,
                        "externalResourceProvider": ext}));
                }
            }
            json!({"pciHostDevices": pci, "mediatedDevices": mdev, "usb": usb})
        }
    };
    let k = &s.kinds;
    let opt = |v: Option<Value>| v.unwrap_or(Value::Null);
    json!({
        "permittedHostDevices": phd,
        "cpuRequest": opt(k.cpu_request.map(|c| json!(c))),
        "additionalGuestMemoryOverheadRatio": opt(k.overhead_ratio.map(|r| json!(r))),
        "supportContainerResources": opt(k.console_log.map(|(m, c)| json!([{
            "type": "guest-console-log",
            "resources": {"requests": {"memory": m, "cpu": c}}}]))),
        "virtualMachineOptions": {"disableSerialConsoleLog":
            if k.disable_console_log { json!({}) } else { Value::Null }},
        "developerConfiguration": {
            "useEmulation": k.use_emulation,
            "memoryOvercommit": opt(k.memory_overcommit.map(|m| json!(m))),
            "cpuAllocationRatio": opt(k.cpu_allocation_ratio.map(|r| json!(r))),
            "nodeSelectors": if k.zone_selector {
                json!({"gpuwl.test/zone": "a"})
            } else {
                Value::Null
            },
        },
    })
}

/// Merge-patches the KubeVirt CR's `spec.configuration` with `configuration` and waits for
/// virt-controller's informer.
fn patch_cr(kc: &str, configuration: &serde_json::Value) {
    let patch = serde_json::json!({"spec": {"configuration": configuration}});
    ok(
        kc,
        &[
            "-n",
            "kubevirt",
            "patch",
            "kubevirt",
            "kubevirt",
            "--type",
            "merge",
            "-p",
            &patch.to_string(),
        ],
        "",
    );
    // virt-controller reads the CR through an informer.
    std::thread::sleep(Duration::from_secs(2));
}

/// The VMI spec of scenario `s`.
fn vmi_spec(s: &Scenario) -> serde_json::Value {
    use serde_json::json;
    let gpus: Vec<serde_json::Value> = s
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| json!({"name": format!("g{i}"), "deviceName": d}))
        .collect();
    let mut domain = json!({"devices": {"gpus": gpus}});
    if s.kinds.guest_only {
        domain["memory"] = json!({"guest": "1Gi"});
    } else {
        domain["resources"] = json!({"requests": {"memory": "128Mi"}});
    }
    json!({ "domain": domain })
}

/// The VMI of scenario `s`, named `name` (JSON, which kubectl and gpuwl read as YAML).
fn vmi_yaml(s: &Scenario, name: &str) -> String {
    serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": name, "namespace": "default"}, "spec": vmi_spec(s)})
    .to_string()
}

/// The VirtualMachine of scenario `s`, named `name`, stopped.
fn vm_yaml(s: &Scenario, name: &str) -> String {
    serde_json::json!({"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"runStrategy": "Halted", "template": {"spec": vmi_spec(s)}}})
    .to_string()
}

/// gpuwl's verdict on the VMI before it exists: `explain --pod` of its manifest against the
/// live cluster (nodes, pods, the KubeVirt CR): the launcher virt-controller will render
/// (issue 47, item 3).
fn file_mode_cause(kc: &str, manifest: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vmi.yaml");
    std::fs::write(&path, manifest).unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .args(["explain", "--pod", path.to_str().unwrap(), "-o", "json"])
        .env("KUBECONFIG", kc)
        .output()
        .unwrap();
    let g: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    g["causeCode"].as_str().unwrap_or("").to_owned()
}

/// The cause code of a refusal: `not-permitted` for a name permittedHostDevices does not
/// list, `invalid-spec` for a launcher pod the API server refused ("Pod … is invalid").
fn refused_code(msg: &str) -> &'static str {
    if msg.contains("is invalid") {
        "invalid-spec"
    } else {
        "not-permitted"
    }
}

/// Whether a verdict given before the VMI exists agrees with what happened: refused ↔
/// [`refused_code`], placed ↔ `fits-now`, a launcher left Pending ↔ a scheduler cause.
fn agrees_before(real: &Real, code: &str) -> bool {
    match real {
        Real::Refused(m) => code == refused_code(m),
        Real::Placed(_) => code == "fits-now",
        Real::Unschedulable(_) => !matches!(code, "scheduled" | "not-permitted" | "fits-now"),
    }
}

/// inventory's entry for the VMI: a refused VMI is listed with [`refused_code`]
/// (`not-permitted` unservable, issue 47 item 1; `invalid-spec` held back); a launcher left Pending is listed (unservable, held back or demand)
/// with explain's code `cause`, and never the VMI beside it; a placed one not at all.
fn inventory_disagrees(kc: &str, name: &str, real: &Real, cause: &str) -> Option<String> {
    let inv: serde_json::Value =
        serde_json::from_str(&gpuwl_ok(&["inventory", "--kubeconfig", kc, "-o", "json"])).unwrap();
    let key = format!("default/{name}");
    let launcher = format!("default/virt-launcher-{name}-");
    let listed: Vec<(String, String, String)> = ["unservable", "heldBack", "demandPods"]
        .iter()
        .flat_map(|k| inv[*k].as_array().cloned().unwrap_or_default())
        .filter_map(|u| {
            let pod = u["pod"].as_str()?.to_owned();
            (pod == key || pod.starts_with(&launcher)).then(|| {
                (
                    pod,
                    u["kind"].as_str().unwrap_or("Pod").to_owned(),
                    u["code"].as_str().unwrap_or("").to_owned(),
                )
            })
        })
        .collect();
    let ok = match real {
        Real::Refused(m) => {
            !listed.is_empty()
                && listed
                    .iter()
                    .all(|(_, k, c)| k != "Pod" && c == refused_code(m))
        }
        Real::Unschedulable(_) => {
            !listed.is_empty() && listed.iter().all(|(_, k, c)| k == "Pod" && c == cause)
        }
        Real::Placed(_) => listed.is_empty(),
    };
    (!ok).then(|| format!("inventory lists {listed:?} (explain: {cause})"))
}

/// Where `gpuwl plan --no-verify` (the model's proposal on the live cluster) contradicts
/// explain's verdict `cause` for the VMI or its launcher: an entry it holds back must carry
/// explain's code; a placed VMI appears nowhere in it.
fn plan_disagrees(kc: &str, name: &str, real: &Real, cause: &str) -> Option<String> {
    let (code, out, err) = gpuwl(&["plan", "--no-verify", "--kubeconfig", kc, "-o", "json"]);
    assert!(code == 0 || code == 1, "plan: {err}");
    let p: serde_json::Value = serde_json::from_str(&out).unwrap();
    let key = format!("default/{name}");
    let launcher = format!("default/virt-launcher-{name}-");
    let ours = |v: &serde_json::Value| {
        v["pod"]
            .as_str()
            .is_some_and(|x| x == key || x.starts_with(&launcher))
    };
    let held: Vec<String> = p["proposal"]["heldBack"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| ours(h))
        .map(|h| h["code"].as_str().unwrap_or("").to_owned())
        .collect();
    let listed = held.len()
        + p["proposal"]["unservable"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|u| ours(u))
            .count();
    let wrong = held.iter().any(|c| c != cause) || (matches!(real, Real::Placed(_)) && listed > 0);
    wrong.then(|| format!("plan holds back {held:?}, lists it {listed} time(s) (explain: {cause})"))
}

/// Where the model's launcher (`launcher::render` of the VMI as read, under the CR as gpuwl
/// reads it) differs from the launcher pod virt-controller rendered: extended resources,
/// memory, ephemeral-storage, cpu, and a nodeSelector entry the real one lacks. `None`
/// when they agree or no launcher exists.
fn launcher_disagrees(kc: &str, name: &str) -> Option<String> {
    let vmi: serde_json::Value =
        serde_json::from_str(&ok(kc, &["get", "vmi", name, "-o", "json"], "")).unwrap();
    let sel = format!("kubevirt.io=virt-launcher,vm.kubevirt.io/name={name}");
    let pods: serde_json::Value =
        serde_json::from_str(&ok(kc, &["get", "pods", "-l", &sel, "-o", "json"], "")).unwrap();
    let mut real = pods["items"].as_array()?.first()?.clone();
    real["kind"] = serde_json::json!("Pod");
    let real = gpuwl_core::decode::pods::from_object(&real).unwrap();
    let cr: serde_json::Value = serde_json::from_str(&ok(
        kc,
        &[
            "-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o", "json",
        ],
        "",
    ))
    .unwrap();
    let cluster = gpuwl_core::decode::kubevirt::from_object(&cr)
        .unwrap()
        .launcher;
    let p = gpuwl_core::decode::pods::from_object(&vmi).unwrap();
    let model = gpuwl_core::model::launcher::render(&p, p.vmi_shape.as_deref().unwrap(), &cluster);
    let mut diff = Vec::new();
    if model.requests != real.requests {
        diff.push(format!(
            "extended resources: model {:?}, real {:?}",
            model.requests, real.requests
        ));
    }
    for r in ["memory", "ephemeral-storage", "cpu"] {
        let (m, x) = (model.other_requests.get(r), real.other_requests.get(r));
        if m != x {
            diff.push(format!("{r}: model {m:?}, real {x:?}"));
        }
    }
    for (k, v) in &model.node_selector {
        if real.node_selector.get(k) != Some(v) {
            diff.push(format!(
                "nodeSelector {k}={v}: real {:?}",
                real.node_selector
            ));
        }
    }
    (!diff.is_empty()).then(|| format!("model's launcher differs: {}", diff.join("; ")))
}

/// Where the admission guard's review of `manifest` (against the nodes and the CR now)
/// contradicts what happened: a refused VMI must draw a `not-permitted` warning; one that
/// got a launcher none; a placed one no warning of a permanent cause.
fn admission_disagrees(kc: &str, manifest: &str, real: &Real) -> Option<String> {
    use gpuwl_core::analysis::admission::{Index, review};
    let dir = tempfile::tempdir().unwrap();
    let nodes_path = dir.path().join("nodes.json");
    std::fs::write(&nodes_path, ok(kc, &["get", "nodes", "-o", "json"], "")).unwrap();
    let nodes = gpuwl_core::decode::dump::read_nodes(&gpuwl_core::decode::dump::Source::from_arg(
        &nodes_path,
    ))
    .unwrap();
    let cr: serde_json::Value = serde_json::from_str(&ok(
        kc,
        &[
            "-n", "kubevirt", "get", "kubevirt", "kubevirt", "-o", "json",
        ],
        "",
    ))
    .unwrap();
    let kv = gpuwl_core::decode::kubevirt::from_object(&cr).unwrap();
    let doc: serde_json::Value = serde_json::from_str(manifest).unwrap();
    let pod = gpuwl_core::decode::pods::from_object(&doc).unwrap();
    let warnings = review(&pod, &Index::build(&nodes, None, Some(kv)));
    let codes: Vec<&str> = warnings.iter().map(|w| w.code.as_str()).collect();
    let permanent = warnings
        .iter()
        .any(|w| gpuwl_core::analysis::verdict::verdict(w.code, false).permanent());
    let refused = codes.contains(&"not-permitted") || codes.contains(&"invalid-spec");
    let ok = match real {
        Real::Refused(m) => codes.contains(&refused_code(m)),
        Real::Unschedulable(_) => !refused,
        Real::Placed(_) => !permanent,
    };
    (!ok).then(|| {
        format!(
            "admission warns {:?}",
            warnings.iter().map(|w| w.line()).collect::<Vec<_>>()
        )
    })
}

/// What KubeVirt and the scheduler did with VMI `name`.
#[derive(Debug, PartialEq)]
enum Real {
    Refused(String),
    Placed(String),
    Unschedulable(String),
}

fn observe(kc: &str, name: &str) -> Real {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        // A VM just started: virt-controller creates its VMI in a moment.
        let (code, out, err) = kubectl(kc, &["get", "vmi", name, "-o", "json"], "");
        if code != 0 && err.contains("NotFound") && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(300));
            continue;
        }
        assert_eq!(code, 0, "kubectl get vmi {name}: {err}");
        let vmi: serde_json::Value = serde_json::from_str(&out).unwrap();
        if let Some(c) = vmi["status"]["conditions"].as_array().and_then(|cs| {
            cs.iter()
                .find(|c| c["type"] == "Synchronized" && c["reason"] == "FailedCreate")
        }) {
            return Real::Refused(c["message"].as_str().unwrap_or("").into());
        }
        let sel = format!("kubevirt.io=virt-launcher,vm.kubevirt.io/name={name}");
        let pods: serde_json::Value =
            serde_json::from_str(&ok(kc, &["get", "pods", "-l", &sel, "-o", "json"], "")).unwrap();
        if let Some(p) = pods["items"].as_array().and_then(|a| a.first()) {
            if let Some(n) = p["spec"]["nodeName"].as_str() {
                return Real::Placed(n.into());
            }
            if let Some(c) = p["status"]["conditions"].as_array().and_then(|cs| {
                cs.iter()
                    .find(|c| c["type"] == "PodScheduled" && c["status"] == "False")
            }) {
                return Real::Unschedulable(c["message"].as_str().unwrap_or("").into());
            }
        }
        assert!(
            Instant::now() < deadline,
            "VMI {name} undecided after 45 s: {vmi}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The names some node advertises with allocatable > 0 in `s` (a node listing a name twice
/// keeps the last count, as [`apply`]'s patch does).
fn advertised(s: &Scenario) -> std::collections::BTreeSet<&'static str> {
    let mut names = std::collections::BTreeSet::new();
    for adv in &s.adv {
        let mut last = std::collections::BTreeMap::new();
        for (n, c) in adv {
            last.insert(*n, *c);
        }
        names.extend(last.into_iter().filter(|(_, c)| *c > 0).map(|(n, _)| n));
    }
    names
}

/// `gpuwl kubevirt check`'s findings on the live cluster, as (code, resource) pairs.
fn check_findings(kc: &str) -> Vec<(String, String)> {
    let (code, out, err) = gpuwl(&["kubevirt", "check", "--kubeconfig", kc, "-o", "json"]);
    assert!(code == 0 || code == 1, "kubevirt check exit {code}: {err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["code"].as_str().unwrap().to_owned(),
                f["resource"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Where `kubevirt check`'s findings contradict what KubeVirt did with the VMI (empty when
/// they agree), and how many of its claims the VMI put to the test:
/// - `advertised-not-permitted` for a name the VMI asks, with permittedHostDevices present:
///   virt-controller must refuse the VMI;
/// - a refusal that names an advertised name must have been a `advertised-not-permitted`
///   finding (the finding exists to warn of exactly that refusal);
/// - `permitted-not-advertised` for a name the VMI asks: no node can take it, so the VMI
///   must not be placed.
fn check_disagreements(
    s: &Scenario,
    real: &Real,
    findings: &[(String, String)],
) -> (Vec<String>, usize) {
    let has = |code: &str, name: &str| findings.iter().any(|(c, r)| c == code && r == name);
    let mut bad = Vec::new();
    let mut tested = 0;
    for d in &s.devices {
        if s.permitted.is_some() && has("advertised-not-permitted", d) {
            tested += 1;
            if !matches!(real, Real::Refused(_)) {
                bad.push(format!("advertised-not-permitted {d}, yet {real:?}"));
            }
        }
        if has("permitted-not-advertised", d) {
            tested += 1;
            if matches!(real, Real::Placed(_)) {
                bad.push(format!("permitted-not-advertised {d}, yet {real:?}"));
            }
        }
    }
    if let Real::Refused(msg) = real {
        let named = msg
            .split_once("GPU ")
            .and_then(|(_, rest)| rest.split_once(" is not permitted"))
            .map(|(n, _)| n);
        if let Some(n) = named.filter(|n| advertised(s).contains(n)) {
            tested += 1;
            if !has("advertised-not-permitted", n) {
                bad.push(format!(
                    "refused for advertised {n}, no advertised-not-permitted finding"
                ));
            }
        }
    }
    (bad, tested)
}

/// Whether gpuwl's cause code says what happened.
fn agrees(real: &Real, code: &str) -> bool {
    match real {
        Real::Refused(m) => code == refused_code(m),
        Real::Placed(_) => code == "scheduled",
        Real::Unschedulable(_) => !matches!(code, "scheduled" | "not-permitted" | "fits-now"),
    }
}

/// The live explanation of `kind` (`vm`, `vmi`) `default/NAME`: its cause code and cause.
fn explain_live(kc: &str, kind: &str, name: &str) -> (String, String) {
    let target = format!("default/{name}");
    let (code, out, err) = gpuwl(&["explain", kind, &target, "--kubeconfig", kc, "-o", "json"]);
    assert!(code == 0 || code == 1, "explain {kind} {name}: {err}");
    let g: serde_json::Value = serde_json::from_str(&out).unwrap();
    (
        g["causeCode"].as_str().unwrap_or("").to_owned(),
        g["cause"].to_string(),
    )
}

/// Creates scenario `s`'s VMI (or stopped VM, then started) named `name` and returns what
/// happened, checking every verdict given before the VMI exists (the manifest's, the
/// stopped VM's, the admission guard's) into `bad` and `tally`.
fn create_and_observe(
    kc: &str,
    s: &Scenario,
    name: &str,
    bad: &mut Vec<String>,
    tally: &mut std::collections::BTreeMap<String, usize>,
) -> (Real, String) {
    let manifest = if s.kinds.vm {
        vm_yaml(s, name)
    } else {
        vmi_yaml(s, name)
    };
    let before = file_mode_cause(kc, &manifest);
    *tally.entry(format!("before/{before}")).or_insert(0) += 1;
    ok(kc, &["apply", "-f", "-"], &manifest);
    let stopped = s.kinds.vm.then(|| {
        let (stopped, _) = explain_live(kc, "vm", name);
        ok(
            kc,
            &[
                "patch",
                "vm",
                name,
                "--type",
                "merge",
                "-p",
                r#"{"spec":{"runStrategy":"Always"}}"#,
            ],
            "",
        );
        stopped
    });
    let real = observe(kc, name);
    if !agrees_before(&real, &before) {
        bad.push(format!(
            "{name}: {s:?}\n  real {real:?}\n  gpuwl from the manifest, before the VMI: {before}"
        ));
    }
    if let Some(st) = stopped {
        *tally.entry(format!("stopped-vm/{st}")).or_insert(0) += 1;
        if !agrees_before(&real, &st) {
            bad.push(format!(
                "{name}: {s:?}\n  real {real:?}\n  explain vm of the stopped VM: {st}"
            ));
        }
    }
    if let Some(w) = admission_disagrees(kc, &manifest, &real) {
        bad.push(format!("{name}: {s:?}\n  real {real:?}\n  {w}"));
    }
    (real, before)
}

/// Under a launcher left Pending: the CR drops every name and changes its launcher
/// settings; the launcher stays Pending and the live explanation still follows it
/// (issue 47, item 4).
fn edit_under_waiting(kc: &str, s: &Scenario, name: &str, real: &Real, bad: &mut Vec<String>) {
    let mut c = cr_configuration(s);
    c["permittedHostDevices"] = serde_json::json!({"pciHostDevices": [], "mediatedDevices": []});
    c["developerConfiguration"]["memoryOvercommit"] = serde_json::json!(300);
    c["developerConfiguration"]["useEmulation"] = serde_json::json!(!s.kinds.use_emulation);
    patch_cr(kc, &c);
    let again = observe(kc, name);
    let (cause, text) = explain_live(kc, "vmi", name);
    if !matches!(again, Real::Unschedulable(_)) || !agrees(real, &cause) {
        bad.push(format!(
            "{name}: {s:?}\n  after the CR edit under the waiting launcher: real {again:?}, gpuwl {cause}: {text}"
        ));
    }
}

/// Deletes VMI (or VM) `name` and waits until no launcher pod is left.
fn delete(kc: &str, s: &Scenario, name: &str) {
    let kind = if s.kinds.vm { "vm" } else { "vmi" };
    ok(
        kc,
        &["delete", kind, name, "--wait=true", "--timeout=60s"],
        "",
    );
    // Its launcher pod gone too: the next scenario's units are all free.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok(
        kc,
        &[
            "get",
            "pods",
            "-l",
            "kubevirt.io=virt-launcher",
            "-o",
            "name",
        ],
        "",
    )
    .trim()
    .is_empty()
    {
        assert!(Instant::now() < deadline, "launcher pod of {name} not gone");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
#[ignore = "needs local control plane"]
fn explain_vmi_agrees_with_kubevirt_on_random_scenarios() {
    let _one = one_cluster_at_a_time();
    let _down = ClusterDown(CLUSTER);
    gpuwl_ok(&[
        "cluster",
        "up",
        "--name",
        CLUSTER,
        "-q",
        "--nodes",
        "3",
        "--kubevirt",
        "--fresh",
    ]);
    let kc = gpuwl_ok(&["cluster", "kubeconfig", "--name", CLUSTER]);
    let kc = kc.trim();
    let n: usize = std::env::var("GPUWL_KV_DIFF_SCENARIOS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CI_SCENARIOS);
    let seed: u64 = std::env::var("GPUWL_KV_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(37);
    let mut rng = Rng(seed);
    let mut rng_needs = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
    let mut rng_kinds = Rng(seed ^ 0xD1B5_4A32_D192_ED03);
    let mut bad = Vec::new();
    let mut tally = std::collections::BTreeMap::new();
    let mut check_claims = 0;
    let mut inventory_checked = (false, false);
    let mut launchers_compared = 0;
    for i in 0..n {
        let mut s = generate(&mut rng);
        s.launcher_needs = needs(&mut rng_needs);
        s.kinds = kinds(&mut rng_kinds, s.permitted.as_ref().map_or(0, Vec::len));
        if s.kinds.reach {
            let node = rng_kinds.below(NODES.len() as u64) as usize;
            reach(&mut s, node);
        }
        let name = format!("d{i}");
        apply(kc, &s);
        let (real, _) = create_and_observe(kc, &s, &name, &mut bad, &mut tally);
        let (cause, text) = explain_live(kc, "vmi", &name);
        let kind = match &real {
            Real::Refused(_) => "refused",
            Real::Placed(_) => "placed",
            Real::Unschedulable(_) => "unschedulable",
        };
        *tally.entry(format!("{kind}/{cause}")).or_insert(0) += 1;
        if !agrees(&real, &cause) {
            bad.push(format!(
                "{name}: {s:?}\n  real {real:?}\n  gpuwl {cause}: {text}"
            ));
        }
        if s.kinds.vm {
            let (vm_cause, vm_text) = explain_live(kc, "vm", &name);
            if !agrees(&real, &vm_cause) {
                bad.push(format!(
                    "{name}: {s:?}\n  real {real:?}\n  explain vm {vm_cause}: {vm_text}"
                ));
            }
        }
        // inventory (one more live read) for every VMI in a bench run; in the suite for
        // the first refused one and the first left Pending (the suite's time budget).
        let refused = matches!(real, Real::Refused(_));
        let waiting = matches!(real, Real::Unschedulable(_));
        let first = (refused && !inventory_checked.0) || (waiting && !inventory_checked.1);
        if (n > CI_SCENARIOS || first)
            && let Some(w) = inventory_disagrees(kc, &name, &real, &cause)
        {
            bad.push(format!("{name}: {s:?}\n  real {real:?}\n  {w}"));
        }
        if n > CI_SCENARIOS
            && let Some(w) = plan_disagrees(kc, &name, &real, &cause)
        {
            bad.push(format!("{name}: {s:?}\n  real {real:?}\n  {w}"));
        }
        inventory_checked.0 |= refused;
        inventory_checked.1 |= waiting;
        if !refused {
            launchers_compared += 1;
            if let Some(w) = launcher_disagrees(kc, &name) {
                bad.push(format!("{name}: {s:?}\n  {w}"));
            }
        }
        let findings = check_findings(kc);
        let (wrong, tested) = check_disagreements(&s, &real, &findings);
        check_claims += tested;
        for w in wrong {
            bad.push(format!(
                "{name}: {s:?}\n  kubevirt check: {w}\n  findings {findings:?}"
            ));
        }
        if waiting && s.kinds.edit_under_waiting {
            *tally.entry("cr-edited-under-waiting".into()).or_insert(0) += 1;
            edit_under_waiting(kc, &s, &name, &real, &mut bad);
        }
        delete(kc, &s, &name);
    }
    eprintln!(
        "kubevirt differential: {n} scenarios, seed {seed}: {tally:?}; kubevirt check claims tested: {check_claims}; launchers compared with the model: {launchers_compared}"
    );
    // The bench script's line (bench/differential-kubevirt.sh).
    eprintln!(
        "DIFF-KV seed={seed} scenarios={n} disagreements={} launchers={launchers_compared} check-claims={check_claims}",
        bad.len()
    );
    assert!(
        bad.is_empty(),
        "{} disagreements over {n} scenarios:\n{}",
        bad.len(),
        bad.join("\n")
    );
}
