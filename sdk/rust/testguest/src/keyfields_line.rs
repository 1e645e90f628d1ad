// What the key fields tests compare with Go (sdk/rust/keyfields_test.go):
// shared by the test guest's script "keyfields" (WebAssembly) and the
// native driver examples/keyfields.rs, which include!s this file.

fn kf_hex(b: &[u8]) -> String {
    b.iter().map(|c| format!("{:02x}", c)).collect()
}

fn kf_unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap_or(0))
        .collect()
}

fn kf_res<T>(r: Result<T, flowhost::KeyError>, f: impl Fn(T) -> String) -> String {
    match r {
        Ok(v) => format!("o{}", kf_hex(f(v).as_bytes())),
        Err(e) => format!("e{}", kf_hex(e.to_string().as_bytes())),
    }
}

/// The answer for key and the names spec (hex names joined by ","):
/// `E <hex error>` when parse_key fails, else for every name and the
/// unknown field `zz` the five accessors' results, `o<hex value>` or
/// `e<hex error>` (raw, string, int, float as its bits, bool).
pub fn keyfields_line(key: &str, spec: &str) -> String {
    let names: Vec<String> = if spec.is_empty() {
        vec![]
    } else {
        spec.split(',')
            .map(|h| String::from_utf8_lossy(&kf_unhex(h)).into_owned())
            .collect()
    };
    let names: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
    let kf = match flowhost::parse_key(key, &names) {
        Ok(kf) => kf,
        Err(e) => return format!("E {}", kf_hex(e.to_string().as_bytes())),
    };
    let mut fields = Vec::new();
    for name in names.iter().copied().chain(std::iter::once("zz")) {
        fields.push(kf_res(kf.raw(name), |v| v.to_string()));
        fields.push(kf_res(kf.string(name), |v| v));
        fields.push(kf_res(kf.int(name), |v| v.to_string()));
        fields.push(kf_res(kf.float(name), |v| v.to_bits().to_string()));
        fields.push(kf_res(kf.bool(name), |v| v.to_string()));
    }
    fields.join(" ")
}
