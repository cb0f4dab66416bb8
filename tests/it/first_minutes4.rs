//! Issue 54, "the first ten minutes, round 4": each point fixed as a kind of fault, with
//! the command that showed it. Live ones are `#[ignore = "needs local control plane"]`.

use crate::kit::gpuwl;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn data(f: &str) -> String {
    format!("{ROOT}/tests/data/{f}")
}

/// Item 2: plain check's stdout never says OK when it exits 1, and its stderr note never
/// contradicts a line above it: a labelled node that shows no GPU is a MISMATCH, and the
/// note says why no GPU node was counted instead of claiming there is no workload label.
#[test]
fn check_stdout_and_notes_agree_with_the_exit_code() {
    let lab = data("gate/lab.json");
    let (rc, out, err) = gpuwl(&["check", "--expect-gpu-nodes", "5", &lab]);
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (
            1,
            "FAIL=3 GPU node(s) judged, fewer than --expect-gpu-nodes 5\n",
            ""
        )
    );
    // With a mismatch too, both are said, the FAIL= line last.
    let one = data("check/label-without-gpu.json");
    let (rc, out, err) = gpuwl(&["check", "--expect-gpu-nodes", "1", &one]);
    assert_eq!(rc, 1);
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            "MISMATCH=gpu-7 label vm-passthrough expects a device-model resource, but the node advertises no GPU resource",
            "FAIL=0 GPU node(s) judged, fewer than --expect-gpu-nodes 1",
        ]
    );
    assert!(!err.contains("note:"), "{err}");
    // Without --expect-gpu-nodes: the note names the criterion, not "no workload label".
    let (rc, out, err) = gpuwl(&["check", &one]);
    assert_eq!(rc, 1);
    assert!(out.starts_with("MISMATCH=gpu-7 "), "{out}");
    let note = err.lines().find(|l| l.starts_with("note:")).unwrap();
    assert_eq!(
        note,
        "note: none of the 1 node(s) read is a GPU node (a GPU resource, NFD's or the GPU Operator's GPU labels; a workload label alone is not one): gpuwl check --effective fails on this unless --allow-empty — the wrong cluster or context?"
    );
    assert!(!err.contains("no workload label"), "{err}");
}

/// Item 3: a kubeconfig whose certificate or key file is gone names the field and the file
/// (as kubectl does: `unable to read client-cert …`), for each such field, relative paths
/// resolved against the kubeconfig's folder; with the file there, the next file is named.
#[test]
fn a_kubeconfig_with_a_missing_certificate_file_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let kc = dir.path().join("kubeconfig");
    let d = dir.path().display();
    std::fs::write(
        &kc,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n    certificate-authority: ca.crt\nusers:\n- name: u\n  user:\n    client-certificate: pki/admin.crt\n    client-key: pki/admin.key\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n",
    )
    .unwrap();
    let kcs = kc.to_str().unwrap();
    let run = || gpuwl(&["check", "--kubeconfig", kcs]);
    let (rc, out, err) = run();
    assert_eq!(
        (rc, out.as_str(), err.as_str()),
        (
            2,
            "",
            &*format!(
                "gpuwl: {kcs}: cannot read its certificate-authority file {d}/ca.crt: No such file or directory (os error 2) (restore the file, or put its contents in certificate-authority-data)\n"
            )
        )
    );
    std::fs::write(dir.path().join("ca.crt"), "").unwrap();
    let (rc, _, err) = run();
    assert_eq!(rc, 2);
    assert_eq!(
        err,
        format!(
            "gpuwl: {kcs}: cannot read its client-certificate file {d}/pki/admin.crt: No such file or directory (os error 2) (restore the file, or put its contents in client-certificate-data)\n"
        )
    );
    // Through $KUBECONFIG (inventory) the same file is named, with where the path came from.
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .arg("inventory")
        .env("KUBECONFIG", kcs)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with(&format!(
            "gpuwl: $KUBECONFIG={kcs}: cannot read its client-certificate file {d}/pki/admin.crt: "
        )),
        "{err}"
    );
}

