//! `keylatch_cluster::fuzzing::check_topology` on arbitrary bytes (see its docs for
//! what it asserts).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| keylatch_cluster::fuzzing::check_topology(data));
