//! Finding a non-finite number in a record before it is written. JSON has no NaN or infinity:
//! serde_json writes them as `null`, which then fails to read back as a number, so one such
//! value would make the whole run unreadable. The store refuses the write instead, naming where
//! the number is.

use std::fmt;

use serde::ser::{self, Serialize};

/// The path of the first non-finite number in `value` (e.g. `evaluation.speedup.geomean`,
/// `result.workloads[0].timings[1].stats.median_ms`), or `None` when every number is finite.
/// `Some("")` means the value itself is the number.
pub fn non_finite_path<T: Serialize + ?Sized>(value: &T) -> Option<String> {
    let mut path = Vec::new();
    match value.serialize(Finder { path: &mut path }) {
        Err(Found::NonFinite(at)) => Some(at),
        Ok(()) | Err(Found::Other(_)) => None,
    }
}

#[derive(Debug)]
enum Found {
    /// The path of a non-finite number.
    NonFinite(String),
    /// A `Serialize` impl reported an error of its own; not ours to judge here.
    Other(String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::NonFinite(at) => write!(f, "non-finite number at `{at}`"),
            Found::Other(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Found {}

impl ser::Error for Found {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Found::Other(msg.to_string())
    }
}

/// One step of a path: a field or map key, or a sequence index.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

/// A serializer that writes nothing: it walks the value and stops at the first non-finite
/// float, keeping the path it took to get there.
struct Finder<'p> {
    path: &'p mut Vec<Step>,
}

impl<'p> Finder<'p> {
    fn float(self, v: f64) -> Result<(), Found> {
        if v.is_finite() {
            Ok(())
        } else {
            Err(Found::NonFinite(render(self.path)))
        }
    }

    fn compound(self) -> Compound<'p> {
        Compound {
            path: self.path,
            index: 0,
            key: None,
        }
    }
}

/// The state of a sequence, tuple, map or struct being walked.
struct Compound<'p> {
    path: &'p mut Vec<Step>,
    index: usize,
    key: Option<String>,
}

impl Compound<'_> {
    fn visit<T: Serialize + ?Sized>(&mut self, step: Step, value: &T) -> Result<(), Found> {
        self.path.push(step);
        let r = value.serialize(Finder { path: self.path });
        self.path.pop();
        r
    }

    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        let i = self.index;
        self.index += 1;
        self.visit(Step::Index(i), value)
    }
}

/// A map key as a path step: its JSON text, without the quotes when it is a string.
fn key_text<T: Serialize + ?Sized>(key: &T) -> String {
    match serde_json::to_value(key) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => "?".into(),
    }
}

impl<'p> ser::Serializer for Finder<'p> {
    type Ok = ();
    type Error = Found;
    type SerializeSeq = Compound<'p>;
    type SerializeTuple = Compound<'p>;
    type SerializeTupleStruct = Compound<'p>;
    type SerializeTupleVariant = Compound<'p>;
    type SerializeMap = Compound<'p>;
    type SerializeStruct = Compound<'p>;
    type SerializeStructVariant = Compound<'p>;

    fn serialize_bool(self, _: bool) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_i8(self, _: i8) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_i16(self, _: i16) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_i32(self, _: i32) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_i64(self, _: i64) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_i128(self, _: i128) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_u8(self, _: u8) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_u16(self, _: u16) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_u32(self, _: u32) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_u64(self, _: u64) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_u128(self, _: u128) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> Result<(), Found> {
        self.float(f64::from(v))
    }
    fn serialize_f64(self, v: f64) -> Result<(), Found> {
        self.float(v)
    }
    fn serialize_char(self, _: char) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_str(self, _: &str) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_none(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<(), Found> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, _: &'static str) -> Result<(), Found> {
        Ok(())
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        self.compound().visit(Step::Key(variant.into()), value)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Compound<'p>, Found> {
        Ok(self.compound())
    }
    fn serialize_tuple(self, _: usize) -> Result<Compound<'p>, Found> {
        Ok(self.compound())
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Compound<'p>, Found> {
        Ok(self.compound())
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'p>, Found> {
        self.path.push(Step::Key(variant.into()));
        Ok(self.compound())
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Compound<'p>, Found> {
        Ok(self.compound())
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Compound<'p>, Found> {
        Ok(self.compound())
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Compound<'p>, Found> {
        self.path.push(Step::Key(variant.into()));
        Ok(self.compound())
    }
}

