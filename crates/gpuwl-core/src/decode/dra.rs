//! Reading DRA objects (`resource.k8s.io/v1` DeviceClasses, ResourceSlices,
//! ResourceClaims, ResourceClaimTemplates) from a file or API objects (the live
//! lists are gpuwl's `input::dra`) into
//! [`DraObjects`].
//!
//! Files: what `kubectl get
//! deviceclasses,resourceslices,resourceclaims,resourceclaimtemplates -A -o json|yaml`
//! prints (a `List` of mixed kinds), a `DeviceClassList` / `ResourceSliceList` /
//! `ResourceClaimList` / `ResourceClaimTemplateList`, or one object; JSON or YAML, detected by content, streamed like the
//! node and pod readers (one list item at a time, each at most 64 MiB). Objects of other
//! kinds in a `List` are skipped (a dump of `all` is fine).
//!
//! Errors: one line naming the file, the item and the field, exit 2:
//! `dra.json: items[3] (ResourceSlice node-a-gpus): spec.devices[0].attributes["type"]:
//! expected exactly one of int, bool, string, version`.
//!
//! Live: the four lists, paginated (a cluster that refuses the templates' list still
//! gives the other three); a server that does not serve `resource.k8s.io/v1`
//! (404 on the list) is skipped and said so ([`crate::model::dra::DraSource::Skipped`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use crate::decode::document::{self, array, cut, get, opt_scalar, opt_str};
use crate::error::{Error, FieldError, Result};
use crate::model::dra::{
    AllocatedDevice, Amount, AttrValue, ClaimRequest, CounterSet, CounterUse, Device, DeviceClass,
    DraObjects, RequestSpec, ResourceClaim, ResourceClaimTemplate, ResourceSlice, qualify,
};
use crate::model::quantity::Quantity;

type FieldResult<T> = std::result::Result<T, FieldError>;

/// Reads DRA objects from `path` (`-`: stdin), streaming (see [`read_from`]).
///
/// Errors: [`Error::File`] naming the file (and item and field): unreadable, not JSON or
/// YAML, a field of the wrong type, a quantity that is not one, an attribute with no or two
/// values, an item without `metadata.name`, an object over 64 MiB.
pub fn read_path(path: &Path) -> Result<DraObjects> {
    read_from(document::open(path)?, &path.display().to_string())
}

#[cfg(test)]
/// Parses DRA objects from `text`; `name` starts every error. See [`read_path`].
pub(crate) fn read_str(text: &str, name: &str) -> Result<DraObjects> {
    read_from(text.as_bytes(), name)
}

/// What an object larger than [`document::MAX_OBJECT`] is called in the error.
const TOO_BIG: &str =
    "an object larger than 64 MiB (the API server stores at most ~1.5 MiB per object)";

const EXPECTING: &str = "a List of DeviceClasses, ResourceSlices and ResourceClaims";

/// Reads DRA objects from `reader` the way nodes and pods are read
/// ([`document::read_list`]): the `items` of a list are converted one at a time as they
/// arrive (each bounded to 64 MiB), so memory follows the objects kept, not the file;
/// bytes that cannot start JSON or YAML text fail at once. `name` starts every error.
///
/// Errors: as [`read_path`].
pub fn read_from(reader: impl std::io::Read, name: &str) -> Result<DraObjects> {
    document::read_list(reader, EXPECTING, TOO_BIG, DraSink::default())
        .map_err(|e| Error::file(name, e))
}

/// The DRA reader's part of [`document::read_list`]: whole elements, converted as they
/// arrive; a single object keeps every top-level field.
#[derive(Default)]
struct DraSink {
    out: DraObjects,
}

impl document::ListSink for DraSink {
    type Item = Value;
    type Seed = document::Prune;
    type Out = DraObjects;

    fn seed(&self) -> document::Prune {
        document::Prune(document::Keep::All)
    }

    fn top_field(&self, _key: &str) -> Option<document::Keep> {
        Some(document::Keep::All)
    }

    fn names_kind(item: &Value) -> bool {
        item.get("kind").is_some_and(|k| !k.is_null())
    }

