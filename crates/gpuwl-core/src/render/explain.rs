//! Rendering an [`Explanation`]: text (one screen), JSON or YAML.

use std::fmt::Write as _;

use crate::analysis::dra_hints;
use crate::analysis::explain::remedy;
use crate::analysis::explain::vm::VmView;
use crate::analysis::explain::{Explanation, NodeFree, RequestView};
use crate::render::{self, Format, esc, esc_lines, escape_serialized};

/// Renders `e` in `format`. JSON/YAML carry the whole [`Explanation`] (camelCase keys).
pub fn render(e: &Explanation, format: Format) -> String {
    match format {
        Format::Text => render::wrap_lines(&text(e), render::width()),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(e)
                .unwrap_or_else(|err| format!("{{\"error\":{:?}}}", err.to_string()));
            s.push('\n');
            escape_serialized(&s).into_owned()
        }
        Format::Yaml => escape_serialized(
            &serde_saphyr::to_string(e).unwrap_or_else(|err| format!("error: {err:?}\n")),
        )
        .into_owned(),
    }
}

/// The text of an explanation: the VM lines (for `explain vm|vmi`), the object and the
/// scheduler's condition, the requests, the DRA claims, how the constraints narrow the
/// nodes, then the cause, the fix and the notes.
fn text(e: &Explanation) -> String {
    let mut o = String::new();
    if let Some(vm) = &e.vm {
        vm_text(&mut o, vm);
    }
    head_text(&mut o, e);
    let _ = writeln!(o, "\nRequests:");
    if e.requests.is_empty() {
        let _ = writeln!(o, "  no extended resources");
    }
    for r in &e.requests {
        request_text(&mut o, e, r);
    }
    claims_text(&mut o, e);
    if e.nodes_known {
        constraints_text(&mut o, e);
    }
    cause_text(&mut o, e);
    o
}

/// The object's kind, name, phase and node, and the scheduler's PodScheduled condition.
fn head_text(o: &mut String, e: &Explanation) {
    let _ = writeln!(
        o,
        "{} {}: {}, {}",
        e.kind,
        esc(&e.pod),
        esc(e.phase.as_deref().unwrap_or("phase unknown")),
        match &e.node {
            Some(n) => format!("bound to {}", esc(n)),
            None => "not bound to a node".into(),
        }
    );
    match &e.scheduler {
        Some(c) => {
            let _ = writeln!(
                o,
                "Scheduler (PodScheduled={}{}): {}",
                esc(&c.status),
                c.reason
                    .as_deref()
                    .map(|r| format!(", {}", esc(r)))
                    .unwrap_or_default(),
                c.message
                    .as_deref()
                    .map(|m| format!("\"{}\"", esc(m)))
                    .unwrap_or_else(|| "no message".into())
            );
        }
        None => {
            let _ = writeln!(o, "Scheduler: no PodScheduled condition");
        }
    }
}

/// One request: the name, units, class and field; with nodes known, the nodes advertising
/// it (free units, reach, holders when full), stale zeros, KubeVirt's permission, names it
/// may have meant and notes.
fn request_text(o: &mut String, e: &Explanation, r: &RequestView) {
    let _ = writeln!(
        o,
        "  {} × {} ({}){}",
        esc(&r.resource),
        r.units,
        r.class.describe(),
        if r.field.is_empty() {
            String::new()
        } else {
            match r.container.as_deref() {
                Some(c) if c.starts_with("init container ") => {
                    format!(" from {} ({})", esc(&r.field), esc(c))
                }
                _ => format!(" from {}", esc(&r.field)),
            }
        }
    );
    if !e.nodes_known {
        return;
    }
    if r.advertisers.is_empty() {
        let _ = writeln!(o, "    advertised by no node (of {})", e.nodes_total);
    } else {
        let _ = writeln!(o, "    advertised by {} node(s):", r.advertisers.len());
        for a in &r.advertisers {
            advertiser_text(o, a);
        }
    }
    if !r.stale_nodes.is_empty() {
        let _ = writeln!(
            o,
            "    stale 0 on {} (a key the kubelet keeps after the device plugin left; not advertised)",
            esc(&r.stale_nodes.join(", "))
        );
    }
    match r.permitted {
        Some(true) => {
            let _ = writeln!(o, "    permitted in KubeVirt's permittedHostDevices");
        }
        Some(false) => {
            let _ = writeln!(o, "    NOT in KubeVirt's permittedHostDevices");
        }
        None => {}
    }
    for s in &r.did_you_mean {
        let _ = writeln!(o, "    did you mean {}? ({})", esc(&s.name), esc(&s.why()));
    }
    for n in &r.notes {
        let _ = writeln!(o, "    note: {}", esc(n));
    }
}

