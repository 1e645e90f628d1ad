;; echo.wat: a flowhost guest written by hand that echoes every message.
;;
;; For each key of a batch that has messages it reports one emit per
;; message, in order: the message's payload, unchanged, on stream "out",
;; with the message as its only parent. Due timers are inputs too (they
;; come first in input numbering) but produce nothing, so a key with only
;; timers is left out of the response. This is what the conformance
;; script (sdk/conformance/SCRIPT.md) does with a message whose payload
;; does not start with "!", and nothing else of it.
;;
;; It decodes the request strictly, as ABI v1 (abi/ABI.md section 3)
;; requires: definite lengths, no tags, no unknown, duplicate or missing
;; fields, every field of its type, integers in range, valid UTF-8 text,
;; nothing after the envelope. A request it cannot decode gets status -1;
;; an envelope whose abi field is not 1 gets status -3. It encodes the
;; response canonically (RFC 8949 core deterministic encoding).
;;
;; Build: wat2wasm echo.wat -o echo.wasm
;;
;; Memory layout:
;;   32 ..  368   field names the decoder knows, one per 16-byte slot
;;   384 .. 448   fixed parts of the response
;;   1024 ..      the request (flowhost_alloc always returns 1024)
;;   after it     the response, built upwards; its header is written last,
;;                in front of the first key entry, once the count of keys
;;                is known

