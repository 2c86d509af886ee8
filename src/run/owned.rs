//! The owned read's sink: a page of owned [`Event`]s decoded from the mapped segments with no
//! allocation or reference count of their own for their kinds, and one per page for the rest.

use std::cell::RefCell;
use std::ops::RangeInclusive;
use std::sync::{Mutex, PoisonError};

use super::{BatchAt, ReadSink};
use crate::event::{Event, KIND_LEN_MAX, Seq};
use crate::format::{BatchHeader, FormatError, decode_batch_each};
use crate::text::Text;

/// The owned events of a page, their texts and payloads copied out of the mapped segment
/// into two buffers of the page's own (two allocations per page, none per event). An owned
/// [`Event`] must stay what it was read as, and touching it must never fault, whatever
/// happens to the segment later: a repair (of any process) writes zeros over the bytes it
/// cuts and the run then grows over them, and the segment's seal truncates it; a view of the
/// map would then change under the caller, or kill the process with SIGBUS.
///
/// Kinds come from a small set (the SDK has about twenty): each is the process's interned
/// copy (see [`interned`]), so an event's kind costs neither a copy nor a reference count.
#[derive(Default)]
pub(super) struct OwnedSink {
    /// The events, their kinds interned, their other texts and payloads empty until
    /// [`Self::finish`].
    events: Vec<Event>,
    /// The interned kinds this page has met.
    kinds: Vec<Text>,
    /// The correlation ids, keys, and the kinds past the interning bound, in event order.
    texts: String,
    /// The payloads, in event order.
    payloads: Vec<u8>,
    /// Each event's lengths: kind (0 when interned), correlation id, key, payload.
    lens: Vec<[usize; 4]>,
}

impl OwnedSink {
    /// The events, each text a slice of the page's text buffer and each payload one of its
    /// payload buffer.
    pub(super) fn finish(mut self) -> Vec<Event> {
        let texts = Text::from(self.texts);
        let payloads = bytes::Bytes::from(self.payloads);
        let (mut t, mut p) = (0, 0);
        let mut text = |len: usize| {
            let s = texts.slice_ref(&texts[t..t + len]);
            t += len;
            s
        };
        for (e, [kind, corr, key, payload]) in self.events.iter_mut().zip(self.lens) {
            if kind > 0 {
                e.kind = text(kind);
            }
            if let Some(c) = &mut e.correlation_id {
                *c = text(corr);
            }
            if let Some(k) = &mut e.key {
                *k = text(key);
            }
            e.payload = payloads.slice(p..p + payload);
            p += payload;
        }
        self.events
    }

    /// The interned copy of `kind`, from this page's or else the process's.
    fn kind(&mut self, kind: &str) -> Option<Text> {
        if let Some(k) = self.kinds.iter().find(|k| ***k == *kind) {
            return Some(k.clone());
        }
        let k = interned(kind)?;
        self.kinds.push(k.clone());
        Some(k)
    }
}

impl ReadSink for OwnedSink {
    fn reserve(&mut self, n: usize, bytes: usize) {
        self.events.reserve(n);
        self.lens.reserve(n);
        // Frames hold the payloads and texts and more: no buffer grows (copying itself) or
        // outgrows what the page reads.
        self.payloads.reserve(bytes);
        self.texts
            .reserve(n.saturating_mul(TEXT_BYTES_HINT).min(bytes));
    }

    fn batch(
        &mut self,
        b: &BatchAt<'_>,
        seqs: RangeInclusive<Seq>,
    ) -> std::result::Result<(BatchHeader, Option<Seq>), FormatError> {
        decode_batch_each(b.file, b.offset, b.key, b.first_seq, b.len_max, seqs, |e| {
            let kind = self.kind(e.kind);
            let kind_len = if kind.is_some() { 0 } else { e.kind.len() };
            let (corr, key) = (e.correlation_id.unwrap_or(""), e.key.unwrap_or(""));
            self.texts.push_str(&e.kind[..kind_len]);
            self.texts.push_str(corr);
            self.texts.push_str(key);
            self.payloads.extend_from_slice(e.payload);
            self.lens
                .push([kind_len, corr.len(), key.len(), e.payload.len()]);
            // `finish` puts in the rest; an empty `Text` allocates nothing.
            self.events.push(Event {
                seq: e.seq,
                event_id: e.event_id,
                created_at_ms: e.created_at_ms,
                kind: kind.unwrap_or_default(),
                correlation_id: e.correlation_id.map(|_| Text::default()),
                key: e.key.map(|_| Text::default()),
                payload: bytes::Bytes::new(),
            });
        })
    }
}