/// One node advertising a request: its pool, units, whether the pod's constraints allow
/// it, and (when no unit is free) the first three pods holding them.
fn advertiser_text(o: &mut String, a: &NodeFree) {
    let usage = match (a.allocated, a.free) {
        (Some(al), Some(f)) => {
            format!("{} allocatable, {al} allocated, {f} free", a.allocatable)
        }
        _ => format!("{} allocatable, allocations unknown", a.allocatable),
    };
    let reach = if a.allowed {
        "allowed".to_string()
    } else {
        format!("excluded: {}", esc(&a.excluded_by.join("; ")))
    };
    let _ = writeln!(
        o,
        "      {} [pool {}]: {usage} — {reach}",
        esc(&a.node),
        esc(&a.pool)
    );
    if !a.held_by.is_empty() && a.free.is_some_and(|f| f <= 0) {
        let mut held = a.held_by.iter().take(3).cloned().collect::<Vec<_>>();
        if a.held_by.len() > 3 {
            held.push(format!("and {} more", a.held_by.len() - 3));
        }
        let _ = writeln!(o, "        held by {}", esc(&held.join(", ")));
    }
}

/// The constraints, each with the nodes it allows, then the chain that narrows the nodes:
/// all constraints, advertising every request, enough units, the other resources, DRA.
fn constraints_text(o: &mut String, e: &Explanation) {
    let _ = writeln!(o, "\nConstraints ({} nodes):", e.nodes_total);
    if e.constraints.is_empty() {
        let _ = writeln!(
            o,
            "  none (no nodeSelector, no required affinity, no taints)"
        );
    }
    for c in &e.constraints {
        let _ = writeln!(
            o,
            "  {} {} → allows {}",
            c.kind,
            esc(&c.description),
            list(&c.allows)
        );
    }
    let _ = writeln!(o, "  all constraints → {}", list(&e.allowed_nodes));
    let _ = writeln!(
        o,
        "  ∩ advertise every requested resource → {}",
        list(&e.candidates)
    );
    if e.allocations_known {
        let _ = writeln!(o, "  ∩ enough free units → {}", list(&e.fitting));
    } else if e.fitting.len() < e.candidates.len() {
        let _ = writeln!(o, "  ∩ enough allocatable units → {}", list(&e.fitting));
    }
    // A further narrowing of the chain only (a DRA pod's fitting comes from its claims,
    // so its schedulable set need not be a subset).
    if e.node.is_none()
        && e.schedulable != e.fitting
        && e.schedulable.iter().all(|n| e.fitting.contains(n))
    {
        let _ = writeln!(
            o,
            "  ∩ cpu, memory, pod slots and the rest fit → {}",
            list(&e.schedulable)
        );
    }
    if let Some(p) = &e.dra {
        let _ = writeln!(
            o,
            "  DRA: the claims can be allocated now on → {}",
            list(&p.fits)
        );
    }
}

/// The cause with its evidence, the fix (and how it was tested), the other blocking
/// causes, and the notes.
fn cause_text(o: &mut String, e: &Explanation) {
    // The quota layer's code when Kueue holds the workload, or admits it in a flavor whose
    // nodes cannot serve it.
    let code = match &e.quota {
        Some(q) if q.cause.holds() || q.unservable.is_some() => q.cause.as_str(),
        _ => e.cause_code.as_str(),
    };
    let _ = writeln!(o, "\nCause ({code}): {}", esc(&e.cause));
    for ev in &e.evidence {
        let _ = writeln!(o, "  {}", esc(ev));
    }
    let _ = writeln!(o, "Fix: {}", esc_lines(&e.fix, "  "));
    if let Some(r) = &e.remedy {
        let _ = writeln!(o, "Tested: {}", esc(&remedy::tested_line(r)));
    }
    let also: Vec<&str> = e
        .cause_codes
        .iter()
        .skip(1)
        .filter(|c| c.blocks())
        .map(|c| c.as_str())
        .collect();
    if !also.is_empty() {
        let _ = writeln!(o, "Also blocking: {}", also.join(", "));
    }
    for n in &e.notes {
        let _ = writeln!(o, "note: {}", esc(n));
    }
}

