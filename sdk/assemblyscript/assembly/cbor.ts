// A compact CBOR (RFC 8949) reader and writer for the envelopes of ABI v1.
//
// The Reader is strict the way abi/ABI.md section 3 demands: no tags, no
// indefinite lengths, no null or undefined where a typed field is read,
// text that is valid UTF-8, integers within their field's range, nesting
// of at most 32 levels, and a container count the remaining bytes can hold
// (every item takes at least one byte), so that hostile input never makes
// it allocate more than the input's size. It never traps: a failure is
// recorded once, with the field path, and every later read returns a zero
// value, so decoders can read on and check `failed` where it matters.
//
// The Writer produces Core Deterministic Encoding (RFC 8949 section 4.2.1):
// shortest heads and definite lengths. Map keys are written by the
// envelope encoders in their canonical order.

/** Nesting of arrays and maps allowed in any envelope (abi.maxNesting). */
export const MAX_NESTING: i32 = 32;

// Major types.
export const MAJOR_UINT: u32 = 0;
export const MAJOR_NEGINT: u32 = 1;
export const MAJOR_BYTES: u32 = 2;
export const MAJOR_TEXT: u32 = 3;
export const MAJOR_ARRAY: u32 = 4;
export const MAJOR_MAP: u32 = 5;
export const MAJOR_TAG: u32 = 6;
export const MAJOR_SIMPLE: u32 = 7;

const MAJOR_NAMES: StaticArray<string> = [
  "uint", "negative int", "byte string", "text string", "array", "map", "tag", "simple value",
];

/** Describes an item head for "expected X, got Y" messages, as the host does. */
export function describeHead(major: u32, info: u32, arg: u64): string {
  if (major != MAJOR_SIMPLE) return MAJOR_NAMES[major];
  if (info == 20 || info == 21) return "bool";
  if (info == 22) return "null";
  if (info == 23) return "undefined";
  if (info >= 25 && info <= 27) return "float";
  return "simple value " + arg.toString();
}

/**
 * Returns the number of UTF-16 code units that len bytes of UTF-8 at ptr
 * decode to, or -1 when they are not valid UTF-8 (Go's utf8.Valid: no
 * overlong forms, no surrogates, nothing above U+10FFFF).
 */
export function utf16Length(ptr: usize, len: usize): isize {
  const end = ptr + len;
  let units: isize = 0;
  while (ptr < end) {
    const b0 = <u32>load<u8>(ptr);
    if (b0 < 0x80) {
      ptr++;
      units++;
      continue;
    }
    const left = end - ptr;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      if (left < 2 || (<u32>load<u8>(ptr, 1) & 0xc0) != 0x80) return -1;
      ptr += 2;
      units++;
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      if (left < 3) return -1;
      const b1 = <u32>load<u8>(ptr, 1);
      const lo: u32 = b0 == 0xe0 ? 0xa0 : 0x80;
      const hi: u32 = b0 == 0xed ? 0x9f : 0xbf;
      if (b1 < lo || b1 > hi || (<u32>load<u8>(ptr, 2) & 0xc0) != 0x80) return -1;
      ptr += 3;
      units++;
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      if (left < 4) return -1;
      const b1 = <u32>load<u8>(ptr, 1);
      const lo: u32 = b0 == 0xf0 ? 0x90 : 0x80;
      const hi: u32 = b0 == 0xf4 ? 0x8f : 0xbf;
      if (b1 < lo || b1 > hi || (<u32>load<u8>(ptr, 2) & 0xc0) != 0x80 || (<u32>load<u8>(ptr, 3) & 0xc0) != 0x80) return -1;
      ptr += 4;
      units += 2;
    } else {
      return -1;
    }
  }
  return units;
}

/** Reports whether len bytes at ptr are valid UTF-8 (Go's utf8.Valid). */
export function validUTF8(ptr: usize, len: usize): bool {
  return utf16Length(ptr, len) >= 0;
}

/** Decodes len bytes of ASCII at ptr into a string. */
function decodeASCII(ptr: usize, len: usize): string {
  const str = __new(len << 1, idof<String>());
  for (let i: usize = 0; i < len; i++) store<u16>(str + (i << 1), <u16>load<u8>(ptr + i));
  return changetype<string>(str);
}

/**
 * Decodes len bytes of UTF-8 at ptr into a string. Each byte of an
 * invalid sequence becomes U+FFFD, as Go's range loop over a string does;
 * the strict reader validates first, so they only occur in payloads that
 * a computation chooses to read as text.
 */
