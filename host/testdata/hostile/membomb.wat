;; membomb.wat: a hostile guest whose flowhost_process grows its memory 16
;; pages at a time until the host refuses, then writes just past the end
;; of what it got, as code that assumed the growth succeeded would: an out
;; of bounds memory access. Requests are written at address 64.
(module
  (memory (export "memory") 1)
  (func (export "flowhost_abi_v1"))
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
    (block $refused
      (loop $grow
        (br_if $refused (i32.eq (memory.grow (i32.const 16)) (i32.const -1)))
        (br $grow)))
    (i32.store8 (i32.mul (memory.size) (i32.const 65536)) (i32.const 1))
    (i64.const 0))
)
