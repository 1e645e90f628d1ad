;; stackoverflow.wat: a hostile guest whose flowhost_process recurses
;; without end: $down calls itself with two locals live across the call,
;; so that every frame takes stack, until the engine's call stack is
;; exhausted. Requests are written at 64.
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
  (func $down (param $depth i64) (result i64)
    (local $a i64)
    (local $b i64)
    (local.set $a (i64.mul (local.get $depth) (i64.const 3)))
    (local.set $b (i64.xor (local.get $a) (local.get $depth)))
    ;; The locals are used after the call returns (it never does), so
    ;; neither the frame nor the call can be optimised away.
    (i64.add
      (call $down (i64.add (local.get $depth) (i64.const 1)))
      (i64.add (local.get $a) (local.get $b))))
  (func (export "flowhost_process") (param $ptr i32) (param $len i32) (result i64)
    (call $down (i64.extend_i32_u (local.get $len))))
)
