//! Internally tagged enums read tag first.
//!
//! serde reads an internally tagged enum (`#[serde(tag = "type")]`) whole
//! into a buffer of its own before it looks at the tag, and reads the
//! variant again from that buffer. Over the engine protocol every line is
//! such an enum, and so are the chunks, parts and events inside it: that
//! buffering was about a quarter of either side's work in a protocol run.
//! [`tag_first!`](crate::tag_first!) gives an enum a `Deserialize` that
//! reads the first key and, when it is the tag (every writer here puts it
//! first), reads the variant straight from the rest of the object. Any
//! other order is read as serde reads it, through a buffer: the same
//! values are accepted either way, and every variant and field attribute
//! is serde's own, read by serde's own code.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, IntoDeserializer, MapAccess, SeqAccess, Unexpected,
    VariantAccess, Visitor,
};

/// Declares an internally tagged enum read tag first. The tag attribute
/// comes first, then the enum as it would be written (deriving anything
/// but `Deserialize`, which this provides):
///
/// ```
/// turnsim_engine::tag_first! {
///     #[serde(tag = "type", rename_all = "kebab-case")]
///     #[derive(Debug, PartialEq, serde::Serialize)]
///     pub enum Shape {
///         Circle { radius: u32 },
///         Empty,
///     }
/// }
/// let shape: Shape = serde_json::from_str(r#"{"type":"circle","radius":2}"#).unwrap();
/// assert_eq!(shape, Shape::Circle { radius: 2 });
/// ```
///
/// Beside the enum it derives two readers of it with serde's `remote`: one
/// that takes the variant by name (the tag's value) and its fields from the
/// rest of the object, and serde's own internally tagged reader for an
/// object whose tag is not first.
#[macro_export]
macro_rules! tag_first {
    (
        #[serde(tag = $tag:literal $(, $($serde:tt)*)?)]
        $(#[$outer:meta])*
        $vis:vis enum $name:ident { $($body:tt)* }
    ) => {
        $(#[$outer])*
        #[serde(tag = $tag $(, $($serde)*)?)]
        $vis enum $name { $($body)* }

        const _: () = {
            type Remote = $name;

            #[derive(::serde::Deserialize)]
            #[serde(remote = "Remote" $(, $($serde)*)?)]
            #[allow(dead_code)]
            enum ByName { $($body)* }

            #[derive(::serde::Deserialize)]
            #[serde(remote = "Remote", tag = $tag $(, $($serde)*)?)]
            #[allow(dead_code)]
            enum Buffered { $($body)* }

            impl $crate::tag_first::TagFirst for $name {
                const TAG: &'static str = $tag;
                const NAME: &'static str = stringify!($name);

                fn by_name<'de, D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    ByName::deserialize(deserializer)
                }

                fn buffered<'de, D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    Buffered::deserialize(deserializer)
                }
            }

            impl<'de> ::serde::Deserialize<'de> for $name {
                fn deserialize<D: ::serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                    $crate::tag_first::deserialize(deserializer)
                }
            }
        };
    };
}

/// What [`tag_first!`](crate::tag_first!) derives for an enum: its tag, and
/// its two readers.
pub trait TagFirst: Sized {
    const TAG: &'static str;
    const NAME: &'static str;
    /// Reads the enum as if externally tagged: the variant's name, then its
    /// content (here: the tag's value, then the rest of the object).
    fn by_name<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
    /// serde's internally tagged reader, buffer and all.
    fn buffered<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error>;
}

/// Reads a [`TagFirst`] enum: straight when the tag is the object's first
/// key, through a buffer otherwise (as serde does, it takes any value a
/// self-describing format has: an object, or a sequence whose first
/// element is the tag).
pub fn deserialize<'de, T: TagFirst, D: Deserializer<'de>>(deserializer: D) -> Result<T, D::Error> {
    deserializer.deserialize_any(TaggedVisitor(PhantomData))
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: TagFirst> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        write!(formatter, "internally tagged enum {}", T::NAME)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        match map.next_key_seed(KeyIs(T::TAG))? {
            Some(Key::Tag) => T::by_name(RestOfObject(AfterTag { tag: T::TAG, map })),
            // serde's reader, handed the object whole: the key it was
            // looking at first, then the rest as they come.
            Some(Key::Other(first)) => T::buffered(MapAccessDeserializer::new(FirstAgain { first: Some(first), map })),
            None => Err(de::Error::missing_field(T::TAG)),
        }
    }

    /// serde's other form of an internally tagged value, the tag first in
    /// a sequence: nothing here writes it, so serde's own reader takes it.
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        T::buffered(SeqAccessDeserializer::new(seq))
    }
}

