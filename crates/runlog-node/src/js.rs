//! Crossing the boundary on napi-rs's typed layer: reading JavaScript arguments (every check
//! a [`BindError`] with code `INVALID_INPUT` naming the argument, never a thrown exception),
//! building results, and settling promises from the worker threads.
//!
//! Arguments are taken as `Unknown` values and checked here, not by napi's typed parameters,
//! so that a wrong type rejects the returned promise like every other error instead of
//! throwing synchronously, and names the field at fault (`events[2].payload`). What the
//! typed layer cannot do is in `raw` (one module, each use explained).

use std::panic::{AssertUnwindSafe, catch_unwind};

use napi::bindgen_prelude::{
    BufferSlice, FromNapiValue, Function, JsObjectValue, Object, ToNapiValue, Uint8ArraySlice,
    Unknown, ValueType,
};
use napi::{Env, JsValue};

use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::pool::Pool;
pub(crate) use crate::raw::Raw;
use crate::raw::{Pending, Settle, take_exception};

/// A Rust value that becomes a JavaScript value on the JavaScript thread.
pub(crate) trait IntoJs: Send + 'static {
    fn into_js(self, env: &Env) -> napi::Result<Unknown<'_>>;
}

/// Runs `work` on `lane` and returns a promise settled with its result: resolved with the
/// value, rejected with the error, or rejected with `PANICKED` if `work` panics.
pub(crate) fn spawn<T: IntoJs>(
    env: &Env,
    lane: &'static Pool,
    work: impl FnOnce() -> Result<T, BindError> + Send + 'static,
) -> Result<Raw, BindError> {
    let (pending, promise) = Pending::new(env, dropped::<T>)
        .map_err(|e| BindError::internal(format!("cannot create a promise: {e}")))?;
    lane.execute(Box::new(move |ready| {
        let out = match ready {
            Ok(()) => catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|panic| Err(BindError::panicked(&*panic))),
            Err(e) => Err(e),
        };
        pending.settle(settle(out));
    }));
    Ok(promise)
}

/// Runs `work` on `lane` with an `emit` that settles the next of `n` promises with each
/// result it is given, in order, as soon as it is given (results past the `n`th are
/// dropped); returns the promises, as an array. Those still unsettled when `work` returns
/// resolve with `null`; if `work` panics, they reject with `PANICKED`.
pub(crate) fn spawn_each<T: IntoJs>(
    env: &Env,
    lane: &'static Pool,
    n: usize,
    work: impl FnOnce(&mut dyn FnMut(Result<T, BindError>)) + Send + 'static,
) -> Result<Raw, BindError> {
    let cannot = |e: napi::Error| BindError::internal(format!("cannot create a promise: {e}"));
    let mut deferreds = Vec::with_capacity(n);
    let mut promises = Vec::with_capacity(n);
    for _ in 0..n {
        let (pending, promise) = Pending::new(env, dropped::<T>).map_err(cannot)?;
        deferreds.push(pending);
        promises.push(promise.to_unknown(env).map_err(cannot)?);
    }
    let promises = Raw::new(array(env, promises).map_err(cannot)?);
    lane.execute(Box::new(move |ready| {
        let mut pending = deferreds.into_iter();
        let failed = match ready {
            Ok(()) => catch_unwind(AssertUnwindSafe(|| {
                work(&mut |out| {
                    if let Some(deferred) = pending.next() {
                        deferred.settle(settle(out));
                    }
                });
            }))
            .err()
            .map(|panic| BindError::panicked(&*panic)),
            Err(e) => Some(e),
        };
        for deferred in pending {
            match &failed {
                Some(e) => deferred.settle(settle::<T>(Err(e.clone()))),
                None => deferred.settle(Box::new(|env: Env| {
                    None::<bool>
                        .into_unknown(&env)
                        .map(Raw::new)
                        .map_err(|e| error_value(&env, &BindError::internal(e.to_string())))
                })),
            }
        }
    }));
    Ok(promises)
}

