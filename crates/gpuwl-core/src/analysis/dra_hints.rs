//! Why a DRA request's selectors match no device, to the attribute: the attributes and
//! capacities the CEL selectors reference (`device.attributes['domain'].name`,
//! `device.attributes["domain"]["name"]`, `device.capacity[...]...`), whether any device
//! publishes them, which values the devices publish (nearest to the selector's literal
//! first), and — when the comparison cannot work at all — the corrected expression.
//!
//! Types follow the allocator's CEL environment ([`crate::analysis::dra_cel`]): a `version`
//! attribute is a `kubernetes.Semver` (compare with `compareTo(semver('…'))`), a capacity a
//! `kubernetes.Quantity` (`compareTo(quantity('…'))`). References are found by reading
//! the expression's text, not its syntax tree: `cel.bind` aliases and computed keys are
//! not followed.

use std::collections::BTreeSet;

use serde::Serialize;

use crate::analysis::dra_match::Matcher;
use crate::analysis::names;
use crate::model::dra::{AttrValue, DraObjects, RequestSpec};

/// One finding about one attribute a selector references.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Hint {
    /// The selector (CEL expression).
    pub selector: String,
    /// The qualified attribute or capacity name (`gpu.nvidia.com/productName`).
    pub attribute: String,
    /// `not-published` (no candidate device has it), `value-not-published` (none has the
    /// value compared with), `type-mismatch` (a version or quantity compared with a string
    /// or number: a runtime error on every device).
    pub problem: String,
    /// The literal the selector compares with, as written (without quotes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// What the candidate devices publish: attribute values (for `value-not-published`,
    /// nearest to `value` first) or the names published in the domain (for
    /// `not-published`, nearest to the name first).
    pub published: Vec<String>,
    /// The selector corrected (nearest value, or the typed comparison).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrected: Option<String>,
    /// The DeviceClass whose own selector this is (`None`: the claim's). A class's
    /// selectors are cluster-wide — every claim of the class uses them — so a fix never
    /// rewrites them; it names another class in the claim instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_class: Option<String>,
}

/// One reference found in an expression.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ref {
    capacity: bool,
    domain: String,
    name: String,
    /// The byte range of `ref op literal` (or of the reference alone).
    span: (usize, usize),
    /// The byte range of the reference alone.
    ref_span: (usize, usize),
    op: Option<String>,
    /// The literal and whether it was quoted.
    literal: Option<(String, bool)>,
    /// `semver` or `quantity` for `REF.compareTo(semver('LIT')) OP 0` (the literal is
    /// the function's argument, `op` the comparison of the result with 0).
    compare: Option<String>,
}

fn quoted(s: &str, at: usize) -> Option<(String, usize)> {
    let q = s[at..].chars().next()?;
    if q != '\'' && q != '"' {
        return None;
    }
    let end = s[at + 1..].find(q)?;
    Some((s[at + 1..at + 1 + end].to_owned(), at + 1 + end + 1))
}

/// `expr` with a `has()` test of the attribute `name` (unqualified, as a `no such key`
/// error names it) before it: `has(device.attributes['DOMAIN'].NAME) && (EXPR)`, so that a
/// device not publishing it is a non-match instead of a CEL runtime error (CEL's `has()`
/// macro on a map tests for the key; kubernetes/kubernetes
/// `staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go` gives the attributes
/// as a map per domain). `None` when the expression references no attribute of that name.
pub(crate) fn guarded(expr: &str, name: &str) -> Option<String> {
    let mut domains: Vec<String> = references(expr)
        .into_iter()
        .filter(|r| !r.capacity && r.name == name)
        .map(|r| r.domain)
        .collect();
    domains.dedup();
    let [domain] = domains.as_slice() else {
        return None;
    };
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') || domain.contains('\'') {
        return None;
    }
    Some(format!(
        "has(device.attributes['{domain}'].{name}) && ({expr})"
    ))
}

