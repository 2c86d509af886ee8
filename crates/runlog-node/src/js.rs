//! Crossing the boundary: reading JavaScript arguments (every check a [`BindError`] with
//! code `INVALID_INPUT` naming the argument, never a thrown exception) and settling promises
//! from the worker threads.
//!
//! Arguments are taken as untyped values and checked here, not by napi's typed parameters,
//! so that a wrong type rejects the returned promise like every other error instead of
//! throwing synchronously.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue, TypeName, Unknown, ValueType};
use napi::{Env, JsValue, sys};

use crate::errors::{BindError, MAX_SAFE_INTEGER};
use crate::pool::Pool;

/// A JavaScript value handed back to napi as is (a promise, an object built here).
pub struct Raw(pub(crate) sys::napi_value);

impl ToNapiValue for Raw {
    unsafe fn to_napi_value(_env: sys::napi_env, val: Raw) -> napi::Result<sys::napi_value> {
        Ok(val.0)
    }
}

impl TypeName for Raw {
    fn type_name() -> &'static str {
        "Promise"
    }
    fn value_type() -> ValueType {
        ValueType::Object
    }
}

/// A Rust value that becomes a JavaScript value on the JavaScript thread.
pub(crate) trait IntoJs: Send + 'static {
    fn into_js(self, env: sys::napi_env) -> napi::Result<sys::napi_value>;
}

type Resolver = Box<dyn FnOnce(Env) -> napi::Result<Raw> + Send>;

/// Runs `work` on `lane` and returns a promise settled with its result: resolved with the
/// value, rejected with the error, or rejected with `PANICKED` if `work` panics.
pub(crate) fn spawn<T: IntoJs>(
    env: &Env,
    lane: &'static Pool,
    work: impl FnOnce() -> Result<T, BindError> + Send + 'static,
) -> Result<Raw, BindError> {
    let (deferred, promise) = env
        .create_deferred::<Raw, Resolver>()
        .map_err(|e| BindError::internal(format!("cannot create a promise: {e}")))?;
    let promise = promise.value().value;
    lane.execute(Box::new(move |ready| {
        let out = match ready {
            Ok(()) => catch_unwind(AssertUnwindSafe(work))
                .unwrap_or_else(|panic| Err(BindError::panicked(&*panic))),
            Err(e) => Err(e),
        };
        deferred.resolve(settle(out));
    }));
    Ok(Raw(promise))
}

/// The resolver that turns a result into the promise's value or rejection, on the
/// JavaScript thread.
fn settle<T: IntoJs>(out: Result<T, BindError>) -> Resolver {
    Box::new(move |env: Env| {
        let env = env.raw();
        let converted = catch_unwind(AssertUnwindSafe(|| match out {
            Ok(v) => v.into_js(env).map(Ok),
            Err(e) => e.to_js(env).map(Err),
        }))
        .unwrap_or_else(|panic| BindError::panicked(&*panic).to_js(env).map(Err))?;
        match converted {
            Ok(value) => Ok(Raw(value)),
            Err(error) => Err(napi::Error::from(unsafe {
                Unknown::from_raw_unchecked(env, error)
            })),
        }
    })
}