(module
  (memory (export "memory") 1)

  ;; Field names, slot k at 32 + 16k.
  (data (i32.const 32) "abi")          ;; 0
  (data (i32.const 48) "keys")         ;; 1
  (data (i32.const 64) "kind")         ;; 2
  (data (i32.const 80) "epoch")        ;; 3
  (data (i32.const 96) "partition")    ;; 4
  (data (i32.const 112) "watermarks")  ;; 5
  (data (i32.const 128) "computation") ;; 6
  (data (i32.const 144) "event")       ;; 7
  (data (i32.const 160) "system")      ;; 8
  (data (i32.const 176) "key")         ;; 9
  (data (i32.const 192) "state")       ;; 10
  (data (i32.const 208) "timers")      ;; 11
  (data (i32.const 224) "messages")    ;; 12
  (data (i32.const 240) "id")          ;; 13
  (data (i32.const 256) "trigger_ts")  ;; 14
  (data (i32.const 272) "event_ts")    ;; 15
  (data (i32.const 288) "payload")     ;; 16
  (data (i32.const 304) "stream")      ;; 17
  (data (i32.const 320) "system_ts")   ;; 18
  (data (i32.const 336) "alignment_ts");; 19
  (data (i32.const 352) "transform")   ;; 20
  (data (i32.const 368) "map")         ;; 21

  ;; Response parts (canonical key order: shorter key first, then bytewise).
  ;; 384: the response map's start, a1 64 "keys" (6 bytes), then the
  ;;      head of the keys array.
  (data (i32.const 384) "\a1\64keys")
  ;; 400: a key entry's start, a2 63 "key" (5 bytes), then the key's text.
  (data (i32.const 400) "\a2\63key")
  ;; 408: between the key's text and the emits array, 65 "emits" (6 bytes).
  (data (i32.const 408) "\65emits")
  ;; 416: an emit's start, a3 66 "stream" 63 "out" 67 "parents" 81
  ;;      (21 bytes), then the parent index as a uint.
  (data (i32.const 416) "\a3\66stream\63out\67parents\81")
  ;; 440: between the parent and the payload, 67 "payload" (8 bytes).
  (data (i32.const 440) "\67payload")

  (global $IN i32 (i32.const 1024))

  ;; Decoder state.
  (global $pos (mut i32) (i32.const 0)) ;; next byte to read
  (global $end (mut i32) (i32.const 0)) ;; end of the request
  (global $err (mut i32) (i32.const 0)) ;; first failure: 0, -1 or -2
  (global $maj (mut i32) (i32.const 0)) ;; major type of the last head, -1 after a failure
  (global $arg (mut i64) (i64.const 0)) ;; argument of the last head
  (global $sptr (mut i32) (i32.const 0)) ;; last text or bytes read
  (global $slen (mut i32) (i32.const 0))
  (global $version (mut i64) (i64.const 1))

  ;; Encoder state.
  (global $out (mut i32) (i32.const 0))

  (func (export "flowhost_abi_v1"))

  ;; flowhost_alloc(size) -> ptr: always 1024, after growing memory to
  ;; hold size bytes there; 0 when it cannot or size is negative.
  (func (export "flowhost_alloc") (param $size i32) (result i32)
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (global.get $IN))
                                     (i64.extend_i32_u (local.get $size)))))
      (then (return (i32.const 0))))
    (global.get $IN))

  ;; $fit grows memory so that its first n bytes exist; 0 when it cannot.
  (func $fit (param $n i64) (result i32)
    (local $have i64)
    (local $need i64)
    (local.set $have (i64.extend_i32_u (memory.size)))
    (local.set $need (i64.shr_u (i64.add (local.get $n) (i64.const 65535)) (i64.const 16)))
    (if (i64.le_u (local.get $need) (local.get $have))
      (then (return (i32.const 1))))
    (if (i64.gt_u (local.get $need) (i64.const 65536))
      (then (return (i32.const 0))))
    (i32.ne
      (memory.grow (i32.wrap_i64 (i64.sub (local.get $need) (local.get $have))))
      (i32.const -1)))

  ;; ---- decoding -------------------------------------------------------

  (func $fail (param $status i32)
    (if (i32.eqz (global.get $err))
      (then (global.set $err (local.get $status))))
    (global.set $maj (i32.const -1)))

  ;; $left is the number of unread bytes.
  (func $left (result i64)
    (i64.extend_i32_u (i32.sub (global.get $end) (global.get $pos))))

  ;; $head reads an item's head into $maj and $arg. Indefinite lengths,
  ;; reserved values and tags are refused.
  (func $head
    (local $b i32)
    (local $info i32)
    (local $n i32) ;; bytes of argument after the initial byte
    (if (global.get $err) (then (call $fail (i32.const -1)) (return)))
    (if (i64.eqz (call $left)) (then (call $fail (i32.const -1)) (return)))
    (local.set $b (i32.load8_u (global.get $pos)))
    (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
    (local.set $info (i32.and (local.get $b) (i32.const 31)))
    (global.set $maj (i32.shr_u (local.get $b) (i32.const 5)))
    (if (i32.eq (global.get $maj) (i32.const 6)) (then (call $fail (i32.const -1)) (return)))
    (if (i32.lt_u (local.get $info) (i32.const 24))
      (then (global.set $arg (i64.extend_i32_u (local.get $info))) (return)))
    (if (i32.gt_u (local.get $info) (i32.const 27)) (then (call $fail (i32.const -1)) (return)))
    ;; 24, 25, 26, 27: 1, 2, 4, 8 bytes, big-endian.
    (local.set $n (i32.shl (i32.const 1) (i32.sub (local.get $info) (i32.const 24))))
    (if (i64.lt_u (call $left) (i64.extend_i32_u (local.get $n)))
      (then (call $fail (i32.const -1)) (return)))
    (global.set $arg (i64.const 0))
    (loop $byte
      (global.set $arg
        (i64.or (i64.shl (global.get $arg) (i64.const 8))
                (i64.load8_u (global.get $pos))))
      (global.set $pos (i32.add (global.get $pos) (i32.const 1)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $byte (local.get $n))))

  ;; $expect reads a head and fails unless it has major type m.
  (func $expect (param $m i32)
    (call $head)
    (if (i32.ne (global.get $maj) (local.get $m)) (then (call $fail (i32.const -1)))))

  ;; $uint reads an unsigned integer into $arg.
  (func $uint (call $expect (i32.const 0)))

  ;; $int reads a signed integer (major type 0 or 1) within int64.
  (func $int
    (call $head)
    (if (i32.gt_u (global.get $maj) (i32.const 1)) (then (call $fail (i32.const -1)) (return)))
    (if (i64.lt_s (global.get $arg) (i64.const 0)) (then (call $fail (i32.const -1)))))

  ;; $string reads a byte string (m = 2) or text string (m = 3) into
  ;; $sptr/$slen; text must be valid UTF-8.
  (func $string (param $m i32)
    (call $expect (local.get $m))
    (if (global.get $err) (then (return)))
    (if (i64.gt_u (global.get $arg) (call $left)) (then (call $fail (i32.const -1)) (return)))
    (global.set $sptr (global.get $pos))
    (global.set $slen (i32.wrap_i64 (global.get $arg)))
    (global.set $pos (i32.add (global.get $pos) (global.get $slen)))
    (if (i32.and (i32.eq (local.get $m) (i32.const 3))
                 (i32.eqz (call $utf8 (global.get $sptr) (global.get $slen))))
      (then (call $fail (i32.const -1)))))

  ;; $count reads the head of an array (m = 4) or map (m = 5) and returns
  ;; its number of items, which must fit in what is left to read.
  (func $count (param $m i32) (result i32)
    (call $expect (local.get $m))
    (if (global.get $err) (then (return (i32.const 0))))
    (if (i64.gt_u (global.get $arg) (call $left)) (then (call $fail (i32.const -1)) (return (i32.const 0))))
    (i32.wrap_i64 (global.get $arg)))

  ;; $utf8 reports whether the n bytes at p are valid UTF-8: no overlong
  ;; forms, no surrogates, nothing above U+10FFFF.
  (func $utf8 (param $p i32) (param $n i32) (result i32)
    (local $e i32)
    (local $b i32)
    (local $c i32)  ;; continuation bytes still expected
    (local $lo i32) ;; range of the first continuation byte
    (local $hi i32)
    (local.set $e (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $char
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $b (i32.load8_u (local.get $p)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br_if $char (i32.lt_u (local.get $b) (i32.const 0x80)))
        (local.set $lo (i32.const 0x80))
        (local.set $hi (i32.const 0xbf))
        (if (i32.lt_u (local.get $b) (i32.const 0xc2)) (then (return (i32.const 0))))
        (if (i32.lt_u (local.get $b) (i32.const 0xe0))
          (then (local.set $c (i32.const 1)))
          (else
            (if (i32.lt_u (local.get $b) (i32.const 0xf0))
              (then
                (local.set $c (i32.const 2))
                (if (i32.eq (local.get $b) (i32.const 0xe0)) (then (local.set $lo (i32.const 0xa0))))
                (if (i32.eq (local.get $b) (i32.const 0xed)) (then (local.set $hi (i32.const 0x9f)))))
              (else
                (if (i32.ge_u (local.get $b) (i32.const 0xf5)) (then (return (i32.const 0))))
                (local.set $c (i32.const 3))
                (if (i32.eq (local.get $b) (i32.const 0xf0)) (then (local.set $lo (i32.const 0x90))))
                (if (i32.eq (local.get $b) (i32.const 0xf4)) (then (local.set $hi (i32.const 0x8f))))))))
        (if (i32.lt_u (i32.sub (local.get $e) (local.get $p)) (local.get $c))
          (then (return (i32.const 0))))
        (local.set $b (i32.load8_u (local.get $p)))
        (if (i32.or (i32.lt_u (local.get $b) (local.get $lo)) (i32.gt_u (local.get $b) (local.get $hi)))
          (then (return (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $c (i32.sub (local.get $c) (i32.const 1)))
        (block $tail
          (loop $cont
            (br_if $tail (i32.eqz (local.get $c)))
            (if (i32.ne (i32.and (i32.load8_u (local.get $p)) (i32.const 0xc0)) (i32.const 0x80))
              (then (return (i32.const 0))))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))
            (local.set $c (i32.sub (local.get $c) (i32.const 1)))
            (br $cont)))
        (br $char)))
    (i32.const 1))

  ;; $is reports whether the last text read is the name in slot k.
  (func $is (param $k i32) (result i32)
    (local $p i32)
    (local $i i32)
    (local.set $p (i32.add (i32.const 32) (i32.shl (local.get $k) (i32.const 4))))
    (if (i32.gt_u (global.get $slen) (i32.const 15)) (then (return (i32.const 0))))
    (block $differ
      (loop $byte
        (if (i32.eq (local.get $i) (global.get $slen))
          ;; Same prefix: equal when the slot's name ends here too.
          (then (return (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $i)))))))
        ;; The slot's name ends at its first zero byte.
        (br_if $differ (i32.eqz (i32.load8_u (i32.add (local.get $p) (local.get $i)))))
        (br_if $differ
          (i32.ne (i32.load8_u (i32.add (global.get $sptr) (local.get $i)))
                  (i32.load8_u (i32.add (local.get $p) (local.get $i)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $byte)))
    (i32.const 0))

  ;; $field marks bit in *seen, failing on a duplicate; it returns the new
  ;; set of seen fields.
  (func $field (param $seen i32) (param $bit i32) (result i32)
    (if (i32.and (local.get $seen) (local.get $bit)) (then (call $fail (i32.const -1))))
    (i32.or (local.get $seen) (local.get $bit)))

  ;; $watermarks reads {event: int, system: int}.
  (func $watermarks
    (local $n i32)
    (local $seen i32)
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (block $known
          (block $system
            (block $event
              (br_table $event $system $known
                (i32.sub (call $slotOf (i32.const 7) (i32.const 2)) (i32.const 7))))
            ;; event
            (local.set $seen (call $field (local.get $seen) (i32.const 1)))
            (call $int)
            (br $known))
          ;; system
          (local.set $seen (call $field (local.get $seen) (i32.const 2)))
          (call $int))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (local.get $seen) (i32.const 3)) (then (call $fail (i32.const -1)))))

  ;; $slotOf reads a map key and returns its slot among the `n` slots from
  ;; `first`; an unknown name fails and returns first + n.
  (func $slotOf (param $first i32) (param $n i32) (result i32)
    (local $k i32)
    (call $string (i32.const 3))
    (if (global.get $err) (then (return (i32.add (local.get $first) (local.get $n)))))
    (local.set $k (local.get $first))
    (block $none
      (loop $slot
        (br_if $none (i32.ge_u (local.get $k) (i32.add (local.get $first) (local.get $n))))
        (if (call $is (local.get $k)) (then (return (local.get $k))))
        (local.set $k (i32.add (local.get $k) (i32.const 1)))
        (br $slot)))
    (call $fail (i32.const -1))
    (i32.add (local.get $first) (local.get $n)))

  ;; $timer reads a DueTimer: {id: text, trigger_ts: int, event_ts: int,
  ;; payload?: bytes}.
  (func $timer
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (local.set $slot (call $slotOf (i32.const 13) (i32.const 4))) ;; id trigger_ts event_ts payload
        (if (i32.lt_u (local.get $slot) (i32.const 17))
          (then
            (local.set $seen (call $field (local.get $seen)
              (i32.shl (i32.const 1) (i32.sub (local.get $slot) (i32.const 13)))))
            (if (i32.eq (local.get $slot) (i32.const 13)) (then (call $string (i32.const 3))))
            (if (i32.eq (local.get $slot) (i32.const 14)) (then (call $int)))
            (if (i32.eq (local.get $slot) (i32.const 15)) (then (call $int)))
            (if (i32.eq (local.get $slot) (i32.const 16)) (then (call $string (i32.const 2))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (i32.and (local.get $seen) (i32.const 7)) (i32.const 7)) (then (call $fail (i32.const -1)))))

  ;; $message reads a Message: {id: text, stream: text, payload: bytes,
  ;; event_ts, system_ts, alignment_ts: int}, leaving the payload in
  ;; $sptr/$slen.
  (func $message
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local $pptr i32)
    (local $plen i32)
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        ;; Slots 13..19: id trigger_ts event_ts payload stream system_ts
        ;; alignment_ts; trigger_ts is not a message field.
        (local.set $slot (call $slotOf (i32.const 13) (i32.const 7)))
        (if (i32.eq (local.get $slot) (i32.const 14)) (then (call $fail (i32.const -1))))
        (if (i32.lt_u (local.get $slot) (i32.const 20))
          (then
            (local.set $seen (call $field (local.get $seen)
              (i32.shl (i32.const 1) (i32.sub (local.get $slot) (i32.const 13)))))
            (if (i32.or (i32.eq (local.get $slot) (i32.const 13)) (i32.eq (local.get $slot) (i32.const 17)))
              (then (call $string (i32.const 3))))
            (if (i32.eq (local.get $slot) (i32.const 16))
              (then
                (call $string (i32.const 2))
                (local.set $pptr (global.get $sptr))
                (local.set $plen (global.get $slen))))
            (if (i32.or (i32.eq (local.get $slot) (i32.const 15))
                        (i32.ge_u (local.get $slot) (i32.const 18)))
              (then (call $int)))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    ;; All of id, event_ts, payload, stream, system_ts, alignment_ts.
    (if (i32.ne (local.get $seen) (i32.const 0x7d)) (then (call $fail (i32.const -1))))
    (global.set $sptr (local.get $pptr))
    (global.set $slen (local.get $plen)))

  ;; $key reads a RequestKey and writes its response entry when it has
  ;; messages. It returns 1 when it wrote one.
  (func $key (result i32)
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local $kptr i32)
    (local $klen i32)
    (local $timers i32)
    (local $msgs i32)
    (local $at i32)   ;; the first message, for the second pass
    (local $i i32)
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (local.set $slot (call $slotOf (i32.const 9) (i32.const 4))) ;; key state timers messages
        (if (i32.lt_u (local.get $slot) (i32.const 13))
          (then
            (local.set $seen (call $field (local.get $seen)
              (i32.shl (i32.const 1) (i32.sub (local.get $slot) (i32.const 9)))))
            (if (i32.eq (local.get $slot) (i32.const 9))
              (then
                (call $string (i32.const 3))
                (local.set $kptr (global.get $sptr))
                (local.set $klen (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 10)) (then (call $string (i32.const 2))))
            (if (i32.eq (local.get $slot) (i32.const 11))
              (then
                (local.set $timers (call $count (i32.const 4)))
                (local.set $i (local.get $timers))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.eqz (local.get $i)) (global.get $err)))
                    (call $timer)
                    (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                    (br $each)))))
            (if (i32.eq (local.get $slot) (i32.const 12))
              (then
                (local.set $msgs (call $count (i32.const 4)))
                (local.set $at (global.get $pos))
                (local.set $i (local.get $msgs))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.eqz (local.get $i)) (global.get $err)))
                    (call $message)
                    (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                    (br $each)))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.eqz (i32.and (local.get $seen) (i32.const 1))) (then (call $fail (i32.const -1))))
    (if (i32.or (global.get $err) (i32.eqz (local.get $msgs))) (then (return (i32.const 0))))

    ;; Second pass over the messages, now that the key and the number of
    ;; timers are known whatever the order of the fields.
    (if (i32.eqz (call $room (i32.add (local.get $klen) (i32.const 21)))) (then (return (i32.const 0))))
    (call $copy (i32.const 400) (i32.const 5))
    (call $put (i32.const 3) (i64.extend_i32_u (local.get $klen)))
    (call $copy (local.get $kptr) (local.get $klen))
    (call $copy (i32.const 408) (i32.const 6))
    (call $put (i32.const 4) (i64.extend_i32_u (local.get $msgs)))
    (local.set $n (global.get $pos))
    (global.set $pos (local.get $at))
    (local.set $i (i32.const 0))
    (block $end
      (loop $each
        (br_if $end (i32.ge_u (local.get $i) (local.get $msgs)))
        (call $message)
        (if (i32.eqz (call $room (i32.add (global.get $slen) (i32.const 39)))) (then (return (i32.const 0))))
        (call $copy (i32.const 416) (i32.const 21))
        (call $put (i32.const 0) (i64.extend_i32_u (i32.add (local.get $timers) (local.get $i))))
        (call $copy (i32.const 440) (i32.const 8))
        (call $put (i32.const 2) (i64.extend_i32_u (global.get $slen)))
        (call $copy (global.get $sptr) (global.get $slen))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (global.set $pos (local.get $n))
    (i32.const 1))

  ;; $kind reads the kind, which must be "transform" or "map".
  (func $kind
    (call $string (i32.const 3))
    (if (global.get $err) (then (return)))
    (if (i32.eqz (i32.or (call $is (i32.const 20)) (call $is (i32.const 21))))
      (then (call $fail (i32.const -1)))))

  ;; ---- encoding -------------------------------------------------------

  ;; $room makes sure n more bytes can be written at $out; on failure the
  ;; guest fails with status -2.
  (func $room (param $n i32) (result i32)
    (if (call $fit (i64.add (i64.extend_i32_u (global.get $out)) (i64.extend_i32_u (local.get $n))))
      (then (return (i32.const 1))))
    (call $fail (i32.const -2))
    (i32.const 0))

  (func $copy (param $src i32) (param $n i32)
    (memory.copy (global.get $out) (local.get $src) (local.get $n))
    (global.set $out (i32.add (global.get $out) (local.get $n))))

  (func $byte (param $b i32)
    (i32.store8 (global.get $out) (local.get $b))
    (global.set $out (i32.add (global.get $out) (i32.const 1))))

  ;; $put writes the shortest head of major type m with argument v (at most
  ;; 5 bytes here: every count and length is below 2^32).
  (func $put (param $m i32) (param $v i64)
    (local $top i32)
    (local $bytes i32)
    (local.set $top (i32.shl (local.get $m) (i32.const 5)))
    (if (i64.lt_u (local.get $v) (i64.const 24))
      (then (call $byte (i32.or (local.get $top) (i32.wrap_i64 (local.get $v)))) (return)))
    (if (i64.lt_u (local.get $v) (i64.const 0x100))
      (then (call $byte (i32.or (local.get $top) (i32.const 24))) (local.set $bytes (i32.const 1)))
      (else
        (if (i64.lt_u (local.get $v) (i64.const 0x10000))
          (then (call $byte (i32.or (local.get $top) (i32.const 25))) (local.set $bytes (i32.const 2)))
          (else (call $byte (i32.or (local.get $top) (i32.const 26))) (local.set $bytes (i32.const 4))))))
    (loop $next
      (local.set $bytes (i32.sub (local.get $bytes) (i32.const 1)))
      (call $byte (i32.wrap_i64 (i64.shr_u (local.get $v) (i64.extend_i32_u (i32.shl (local.get $bytes) (i32.const 3))))))
      (br_if $next (local.get $bytes))))

  ;; flowhost_process(ptr, len) -> the packed response or a status.
  (func (export "flowhost_process") (param $ptr i32) (param $len i32) (result i64)
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local $first i32) ;; where the first key entry is written
    (local $keys i32)  ;; key entries written
    (local $k i32)     ;; request keys still to read
    (local $start i32)
    ;; The host passes exactly the region flowhost_alloc handed out.
    (if (i32.ne (local.get $ptr) (global.get $IN)) (then (return (i64.const -1))))
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len)))))
      (then (return (i64.const -1))))
    (global.set $pos (local.get $ptr))
    (global.set $end (i32.add (local.get $ptr) (local.get $len)))
    (global.set $err (i32.const 0))
    (global.set $version (i64.const 1))
    ;; Key entries start 16 bytes above the request, aligned, leaving room
    ;; for the response's header (at most 11 bytes) in front of them.
    (local.set $first (i32.add (i32.and (i32.add (global.get $end) (i32.const 7)) (i32.const -8)) (i32.const 16)))
    (global.set $out (local.get $first))
    (drop (call $room (i32.const 0)))

    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (local.set $slot (call $slotOf (i32.const 0) (i32.const 7)))
        (if (i32.lt_u (local.get $slot) (i32.const 7))
          (then
            (local.set $seen (call $field (local.get $seen) (i32.shl (i32.const 1) (local.get $slot))))
            (if (i32.eq (local.get $slot) (i32.const 0))
              (then (call $uint) (global.set $version (global.get $arg))))
            (if (i32.eq (local.get $slot) (i32.const 1))
              (then
                (local.set $k (call $count (i32.const 4)))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.eqz (local.get $k)) (global.get $err)))
                    (local.set $keys (i32.add (local.get $keys) (call $key)))
                    (local.set $k (i32.sub (local.get $k) (i32.const 1)))
                    (br $each)))))
            (if (i32.eq (local.get $slot) (i32.const 2)) (then (call $kind)))
            (if (i32.eq (local.get $slot) (i32.const 3)) (then (call $uint)))
            (if (i32.eq (local.get $slot) (i32.const 4)) (then (call $uint)))
            (if (i32.eq (local.get $slot) (i32.const 5)) (then (call $watermarks)))
            (if (i32.eq (local.get $slot) (i32.const 6)) (then (call $string (i32.const 3))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (global.get $pos) (global.get $end)) (then (call $fail (i32.const -1))))
    (if (i32.ne (local.get $seen) (i32.const 0x7f)) (then (call $fail (i32.const -1))))
    ;; An envelope of another version is reported as such even when the
    ;; rest of it does not decode as version 1.
    (if (i64.ne (global.get $version) (i64.const 1)) (then (return (i64.const -3))))
    (if (global.get $err) (then (return (i64.extend_i32_s (global.get $err)))))

    ;; The header goes right in front of the first key entry.
    (local.set $n (global.get $out))
    (local.set $start (i32.sub (local.get $first)
      (i32.add (i32.const 7)
        (select (i32.const 0)
          (select (i32.const 1)
            (select (i32.const 2) (i32.const 4) (i32.lt_u (local.get $keys) (i32.const 0x10000)))
            (i32.lt_u (local.get $keys) (i32.const 0x100)))
          (i32.lt_u (local.get $keys) (i32.const 24))))))
    (global.set $out (local.get $start))
    (call $copy (i32.const 384) (i32.const 6))
    (call $put (i32.const 4) (i64.extend_i32_u (local.get $keys)))
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $start)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (local.get $n) (local.get $start)))))
)
