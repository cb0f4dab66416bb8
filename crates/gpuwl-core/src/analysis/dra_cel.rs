//! The CEL environment DRA selectors are evaluated in, as the API server and the
//! scheduler's allocator build it, on the `cel` crate (cel-rust/cel-rust).
//!
//! kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`:
//! - `device.driver` is a string; `device.attributes[domain][name]` holds an `int`, `bool`,
//!   `string` or — for a `version` attribute — a `kubernetes.Semver`, never a string;
//!   `device.capacity[domain][name]` is a `kubernetes.Quantity`, never a number;
//! - looking up a domain no attribute uses gives an empty map; looking up a name the
//!   device does not publish is a runtime error (`no such key`);
//! - the environment is Kubernetes' base library (the CEL standard library, the strings
//!   extension: `lowerAscii()`, `matches()`...) plus the semver library
//!   (`staging/src/k8s.io/apiserver/pkg/cel/library/semverlib.go`: `semver()`,
//!   `isSemver()`, `major()`/`minor()`/`patch()`, `isGreaterThan()`, `isLessThan()`,
//!   `compareTo()`) and the quantity library (`.../library/quantity.go`: `quantity()`,
//!   `isQuantity()`, `compareTo()`, `isGreaterThan()`, `isLessThan()`, `asInteger()`,
//!   `isInteger()`, `sign()`), both added here as overloads of the two opaque types;
//! - a `Semver` or `Quantity` compared with `==` to a value of another type is a runtime
//!   error, `no such overload` (`staging/src/k8s.io/apiserver/pkg/cel/semver.go`,
//!   `quantity.go`: `Equal` answers `MaybeNoSuchOverloadErr`); `<`, `>` on them have no
//!   overload either.
//!
//! Differences, stated: the `cel` crate's `==` cannot fail, so a Semver/Quantity equality
//! against another type is recorded while evaluating and reported as that error after the
//! evaluation (also when `&&`/`||` would have absorbed it); no type checking happens
//! before evaluation (the API server refuses some expressions at creation that fail here
//! only at run time); no cost limit.

use std::any::Any;
use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, LazyLock};

use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, Type};
use cel::common::value::{StaticVal, Val};
use cel::{Context, Env, ExecutionError, Program};

use crate::decode::document;
use crate::model::dra::{Amount, AttrValue, Device};
use crate::model::quantity::Quantity as Q;

static SEMVER_TYPE: LazyLock<Type> = LazyLock::new(|| Type::new_opaque_type("kubernetes.Semver"));
static QUANTITY_TYPE: LazyLock<Type> =
    LazyLock::new(|| Type::new_opaque_type("kubernetes.Quantity"));

thread_local! {
    /// Set when a Semver or Quantity was compared with `==` to another type.
    static OVERLOAD_MISS: Cell<Option<(&'static str, &'static str)>> = const { Cell::new(None) };
}

fn type_name(v: &dyn Val) -> &'static str {
    match v.get_type().name() {
        "string" => "string",
        "int" => "int",
        "uint" => "uint",
        "double" => "double",
        "bool" => "bool",
        "kubernetes.Semver" => "kubernetes.Semver",
        "kubernetes.Quantity" => "kubernetes.Quantity",
        "map" => "map",
        "list" => "list",
        _ => "another type",
    }
}

/// A semantic version (`kubernetes.Semver`): what a `version` attribute is in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Semver(pub semver::Version);

impl Semver {
    /// Precedence per semver.org: build metadata does not count (blang/semver `Compare`).
    fn cmp_precedence(&self, o: &Semver) -> Ordering {
        let (a, b) = (&self.0, &o.0);
        (a.major, a.minor, a.patch, &a.pre).cmp(&(b.major, b.minor, b.patch, &b.pre))
    }
}