export function decodeUTF8(ptr: usize, len: usize): string {
  if (len == 0) return "";
  if (<usize>utf16Length(ptr, len) == len) return decodeASCII(ptr, len);
  const end = ptr + len;
  // One UTF-16 unit per byte is the most a UTF-8 sequence can need.
  const str = __new(len << 1, idof<String>());
  let out = str;
  while (ptr < end) {
    const b0 = <u32>load<u8>(ptr);
    if (b0 < 0x80) {
      store<u16>(out, <u16>b0);
      out += 2;
      ptr++;
      continue;
    }
    let cp: u32 = 0xfffd;
    let size: usize = 1;
    const left = end - ptr;
    if (b0 >= 0xc2 && b0 <= 0xdf) {
      if (left >= 2) {
        const b1 = <u32>load<u8>(ptr, 1);
        if ((b1 & 0xc0) == 0x80) {
          cp = (b0 & 0x1f) << 6 | (b1 & 0x3f);
          size = 2;
        }
      }
    } else if (b0 >= 0xe0 && b0 <= 0xef) {
      if (left >= 3) {
        const b1 = <u32>load<u8>(ptr, 1);
        const b2 = <u32>load<u8>(ptr, 2);
        const lo: u32 = b0 == 0xe0 ? 0xa0 : 0x80;
        const hi: u32 = b0 == 0xed ? 0x9f : 0xbf;
        if (b1 >= lo && b1 <= hi && (b2 & 0xc0) == 0x80) {
          cp = (b0 & 0x0f) << 12 | (b1 & 0x3f) << 6 | (b2 & 0x3f);
          size = 3;
        }
      }
    } else if (b0 >= 0xf0 && b0 <= 0xf4) {
      if (left >= 4) {
        const b1 = <u32>load<u8>(ptr, 1);
        const b2 = <u32>load<u8>(ptr, 2);
        const b3 = <u32>load<u8>(ptr, 3);
        const lo: u32 = b0 == 0xf0 ? 0x90 : 0x80;
        const hi: u32 = b0 == 0xf4 ? 0x8f : 0xbf;
        if (b1 >= lo && b1 <= hi && (b2 & 0xc0) == 0x80 && (b3 & 0xc0) == 0x80) {
          cp = (b0 & 0x07) << 18 | (b1 & 0x3f) << 12 | (b2 & 0x3f) << 6 | (b3 & 0x3f);
          size = 4;
        }
      }
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      store<u16>(out, <u16>(0xd800 | (cp >> 10)));
      store<u16>(out, <u16>(0xdc00 | (cp & 0x3ff)), 2);
      out += 4;
    } else {
      store<u16>(out, <u16>cp);
      out += 2;
    }
    ptr += size;
  }
  return changetype<string>(__renew(str, out - str));
}

/** The empty byte string every empty default shares: nothing can be written into it. */
export const EMPTY = new Uint8Array(0);

/** Encodes s as UTF-8; unpaired surrogates become U+FFFD. */
export function encodeUTF8(s: string): Uint8Array {
  const n = String.UTF8.byteLength(s);
  const out = new Uint8Array(n);
  String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, out.dataStart, false, String.UTF8.ErrorMode.REPLACE);
  return out;
}

/** Returns the bytes of a payload-like value: a string as UTF-8, bytes as they are. */
export function bytesOf<T>(value: T): Uint8Array {
  if (isString<T>()) {
    return encodeUTF8(changetype<string>(value));
  } else if (value instanceof Uint8Array) {
    return changetype<Uint8Array>(value);
  } else if (value instanceof ArrayBuffer) {
    return Uint8Array.wrap(changetype<ArrayBuffer>(value));
  } else {
    ERROR("flowhost: a payload is a string, a Uint8Array or an ArrayBuffer");
  }
  return EMPTY;
}

/**
 * Reader walks one encoded envelope in a buffer. The typed reads check
 * the item's type and record the first error; the decoder adds the field
 * path on the way out with in() and at().
 */
export class Reader {
  /** The buffer the envelope lives in; byte strings are views of it. */
  buf: ArrayBuffer;
  p: usize;
  end: usize;
  /** The first error, without its path; null while everything is fine. */
  err: string | null = null;
  /** The path of the first error, built innermost first. */
  path: string = "";
  // The last head read.
  major: u32 = 0;
  info: u32 = 0;
  arg: u64 = 0;