/// What settles a promise with `out`, on the JavaScript thread: resolved with the value, or
/// rejected with the error (also when the value cannot be made, or making it panics).
fn settle<T: IntoJs>(out: Result<T, BindError>) -> Settle {
    Box::new(move |env: Env| {
        let converted = catch_unwind(AssertUnwindSafe(|| match out {
            Ok(v) => match v.into_js(&env) {
                Ok(v) => Ok(Raw::new(v)),
                // A result JavaScript cannot hold (a string past V8's longest): a typed
                // rejection, never napi's bare `GenericFailure` with an empty message.
                Err(e) => Err(unconverted(&env, &e)),
            },
            Err(e) => Err(e),
        }))
        .unwrap_or_else(|panic| Err(BindError::panicked(&*panic)));
        converted.map_err(|e| error_value(&env, &e))
    })
}

/// `err` as a JavaScript error value (`undefined` should even that fail).
fn error_value(env: &Env, err: &BindError) -> Raw {
    match err.to_js(env) {
        Ok(v) => Raw::new(v),
        Err(_) => Raw::undefined(env),
    }
}

/// How a promise dropped unsettled settles (never, by construction: every job settles its
/// own): rejected `INTERNAL`.
fn dropped<T: IntoJs>() -> Settle {
    settle::<T>(Err(BindError::internal(
        "a call ended without settling its promise",
    )))
}

/// Why a result could not become a JavaScript value: `INTERNAL`, with napi's status and
/// message and the exception V8 left pending (cleared here), if any.
fn unconverted(env: &Env, e: &napi::Error) -> BindError {
    let pending = take_exception(env)
        .map(|t| format!(": {t}"))
        .unwrap_or_default();
    let reason = match e.reason.trim() {
        "" => String::new(),
        r => format!(", {r}"),
    };
    BindError::internal(format!(
        "cannot hand the result to JavaScript (napi status {:?}{reason}; a string past V8's \
         longest, about 512 MiB, fails so){pending}",
        e.status
    ))
}

/// A promise already rejected with `err` (for errors found before any work is queued).
pub(crate) fn rejected(env: &Env, err: &BindError) -> napi::Result<Raw> {
    crate::raw::rejected(env, err.to_js(env)?)
}

/// The entry of every asynchronous method: argument errors and panics become a rejected
/// promise, never an exception thrown into JavaScript or an abort.
pub(crate) fn entry(env: &Env, f: impl FnOnce() -> Result<Raw, BindError>) -> napi::Result<Raw> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(promise)) => Ok(promise),
        Ok(Err(e)) => rejected(env, &e),
        Err(panic) => rejected(env, &BindError::panicked(&*panic)),
    }
}

/// A failed napi call as an error; clears a pending JavaScript exception (a throwing getter,
/// a throwing `toJSON`) so that it rejects the promise instead of escaping. Whatever the
/// status says: Node reports a throwing getter as `napi_generic_failure`, a throwing call as
/// `napi_pending_exception`.
fn failed(env: &Env, e: napi::Error) -> BindError {
    match take_exception(env) {
        Some(text) => BindError::unreadable_input(format!("reading an argument threw: {text}")),
        None => BindError::internal(format!("napi call failed: {e}")),
    }
}

/// An argument (or a part of one), with the name used in error messages.
#[derive(Clone)]
pub(crate) struct Arg<'a> {
    value: Unknown<'a>,
    pub name: String,
}

