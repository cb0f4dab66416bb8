//! The dump generator shared by `gendump` (bench/gendump.rs) and the criterion benches
//! (bench/criterion_check.rs): realistic, deterministic `kubectl get nodes -o json` /
//! `kubectl get pods -A -o json` dumps for the benchmarks.
//!
//! ```text
//! cargo run --release --example gendump -- --nodes 5000 [--pods 20000] [--seed 1]
//!     [--mismatch-pct 2] [--out nodes.json] [--pods-out pods.json] [--compact]
//! ```
//!
//! Nodes are spread over the three pools and unlabelled CPU nodes (30 % container,
//! 20 % vm-passthrough, 20 % vm-vgpu, 5 % unlabelled GPU nodes, 25 % CPU-only), with
//! kubelet / NFD / GFD-like labels, annotations, conditions, addresses, nodeInfo and 30-60
//! images each, so one node is 5-20 KB of pretty JSON (kubectl indents by 4). A share of
//! the labelled nodes (`--mismatch-pct`) mismatches in one of three ways: wrong-class
//! resource, invalid label value, or only a stale `"0"`. Pods are bound by
//! `spec.nodeName` to GPU nodes, request the node's GPU resource, and carry
//! kubelet-like status. The same seed always gives the same bytes.
//!
//! On stderr: the number of nodes, labelled nodes and planted mismatches (so a run can
//! check the checker's output).

use std::io::{self, Write};

use serde_json::{Value, json};

