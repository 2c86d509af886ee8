//! Run attributes: the SDK's validation rules (`validateAttributeChanges` of
//! `@workflow/world`) and the merge `attr_set` applies.

use std::collections::{BTreeMap, HashSet};

use crate::error::WorldError;

/// Longest attribute key, in UTF-16 code units (JavaScript string length).
pub const ATTRIBUTE_KEY_LEN_MAX: usize = 256;
/// Longest attribute value, in UTF-8 bytes.
pub const ATTRIBUTE_VALUE_LEN_BYTES_MAX: usize = 256;
/// Most attributes on one run, after a merge.
pub const ATTRIBUTES_PER_RUN_MAX: usize = 64;
/// Keys starting with this are reserved for framework code (`allowReservedAttributes`).
pub const RESERVED_ATTRIBUTE_PREFIX: char = '$';

/// Validates a batch of `(key, value)` changes (`None` removes the key) against the run's
/// `existing` attributes: key non-empty and ≤ 256 UTF-16 units, no reserved `$` prefix
/// unless `allow_reserved`, value ≤ 256 UTF-8 bytes, no key twice in the batch, at most 64
/// attributes after the merge.
///
/// # Errors
/// [`WorldError::AttributeValidation`] naming the first broken rule.
pub(crate) fn validate<'a>(
    changes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
    existing: &BTreeMap<String, String>,
    allow_reserved: bool,
) -> Result<(), WorldError> {
    let bad = |reason: String| Err(WorldError::AttributeValidation { reason });
    let mut seen = HashSet::new();
    let (mut adds, mut deletes) = (0usize, 0usize);
    for (key, value) in changes {
        let len = key.encode_utf16().count();
        if len == 0 {
            return bad("attribute key must not be empty".into());
        }
        if len > ATTRIBUTE_KEY_LEN_MAX {
            return bad(format!(
                "attribute key length {len} exceeds {ATTRIBUTE_KEY_LEN_MAX}"
            ));
        }
        if !allow_reserved && key.starts_with(RESERVED_ATTRIBUTE_PREFIX) {
            return bad(format!(
                "attribute key {key:?} starts with the reserved prefix \"$\" (allowReservedAttributes)"
            ));
        }
        if let Some(v) = value
            && v.len() > ATTRIBUTE_VALUE_LEN_BYTES_MAX
        {
            return bad(format!(
                "attribute value of {} bytes exceeds {ATTRIBUTE_VALUE_LEN_BYTES_MAX}",
                v.len()
            ));
        }
        if !seen.insert(key) {
            return bad(format!("attribute key {key:?} appears twice in one batch"));
        }
        match (value, existing.contains_key(key)) {
            (Some(_), false) => adds += 1,
            (None, true) => deletes += 1,
            _ => {}
        }
    }
    let after = existing.len() + adds - deletes;
    if after > ATTRIBUTES_PER_RUN_MAX {
        return bad(format!(
            "run would hold {after} attributes, more than {ATTRIBUTES_PER_RUN_MAX}"
        ));
    }
    Ok(())
}

/// Applies validated changes: a value sets the key, `None` removes it.
pub(crate) fn merge<'a>(
    attributes: &mut BTreeMap<String, String>,
    changes: impl IntoIterator<Item = (&'a str, Option<&'a str>)>,
) {
    for (key, value) in changes {
        match value {
            Some(v) => {
                attributes.insert(key.to_string(), v.to_string());
            }
            None => {
                attributes.remove(key);
            }
        }
    }
}
