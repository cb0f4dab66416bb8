//! Writes a synthetic GPU Operator must-gather bundle of N nodes, shaped as
//! `hack/must-gather.sh` writes it (NVIDIA/gpu-operator): `gpu_nodes.descr` as `kubectl
//! describe nodes` text, `gpu_operand_pods.yaml` (four operand pods per node, whole pods as
//! `kubectl get pods -oyaml` prints them: env, volumes, probes, statuses),
//! `gpu_operand_ds.yaml`, `cluster_policy.yaml`, one log per pod, `gpu_nodes.labels`.
//! Every 50th node's device plugin crash-loops (so the report has work to do).
//!
//!   cargo run --release --example genbundle -- N OUT_DIR

use std::fmt::Write as _;
use std::io::Write;

const DS: [(&str, &str); 4] = [
    ("nvidia-device-plugin-daemonset", "device-plugin"),
    ("gpu-feature-discovery", "gpu-feature-discovery"),
    ("nvidia-container-toolkit-daemonset", "container-toolkit"),
    ("nvidia-dcgm-exporter", "dcgm-exporter"),
];

fn main() -> std::io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args.get(1).and_then(|s| s.parse().ok()).expect("N");
    let out = std::path::PathBuf::from(args.get(2).expect("OUT_DIR"));
    std::fs::create_dir_all(&out)?;
    let mut descr = std::io::BufWriter::new(std::fs::File::create(out.join("gpu_nodes.descr"))?);
    let mut labels = std::io::BufWriter::new(std::fs::File::create(out.join("gpu_nodes.labels"))?);
    let mut pods =
        std::io::BufWriter::new(std::fs::File::create(out.join("gpu_operand_pods.yaml"))?);
    writeln!(pods, "apiVersion: v1\nitems:")?;
    for i in 0..n {
        let node = format!("gpu-node-{i:05}");
        let crash = i % 50 == 7;
        writeln!(
            labels,
            "{node}\n- nvidia.com/gpu.present=true\n- nvidia.com/gpu.workload.config=container\n"
        )?;
        write!(
            descr,
            "Name:               {node}\nRoles:              <none>\nLabels:             beta.kubernetes.io/arch=amd64\n                    feature.node.kubernetes.io/pci-10de.present=true\n                    kubernetes.io/hostname={node}\n                    nvidia.com/gpu.count=8\n                    nvidia.com/gpu.deploy.device-plugin=true\n                    nvidia.com/gpu.deploy.operands=true\n                    nvidia.com/gpu.present=true\n                    nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3\n                    nvidia.com/gpu.workload.config=container\nAnnotations:        nfd.node.kubernetes.io/feature-labels: pci-10de.present\n                    node.alpha.kubernetes.io/ttl: 0\nCreationTimestamp:  Mon, 01 Dec 2025 10:00:00 +0000\nTaints:             nvidia.com/gpu=present:NoSchedule\nUnschedulable:      false\nConditions:\n  Type             Status  LastHeartbeatTime                 LastTransitionTime                Reason                       Message\n  ----             ------  -----------------                 ------------------                ------                       -------\n  Ready            True    Mon, 01 Dec 2025 12:00:00 +0000   Mon, 01 Dec 2025 10:00:00 +0000   KubeletReady                 kubelet is posting ready status\nAddresses:\n  InternalIP:  10.0.{}.{}\n  Hostname:    {node}\nCapacity:\n  cpu:                224\n  ephemeral-storage:  3748905484Ki\n  hugepages-1Gi:      0\n  memory:             2113389192Ki\n  nvidia.com/gpu:     8\n  pods:               110\nAllocatable:\n  cpu:                223\n  ephemeral-storage:  3454991271420\n  hugepages-1Gi:      0\n  memory:             2102801032Ki\n  nvidia.com/gpu:     8\n  pods:               110\nSystem Info:\n  Machine ID:                 {i:032x}\n  Kernel Version:             6.8.0-49-generic\n  OS Image:                   Ubuntu 24.04.1 LTS\n  Container Runtime Version:  containerd://1.7.24\n  Kubelet Version:            v1.34.2\nNon-terminated Pods:          (5 in total)\n  Namespace     Name          CPU Requests  CPU Limits  Memory Requests  Memory Limits  Age\n  ---------     ----          ------------  ----------  ---------------  -------------  ---\n  gpu-operator  nvidia-device-plugin-daemonset-{i}  0 (0%)  0 (0%)  0 (0%)  0 (0%)  2h\nAllocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n  Resource           Requests     Limits\n  --------           --------     ------\n  cpu                4100m (1%)   8 (3%)\n  memory             8Gi (0%)     16Gi (0%)\n  ephemeral-storage  0 (0%)       0 (0%)\n  nvidia.com/gpu     {}            {}\nEvents:              <none>\n\n\n",
            i / 250,
            i % 250,
            i % 9,
            i % 9
        )?;
        for (ds, comp) in DS {
            let pod = format!("{ds}-{i:05}");
            let bad = crash && comp == "device-plugin";
            let mut p = String::new();
            let _ = write!(
                p,
                "- apiVersion: v1\n  kind: Pod\n  metadata:\n    creationTimestamp: \"2025-12-01T10:00:00Z\"\n    generateName: {ds}-\n    labels:\n      app: {ds}\n      app.kubernetes.io/managed-by: gpu-operator\n      controller-revision-hash: 7c5d9b8f4\n      helm.sh/chart: gpu-operator-v25.3.4\n      pod-template-generation: \"1\"\n    name: {pod}\n    namespace: gpu-operator\n    ownerReferences:\n    - apiVersion: apps/v1\n      blockOwnerDeletion: true\n      controller: true\n      kind: DaemonSet\n      name: {ds}\n      uid: 0b6e2f6a-1d7e-4f0e-9d5c-{i:012}\n    resourceVersion: \"{}\"\n    uid: 5a1f3c2e-0000-4000-8000-{i:012}\n  spec:\n    affinity:\n      nodeAffinity:\n        requiredDuringSchedulingIgnoredDuringExecution:\n          nodeSelectorTerms:\n          - matchFields:\n            - key: metadata.name\n              operator: In\n              values:\n              - {node}\n    containers:\n    - args:\n      - --fail-on-init-error=false\n      command:\n      - /bin/sh\n      - -c\n      env:\n      - name: PASS_DEVICE_SPECS\n        value: \"true\"\n      - name: FAIL_ON_INIT_ERROR\n        value: \"true\"\n      - name: DEVICE_LIST_STRATEGY\n        value: envvar\n      - name: DEVICE_ID_STRATEGY\n        value: uuid\n      - name: NVIDIA_VISIBLE_DEVICES\n        value: all\n      - name: NVIDIA_DRIVER_CAPABILITIES\n        value: all\n      - name: NODE_NAME\n        valueFrom:\n          fieldRef:\n            apiVersion: v1\n            fieldPath: spec.nodeName\n      image: nvcr.io/nvidia/k8s-device-plugin:v0.17.4\n      imagePullPolicy: IfNotPresent\n      name: {comp}\n      resources: {{}}\n      securityContext:\n        privileged: true\n      terminationMessagePath: /dev/termination-log\n      terminationMessagePolicy: File\n      volumeMounts:\n      - mountPath: /var/lib/kubelet/device-plugins\n        name: device-plugin\n      - mountPath: /run/nvidia/validations\n        name: run-nvidia-validations\n      - mountPath: /var/run/secrets/kubernetes.io/serviceaccount\n        name: kube-api-access\n        readOnly: true\n    dnsPolicy: ClusterFirst\n    nodeName: {node}\n    nodeSelector:\n      nvidia.com/gpu.deploy.{comp}: \"true\"\n    priorityClassName: system-node-critical\n    restartPolicy: Always\n    serviceAccountName: nvidia-device-plugin\n    tolerations:\n    - effect: NoSchedule\n      key: nvidia.com/gpu\n      operator: Exists\n    - effect: NoExecute\n      key: node.kubernetes.io/not-ready\n      operator: Exists\n    volumes:\n    - hostPath:\n        path: /var/lib/kubelet/device-plugins\n        type: \"\"\n      name: device-plugin\n    - hostPath:\n        path: /run/nvidia/validations\n        type: DirectoryOrCreate\n      name: run-nvidia-validations\n  status:\n    conditions:\n    - lastTransitionTime: \"2025-12-01T10:00:05Z\"\n      status: \"True\"\n      type: Initialized\n    - lastTransitionTime: \"2025-12-01T10:00:09Z\"\n      status: \"{}\"\n      type: Ready\n    - lastTransitionTime: \"2025-12-01T10:00:00Z\"\n      status: \"True\"\n      type: PodScheduled\n    containerStatuses:\n    - containerID: containerd://{i:064x}\n      image: nvcr.io/nvidia/k8s-device-plugin:v0.17.4\n      imageID: nvcr.io/nvidia/k8s-device-plugin@sha256:{i:064x}\n      name: {comp}\n      ready: {}\n      restartCount: {}\n      started: true\n{}    hostIP: 10.0.{}.{}\n    phase: Running\n    podIP: 10.244.{}.{}\n    qosClass: BestEffort\n    startTime: \"2025-12-01T10:00:00Z\"\n",
                1000 + i,
                if bad { "False" } else { "True" },
                !bad,
                if bad { 12 } else { 0 },
                if bad {
                    "      lastState:\n        terminated:\n          exitCode: 1\n          reason: Error\n      state:\n        waiting:\n          message: back-off 5m0s restarting failed container\n          reason: CrashLoopBackOff\n"
                } else {
                    "      state:\n        running:\n          startedAt: \"2025-12-01T10:00:08Z\"\n"
                },
                i / 250,
                i % 250,
                i / 250,
                i % 250,
            );
            pods.write_all(p.as_bytes())?;
            let mut log = std::io::BufWriter::new(std::fs::File::create(
                out.join(format!("gpu_operand_pod_{pod}.log")),
            )?);
            for k in 0..40 {
                writeln!(
                    log,
                    "[pod/{pod}/{comp}] I1201 10:00:{:02}.000000       1 main.go:{k}] Starting {comp} step {k}",
                    k % 60
                )?;
            }
            if bad {
                writeln!(
                    log,
                    "[pod/{pod}/{comp}] E1201 10:01:00.000000       1 main.go:173] failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND"
                )?;
            }
            std::fs::File::create(out.join(format!("gpu_operand_pod_{pod}.previous.log")))?;
        }
    }
    writeln!(pods, "kind: List\nmetadata:\n  resourceVersion: \"\"")?;
    let mut ds = String::from("apiVersion: v1\nitems:\n");
    for (name, comp) in DS {
        let crashing = if comp == "device-plugin" {
            n.div_ceil(50)
        } else {
            0
        };
        let _ = write!(
            ds,
            "- apiVersion: apps/v1\n  kind: DaemonSet\n  metadata:\n    labels:\n      app: {name}\n    name: {name}\n    namespace: gpu-operator\n  spec:\n    template:\n      spec:\n        nodeSelector:\n          nvidia.com/gpu.deploy.{comp}: \"true\"\n  status:\n    currentNumberScheduled: {n}\n    desiredNumberScheduled: {n}\n    numberAvailable: {}\n    numberMisscheduled: 0\n    numberReady: {}\n    observedGeneration: 1\n    updatedNumberScheduled: {n}\n",
            n - crashing,
            n - crashing
        );
    }
    ds.push_str("kind: List\nmetadata:\n  resourceVersion: \"\"\n");
    std::fs::write(out.join("gpu_operand_ds.yaml"), ds)?;
    std::fs::write(
        out.join("cluster_policy.yaml"),
        "apiVersion: nvidia.com/v1\nkind: ClusterPolicy\nmetadata:\n  name: cluster-policy\nspec:\n  sandboxWorkloads:\n    enabled: true\n    defaultWorkload: container\n",
    )?;
    std::fs::write(
        out.join("gpu_operator_pod.log"),
        "I1201 10:00:00 reconciled\n",
    )?;
    std::fs::write(
        out.join("must-gather.log"),
        "Using ARTIFACT_DIR=/tmp/x\n# All done!\n",
    )?;
    Ok(())
}