    fn item(
        &mut self,
        index: usize,
        item: Value,
        list_kind: Option<&str>,
    ) -> std::result::Result<(), document::ReadError> {
        let default = list_item_kind(list_kind);
        add(&mut self.out, &item, default).map_err(|error| document::ReadError::Item {
            index,
            who: item
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(|n| {
                    let kind = item
                        .get("kind")
                        .and_then(Value::as_str)
                        .or(default)
                        .unwrap_or("?");
                    format!("{} {}", cut(kind).trim_matches('"'), cut(n))
                }),
            error,
        })
    }

    fn finish(
        mut self,
        top: document::TopObject,
    ) -> std::result::Result<DraObjects, document::ReadError> {
        match top.kind.as_deref() {
            Some(k) if top.saw_items || k == "List" || k.ends_with("List") => Ok(self.out),
            Some(_) => {
                add(&mut self.out, &Value::Object(top.object), None)?;
                Ok(self.out)
            }
            None => Err(FieldError::object(
                "no kind field: expected a List, a DeviceClass, ResourceSlice or ResourceClaim",
            ))?,
        }
    }
}

/// The kind of the items of a typed list (`DeviceClassList` → `DeviceClass`).
fn list_item_kind(list: Option<&str>) -> Option<&str> {
    list.and_then(|k| k.strip_suffix("List"))
        .filter(|s| !s.is_empty())
}

fn add(out: &mut DraObjects, item: &Value, default_kind: Option<&str>) -> FieldResult<()> {
    if !item.is_object() {
        return Err(FieldError::object("expected an object"));
    }
    match opt_str(item, "kind")?.or(default_kind) {
        Some("DeviceClass") => out.device_classes.push(device_class(item)?),
        Some("ResourceSlice") => out.resource_slices.push(resource_slice(item)?),
        Some("ResourceClaim") => out.resource_claims.push(resource_claim(item)?),
        Some("ResourceClaimTemplate") => out
            .resource_claim_templates
            .push(resource_claim_template(item)?),
        _ => {}
    }
    Ok(())
}

fn name_of(v: &Value) -> FieldResult<String> {
    match opt_str(v, "metadata.name")? {
        Some(n) if !n.is_empty() => Ok(n.to_owned()),
        _ => Err(FieldError::new("metadata.name", "missing")),
    }
}

fn selectors(v: Option<&Value>, path: &str) -> FieldResult<Vec<String>> {
    let mut out = Vec::new();
    for (i, s) in array(v, path)?.iter().enumerate() {
        let p = format!("{path}[{i}].cel.expression");
        match opt_scalar(get(s, "cel.expression"), &p)? {
            Some(e) if !e.trim().is_empty() => out.push(e),
            _ => return Err(FieldError::new(p, "missing")),
        }
    }
    Ok(out)
}

/// One DeviceClass from its API object (JSON).
///
/// Errors: the field that is missing or of the wrong type.
pub fn device_class(v: &Value) -> FieldResult<DeviceClass> {
    Ok(DeviceClass {
        name: name_of(v)?,
        selectors: selectors(get(v, "spec.selectors"), "spec.selectors")?,
        extended_resource_name: opt_str(v, "spec.extendedResourceName")?
            .filter(|s| !s.is_empty())
            .map(str::to_owned),
    })
}

fn amount(v: Option<&Value>, path: &str) -> FieldResult<Amount> {
    let Some(raw) = opt_scalar(v, path)? else {
        return Err(FieldError::new(path, "missing"));
    };
    let q = Quantity::parse(&raw)
        .map_err(|e| FieldError::new(path, format!("{} is not a quantity ({e})", cut(&raw))))?;
    Ok(Amount {
        value: q.to_count().ok(),
        raw,
    })
}

fn counters(v: Option<&Value>, path: &str) -> FieldResult<BTreeMap<String, Amount>> {
    match v {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, c)| {
                let p = format!("{path}[{k:?}].value");
                Ok((k.clone(), amount(c.get("value"), &p)?))
            })
            .collect(),
        Some(_) => Err(FieldError::new(path, "expected a map")),
    }
}

