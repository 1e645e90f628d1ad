//! The native driver of the Go tests of keyfields_test.go: each stdin line
//! is `<hex key> <hex names joined by ,>`; each stdout line is the answer
//! of testguest/src/keyfields_line.rs, the code the test guest runs.

use std::io::{BufRead, Write};

include!("../testguest/src/keyfields_line.rs");

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let (k, n) = line.split_once(' ').unwrap_or((&line, ""));
        let key = String::from_utf8(kf_unhex(k)).unwrap();
        writeln!(out, "{}", keyfields_line(&key, n)).unwrap();
    }
}
