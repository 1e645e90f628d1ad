//! The native driver of the Go test TestParseKeyLikeGo (keyfields_test.go):
//! each stdin line is `<hex key> <hex names joined by ,>`; each stdout line is
//! `E <hex error>` when parse_key fails, else for every name and the unknown
//! field `zz` the five accessors' results, `o<hex value>` or `e<hex error>`
//! (raw, string, int, float as its bits, bool), space-separated.

use std::io::{BufRead, Write};

fn hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{:02x}", c)).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

fn res<T>(r: Result<T, flowhost::KeyError>, f: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => format!("o{}", hex(f(v).as_bytes())),
        Err(e) => format!("e{}", hex(e.to_string().as_bytes())),
    }
}

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout());
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let (k, n) = line.split_once(' ').unwrap_or((&line, ""));
        let key = String::from_utf8(unhex(k)).unwrap();
        let names: Vec<String> = if n.is_empty() {
            vec![]
        } else {
            n.split(',')
                .map(|h| String::from_utf8(unhex(h)).unwrap())
                .collect()
        };
        let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let kf = match flowhost::parse_key(&key, &names) {
            Ok(kf) => kf,
            Err(e) => {
                writeln!(out, "E {}", hex(e.to_string().as_bytes())).unwrap();
                continue;
            }
        };
        let mut fields = Vec::new();
        for name in names.iter().copied().chain(std::iter::once("zz")) {
            fields.push(res(kf.raw(name), |v| v.to_string()));
            fields.push(res(kf.string(name), |v| v));
            fields.push(res(kf.int(name), |v| v.to_string()));
            fields.push(res(kf.float(name), |v| v.to_bits().to_string()));
            fields.push(res(kf.bool(name), |v| v.to_string()));
        }
        writeln!(out, "{}", fields.join(" ")).unwrap();
    }
}