impl<'a> Arg<'a> {
    pub(crate) fn new(value: Unknown<'a>, name: impl Into<String>) -> Arg<'a> {
        Arg {
            value,
            name: name.into(),
        }
    }

    fn child(&self, value: Unknown<'a>, name: String) -> Arg<'a> {
        Arg { value, name }
    }

    fn env(&self) -> Env {
        Env::from_raw(self.value.value().env)
    }

    /// `r`, a napi error becoming a [`BindError`] (see [`failed`]).
    fn ok<T>(&self, r: napi::Result<T>) -> Result<T, BindError> {
        r.map_err(|e| failed(&self.env(), e))
    }

    fn type_of(&self) -> Result<ValueType, BindError> {
        self.ok(self.value.get_type())
    }

    fn bad(&self, reason: &str) -> BindError {
        BindError::invalid(self.name.clone(), reason)
    }

    /// `null` (not `undefined`).
    pub(crate) fn type_is_null(&self) -> Result<bool, BindError> {
        Ok(self.type_of()? == ValueType::Null)
    }

    /// `undefined` or `null`.
    pub(crate) fn is_nullish(&self) -> Result<bool, BindError> {
        Ok(matches!(
            self.type_of()?,
            ValueType::Undefined | ValueType::Null
        ))
    }

    pub(crate) fn string(&self) -> Result<String, BindError> {
        if self.type_of()? != ValueType::String {
            return Err(self.bad("must be a string"));
        }
        String::from_unknown(self.value).map_err(|e| self.bad(&format!("unreadable string: {e}")))
    }

    /// Whether the value is a string.
    pub(crate) fn is_string(&self) -> Result<bool, BindError> {
        Ok(self.type_of()? == ValueType::String)
    }

    /// A string, or `None` for `undefined`/`null`.
    pub(crate) fn opt_string(&self) -> Result<Option<String>, BindError> {
        if self.is_nullish()? {
            return Ok(None);
        }
        self.string().map(Some)
    }

    /// The value of a number.
    fn number(&self, what: &str) -> Result<f64, BindError> {
        if self.type_of()? != ValueType::Number {
            return Err(self.bad(what));
        }
        self.ok(f64::from_unknown(self.value))
    }

    /// A non-negative integral number no larger than `max` (at most 2^53 − 1).
    pub(crate) fn uint(&self, max: u64) -> Result<u64, BindError> {
        let n = self.number("must be a number (a non-negative integer)")?;
        let max = max.min(MAX_SAFE_INTEGER);
        if !n.is_finite() || n.fract() != 0.0 || n < 0.0 || n > max as f64 {
            return Err(self.bad(&format!("must be an integer in 0..={max}, got {n}")));
        }
        Ok(n as u64)
    }

    /// [`Arg::uint`], or `default` for `undefined`/`null`.
    pub(crate) fn uint_or(&self, default: u64, max: u64) -> Result<u64, BindError> {
        if self.is_nullish()? {
            return Ok(default);
        }
        self.uint(max)
    }

    /// A signed integral number in `-(2^53 - 1)..=2^53 - 1`.
    pub(crate) fn int(&self) -> Result<i64, BindError> {
        let n = self.number("must be a number (an integer)")?;
        let max = MAX_SAFE_INTEGER as f64;
        if !n.is_finite() || n.fract() != 0.0 || n.abs() > max {
            return Err(self.bad(&format!("must be a safe integer, got {n}")));
        }
        Ok(n as i64)
    }

    /// Bytes from a `Buffer`/`Uint8Array` (copied) or a string (UTF-8); empty for
    /// `undefined`/`null`.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, BindError> {
        const WANT: &str = "must be a Buffer, a Uint8Array or a string";
        match self.type_of()? {
            ValueType::Undefined | ValueType::Null => Ok(Vec::new()),
            ValueType::String => self.string().map(String::into_bytes),
            ValueType::Object if self.ok(self.value.is_typedarray())? => {
                // Any other typed array is refused by the slice's own kind check.
                let view = Uint8ArraySlice::from_unknown(self.value).map_err(|_| self.bad(WANT))?;
                Ok(view.to_vec())
            }
            _ => Err(self.bad(WANT)),
        }
    }

    /// The value as an object, if it is a plain object (not an array, not a typed array
    /// either: those are refused by the callers' own checks).
    fn object(&self) -> Result<Object<'a>, BindError> {
        if self.type_of()? != ValueType::Object || self.ok(self.value.is_array())? {
            return Err(self.bad("must be an object"));
        }
        self.ok(Object::from_unknown(self.value))
    }

    /// An object's own enumerable property names; fails unless the value is a plain
    /// object (not an array).
    pub(crate) fn object_keys(&self) -> Result<Vec<String>, BindError> {
        let names = self.ok(self.object()?.get_property_names())?;
        let names = self.child(names.to_unknown(), self.name.clone());
        names
            .array_items()?
            .iter()
            .map(|n| {
                let text = n.ok(n.value.coerce_to_string())?;
                String::from_unknown(text.to_unknown()).map_err(|_| n.bad("unreadable key"))
            })
            .collect()
    }