/// xorshift64*: small, deterministic, good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pct(&mut self, p: f64) -> bool {
        (self.below(1_000_000) as f64) < p * 10_000.0
    }
    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len() as u64) as usize]
    }
    fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        while s.len() < n {
            s.push_str(&format!("{:016x}", self.next()));
        }
        s.truncate(n);
        s
    }
    fn uid(&mut self) -> String {
        let h = self.hex(32);
        format!(
            "{}-{}-{}-{}-{}",
            &h[0..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..32]
        )
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Pool {
    Container,
    Passthrough,
    Vgpu,
    UnlabelledGpu,
    Cpu,
}

struct Board {
    product: &'static str,
    passthrough: &'static str,
    vgpu: &'static str,
    memory_mib: u32,
    family: &'static str,
    count: u32,
}

const BOARDS: [Board; 4] = [
    Board {
        product: "NVIDIA-A10",
        passthrough: "GA102GL_A10",
        vgpu: "NVIDIA_A10-12Q",
        memory_mib: 23028,
        family: "ampere",
        count: 4,
    },
    Board {
        product: "NVIDIA-A100-PCIE-40GB",
        passthrough: "GA100_A100_PCIE_40GB",
        vgpu: "NVIDIA_A100-4C",
        memory_mib: 40960,
        family: "ampere",
        count: 8,
    },
    Board {
        product: "Tesla-T4",
        passthrough: "TU104GL_TESLA_T4",
        vgpu: "GRID_T4-2Q",
        memory_mib: 15360,
        family: "turing",
        count: 4,
    },
    Board {
        product: "NVIDIA-H100-PCIe",
        passthrough: "GH100_H100_PCIE",
        vgpu: "NVIDIA_H100-80C",
        memory_mib: 81559,
        family: "hopper",
        count: 8,
    },
];

const REGISTRIES: [&str; 6] = [
    "nvcr.io/nvidia",
    "nvcr.io/nvidia/cloud-native",
    "nvcr.io/nvidia/k8s",
    "registry.k8s.io",
    "quay.io/prometheus",
    "docker.io/library",
];
const IMAGES: [&str; 24] = [
    "gpu-operator",
    "k8s-device-plugin",
    "gpu-feature-discovery",
    "dcgm-exporter",
    "driver",
    "container-toolkit",
    "kubevirt-gpu-device-plugin",
    "vgpu-device-manager",
    "k8s-driver-manager",
    "cuda",
    "pytorch",
    "tritonserver",
    "nemo",
    "kube-proxy",
    "pause",
    "coredns",
    "node-exporter",
    "fluent-bit",
    "calico-node",
    "virt-launcher",
    "virt-handler",
    "nginx",
    "busybox",
    "nfd-worker",
];

pub struct Gen {
    rng: Rng,
    mismatch_pct: f64,
    /// Scale mode ([`generate_scale`]): ~20 % GPU nodes instead of 75 %.
    scale: bool,
    /// Labelled nodes generated so far.
    pub labelled: usize,
    /// Planted mismatches so far.
    pub mismatches: usize,
}

pub struct NodeOut {
    pub value: Value,
    name: String,
    gpu_resource: Option<String>,
    gpus: u32,
}

impl Gen {
    /// A generator with `seed`; `mismatch_pct` percent of labelled nodes mismatch.
    pub fn new(seed: u64, mismatch_pct: f64) -> Gen {
        Gen {
            rng: Rng::new(seed),
            mismatch_pct,
            scale: false,
            labelled: 0,
            mismatches: 0,
        }
    }

    fn pool(&mut self) -> Pool {
        if self.scale {
            // ~20 % GPU nodes, as in a large mixed cluster
            return match self.rng.below(100) {
                0..8 => Pool::Container,
                8..13 => Pool::Passthrough,
                13..18 => Pool::Vgpu,
                18..20 => Pool::UnlabelledGpu,
                _ => Pool::Cpu,
            };
        }
        match self.rng.below(100) {
            0..30 => Pool::Container,
            30..50 => Pool::Passthrough,
            50..70 => Pool::Vgpu,
            70..75 => Pool::UnlabelledGpu,
            _ => Pool::Cpu,
        }
    }

    pub fn node(&mut self, i: usize) -> NodeOut {
        let pool = self.pool();
        let r = &mut self.rng;
        let zone = format!("us-east-1{}", *r.pick(&["a", "b", "c", "d"]));
        let name = format!("gpu-node-{i:06}.{zone}.compute.internal");
        let board = r.pick(&BOARDS);
        let ip = format!("10.{}.{}.{}", i >> 16 & 255, i >> 8 & 255, i & 255);
        let created = format!(
            "2026-0{}-1{}T0{}:1{}:2{}Z",
            1 + i % 9,
            i % 10,
            i % 10,
            i % 6,
            i % 10
        );

        let mut labels = serde_json::Map::new();
        let mut put = |k: &str, v: String| {
            labels.insert(k.to_string(), Value::String(v));
        };
        put("beta.kubernetes.io/arch", "amd64".into());
        put("beta.kubernetes.io/os", "linux".into());
        put("kubernetes.io/arch", "amd64".into());
        put("kubernetes.io/hostname", name.clone());
        put("kubernetes.io/os", "linux".into());
        put(
            "node.kubernetes.io/instance-type",
            (*r.pick(&[
                "g5.12xlarge",
                "p4d.24xlarge",
                "g4dn.12xlarge",
                "p5.48xlarge",
                "m6i.8xlarge",
            ]))
            .into(),
        );
        put("topology.kubernetes.io/region", "us-east-1".into());
        put("topology.kubernetes.io/zone", zone.clone());
        put("node-role.kubernetes.io/worker", String::new());
        for (k, v) in [
            ("cpu-cpuid.AVX512F", "true"),
            ("cpu-cpuid.AVX2", "true"),
            ("cpu-cpuid.AESNI", "true"),
            ("cpu-hardware_multithreading", "true"),
            ("cpu-model.family", "6"),
            ("cpu-model.vendor_id", "Intel"),
            ("kernel-version.full", "5.15.0-1051-aws"),
            ("kernel-version.major", "5"),
            (
                "pci-10de.present",
                if pool == Pool::Cpu { "false" } else { "true" },
            ),
            ("system-os_release.ID", "ubuntu"),
            ("system-os_release.VERSION_ID", "22.04"),
            ("storage-nonrotationaldisk", "true"),
        ] {
            put(&format!("feature.node.kubernetes.io/{k}"), v.into());
        }

        let mut label_value: Option<String> = match pool {
            Pool::Container => Some("container".into()),
            Pool::Passthrough => Some("vm-passthrough".into()),
            Pool::Vgpu => Some("vm-vgpu".into()),
            _ => None,
        };
        let mut gpu_resource = match pool {
            Pool::Container | Pool::UnlabelledGpu => Some("gpu".to_string()),
            Pool::Passthrough => Some(board.passthrough.to_string()),
            Pool::Vgpu => Some(board.vgpu.to_string()),
            Pool::Cpu => None,
        };
        let mut gpus = match pool {
            Pool::Vgpu => board.count * 2,
            Pool::Cpu => 0,
            _ => board.count,
        };
        let mut stale_zero: Option<String> = None;
        if label_value.is_some() {
            self.labelled += 1;
            if r.pct(self.mismatch_pct) {
                self.mismatches += 1;
                match r.below(3) {
                    // wrong class: labelled vm-vgpu, still advertising passthrough
                    0 => {
                        label_value = Some(
                            if pool == Pool::Vgpu {
                                "vm-passthrough"
                            } else {
                                "vm-vgpu"
                            }
                            .into(),
                        );
                        if pool == Pool::Container {
                            label_value = Some("vm-vgpu".into());
                        }
                    }
                    // typo in the label value
                    1 => {
                        label_value = Some(
                            (*r.pick(&["vm_passthrough", "vm-passthru", "VM-vGPU", "containers"]))
                                .into(),
                        )
                    }
                    // relabelled, plugin gone: only a stale zero
                    _ => {
                        stale_zero = gpu_resource.take();
                        gpus = 0;
                    }
                }
            }
        }
        if let Some(v) = &label_value {
            put("nvidia.com/gpu.workload.config", v.clone());
        }
        if pool != Pool::Cpu {
            put("nvidia.com/gpu.present", "true".into());
            put("nvidia.com/gpu.product", board.product.into());
            put("nvidia.com/gpu.count", board.count.to_string());
            put("nvidia.com/gpu.memory", board.memory_mib.to_string());
            put("nvidia.com/gpu.family", board.family.into());
            put("nvidia.com/gpu.machine", "g5.12xlarge".into());
            put("nvidia.com/cuda.driver.major", "550".into());
            put("nvidia.com/cuda.driver.minor", "90".into());
            put("nvidia.com/cuda.driver.rev", "07".into());
            put("nvidia.com/cuda.runtime.major", "12".into());
            put("nvidia.com/cuda.runtime.minor", "4".into());
            put("nvidia.com/gfd.timestamp", format!("17{:08}", i));
            put("nvidia.com/mig.capable", "false".into());
            put("nvidia.com/gpu.compute.major", "8".into());
            put("nvidia.com/gpu.compute.minor", "6".into());
            for d in [
                "driver",
                "gpu-feature-discovery",
                "container-toolkit",
                "device-plugin",
                "dcgm",
                "dcgm-exporter",
                "node-status-exporter",
                "operator-validator",
                "sandbox-device-plugin",
                "sandbox-validator",
                "vgpu-manager",
                "vfio-manager",
            ] {
                put(&format!("nvidia.com/gpu.deploy.{d}"), "true".into());
            }
        }

        let mut cap = serde_json::Map::new();
        let cpus = *r.pick(&[48u32, 64, 96, 192]);
        let mem_ki = cpus as u64 * 8 * 1024 * 1024 + r.below(100_000);
        cap.insert("cpu".into(), json!(cpus.to_string()));
        cap.insert("ephemeral-storage".into(), json!("1073216492Ki"));
        cap.insert("hugepages-1Gi".into(), json!("0"));
        cap.insert("hugepages-2Mi".into(), json!("0"));
        cap.insert("memory".into(), json!(format!("{mem_ki}Ki")));
        cap.insert("pods".into(), json!("110"));
        if let Some(g) = &gpu_resource {
            cap.insert(format!("nvidia.com/{g}"), json!(gpus.to_string()));
        }
        if let Some(z) = &stale_zero {
            cap.insert(format!("nvidia.com/{z}"), json!("0"));
        }
        if pool != Pool::Cpu && r.pct(20.0) {
            cap.insert("nvidia.com/rdma_shared_device_a".into(), json!("63"));
        }
        let mut alloc = cap.clone();
        alloc.insert("cpu".into(), json!(format!("{}m", cpus * 1000 - 100)));
        alloc.insert("ephemeral-storage".into(), json!("989057438603"));
        alloc.insert("memory".into(), json!(format!("{}Ki", mem_ki - 614400)));

        let mut taints = vec![];
        if pool != Pool::Cpu {
            taints
                .push(json!({"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}));
        }

        let conditions: Vec<Value> = [
            (
                "MemoryPressure",
                "False",
                "KubeletHasSufficientMemory",
                "kubelet has sufficient memory available",
            ),
            (
                "DiskPressure",
                "False",
                "KubeletHasNoDiskPressure",
                "kubelet has no disk pressure",
            ),
            (
                "PIDPressure",
                "False",
                "KubeletHasSufficientPID",
                "kubelet has sufficient PID available",
            ),
            (
                "Ready",
                "True",
                "KubeletReady",
                "kubelet is posting ready status. AppArmor enabled",
            ),
        ]
        .iter()
        .map(|(t, s, reason, msg)| {
            json!({"lastHeartbeatTime": "2026-11-29T10:00:00Z", "lastTransitionTime": created,
                   "message": msg, "reason": reason, "status": s, "type": t})
        })
        .collect();

        let n_images = 30 + r.below(31) as usize;
        let images: Vec<Value> = (0..n_images)
            .map(|_| {
                let reg = r.pick(&REGISTRIES);
                let img = r.pick(&IMAGES);
                let tag = format!("v{}.{}.{}", r.below(30), r.below(20), r.below(10));
                let digest = format!("{reg}/{img}@sha256:{}", r.hex(64));
                // a third were pulled by digest only and list no tag
                let names = if r.pct(33.0) {
                    vec![digest]
                } else {
                    vec![digest, format!("{reg}/{img}:{tag}")]
                };
                json!({"names": names, "sizeBytes": 1_000_000 + r.below(9_000_000_000)})
            })
            .collect();

        let value = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "annotations": {
                    "alpha.kubernetes.io/provided-node-ip": ip,
                    "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{}\"}}", r.hex(17)),
                    "node.alpha.kubernetes.io/ttl": "0",
                    "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AESNI,cpu-cpuid.AVX2,cpu-cpuid.AVX512F,cpu-hardware_multithreading,cpu-model.family,cpu-model.vendor_id,kernel-version.full,kernel-version.major,pci-10de.present,storage-nonrotationaldisk,system-os_release.ID,system-os_release.VERSION_ID",
                    "nvidia.com/gpu-driver-upgrade-enabled": "true",
                    "volumes.kubernetes.io/controller-managed-attach-detach": "true"
                },
                "creationTimestamp": created,
                "labels": labels,
                "name": name,
                "resourceVersion": (1_000_000 + r.below(9_000_000)).to_string(),
                "uid": r.uid()
            },
            "spec": {
                "podCIDR": format!("100.{}.{}.0/24", i >> 8 & 255, i & 255),
                "podCIDRs": [format!("100.{}.{}.0/24", i >> 8 & 255, i & 255)],
                "providerID": format!("aws:///{zone}/i-{}", r.hex(17)),
                "taints": taints
            },
            "status": {
                "addresses": [
                    {"address": ip, "type": "InternalIP"},
                    {"address": name, "type": "InternalDNS"},
                    {"address": name, "type": "Hostname"}
                ],
                "allocatable": alloc,
                "capacity": cap,
                "conditions": conditions,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "images": images,
                "nodeInfo": {
                    "architecture": "amd64",
                    "bootID": r.uid(),
                    "containerRuntimeVersion": "containerd://1.7.22",
                    "kernelVersion": "5.15.0-1051-aws",
                    "kubeProxyVersion": "v1.33.4",
                    "kubeletVersion": "v1.33.4",
                    "machineID": r.hex(32),
                    "operatingSystem": "linux",
                    "osImage": "Ubuntu 22.04.4 LTS",
                    "systemUUID": r.uid()
                }
            }
        });
        NodeOut {
            value,
            name,
            gpu_resource,
            gpus,
        }
    }

    pub fn pod(&mut self, i: usize, node: &NodeOut) -> Value {
        let r = &mut self.rng;
        let ns = format!("team-{}", i % 4);
        let name = format!("train-{i:06}-{}", r.hex(5));
        let mut limits = serde_json::Map::new();
        limits.insert("cpu".into(), json!("4"));
        limits.insert("memory".into(), json!("16Gi"));
        if let Some(g) = &node.gpu_resource {
            limits.insert(format!("nvidia.com/{g}"), json!("1"));
        }
        let image = format!("nvcr.io/nvidia/pytorch:24.{:02}-py3", 1 + r.below(12));
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "creationTimestamp": "2026-11-29T09:00:00Z",
                "generateName": "train-",
                "labels": {"app": "train", "team": ns, "batch.kubernetes.io/job-name": format!("train-{}", i / 8)},
                "name": name,
                "namespace": ns,
                "resourceVersion": (1_000_000 + r.below(9_000_000)).to_string(),
                "uid": r.uid()
            },
            "spec": {
                "containers": [{
                    "args": ["--epochs", "10", "--data", "/data"],
                    "command": ["python", "train.py"],
                    "env": [{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "OMP_NUM_THREADS", "value": "4"}],
                    "image": image,
                    "imagePullPolicy": "IfNotPresent",
                    "name": "train",
                    "resources": {"limits": limits.clone(), "requests": limits},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                    "volumeMounts": [{"mountPath": "/data", "name": "data"}]
                }],
                "dnsPolicy": "ClusterFirst",
                "enableServiceLinks": true,
                "nodeName": node.name,
                "preemptionPolicy": "PreemptLowerPriority",
                "priority": 0,
                "restartPolicy": "Never",
                "schedulerName": "default-scheduler",
                "securityContext": {},
                "serviceAccountName": "default",
                "terminationGracePeriodSeconds": 30,
                "tolerations": [
                    {"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                    {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                    {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}
                ],
                "volumes": [{"emptyDir": {}, "name": "data"}]
            },
            "status": {
                "conditions": [
                    {"lastTransitionTime": "2026-11-29T09:00:01Z", "status": "True", "type": "PodScheduled"},
                    {"lastTransitionTime": "2026-11-29T09:00:05Z", "status": "True", "type": "Ready"}
                ],
                "hostIP": "10.0.0.1",
                "phase": "Running",
                "podIP": format!("100.64.{}.{}", i >> 8 & 255, i & 255),
                "qosClass": "Guaranteed",
                "startTime": "2026-11-29T09:00:01Z"
            }
        })
    }
}

