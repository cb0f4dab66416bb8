//! An exact parser of Kubernetes resource quantities.
//!
//! Grammar (kubernetes/apimachinery `pkg/api/resource/quantity.go`, doc comment of
//! `Quantity`):
//!
//! ```text
//! <quantity>        ::= <signedNumber><suffix>
//! <signedNumber>    ::= <number> | <sign><number>
//! <sign>            ::= "+" | "-"
//! <number>          ::= <digits> | <digits>.<digits> | <digits>. | .<digits>
//! <suffix>          ::= <binarySI> | <decimalExponent> | <decimalSI>
//! <binarySI>        ::= Ki | Mi | Gi | Ti | Pi | Ei
//! <decimalSI>       ::= n | u | m | "" | k | M | G | T | P | E
//! <decimalExponent> ::= "e" <signedDigits> | "E" <signedDigits>
//! ```
//!
//! The value is kept exactly (a decimal digit string and a power of ten; binary suffixes
//! are multiplied out exactly), never as `f64`. Malformed input such as `Gi`, `-`, `.`,
//! `1 Gi`, ` 1`, `1e`, `1K` or `1.5.2` is rejected. Unlike the API server, values are not
//! rounded to nano units or capped at 2^63-1: this parser reads what a dump says.

use std::cmp::Ordering;
use std::fmt;
use std::str::FromStr;

/// Exponents beyond this magnitude are rejected as out of range.
const MAX_EXP: i64 = 1_000_000_000;

/// An exact Kubernetes quantity: `sign × digits × 10^exp`.
///
/// Equality and ordering are by value: `1Ki == 1024`, `0.5 == 500m`, `-0 == 0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Quantity {
    negative: bool,
    /// Decimal digits, most significant first, no leading or trailing zeros; empty for 0.
    digits: Vec<u8>,
    exp: i64,
}

/// Why a string is not a quantity. `Display` is a short lower-case phrase.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    /// The string is empty.
    #[error("empty quantity")]
    Empty,
    /// No digit before the suffix (`Gi`, `-`, `.`, `+k`).
    #[error("no digits")]
    NoDigits,
    /// The text after the number is not a known suffix (`1 Gi`, `1K`, `4x`, `1e`).
    #[error("unknown suffix {0:?}")]
    BadSuffix(String),
    /// The exponent is too large to be meaningful.
    #[error("exponent out of range")]
    ExponentOutOfRange,
}

impl Quantity {
    /// Zero.
    pub fn zero() -> Quantity {
        Quantity {
            negative: false,
            digits: Vec::new(),
            exp: 0,
        }
    }

    /// Parses `s` exactly per the grammar in the module docs. No whitespace is allowed
    /// anywhere.
    ///
    /// Errors: [`QuantityError`] naming what is wrong.
    pub fn parse(s: &str) -> Result<Quantity, QuantityError> {
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        let b = s.as_bytes();
        let mut i = 0;
        let negative = match b[0] {
            b'-' => {
                i = 1;
                true
            }
            b'+' => {
                i = 1;
                false
            }
            _ => false,
        };
        let int_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let int_part = &b[int_start..i];
        let mut frac_part: &[u8] = &[];
        if i < b.len() && b[i] == b'.' {
            i += 1;
            let fs = i;
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            frac_part = &b[fs..i];
        }
        if int_part.is_empty() && frac_part.is_empty() {
            return Err(QuantityError::NoDigits);
        }
        let suffix = &s[i..];
        let (exp10, pow1024) = parse_suffix(suffix)?;
        let mut digits: Vec<u8> = int_part.iter().chain(frac_part).map(|c| c - b'0').collect();
        let mut exp = exp10 - frac_part.len() as i64;
        for _ in 0..pow1024 {
            mul_small(&mut digits, 1024);
        }
        normalize(&mut digits, &mut exp);
        if digits.is_empty() {
            return Ok(Quantity::zero());
        }
        let order = digits.len() as i64 + exp;
        if !(-MAX_EXP..=MAX_EXP).contains(&order) {
            return Err(QuantityError::ExponentOutOfRange);
        }
        Ok(Quantity {
            negative,
            digits,
            exp,
        })
    }

    /// Whether the value is exactly 0.
    pub fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// Whether the value is > 0 (the check's "advertised").
    pub(crate) fn is_positive(&self) -> bool {
        !self.is_zero() && !self.negative
    }

    /// Whether the value is < 0.
    pub(crate) fn is_negative(&self) -> bool {
        !self.is_zero() && self.negative
    }

