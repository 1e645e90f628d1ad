;; identity.wat: the smallest flowhost guest, written by hand.
;;
;; It speaks ABI v1 (abi/ABI.md) and computes nothing: whatever the batch,
;; it answers that no key has anything to report, the response
;;
;;   {"keys": []}  =  a1 64 6b 65 79 73 80
;;
;; which is a valid no-op computation: every key keeps its state and
;; timers, and nothing is emitted. It never reads the request, so it
;; neither checks the envelope's abi version nor refuses a malformed one.
;;
;; Build: wat2wasm identity.wat -o identity.wasm

(module
  ;; One page of 64 KiB to start with; flowhost_alloc grows it when a
  ;; request does not fit. The host reads responses and writes requests
  ;; through this export.
  (memory (export "memory") 1)

  ;; The response, canonical CBOR, at address 8:
  ;;   a1            map of 1 pair
  ;;   64 "keys"     text of 4 bytes
  ;;   80            array of 0 items
  (data (i32.const 8) "\a1\64keys\80")

  ;; Every request is written at address 64, above the response, so a
  ;; request never overwrites it.

  ;; The version marker: its presence declares ABI v1; it is never called.
  (func (export "flowhost_abi_v1"))

  ;; flowhost_alloc(size) -> ptr: a region of at least size bytes at 64,
  ;; growing memory to hold it; 0 when memory cannot grow that far or size
  ;; is negative. A zero size still gets the non-zero address 64.
  (func (export "flowhost_alloc") (param $size i32) (result i32)
    (local $need i64) ;; pages needed to hold 64 + size bytes
    (local $have i64)
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))
    ;; (64 + size + 65535) / 65536, in 64 bits so that it cannot overflow.
    (local.set $need
      (i64.shr_u
        (i64.add (i64.extend_i32_u (local.get $size)) (i64.const 65599))
        (i64.const 16)))
    (local.set $have (i64.extend_i32_u (memory.size)))
    (if (i64.gt_u (local.get $need) (local.get $have))
      (then
        (if (i32.eq
              (memory.grow (i32.wrap_i64 (i64.sub (local.get $need) (local.get $have))))
              (i32.const -1))
          (then (return (i32.const 0))))))
    (i32.const 64))

  ;; flowhost_process(ptr, len) -> packed region: the 7-byte response at
  ;; address 8, packed as ptr << 32 | len.
  (func (export "flowhost_process") (param $ptr i32) (param $len i32) (result i64)
    (i64.const 0x0000000800000007))
)