impl Val for Semver {
    fn get_type(&self) -> &Type {
        &SEMVER_TYPE
    }
    fn cel_type() -> &'static Type {
        &SEMVER_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<Semver>() {
            Some(o) => self.cmp_precedence(o) == Ordering::Equal,
            None => {
                OVERLOAD_MISS.with(|m| m.set(Some(("kubernetes.Semver", type_name(other)))));
                false
            }
        }
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Semver {}

/// A quantity (`kubernetes.Quantity`): what a capacity is in CEL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quantity(pub Q);

impl Val for Quantity {
    fn get_type(&self) -> &Type {
        &QUANTITY_TYPE
    }
    fn cel_type() -> &'static Type {
        &QUANTITY_TYPE
    }
    fn equals(&self, other: &dyn Val) -> bool {
        match other.downcast_ref::<Quantity>() {
            Some(o) => self.0 == o.0,
            None => {
                OVERLOAD_MISS.with(|m| m.set(Some(("kubernetes.Quantity", type_name(other)))));
                false
            }
        }
    }
    fn clone_as_boxed<'v>(&self) -> Box<dyn Val + 'v> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }
}
impl StaticVal for Quantity {}

fn parse_semver(s: &str, normalize: bool) -> Result<Semver, String> {
    let text = if normalize {
        let t = s.strip_prefix('v').unwrap_or(s);
        let mut parts: Vec<String> = t.splitn(3, '.').map(str::to_owned).collect();
        for p in parts.iter_mut() {
            if p.len() > 1 {
                let trimmed = p.trim_start_matches('0');
                *p = if trimmed.is_empty() || !trimmed.starts_with(|c: char| c.is_ascii_digit()) {
                    format!("0{trimmed}")
                } else {
                    trimmed.to_owned()
                };
            }
        }
        if parts.len() < 3 {
            if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
                return Err("short version cannot contain PreRelease/Build meta data".into());
            }
            while parts.len() < 3 {
                parts.push("0".into());
            }
        }
        parts.join(".")
    } else {
        s.to_owned()
    };
    semver::Version::parse(&text)
        .map(Semver)
        .map_err(|e| e.to_string())
}

fn semver_fn(s: &CelString<'_>) -> Result<Semver, ExecutionError> {
    parse_semver(s.inner(), false).map_err(|e| ExecutionError::function_error("semver", e))
}
fn semver_normalize(s: &CelString<'_>, n: &CelBool) -> Result<Semver, ExecutionError> {
    parse_semver(s.inner(), *n.inner()).map_err(|e| ExecutionError::function_error("semver", e))
}
fn is_semver(s: &CelString<'_>) -> CelBool {
    CelBool::from(parse_semver(s.inner(), false).is_ok())
}
fn is_semver_normalize(s: &CelString<'_>, n: &CelBool) -> CelBool {
    CelBool::from(parse_semver(s.inner(), *n.inner()).is_ok())
}
fn semver_major(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.major).unwrap_or(i64::MAX))
}
fn semver_minor(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.minor).unwrap_or(i64::MAX))
}
fn semver_patch(v: &Semver) -> CelInt {
    CelInt::from(i64::try_from(v.0.patch).unwrap_or(i64::MAX))
}
fn semver_gt(a: &Semver, b: &Semver) -> CelBool {
    CelBool::from(a.cmp_precedence(b) == Ordering::Greater)
}
fn semver_lt(a: &Semver, b: &Semver) -> CelBool {
    CelBool::from(a.cmp_precedence(b) == Ordering::Less)
}
fn semver_cmp(a: &Semver, b: &Semver) -> CelInt {
    CelInt::from(a.cmp_precedence(b) as i64)
}

