//! The addon's only raw Node-API: what napi-rs's typed layer (napi 3) does not offer. Every
//! other module goes through `napi::Env`, `Object`, `Array`, `Unknown`, `BufferSlice`, …
//!
//! - [`Raw`]: a JavaScript value handed back to napi as is, for the methods that resolve
//!   with a promise or an object built here (`napi::bindgen_prelude::Unknown` cannot be a
//!   `#[napi]` method's return type: it borrows the call's scope, and `Env` is taken by
//!   value). Implementing `ToNapiValue` is an `unsafe fn` by the trait's definition; it
//!   returns the handle it holds.
//!   [`Raw::to_unknown`] turns such a handle back into a typed value of the same scope.
//! - [`rejected`]: a promise already rejected, for an argument refused on the JavaScript
//!   thread. napi's typed `JsDeferred` settles through a threadsafe function, one more
//!   object and a trip through the event loop per call (twice the cost of a refused call,
//!   measured); `napi_create_promise` + `napi_reject_deferred` do it at once, as before.
//! - [`take_exception`]: a throwing getter or `toJSON` leaves a JavaScript exception
//!   pending, and napi-rs reports only the status (`PendingException`); the exception must
//!   be cleared so that it rejects the call's promise instead of escaping into JavaScript,
//!   and `napi_is_exception_pending` / `napi_get_and_clear_last_exception` have no typed
//!   counterpart.

#![allow(unsafe_code)]

use napi::bindgen_prelude::{FromNapiValue, ToNapiValue, TypeName, Unknown, ValueType};
use napi::{Env, JsValue, sys};

/// A JavaScript value handed back to napi as is (a promise, an object built here).
pub struct Raw(sys::napi_value);

impl Raw {
    /// The handle of `value` (valid in the scope that made it).
    pub(crate) fn new<'e>(value: impl JsValue<'e>) -> Raw {
        Raw(value.raw())
    }

    /// The value again, as an `Unknown` of `env` (for a value made in the current scope, to
    /// put it in an array).
    pub(crate) fn to_unknown<'e>(&self, env: &'e Env) -> napi::Result<Unknown<'e>> {
        // SAFETY: `self.0` is a live handle of the current scope of `env`'s thread (a `Raw`
        // never outlives the call that made it).
        unsafe { Unknown::from_napi_value(env.raw(), self.0) }
    }
}

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

/// A promise rejected with `error` (a value of the current scope).
pub(crate) fn rejected(env: &Env, error: Unknown<'_>) -> napi::Result<Raw> {
    let env = env.raw();
    let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: `env` is the live environment of the calling JavaScript thread; the call
    // writes a fresh deferred and its promise.
    let status = unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::from_reason("napi_create_promise failed"));
    }
    // SAFETY: `deferred` was just created and is settled exactly once, here; `error` is a
    // value of this scope.
    let status = unsafe { sys::napi_reject_deferred(env, deferred, error.raw()) };
    if status != sys::Status::napi_ok {
        return Err(napi::Error::from_reason("napi_reject_deferred failed"));
    }
    Ok(Raw(promise))
}

/// Clears the pending JavaScript exception and returns its text (`String(exception)`, or
/// `"an exception"` when that throws too); `None` when none is pending.
pub(crate) fn take_exception(env: &Env) -> Option<String> {
    let env = env.raw();
    let mut pending = false;
    // SAFETY: `env` is the live environment of the calling JavaScript thread; both calls
    // only write their out-parameter.
    let status = unsafe { sys::napi_is_exception_pending(env, &mut pending) };
    if status != sys::Status::napi_ok || !pending {
        return None;
    }
    let mut exc = std::ptr::null_mut();
    // SAFETY: as above; on success `exc` is a value of the current scope, which
    // `Unknown` (any value) may hold.
    let exc = unsafe {
        if sys::napi_get_and_clear_last_exception(env, &mut exc) != sys::Status::napi_ok {
            return None;
        }
        Unknown::from_napi_value(env, exc).ok()?
    };
    let text = exc
        .coerce_to_string()
        .and_then(|t| t.into_utf8())
        .and_then(|t| t.into_owned());
    Some(text.unwrap_or_else(|_| {
        // `String(exception)` threw in turn: that one is cleared as well.
        let mut again = std::ptr::null_mut();
        // SAFETY: as above.
        unsafe { sys::napi_get_and_clear_last_exception(env, &mut again) };
        "an exception".to_owned()
    }))
}
