//! Archives of whole runs (`format/SPEC.md` §11): what `runlog gc` moves a finished run's
//! logs into and `runlog restore` puts back. The codec is pure ([`codec`]); [`file`](mod@file) writes
//! an archive crash-safely through the file-system seam ([`crate::io::Fs`]) and reads it
//! back. Logs are gathered and restored through the [`crate::RunLog`] API only, so an
//! archive depends on no segment or frame layout and works for every backend.

pub mod codec;
pub mod file;
pub mod view;

pub use codec::{Archive, ArchivedLog};
pub use file::{
    ARCHIVE_EXT, ArchiveDirLock, GC_LOCK_FILE, archive_path, gather_log, list_archives,
    lock_archive_dir, read_archive, remove_archive, remove_temp_files, write_archive,
};
pub use view::ArchiveView;

#[cfg(test)]
mod tests;
