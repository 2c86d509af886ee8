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

use std::sync::Arc;

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

/// What settles a promise on the JavaScript thread: `Ok(value)` resolves it, `Err(value)`
/// rejects it.
pub(crate) type Settle = Box<dyn FnOnce(Env) -> Result<Raw, Raw> + Send>;

/// The one threadsafe function of a Node environment (the main thread's, or a Worker's)
/// through which every promise made there is settled from the addon's threads.
///
/// napi-rs's `JsDeferred` makes a threadsafe function per promise, with no finalizer: when
/// a Worker is terminated with calls in flight, Node frees those functions at the Worker's
/// teardown while the addon's threads still hold them, and the next call into one aborts
/// the whole process (`uv_mutex_lock` on freed memory). Here the function's finalizer
/// (which Node runs before it frees the function) clears `tsfn` under the lock every call
/// into the function holds, so a call either lands before the finalizer or finds no
/// function and drops its result: the promise of a terminated Worker is never settled,
/// and nothing else happens.
struct Link {
    env: usize,
    tsfn: parking_lot::Mutex<Option<Tsfn>>,
    /// Promises of this environment not settled yet: the function keeps the event loop
    /// alive while there are any (referenced), not otherwise (unreferenced). Changed on
    /// the JavaScript thread only.
    pending: std::sync::atomic::AtomicUsize,
}

#[derive(Clone, Copy)]
struct Tsfn(sys::napi_threadsafe_function);
// SAFETY: a threadsafe function may be called from any thread; `Link` guards its lifetime.
unsafe impl Send for Tsfn {}

/// The environments' links, by the address of their `napi_env` (a link is removed by its
/// finalizer, before an environment at the same address can exist).
static LINKS: std::sync::LazyLock<parking_lot::Mutex<std::collections::HashMap<usize, Arc<Link>>>> =
    std::sync::LazyLock::new(Default::default);

/// The link of `env`, made at its first promise.
fn link_of(env: sys::napi_env) -> napi::Result<Arc<Link>> {
    let key = env as usize;
    if let Some(link) = LINKS.lock().get(&key) {
        return Ok(link.clone());
    }
    let link = Arc::new(Link {
        env: key,
        tsfn: parking_lot::Mutex::new(None),
        pending: std::sync::atomic::AtomicUsize::new(0),
    });
    let mut name = std::ptr::null_mut();
    let mut tsfn = std::ptr::null_mut();
    // SAFETY: `env` is the live environment of the calling JavaScript thread. The
    // finalizer gets one strong count of `link` (`Arc::into_raw`), which it takes back;
    // `call_js` and `finalized` are the `extern "C"` functions below, with the signatures
    // Node-API calls them with.
    unsafe {
        let status = sys::napi_create_string_utf8(env, c"runlog".as_ptr(), 6, &mut name);
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_create_string_utf8 failed"));
        }
        let data = Arc::into_raw(link.clone()) as *mut std::ffi::c_void;
        let status = sys::napi_create_threadsafe_function(
            env,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            name,
            0,
            1,
            data,
            Some(finalized),
            std::ptr::null_mut(),
            Some(call_js),
            &mut tsfn,
        );
        if status != sys::Status::napi_ok {
            drop(Arc::from_raw(data as *const Link));
            return Err(napi::Error::from_reason(
                "napi_create_threadsafe_function failed",
            ));
        }
        // Idle until a promise is pending (`Pending::new`).
        sys::napi_unref_threadsafe_function(env, tsfn);
    }
    *link.tsfn.lock() = Some(Tsfn(tsfn));
    LINKS.lock().insert(key, link.clone());
    Ok(link)
}

/// Node-API's finalizer of a link's function: at the environment's teardown (or never).
unsafe extern "C" fn finalized(
    _env: sys::napi_env,
    data: *mut std::ffi::c_void,
    _hint: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is the strong count `link_of` gave the function.
    let link = unsafe { Arc::from_raw(data as *const Link) };
    *link.tsfn.lock() = None;
    let mut links = LINKS.lock();
    if links.get(&link.env).is_some_and(|l| Arc::ptr_eq(l, &link)) {
        links.remove(&link.env);
    }
}

/// One settlement on its way to the JavaScript thread.
struct Call {
    deferred: sys::napi_deferred,
    settle: Settle,
    link: Arc<Link>,
}