/// Writes a kubectl-style `{"apiVersion":"v1","items":[...],"kind":"List",...}` one item
/// at a time, pretty with 4 spaces as kubectl prints, or compact.
pub struct ListWriter<W: Write> {
    w: W,
    first: bool,
    compact: bool,
}

impl<W: Write> ListWriter<W> {
    pub fn new(mut w: W, compact: bool) -> io::Result<Self> {
        w.write_all(if compact {
            b"{\"apiVersion\":\"v1\",\"items\":["
        } else {
            b"{\n    \"apiVersion\": \"v1\",\n    \"items\": ["
        })?;
        Ok(ListWriter {
            w,
            first: true,
            compact,
        })
    }
    pub fn item(&mut self, v: &Value) -> io::Result<()> {
        if !self.first {
            self.w.write_all(b",")?;
        }
        self.first = false;
        if self.compact {
            serde_json::to_writer(&mut self.w, v)?;
        } else {
            self.w.write_all(b"\n        ")?;
            let mut buf = Vec::with_capacity(16 * 1024);
            let fmt = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
            serde::Serialize::serialize(v, &mut ser)?;
            // indent the item by two levels, as it sits inside items[]
            for (k, line) in buf.split(|&c| c == b'\n').enumerate() {
                if k > 0 {
                    self.w.write_all(b"\n        ")?;
                }
                self.w.write_all(line)?;
            }
        }
        Ok(())
    }
    pub fn finish(mut self) -> io::Result<()> {
        self.w.write_all(if self.compact {
            b"],\"kind\":\"List\",\"metadata\":{\"resourceVersion\":\"\"}}\n"
        } else {
            b"\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {\n        \"resourceVersion\": \"\"\n    }\n}\n"
        })?;
        self.w.flush()
    }
}