/// Item 4: the lab's `--node` flags name three different nodes, each workload config at
/// most once: a node with two roles (given twice, or given once and a default) and a
/// config given twice are refused first (exit 2, nothing made under --root, no cluster).
#[test]
fn lab_refuses_a_node_with_two_roles() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().join("lab");
    let rs = r.to_str().unwrap();
    for (flags, want) in [
        (
            vec!["--node", "container=lab-node-1"],
            "gpuwl: --node: lab-node-1 is both the container and the vm-passthrough node (--node container=lab-node-1, vm-passthrough (the default)); each workload config needs a node of its own\n",
        ),
        (
            vec![
                "--node",
                "container=lab-node-0",
                "--node",
                "container=lab-node-1",
            ],
            "gpuwl: --node container=lab-node-1: container is given twice (also --node container=lab-node-0); give each workload config once\n",
        ),
        (
            vec![
                "--node",
                "vm-vgpu=gpu-a",
                "--node",
                "vm-passthrough=gpu-a",
                "--context",
                "prod",
            ],
            "gpuwl: --node: gpu-a is both the vm-passthrough and the vm-vgpu node (--node vm-passthrough=gpu-a, --node vm-vgpu=gpu-a); each workload config needs a node of its own\n",
        ),
    ] {
        let mut args = vec!["lab", "--root", rs];
        args.extend(flags);
        let (rc, out, err) = gpuwl(&args);
        assert_eq!((rc, out.as_str(), err.as_str()), (2, "", want));
        assert!(!r.exists(), "{args:?} made --root");
    }
}

/// Item 5: whatif on a node whose GPU model is unknown says the model is what is missing,
/// not that the node advertises no GPU name (it advertises nvidia.com/gpu=4).
#[test]
fn whatif_names_the_missing_gpu_model() {
    let state = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .args(["whatif", "relabel", "gpu-ct-0=vm-passthrough", "--nodes"])
        .arg(data("gate/lab.json"))
        .env("GPUWL_STATE_DIR", state.path())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(out.stdout, b"");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpuwl: relabel gpu-ct-0: the node's GPUs cannot be worked out: the GPU model is not known: 4 GPUs from nvidia.com/gpu (nvidia.com/gpu carries no model), but no nvidia.com/gpu.product label (GPU Feature Discovery sets it) and no device-model or vGPU-type name advertised; the model decides the names a relabelled node advertises\n"
    );
}