fn attribute(v: &Value, path: &str) -> FieldResult<AttrValue> {
    let mut found = Vec::new();
    if let Some(x) = v.get("int").filter(|x| !x.is_null()) {
        found.push(AttrValue::Int(x.as_i64().ok_or_else(|| {
            FieldError::new(format!("{path}.int"), "expected an integer")
        })?));
    }
    if let Some(x) = v.get("bool").filter(|x| !x.is_null()) {
        found.push(AttrValue::Bool(x.as_bool().ok_or_else(|| {
            FieldError::new(format!("{path}.bool"), "expected true or false")
        })?));
    }
    for (k, make) in [
        ("string", AttrValue::String as fn(String) -> AttrValue),
        ("version", AttrValue::Version),
    ] {
        if let Some(x) = v.get(k).filter(|x| !x.is_null()) {
            found.push(make(
                x.as_str()
                    .ok_or_else(|| FieldError::new(format!("{path}.{k}"), "expected a string"))?
                    .to_owned(),
            ));
        }
    }
    match found.len() {
        1 => Ok(found.remove(0)),
        _ => Err(FieldError::new(
            path,
            "expected exactly one of int, bool, string, version",
        )),
    }
}

/// One ResourceSlice from its API object (JSON).
///
/// Errors: the field that is missing or of the wrong type.
pub fn resource_slice(v: &Value) -> FieldResult<ResourceSlice> {
    let name = name_of(v)?;
    let driver = match opt_str(v, "spec.driver")? {
        Some(d) if !d.is_empty() => d.to_owned(),
        _ => return Err(FieldError::new("spec.driver", "missing")),
    };
    let pool = opt_str(v, "spec.pool.name")?.unwrap_or_default().to_owned();
    let node_name = opt_str(v, "spec.nodeName")?
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let all_nodes = matches!(get(v, "spec.allNodes"), Some(Value::Bool(true)));
    let mut shared_counters = Vec::new();
    for (i, s) in array(get(v, "spec.sharedCounters"), "spec.sharedCounters")?
        .iter()
        .enumerate()
    {
        let p = format!("spec.sharedCounters[{i}]");
        let Some(n) = opt_scalar(s.get("name"), &format!("{p}.name"))? else {
            return Err(FieldError::new(format!("{p}.name"), "missing"));
        };
        shared_counters.push(CounterSet {
            name: n,
            counters: counters(s.get("counters"), &format!("{p}.counters"))?,
        });
    }
    let mut devices = Vec::new();
    for (i, d) in array(get(v, "spec.devices"), "spec.devices")?
        .iter()
        .enumerate()
    {
        let p = format!("spec.devices[{i}]");
        let Some(dn) = opt_scalar(d.get("name"), &format!("{p}.name"))? else {
            return Err(FieldError::new(format!("{p}.name"), "missing"));
        };
        let mut attributes = BTreeMap::new();
        match d.get("attributes") {
            None | Some(Value::Null) => {}
            Some(Value::Object(m)) => {
                for (k, a) in m {
                    let ap = format!("{p}.attributes[{k:?}]");
                    attributes.insert(qualify(&driver, k), attribute(a, &ap)?);
                }
            }
            Some(_) => return Err(FieldError::new(format!("{p}.attributes"), "expected a map")),
        }
        let capacity = counters(d.get("capacity"), &format!("{p}.capacity"))?
            .into_iter()
            .map(|(k, a)| (qualify(&driver, &k), a))
            .collect();
        let mut consumes_counters = Vec::new();
        let cp = format!("{p}.consumesCounters");
        for (j, c) in array(d.get("consumesCounters"), &cp)?.iter().enumerate() {
            let jp = format!("{cp}[{j}]");
            let Some(set) = opt_scalar(c.get("counterSet"), &format!("{jp}.counterSet"))? else {
                return Err(FieldError::new(format!("{jp}.counterSet"), "missing"));
            };
            consumes_counters.push(CounterUse {
                counter_set: set,
                counters: counters(c.get("counters"), &format!("{jp}.counters"))?,
            });
        }
        devices.push(Device {
            name: dn,
            attributes,
            capacity,
            consumes_counters,
            node_name: opt_scalar(d.get("nodeName"), &format!("{p}.nodeName"))?
                .filter(|s| !s.is_empty()),
        });
    }
    Ok(ResourceSlice {
        name,
        driver,
        pool,
        node_name,
        all_nodes,
        shared_counters,
        devices,
    })
}