/// Writes a node dump of `nodes` nodes (and, when `pods` is given, `n` pods spread over
/// them) and returns the generator for its counters.
pub fn generate(
    nodes: usize,
    seed: u64,
    mismatch_pct: f64,
    compact: bool,
    out: impl Write,
    pods: Option<(usize, Box<dyn Write>)>,
) -> io::Result<(Gen, usize)> {
    let mut g = Gen::new(seed, mismatch_pct);
    let mut nw = ListWriter::new(out, compact)?;
    let (npods, mut pw) = match pods {
        Some((n, w)) if n > 0 => (n, Some(ListWriter::new(w, compact)?)),
        _ => (0, None),
    };
    let mut pods_written = 0usize;
    for i in 0..nodes {
        let n = g.node(i);
        nw.item(&n.value)?;
        if let Some(pw) = pw.as_mut() {
            // spread evenly: after node i, ~ npods * (i+1) / nodes pods are placed
            let want = npods * (i + 1) / nodes;
            while pods_written < want {
                let p = g.pod(pods_written, &n);
                pw.item(&p)?;
                pods_written += 1;
            }
        }
    }
    nw.finish()?;
    if let Some(pw) = pw {
        pw.finish()?;
    }
    Ok((g, pods_written))
}

/// The four classes of pending GPU pod in scale mode: (name tag, resource, pool label).
const PENDING: [(&str, &str, &str); 4] = [
    ("gpu", "nvidia.com/gpu", "container"),
    ("mig", "nvidia.com/mig-1g.10gb", "container"),
    (
        "passthrough",
        "nvidia.com/GA100_A100_PCIE_40GB",
        "vm-passthrough",
    ),
    ("vgpu", "nvidia.com/NVIDIA_A100-4C", "vm-vgpu"),
];