/// Runs gpuwl at `columns` columns without a kubeconfig: (exit, stdout).
fn at_width(columns: usize, args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .args(args)
        .env("COLUMNS", columns.to_string())
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// A line that wrapping left with stray punctuation: starting with the `,;.:` or `)` that
/// closed a command, a lone backtick, or ending with the `(` or backtick that opened one.
fn stray(line: &str) -> bool {
    let t = line.trim_start();
    let t = t.strip_prefix('#').map_or(t, str::trim_start);
    t.starts_with([',', ';', '.', ':', ')', '`'])
        || t.ends_with(" (")
        || t == "("
        || t.ends_with(" `")
}

/// Item 7: wrapped text never leaves a line of stray punctuation around a command on a
/// line of its own, in any explain case at any width, nor in inventory's notes.
#[test]
fn wrapping_leaves_no_stray_punctuation() {
    let mut runs = 0;
    for dir in std::fs::read_dir(data("explain")).unwrap() {
        let d = dir.unwrap().path();
        if !d.join("pod.yaml").exists() {
            continue;
        }
        let f = |n: &str| d.join(n).to_str().unwrap().to_owned();
        let mut args = vec!["explain".to_owned(), "--pod".to_owned(), f("pod.yaml")];
        for (flag, file) in [("--nodes", "nodes.json"), ("--pods", "pods.json")] {
            if d.join(file).exists() {
                args.extend([flag.to_owned(), f(file)]);
            }
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for width in [50, 60, 80, 100] {
            let (_, out) = at_width(width, &args);
            runs += 1;
            for l in out.lines() {
                assert!(!stray(l), "{} at {width}: {l:?}\n{out}", d.display());
            }
        }
    }
    assert!(runs >= 80, "{runs}");
    let (nodes, pods) = (data("gate/orphaned.json"), data("gate/orphaned-pods.json"));
    for width in [50, 60, 80, 100] {
        let (_, out) = at_width(width, &["inventory", "--nodes", &nodes, "--pods", &pods]);
        for l in out.lines() {
            assert!(!stray(l), "inventory at {width}: {l:?}\n{out}");
        }
    }
}

/// Item 6: `Also blocking` lists only causes that block: a gated pod that fits once its
/// gates go is `gated` alone, never `Also blocking: fits-now`.
#[test]
fn also_blocking_never_lists_fits_now() {
    let dir = tempfile::tempdir().unwrap();
    let pod = dir.path().join("gated.yaml");
    std::fs::write(
        &pod,
        "apiVersion: v1\nkind: Pod\nmetadata: {name: gated-job, namespace: gpu-vm}\nspec:\n  schedulingGates: [{name: kueue.x-k8s.io/admission}]\n  containers:\n  - name: c\n    image: x\n    resources: {limits: {nvidia.com/gpu: \"1\"}}\nstatus:\n  phase: Pending\n",
    )
    .unwrap();
    let nodes = data("gate/lab.json");
    let p = pod.to_str().unwrap();
    let (rc, out, _) = gpuwl(&["explain", "--pod", p, "--nodes", &nodes]);
    assert_eq!(rc, 1);
    assert!(out.contains("\nCause (gated): the pod is held by scheduling gates (kueue.x-k8s.io/admission): the scheduler does not consider it until every gate is removed; once they are removed, it fits now\n"), "{out}");
    assert!(!out.contains("Also blocking"), "{out}");
    let (_, json, _) = gpuwl(&["explain", "--pod", p, "--nodes", &nodes, "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["causeCodes"], serde_json::json!(["gated"]));
}

/// Item 8: `--help` never cuts a command across lines (the top-level plugin lines, a
/// command in backquotes in a flag's help or a paragraph), and inventory fits 60 columns.
#[test]
fn help_and_tables_fit_narrow_terminals() {
    let (rc, out) = at_width(60, &["--help"]);
    assert_eq!(rc, 0);
    assert!(
        out.contains(
            "\n  ln -s \"$(command -v gpuwl)\" ~/.cargo/bin/kubectl-gpuwl\n  kubectl gpuwl check\n"
        ),
        "{out}"
    );
    let commands = [
        vec!["--help"],
        vec!["check", "--help"],
        vec!["inventory", "--help"],
        vec!["explain", "--help"],
        vec!["lab", "--help"],
        vec!["relabel", "--help"],
        vec!["whatif", "relabel", "--help"],
        vec!["plan", "--help"],
        vec!["triage", "--help"],
        vec!["cluster", "up", "--help"],
    ];
    for width in [60, 80, 100] {
        for args in &commands {
            let (_, out) = at_width(width, args);
            for l in out.lines() {
                // A backquoted command left open at the end of a line was cut.
                let open = l
                    .rsplit_once('`')
                    .filter(|_| l.matches('`').count() % 2 == 1)
                    .is_some_and(|(_, rest)| {
                        ["gpuwl", "kubectl", "virtctl"]
                            .iter()
                            .any(|p| rest.starts_with(p))
                    });
                assert!(!open, "{args:?} at {width}: {l:?}");
            }
            // The cluster-policy flag's command is whole on one line.
            if args[0] == "check" {
                assert!(
                    out.lines()
                        .any(|l| l.trim() == "kubectl get clusterpolicies -o yaml"
                            || l.contains("(`kubectl get clusterpolicies -o yaml`)")),
                    "{width}\n{out}"
                );
            }
        }
    }
    let (nodes, pods) = (
        data("inventory/lab/nodes.json"),
        data("inventory/lab/pods.json"),
    );
    for width in [40, 60, 80] {
        let (rc, out) = at_width(width, &["inventory", "--nodes", &nodes, "--pods", &pods]);
        assert_eq!(rc, 0);
        // Every line fits, but a name wider than the terminal alone on its line.
        for l in out.lines() {
            assert!(
                l.chars().count() <= width || l.split_whitespace().count() == 1,
                "{width}: {l:?}\n{out}"
            );
        }
    }
    let (_, out) = at_width(60, &["inventory", "--nodes", &nodes, "--pods", &pods]);
    assert!(
        out.starts_with(
            "POOL  RESOURCE\ncontainer  nvidia.com/gpu\n  ALLOCATABLE 4  FREE 3  PEND 0\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("Not shown at 60 columns: NODES, CAP, USED, GPUS"),
        "{out}"
    );
}

/// Item 11: the hints point where the user meant to go — explain on a pod dump names the
/// namespace a pod of that name is in (as on the live cluster); triage given a `gpuwl
/// snapshot` file points to --snapshot; a deleted twin's status says what it was, not a
/// slip for another cluster.
#[test]
fn hints_point_where_the_user_meant_to_go() {
    let (nodes, pods) = (
        data("inventory/lab/nodes.json"),
        data("inventory/lab/pods.json"),
    );
    let (rc, out, err) = gpuwl(&[
        "explain",
        "pod",
        "job-cross",
        "--nodes",
        &nodes,
        "--pods",
        &pods,
    ]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert_eq!(
        err,
        format!(
            "gpuwl: {pods}: no pod default/job-cross; a pod job-cross is in namespace gpu-vm (add -n gpu-vm)\n"
        )
    );

    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("prod.tar");
    let mut t = tar::Builder::new(std::fs::File::create(&snap).unwrap());
    for (name, body) in [
        (
            "snapshot.json",
            br#"{"format":"gpuwl-snapshot/1"}"#.to_vec(),
        ),
        ("nodes.json", std::fs::read(data("gate/lab.json")).unwrap()),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_size(body.len() as u64);
        h.set_mode(0o644);
        h.set_cksum();
        t.append_data(&mut h, name, body.as_slice()).unwrap();
    }
    t.finish().unwrap();
    drop(t);
    let s = snap.to_str().unwrap();
    let (rc, _, err) = gpuwl(&["triage", s]);
    assert_eq!(rc, 2);
    assert!(
        err.ends_with(&format!("; it is a gpuwl snapshot file, which check, inventory, explain and kubevirt read: gpuwl check --snapshot {s}\n")),
        "{err}"
    );

    let state = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(state.path().join("gpuwl")).unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("gpuwl"))
        .args(["cluster", "status", "--name", "gpuwl-twin"])
        .env("GPUWL_STATE_DIR", state.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "gpuwl-twin: no such local cluster now: it is the name of the twin gpuwl whatif and gpuwl plan start for a run and delete when it ends (--keep leaves it running)\n"
    );
}

/// Item 1 (in part): the SVG's canvas fits its title (one pool was 378 px, the title cut),
/// a cordoned node's units are not called free (the table's FREE), and a pool of many
/// nodes draws at most 12 node lines and counts the rest.
#[test]
fn the_svg_fits_its_title_counts_cordoned_apart_and_caps_node_lines() {
    let width = |svg: &str| -> i64 {
        let w = svg.split("width=\"").nth(1).unwrap();
        w[..w.find('"').unwrap()].parse().unwrap()
    };
    let (rc, svg, _) = gpuwl(&["inventory", "-o", "svg", "--nodes", &data("dra/nodes.json")]);
    assert_eq!(rc, 0);
    let title = "GPU inventory: 2 GPU node(s) in 1 pool(s), 0 pending pod(s)";
    assert!(svg.contains(&format!(">{title}</text>")), "{svg}");
    // 16 px bold DejaVu Sans: at least 0.6 em a character, beside a 24 px margin.
    assert!(
        width(&svg) >= 24 + title.chars().count() as i64 * 16 * 6 / 10,
        "{}",
        width(&svg)
    );
    // The DRA devices are drawn, whole: 2 GPUs behind 4 devices.
    let (_, svg, _) = gpuwl(&[
        "inventory",
        "-o",
        "svg",
        "--nodes",
        &data("dra/nodes.json"),
        "--pods",
        &data("dra/pods.json"),
        "--dra",
        &data("dra/two-gpus.json"),
    ]);
    assert!(
        svg.contains(">DRA devices (resource.k8s.io)</text>"),
        "{svg}"
    );
    assert!(svg.contains(">gpu.nvidia.com gpu [container] on 1 node(s): 2 devices (2 GPUs), 1 allocated, 0 free, 1 blocked, 1 pending</text>"), "{svg}");
    assert!(
        svg.contains(">2 physical GPU(s) behind these devices, 2 in use</text>"),
        "{svg}"
    );
    assert!(!svg.contains('…'), "{svg}");

    let d = data("explain/gpu-node-cordoned");
    let (_, svg, _) = gpuwl(&[
        "inventory",
        "-o",
        "svg",
        "--nodes",
        &format!("{d}/nodes.json"),
        "--pods",
        &format!("{d}/pods.json"),
    ]);
    assert!(
        svg.contains(">8 allocatable, 4 allocated, 0 free (4 more on cordoned nodes)</text>"),
        "{svg}"
    );

    let nodes: Vec<serde_json::Value> = (0..30)
        .map(|i| {
            serde_json::json!({"metadata": {"name": format!("gpu-{i:02}"),
                "labels": {"nvidia.com/gpu.workload.config": "container"}},
                "status": {"capacity": {"nvidia.com/gpu": "1"}, "allocatable": {"nvidia.com/gpu": "1"}}})
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("nodes.json");
    std::fs::write(
        &f,
        serde_json::json!({"kind": "List", "items": nodes}).to_string(),
    )
    .unwrap();
    let (_, svg, _) = gpuwl(&["inventory", "-o", "svg", "--nodes", f.to_str().unwrap()]);
    assert!(
        svg.contains(">gpu-11</text>") && !svg.contains(">gpu-12</text>"),
        "{svg}"
    );
    assert!(
        svg.contains(">and 18 more nodes (gpuwl inventory -o csv lists them)</text>"),
        "{svg}"
    );
    let height: i64 = {
        let h = svg.split("height=\"").nth(1).unwrap();
        h[..h.find('"').unwrap()].parse().unwrap()
    };
    // 12 node lines and the pools-at-a-glance band: a picture, not a 30-row scroll.
    assert!(height < 600, "{height}");

    // Every pending class the title counts is drawn: here a gated pod, in a box of its own.
    let pods = dir.path().join("pods.json");
    std::fs::write(
        &pods,
        serde_json::json!({"kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "gated-job", "namespace": "gpu-vm"},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                "containers": [{"name": "c", "image": "x",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Pending"}}]})
        .to_string(),
    )
    .unwrap();
    let (_, svg, _) = gpuwl(&[
        "inventory",
        "-o",
        "svg",
        "--nodes",
        &data("gate/lab.json"),
        "--pods",
        pods.to_str().unwrap(),
    ]);
    assert!(svg.contains("1 pending pod(s)</text>"), "{svg}");
    assert!(
        svg.contains(">Pending, held by scheduling gates</text>"),
        "{svg}"
    );
    assert!(
        svg.contains(">gpu-vm/gated-job wants 1 × nvidia.com/gpu (gated)</text>"),
        "{svg}"
    );
}

/// An image of `svg` as rsvg-convert (librsvg, what GNOME's viewers and many wikis use)
/// renders it: (width, height, RGBA pixels, 8 bits each). rsvg-convert comes from scripts/tools.sh
/// (Debian's librsvg2-bin, fetched once and cached).
fn render(svg: &str) -> (u32, u32, Vec<u8>) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let tool = std::process::Command::new(root.join("scripts/tools.sh"))
        .arg("rsvg-convert")
        .output()
        .unwrap();
    assert!(
        tool.status.success(),
        "scripts/tools.sh rsvg-convert: {}",
        String::from_utf8_lossy(&tool.stderr)
    );
    let bin = String::from_utf8_lossy(&tool.stdout);
    let bin = bin.lines().last().unwrap().trim().to_owned();
    let dir = tempfile::tempdir().unwrap();
    let (input, output) = (dir.path().join("i.svg"), dir.path().join("o.png"));
    std::fs::write(&input, svg).unwrap();
    let out = std::process::Command::new(&bin)
        .arg("-o")
        .arg(&output)
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "rsvg-convert: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&output).unwrap(),
    ));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    // RGB when nothing is transparent (the picture's white background), else RGBA.
    let rgba = match info.color_type {
        png::ColorType::Rgba => buf,
        png::ColorType::Rgb => buf
            .chunks(3)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect(),
        other => panic!("rsvg-convert wrote {other:?}"),
    };
    (info.width, info.height, rgba)
}

/// Item 1: the picture looked at as a picture. Rendered by a real SVG renderer, the lab's
/// inventory (and the DRA and cordoned cases) is as big as it says, draws nothing past its
/// right or bottom margin (no text runs off the canvas), opens with the pools at a glance
/// (the summary band's bars in the three colours, above the first pool box), and draws
/// text (dark pixels in the title's line).
#[test]
fn the_svg_renders_within_its_canvas_with_the_pools_first() {
    let lab = data("inventory/lab");
    let cordoned = data("explain/gpu-node-cordoned");
    let cases: Vec<Vec<String>> = vec![
        vec![
            "--nodes".into(),
            format!("{lab}/nodes.json"),
            "--pods".into(),
            format!("{lab}/pods.json"),
        ],
        vec![
            "--nodes".into(),
            data("dra/nodes.json"),
            "--pods".into(),
            data("dra/pods.json"),
            "--dra".into(),
            data("dra/two-gpus.json"),
        ],
        vec![
            "--nodes".into(),
            format!("{cordoned}/nodes.json"),
            "--pods".into(),
            format!("{cordoned}/pods.json"),
        ],
    ];
    for case in cases {
        let mut args = vec!["inventory", "-o", "svg"];
        args.extend(case.iter().map(String::as_str));
        let (rc, svg, err) = gpuwl(&args);
        assert_eq!(rc, 0, "{err}");
        let attr = |name: &str| -> u32 {
            let v = svg.split(&format!(" {name}=\"")).nth(1).unwrap();
            v[..v.find('"').unwrap()].parse().unwrap()
        };
        let (w, h, px) = render(&svg);
        assert_eq!((w, h), (attr("width"), attr("height")), "{case:?}");
        let at = |x: u32, y: u32| -> [u8; 4] {
            let i = ((y * w + x) * 4) as usize;
            [px[i], px[i + 1], px[i + 2], px[i + 3]]
        };
        let white = [255, 255, 255, 255];
        // Right of the boxes' edge (the 24 px gap, less the anti-aliased stroke) and in
        // the bottom margin there is no ink: no text runs out of its box or off the canvas.
        for y in 0..h {
            for x in w - 22..w {
                assert_eq!(at(x, y), white, "{case:?}: ink at ({x},{y}) of {w}×{h}");
            }
        }
        for x in 0..w {
            for y in h - 6..h {
                assert_eq!(at(x, y), white, "{case:?}: ink at ({x},{y}) of {w}×{h}");
            }
        }
        // Text is drawn: the title's line (y 12..32) has dark pixels.
        let dark = (12..32)
            .flat_map(|y| (0..w).map(move |x| (x, y)))
            .filter(|&(x, y)| at(x, y)[..3].iter().all(|c| *c < 80))
            .count();
        assert!(dark > 200, "{case:?}: {dark} dark pixels in the title");
        // The summary band comes first: its heading precedes every pool box, and its bars
        // are drawn in the inventory's colours.
        let band = svg.find(">Pools at a glance").unwrap();
        let first_box = svg.find(r##"fill="#f5f7fa""##).unwrap();
        assert!(band < first_box, "{case:?}");
        let colour = |hex: &str| -> usize {
            let rgb: Vec<u8> = (0..3)
                .map(|i| u8::from_str_radix(&hex[1 + 2 * i..3 + 2 * i], 16).unwrap())
                .collect();
            (64..h.min(64 + 30 + 20 * 6))
                .flat_map(|y| (0..w).map(move |x| (x, y)))
                .filter(|&(x, y)| at(x, y)[..3] == rgb[..])
                .count()
        };
        assert!(
            colour("#37474f") + colour("#43a047") + colour("#b0bec5") > 100,
            "{case:?}"
        );
    }
}