/// Text bytes (correlation id, key) an event is planned to hold when a page reserves its
/// text buffer: the SDK's events hold ~31 (a correlation id of 31 bytes, or none).
const TEXT_BYTES_HINT: usize = 32;

/// How many distinct kinds a process interns: with kinds of at most [`KIND_LEN_MAX`] bytes,
/// at most 64 KiB kept for the process's life. Past it, a kind is copied into its page's
/// text buffer like the other texts.
pub(crate) const KINDS_INTERNED_MAX: usize = 1024;

/// Every kind interned so far, each leaked once (bounded by [`KINDS_INTERNED_MAX`]).
static INTERNED: Mutex<Vec<&'static str>> = Mutex::new(Vec::new());

thread_local! {
    /// The interned kinds this thread has looked up: threads reading at once take the
    /// process's lock only for a kind new to them.
    static SEEN: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// The process's one copy of `kind` as a static [`Text`] (cloning and dropping it
/// touch no reference count), interned on first sight; `None` once
/// [`KINDS_INTERNED_MAX`] kinds are, or for a kind longer than [`KIND_LEN_MAX`].
fn interned(kind: &str) -> Option<Text> {
    if kind.len() > KIND_LEN_MAX {
        return None;
    }
    let seen = SEEN.with_borrow(|seen| seen.iter().find(|k| **k == kind).copied());
    if let Some(k) = seen {
        return Some(Text::from_static(k));
    }
    let mut all = INTERNED.lock().unwrap_or_else(PoisonError::into_inner);
    let k = match all.iter().find(|k| **k == kind) {
        Some(k) => *k,
        None if all.len() >= KINDS_INTERNED_MAX => return None,
        None => {
            let k: &'static str = Box::leak(kind.to_owned().into_boxed_str());
            all.push(k);
            k
        }
    };
    drop(all);
    SEEN.with_borrow_mut(|seen| seen.push(k));
    Some(Text::from_static(k))
}

#[cfg(test)]
mod tests {
    use super::{KINDS_INTERNED_MAX, interned};

    /// A kind is interned once: every later lookup hands out the same static bytes. Past the
    /// bound, nothing more is interned (the page copies the kind instead), and what was
    /// interned stays.
    #[test]
    fn kinds_are_interned_once_and_no_more_than_the_bound() {
        let a = interned("kinds_test_step_completed").unwrap();
        let b = interned("kinds_test_step_completed").unwrap();
        assert_eq!(a, "kinds_test_step_completed");
        assert_eq!(a.as_ptr(), b.as_ptr(), "one copy per kind");
        assert_eq!(interned(&"k".repeat(65)), None, "longer than any kind");
        let mut fresh = 0;
        for i in 0..=KINDS_INTERNED_MAX {
            if interned(&format!("kinds_test_{i}")).is_some() {
                fresh += 1;
            }
        }
        assert!(
            fresh < KINDS_INTERNED_MAX,
            "the bound holds ({fresh} interned)"
        );
        assert_eq!(
            interned(&format!("kinds_test_{KINDS_INTERNED_MAX}_more")),
            None
        );
        let again = interned("kinds_test_step_completed").unwrap();
        assert_eq!(again.as_ptr(), a.as_ptr(), "interned kinds stay");
        // Another thread (its own cache empty) is handed the process's copy.
        let there =
            std::thread::spawn(|| interned("kinds_test_step_completed").unwrap().as_ptr() as usize);
        assert_eq!(
            there.join().unwrap(),
            a.as_ptr() as usize,
            "one copy for every thread"
        );
    }
}