  constructor(buf: ArrayBuffer, offset: i32, length: i32) {
    this.buf = buf;
    this.p = changetype<usize>(buf) + <usize>offset;
    this.end = this.p + <usize>length;
  }

  @inline get failed(): bool {
    return this.err !== null;
  }

  /** Records msg as the error unless one is already recorded; returns false. */
  fail(msg: string): bool {
    if (this.err === null) this.err = msg;
    return false;
  }

  /** Prefixes the error's path with a field name. */
  in(field: string): void {
    if (this.err === null) return;
    if (this.path.length == 0) this.path = field;
    else if (this.path.charCodeAt(0) == 0x5b /* [ */) this.path = field + this.path;
    else this.path = field + "." + this.path;
  }

  /** Prefixes the error's path with an array index. */
  at(index: i32): void {
    if (this.err === null) return;
    if (this.path.length == 0 || this.path.charCodeAt(0) == 0x5b) this.path = "[" + index.toString() + "]" + this.path;
    else this.path = "[" + index.toString() + "]." + this.path;
  }

  /** The error with its path, as the host writes its decode errors. */
  message(): string {
    const err = this.err;
    if (err === null) return "";
    return this.path.length ? this.path + ": " + err : err;
  }

  /** Bytes not read yet. */
  @inline get left(): usize {
    return this.end - this.p;
  }

  /** Reads one item head into major, info and arg. */
  head(): bool {
    if (this.err !== null) return false;
    if (this.p >= this.end) return this.fail("unexpected end of data");
    const b = <u32>load<u8>(this.p);
    this.p++;
    const major = b >> 5;
    const info = b & 0x1f;
    this.major = major;
    this.info = info;
    if (info < 24) {
      this.arg = <u64>info;
      return true;
    }
    if (info > 27) {
      if (info == 31) {
        if (major >= MAJOR_BYTES && major <= MAJOR_MAP) return this.fail("indefinite-length " + MAJOR_NAMES[major] + " is not allowed");
        if (major == MAJOR_SIMPLE) return this.fail("unexpected break");
      }
      return this.fail("malformed item head 0x" + b.toString(16));
    }
    const n = <usize>1 << <usize>(info - 24);
    if (this.left < n) return this.fail("unexpected end of data");
    let arg: u64;
    if (n == 1) arg = <u64>load<u8>(this.p);
    else if (n == 2) arg = <u64>bswap<u16>(load<u16>(this.p));
    else if (n == 4) arg = <u64>bswap<u32>(load<u32>(this.p));
    else arg = bswap<u64>(load<u64>(this.p));
    this.p += n;
    this.arg = arg;
    if (major == MAJOR_SIMPLE && info == 24 && arg < 32) return this.fail("malformed simple value " + arg.toString());
    return true;
  }

  private mismatch(expected: string): bool {
    return this.fail("expected " + expected + ", got " + describeHead(this.major, this.info, this.arg));
  }

  /** Reads an unsigned integer (major type 0). */
  uint(): u64 {
    if (!this.head()) return 0;
    if (this.major != MAJOR_UINT) {
      this.mismatch("uint");
      return 0;
    }
    return this.arg;
  }

  /** Reads an integer of major type 0 or 1 that fits int64. */
  int(): i64 {
    if (!this.head()) return 0;
    if (this.major != MAJOR_UINT && this.major != MAJOR_NEGINT) {
      this.mismatch("int");
      return 0;
    }
    if (this.arg > <u64>i64.MAX_VALUE) {
      this.fail("integer overflows int64");
      return 0;
    }
    return this.major == MAJOR_UINT ? <i64>this.arg : -1 - <i64>this.arg;
  }

  /** Steps over n content bytes and returns their address, or 0 on failure. */
  private skip(n: u64): usize {
    if (n > <u64>this.left) {
      this.fail("string of " + n.toString() + " bytes runs past the end of the data (" + this.left.toString() + " bytes left)");
      return 0;
    }
    const at = this.p;
    this.p += <usize>n;
    return at;
  }

  /** Reads the content of a text string whose head was read. */
  textBody(): string {
    const n = this.arg;
    const at = this.skip(n);
    if (this.err !== null) return "";
    const units = utf16Length(at, <usize>n);
    if (units < 0) {
      this.fail("text string is not valid UTF-8");
      return "";
    }
    return <usize>units == <usize>n ? decodeASCII(at, <usize>n) : decodeUTF8(at, <usize>n);
  }

