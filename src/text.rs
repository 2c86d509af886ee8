//! [`Text`]: the kind, correlation id and key of an owned [`crate::Event`].

use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

use bytestring::ByteString;

/// UTF-8 text of an owned event (its kind, correlation id or key) that has no allocation of
/// its own: a slice of a buffer its page of [`crate::Store::read`] shares, or a kind the
/// process interned. Use it as a `str` (it dereferences to one, and compares with `str`,
/// `&str` and `String`); [`Text::as_str`], `to_string()` and `String::from` as with a
/// `String`. An `Option<Text>` compares with an `Option<&str>` through `as_deref()`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Text(ByteString);

impl Text {
    /// The text as a `str`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A static text: no allocation, and cloning or dropping it counts no reference.
    pub(crate) const fn from_static(s: &'static str) -> Text {
        Text(ByteString::from_static(s))
    }

    /// The part `part` of this text (which must lie within it) without a copy.
    pub(crate) fn slice_ref(&self, part: &str) -> Text {
        Text(self.0.slice_ref(part))
    }
}

impl Deref for Text {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl AsRef<[u8]> for Text {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text(ByteString::from(s))
    }
}

impl From<String> for Text {
    /// Takes the string's buffer (no copy).
    fn from(s: String) -> Text {
        Text(ByteString::from(s))
    }
}

impl From<Text> for String {
    fn from(t: Text) -> String {
        t.as_str().to_owned()
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::Text;

    /// A text is a `str` to every std trait a caller reaches for: equality with each string
    /// type both ways, ordering, hashing as a `str` (a map keyed by `Text` is looked up by
    /// `&str`), display and debug as the string's, conversions both ways.
    #[test]
    fn a_text_behaves_as_its_str() {
        let t = Text::from("step_completed");
        let owned = String::from("step_completed");
        // Each direction is its own impl.
        assert!(t == "step_completed");
        assert!("step_completed" == t);
        assert!(t == *"step_completed");
        assert!(*"step_completed" == t);
        assert!(t == owned);
        assert!(owned == t);
        assert!(t != "step_created");
        assert_eq!(t.as_str(), "step_completed");
        assert_eq!(t.len(), 14, "derefs to str");
        let (a, b) = (Text::from("a"), Text::from("b"));
        assert!(a < b);
        let map: HashMap<Text, u32> = [(t.clone(), 7)].into();
        assert_eq!(map.get("step_completed"), Some(&7));
        assert_eq!(format!("{t} {t:?}"), "step_completed \"step_completed\"");
        assert_eq!(String::from(t.clone()), owned);
        assert_eq!(Text::from(owned.clone()), t);
        let part = t.slice_ref(&t[5..]);
        assert_eq!(part, "completed");
        assert_eq!(Text::from_static("k"), "k");
        assert_eq!(Text::default(), "");
        let maybe: Option<Text> = Some(t);
        assert_eq!(maybe.as_deref(), Some("step_completed"));
    }
}