fn references(expr: &str) -> Vec<Ref> {
    let mut out = Vec::new();
    for (key, capacity) in [("device.attributes[", false), ("device.capacity[", true)] {
        let mut from = 0;
        while let Some(i) = expr[from..].find(key) {
            let start = from + i;
            from = start + key.len();
            let Some((domain, mut at)) = quoted(expr, from) else {
                continue;
            };
            if !expr[at..].starts_with(']') {
                continue;
            }
            at += 1;
            let name = if let Some(rest) = expr[at..].strip_prefix('.') {
                let n: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if n.is_empty() {
                    continue;
                }
                at += 1 + n.len();
                n
            } else if expr[at..].starts_with('[') {
                let Some((n, after)) = quoted(expr, at + 1) else {
                    continue;
                };
                if !expr[after..].starts_with(']') {
                    continue;
                }
                at = after + 1;
                n
            } else {
                continue;
            };
            // A method call on the value (`.lowerAscii()`, `.compareTo(...)`) is not a plain
            // comparison.
            let ref_end = at;
            let rest = &expr[at..];
            let trimmed = rest.trim_start();
            let ws = rest.len() - trimmed.len();
            let mut op = None;
            let mut literal = None;
            let mut end = ref_end;
            let compare = compare_to(expr, ref_end);
            if let Some((f, lit, o, after)) = &compare {
                op = Some(o.clone());
                literal = Some((lit.clone(), true));
                end = *after;
                let _ = f;
            }
            for o in ["==", "!=", ">=", "<=", ">", "<"] {
                if compare.is_some() {
                    break;
                }
                if let Some(after_op) = trimmed.strip_prefix(o) {
                    let t2 = after_op.trim_start();
                    let lit_at = expr.len() - t2.len();
                    if let Some((lit, after)) = quoted(expr, lit_at) {
                        op = Some(o.to_owned());
                        literal = Some((lit, true));
                        end = after;
                    } else {
                        let num: String = t2
                            .chars()
                            .take_while(|c| {
                                c.is_ascii_digit() || matches!(c, '.' | '-' | '*' | ' ')
                            })
                            .collect();
                        let num = num.trim_end().to_owned();
                        if !num.is_empty() {
                            op = Some(o.to_owned());
                            end = lit_at + num.len();
                            literal = Some((num, false));
                        }
                    }
                    break;
                }
            }
            let _ = ws;
            out.push(Ref {
                capacity,
                domain,
                name,
                span: (start, end),
                ref_span: (start, ref_end),
                op,
                literal,
                compare: compare.map(|c| c.0),
            });
        }
    }
    out.sort_by_key(|r| r.span.0);
    out
}

/// `.compareTo(F('LIT')) OP 0` at byte `at` of `expr` (F `semver` or `quantity`): F, the
/// literal, OP and the byte after the `0`.
fn compare_to(expr: &str, at: usize) -> Option<(String, String, String, usize)> {
    let rest = expr[at..].strip_prefix(".compareTo(")?;
    let f = ["semver", "quantity"]
        .into_iter()
        .find(|f| rest.starts_with(&format!("{f}(")))?;
    let lit_at = expr.len() - rest.len() + f.len() + 1;
    let (lit, after) = quoted(expr, lit_at)?;
    let tail = expr[after..].strip_prefix("))")?;
    let t = tail.trim_start();
    let o = ["==", "!=", ">=", "<=", ">", "<"]
        .into_iter()
        .find(|o| t.starts_with(o))?;
    let t2 = t[o.len()..].trim_start();
    t2.strip_prefix('0')
        .filter(|r| !r.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '.'))?;
    let end = expr.len() - t2.len() + 1;
    Some((f.to_owned(), lit, o.to_owned(), end))
}

/// Whether version `v` compared with `lit` (both semver text) satisfies `op` (as
/// `v.compareTo(semver(lit)) op 0` does; build metadata aside). `None` when either does
/// not parse.
fn version_holds(v: &str, lit: &str, op: &str) -> Option<bool> {
    let p = |s: &str| semver::Version::parse(s).ok();
    let (a, b) = (p(v)?, p(lit)?);
    let o = (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre));
    Some(match op {
        "==" => o.is_eq(),
        "!=" => o.is_ne(),
        ">=" => o.is_ge(),
        "<=" => o.is_le(),
        ">" => o.is_gt(),
        _ => o.is_lt(),
    })
}