impl ser::SerializeSeq for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        self.element(value)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeTuple for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        self.element(value)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeTupleStruct for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        self.element(value)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeTupleVariant for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        self.element(value)
    }
    fn end(self) -> Result<(), Found> {
        self.path.pop();
        Ok(())
    }
}

impl ser::SerializeMap for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), Found> {
        self.key = Some(key_text(key));
        // A float key is still a number that must be finite.
        self.visit(Step::Key("<key>".into()), key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), Found> {
        let key = self.key.take().unwrap_or_else(|| "?".into());
        self.visit(Step::Key(key), value)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeStruct for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        self.visit(Step::Key(key.into()), value)
    }
    fn end(self) -> Result<(), Found> {
        Ok(())
    }
}

impl ser::SerializeStructVariant for Compound<'_> {
    type Ok = ();
    type Error = Found;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), Found> {
        self.visit(Step::Key(key.into()), value)
    }
    fn end(self) -> Result<(), Found> {
        self.path.pop();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::Serialize;

    use super::non_finite_path;

    #[derive(Serialize)]
    struct Inner {
        median_ms: f64,
        label: Option<f32>,
    }

    #[derive(Serialize)]
    enum Shape {
        Pair(f64, f64),
        Named { ratio: f64 },
    }

    #[derive(Serialize)]
    struct Outer {
        id: u64,
        name: String,
        speedup: Option<f64>,
        timings: Vec<Inner>,
        latency_ms: BTreeMap<String, f64>,
        shape: Shape,
        interval: (f64, f64),
    }

    fn outer() -> Outer {
        Outer {
            id: 3,
            name: "x".into(),
            speedup: Some(1.5),
            timings: vec![
                Inner {
                    median_ms: 0.2,
                    label: None,
                },
                Inner {
                    median_ms: 0.3,
                    label: Some(1.0),
                },
            ],
            latency_ms: [("small".to_owned(), 0.25)].into(),
            shape: Shape::Named { ratio: 2.0 },
            interval: (0.9, 1.1),
        }
    }

    #[test]
    fn finite_values_pass() {
        assert_eq!(non_finite_path(&outer()), None);
        assert_eq!(
            non_finite_path(&serde_json::json!({"a": [1.5, null]})),
            None
        );
        assert_eq!(non_finite_path(&1.0f64), None);
    }

    #[test]
    fn every_kind_of_place_is_found_and_named() {
        let mut o = outer();
        o.speedup = Some(f64::INFINITY);
        assert_eq!(non_finite_path(&o).as_deref(), Some("speedup"));

        let mut o = outer();
        o.timings[1].median_ms = f64::NAN;
        assert_eq!(non_finite_path(&o).as_deref(), Some("timings[1].median_ms"));

        let mut o = outer();
        o.timings[1].label = Some(f32::NEG_INFINITY);
        assert_eq!(non_finite_path(&o).as_deref(), Some("timings[1].label"));

        let mut o = outer();
        o.latency_ms.insert("large".into(), f64::NAN);
        assert_eq!(non_finite_path(&o).as_deref(), Some("latency_ms.large"));

        let mut o = outer();
        o.shape = Shape::Named {
            ratio: f64::INFINITY,
        };
        assert_eq!(non_finite_path(&o).as_deref(), Some("shape.Named.ratio"));

        let mut o = outer();
        o.shape = Shape::Pair(1.0, f64::NAN);
        assert_eq!(non_finite_path(&o).as_deref(), Some("shape.Pair[1]"));

        let mut o = outer();
        o.interval = (f64::NAN, 1.0);
        assert_eq!(non_finite_path(&o).as_deref(), Some("interval[0]"));

        assert_eq!(non_finite_path(&f64::NAN).as_deref(), Some(""));
    }
}
