//! Kubernetes quantities as exact integers.
//!
//! A [`Quantity`] holds a value in milli-units of its resource's base unit (millicores for cpu,
//! millibytes for memory, milli-pods for pods), so `100m` cpu, `1.5Gi` memory and `110` pods are
//! all exact `i64`s and sums never drift the way floats do.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A resource amount in milli-units of the resource's base unit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity(i64);

/// Why a quantity string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error("empty quantity")]
    Empty,
    #[error("malformed quantity {0:?}")]
    Malformed(String),
    #[error("unknown suffix in quantity {0:?}")]
    Suffix(String),
    #[error("quantity {0:?} is out of range")]
    Overflow(String),
}

const BINARY: [(&str, u32); 6] = [
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];
const DECIMAL: [(&str, i32); 9] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    pub const ZERO: Quantity = Quantity(0);

    /// A quantity of `milli` thousandths of the base unit.
    pub const fn from_milli(milli: i64) -> Self {
        Quantity(milli)
    }

    /// A quantity of whole base units (cores, bytes, pods).
    pub const fn from_units(units: i64) -> Self {
        Quantity(units.saturating_mul(1000))
    }

    pub const fn from_mib(mib: i64) -> Self {
        Quantity::from_units(mib.saturating_mul(1 << 20))
    }

    pub const fn milli(self) -> i64 {
        self.0
    }

    /// The value in base units, rounded up (Kubernetes rounds requests up).
    pub fn units_ceil(self) -> i64 {
        self.0.div_euclid(1000) + i64::from(self.0.rem_euclid(1000) != 0)
    }

    pub fn as_f64(self) -> f64 {
        self.0 as f64 / 1000.0
    }

    pub fn is_negative(self) -> bool {
        self.0 < 0
    }

    pub fn saturating_add(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_add(other.0))
    }

    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Quantity(self.0.saturating_sub(other.0))
    }

    pub fn saturating_mul(self, n: i64) -> Quantity {
        Quantity(self.0.saturating_mul(n))
    }

    /// Reads a Kubernetes quantity string such as `250m`, `1.5Gi`, `2e3` or `100M`.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let s = text.trim();
        if s.is_empty() {
            return Err(QuantityError::Empty);
        }
        // the suffix starts at the first letter, unless that letter opens an exponent (`1e3`,
        // `2E-1`); `E` alone or `Ei` is a suffix
        let split = exponent_start(s)
            .or_else(|| s.find(|c: char| c.is_ascii_alphabetic()))
            .unwrap_or(s.len());
        let (number, suffix) = s.split_at(split);
        let (mantissa, exp10, exp2) = parse_suffix(s, suffix)?;
        let (digits, scale) = parse_decimal(s, number)?;
        // value = digits * 10^(exp10 - scale + 3 for milli) * 2^exp2
        let mut value = digits;
        let ten_power = exp10 + mantissa - scale + 3;
        value = checked_mul(value, 1i128 << exp2, s)?;
        if ten_power >= 0 {
            value = checked_mul(
                value,
                10i128
                    .checked_pow(ten_power as u32)
                    .ok_or_else(|| overflow(s))?,
                s,
            )?;
        } else {
            let div = 10i128.checked_pow((-ten_power) as u32).unwrap_or(i128::MAX);
            // round away from zero, as Kubernetes does when it canonicalises to milli precision
            value = value / div + i128::from(value % div != 0) * value.signum();
        }
        i64::try_from(value).map(Quantity).map_err(|_| overflow(s))
    }

    /// Canonical text: whole units when exact, otherwise milli-units (`1500m`).
    pub fn to_canonical(self) -> String {
        if self.0 % 1000 == 0 {
            (self.0 / 1000).to_string()
        } else {
            format!("{}m", self.0)
        }
    }

    /// Memory-style text: `Mi`/`Gi`/`Ki` when exact, otherwise canonical.
    pub fn to_binary(self) -> String {
        if self.0 % 1000 == 0 && self.0 != 0 {
            let units = self.0 / 1000;
            for (suffix, shift) in [("Gi", 30), ("Mi", 20), ("Ki", 10)] {
                if units % (1 << shift) == 0 {
                    return format!("{}{}", units >> shift, suffix);
                }
            }
        }
        self.to_canonical()
    }
}

fn overflow(s: &str) -> QuantityError {
    QuantityError::Overflow(s.to_string())
}

fn checked_mul(a: i128, b: i128, s: &str) -> Result<i128, QuantityError> {
    let v = a.checked_mul(b).ok_or_else(|| overflow(s))?;
    if v.abs() > i64::MAX as i128 * 1000 {
        return Err(overflow(s));
    }
    Ok(v)
}

/// Where an `e`/`E` exponent starts (`1e3`, `2E-1`): the first letter, when digits follow it.
fn exponent_start(s: &str) -> Option<usize> {
    let i = s.find(|c: char| c.is_ascii_alphabetic())?;
    let rest = s[i + 1..].trim_start_matches(['+', '-']);
    (matches!(&s[i..=i], "e" | "E") && !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()))
        .then_some(i)
}