/// The hint for `REF.compareTo(semver('LIT')) OP 0` that no candidate device meets
/// (`version-not-met`): the published versions, those of free devices first, each nearest
/// to the literal first (by major, minor, patch); the selector corrected to the first one
/// (`OP` kept: `==`, `>=` and `<=` hold for the value itself). `None` when a device meets
/// it, the literal is no version, or `OP` is `!=`, `>` or `<` (no published value is a
/// correction that keeps the comparison).
fn version_hint(
    expr: &str,
    attribute: String,
    lit: &str,
    op: &str,
    values: &[Option<String>],
    free: &BTreeSet<String>,
) -> Option<Hint> {
    let versions: BTreeSet<&str> = values
        .iter()
        .flatten()
        .filter_map(|v| v.strip_prefix("version:"))
        .collect();
    if versions
        .iter()
        .any(|v| version_holds(v, lit, op) == Some(true))
        || !matches!(op, "==" | ">=" | "<=")
    {
        return None;
    }
    let want = semver::Version::parse(lit).ok()?;
    let distance = |v: &str| {
        semver::Version::parse(v).map_or(u64::MAX, |x| {
            x.major.abs_diff(want.major) * 1_000_000
                + x.minor.abs_diff(want.minor).min(999) * 1_000
                + x.patch.abs_diff(want.patch).min(999)
        })
    };
    let mut ordered: Vec<String> = versions.iter().map(|v| (*v).to_owned()).collect();
    ordered.sort_by_key(|v| (!free.contains(v), distance(v), v.clone()));
    let best = ordered.first()?;
    let corrected = [format!("'{lit}'"), format!("\"{lit}\"")]
        .iter()
        .find(|l| expr.contains(l.as_str()))
        .map(|l| expr.replacen(l.as_str(), &quote_cel(best), 1));
    Some(Hint {
        selector: expr.to_owned(),
        attribute,
        problem: "version-not-met".into(),
        value: Some(format!("{op} {lit}")),
        published: ordered,
        corrected,
        device_class: None,
    })
}

fn quote_cel(s: &str) -> String {
    if s.contains('\'') {
        format!("\"{}\"", s.replace('"', "\\\""))
    } else {
        format!("'{s}'")
    }
}

/// The values (`kind:value` stripped to `value`) that some free device among `candidates`
/// publishes, `values` being each candidate's: the value to correct a selector to is the
/// nearest of these (a model whose devices are all allocated would only move the pod from
/// "no matching device" to "devices in use": issue 49), the nearest at all when none is.
fn free_values(
    m: &Matcher<'_>,
    candidates: &[usize],
    values: &[Option<String>],
) -> BTreeSet<String> {
    candidates
        .iter()
        .zip(values)
        .filter(|(i, _)| m.devices[**i].is_free())
        .filter_map(|(_, v)| v.as_ref())
        .filter_map(|v| v.split_once(':').map(|(_, v)| v.to_owned()))
        .collect()
}