fn quantity_fn(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    Q::parse(s.inner())
        .map(Quantity)
        .map_err(|e| ExecutionError::function_error("quantity", e.to_string()))
}
fn is_quantity(s: &CelString<'_>) -> CelBool {
    CelBool::from(Q::parse(s.inner()).is_ok())
}
fn quantity_gt(a: &Quantity, b: &Quantity) -> CelBool {
    CelBool::from(a.0 > b.0)
}
fn quantity_lt(a: &Quantity, b: &Quantity) -> CelBool {
    CelBool::from(a.0 < b.0)
}
fn quantity_cmp(a: &Quantity, b: &Quantity) -> CelInt {
    CelInt::from(a.0.cmp(&b.0) as i64)
}
fn quantity_is_integer(a: &Quantity) -> CelBool {
    CelBool::from(a.0.to_i64().is_some())
}
fn quantity_as_integer(a: &Quantity) -> Result<CelInt, ExecutionError> {
    a.0.to_i64().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}
fn quantity_sign(a: &Quantity) -> CelInt {
    CelInt::from(if a.0.is_positive() {
        1
    } else if a.0.is_negative() {
        -1
    } else {
        0
    })
}

fn kubernetes_libraries(env: &mut Env) -> Result<(), cel::DeclarationError> {
    cel::add_overload!(env, fn semver_fn: (CelString) -> Result<Semver>, name = "semver", id = "string_to_semver")?;
    cel::add_overload!(env, fn semver_normalize: (CelString, CelBool) -> Result<Semver>, name = "semver", id = "string_bool_to_semver")?;
    cel::add_overload!(env, fn is_semver: (CelString) -> CelBool, name = "isSemver", id = "is_semver_string")?;
    cel::add_overload!(env, fn is_semver_normalize: (CelString, CelBool) -> CelBool, name = "isSemver", id = "is_semver_string_bool")?;
    cel::add_member_overload!(env, fn semver_major: (Semver) -> CelInt, name = "major", id = "semver_major")?;
    cel::add_member_overload!(env, fn semver_minor: (Semver) -> CelInt, name = "minor", id = "semver_minor")?;
    cel::add_member_overload!(env, fn semver_patch: (Semver) -> CelInt, name = "patch", id = "semver_patch")?;
    cel::add_member_overload!(env, fn semver_gt: (Semver, Semver) -> CelBool, name = "isGreaterThan", id = "semver_is_greater_than")?;
    cel::add_member_overload!(env, fn semver_lt: (Semver, Semver) -> CelBool, name = "isLessThan", id = "semver_is_less_than")?;
    cel::add_member_overload!(env, fn semver_cmp: (Semver, Semver) -> CelInt, name = "compareTo", id = "semver_compare_to")?;
    cel::add_overload!(env, fn quantity_fn: (CelString) -> Result<Quantity>, name = "quantity", id = "string_to_quantity")?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool, name = "isQuantity", id = "is_quantity_string")?;
    cel::add_member_overload!(env, fn quantity_gt: (Quantity, Quantity) -> CelBool, name = "isGreaterThan", id = "quantity_is_greater_than")?;
    cel::add_member_overload!(env, fn quantity_lt: (Quantity, Quantity) -> CelBool, name = "isLessThan", id = "quantity_is_less_than")?;
    cel::add_member_overload!(env, fn quantity_cmp: (Quantity, Quantity) -> CelInt, name = "compareTo", id = "quantity_compare_to")?;
    cel::add_member_overload!(env, fn quantity_is_integer: (Quantity) -> CelBool, name = "isInteger", id = "quantity_is_integer")?;
    cel::add_member_overload!(env, fn quantity_as_integer: (Quantity) -> Result<CelInt>, name = "asInteger", id = "quantity_get_integer")?;
    cel::add_member_overload!(env, fn quantity_sign: (Quantity) -> CelInt, name = "sign", id = "quantity_get_sign")?;
    Ok(())
}

/// The shared environment: the standard library, the strings extension, the semver and
/// quantity libraries.
pub static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)
        .expect("the strings extension declares no standard overload");
    env.add_extension(kubernetes_libraries)
        .expect("the Kubernetes libraries declare no standard overload");
    Arc::new(env)
});