  /** Reads a text string. */
  text(): string {
    if (!this.head()) return "";
    if (this.major != MAJOR_TEXT) {
      this.mismatch("text string");
      return "";
    }
    return this.textBody();
  }

  /** Reads the content of a byte string whose head was read, as a view of the buffer. */
  bytesBody(): Uint8Array {
    const n = this.arg;
    const at = this.skip(n);
    if (this.err !== null) return EMPTY;
    return Uint8Array.wrap(this.buf, <i32>(at - changetype<usize>(this.buf)), <i32>n);
  }

  /** Reads a byte string, as a view of the buffer (no copy). */
  bytes(): Uint8Array {
    if (!this.head()) return EMPTY;
    if (this.major != MAJOR_BYTES) {
      this.mismatch("byte string");
      return EMPTY;
    }
    return this.bytesBody();
  }

  /**
   * Checks a container's count against the nesting depth and against the
   * bytes left: itemsPer is 1 for arrays, 2 for maps.
   */
  enter(count: u64, itemsPer: u64, depth: i32): i32 {
    if (depth >= MAX_NESTING) {
      this.fail("nesting exceeds " + MAX_NESTING.toString() + " levels");
      return 0;
    }
    if (count > <u64>this.left / itemsPer) {
      this.fail("container of " + count.toString() + " items runs past the end of the data");
      return 0;
    }
    return <i32>count;
  }

  /** Reads an array head and returns its count. */
  array(depth: i32): i32 {
    if (!this.head()) return 0;
    if (this.major != MAJOR_ARRAY) {
      this.mismatch("array");
      return 0;
    }
    return this.enter(this.arg, 1, depth);
  }

  /** Reads a map head and returns its count of pairs. */
  map(depth: i32): i32 {
    if (!this.head()) return 0;
    if (this.major != MAJOR_MAP) {
      this.mismatch("map");
      return 0;
    }
    return this.enter(this.arg, 2, depth);
  }

  /**
   * Reads a map key, which must be a text string, and returns the index of
   * the field it names in fields, or -1 with an error recorded.
   */
  field(fields: StaticArray<string>): i32 {
    if (!this.head()) return -1;
    if (this.major != MAJOR_TEXT) {
      this.fail("map key: expected text string, got " + describeHead(this.major, this.info, this.arg));
      return -1;
    }
    const n = this.arg;
    const at = this.skip(n);
    if (this.err !== null) return -1;
    for (let i = 0; i < fields.length; i++) {
      if (asciiEquals(at, <usize>n, unchecked(fields[i]))) return i;
    }
    if (!validUTF8(at, <usize>n)) {
      this.fail("map key is not valid UTF-8");
    } else {
      this.fail("unknown field");
      this.in(decodeUTF8(at, <usize>n));
    }
    return -1;
  }

  /** Reads a map key that must be a valid text string. */
  key(): string {
    if (!this.head()) return "";
    if (this.major != MAJOR_TEXT) {
      this.fail("map key: expected text string, got " + describeHead(this.major, this.info, this.arg));
      return "";
    }
    const n = this.arg;
    const at = this.skip(n);
    if (this.err !== null) return "";
    if (!validUTF8(at, <usize>n)) {
      this.fail("map key is not valid UTF-8");
      return "";
    }
    return decodeUTF8(at, <usize>n);
  }

  /**
   * Steps over one well-formed item of any type, tags included; used only
   * to read an envelope leniently (peekVersion).
   */
  skipItem(depth: i32): bool {
    if (!this.head()) return false;
    const major = this.major;
    const arg = this.arg;
    if (major == MAJOR_BYTES || major == MAJOR_TEXT) {
      this.skip(arg);
      return this.err === null;
    }
    if (major == MAJOR_ARRAY || major == MAJOR_MAP) {
      const per: u64 = major == MAJOR_MAP ? 2 : 1;
      const n = this.enter(arg, per, depth);
      for (let i = 0; i < n * <i32>per; i++) {
        if (!this.skipItem(depth + 1)) return false;
      }
      return this.err === null;
    }
    if (major == MAJOR_TAG) {
      if (depth >= MAX_NESTING) return this.fail("nesting exceeds " + MAX_NESTING.toString() + " levels");
      return this.skipItem(depth + 1);
    }
    return true;
  }
}