/// The KubeVirt lines of `explain vm|vmi`: the object, its conditions, devices, launcher.
fn vm_text(o: &mut String, vm: &VmView) {
    let mut head = format!("{} {}", vm.kind, esc(&vm.name));
    let mut facts = Vec::new();
    if let Some(r) = &vm.run_strategy {
        facts.push(format!("runStrategy {}", esc(r)));
    }
    if let Some(p) = &vm.printable_status {
        facts.push(format!("status {}", esc(p)));
    }
    match (&vm.vmi, vm.kind) {
        (Some(i), "VirtualMachine") => facts.push(format!(
            "VMI {} {}",
            esc(i),
            esc(vm.vmi_phase.as_deref().unwrap_or("phase unknown"))
        )),
        (Some(_), _) => facts.push(format!(
            "phase {}",
            esc(vm.vmi_phase.as_deref().unwrap_or("unknown"))
        )),
        (None, _) => facts.push("no VMI".into()),
    }
    if !facts.is_empty() {
        head.push_str(": ");
        head.push_str(&facts.join(", "));
    }
    let _ = writeln!(o, "{head}");
    for c in &vm.conditions {
        let _ = writeln!(
            o,
            "  {} {}={}{}{}",
            c.object,
            esc(&c.type_),
            esc(&c.status),
            c.reason
                .as_deref()
                .map(|r| format!(" ({})", esc(r)))
                .unwrap_or_default(),
            c.message
                .as_deref()
                .map(|m| format!(": \"{}\"", esc(m)))
                .unwrap_or_default()
        );
    }
    for d in &vm.devices {
        let _ = writeln!(
            o,
            "  device {} {} ({})",
            esc(&d.name),
            esc(&d.device_name),
            esc(&d.field)
        );
    }
    match &vm.launcher {
        Some(l) => {
            let _ = writeln!(o, "  virt-launcher pod {}\n", esc(l));
        }
        None => {
            let _ = writeln!(o, "  no virt-launcher pod\n");
        }
    }
}

/// The pod's DRA resource claims: per claim and request, the DeviceClass, its selectors,
/// the matching devices and their state.
fn claims_text(o: &mut String, e: &Explanation) {
    if e.claims.is_empty() {
        return;
    }
    let _ = writeln!(o, "\nResource claims (DRA):");
    for c in &e.claims {
        let state = if !c.found {
            "does not exist".to_string()
        } else if c.allocated {
            let on = if c.allocated_nodes.is_empty() {
                String::new()
            } else {
                format!(" on {}", c.allocated_nodes.join(", "))
            };
            format!("allocated{on}: {}", c.allocated_devices.join(", "))
        } else if c.from_template {
            "not made yet; the template's requests".to_string()
        } else {
            "not allocated".to_string()
        };
        let _ = writeln!(
            o,
            "  {} → {}{}: {}",
            esc(&c.name),
            c.claim
                .as_deref()
                .map(|n| format!("ResourceClaim {}", esc(n)))
                .unwrap_or_else(|| "no ResourceClaim yet".into()),
            c.template
                .as_deref()
                .map(|t| format!(" (from template {})", esc(t)))
                .unwrap_or_default(),
            esc(&state)
        );
        for r in &c.requests {
            for a in &r.alternatives {
                let _ = writeln!(
                    o,
                    "    request {}{}: DeviceClass {}{}, {}",
                    esc(&r.request),
                    a.subrequest
                        .as_deref()
                        .map(|s| format!("/{}", esc(s)))
                        .unwrap_or_default(),
                    esc(&a.device_class),
                    if a.class_found {
                        ""
                    } else {
                        " (does not exist)"
                    },
                    if a.all {
                        "all matching devices".to_string()
                    } else {
                        format!("{} device(s)", a.count)
                    }
                );
                for s in &a.selectors {
                    let _ = writeln!(o, "      selector: {}", esc(s));
                }
                for err in a.errors.iter().take(3) {
                    let _ = writeln!(o, "      cannot evaluate: {}", esc(err));
                }
                for h in a.hints.iter().take(3) {
                    let _ = writeln!(o, "      {}", esc(&dra_hints::describe(h)));
                }
                let _ = writeln!(
                    o,
                    "      matches {} device(s), {} free on allowed nodes{}",
                    a.matching.len(),
                    a.free,
                    if a.matching.is_empty() { "" } else { ":" }
                );
                for d in &a.matching {
                    let _ = writeln!(
                        o,
                        "        {} ({}{}): {}{}",
                        esc(&d.device),
                        esc(&d.device_type),
                        d.node
                            .as_deref()
                            .map(|n| format!(" on {}", esc(n)))
                            .unwrap_or_default(),
                        esc(&d.state),
                        if d.allowed { "" } else { " — node excluded" }
                    );
                }
            }
        }
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "no node".into()
    } else {
        format!("{} ({})", v.len(), esc(&v.join(", ")))
    }
}