    /// Whether the value is a whole number.
    pub(crate) fn is_integer(&self) -> bool {
        self.exp >= 0
    }

    /// The value as an `i64` when it is a whole number that fits; `None` otherwise
    /// (fractions such as `500m`, or values beyond ±2^63).
    pub fn to_i64(&self) -> Option<i64> {
        if !self.is_integer() || self.digits.len() as i64 + self.exp > 19 {
            return None;
        }
        let mut v: i128 = 0;
        for &d in &self.digits {
            v = v * 10 + d as i128;
        }
        for _ in 0..self.exp {
            v *= 10;
        }
        if self.negative {
            v = -v;
        }
        i64::try_from(v).ok()
    }

    /// The value as a count of whole units (an extended resource such as
    /// `nvidia.com/gpu`): `Err` with a short phrase when it is negative, a fraction, or
    /// beyond `i64`.
    pub(crate) fn to_count(&self) -> Result<i64, &'static str> {
        if self.is_negative() {
            Err("is negative")
        } else if !self.is_integer() {
            Err("is not a whole number of units")
        } else {
            self.to_i64().ok_or("is too large (over 2^63-1 units)")
        }
    }

    /// The value times `10^scale`, rounded up to a whole number (toward +∞), saturating at
    /// the `i64` range: `scaled_ceil(0)` is apimachinery's `Quantity.Value()`,
    /// `scaled_ceil(3)` its `MilliValue()` (kubernetes/apimachinery
    /// `pkg/api/resource/quantity.go`; both round up), the units the scheduler compares
    /// (cpu in millicores, memory and the rest in whole units).
    pub(crate) fn scaled_ceil(&self, scale: i64) -> i64 {
        if self.is_zero() {
            return 0;
        }
        let exp = self.exp.saturating_add(scale);
        let sat = if self.negative { i64::MIN } else { i64::MAX };
        if self.digits.len() as i64 + exp > 19 {
            return sat;
        }
        // Whole part and whether a fraction is cut off.
        let keep = (self.digits.len() as i64 + exp).max(0) as usize;
        let mut v: i128 = 0;
        for &d in self.digits.iter().take(keep) {
            v = v * 10 + d as i128;
        }
        for _ in 0..exp.max(0) {
            v *= 10;
        }
        let cut = self.digits.len() > keep;
        if self.negative {
            v = -v;
        } else if cut {
            v += 1;
        }
        i64::try_from(v).unwrap_or(sat)
    }

    fn cmp_magnitude(&self, other: &Quantity) -> Ordering {
        match (self.is_zero(), other.is_zero()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Less,
            (false, true) => return Ordering::Greater,
            _ => {}
        }
        let oa = self.digits.len() as i64 + self.exp;
        let ob = other.digits.len() as i64 + other.exp;
        oa.cmp(&ob).then_with(|| self.digits.cmp(&other.digits))
    }
}

fn parse_suffix(suffix: &str) -> Result<(i64, u32), QuantityError> {
    Ok(match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 1),
        "Mi" => (0, 2),
        "Gi" => (0, 3),
        "Ti" => (0, 4),
        "Pi" => (0, 5),
        "Ei" => (0, 6),
        _ => {
            let bad = || QuantityError::BadSuffix(suffix.to_owned());
            let rest = suffix
                .strip_prefix('e')
                .or_else(|| suffix.strip_prefix('E'))
                .ok_or_else(bad)?;
            let (neg, digits) = match rest.as_bytes().first() {
                Some(b'-') => (true, &rest[1..]),
                Some(b'+') => (false, &rest[1..]),
                _ => (false, rest),
            };
            if digits.is_empty() || !digits.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            let trimmed = digits.trim_start_matches('0');
            if trimmed.len() > 10 {
                return Err(QuantityError::ExponentOutOfRange);
            }
            let v: i64 = if trimmed.is_empty() {
                0
            } else {
                trimmed.parse().map_err(|_| bad())?
            };
            if v > MAX_EXP {
                return Err(QuantityError::ExponentOutOfRange);
            }
            (if neg { -v } else { v }, 0)
        }
    })
}

/// Multiplies a big-endian decimal digit vector by `m` in place (it may grow).
fn mul_small(digits: &mut Vec<u8>, m: u32) {
    let mut carry: u64 = 0;
    for d in digits.iter_mut().rev() {
        let v = *d as u64 * m as u64 + carry;
        *d = (v % 10) as u8;
        carry = v / 10;
    }
    while carry > 0 {
        digits.insert(0, (carry % 10) as u8);
        carry /= 10;
    }
}

