//! The monitoring files in deploy/ agree with each other and with the docs: one set of
//! alerting rules (deploy/prometheus/rules.yaml) copied into the PrometheusRule and the
//! Helm chart, every alert with a runbook section in docs/runbooks.md and a
//! `promtool test rules` case, the Grafana dashboard's copy in the chart, and the
//! dashboard's queries naming only metrics the exporter has. (`promtool test rules` itself
//! runs in scripts/test.sh; rendering and applying the chart in serve.rs.)

use std::path::Path;

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The alerts of deploy/prometheus/rules.yaml.
fn alerts() -> Vec<Value> {
    yaml("deploy/prometheus/rules.yaml")["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["rules"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn one_set_of_rules_in_three_places() {
    let rules = yaml("deploy/prometheus/rules.yaml");
    let operator = yaml("deploy/prometheus-operator/prometheusrule.yaml");
    assert_eq!(operator["spec"], rules);
    assert_eq!(
        read("deploy/helm/gpuwl/files/rules.yaml"),
        read("deploy/prometheus/rules.yaml")
    );
    assert_eq!(
        read("deploy/helm/gpuwl/files/dashboard.json"),
        read("deploy/grafana/gpuwl-dashboard.json")
    );
}

#[test]
fn every_alert_has_a_runbook_and_a_rule_test() {
    let runbooks = read("docs/runbooks.md");
    let tests = read("deploy/prometheus/rules.test.yaml");
    let readme = read("docs/guide/serve.md");
    let alerts = alerts();
    assert!(alerts.len() >= 7, "{alerts:?}");
    for a in alerts {
        let name = a["alert"].as_str().unwrap();
        let url = a["annotations"]["runbook_url"].as_str().unwrap();
        assert_eq!(
            url,
            format!("docs/runbooks.md#{}", name.to_ascii_lowercase()),
            "{name}"
        );
        assert!(
            runbooks.lines().any(|l| l == format!("## {name}")),
            "docs/runbooks.md has no section for {name}"
        );
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "rules.test.yaml does not test {name}"
        );
        assert!(
            readme.contains(&format!("`{name}`")),
            "docs/guide/serve.md does not list {name}"
        );
        // Aggregations keep the cluster's labels: `without`, never `by`.
        let expr = a["expr"].as_str().unwrap();
        assert!(!expr.contains(" by "), "{name}: {expr}");
    }
}

#[test]
fn the_dashboard_queries_metrics_the_exporter_has() {
    let dash: Value = serde_json::from_str(&read("deploy/grafana/gpuwl-dashboard.json")).unwrap();
    let lib = read("src/serve/metrics.rs");
    let mut exprs = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            exprs.push(t["expr"].as_str().unwrap().to_owned());
        }
    }
    assert!(exprs.len() >= 10, "{exprs:?}");
    let mut seen = 0;
    for e in &exprs {
        for word in e.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if let Some(name) = word.strip_prefix("gpuwl_") {
                let base = name.trim_end_matches("_total");
                assert!(
                    lib.contains(&format!("\"gpuwl_{base}\"")),
                    "the dashboard asks for gpuwl_{name}, which the exporter does not have: {e}"
                );
                seen += 1;
            }
        }
    }
    assert!(seen >= 10);
    for name in [
        "gpuwl_pool_free_units",
        "gpuwl_unservable_pods",
        "gpuwl_node_mismatch",
        "gpuwl_ready",
        "gpuwl_stale",
    ] {
        assert!(exprs.iter().any(|e| e.contains(name)), "no panel on {name}");
    }
}

/// The finding codes an alert's expression selects (`code="x"` or `code=~"x|y"`).
fn selected_codes(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (pat, regex) in [("code=\"", false), ("code=~\"", true)] {
        let mut rest = expr;
        while let Some(i) = rest.find(pat) {
            let tail = &rest[i + pat.len()..];
            let end = tail.find('"').unwrap();
            let v = &tail[..end];
            if regex {
                out.extend(v.split('|').map(str::to_owned));
            } else {
                out.push(v.to_owned());
            }
            rest = &tail[end..];
        }
    }
    out
}

/// The alerts follow gpuwl's one severity table (crates/gpuwl-core/src/model/finding.rs SEVERITIES): an alert
/// on finding codes has the severity of its codes (error → critical, warning → warning,
/// never an info), and every error code pages through some alert.
#[test]
fn alert_severities_follow_the_finding_table() {
    use gpuwl_core::model::finding::{Code, Severity};
    let mut alerted = std::collections::BTreeSet::new();
    for a in alerts() {
        let name = a["alert"].as_str().unwrap();
        let expr = a["expr"].as_str().unwrap();
        let severity = a["labels"]["severity"].as_str().unwrap();
        for c in selected_codes(expr) {
            let code = Code::parse(&c).unwrap_or_else(|| panic!("{name}: unknown code {c}"));
            assert_eq!(
                code.severity().alert_severity(),
                Some(severity),
                "{name}: {c} is {:?} in the table, the alert says {severity}",
                code.severity()
            );
            alerted.insert(code);
        }
    }
    let unalerted: Vec<Code> = Code::ALL
        .into_iter()
        .filter(|c| c.severity() == Severity::Error && !alerted.contains(c))
        .collect();
    assert!(
        unalerted.is_empty(),
        "errors no alert covers: {unalerted:?}"
    );
    assert_eq!(
        selected_codes(r#"x{code=~"a|b"} unless y{code="c"}"#),
        ["c", "a", "b"]
    );
}