/// An object's key: the tag, or another (borrowed from the input where the
/// format can lend it).
enum Key<'de> {
    Tag,
    Other(Cow<'de, str>),
}

impl<'de> Key<'de> {
    /// Hands a key other than the tag on to the seed that wanted it.
    fn into_seed<K: DeserializeSeed<'de>, E: de::Error>(key: Cow<'de, str>, seed: K) -> Result<K::Value, E> {
        match key {
            Cow::Borrowed(key) => seed.deserialize(BorrowedStrDeserializer::new(key)),
            Cow::Owned(key) => seed.deserialize(key.into_deserializer()),
        }
    }
}

struct KeyIs(&'static str);

impl<'de> DeserializeSeed<'de> for KeyIs {
    type Value = Key<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeyIs {
    type Value = Key<'de>;

    fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
        formatter.write_str("a string key")
    }

    fn visit_borrowed_str<E: de::Error>(self, key: &'de str) -> Result<Key<'de>, E> {
        Ok(if key == self.0 { Key::Tag } else { Key::Other(Cow::Borrowed(key)) })
    }

    fn visit_str<E: de::Error>(self, key: &str) -> Result<Key<'de>, E> {
        Ok(if key == self.0 { Key::Tag } else { Key::Other(Cow::Owned(key.to_string())) })
    }

    fn visit_string<E: de::Error>(self, key: String) -> Result<Key<'de>, E> {
        Ok(if key == self.0 { Key::Tag } else { Key::Other(Cow::Owned(key)) })
    }
}

/// The entries after a leading tag. A second tag is an error, as in
/// serde's reader (which sees every key before it reads the variant).
struct AfterTag<A> {
    tag: &'static str,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for AfterTag<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.map.next_key_seed(KeyIs(self.tag))? {
            None => Ok(None),
            Some(Key::Tag) => Err(de::Error::duplicate_field(self.tag)),
            Some(Key::Other(key)) => Key::into_seed(key, seed).map(Some),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint()
    }
}

/// An object whose first key was read already: that key again, then the
/// rest.
struct FirstAgain<'de, A> {
    first: Option<Cow<'de, str>>,
    map: A,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for FirstAgain<'de, A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.first.take() {
            Some(key) => Key::into_seed(key, seed).map(Some),
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }

    fn size_hint(&self) -> Option<usize> {
        self.map.size_hint().map(|rest| rest + usize::from(self.first.is_some()))
    }
}

/// The rest of an object whose tag was its first key, read as an
/// externally tagged enum: the tag's value names the variant, the entries
/// after it are the variant's content.
struct RestOfObject<A>(A);