impl Gen {
    /// Scale-mode touches on a generated node: container nodes with A100/H100 boards are
    /// MIG-partitioned a third of the time (`nvidia.com/mig-1g.10gb`, 7 slices per GPU,
    /// the NVIDIA device plugin's mixed strategy), 2 % of nodes are cordoned
    /// (`spec.unschedulable` and its taint), 5 % carry a `dedicated` team taint.
    fn scale_node(&mut self, n: &mut NodeOut) {
        let r = &mut self.rng;
        let v = &mut n.value;
        let is_big = matches!(
            v["metadata"]["labels"]["nvidia.com/gpu.product"].as_str(),
            Some("NVIDIA-A100-PCIE-40GB" | "NVIDIA-H100-PCIe")
        );
        if n.gpu_resource.as_deref() == Some("gpu")
            && v["metadata"]["labels"]
                .get("nvidia.com/gpu.workload.config")
                .is_some()
            && is_big
            && r.pct(33.0)
        {
            let slices = n.gpus * 7;
            for k in ["capacity", "allocatable"] {
                let m = v["status"][k].as_object_mut().expect("map");
                m.remove("nvidia.com/gpu");
                m.insert("nvidia.com/mig-1g.10gb".into(), json!(slices.to_string()));
            }
            let l = v["metadata"]["labels"].as_object_mut().expect("labels");
            l.insert("nvidia.com/mig.capable".into(), json!("true"));
            l.insert("nvidia.com/mig.strategy".into(), json!("mixed"));
            l.insert("nvidia.com/mig.config".into(), json!("all-1g.10gb"));
            l.insert("nvidia.com/mig.config.state".into(), json!("success"));
            n.gpu_resource = Some("mig-1g.10gb".into());
            n.gpus = slices;
        }
        let taints = v["spec"]["taints"].as_array_mut().expect("taints");
        if r.pct(5.0) {
            let team = format!("team-{}", r.below(8));
            taints.push(json!({"effect": "NoSchedule", "key": "dedicated", "value": team}));
        }
        if r.pct(2.0) {
            taints.push(json!({"effect": "NoSchedule", "key": "node.kubernetes.io/unschedulable", "timeAdded": "2026-11-29T08:00:00Z"}));
            v["spec"]["unschedulable"] = json!(true);
        }
    }

