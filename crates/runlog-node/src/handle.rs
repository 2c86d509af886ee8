//! The handle of one opened store, shared by its `Store` object and every `World` object of
//! it: the backend (`None` once `close()` was called), the World layer on it, its retention
//! thread (the `retention` option of `Store.open`), and the count of calls holding it open
//! ([`Lease`], [`WorldLease`]), which `close()` waits for.
//!
//! Both classes (`store`, `world`) depend on this module and it on neither, so that neither
//! class module reaches into the other.

use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use runlog::{CommitStatsSnapshot, RunLog, Store as CoreStore};
use runlog_world::{Retention, RetentionTask, Streams, World, WorldConfig};

use crate::errors::BindError;
use crate::event_page::PageCache;

/// The backend of an opened handle: every call goes through `log`; `file` is the same store
/// when it is a file store (for its commit counters), `None` on PostgreSQL.
#[derive(Clone)]
pub(crate) struct Backend {
    pub(crate) log: Arc<dyn RunLog>,
    pub(crate) file: Option<CoreStore>,
}

/// The World layer of one opened store handle (either backend).
pub(crate) struct Worlds {
    /// In an `Arc`: the retention thread holds it weakly (`World::start_retention`).
    pub(crate) world: Arc<World<Arc<dyn RunLog>>>,
    pub(crate) streams: Streams<Arc<dyn RunLog>>,
    /// `events.list` pages written before, for the next listing of the same page.
    pub(crate) pages: PageCache,
}

impl Worlds {
    /// The World layer on `store`, collecting finished runs as `retention` says.
    pub(crate) fn new(
        store: Arc<dyn RunLog>,
        retention: Option<Retention>,
        page_cache_bytes: usize,
    ) -> Worlds {
        let config = WorldConfig {
            retention,
            ..WorldConfig::default()
        };
        Worlds {
            streams: Streams::new(store.clone()),
            world: Arc::new(World::new(store, config)),
            pages: PageCache::new(page_cache_bytes),
        }
    }
}

/// One opened store handle.
pub(crate) struct Shared {
    pub(crate) path: String,
    pub(crate) read_only: bool,
    /// Why an `openOrReadOnly` store is read-only (the refused open for writing).
    pub(crate) read_only_cause: Option<BindError>,
    /// `"file"` or `"postgres"`.
    pub(crate) backend: &'static str,
    /// `None` once `close()` was called.
    pub(crate) store: Mutex<Option<Backend>>,
    /// Calls holding a [`Lease`]; `close()` settles when it drops to 0.
    pub(crate) inflight: Mutex<usize>,
    pub(crate) idle: Condvar,
    /// The commit counters as of `close()`.
    pub(crate) stats_at_close: Mutex<CommitStatsSnapshot>,
    /// The World layer on this store (one per opened handle, shared by every `World`
    /// object of it); `None` once `close()` was called.
    pub(crate) world: Mutex<Option<Arc<Worlds>>>,
    /// The World's retention thread, when the `retention` option asked for one and the
    /// store is writable; `close()` stops it (and joins it) before the store is released.
    pub(crate) retention: Option<RetentionTask>,
}

/// A call's use of the store: counted in `inflight` until dropped.
pub(crate) struct Lease {
    pub(crate) store: Arc<dyn RunLog>,
    pub(crate) shared: Arc<Shared>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut n = self.shared.inflight.lock();
        *n -= 1;
        if *n == 0 {
            self.shared.idle.notify_all();
        }
    }
}

/// A call's use of the World: holds the store open (counted by `close()`) until dropped.
pub(crate) struct WorldLease {
    pub(crate) worlds: Arc<Worlds>,
    pub(crate) _lease: Lease,
}

impl Shared {
    /// The handle of a freshly opened `store` (`read_only_cause`: why it is read-only); with
    /// `retention` and a writable store, the World's retention thread is started.
    pub(crate) fn new(
        path: String,
        store: Backend,
        read_only: bool,
        read_only_cause: Option<BindError>,
        retention: Option<Retention>,
        page_cache_bytes: usize,
    ) -> Shared {
        let read_only = read_only || read_only_cause.is_some();
        // A read-only store cannot be collected (`Store.openReadOnly` refuses the option;
        // `openOrReadOnly` on a store this process cannot write leaves it off).
        let worlds = Worlds::new(
            store.log.clone(),
            retention.filter(|_| !read_only),
            page_cache_bytes,
        );
        let retention = worlds.world.start_retention();
        Shared {
            path,
            read_only,
            read_only_cause,
            backend: if store.file.is_some() {
                "file"
            } else {
                "postgres"
            },
            store: Mutex::new(Some(store)),
            inflight: Mutex::new(0),
            idle: Condvar::new(),
            stats_at_close: Mutex::new(CommitStatsSnapshot::default()),
            world: Mutex::new(Some(Arc::new(worlds))),
            retention,
        }
    }

    /// The store held open for one call; `CLOSED` once `close()` was called.
    pub(crate) fn lease(self: &Arc<Shared>) -> Result<Lease, BindError> {
        let store = self
            .store
            .lock()
            .as_ref()
            .map(|b| b.log.clone())
            .ok_or_else(BindError::closed)?;
        *self.inflight.lock() += 1;
        Ok(Lease {
            store,
            shared: self.clone(),
        })
    }

    /// The World held open for one call; `CLOSED` once `close()` was called.
    pub(crate) fn world_lease(self: &Arc<Shared>) -> Result<WorldLease, BindError> {
        let worlds = self.world.lock().clone().ok_or_else(BindError::closed)?;
        let lease = self.lease()?;
        Ok(WorldLease {
            worlds,
            _lease: lease,
        })
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.store.lock().is_none()
    }
}