/// Compiles `expr` in [`ENV`].
///
/// Errors: the parse error, on one line.
pub fn compile(expr: &str) -> Result<Program, String> {
    ENV.compile(expr)
        .map_err(|e| document::one_line(&e.to_string()))
}

fn attr_val(v: &AttrValue) -> Box<dyn Val> {
    match v {
        AttrValue::Int(i) => Box::new(CelInt::from(*i)),
        AttrValue::Bool(b) => Box::new(CelBool::from(*b)),
        AttrValue::String(s) => Box::new(CelString::from(s.clone())),
        // The API server refuses a version that is not semver; one that slips through is
        // kept as a string (the allocator reports an error for it).
        AttrValue::Version(s) => match parse_semver(s, false) {
            Ok(v) => Box::new(v),
            Err(_) => Box::new(CelString::from(s.clone())),
        },
    }
}

fn amount_val(a: &Amount) -> Box<dyn Val> {
    match Q::parse(&a.raw) {
        Ok(q) => Box::new(Quantity(q)),
        Err(_) => Box::new(CelString::from(a.raw.clone())),
    }
}

fn split(q: &str) -> (String, String) {
    match q.rsplit_once('/') {
        Some((d, n)) => (d.to_owned(), n.to_owned()),
        None => (String::new(), q.to_owned()),
    }
}

fn domain_map(
    entries: Vec<(String, String, Box<dyn Val>)>,
    domains: &BTreeSet<String>,
) -> Box<dyn Val> {
    let mut by: HashMap<String, HashMap<CelMapKey<'static>, Box<dyn Val>>> = domains
        .iter()
        .map(|d| (d.clone(), HashMap::new()))
        .collect();
    for (d, n, v) in entries {
        by.entry(d).or_default().insert(CelMapKey::from(n), v);
    }
    let outer: HashMap<CelMapKey<'static>, Box<dyn Val>> = by
        .into_iter()
        .map(|(d, m)| {
            (
                CelMapKey::from(d),
                Box::new(CelMap::from(m)) as Box<dyn Val>,
            )
        })
        .collect();
    Box::new(CelMap::from(outer))
}

/// The CEL `device` variable of device `d` of `driver`: `driver`, `attributes` and
/// `capacity` as maps domain → name → value; every domain of `domains` is present (an
/// empty map when the device has none in it), as unknown domains answer on the API server.
pub(crate) fn device_val(driver: &str, d: &Device, domains: &BTreeSet<String>) -> Box<dyn Val> {
    let attrs = d
        .attributes
        .iter()
        .map(|(q, v)| {
            let (dom, n) = split(q);
            (dom, n, attr_val(v))
        })
        .collect();
    let caps = d
        .capacity
        .iter()
        .map(|(q, v)| {
            let (dom, n) = split(q);
            (dom, n, amount_val(v))
        })
        .collect();
    let mut top: HashMap<CelMapKey<'static>, Box<dyn Val>> = HashMap::new();
    top.insert(
        CelMapKey::from("driver".to_string()),
        Box::new(CelString::from(driver.to_owned())),
    );
    top.insert(
        CelMapKey::from("attributes".to_string()),
        domain_map(attrs, domains),
    );
    top.insert(
        CelMapKey::from("capacity".to_string()),
        domain_map(caps, domains),
    );
    top.insert(
        CelMapKey::from("allowMultipleAllocations".to_string()),
        Box::new(CelBool::from(false)),
    );
    Box::new(CelMap::from(top))
}