fn normalize(digits: &mut Vec<u8>, exp: &mut i64) {
    let lead = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..lead);
    while digits.last() == Some(&0) {
        digits.pop();
        *exp += 1;
    }
    if digits.is_empty() {
        *exp = 0;
    }
}

impl Ord for Quantity {
    fn cmp(&self, other: &Quantity) -> Ordering {
        match (self.is_negative(), other.is_negative()) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => self.cmp_magnitude(other),
            (true, true) => other.cmp_magnitude(self),
        }
    }
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Quantity, QuantityError> {
        Quantity::parse(s)
    }
}

/// Canonical text: the exact value as a plain decimal (`4`, `0.5`, `-1.25`,
/// `1073741824`) when that takes at most 40 digits, else `<digits>e<exp>` (`1e50`,
/// `15e-60`). The output always parses back to an equal quantity.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let ds: String = self.digits.iter().map(|d| (b'0' + d) as char).collect();
        let n = self.digits.len() as i64;
        if self.exp >= 0 && n + self.exp <= 40 {
            f.write_str(&ds)?;
            for _ in 0..self.exp {
                f.write_str("0")?;
            }
            Ok(())
        } else if self.exp < 0 && -self.exp <= 40 {
            let frac = (-self.exp) as usize;
            if frac >= ds.len() {
                write!(f, "0.{}{}", "0".repeat(frac - ds.len()), ds)
            } else {
                let (a, b) = ds.split_at(ds.len() - frac);
                write!(f, "{a}.{b}")
            }
        } else {
            write!(f, "{ds}e{}", self.exp)
        }
    }
}

impl serde::Serialize for Quantity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(s: &str) -> Quantity {
        Quantity::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn to_count_says_what_is_wrong() {
        assert_eq!(q("4").to_count(), Ok(4));
        assert_eq!(q("1Ki").to_count(), Ok(1024));
        assert_eq!(q("-0").to_count(), Ok(0));
        assert_eq!(q("2e3").to_count(), Ok(2000));
        assert_eq!(q("-3").to_count(), Err("is negative"));
        assert_eq!(q("500m").to_count(), Err("is not a whole number of units"));
        assert_eq!(
            q("99999999999999999999999").to_count(),
            Err("is too large (over 2^63-1 units)")
        );
        assert_eq!(q("9223372036854775807").to_count(), Ok(i64::MAX));
    }

    #[test]
    fn valid_forms_and_values() {
        for (s, canon) in [
            ("0", "0"),
            ("4", "4"),
            ("+4", "4"),
            ("-4", "-4"),
            ("-0", "0"),
            ("007", "7"),
            ("1.", "1"),
            (".5", "0.5"),
            ("0.5", "0.5"),
            ("500m", "0.5"),
            ("1n", "0.000000001"),
            ("1u", "0.000001"),
            ("1k", "1000"),
            ("1M", "1000000"),
            ("1G", "1000000000"),
            ("1T", "1000000000000"),
            ("1P", "1000000000000000"),
            ("1E", "1000000000000000000"),
            ("1Ki", "1024"),
            ("1Mi", "1048576"),
            ("1Gi", "1073741824"),
            ("1Ti", "1099511627776"),
            ("1Pi", "1125899906842624"),
            ("1Ei", "1152921504606846976"),
            ("1.5Gi", "1610612736"),
            ("0.1Ki", "102.4"),
            ("1e3", "1000"),
            ("1E3", "1000"),
            ("1e+3", "1000"),
            ("1e-3", "0.001"),
            ("12e0", "12"),
            ("63800m", "63.8"),
            ("526776484Ki", "539419119616"),
            ("1e50", "1e50"),
            ("15e-60", "15e-60"),
        ] {
            assert_eq!(q(s).to_string(), canon, "{s}");
            assert_eq!(q(&q(s).to_string()), q(s), "{s} round trip");
        }
    }

    #[test]
    fn malformed_is_rejected() {
        for s in [
            "",
            "Gi",
            "-",
            "+",
            ".",
            "-.",
            "1 Gi",
            " 1",
            "1 ",
            "1K",
            "1e",
            "1E+",
            "1e1.5",
            "4x",
            "1.5.2",
            "1Gi1",
            "1kk",
            "0x10",
            "1,5",
            "1Gib",
            "--1",
            "1e99999999999",
            "١",
        ] {
            assert!(Quantity::parse(s).is_err(), "{s:?} parsed");
        }
        assert_eq!(Quantity::parse(""), Err(QuantityError::Empty));
        assert_eq!(Quantity::parse("Gi"), Err(QuantityError::NoDigits));
        assert_eq!(Quantity::parse("-"), Err(QuantityError::NoDigits));
        assert_eq!(
            Quantity::parse("1 Gi"),
            Err(QuantityError::BadSuffix(" Gi".into()))
        );
    }