    /// JSON text: a string as given, or any other value through the global
    /// `JSON.stringify` (a throwing `toJSON` or getter rejects with `INVALID_INPUT`).
    pub(crate) fn json_text(&self) -> Result<String, BindError> {
        match self.type_of()? {
            ValueType::String => self.string(),
            ValueType::Object => {
                let env = self.env();
                let global = self.ok(env.get_global())?;
                let json: Object<'_> = self.ok(global.get_named_property_unchecked("JSON"))?;
                let stringify: Function<'_, Unknown<'_>, Unknown<'_>> =
                    self.ok(json.get_named_property_unchecked("stringify"))?;
                let out = self.ok(stringify.apply(json, self.value))?;
                self.child(out, self.name.clone()).string()
            }
            _ => Err(self.bad("must be a JSON string or an object")),
        }
    }

    /// Rejects keys outside `allowed` (a misspelt option or field fails loudly).
    pub(crate) fn only_keys(&self, allowed: &[&str]) -> Result<(), BindError> {
        for key in self.object_keys()? {
            if !allowed.contains(&key.as_str()) {
                return Err(BindError::invalid(
                    format!("{}.{key}", self.name),
                    format!("unknown field (allowed: {})", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }

    /// The property `key` of an object (`undefined` when missing).
    pub(crate) fn get(&self, key: &str) -> Result<Arg<'a>, BindError> {
        let name = format!("{}.{key}", self.name);
        let obj = self.ok(Object::from_unknown(self.value))?;
        let value: Unknown<'a> = self.ok(obj.get_named_property_unchecked(key))?;
        Ok(self.child(value, name))
    }

    /// The elements of an array.
    pub(crate) fn array_items(&self) -> Result<Vec<Arg<'a>>, BindError> {
        if !self.ok(self.value.is_array())? {
            return Err(self.bad("must be an array"));
        }
        let arr = self.ok(Object::from_unknown(self.value))?;
        let len = self.ok(arr.get_array_length_unchecked())?;
        (0..len)
            .map(|i| {
                let item: Unknown<'a> = self.ok(arr.get_element(i))?;
                Ok(self.child(item, format!("{}[{i}]", self.name)))
            })
            .collect()
    }
}

/// An object under construction on the JavaScript thread.
pub(crate) struct ObjOut<'e> {
    obj: Object<'e>,
}

impl<'e> ObjOut<'e> {
    pub(crate) fn new(env: &'e Env) -> napi::Result<ObjOut<'e>> {
        Ok(ObjOut {
            obj: Object::new(env)?,
        })
    }

    pub(crate) fn set<V: ToNapiValue>(mut self, key: &str, value: V) -> napi::Result<ObjOut<'e>> {
        self.obj.set(key, value)?;
        Ok(self)
    }

    pub(crate) fn done(self) -> Unknown<'e> {
        self.obj.to_unknown()
    }
}

/// A JavaScript array of already built values.
pub(crate) fn array<'e>(env: &'e Env, items: Vec<Unknown<'e>>) -> napi::Result<Unknown<'e>> {
    let mut arr = env.create_array(items.len() as u32)?;
    for (i, item) in items.into_iter().enumerate() {
        arr.set(i as u32, item)?;
    }
    Ok(arr.to_unknown())
}

/// A new `Buffer` holding a copy of `bytes`.
pub(crate) fn buffer<'e>(env: &'e Env, bytes: &[u8]) -> napi::Result<Unknown<'e>> {
    BufferSlice::copy_from(env, bytes)?.into_unknown(env)
}

/// A seq (or count) as a JavaScript number, exact by construction.
pub(crate) fn safe_number(what: &str, n: u64) -> Result<f64, BindError> {
    if n > MAX_SAFE_INTEGER {
        return Err(BindError::out_of_range(what, n));
    }
    Ok(n as f64)
}