/// Node-API's call of a link's function, on the JavaScript thread (`env` null when Node
/// empties the queue of a function being finalized: the settlement is dropped).
unsafe extern "C" fn call_js(
    env: sys::napi_env,
    _js_callback: sys::napi_value,
    _context: *mut std::ffi::c_void,
    data: *mut std::ffi::c_void,
) {
    // SAFETY: `data` is a `Call` that `Pending::settle` boxed and handed over.
    let call = unsafe { Box::from_raw(data as *mut Call) };
    if env.is_null() {
        return;
    }
    let Call {
        deferred,
        settle,
        link,
    } = *call;
    let scope_env = Env::from_raw(env);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| settle(scope_env)))
        .unwrap_or_else(|_| Err(undefined(env)));
    // SAFETY: `deferred` was made in this environment by `Pending::new` and is settled
    // exactly once, here; the value is of the current scope.
    unsafe {
        match outcome {
            Ok(v) => sys::napi_resolve_deferred(env, deferred, v.0),
            Err(e) => sys::napi_reject_deferred(env, deferred, e.0),
        };
    }
    if link
        .pending
        .fetch_sub(1, std::sync::atomic::Ordering::AcqRel)
        == 1
        && let Some(t) = *link.tsfn.lock()
    {
        // SAFETY: on the JavaScript thread, before the function's finalizer.
        unsafe { sys::napi_unref_threadsafe_function(env, t.0) };
    }
}

impl Raw {
    /// `undefined` (a null handle should even that fail).
    pub(crate) fn undefined(env: &Env) -> Raw {
        undefined(env.raw())
    }
}

/// `undefined`, or a null handle should even that fail.
fn undefined(env: sys::napi_env) -> Raw {
    let mut v = std::ptr::null_mut();
    // SAFETY: `env` is the live environment of the calling JavaScript thread.
    unsafe { sys::napi_get_undefined(env, &mut v) };
    Raw(v)
}

/// A promise made on the JavaScript thread, to be settled once from any thread
/// ([`Pending::settle`]). Dropped unsettled, it rejects with what `dropped` makes.
pub(crate) struct Pending {
    call: Option<(sys::napi_deferred, Arc<Link>)>,
    dropped: fn() -> Settle,
}

// SAFETY: the deferred is only used again on the JavaScript thread, by `call_js`.
unsafe impl Send for Pending {}

impl Pending {
    /// A new promise of `env`'s JavaScript thread, and its handle; `dropped`: how it
    /// settles if it is dropped unsettled.
    pub(crate) fn new(env: &Env, dropped: fn() -> Settle) -> napi::Result<(Pending, Raw)> {
        let env = env.raw();
        let link = link_of(env)?;
        let Some(tsfn) = *link.tsfn.lock() else {
            return Err(napi::Error::from_reason(
                "the environment is being torn down",
            ));
        };
        let (mut deferred, mut promise) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: `env` is the live environment of the calling JavaScript thread.
        let status = unsafe { sys::napi_create_promise(env, &mut deferred, &mut promise) };
        if status != sys::Status::napi_ok {
            return Err(napi::Error::from_reason("napi_create_promise failed"));
        }
        if link
            .pending
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel)
            == 0
        {
            // SAFETY: on the JavaScript thread, the function alive (its finalizer runs on
            // this thread, at teardown).
            unsafe { sys::napi_ref_threadsafe_function(env, tsfn.0) };
        }
        Ok((
            Pending {
                call: Some((deferred, link)),
                dropped,
            },
            Raw(promise),
        ))
    }

    /// Settles the promise with `settle`, run on its JavaScript thread; from any thread. If
    /// that environment is gone (a terminated Worker), `settle` is dropped unrun.
    pub(crate) fn settle(mut self, settle: Settle) {
        let Some((deferred, link)) = self.call.take() else {
            return;
        };
        let guard = link.tsfn.lock();
        let Some(tsfn) = *guard else {
            return;
        };
        let call = Box::into_raw(Box::new(Call {
            deferred,
            settle,
            link: link.clone(),
        }));
        // SAFETY: the function is alive while `guard` is held (its finalizer takes the
        // same lock); on success Node owns `call` and hands it to `call_js`.
        let status = unsafe {
            sys::napi_call_threadsafe_function(
                tsfn.0,
                call.cast(),
                sys::ThreadsafeFunctionCallMode::nonblocking,
            )
        };
        if status != sys::Status::napi_ok {
            // Closing (the environment's teardown began): nobody will take it.
            // SAFETY: not handed over, so still ours.
            drop(unsafe { Box::from_raw(call) });
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.call.is_some() {
            let settle = (self.dropped)();
            let call = self.call.take();
            Pending {
                call,
                dropped: self.dropped,
            }
            .settle(settle);
        }
    }
}