    #[test]
    fn comparisons_and_integers() {
        assert_eq!(q("1Ki"), q("1024"));
        assert_eq!(q("0.5"), q("500m"));
        assert_eq!(q("1e3"), q("1k"));
        assert!(q("2") > q("1"));
        assert!(q("1") > q("999m"));
        assert!(q("-1") < q("0"));
        assert!(q("-2") < q("-1"));
        assert!(q("1Gi") > q("1G"));
        assert!(q("0").is_zero() && !q("0").is_positive());
        assert!(q("0.000m").is_zero());
        assert!(q("1n").is_positive());
        assert!(q("-1").is_negative());
        assert_eq!(q("4").to_i64(), Some(4));
        assert_eq!(q("2k").to_i64(), Some(2000));
        assert_eq!(q("-3").to_i64(), Some(-3));
        assert_eq!(q("500m").to_i64(), None);
        assert_eq!(q("9223372036854775807").to_i64(), Some(i64::MAX));
        assert_eq!(q("9223372036854775808").to_i64(), None);
        assert_eq!(q("-9223372036854775808").to_i64(), Some(i64::MIN));
        assert_eq!(q("1e30").to_i64(), None);
    }

    fn suffix() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei",
            "e3", "e-3", "E+2", "e0",
        ])
    }

    proptest! {
        #[test]
        fn arbitrary_strings_never_panic(s in ".{0,40}") {
            let _ = Quantity::parse(&s);
        }

        #[test]
        fn grammar_strings_parse_and_round_trip(
            sign in prop::sample::select(vec!["", "+", "-"]),
            int in "[0-9]{0,12}",
            frac in prop::option::of("[0-9]{0,6}"),
            suf in suffix(),
        ) {
            let num = match &frac { Some(f) => format!("{int}.{f}"), None => int.clone() };
            let s = format!("{sign}{num}{suf}");
            let has_digit = num.bytes().any(|c| c.is_ascii_digit());
            let r = Quantity::parse(&s);
            prop_assert_eq!(r.is_ok(), has_digit, "{}", s);
            if let Ok(v) = r {
                prop_assert_eq!(Quantity::parse(&v.to_string()).unwrap(), v);
            }
        }

        #[test]
        fn integers_match_i64(a in any::<i64>(), b in any::<i64>()) {
            let (qa, qb) = (q(&a.to_string()), q(&b.to_string()));
            prop_assert_eq!(qa.cmp(&qb), a.cmp(&b));
            prop_assert_eq!(qa.to_i64(), Some(a));
            prop_assert_eq!(qa.to_string(), a.to_string());
        }

        #[test]
        fn binary_suffix_is_exact(n in 0u32..1_000_000, k in 1u32..4) {
            let suf = ["Ki", "Mi", "Gi"][(k - 1) as usize];
            let v = q(&format!("{n}{suf}"));
            prop_assert_eq!(v.to_i64(), Some(n as i64 * 1024i64.pow(k)));
        }

        #[test]
        fn milli_matches_scaled_integers(a in -1_000_000i64..1_000_000, b in -1_000_000i64..1_000_000) {
            prop_assert_eq!(q(&format!("{a}m")).cmp(&q(&format!("{b}m"))), a.cmp(&b));
            prop_assert_eq!(q(&format!("{a}m")) == q(&format!("{}", a as f64 / 1000.0)), true);
        }
    }

    #[test]
    fn scaled_ceil_rounds_up_like_value_and_milli_value() {
        let q = |s: &str| Quantity::parse(s).unwrap();
        assert_eq!(q("100m").scaled_ceil(3), 100);
        assert_eq!(q("1.5").scaled_ceil(3), 1500);
        assert_eq!(q("2").scaled_ceil(3), 2000);
        assert_eq!(q("1n").scaled_ceil(3), 1);
        assert_eq!(q("1.5").scaled_ceil(0), 2);
        assert_eq!(q("24Gi").scaled_ceil(0), 25769803776);
        assert_eq!(q("25011572Ki").scaled_ceil(0), 25611849728);
        assert_eq!(q("0").scaled_ceil(0), 0);
        assert_eq!(q("-1.5").scaled_ceil(0), -1);
        assert_eq!(q("1e30").scaled_ceil(0), i64::MAX);
    }
}