    /// A small pod bound to `node` (kube-proxy, log shippers, services): CPU and memory
    /// only, tolerating the GPU taint.
    fn cpu_pod(&mut self, i: usize, node: &str) -> Value {
        let r = &mut self.rng;
        let ns = format!("svc-{}", i % 16);
        let cpu = format!("{}m", 50 + 50 * r.below(20));
        let mem = format!("{}Mi", 64 * (1 + r.below(32)));
        let app = *r.pick(&["api", "web", "cache", "log-shipper", "exporter", "worker"]);
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{app}-{i:07}-{}", r.hex(5)), "namespace": ns,
                         "labels": {"app": app}},
            "spec": {
                "containers": [{"name": app, "image": format!("registry.k8s.io/{app}:v1.{}", r.below(30)),
                    "resources": {"requests": {"cpu": cpu, "memory": mem}, "limits": {"memory": mem}}}],
                "nodeName": node,
                "restartPolicy": "Always",
                "terminationGracePeriodSeconds": 30,
                "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"},
                                {"operator": "Exists", "key": "dedicated"}]
            }
        })
    }

    /// A pending GPU pod (no `nodeName`) of class `k % 4` ([`PENDING`]): asks for 64 of
    /// its resource with a nodeSelector on its pool, more than any generated node has, so
    /// kube-scheduler leaves it Pending (Insufficient).
    fn pending_pod(&mut self, i: usize, k: usize) -> Value {
        let (tag, res, pool) = PENDING[k % PENDING.len()];
        let r = &mut self.rng;
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("pending-{tag}-{i:07}-{}", r.hex(5)), "namespace": "gpu-queue",
                         "labels": {"app": "pending", "class": tag}},
            "spec": {
                "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:24.10-py3",
                    "resources": {"requests": {"cpu": "8", "memory": "32Gi", res: "64"},
                                  "limits": {res: "64"}}}],
                "nodeSelector": {"nvidia.com/gpu.workload.config": pool},
                "restartPolicy": "Never",
                "tolerations": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
            }
        })
    }
}