fn request_spec(v: &Value, path: &str, sub: Option<String>) -> FieldResult<RequestSpec> {
    let class = match opt_scalar(v.get("deviceClassName"), &format!("{path}.deviceClassName"))? {
        Some(c) if !c.is_empty() => c,
        _ => {
            return Err(FieldError::new(
                format!("{path}.deviceClassName"),
                "missing",
            ));
        }
    };
    let mode = opt_scalar(v.get("allocationMode"), &format!("{path}.allocationMode"))?;
    let count = match v.get("count") {
        None | Some(Value::Null) => 1,
        Some(c) => c.as_i64().filter(|n| *n > 0).ok_or_else(|| {
            FieldError::new(format!("{path}.count"), "expected a positive integer")
        })?,
    };
    Ok(RequestSpec {
        subrequest: sub,
        device_class: class,
        selectors: selectors(v.get("selectors"), &format!("{path}.selectors"))?,
        all: mode.as_deref() == Some("All"),
        count,
    })
}

/// The requests at `rp` (`spec.devices.requests` of a claim, `spec.spec.devices.requests`
/// of a template).
fn claim_requests(v: &Value, rp: &str) -> FieldResult<Vec<ClaimRequest>> {
    let mut requests = Vec::new();
    for (i, r) in array(get(v, rp), rp)?.iter().enumerate() {
        let p = format!("{rp}[{i}]");
        let Some(rn) = opt_scalar(r.get("name"), &format!("{p}.name"))? else {
            return Err(FieldError::new(format!("{p}.name"), "missing"));
        };
        let mut alternatives = Vec::new();
        if let Some(ex) = r.get("exactly").filter(|x| !x.is_null()) {
            alternatives.push(request_spec(ex, &format!("{p}.exactly"), None)?);
        }
        let fp = format!("{p}.firstAvailable");
        for (j, s) in array(r.get("firstAvailable"), &fp)?.iter().enumerate() {
            let sp = format!("{fp}[{j}]");
            let sub = opt_scalar(s.get("name"), &format!("{sp}.name"))?;
            alternatives.push(request_spec(s, &sp, sub)?);
        }
        if alternatives.is_empty() {
            return Err(FieldError::new(p, "neither exactly nor firstAvailable"));
        }
        requests.push(ClaimRequest {
            name: rn,
            alternatives,
        });
    }
    Ok(requests)
}

/// One ResourceClaim from its API object (JSON).
///
/// Errors: the field that is missing or of the wrong type.
pub fn resource_claim(v: &Value) -> FieldResult<ResourceClaim> {
    let name = name_of(v)?;
    let namespace = opt_str(v, "metadata.namespace")?
        .unwrap_or("default")
        .to_owned();
    let requests = claim_requests(v, "spec.devices.requests")?;
    let allocated = !matches!(get(v, "status.allocation"), None | Some(Value::Null));
    let mut results = Vec::new();
    let ap = "status.allocation.devices.results";
    for (i, r) in array(get(v, ap), ap)?.iter().enumerate() {
        let p = format!("{ap}[{i}]");
        let f = |k: &str| -> FieldResult<String> {
            opt_scalar(r.get(k), &format!("{p}.{k}"))?
                .ok_or_else(|| FieldError::new(format!("{p}.{k}"), "missing"))
        };
        results.push(AllocatedDevice {
            request: f("request")?,
            driver: f("driver")?,
            pool: f("pool")?,
            device: f("device")?,
        });
    }
    let mut reserved_for = Vec::new();
    for (i, r) in array(get(v, "status.reservedFor"), "status.reservedFor")?
        .iter()
        .enumerate()
    {
        let p = format!("status.reservedFor[{i}]");
        let res = opt_scalar(r.get("resource"), &format!("{p}.resource"))?.unwrap_or_default();
        let n = opt_scalar(r.get("name"), &format!("{p}.name"))?.unwrap_or_default();
        reserved_for.push(format!("{res}/{n}"));
    }
    let mut allocated_nodes = Vec::new();
    let tp = "status.allocation.nodeSelector.nodeSelectorTerms";
    for (i, t) in array(get(v, tp), tp)?.iter().enumerate() {
        let fp = format!("{tp}[{i}].matchFields");
        for (j, f) in array(t.get("matchFields"), &fp)?.iter().enumerate() {
            let p = format!("{fp}[{j}]");
            let key = opt_scalar(f.get("key"), &format!("{p}.key"))?;
            let op = opt_scalar(f.get("operator"), &format!("{p}.operator"))?;
            if key.as_deref() == Some("metadata.name") && op.as_deref() == Some("In") {
                for (k, n) in array(f.get("values"), &format!("{p}.values"))?
                    .iter()
                    .enumerate()
                {
                    if let Some(n) = opt_scalar(Some(n), &format!("{p}.values[{k}]"))? {
                        allocated_nodes.push(n);
                    }
                }
            }
        }
    }
    Ok(ResourceClaim {
        namespace,
        name,
        requests,
        allocated,
        results,
        reserved_for,
        allocated_nodes,
    })
}

