//! Integers beyond 64 bits. `serde_yaml_ng::Value` has no 128-bit numbers, so one unquoted integer
//! such as `memory: 99999999999999999999` fails the whole document before joiner knows which object
//! it is in: serde_yaml_ng's message has the field path but not the object. On that failure the
//! document is read again by a walker that builds the same value with such integers set aside (as
//! null, with their field path), so the error can name the object and field like every other object
//! error.

use std::fmt;

use serde::de::{
    DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, MapAccess, SeqAccess, VariantAccess,
    Visitor,
};
use serde_yaml_ng::{Mapping, Value};

use super::{object_label, str_at, SnapshotError};

/// The error for document `document` (1-based) of `text`, whose reading failed with `error`, when
/// that failure is an integer beyond 64 bits inside a Kubernetes object; `None` otherwise, and
/// whenever the document cannot be walked (the caller then reports `error` as it is).
pub(super) fn locate(
    text: &str,
    document: usize,
    error: &serde_yaml_ng::Error,
) -> Option<SnapshotError> {
    // serde's default `visit_u128`/`visit_i128` message, which `Value` gives for these integers:
    // only then is the first wide integer the walker meets the one the error is about.
    let message = error.to_string();
    if !message.contains("` as u128") && !message.contains("` as i128") {
        return None;
    }
    let doc = serde_yaml_ng::Deserializer::from_str(text).nth(document.checked_sub(1)?)?;
    let mut walk = Walk::default();
    let value = Seed(&mut walk).deserialize(doc).ok()?;
    let (path, integer) = walk.found?;
    let (object, path) = inside_lists(&value, &path);
    let kind = str_at(object, &["kind"]).filter(|k| !k.is_empty())?;
    str_at(object, &["apiVersion"]).filter(|v| !v.is_empty())?;
    let at = error
        .location()
        .map(|l| format!(" at line {} column {}", l.line(), l.column()))
        .unwrap_or_default();
    Some(SnapshotError::Object {
        kind: kind.to_string(),
        object: object_label(object, kind),
        path: field_path(path),
        message: format!("integer {integer} does not fit in 64 bits{at}"),
    })
}

#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The object a path points into, and the path inside it: `items[N]` of a `*List` is an object of
/// its own, as the reader treats it.
fn inside_lists<'v, 'p>(mut value: &'v Value, mut path: &'p [Step]) -> (&'v Value, &'p [Step]) {
    while let [Step::Key(key), Step::Index(i), rest @ ..] = path {
        let is_list = str_at(value, &["kind"]).is_some_and(|k| k.ends_with("List"));
        match value.get("items").and_then(|items| items.get(*i)) {
            Some(item) if is_list && key == "items" => (value, path) = (item, rest),
            _ => break,
        }
    }
    (value, path)
}

/// `spec.containers[0].resources`, as `serde_path_to_error` writes paths for the other object
/// errors.
fn field_path(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        "(object)".to_string()
    } else {
        out
    }
}

/// Where the walker is, and the first integer beyond 64 bits it met (path, digits).
#[derive(Default)]
struct Walk {
    path: Vec<Step>,
    found: Option<(Vec<Step>, String)>,
}

/// Reads one YAML value as `serde_yaml_ng::Value` does, tracking the path. Recursion is bounded by
/// serde_yaml_ng's own recursion limit, which applies to any visitor.
struct Seed<'w>(&'w mut Walk);

impl Seed<'_> {
    fn wide(self, digits: String) -> Value {
        if self.0.found.is_none() {
            self.0.found = Some((self.0.path.clone(), digits));
        }
        Value::Null
    }
}

impl<'de> DeserializeSeed<'de> for Seed<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Seed<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, i: i64) -> Result<Value, E> {
        Ok(Value::Number(i.into()))
    }

    fn visit_u64<E>(self, u: u64) -> Result<Value, E> {
        Ok(Value::Number(u.into()))
    }

    fn visit_i128<E>(self, i: i128) -> Result<Value, E> {
        Ok(self.wide(i.to_string()))
    }

    fn visit_u128<E>(self, u: u128) -> Result<Value, E> {
        Ok(self.wide(u.to_string()))
    }

    fn visit_f64<E>(self, f: f64) -> Result<Value, E> {
        Ok(Value::Number(f.into()))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let walk = self.0;
        let mut items = Vec::new();
        loop {
            walk.path.push(Step::Index(items.len()));
            let item = seq.next_element_seed(Seed(&mut *walk));
            walk.path.pop();
            match item? {
                Some(v) => items.push(v),
                None => return Ok(Value::Sequence(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let walk = self.0;
        let mut out = Mapping::new();
        while let Some(key) = map.next_key::<Value>()? {
            let step = match &key {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => b.to_string(),
                _ => "?".to_string(),
            };
            walk.path.push(Step::Key(step));
            let value = map.next_value_seed(Seed(&mut *walk));
            walk.path.pop();
            out.insert(key, value?);
        }
        Ok(Value::Mapping(out))
    }

    /// A tagged value (`!Thing x`): the tag does not matter for finding the object, the value is
    /// kept.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Value, A::Error> {
        let (_, contents) = data.variant::<IgnoredAny>()?;
        contents.newtype_variant_seed(self)
    }
}