/// Scale mode of `gendump` (bench/scale.sh): `nodes` nodes with ~20 % GPU nodes
/// ([`Gen::scale_node`]'s MIG, cordons and taints on top) and `per_node` pods for each
/// node: GPU holders (one unit each, every unit on 70 % of GPU nodes, half on the rest)
/// and small CPU pods bound by `spec.nodeName`; every tenth node gives one of its pods'
/// places to a pending GPU pod of the next class ([`PENDING`]). Only nodes `from..nodes`
/// and their pods are written, but all are generated, so the files of `--from-node 0
/// --nodes 500` and `--from-node 500 --nodes 1000` together equal those of `--nodes
/// 1000`: a cluster can be grown in steps. Returns (generator, pods written, pending
/// written).
pub fn generate_scale(
    nodes: usize,
    from: usize,
    per_node: usize,
    seed: u64,
    out: impl Write,
    pods_out: impl Write,
) -> io::Result<(Gen, usize, usize)> {
    let mut g = Gen::new(seed, 2.0);
    g.scale = true;
    let mut nw = ListWriter::new(out, true)?;
    let mut pw = ListWriter::new(pods_out, true)?;
    let (mut written, mut pending, mut next) = (0usize, 0usize, 0usize);
    for i in 0..nodes {
        let mut n = g.node(i);
        g.scale_node(&mut n);
        let keep = i >= from;
        if keep {
            nw.item(&n.value)?;
        }
        let mut places = per_node;
        if i % 10 == 9 && places > 0 {
            let p = g.pending_pod(next, i / 10);
            next += 1;
            places -= 1;
            if keep {
                pw.item(&p)?;
                pending += 1;
            }
        }
        let holders = if n.gpu_resource.is_some() {
            let full = g.rng.pct(70.0);
            (if full { n.gpus } else { n.gpus / 2 } as usize).min(places)
        } else {
            0
        };
        for _ in 0..holders {
            let p = g.pod(next, &n);
            next += 1;
            if keep {
                pw.item(&p)?;
                written += 1;
            }
        }
        for _ in holders..places {
            let p = g.cpu_pod(next, &n.name);
            next += 1;
            if keep {
                pw.item(&p)?;
                written += 1;
            }
        }
    }
    nw.finish()?;
    pw.finish()?;
    Ok((g, written + pending, pending))
}