/// One ResourceClaimTemplate from its API object (JSON).
///
/// Errors: the field that is missing or of the wrong type.
pub fn resource_claim_template(v: &Value) -> FieldResult<ResourceClaimTemplate> {
    Ok(ResourceClaimTemplate {
        name: name_of(v)?,
        namespace: opt_str(v, "metadata.namespace")?
            .unwrap_or("default")
            .to_owned(),
        requests: claim_requests(v, "spec.spec.devices.requests")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"{"apiVersion":"v1","kind":"List","items":[
      {"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"gpu.example.com"},
       "spec":{"selectors":[{"cel":{"expression":"device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}},
      {"apiVersion":"resource.k8s.io/v1","kind":"ResourceSlice","metadata":{"name":"n1-gpus"},
       "spec":{"driver":"gpu.nvidia.com","pool":{"name":"n1","generation":1,"resourceSliceCount":1},"nodeName":"n1",
         "sharedCounters":[{"name":"gpu-0","counters":{"gpu":{"value":"1"}}}],
         "devices":[{"name":"gpu-0","attributes":{"type":{"string":"gpu"},"uuid":{"string":"GPU-1"},"driverVersion":{"version":"570.1.0"}},
                     "capacity":{"memory":{"value":"80Gi"}},
                     "consumesCounters":[{"counterSet":"gpu-0","counters":{"gpu":{"value":"1"}}}]}]}},
      {"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"c","namespace":"ns"},
       "spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.example.com","count":2}}]}},
       "status":{"allocation":{"devices":{"results":[{"request":"gpu","driver":"gpu.nvidia.com","pool":"n1","device":"gpu-0"}]}},
                 "reservedFor":[{"resource":"pods","name":"p","uid":"u"}]}},
      {"apiVersion":"v1","kind":"Pod","metadata":{"name":"ignored"}}]}"#;

    #[test]
    fn typed_list_with_items_before_kind_is_read_as_kubectl_prints_it() {
        // kubectl writes `items` before `kind`; a typed list's items carry no kind.
        let text = r#"{"apiVersion":"resource.k8s.io/v1","items":[
          {"metadata":{"name":"gpu.example.com"},"spec":{"selectors":[]}},
          {"metadata":{"name":"vfio.example.com"}}],
          "kind":"DeviceClassList","metadata":{"resourceVersion":"7"}}"#;
        let d = read_str(text, "classes.json").unwrap();
        let names: Vec<&str> = d.device_classes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["gpu.example.com", "vfio.example.com"]);
    }

    #[test]
    fn bytes_that_are_not_text_and_oversized_objects_fail_early() {
        let e = read_from(&[0u8; 1 << 20][..], "/dev/zero").unwrap_err();
        assert!(e.to_string().starts_with("/dev/zero: "), "{e}");
        assert!(e.is_input());
        // One item over 64 MiB is refused while it is read, naming the item.
        let big = format!(
            r#"{{"kind":"List","items":[{{"kind":"DeviceClass","metadata":{{"name":"{}"}}}}]}}"#,
            // Over the limit by more than the reader's 64 KiB buffer.
            "x".repeat((64 << 20) + (256 << 10))
        );
        let Err(e) = read_str(&big, "big.json") else {
            panic!("a 64 MiB item was accepted");
        };
        let e = e.to_string();
        assert!(
            e.starts_with("big.json: items[0]: an object larger than 64 MiB"),
            "{}",
            &e[..e.len().min(200)]
        );
    }

    #[test]
    fn mixed_list() {
        let d = read_str(LIST, "t").unwrap();
        assert_eq!(d.device_classes.len(), 1);
        assert_eq!(d.device_classes[0].selectors.len(), 1);
        let s = &d.resource_slices[0];
        assert_eq!(s.node_name.as_deref(), Some("n1"));
        assert_eq!(s.shared_counters[0].counters["gpu"].value, Some(1));
        let dev = &s.devices[0];
        assert_eq!(
            dev.attributes["gpu.nvidia.com/type"],
            AttrValue::String("gpu".into())
        );
        assert_eq!(
            dev.attributes["gpu.nvidia.com/driverVersion"],
            AttrValue::Version("570.1.0".into())
        );
        assert_eq!(dev.capacity["gpu.nvidia.com/memory"].value, Some(80 << 30));
        assert_eq!(dev.consumes_counters[0].counter_set, "gpu-0");
        let c = &d.resource_claims[0];
        assert_eq!(c.key(), "ns/c");
        assert_eq!(c.requests[0].alternatives[0].count, 2);
        assert!(c.allocated);
        assert_eq!(c.results[0].device, "gpu-0");
        assert_eq!(c.reserved_for, vec!["pods/p".to_string()]);
    }

    #[test]
    fn yaml_single_object() {
        let d = read_str(
            "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata:\n  name: c\nspec:\n  devices:\n    requests:\n    - name: r\n      firstAvailable:\n      - name: big\n        deviceClassName: a\n      - name: small\n        deviceClassName: b\n        allocationMode: All\n",
            "t",
        )
        .unwrap();
        let c = &d.resource_claims[0];
        assert_eq!(c.namespace, "default");
        assert!(!c.allocated);
        let alt = &c.requests[0].alternatives;
        assert_eq!(alt.len(), 2);
        assert_eq!(alt[1].subrequest.as_deref(), Some("small"));
        assert!(alt[1].all);
    }

    #[test]
    fn bad_input_names_file_item_and_field() {
        for (s, want) in [
            ("", "t: empty input"),
            (
                r#"{"kind":"List","items":[{"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","devices":[{"name":"x","attributes":{"type":{"string":"gpu","int":1}}}]}}]}"#,
                r#"t: items[0] (ResourceSlice "s"): spec.devices[0].attributes["type"]: expected exactly one of int, bool, string, version"#,
            ),
            (
                r#"{"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{}}"#,
                "t: spec.driver: missing",
            ),
            (
                r#"{"kind":"ResourceSlice","metadata":{"name":"s"},"spec":{"driver":"d","sharedCounters":[{"name":"c","counters":{"g":{"value":"lots"}}}]}}"#,
                r#"t: spec.sharedCounters[0].counters["g"].value: "lots" is not a quantity"#,
            ),
            (
                r#"{"kind":"ResourceClaim","metadata":{"name":"c"},"spec":{"devices":{"requests":[{"name":"r"}]}}}"#,
                "t: spec.devices.requests[0]: neither exactly nor firstAvailable",
            ),
            (
                r#"{"kind":"DeviceClass","metadata":{"name":"c"},"spec":{"selectors":[{"cel":{}}]}}"#,
                "t: spec.selectors[0].cel.expression: missing",
            ),
            (r#"{"items":[]}"#, "t: no kind field"),
        ] {
            let e = read_str(s, "t").unwrap_err();
            assert!(e.is_input(), "{e}");
            let m = e.to_string();
            assert!(m.contains(want), "{s} → {m}");
            assert!(!m.contains('\n'));
        }
    }
}