/// Returns (decimal exponent from an `e` part, decimal exponent of the suffix, binary exponent).
fn parse_suffix(s: &str, suffix: &str) -> Result<(i32, i32, u32), QuantityError> {
    if suffix.is_empty() {
        return Ok((0, 0, 0));
    }
    if let Some((_, shift)) = BINARY.iter().find(|(n, _)| *n == suffix) {
        return Ok((0, 0, *shift));
    }
    if let Some((_, e)) = DECIMAL.iter().find(|(n, _)| *n == suffix) {
        return Ok((0, *e, 0));
    }
    if let Some(rest) = suffix.strip_prefix(['e', 'E']) {
        let e: i32 = rest
            .parse()
            .map_err(|_| QuantityError::Malformed(s.to_string()))?;
        if !(-30..=30).contains(&e) {
            return Err(overflow(s));
        }
        return Ok((0, e, 0));
    }
    Err(QuantityError::Suffix(s.to_string()))
}

/// Reads `[+-]digits[.digits]` into (integer of all digits, number of fraction digits).
fn parse_decimal(s: &str, number: &str) -> Result<(i128, i32), QuantityError> {
    let (negative, body) = match number.as_bytes().first() {
        Some(b'-') => (true, &number[1..]),
        Some(b'+') => (false, &number[1..]),
        _ => (false, number),
    };
    let (int_part, frac_part) = body.split_once('.').unwrap_or((body, ""));
    let malformed = || QuantityError::Malformed(s.to_string());
    if int_part.is_empty() && frac_part.is_empty() {
        return Err(malformed());
    }
    if !int_part
        .chars()
        .chain(frac_part.chars())
        .all(|c| c.is_ascii_digit())
    {
        return Err(malformed());
    }
    if int_part.len() + frac_part.len() > 30 {
        return Err(overflow(s));
    }
    let mut value: i128 = 0;
    for c in int_part.chars().chain(frac_part.chars()) {
        value = value * 10 + i128::from(c as u8 - b'0');
    }
    Ok((
        if negative { -value } else { value },
        frac_part.len() as i32,
    ))
}

impl FromStr for Quantity {
    type Err = QuantityError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Quantity::parse(s)
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_canonical())
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_canonical())
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Float(f64),
            Text(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(i) => Ok(Quantity::from_units(i)),
            Raw::Float(f) => Quantity::parse(&f.to_string()).map_err(serde::de::Error::custom),
            Raw::Text(t) => Quantity::parse(&t).map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> i64 {
        Quantity::parse(s).unwrap().milli()
    }

    #[test]
    fn parses_cpu_forms() {
        assert_eq!(q("100m"), 100);
        assert_eq!(q("1"), 1000);
        assert_eq!(q("1.5"), 1500);
        assert_eq!(q("0.1"), 100);
        assert_eq!(q(".5"), 500);
        assert_eq!(q("2e3"), 2_000_000);
        assert_eq!(q("1E-3"), 1);
    }

    #[test]
    fn parses_memory_forms() {
        assert_eq!(q("1Ki"), 1024 * 1000);
        assert_eq!(q("1.5Gi"), 1_610_612_736 * 1000);
        assert_eq!(q("100M"), 100_000_000 * 1000);
        assert_eq!(q("128974848"), 128_974_848 * 1000);
    }

    #[test]
    fn rounds_sub_milli_up() {
        assert_eq!(q("1n"), 1);
        assert_eq!(q("1500u"), 2);
    }

    #[test]
    fn rejects_garbage() {
        assert!(matches!(Quantity::parse(""), Err(QuantityError::Empty)));
        assert!(matches!(
            Quantity::parse("abc"),
            Err(QuantityError::Suffix(_)) | Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            Quantity::parse("1Xi"),
            Err(QuantityError::Suffix(_))
        ));
        assert!(matches!(
            Quantity::parse("1.2.3"),
            Err(QuantityError::Malformed(_))
        ));
        assert!(matches!(
            Quantity::parse("99999999Ei"),
            Err(QuantityError::Overflow(_))
        ));
        assert!(matches!(
            Quantity::parse("1e400"),
            Err(QuantityError::Overflow(_))
        ));
    }

    #[test]
    fn negative_values_parse_and_are_flagged() {
        assert!(Quantity::parse("-1").unwrap().is_negative());
    }

    #[test]
    fn canonical_text_round_trips() {
        for s in ["100m", "2", "1500m", "0"] {
            assert_eq!(Quantity::parse(s).unwrap().to_canonical(), s);
        }
        assert_eq!(Quantity::parse("1.5Gi").unwrap().to_binary(), "1536Mi");
        assert_eq!(Quantity::parse("2Gi").unwrap().to_binary(), "2Gi");
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,24}") {
            let _ = Quantity::parse(&s);
        }

        #[test]
        fn canonical_round_trip(m in -1_000_000_000_000i64..1_000_000_000_000i64) {
            let q = Quantity::from_milli(m);
            proptest::prop_assert_eq!(Quantity::parse(&q.to_canonical()).unwrap(), q);
        }
    }
}