/// A promise already rejected with `err` (for errors found before any work is queued).
pub(crate) fn rejected(env: &Env, err: &BindError) -> napi::Result<Raw> {
    let env = env.raw();
    let (mut deferred, mut promise) = (ptr::null_mut(), ptr::null_mut());
    check(env, unsafe {
        sys::napi_create_promise(env, &mut deferred, &mut promise)
    })
    .map_err(|e| napi::Error::from_reason(e.message))?;
    let error = err.to_js(env)?;
    check(env, unsafe {
        sys::napi_reject_deferred(env, deferred, error)
    })
    .map_err(|e| napi::Error::from_reason(e.message))?;
    Ok(Raw(promise))
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

/// A failed napi call as an error; clears a pending JavaScript exception (a throwing getter)
/// so that it rejects the promise instead of escaping.
fn check(env: sys::napi_env, status: sys::napi_status) -> Result<(), BindError> {
    if status == sys::Status::napi_ok {
        return Ok(());
    }
    let mut pending = false;
    unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if pending {
        let mut exc = ptr::null_mut();
        unsafe { sys::napi_get_and_clear_last_exception(env, &mut exc) };
        let text = coerce_to_string(env, exc).unwrap_or_else(|| "an exception".to_owned());
        return Err(BindError::unreadable_input(format!(
            "reading an argument threw: {text}"
        )));
    }
    Err(BindError::internal(format!(
        "napi call failed with status {status}"
    )))
}

fn coerce_to_string(env: sys::napi_env, v: sys::napi_value) -> Option<String> {
    let mut s = ptr::null_mut();
    if unsafe { sys::napi_coerce_to_string(env, v, &mut s) } != sys::Status::napi_ok {
        return None;
    }
    unsafe { String::from_napi_value(env, s) }.ok()
}

/// An argument (or a part of one), with the name used in error messages.
#[derive(Clone)]
pub(crate) struct Arg {
    env: sys::napi_env,
    raw: sys::napi_value,
    pub name: String,
}

impl Arg {
    pub(crate) fn new(value: Unknown<'_>, name: impl Into<String>) -> Arg {
        let v = value.value();
        Arg {
            env: v.env,
            raw: v.value,
            name: name.into(),
        }
    }

    fn child(&self, raw: sys::napi_value, name: String) -> Arg {
        Arg {
            env: self.env,
            raw,
            name,
        }
    }

    fn type_of(&self) -> Result<sys::napi_valuetype, BindError> {
        let mut t = 0;
        check(self.env, unsafe {
            sys::napi_typeof(self.env, self.raw, &mut t)
        })?;
        Ok(t)
    }

    fn bad(&self, reason: &str) -> BindError {
        BindError::invalid(self.name.clone(), reason)
    }

    /// `null` (not `undefined`).
    pub(crate) fn type_is_null(&self) -> Result<bool, BindError> {
        Ok(self.type_of()? == sys::ValueType::napi_null)
    }

    /// `undefined` or `null`.
    pub(crate) fn is_nullish(&self) -> Result<bool, BindError> {
        let t = self.type_of()?;
        Ok(t == sys::ValueType::napi_undefined || t == sys::ValueType::napi_null)
    }

    pub(crate) fn string(&self) -> Result<String, BindError> {
        if self.type_of()? != sys::ValueType::napi_string {
            return Err(self.bad("must be a string"));
        }
        unsafe { String::from_napi_value(self.env, self.raw) }
            .map_err(|e| self.bad(&format!("unreadable string: {e}")))
    }

    /// A string, or `None` for `undefined`/`null`.
    pub(crate) fn opt_string(&self) -> Result<Option<String>, BindError> {
        if self.is_nullish()? {
            return Ok(None);
        }
        self.string().map(Some)
    }

    /// A non-negative integral number no larger than `max` (at most 2^53 − 1).
    pub(crate) fn uint(&self, max: u64) -> Result<u64, BindError> {
        if self.type_of()? != sys::ValueType::napi_number {
            return Err(self.bad("must be a number (a non-negative integer)"));
        }
        let mut n = 0f64;
        check(self.env, unsafe {
            sys::napi_get_value_double(self.env, self.raw, &mut n)
        })?;
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

    /// Bytes from a `Buffer`/`Uint8Array` (copied) or a string (UTF-8); empty for
    /// `undefined`/`null`.
    pub(crate) fn bytes(&self) -> Result<Vec<u8>, BindError> {
        match self.type_of()? {
            sys::ValueType::napi_undefined | sys::ValueType::napi_null => Ok(Vec::new()),
            sys::ValueType::napi_string => self.string().map(String::into_bytes),
            sys::ValueType::napi_object => self.typed_bytes(),
            _ => Err(self.bad("must be a Buffer, a Uint8Array or a string")),
        }
    }

    fn typed_bytes(&self) -> Result<Vec<u8>, BindError> {
        let mut is_typed = false;
        check(self.env, unsafe {
            sys::napi_is_typedarray(self.env, self.raw, &mut is_typed)
        })?;
        if !is_typed {
            return Err(self.bad("must be a Buffer, a Uint8Array or a string"));
        }
        let (mut kind, mut len, mut data) = (0, 0usize, ptr::null_mut());
        let (mut buffer, mut offset) = (ptr::null_mut(), 0usize);
        check(self.env, unsafe {
            sys::napi_get_typedarray_info(
                self.env,
                self.raw,
                &mut kind,
                &mut len,
                &mut data,
                &mut buffer,
                &mut offset,
            )
        })?;
        if kind != sys::TypedarrayType::uint8_array {
            return Err(self.bad("must be a Buffer, a Uint8Array or a string"));
        }
        if len == 0 || data.is_null() {
            return Ok(Vec::new());
        }
        // `data` points at the view's first element (napi applies the byte offset).
        Ok(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) }.to_vec())
    }

    /// An object's own enumerable property names; fails unless the value is a plain
    /// object (not an array, not a typed array).
    pub(crate) fn object_keys(&self) -> Result<Vec<String>, BindError> {
        let mut is_array = false;
        check(self.env, unsafe {
            sys::napi_is_array(self.env, self.raw, &mut is_array)
        })?;
        if self.type_of()? != sys::ValueType::napi_object || is_array {
            return Err(self.bad("must be an object"));
        }
        let mut names = ptr::null_mut();
        check(self.env, unsafe {
            sys::napi_get_property_names(self.env, self.raw, &mut names)
        })?;
        let names = self.child(names, self.name.clone());
        names
            .array_items()?
            .iter()
            .map(|n| coerce_to_string(self.env, n.raw).ok_or_else(|| n.bad("unreadable key")))
            .collect()
    }

    /// JSON text: a string as given, or any other value through the global
    /// `JSON.stringify` (a throwing `toJSON` or getter rejects with `INVALID_INPUT`).
    pub(crate) fn json_text(&self) -> Result<String, BindError> {
        match self.type_of()? {
            sys::ValueType::napi_string => self.string(),
            sys::ValueType::napi_object => {
                let env = self.env;
                let (mut global, mut json, mut stringify, mut out) = (
                    ptr::null_mut(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                    ptr::null_mut(),
                );
                check(env, unsafe { sys::napi_get_global(env, &mut global) })?;
                check(env, unsafe {
                    sys::napi_get_named_property(env, global, c"JSON".as_ptr(), &mut json)
                })?;
                check(env, unsafe {
                    sys::napi_get_named_property(env, json, c"stringify".as_ptr(), &mut stringify)
                })?;
                let argv = [self.raw];
                check(env, unsafe {
                    sys::napi_call_function(env, json, stringify, 1, argv.as_ptr(), &mut out)
                })?;
                self.child(out, self.name.clone()).string()
            }
            _ => Err(self.bad("must be a JSON string or an object")),
        }
    }

    /// A signed integral number in `-(2^53 - 1)..=2^53 - 1`.
    pub(crate) fn int(&self) -> Result<i64, BindError> {
        if self.type_of()? != sys::ValueType::napi_number {
            return Err(self.bad("must be a number (an integer)"));
        }
        let mut n = 0f64;
        check(self.env, unsafe {
            sys::napi_get_value_double(self.env, self.raw, &mut n)
        })?;
        let max = MAX_SAFE_INTEGER as f64;
        if !n.is_finite() || n.fract() != 0.0 || n.abs() > max {
            return Err(self.bad(&format!("must be a safe integer, got {n}")));
        }
        Ok(n as i64)
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
    pub(crate) fn get(&self, key: &str) -> Result<Arg, BindError> {
        let name = format!("{}.{key}", self.name);
        let key = unsafe { <&str as ToNapiValue>::to_napi_value(self.env, key) }
            .map_err(|e| BindError::internal(e.to_string()))?;
        let mut out = ptr::null_mut();
        check(self.env, unsafe {
            sys::napi_get_property(self.env, self.raw, key, &mut out)
        })?;
        Ok(self.child(out, name))
    }

    /// The elements of an array.
    pub(crate) fn array_items(&self) -> Result<Vec<Arg>, BindError> {
        let mut is_array = false;
        check(self.env, unsafe {
            sys::napi_is_array(self.env, self.raw, &mut is_array)
        })?;
        if !is_array {
            return Err(self.bad("must be an array"));
        }
        let mut len = 0u32;
        check(self.env, unsafe {
            sys::napi_get_array_length(self.env, self.raw, &mut len)
        })?;
        (0..len)
            .map(|i| {
                let mut out = ptr::null_mut();
                check(self.env, unsafe {
                    sys::napi_get_element(self.env, self.raw, i, &mut out)
                })?;
                Ok(self.child(out, format!("{}[{i}]", self.name)))
            })
            .collect()
    }
}

/// An object under construction on the JavaScript thread.
pub(crate) struct ObjOut {
    obj: napi::bindgen_prelude::Object<'static>,
}

impl ObjOut {
    pub(crate) fn new(env: sys::napi_env) -> napi::Result<ObjOut> {
        let mut raw = ptr::null_mut();
        let status = unsafe { sys::napi_create_object(env, &mut raw) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_create_object failed"));
        }
        Ok(ObjOut {
            obj: napi::bindgen_prelude::Object::from_raw(env, raw),
        })
    }

    pub(crate) fn set<V: ToNapiValue>(mut self, key: &str, value: V) -> napi::Result<ObjOut> {
        self.obj.set(key, value)?;
        Ok(self)
    }

    /// Sets `key` to an already built value.
    pub(crate) fn set_raw(self, key: &str, value: sys::napi_value) -> napi::Result<ObjOut> {
        self.set(key, Raw(value))
    }

    pub(crate) fn raw(&self) -> sys::napi_value {
        self.obj.value().value
    }
}

/// A JavaScript array of already built values.
pub(crate) fn array(
    env: sys::napi_env,
    items: Vec<sys::napi_value>,
) -> napi::Result<sys::napi_value> {
    let mut arr = ptr::null_mut();
    if unsafe { sys::napi_create_array_with_length(env, items.len(), &mut arr) }
        != sys::Status::napi_ok
    {
        return Err(napi::Error::from_reason("napi_create_array failed"));
    }
    for (i, item) in items.into_iter().enumerate() {
        if unsafe { sys::napi_set_element(env, arr, i as u32, item) } != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_set_element failed"));
        }
    }
    Ok(arr)
}

/// A new `Buffer` holding a copy of `bytes`.
pub(crate) fn buffer(env: sys::napi_env, bytes: &[u8]) -> napi::Result<sys::napi_value> {
    let (mut data, mut out) = (ptr::null_mut(), ptr::null_mut());
    let status = unsafe {
        sys::napi_create_buffer_copy(env, bytes.len(), bytes.as_ptr().cast(), &mut data, &mut out)
    };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::from_reason("napi_create_buffer_copy failed"));
    }
    Ok(out)
}

/// A seq (or count) as a JavaScript number, exact by construction.
pub(crate) fn safe_number(what: &str, n: u64) -> Result<f64, BindError> {
    if n > MAX_SAFE_INTEGER {
        return Err(BindError::out_of_range(what, n));
    }
    Ok(n as f64)
}
