//! Profile parsing and validation on arbitrary text: an error or a profile, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match firedup::profile::parse_checked(&text) {
        Ok(_) => {}
        Err(e) => assert!(!e.is_empty(), "an empty error message"),
    }
});
