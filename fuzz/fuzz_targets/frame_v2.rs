//! Fuzz target `frame_v2`: the compact frame of format version 2 (format/SPEC.md §4a); the
//! body is `frame/mod.rs`, shared with `frame_v3`.

#![no_main]

mod frame;

libfuzzer_sys::fuzz_target!(|data: &[u8]| frame::run(data, 2));