impl<'de, A: MapAccess<'de>> Deserializer<'de> for RestOfObject<A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf option unit unit_struct newtype_struct seq tuple
        tuple_struct map struct identifier ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for RestOfObject<A> {
    type Error = A::Error;
    type Variant = Self;

    fn variant_seed<V: DeserializeSeed<'de>>(mut self, seed: V) -> Result<(V::Value, Self), A::Error> {
        let variant = self.0.next_value_seed(seed)?;
        Ok((variant, self))
    }
}

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for RestOfObject<A> {
    type Error = A::Error;

    /// A unit variant ignores whatever follows its tag, as serde's
    /// internally tagged reader does.
    fn unit_variant(mut self) -> Result<(), A::Error> {
        while self.0.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        seed.deserialize(MapAccessDeserializer::new(self.0))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _len: usize, _visitor: V) -> Result<V::Value, A::Error> {
        Err(de::Error::invalid_type(Unexpected::Map, &"a tuple variant's content"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_map(self.0)
    }
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};
    use serde_json::json;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Inner {
        name: String,
        #[serde(default)]
        count: u32,
    }

    crate::tag_first! {
        #[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
        #[derive(Debug, PartialEq, Serialize)]
        enum Fast {
            Unit,
            Struct { id: String, #[serde(default, skip_serializing_if = "Option::is_none")] extra: Option<u64> },
            Wrapped(Inner),
        }
    }

    /// The same enum as serde derives it: the yardstick.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    #[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
    enum Derived {
        Unit,
        Struct {
            id: String,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            extra: Option<u64>,
        },
        Wrapped(Inner),
    }

    /// Every value reads as serde's derive reads it, whatever the key order:
    /// the same value, or an error where it errs.
    #[test]
    fn reads_what_serde_reads() {
        let cases = [
            json!({"kind": "unit"}),
            json!({"kind": "unit", "stray": 1}),
            json!({"kind": "struct", "id": "a"}),
            json!({"kind": "struct", "id": "a", "extra": 7}),
            json!({"id": "a", "kind": "struct", "extra": 7}),
            json!({"extra": 7, "id": "a", "kind": "struct"}),
            json!({"kind": "struct", "id": "a", "stray": 1}),
            json!({"kind": "struct"}),
            json!({"kind": "struct", "id": 3}),
            json!({"kind": "wrapped", "name": "n"}),
            json!({"name": "n", "count": 2, "kind": "wrapped"}),
            json!({"kind": "wrapped", "name": "n", "count": 2}),
            json!({"kind": "nope"}),
            json!({"id": "a"}),
            json!({}),
            json!(["unit"]),
            json!(["struct", "a"]),
            json!(["struct", "a", 7]),
            json!(["wrapped", "n"]),
            json!(["nope"]),
            json!([]),
            json!("unit"),
            json!(3),
        ];
        // Repeated keys, which a JSON value cannot hold.
        let repeated = [
            r#"{"kind":"struct","id":"a","kind":"struct"}"#,
            r#"{"kind":"unit","kind":"unit"}"#,
            r#"{"id":"a","kind":"struct","kind":"struct"}"#,
            r#"{"kind":"struct","id":"a","id":"b"}"#,
            r#"{"id":"a","kind":"struct","id":"b"}"#,
            r#"{"kind":"struct","i\u0064":"a"}"#,
            r#"{"i\u0064":"a","kind":"struct"}"#,
        ];
        let texts = cases.iter().map(ToString::to_string).chain(repeated.iter().map(ToString::to_string));
        for text in texts {
            let fast = serde_json::from_str::<Fast>(&text);
            let derived = serde_json::from_str::<Derived>(&text);
            assert_eq!(fast.is_ok(), derived.is_ok(), "{text}: {fast:?} against {derived:?}");
            if let (Ok(fast), Ok(derived)) = (fast, derived) {
                assert_eq!(serde_json::to_value(fast).unwrap(), serde_json::to_value(derived).unwrap(), "{text}");
            }
        }
    }

    /// Inside another value the enum still reads from the rest of its
    /// object: the whole line is not left half read.
    #[test]
    fn reads_nested_and_in_sequence() {
        let text = r#"[{"kind":"struct","id":"a","extra":1},{"kind":"unit"},{"name":"n","kind":"wrapped"}]"#;
        let read: Vec<Fast> = serde_json::from_str(text).unwrap();
        let expected = vec![
            Fast::Struct { id: "a".into(), extra: Some(1) },
            Fast::Unit,
            Fast::Wrapped(Inner { name: "n".into(), count: 0 }),
        ];
        assert_eq!(read, expected);
    }

    #[test]
    fn errors_name_what_is_wrong() {
        let error = |text: &str| serde_json::from_str::<Fast>(text).unwrap_err().to_string();
        assert!(error(r#"{"kind":"nope"}"#).contains("unknown variant `nope`"), "{}", error(r#"{"kind":"nope"}"#));
        assert!(error(r#"{"kind":"struct"}"#).contains("missing field `id`"));
        assert!(error(r#"{"id":"a"}"#).contains("missing field `kind`"));
        assert!(error(r#"{"kind":"struct","id":"a","x":1}"#).contains("unknown field `x`"));
    }
}