/** Reports whether the n bytes at ptr equal the ASCII string s. */
function asciiEquals(ptr: usize, n: usize, s: string): bool {
  if (<usize>s.length != n) return false;
  const sp = changetype<usize>(s);
  for (let i: usize = 0; i < n; i++) {
    if (<u32>load<u8>(ptr + i) != <u32>load<u16>(sp + (i << 1))) return false;
  }
  return true;
}

/**
 * Writer builds one encoded envelope in a growing buffer. Its buffer may
 * be reused with reset(): nothing is freed between envelopes.
 */
export class Writer {
  buf: ArrayBuffer;
  len: i32 = 0;

  constructor(capacity: i32 = 256) {
    this.buf = new ArrayBuffer(capacity > 0 ? capacity : 16);
  }

  /** Forgets what was written; the buffer is kept. */
  reset(): void {
    this.len = 0;
  }

  /** Address of the first byte. */
  @inline get ptr(): usize {
    return changetype<usize>(this.buf);
  }

  /** Makes room for n more bytes. */
  ensure(n: i32): void {
    const need = <i64>this.len + <i64>n;
    const cap = this.buf.byteLength;
    if (need <= <i64>cap) return;
    let next = <i64>cap << 1;
    if (next < need) next = need;
    if (next > 0x7fff_fff0) next = 0x7fff_fff0;
    const grown = new ArrayBuffer(<i32>next);
    memory.copy(changetype<usize>(grown), changetype<usize>(this.buf), <usize>this.len);
    this.buf = grown;
  }

  /** Writes a head with the shortest argument encoding. */
  head(major: u32, arg: u64): void {
    this.ensure(9);
    const at = this.ptr + <usize>this.len;
    const m = <u8>(major << 5);
    if (arg < 24) {
      store<u8>(at, m | <u8>arg);
      this.len += 1;
    } else if (arg <= 0xff) {
      store<u8>(at, m | 24);
      store<u8>(at, <u8>arg, 1);
      this.len += 2;
    } else if (arg <= 0xffff) {
      store<u8>(at, m | 25);
      store<u16>(at, bswap<u16>(<u16>arg), 1);
      this.len += 3;
    } else if (arg <= 0xffff_ffff) {
      store<u8>(at, m | 26);
      store<u32>(at, bswap<u32>(<u32>arg), 1);
      this.len += 5;
    } else {
      store<u8>(at, m | 27);
      store<u64>(at, bswap<u64>(arg), 1);
      this.len += 9;
    }
  }

  uint(v: u64): void {
    this.head(MAJOR_UINT, v);
  }

  int(v: i64): void {
    if (v >= 0) this.head(MAJOR_UINT, <u64>v);
    else this.head(MAJOR_NEGINT, <u64>(-1 - v));
  }

  /** Writes a text string; unpaired surrogates become U+FFFD. */
  text(s: string): void {
    // Optimistically as ASCII, in one pass; anything else starts over.
    const chars = s.length;
    this.ensure(chars + 9);
    const start = this.len;
    this.head(MAJOR_TEXT, <u64>chars);
    const sp = changetype<usize>(s);
    let at = this.ptr + <usize>this.len;
    let i = 0;
    for (; i < chars; i++) {
      const c = <u32>load<u16>(sp + (<usize>i << 1));
      if (c >= 0x80) break;
      store<u8>(at + <usize>i, <u8>c);
    }
    if (i == chars) {
      this.len += chars;
      return;
    }
    this.len = start;
    const n = String.UTF8.byteLength(s);
    this.head(MAJOR_TEXT, <u64>n);
    this.ensure(n);
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr + <usize>this.len, false, String.UTF8.ErrorMode.REPLACE);
    this.len += n;
  }

  /** Writes a byte string. */
  bytes(b: Uint8Array): void {
    this.head(MAJOR_BYTES, <u64>b.length);
    this.raw(b.dataStart, b.length);
  }

  /** Writes a text string whose UTF-8 bytes are b (valid UTF-8 is the caller's promise). */
  textBytes(b: Uint8Array): void {
    this.head(MAJOR_TEXT, <u64>b.length);
    this.raw(b.dataStart, b.length);
  }

  /** Appends n bytes at ptr as they are. */
  raw(ptr: usize, n: i32): void {
    this.ensure(n);
    memory.copy(this.ptr + <usize>this.len, ptr, <usize>n);
    this.len += n;
  }

  array(n: i32): void {
    this.head(MAJOR_ARRAY, <u64>n);
  }

  map(n: i32): void {
    this.head(MAJOR_MAP, <u64>n);
  }
}