/// Runs `program` on `device` (from [`device_val`]): `Ok(true|false)`, or the runtime
/// error as the allocator words it (`no such key: index`, `no such overload`).
pub fn run(program: &Program, device: &dyn Val) -> Result<bool, String> {
    OVERLOAD_MISS.with(|m| m.set(None));
    let mut ctx = Context::with_env(Arc::clone(&ENV));
    ctx.add_variable_as_val("device", device.clone_as_boxed());
    let out = program.execute(&ctx);
    if let Some((a, b)) = OVERLOAD_MISS.with(|m| m.take()) {
        return Err(format!(
            "no such overload: {a} == {b} (a {a} compares only with another {a})"
        ));
    }
    match out {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("gives {other:?}, not a bool")),
        Err(ExecutionError::NoSuchKey(k)) => Err(format!("no such key: {k}")),
        Err(e) => Err(document::one_line(&e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn device() -> Device {
        let mut attributes = BTreeMap::new();
        attributes.insert(
            "gpu.nvidia.com/type".into(),
            AttrValue::String("gpu".into()),
        );
        attributes.insert(
            "gpu.nvidia.com/productName".into(),
            AttrValue::String("NVIDIA A100-SXM4-80GB".into()),
        );
        attributes.insert(
            "gpu.nvidia.com/driverVersion".into(),
            AttrValue::Version("580.95.5".into()),
        );
        attributes.insert("gpu.nvidia.com/index".into(), AttrValue::Int(3));
        let mut capacity = BTreeMap::new();
        capacity.insert(
            "gpu.nvidia.com/memory".into(),
            Amount {
                raw: "80Gi".into(),
                value: Some(80 << 30),
            },
        );
        Device {
            name: "gpu-0".into(),
            attributes,
            capacity,
            consumes_counters: Vec::new(),
            node_name: None,
        }
    }

    fn eval(expr: &str) -> Result<bool, String> {
        let domains: BTreeSet<String> = ["gpu.nvidia.com".to_string(), "x.example.com".into()]
            .into_iter()
            .collect();
        let d = device_val("gpu.nvidia.com", &device(), &domains);
        run(&compile(expr)?, d.as_ref())
    }

    #[test]
    fn versions_are_semver_not_strings() {
        let e =
            eval("device.attributes['gpu.nvidia.com'].driverVersion == '580.95.5'").unwrap_err();
        assert!(e.starts_with("no such overload"), "{e}");
        assert_eq!(
            eval(
                "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('570.0.0')) >= 0"
            ),
            Ok(true)
        );
        assert_eq!(
            eval("device.attributes['gpu.nvidia.com'].driverVersion == semver('580.95.5')"),
            Ok(true)
        );
        assert_eq!(
            eval(
                "device.attributes['gpu.nvidia.com'].driverVersion.isLessThan(semver('v580.96', true))"
            ),
            Ok(true)
        );
        assert_eq!(
            eval("device.attributes['gpu.nvidia.com'].driverVersion.major() == 580"),
            Ok(true)
        );
        // A string on the left of == is simply unequal (cel-go's String.Equal).
        assert_eq!(
            eval("'580.95.5' == device.attributes['gpu.nvidia.com'].driverVersion"),
            Ok(false)
        );
        assert!(
            eval("device.attributes['gpu.nvidia.com'].driverVersion > semver('1.0.0')").is_err()
        );
    }

    #[test]
    fn capacities_are_quantities() {
        assert_eq!(
            eval("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
            Ok(true)
        );
        assert_eq!(
            eval("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))"),
            Ok(false)
        );
        assert!(eval("device.capacity['gpu.nvidia.com'].memory >= 1").is_err());
    }

    #[test]
    fn missing_keys_strings_and_domains() {
        assert_eq!(
            eval("device.attributes['gpu.nvidia.com'].uuid == 'x'"),
            Err("no such key: uuid".into())
        );
        assert_eq!(
            eval(
                "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*a100.*$')"
            ),
            Ok(true)
        );
        assert_eq!(
            eval("!('x' in device.attributes['x.example.com'])"),
            Ok(true)
        );
        assert_eq!(
            eval(
                "device.attributes['gpu.nvidia.com'].index == 3 && device.driver == 'gpu.nvidia.com'"
            ),
            Ok(true)
        );
    }
}