/// The `not-published` hint for reference `r` (attribute or capacity `q`) of selector
/// `expr`: no candidate device publishes it; `published` lists the names they do publish
/// in `r`'s domain, the nearest to `r`'s name first.
fn not_published(m: &Matcher<'_>, candidates: &[usize], r: &Ref, q: String, expr: &str) -> Hint {
    let names: BTreeSet<String> = candidates
        .iter()
        .flat_map(|&i| {
            let d = m.devices[i].device;
            let keys: Vec<&String> = if r.capacity {
                d.capacity.keys().collect()
            } else {
                d.attributes.keys().collect()
            };
            keys.into_iter()
                .filter_map(|k| k.strip_prefix(&format!("{}/", r.domain)))
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .collect();
    Hint {
        selector: expr.to_owned(),
        attribute: q,
        problem: "not-published".into(),
        value: r.literal.as_ref().map(|l| l.0.clone()),
        published: names::nearest_first(names, &r.name),
        corrected: None,
        device_class: None,
    }
}

/// The hints for request alternative `spec` that matches no device: per attribute its
/// selectors (the class's and its own) reference, what the devices the class selects
/// publish (all devices when the class selects none or does not exist).
pub fn hints(m: &Matcher<'_>, dra: &DraObjects, spec: &RequestSpec) -> Vec<Hint> {
    let class = dra.class(&spec.device_class);
    // Candidate devices: those the class's selectors accept.
    let by_class: Vec<usize> = (0..m.devices.len())
        .filter(|&i| class.is_some_and(|c| c.selectors.iter().all(|e| m.eval(e, i) == Ok(true))))
        .collect();
    let candidates: Vec<usize> = if by_class.is_empty() {
        (0..m.devices.len()).collect()
    } else {
        by_class
    };
    let mut out = Vec::new();
    let exprs = class
        .map(|c| c.selectors.clone())
        .unwrap_or_default()
        .into_iter()
        .chain(spec.selectors.iter().cloned());
    for expr in exprs {
        for r in references(&expr) {
            let q = format!("{}/{}", r.domain, r.name);
            let values: Vec<Option<String>> = candidates
                .iter()
                .map(|&i| {
                    let d = m.devices[i].device;
                    if r.capacity {
                        d.capacity.get(&q).map(|a| format!("quantity:{}", a.raw))
                    } else {
                        d.attributes.get(&q).map(|v| match v {
                            AttrValue::Version(s) => format!("version:{s}"),
                            AttrValue::String(s) => format!("string:{s}"),
                            other => format!("other:{}", other.text()),
                        })
                    }
                })
                .collect();
            let present: BTreeSet<String> = values.iter().flatten().cloned().collect();
            if present.is_empty() {
                out.push(not_published(m, &candidates, &r, q, &expr));
                continue;
            }
            let (Some(op), Some((lit, was_quoted))) = (&r.op, &r.literal) else {
                continue;
            };
            let kind = present
                .iter()
                .next()
                .and_then(|p| p.split_once(':'))
                .map(|(k, _)| k.to_owned())
                .unwrap_or_default();
            let reference = &expr[r.ref_span.0..r.ref_span.1];
            let typed = |f: &str| {
                format!(
                    "{}{}.compareTo({f}({})) {op} 0{}",
                    &expr[..r.span.0],
                    reference,
                    quote_cel(lit),
                    &expr[r.span.1..]
                )
            };
            let shown: Vec<String> = present
                .iter()
                .filter_map(|p| p.split_once(':').map(|(_, v)| v.to_owned()))
                .collect();
            if r.compare.as_deref() == Some("semver") {
                let free = free_values(m, &candidates, &values);
                if kind == "version"
                    && let Some(h) = version_hint(&expr, q, lit, op, &values, &free)
                {
                    out.push(h);
                }
                continue;
            }
            if r.compare.is_some() {
                continue;
            }
            match kind.as_str() {
                "version" if *was_quoted => out.push(Hint {
                    selector: expr.clone(),
                    attribute: q,
                    problem: "type-mismatch".into(),
                    value: Some(lit.clone()),
                    published: names::nearest_first(shown, lit),
                    corrected: Some(typed("semver")),
                    device_class: None,
                }),
                "quantity" => out.push(Hint {
                    selector: expr.clone(),
                    attribute: q,
                    problem: "type-mismatch".into(),
                    value: Some(lit.clone()),
                    published: names::nearest_first(shown, lit),
                    corrected: Some(typed("quantity")),
                    device_class: None,
                }),
                "string" if *was_quoted && (op == "==" || op == "!=") => {
                    if shown.iter().any(|v| v == lit) {
                        continue;
                    }
                    let ordered = names::nearest_first(shown, lit);
                    let free = free_values(m, &candidates, &values);
                    let corrected = ordered
                        .iter()
                        .find(|v| free.contains(*v))
                        .or(ordered.first())
                        .map(|best| {
                            format!(
                                "{}{} {op} {}{}",
                                &expr[..r.span.0],
                                reference,
                                quote_cel(best),
                                &expr[r.span.1..]
                            )
                        });
                    out.push(Hint {
                        selector: expr.clone(),
                        attribute: q,
                        problem: "value-not-published".into(),
                        value: Some(lit.clone()),
                        published: ordered,
                        corrected,
                        device_class: None,
                    });
                }
                _ => {}
            }
        }
    }
    if let Some(c) = class {
        for h in &mut out {
            if c.selectors.contains(&h.selector) && !spec.selectors.contains(&h.selector) {
                h.device_class = Some(c.name.clone());
            }
        }
    }
    out
}

/// The hint in words: `productName: no device publishes 'X'; published: 'A' (nearest), 'B'`.
pub fn describe(h: &Hint) -> String {
    let list = |v: &[String]| {
        let mut s: Vec<String> = v.iter().take(5).map(|x| format!("'{x}'")).collect();
        if v.len() > 5 {
            s.push(format!("… ({} in all)", v.len()));
        }
        s.join(", ")
    };
    match h.problem.as_str() {
        "not-published" if h.published.is_empty() => format!(
            "no device publishes attribute {} (nor any other in domain {})",
            h.attribute,
            h.attribute.rsplit_once('/').map_or("", |(d, _)| d)
        ),
        "not-published" => format!(
            "no device publishes attribute {}; the driver publishes {} (nearest first)",
            h.attribute,
            list(&h.published)
        ),
        "value-not-published" => format!(
            "no device has {} = '{}'; the devices publish {} (nearest first)",
            h.attribute,
            h.value.as_deref().unwrap_or(""),
            list(&h.published)
        ),
        "version-not-met" => format!(
            "no device has {} {}; the devices publish {} (free devices' first, nearest first)",
            h.attribute,
            h.value.as_deref().unwrap_or(""),
            list(&h.published)
        ),
        _ => format!(
            "{} is typed ({}), not a string or number: comparing it with '{}' is a CEL runtime error (no such overload) on every device",
            h.attribute,
            if h.corrected
                .as_deref()
                .is_some_and(|c| c.contains("semver("))
            {
                "a version, kubernetes.Semver"
            } else {
                "a quantity, kubernetes.Quantity"
            },
            h.value.as_deref().unwrap_or("")
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_with_literals() {
        let r = references(
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName == 'NVIDIA-A100' && device.attributes[\"gpu.nvidia.com\"][\"index\"] >= 2",
        );
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "productName");
        assert_eq!(r[0].literal, Some(("NVIDIA-A100".into(), true)));
        assert_eq!(r[1].name, "index");
        assert_eq!(r[1].op.as_deref(), Some(">="));
        assert_eq!(r[1].literal, Some(("2".into(), false)));
        let r = references(
            "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('a100')",
        );
        assert_eq!(r[0].op, None);
    }

    #[test]
    fn a_typed_comparison_is_read_with_its_literal() {
        let e = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('575.0.0')) >= 0 && true";
        let r = references(e);
        assert_eq!(r[0].compare.as_deref(), Some("semver"));
        assert_eq!(r[0].op.as_deref(), Some(">="));
        assert_eq!(r[0].literal, Some(("575.0.0".into(), true)));
        assert_eq!(
            &e[r[0].span.0..r[0].span.1],
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('575.0.0')) >= 0"
        );
        assert_eq!(version_holds("580.95.5", "575.0.0", ">="), Some(true));
        assert_eq!(version_holds("570.124.6", "575.0.0", ">="), Some(false));
        assert_eq!(version_holds("570.124.6", "570.124.6", "=="), Some(true));
        assert_eq!(version_holds("x", "570.124.6", "=="), None);
        // Not a comparison with 0: no literal is taken.
        let r = references(
            "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('575.0.0')) >= 1",
        );
        assert_eq!(r[0].compare, None);
        assert_eq!(r[0].op, None);
    }

    #[test]
    fn nearest_value_first() {
        let v = crate::analysis::names::nearest_first(
            [
                "NVIDIA A10".to_string(),
                "NVIDIA A100-SXM4-80GB".into(),
                "Tesla T4".into(),
            ],
            "NVIDIA-A100-SXM4-80GB",
        );
        assert_eq!(v[0], "NVIDIA A100-SXM4-80GB");
    }
}
