;; abiv2.wat: a guest that declares ABI version 2 (flowhost_abi_v2) instead
;; of 1; otherwise it is identity.wat's no-op. The host must refuse it.
(module
  (memory (export "memory") 1)
  (data (i32.const 8) "\a1\64keys\80")
  (func (export "flowhost_abi_v2"))
  (func (export "flowhost_alloc") (param $size i32) (result i32)
    (local $need i64)
    (local $have i64)
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))
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
  (func (export "flowhost_process") (param $ptr i32) (param $len i32) (result i64)
    (i64.const 0x0000000800000007))
)
