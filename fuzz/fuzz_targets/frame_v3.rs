//! Fuzz target `frame_v3`: the frame of format version 3 (format/SPEC.md §4b: a header of
//! varints counted from the segment's, kinds by code, ids of seqs); the body is
//! `frame/mod.rs`, shared with `frame_v2`.

#![no_main]

mod frame;

libfuzzer_sys::fuzz_target!(|data: &[u8]| frame::run(data, 3));
