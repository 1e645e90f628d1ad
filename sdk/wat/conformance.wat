;; conformance.wat: the conformance guest of sdk/conformance, written by
;; hand. It interprets every message as the script of
;; sdk/conformance/SCRIPT.md and answers exactly as the Go guest
;; (sdk/conformance/goguest) does: same emits, state, timers and error
;; texts, encoded canonically (RFC 8949 core deterministic encoding).
;;
;; It decodes requests as strictly as echo.wat, whose decoder it copies
;; (status -1 for a bad request, -3 for another ABI version), and answers
;; -2 where the Go SDK panics: an emit to a stream the Init did not
;; declare, state or timers in a map computation, a request before a
;; successful flowhost_init.
;;
;; Build: wat2wasm conformance.wat -o conformance.wasm
;;
;; Memory layout:
;;   32 ..  416   field names the decoder knows, one per 16-byte slot
;;   512 .. 768   the script's verbs: arity byte, length byte, name
;;   1024 .. 3840 texts the guest writes, one per 64-byte slot: length
;;                byte, then the text ($lit k writes slot k)
;;   3840 .. 3864 hex digits, the letters of \a .. \r
;;   4040 .. 4064 scratch for decimal digits
;;   4096 .. 9776 the printable code points above U+007F, for %q
;;   10240 ..     the Init envelope, kept for param: and the declared
;;                streams; then every request ($base, what
;;                flowhost_alloc returns); above it, the heap of one
;;                batch: key records, emit and timer records, texts, and
;;                last the response
;;
;; A batch is handled in two passes. The first decodes and validates the
;; whole request and writes a record per key (where its key, state, due
;; timers and messages are). The second runs each key's timers and
;; scripts, collecting its emits, timers and cancels as linked lists in
;; the heap. Only then is the response written, since a failbatch
;; anywhere drops every key and the header needs the count of keys.

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
  (data (i32.const 384) "parameters")  ;; 22
  (data (i32.const 400) "output_streams") ;; 23

  ;; Verbs, slot v at 512 + 16v: arity (the number of arguments, the last
  ;; taking the rest of the command), length, name.
  (data (i32.const 512) "\02\04emit")       ;; 0
  (data (i32.const 528) "\03\05emitk")      ;; 1
  (data (i32.const 544) "\03\05emite")      ;; 2
  (data (i32.const 560) "\02\07emitall")    ;; 3
  (data (i32.const 576) "\02\08emitnone")   ;; 4
  (data (i32.const 592) "\01\05state")      ;; 5
  (data (i32.const 608) "\00\06append")     ;; 6
  (data (i32.const 624) "\00\08delstate")   ;; 7
  (data (i32.const 640) "\00\09showstate")  ;; 8
  (data (i32.const 656) "\01\05timer")      ;; 9
  (data (i32.const 672) "\03\06timerp")     ;; 10
  (data (i32.const 688) "\01\06cancel")     ;; 11
  (data (i32.const 704) "\01\05param")      ;; 12
  (data (i32.const 720) "\00\04meta")       ;; 13
  (data (i32.const 736) "\01\07failkey")    ;; 14
  (data (i32.const 752) "\01\09failbatch")  ;; 15

  ;; Texts, slot k at 1024 + 64k: length, then the bytes.
  (data (i32.const 1024) "\10unknown command ") ;; 0
  (data (i32.const 1088) "\0cbad command ") ;; 1
  (data (i32.const 1152) "\02: ") ;; 2
  (data (i32.const 1216) "\07 takes ") ;; 3
  (data (i32.const 1280) "\0a arguments") ;; 4
  (data (i32.const 1344) "\1c: strconv.ParseInt: parsing ") ;; 5
  (data (i32.const 1408) "\10: invalid syntax") ;; 6
  (data (i32.const 1472) "\14: value out of range") ;; 7
  (data (i32.const 1536) "\21failed (the error has no message)") ;; 8
  (data (i32.const 1600) "\06timer:") ;; 9
  (data (i32.const 1664) "\06state:") ;; 10
  (data (i32.const 1728) "\04none") ;; 11
  (data (i32.const 1792) "\06param:") ;; 12
  (data (i32.const 1856) "\07missing") ;; 13
  (data (i32.const 1920) "\04true") ;; 14
  (data (i32.const 1984) "\05false") ;; 15
  (data (i32.const 2048) "\09meta:key=") ;; 16
  (data (i32.const 2112) "\08,stream=") ;; 17
  (data (i32.const 2176) "\04,id=") ;; 18
  (data (i32.const 2240) "\07,event=") ;; 19
  (data (i32.const 2304) "\08,system=") ;; 20
  (data (i32.const 2368) "\0b,alignment=") ;; 21
  (data (i32.const 2432) "\04,wm=") ;; 22
  (data (i32.const 2496) "\0b,partition=") ;; 23
  (data (i32.const 2560) "\07,epoch=") ;; 24
  (data (i32.const 2624) "\0d,computation=") ;; 25
  (data (i32.const 2688) "\06,kind=") ;; 26
  (data (i32.const 2752) "\09transform") ;; 27
  (data (i32.const 2816) "\03map") ;; 28
  (data (i32.const 2880) "\04keys") ;; 29
  (data (i32.const 2944) "\05error") ;; 30
  (data (i32.const 3008) "\03key") ;; 31
  (data (i32.const 3072) "\05emits") ;; 32
  (data (i32.const 3136) "\05state") ;; 33
  (data (i32.const 3200) "\08state_op") ;; 34
  (data (i32.const 3264) "\0atimers_set") ;; 35
  (data (i32.const 3328) "\0dtimers_cancel") ;; 36
  (data (i32.const 3392) "\06stream") ;; 37
  (data (i32.const 3456) "\07parents") ;; 38
  (data (i32.const 3520) "\07payload") ;; 39
  (data (i32.const 3584) "\08event_ts") ;; 40
  (data (i32.const 3648) "\0atrigger_ts") ;; 41
  (data (i32.const 3712) "\09fail_init") ;; 42
  (data (i32.const 3776) "\03out") ;; 43
  (data (i32.const 3840) "0123456789abcdef")
  ;; The letters of \a \b \t \n \v \f \r, for the bytes 7 .. 13.
  (data (i32.const 3856) "abtnvfr")

  ;; The code points above U+007F that strconv.IsPrint (and so Go's %q)
  ;; leaves unescaped: 710 ranges, first and last code point of each as
  ;; little-endian i32, ascending. Generated from Go 1.26's
  ;; strconv.IsPrint; TestQuote checks it against every code point.
  (data (i32.const 4096)
    "\a1\00\00\00\ac\00\00\00\ae\00\00\00\77\03\00\00\7a\03\00\00\7f\03\00\00\84\03\00\00\8a\03\00\00"
    "\8c\03\00\00\8c\03\00\00\8e\03\00\00\a1\03\00\00\a3\03\00\00\2f\05\00\00\31\05\00\00\56\05\00\00"
    "\59\05\00\00\8a\05\00\00\8d\05\00\00\8f\05\00\00\91\05\00\00\c7\05\00\00\d0\05\00\00\ea\05\00\00"
    "\ef\05\00\00\f4\05\00\00\06\06\00\00\1b\06\00\00\1d\06\00\00\dc\06\00\00\de\06\00\00\0d\07\00\00"
    "\10\07\00\00\4a\07\00\00\4d\07\00\00\b1\07\00\00\c0\07\00\00\fa\07\00\00\fd\07\00\00\2d\08\00\00"
    "\30\08\00\00\3e\08\00\00\40\08\00\00\5b\08\00\00\5e\08\00\00\5e\08\00\00\60\08\00\00\6a\08\00\00"
    "\70\08\00\00\8e\08\00\00\98\08\00\00\e1\08\00\00\e3\08\00\00\83\09\00\00\85\09\00\00\8c\09\00\00"
    "\8f\09\00\00\90\09\00\00\93\09\00\00\a8\09\00\00\aa\09\00\00\b0\09\00\00\b2\09\00\00\b2\09\00\00"
    "\b6\09\00\00\b9\09\00\00\bc\09\00\00\c4\09\00\00\c7\09\00\00\c8\09\00\00\cb\09\00\00\ce\09\00\00"
    "\d7\09\00\00\d7\09\00\00\dc\09\00\00\dd\09\00\00\df\09\00\00\e3\09\00\00\e6\09\00\00\fe\09\00\00"
    "\01\0a\00\00\03\0a\00\00\05\0a\00\00\0a\0a\00\00\0f\0a\00\00\10\0a\00\00\13\0a\00\00\28\0a\00\00"
    "\2a\0a\00\00\30\0a\00\00\32\0a\00\00\33\0a\00\00\35\0a\00\00\36\0a\00\00\38\0a\00\00\39\0a\00\00"
    "\3c\0a\00\00\3c\0a\00\00\3e\0a\00\00\42\0a\00\00\47\0a\00\00\48\0a\00\00\4b\0a\00\00\4d\0a\00\00"
    "\51\0a\00\00\51\0a\00\00\59\0a\00\00\5c\0a\00\00\5e\0a\00\00\5e\0a\00\00\66\0a\00\00\76\0a\00\00"
    "\81\0a\00\00\83\0a\00\00\85\0a\00\00\8d\0a\00\00\8f\0a\00\00\91\0a\00\00\93\0a\00\00\a8\0a\00\00"
    "\aa\0a\00\00\b0\0a\00\00\b2\0a\00\00\b3\0a\00\00\b5\0a\00\00\b9\0a\00\00\bc\0a\00\00\c5\0a\00\00"
    "\c7\0a\00\00\c9\0a\00\00\cb\0a\00\00\cd\0a\00\00\d0\0a\00\00\d0\0a\00\00\e0\0a\00\00\e3\0a\00\00"
    "\e6\0a\00\00\f1\0a\00\00\f9\0a\00\00\ff\0a\00\00\01\0b\00\00\03\0b\00\00\05\0b\00\00\0c\0b\00\00"
    "\0f\0b\00\00\10\0b\00\00\13\0b\00\00\28\0b\00\00\2a\0b\00\00\30\0b\00\00\32\0b\00\00\33\0b\00\00"
    "\35\0b\00\00\39\0b\00\00\3c\0b\00\00\44\0b\00\00\47\0b\00\00\48\0b\00\00\4b\0b\00\00\4d\0b\00\00"
    "\55\0b\00\00\57\0b\00\00\5c\0b\00\00\5d\0b\00\00\5f\0b\00\00\63\0b\00\00\66\0b\00\00\77\0b\00\00"
    "\82\0b\00\00\83\0b\00\00\85\0b\00\00\8a\0b\00\00\8e\0b\00\00\90\0b\00\00\92\0b\00\00\95\0b\00\00"
    "\99\0b\00\00\9a\0b\00\00\9c\0b\00\00\9c\0b\00\00\9e\0b\00\00\9f\0b\00\00\a3\0b\00\00\a4\0b\00\00"
    "\a8\0b\00\00\aa\0b\00\00\ae\0b\00\00\b9\0b\00\00\be\0b\00\00\c2\0b\00\00\c6\0b\00\00\c8\0b\00\00"
    "\ca\0b\00\00\cd\0b\00\00\d0\0b\00\00\d0\0b\00\00\d7\0b\00\00\d7\0b\00\00\e6\0b\00\00\fa\0b\00\00"
    "\00\0c\00\00\0c\0c\00\00\0e\0c\00\00\10\0c\00\00\12\0c\00\00\28\0c\00\00\2a\0c\00\00\39\0c\00\00"
    "\3c\0c\00\00\44\0c\00\00\46\0c\00\00\48\0c\00\00\4a\0c\00\00\4d\0c\00\00\55\0c\00\00\56\0c\00\00"
    "\58\0c\00\00\5a\0c\00\00\5d\0c\00\00\5d\0c\00\00\60\0c\00\00\63\0c\00\00\66\0c\00\00\6f\0c\00\00"
    "\77\0c\00\00\8c\0c\00\00\8e\0c\00\00\90\0c\00\00\92\0c\00\00\a8\0c\00\00\aa\0c\00\00\b3\0c\00\00"
    "\b5\0c\00\00\b9\0c\00\00\bc\0c\00\00\c4\0c\00\00\c6\0c\00\00\c8\0c\00\00\ca\0c\00\00\cd\0c\00\00"
    "\d5\0c\00\00\d6\0c\00\00\dd\0c\00\00\de\0c\00\00\e0\0c\00\00\e3\0c\00\00\e6\0c\00\00\ef\0c\00\00"
    "\f1\0c\00\00\f3\0c\00\00\00\0d\00\00\0c\0d\00\00\0e\0d\00\00\10\0d\00\00\12\0d\00\00\44\0d\00\00"
    "\46\0d\00\00\48\0d\00\00\4a\0d\00\00\4f\0d\00\00\54\0d\00\00\63\0d\00\00\66\0d\00\00\7f\0d\00\00"
    "\81\0d\00\00\83\0d\00\00\85\0d\00\00\96\0d\00\00\9a\0d\00\00\b1\0d\00\00\b3\0d\00\00\bb\0d\00\00"
    "\bd\0d\00\00\bd\0d\00\00\c0\0d\00\00\c6\0d\00\00\ca\0d\00\00\ca\0d\00\00\cf\0d\00\00\d4\0d\00\00"
    "\d6\0d\00\00\d6\0d\00\00\d8\0d\00\00\df\0d\00\00\e6\0d\00\00\ef\0d\00\00\f2\0d\00\00\f4\0d\00\00"
    "\01\0e\00\00\3a\0e\00\00\3f\0e\00\00\5b\0e\00\00\81\0e\00\00\82\0e\00\00\84\0e\00\00\84\0e\00\00"
    "\86\0e\00\00\8a\0e\00\00\8c\0e\00\00\a3\0e\00\00\a5\0e\00\00\a5\0e\00\00\a7\0e\00\00\bd\0e\00\00"
    "\c0\0e\00\00\c4\0e\00\00\c6\0e\00\00\c6\0e\00\00\c8\0e\00\00\ce\0e\00\00\d0\0e\00\00\d9\0e\00\00"
    "\dc\0e\00\00\df\0e\00\00\00\0f\00\00\47\0f\00\00\49\0f\00\00\6c\0f\00\00\71\0f\00\00\97\0f\00\00"
    "\99\0f\00\00\bc\0f\00\00\be\0f\00\00\cc\0f\00\00\ce\0f\00\00\da\0f\00\00\00\10\00\00\c5\10\00\00"
    "\c7\10\00\00\c7\10\00\00\cd\10\00\00\cd\10\00\00\d0\10\00\00\48\12\00\00\4a\12\00\00\4d\12\00\00"
    "\50\12\00\00\56\12\00\00\58\12\00\00\58\12\00\00\5a\12\00\00\5d\12\00\00\60\12\00\00\88\12\00\00"
    "\8a\12\00\00\8d\12\00\00\90\12\00\00\b0\12\00\00\b2\12\00\00\b5\12\00\00\b8\12\00\00\be\12\00\00"
    "\c0\12\00\00\c0\12\00\00\c2\12\00\00\c5\12\00\00\c8\12\00\00\d6\12\00\00\d8\12\00\00\10\13\00\00"
    "\12\13\00\00\15\13\00\00\18\13\00\00\5a\13\00\00\5d\13\00\00\7c\13\00\00\80\13\00\00\99\13\00\00"
    "\a0\13\00\00\f5\13\00\00\f8\13\00\00\fd\13\00\00\00\14\00\00\7f\16\00\00\81\16\00\00\9c\16\00\00"
    "\a0\16\00\00\f8\16\00\00\00\17\00\00\15\17\00\00\1f\17\00\00\36\17\00\00\40\17\00\00\53\17\00\00"
    "\60\17\00\00\6c\17\00\00\6e\17\00\00\70\17\00\00\72\17\00\00\73\17\00\00\80\17\00\00\dd\17\00\00"
    "\e0\17\00\00\e9\17\00\00\f0\17\00\00\f9\17\00\00\00\18\00\00\0d\18\00\00\0f\18\00\00\19\18\00\00"
    "\20\18\00\00\78\18\00\00\80\18\00\00\aa\18\00\00\b0\18\00\00\f5\18\00\00\00\19\00\00\1e\19\00\00"
    "\20\19\00\00\2b\19\00\00\30\19\00\00\3b\19\00\00\40\19\00\00\40\19\00\00\44\19\00\00\6d\19\00\00"
    "\70\19\00\00\74\19\00\00\80\19\00\00\ab\19\00\00\b0\19\00\00\c9\19\00\00\d0\19\00\00\da\19\00\00"
    "\de\19\00\00\1b\1a\00\00\1e\1a\00\00\5e\1a\00\00\60\1a\00\00\7c\1a\00\00\7f\1a\00\00\89\1a\00\00"
    "\90\1a\00\00\99\1a\00\00\a0\1a\00\00\ad\1a\00\00\b0\1a\00\00\ce\1a\00\00\00\1b\00\00\4c\1b\00\00"
    "\50\1b\00\00\7e\1b\00\00\80\1b\00\00\f3\1b\00\00\fc\1b\00\00\37\1c\00\00\3b\1c\00\00\49\1c\00\00"
    "\4d\1c\00\00\88\1c\00\00\90\1c\00\00\ba\1c\00\00\bd\1c\00\00\c7\1c\00\00\d0\1c\00\00\fa\1c\00\00"
    "\00\1d\00\00\15\1f\00\00\18\1f\00\00\1d\1f\00\00\20\1f\00\00\45\1f\00\00\48\1f\00\00\4d\1f\00\00"
    "\50\1f\00\00\57\1f\00\00\59\1f\00\00\59\1f\00\00\5b\1f\00\00\5b\1f\00\00\5d\1f\00\00\5d\1f\00\00"
    "\5f\1f\00\00\7d\1f\00\00\80\1f\00\00\b4\1f\00\00\b6\1f\00\00\c4\1f\00\00\c6\1f\00\00\d3\1f\00\00"
    "\d6\1f\00\00\db\1f\00\00\dd\1f\00\00\ef\1f\00\00\f2\1f\00\00\f4\1f\00\00\f6\1f\00\00\fe\1f\00\00"
    "\10\20\00\00\27\20\00\00\30\20\00\00\5e\20\00\00\70\20\00\00\71\20\00\00\74\20\00\00\8e\20\00\00"
    "\90\20\00\00\9c\20\00\00\a0\20\00\00\c0\20\00\00\d0\20\00\00\f0\20\00\00\00\21\00\00\8b\21\00\00"
    "\90\21\00\00\26\24\00\00\40\24\00\00\4a\24\00\00\60\24\00\00\73\2b\00\00\76\2b\00\00\95\2b\00\00"
    "\97\2b\00\00\f3\2c\00\00\f9\2c\00\00\25\2d\00\00\27\2d\00\00\27\2d\00\00\2d\2d\00\00\2d\2d\00\00"
    "\30\2d\00\00\67\2d\00\00\6f\2d\00\00\70\2d\00\00\7f\2d\00\00\96\2d\00\00\a0\2d\00\00\a6\2d\00\00"
    "\a8\2d\00\00\ae\2d\00\00\b0\2d\00\00\b6\2d\00\00\b8\2d\00\00\be\2d\00\00\c0\2d\00\00\c6\2d\00\00"
    "\c8\2d\00\00\ce\2d\00\00\d0\2d\00\00\d6\2d\00\00\d8\2d\00\00\de\2d\00\00\e0\2d\00\00\5d\2e\00\00"
    "\80\2e\00\00\99\2e\00\00\9b\2e\00\00\f3\2e\00\00\00\2f\00\00\d5\2f\00\00\f0\2f\00\00\fb\2f\00\00"
    "\01\30\00\00\3f\30\00\00\41\30\00\00\96\30\00\00\99\30\00\00\ff\30\00\00\05\31\00\00\2f\31\00\00"
    "\31\31\00\00\8e\31\00\00\90\31\00\00\e3\31\00\00\f0\31\00\00\1e\32\00\00\20\32\00\00\8c\a4\00\00"
    "\90\a4\00\00\c6\a4\00\00\d0\a4\00\00\2b\a6\00\00\40\a6\00\00\f7\a6\00\00\00\a7\00\00\ca\a7\00\00"
    "\d0\a7\00\00\d1\a7\00\00\d3\a7\00\00\d3\a7\00\00\d5\a7\00\00\d9\a7\00\00\f2\a7\00\00\2c\a8\00\00"
    "\30\a8\00\00\39\a8\00\00\40\a8\00\00\77\a8\00\00\80\a8\00\00\c5\a8\00\00\ce\a8\00\00\d9\a8\00\00"
    "\e0\a8\00\00\53\a9\00\00\5f\a9\00\00\7c\a9\00\00\80\a9\00\00\cd\a9\00\00\cf\a9\00\00\d9\a9\00\00"
    "\de\a9\00\00\fe\a9\00\00\00\aa\00\00\36\aa\00\00\40\aa\00\00\4d\aa\00\00\50\aa\00\00\59\aa\00\00"
    "\5c\aa\00\00\c2\aa\00\00\db\aa\00\00\f6\aa\00\00\01\ab\00\00\06\ab\00\00\09\ab\00\00\0e\ab\00\00"
    "\11\ab\00\00\16\ab\00\00\20\ab\00\00\26\ab\00\00\28\ab\00\00\2e\ab\00\00\30\ab\00\00\6b\ab\00\00"
    "\70\ab\00\00\ed\ab\00\00\f0\ab\00\00\f9\ab\00\00\00\ac\00\00\a3\d7\00\00\b0\d7\00\00\c6\d7\00\00"
    "\cb\d7\00\00\fb\d7\00\00\00\f9\00\00\6d\fa\00\00\70\fa\00\00\d9\fa\00\00\00\fb\00\00\06\fb\00\00"
    "\13\fb\00\00\17\fb\00\00\1d\fb\00\00\36\fb\00\00\38\fb\00\00\3c\fb\00\00\3e\fb\00\00\3e\fb\00\00"
    "\40\fb\00\00\41\fb\00\00\43\fb\00\00\44\fb\00\00\46\fb\00\00\c2\fb\00\00\d3\fb\00\00\8f\fd\00\00"
    "\92\fd\00\00\c7\fd\00\00\cf\fd\00\00\cf\fd\00\00\f0\fd\00\00\19\fe\00\00\20\fe\00\00\52\fe\00\00"
    "\54\fe\00\00\66\fe\00\00\68\fe\00\00\6b\fe\00\00\70\fe\00\00\74\fe\00\00\76\fe\00\00\fc\fe\00\00"
    "\01\ff\00\00\be\ff\00\00\c2\ff\00\00\c7\ff\00\00\ca\ff\00\00\cf\ff\00\00\d2\ff\00\00\d7\ff\00\00"
    "\da\ff\00\00\dc\ff\00\00\e0\ff\00\00\e6\ff\00\00\e8\ff\00\00\ee\ff\00\00\fc\ff\00\00\fd\ff\00\00"
    "\00\00\01\00\0b\00\01\00\0d\00\01\00\26\00\01\00\28\00\01\00\3a\00\01\00\3c\00\01\00\3d\00\01\00"
    "\3f\00\01\00\4d\00\01\00\50\00\01\00\5d\00\01\00\80\00\01\00\fa\00\01\00\00\01\01\00\02\01\01\00"
    "\07\01\01\00\33\01\01\00\37\01\01\00\8e\01\01\00\90\01\01\00\9c\01\01\00\a0\01\01\00\a0\01\01\00"
    "\d0\01\01\00\fd\01\01\00\80\02\01\00\9c\02\01\00\a0\02\01\00\d0\02\01\00\e0\02\01\00\fb\02\01\00"
    "\00\03\01\00\23\03\01\00\2d\03\01\00\4a\03\01\00\50\03\01\00\7a\03\01\00\80\03\01\00\9d\03\01\00"
    "\9f\03\01\00\c3\03\01\00\c8\03\01\00\d5\03\01\00\00\04\01\00\9d\04\01\00\a0\04\01\00\a9\04\01\00"
    "\b0\04\01\00\d3\04\01\00\d8\04\01\00\fb\04\01\00\00\05\01\00\27\05\01\00\30\05\01\00\63\05\01\00"
    "\6f\05\01\00\7a\05\01\00\7c\05\01\00\8a\05\01\00\8c\05\01\00\92\05\01\00\94\05\01\00\95\05\01\00"
    "\97\05\01\00\a1\05\01\00\a3\05\01\00\b1\05\01\00\b3\05\01\00\b9\05\01\00\bb\05\01\00\bc\05\01\00"
    "\00\06\01\00\36\07\01\00\40\07\01\00\55\07\01\00\60\07\01\00\67\07\01\00\80\07\01\00\85\07\01\00"
    "\87\07\01\00\b0\07\01\00\b2\07\01\00\ba\07\01\00\00\08\01\00\05\08\01\00\08\08\01\00\08\08\01\00"
    "\0a\08\01\00\35\08\01\00\37\08\01\00\38\08\01\00\3c\08\01\00\3c\08\01\00\3f\08\01\00\55\08\01\00"
    "\57\08\01\00\9e\08\01\00\a7\08\01\00\af\08\01\00\e0\08\01\00\f2\08\01\00\f4\08\01\00\f5\08\01\00"
    "\fb\08\01\00\1b\09\01\00\1f\09\01\00\39\09\01\00\3f\09\01\00\3f\09\01\00\80\09\01\00\b7\09\01\00"
    "\bc\09\01\00\cf\09\01\00\d2\09\01\00\03\0a\01\00\05\0a\01\00\06\0a\01\00\0c\0a\01\00\13\0a\01\00"
    "\15\0a\01\00\17\0a\01\00\19\0a\01\00\35\0a\01\00\38\0a\01\00\3a\0a\01\00\3f\0a\01\00\48\0a\01\00"
    "\50\0a\01\00\58\0a\01\00\60\0a\01\00\9f\0a\01\00\c0\0a\01\00\e6\0a\01\00\eb\0a\01\00\f6\0a\01\00"
    "\00\0b\01\00\35\0b\01\00\39\0b\01\00\55\0b\01\00\58\0b\01\00\72\0b\01\00\78\0b\01\00\91\0b\01\00"
    "\99\0b\01\00\9c\0b\01\00\a9\0b\01\00\af\0b\01\00\00\0c\01\00\48\0c\01\00\80\0c\01\00\b2\0c\01\00"
    "\c0\0c\01\00\f2\0c\01\00\fa\0c\01\00\27\0d\01\00\30\0d\01\00\39\0d\01\00\60\0e\01\00\7e\0e\01\00"
    "\80\0e\01\00\a9\0e\01\00\ab\0e\01\00\ad\0e\01\00\b0\0e\01\00\b1\0e\01\00\fd\0e\01\00\27\0f\01\00"
    "\30\0f\01\00\59\0f\01\00\70\0f\01\00\89\0f\01\00\b0\0f\01\00\cb\0f\01\00\e0\0f\01\00\f6\0f\01\00"
    "\00\10\01\00\4d\10\01\00\52\10\01\00\75\10\01\00\7f\10\01\00\bc\10\01\00\be\10\01\00\c2\10\01\00"
    "\d0\10\01\00\e8\10\01\00\f0\10\01\00\f9\10\01\00\00\11\01\00\34\11\01\00\36\11\01\00\47\11\01\00"
    "\50\11\01\00\76\11\01\00\80\11\01\00\df\11\01\00\e1\11\01\00\f4\11\01\00\00\12\01\00\11\12\01\00"
    "\13\12\01\00\41\12\01\00\80\12\01\00\86\12\01\00\88\12\01\00\88\12\01\00\8a\12\01\00\8d\12\01\00"
    "\8f\12\01\00\9d\12\01\00\9f\12\01\00\a9\12\01\00\b0\12\01\00\ea\12\01\00\f0\12\01\00\f9\12\01\00"
    "\00\13\01\00\03\13\01\00\05\13\01\00\0c\13\01\00\0f\13\01\00\10\13\01\00\13\13\01\00\28\13\01\00"
    "\2a\13\01\00\30\13\01\00\32\13\01\00\33\13\01\00\35\13\01\00\39\13\01\00\3b\13\01\00\44\13\01\00"
    "\47\13\01\00\48\13\01\00\4b\13\01\00\4d\13\01\00\50\13\01\00\50\13\01\00\57\13\01\00\57\13\01\00"
    "\5d\13\01\00\63\13\01\00\66\13\01\00\6c\13\01\00\70\13\01\00\74\13\01\00\00\14\01\00\5b\14\01\00"
    "\5d\14\01\00\61\14\01\00\80\14\01\00\c7\14\01\00\d0\14\01\00\d9\14\01\00\80\15\01\00\b5\15\01\00"
    "\b8\15\01\00\dd\15\01\00\00\16\01\00\44\16\01\00\50\16\01\00\59\16\01\00\60\16\01\00\6c\16\01\00"
    "\80\16\01\00\b9\16\01\00\c0\16\01\00\c9\16\01\00\00\17\01\00\1a\17\01\00\1d\17\01\00\2b\17\01\00"
    "\30\17\01\00\46\17\01\00\00\18\01\00\3b\18\01\00\a0\18\01\00\f2\18\01\00\ff\18\01\00\06\19\01\00"
    "\09\19\01\00\09\19\01\00\0c\19\01\00\13\19\01\00\15\19\01\00\16\19\01\00\18\19\01\00\35\19\01\00"
    "\37\19\01\00\38\19\01\00\3b\19\01\00\46\19\01\00\50\19\01\00\59\19\01\00\a0\19\01\00\a7\19\01\00"
    "\aa\19\01\00\d7\19\01\00\da\19\01\00\e4\19\01\00\00\1a\01\00\47\1a\01\00\50\1a\01\00\a2\1a\01\00"
    "\b0\1a\01\00\f8\1a\01\00\00\1b\01\00\09\1b\01\00\00\1c\01\00\08\1c\01\00\0a\1c\01\00\36\1c\01\00"
    "\38\1c\01\00\45\1c\01\00\50\1c\01\00\6c\1c\01\00\70\1c\01\00\8f\1c\01\00\92\1c\01\00\a7\1c\01\00"
    "\a9\1c\01\00\b6\1c\01\00\00\1d\01\00\06\1d\01\00\08\1d\01\00\09\1d\01\00\0b\1d\01\00\36\1d\01\00"
    "\3a\1d\01\00\3a\1d\01\00\3c\1d\01\00\3d\1d\01\00\3f\1d\01\00\47\1d\01\00\50\1d\01\00\59\1d\01\00"
    "\60\1d\01\00\65\1d\01\00\67\1d\01\00\68\1d\01\00\6a\1d\01\00\8e\1d\01\00\90\1d\01\00\91\1d\01\00"
    "\93\1d\01\00\98\1d\01\00\a0\1d\01\00\a9\1d\01\00\e0\1e\01\00\f8\1e\01\00\00\1f\01\00\10\1f\01\00"
    "\12\1f\01\00\3a\1f\01\00\3e\1f\01\00\59\1f\01\00\b0\1f\01\00\b0\1f\01\00\c0\1f\01\00\f1\1f\01\00"
    "\ff\1f\01\00\99\23\01\00\00\24\01\00\6e\24\01\00\70\24\01\00\74\24\01\00\80\24\01\00\43\25\01\00"
    "\90\2f\01\00\f2\2f\01\00\00\30\01\00\2f\34\01\00\40\34\01\00\55\34\01\00\00\44\01\00\46\46\01\00"
    "\00\68\01\00\38\6a\01\00\40\6a\01\00\5e\6a\01\00\60\6a\01\00\69\6a\01\00\6e\6a\01\00\be\6a\01\00"
    "\c0\6a\01\00\c9\6a\01\00\d0\6a\01\00\ed\6a\01\00\f0\6a\01\00\f5\6a\01\00\00\6b\01\00\45\6b\01\00"
    "\50\6b\01\00\59\6b\01\00\5b\6b\01\00\61\6b\01\00\63\6b\01\00\77\6b\01\00\7d\6b\01\00\8f\6b\01\00"
    "\40\6e\01\00\9a\6e\01\00\00\6f\01\00\4a\6f\01\00\4f\6f\01\00\87\6f\01\00\8f\6f\01\00\9f\6f\01\00"
    "\e0\6f\01\00\e4\6f\01\00\f0\6f\01\00\f1\6f\01\00\00\70\01\00\f7\87\01\00\00\88\01\00\d5\8c\01\00"
    "\00\8d\01\00\08\8d\01\00\f0\af\01\00\f3\af\01\00\f5\af\01\00\fb\af\01\00\fd\af\01\00\fe\af\01\00"
    "\00\b0\01\00\22\b1\01\00\32\b1\01\00\32\b1\01\00\50\b1\01\00\52\b1\01\00\55\b1\01\00\55\b1\01\00"
    "\64\b1\01\00\67\b1\01\00\70\b1\01\00\fb\b2\01\00\00\bc\01\00\6a\bc\01\00\70\bc\01\00\7c\bc\01\00"
    "\80\bc\01\00\88\bc\01\00\90\bc\01\00\99\bc\01\00\9c\bc\01\00\9f\bc\01\00\00\cf\01\00\2d\cf\01\00"
    "\30\cf\01\00\46\cf\01\00\50\cf\01\00\c3\cf\01\00\00\d0\01\00\f5\d0\01\00\00\d1\01\00\26\d1\01\00"
    "\29\d1\01\00\72\d1\01\00\7b\d1\01\00\ea\d1\01\00\00\d2\01\00\45\d2\01\00\c0\d2\01\00\d3\d2\01\00"
    "\e0\d2\01\00\f3\d2\01\00\00\d3\01\00\56\d3\01\00\60\d3\01\00\78\d3\01\00\00\d4\01\00\54\d4\01\00"
    "\56\d4\01\00\9c\d4\01\00\9e\d4\01\00\9f\d4\01\00\a2\d4\01\00\a2\d4\01\00\a5\d4\01\00\a6\d4\01\00"
    "\a9\d4\01\00\ac\d4\01\00\ae\d4\01\00\b9\d4\01\00\bb\d4\01\00\bb\d4\01\00\bd\d4\01\00\c3\d4\01\00"
    "\c5\d4\01\00\05\d5\01\00\07\d5\01\00\0a\d5\01\00\0d\d5\01\00\14\d5\01\00\16\d5\01\00\1c\d5\01\00"
    "\1e\d5\01\00\39\d5\01\00\3b\d5\01\00\3e\d5\01\00\40\d5\01\00\44\d5\01\00\46\d5\01\00\46\d5\01\00"
    "\4a\d5\01\00\50\d5\01\00\52\d5\01\00\a5\d6\01\00\a8\d6\01\00\cb\d7\01\00\ce\d7\01\00\8b\da\01\00"
    "\9b\da\01\00\9f\da\01\00\a1\da\01\00\af\da\01\00\00\df\01\00\1e\df\01\00\25\df\01\00\2a\df\01\00"
    "\00\e0\01\00\06\e0\01\00\08\e0\01\00\18\e0\01\00\1b\e0\01\00\21\e0\01\00\23\e0\01\00\24\e0\01\00"
    "\26\e0\01\00\2a\e0\01\00\30\e0\01\00\6d\e0\01\00\8f\e0\01\00\8f\e0\01\00\00\e1\01\00\2c\e1\01\00"
    "\30\e1\01\00\3d\e1\01\00\40\e1\01\00\49\e1\01\00\4e\e1\01\00\4f\e1\01\00\90\e2\01\00\ae\e2\01\00"
    "\c0\e2\01\00\f9\e2\01\00\ff\e2\01\00\ff\e2\01\00\d0\e4\01\00\f9\e4\01\00\e0\e7\01\00\e6\e7\01\00"
    "\e8\e7\01\00\eb\e7\01\00\ed\e7\01\00\ee\e7\01\00\f0\e7\01\00\fe\e7\01\00\00\e8\01\00\c4\e8\01\00"
    "\c7\e8\01\00\d6\e8\01\00\00\e9\01\00\4b\e9\01\00\50\e9\01\00\59\e9\01\00\5e\e9\01\00\5f\e9\01\00"
    "\71\ec\01\00\b4\ec\01\00\01\ed\01\00\3d\ed\01\00\00\ee\01\00\03\ee\01\00\05\ee\01\00\1f\ee\01\00"
    "\21\ee\01\00\22\ee\01\00\24\ee\01\00\24\ee\01\00\27\ee\01\00\27\ee\01\00\29\ee\01\00\32\ee\01\00"
    "\34\ee\01\00\37\ee\01\00\39\ee\01\00\39\ee\01\00\3b\ee\01\00\3b\ee\01\00\42\ee\01\00\42\ee\01\00"
    "\47\ee\01\00\47\ee\01\00\49\ee\01\00\49\ee\01\00\4b\ee\01\00\4b\ee\01\00\4d\ee\01\00\4f\ee\01\00"
    "\51\ee\01\00\52\ee\01\00\54\ee\01\00\54\ee\01\00\57\ee\01\00\57\ee\01\00\59\ee\01\00\59\ee\01\00"
    "\5b\ee\01\00\5b\ee\01\00\5d\ee\01\00\5d\ee\01\00\5f\ee\01\00\5f\ee\01\00\61\ee\01\00\62\ee\01\00"
    "\64\ee\01\00\64\ee\01\00\67\ee\01\00\6a\ee\01\00\6c\ee\01\00\72\ee\01\00\74\ee\01\00\77\ee\01\00"
    "\79\ee\01\00\7c\ee\01\00\7e\ee\01\00\7e\ee\01\00\80\ee\01\00\89\ee\01\00\8b\ee\01\00\9b\ee\01\00"
    "\a1\ee\01\00\a3\ee\01\00\a5\ee\01\00\a9\ee\01\00\ab\ee\01\00\bb\ee\01\00\f0\ee\01\00\f1\ee\01\00"
    "\00\f0\01\00\2b\f0\01\00\30\f0\01\00\93\f0\01\00\a0\f0\01\00\ae\f0\01\00\b1\f0\01\00\bf\f0\01\00"
    "\c1\f0\01\00\cf\f0\01\00\d1\f0\01\00\f5\f0\01\00\00\f1\01\00\ad\f1\01\00\e6\f1\01\00\02\f2\01\00"
    "\10\f2\01\00\3b\f2\01\00\40\f2\01\00\48\f2\01\00\50\f2\01\00\51\f2\01\00\60\f2\01\00\65\f2\01\00"
    "\00\f3\01\00\d7\f6\01\00\dc\f6\01\00\ec\f6\01\00\f0\f6\01\00\fc\f6\01\00\00\f7\01\00\76\f7\01\00"
    "\7b\f7\01\00\d9\f7\01\00\e0\f7\01\00\eb\f7\01\00\f0\f7\01\00\f0\f7\01\00\00\f8\01\00\0b\f8\01\00"
    "\10\f8\01\00\47\f8\01\00\50\f8\01\00\59\f8\01\00\60\f8\01\00\87\f8\01\00\90\f8\01\00\ad\f8\01\00"
    "\b0\f8\01\00\b1\f8\01\00\00\f9\01\00\53\fa\01\00\60\fa\01\00\6d\fa\01\00\70\fa\01\00\7c\fa\01\00"
    "\80\fa\01\00\88\fa\01\00\90\fa\01\00\bd\fa\01\00\bf\fa\01\00\c5\fa\01\00\ce\fa\01\00\db\fa\01\00"
    "\e0\fa\01\00\e8\fa\01\00\f0\fa\01\00\f8\fa\01\00\00\fb\01\00\92\fb\01\00\94\fb\01\00\ca\fb\01\00"
    "\f0\fb\01\00\f9\fb\01\00\00\00\02\00\df\a6\02\00\00\a7\02\00\39\b7\02\00\40\b7\02\00\1d\b8\02\00"
    "\20\b8\02\00\a1\ce\02\00\b0\ce\02\00\e0\eb\02\00\00\f8\02\00\1d\fa\02\00\00\00\03\00\4a\13\03\00"
    "\50\13\03\00\af\23\03\00\00\01\0e\00\ef\01\0e\00")

  ;; Where the Init envelope and then the requests go.
  (global $base (mut i32) (i32.const 10240))

  ;; Decoder state.
  (global $pos (mut i32) (i32.const 0)) ;; next byte to read
  (global $end (mut i32) (i32.const 0)) ;; end of the envelope
  (global $err (mut i32) (i32.const 0)) ;; first failure: 0 or -1
  (global $maj (mut i32) (i32.const 0)) ;; major type of the last head, -1 after a failure
  (global $arg (mut i64) (i64.const 0)) ;; argument of the last head
  (global $ival (mut i64) (i64.const 0)) ;; value of the last int
  (global $sptr (mut i32) (i32.const 0)) ;; last text or bytes read
  (global $slen (mut i32) (i32.const 0))
  (global $version (mut i64) (i64.const 1))

  ;; The heap and the response: the next byte to write.
  (global $w (mut i32) (i32.const 0))

  ;; What flowhost_init kept.
  (global $started (mut i32) (i32.const 0))
  (global $initEnd (mut i32) (i32.const 0))
  (global $paramsPos (mut i32) (i32.const 0)) ;; first pair of the parameters map
  (global $nparams (mut i32) (i32.const 0))
  (global $hasOuts (mut i32) (i32.const 0))   ;; output_streams was given
  (global $outsPos (mut i32) (i32.const 0))   ;; its first item
  (global $nouts (mut i32) (i32.const 0))

  ;; The batch.
  (global $reqEnd (mut i32) (i32.const 0))
  (global $isMap (mut i32) (i32.const 0))
  (global $epoch (mut i64) (i64.const 0))
  (global $partition (mut i64) (i64.const 0))
  (global $wmEvent (mut i64) (i64.const 0))
  (global $wmSystem (mut i64) (i64.const 0))
  (global $compP (mut i32) (i32.const 0))
  (global $compL (mut i32) (i32.const 0))
  (global $keysBase (mut i32) (i32.const 0))
  (global $nkeys (mut i32) (i32.const 0))
  ;; 0 running, 1 failbatch (the batch's error in $bErrP/$bErrL), 2 a
  ;; guest failure (status -2).
  (global $stop (mut i32) (i32.const 0))
  (global $bErrP (mut i32) (i32.const 0))
  (global $bErrL (mut i32) (i32.const 0))

  ;; The key being run: its record, the address each list's next record
  ;; is linked at, its number of inputs.
  (global $rec (mut i32) (i32.const 0))
  (global $eTail (mut i32) (i32.const 0))
  (global $tTail (mut i32) (i32.const 0))
  (global $cTail (mut i32) (i32.const 0))
  (global $ninputs (mut i32) (i32.const 0))

  ;; The last message decoded.
  (global $mIdP (mut i32) (i32.const 0))
  (global $mIdL (mut i32) (i32.const 0))
  (global $mStP (mut i32) (i32.const 0))
  (global $mStL (mut i32) (i32.const 0))
  (global $mPP (mut i32) (i32.const 0))
  (global $mPL (mut i32) (i32.const 0))
  (global $mEv (mut i64) (i64.const 0))
  (global $mSys (mut i64) (i64.const 0))
  (global $mAl (mut i64) (i64.const 0))
  ;; The last due timer decoded.
  (global $tTr (mut i64) (i64.const 0))
  (global $tPP (mut i32) (i32.const 0))
  (global $tPL (mut i32) (i32.const 0))

  ;; The command being run and its arguments.
  (global $cmdP (mut i32) (i32.const 0))
  (global $cmdL (mut i32) (i32.const 0))
  (global $a0p (mut i32) (i32.const 0))
  (global $a0l (mut i32) (i32.const 0))
  (global $a1p (mut i32) (i32.const 0))
  (global $a1l (mut i32) (i32.const 0))
  (global $a2p (mut i32) (i32.const 0))
  (global $a2l (mut i32) (i32.const 0))
  (global $num (mut i64) (i64.const 0))

  ;; A key record (80 bytes, one per request key, in request order):
  ;;   0 key ptr   4 key len   8 state present   12 state ptr   16 state len
  ;;   20 timers pos   24 timers   28 messages pos   32 messages
  ;;   36 first emit   40 first timer set   44 first cancel
  ;;   48 state op   52 new state ptr   56 new state len
  ;;   60 failed   64 error ptr   68 error len
  ;; An emit record (48 bytes): 0 next, 4 stream ptr, 8 stream len,
  ;;   12 key ptr, 16 key len, 20 payload ptr, 24 payload len,
  ;;   28 parents (0 left out, 1 the one input at 32, 2 every input),
  ;;   32 input, 36 event_ts given, 40 event_ts.
  ;; A timer record (40 bytes): 0 next, 4 cancelled, 8 trigger,
  ;;   16 event_ts given, 24 event_ts, 32 payload ptr, 36 payload len.
  ;; A cancel record (16 bytes): 0 next, 8 trigger.

  (func (export "flowhost_abi_v1"))

  ;; flowhost_alloc(size) -> ptr: always $base, after growing memory to
  ;; hold size bytes there; 0 when it cannot or size is negative.
  (func (export "flowhost_alloc") (param $size i32) (result i32)
    (if (i32.lt_s (local.get $size) (i32.const 0))
      (then (return (i32.const 0))))
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (global.get $base))
                                     (i64.extend_i32_u (local.get $size)))))
      (then (return (i32.const 0))))
    (global.get $base))

  ;; ---- decoding (from echo.wat) -----------------------------------------

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

  ;; $int reads a signed integer (major type 0 or 1) within int64 into
  ;; $ival.
  (func $int
    (call $head)
    (if (i32.gt_u (global.get $maj) (i32.const 1)) (then (call $fail (i32.const -1)) (return)))
    (if (i64.lt_s (global.get $arg) (i64.const 0)) (then (call $fail (i32.const -1)) (return)))
    (global.set $ival
      (select (i64.sub (i64.const -1) (global.get $arg)) (global.get $arg) (global.get $maj))))

  ;; $charLen returns the length of the UTF-8 character at p, which ends
  ;; before e, or 0 when none starts there: no overlong forms, no
  ;; surrogates, nothing above U+10FFFF (utf8.DecodeRune's rules).
  (func $charLen (param $p i32) (param $e i32) (result i32)
    (local $b i32)
    (local $c i32)  ;; continuation bytes
    (local $lo i32) ;; range of the first continuation byte
    (local $hi i32)
    (local $i i32)
    (local.set $b (i32.load8_u (local.get $p)))
    (if (i32.lt_u (local.get $b) (i32.const 0x80)) (then (return (i32.const 1))))
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
    (if (i32.le_u (i32.sub (local.get $e) (local.get $p)) (local.get $c))
      (then (return (i32.const 0))))
    (local.set $b (i32.load8_u (i32.add (local.get $p) (i32.const 1))))
    (if (i32.or (i32.lt_u (local.get $b) (local.get $lo)) (i32.gt_u (local.get $b) (local.get $hi)))
      (then (return (i32.const 0))))
    (local.set $i (i32.const 2))
    (block $tail
      (loop $cont
        (br_if $tail (i32.gt_u (local.get $i) (local.get $c)))
        (if (i32.ne (i32.and (i32.load8_u (i32.add (local.get $p) (local.get $i))) (i32.const 0xc0)) (i32.const 0x80))
          (then (return (i32.const 0))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $cont)))
    (i32.add (local.get $c) (i32.const 1)))

  ;; $utf8 reports whether the n bytes at p are valid UTF-8.
  (func $utf8 (param $p i32) (param $n i32) (result i32)
    (local $e i32)
    (local $c i32)
    (local.set $e (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $char
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (call $charLen (local.get $p) (local.get $e)))
        (if (i32.eqz (local.get $c)) (then (return (i32.const 0))))
        (local.set $p (i32.add (local.get $p) (local.get $c)))
        (br $char)))
    (i32.const 1))

  ;; $skip reads any one item (for the Init's parameters and fields this
  ;; guest does not use).
  (func $skip
    (local $n i64)
    (call $head)
    (if (global.get $err) (then (return)))
    (if (i32.or (i32.eq (global.get $maj) (i32.const 2)) (i32.eq (global.get $maj) (i32.const 3)))
      (then
        (if (i64.gt_u (global.get $arg) (call $left)) (then (call $fail (i32.const -1)) (return)))
        (global.set $pos (i32.add (global.get $pos) (i32.wrap_i64 (global.get $arg))))
        (return)))
    (if (i32.lt_u (global.get $maj) (i32.const 4)) (then (return)))
    (if (i32.eq (global.get $maj) (i32.const 7)) (then (return)))
    (if (i64.gt_u (global.get $arg) (call $left)) (then (call $fail (i32.const -1)) (return)))
    (local.set $n (global.get $arg))
    (if (i32.eq (global.get $maj) (i32.const 5)) (then (local.set $n (i64.shl (local.get $n) (i64.const 1)))))
    (block $done
      (loop $item
        (br_if $done (i32.or (i64.eqz (local.get $n)) (global.get $err)))
        (call $skip)
        (local.set $n (i64.sub (local.get $n) (i64.const 1)))
        (br $item))))

  ;; $watermarks reads {event: int, system: int}.
  (func $watermarks
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (local.set $slot (call $slotOf (i32.const 7) (i32.const 2)))
        (if (i32.eq (local.get $slot) (i32.const 7))
          (then
            (local.set $seen (call $field (local.get $seen) (i32.const 1)))
            (call $int)
            (global.set $wmEvent (global.get $ival))))
        (if (i32.eq (local.get $slot) (i32.const 8))
          (then
            (local.set $seen (call $field (local.get $seen) (i32.const 2)))
            (call $int)
            (global.set $wmSystem (global.get $ival))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (local.get $seen) (i32.const 3)) (then (call $fail (i32.const -1)))))

  ;; $timer reads a DueTimer: {id: text, trigger_ts: int, event_ts: int,
  ;; payload?: bytes}, leaving the trigger in $tTr and the payload in
  ;; $tPP/$tPL.
  (func $timer
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (global.set $tPL (i32.const 0))
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
            (if (i32.eq (local.get $slot) (i32.const 14)) (then (call $int) (global.set $tTr (global.get $ival))))
            (if (i32.eq (local.get $slot) (i32.const 15)) (then (call $int)))
            (if (i32.eq (local.get $slot) (i32.const 16))
              (then
                (call $string (i32.const 2))
                (global.set $tPP (global.get $sptr))
                (global.set $tPL (global.get $slen))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (i32.and (local.get $seen) (i32.const 7)) (i32.const 7)) (then (call $fail (i32.const -1)))))

  ;; $message reads a Message: {id: text, stream: text, payload: bytes,
  ;; event_ts, system_ts, alignment_ts: int} into the $m globals.
  (func $message
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
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
            (if (i32.eq (local.get $slot) (i32.const 13))
              (then
                (call $string (i32.const 3))
                (global.set $mIdP (global.get $sptr))
                (global.set $mIdL (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 17))
              (then
                (call $string (i32.const 3))
                (global.set $mStP (global.get $sptr))
                (global.set $mStL (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 16))
              (then
                (call $string (i32.const 2))
                (global.set $mPP (global.get $sptr))
                (global.set $mPL (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 15)) (then (call $int) (global.set $mEv (global.get $ival))))
            (if (i32.eq (local.get $slot) (i32.const 18)) (then (call $int) (global.set $mSys (global.get $ival))))
            (if (i32.eq (local.get $slot) (i32.const 19)) (then (call $int) (global.set $mAl (global.get $ival))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    ;; All of id, event_ts, payload, stream, system_ts, alignment_ts.
    (if (i32.ne (local.get $seen) (i32.const 0x7d)) (then (call $fail (i32.const -1)))))

  ;; $key reads a RequestKey into the key record at r: where its key,
  ;; state, timers and messages are. Every timer and message is decoded
  ;; once here, so that a bad one is refused before any script runs.
  (func $key (param $r i32)
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
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
                (i32.store offset=0 (local.get $r) (global.get $sptr))
                (i32.store offset=4 (local.get $r) (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 10))
              (then
                (call $string (i32.const 2))
                (i32.store offset=8 (local.get $r) (i32.const 1))
                (i32.store offset=12 (local.get $r) (global.get $sptr))
                (i32.store offset=16 (local.get $r) (global.get $slen))))
            (if (i32.eq (local.get $slot) (i32.const 11))
              (then
                (local.set $i (call $count (i32.const 4)))
                (i32.store offset=20 (local.get $r) (global.get $pos))
                (i32.store offset=24 (local.get $r) (local.get $i))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.eqz (local.get $i)) (global.get $err)))
                    (call $timer)
                    (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                    (br $each)))))
            (if (i32.eq (local.get $slot) (i32.const 12))
              (then
                (local.set $i (call $count (i32.const 4)))
                (i32.store offset=28 (local.get $r) (global.get $pos))
                (i32.store offset=32 (local.get $r) (local.get $i))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.eqz (local.get $i)) (global.get $err)))
                    (call $message)
                    (local.set $i (i32.sub (local.get $i) (i32.const 1)))
                    (br $each)))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.eqz (i32.and (local.get $seen) (i32.const 1))) (then (call $fail (i32.const -1)))))

  ;; $kind reads the kind, which must be "transform" or "map".
  (func $kind
    (call $string (i32.const 3))
    (if (global.get $err) (then (return)))
    (global.set $isMap (call $is (i32.const 21)))
    (if (i32.eqz (i32.or (call $is (i32.const 20)) (global.get $isMap)))
      (then (call $fail (i32.const -1)))))

  ;; ---- writing: the heap, texts and CBOR ------------------------------

  ;; $room makes sure n more bytes can be written at $w. Running out of
  ;; memory traps, as it would in any other guest.
  (func $room (param $n i32)
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (global.get $w)) (i64.extend_i32_u (local.get $n)))))
      (then (unreachable))))

  ;; $alloc returns n zeroed bytes of the heap, 8-aligned.
  (func $alloc (param $n i32) (result i32)
    (local $p i32)
    (global.set $w (i32.and (i32.add (global.get $w) (i32.const 7)) (i32.const -8)))
    (call $room (local.get $n))
    (local.set $p (global.get $w))
    (memory.fill (local.get $p) (i32.const 0) (local.get $n))
    (global.set $w (i32.add (local.get $p) (local.get $n)))
    (local.get $p))

  (func $wb (param $b i32)
    (call $room (i32.const 1))
    (i32.store8 (global.get $w) (local.get $b))
    (global.set $w (i32.add (global.get $w) (i32.const 1))))

  (func $wcopy (param $src i32) (param $n i32)
    (call $room (local.get $n))
    (memory.copy (global.get $w) (local.get $src) (local.get $n))
    (global.set $w (i32.add (global.get $w) (local.get $n))))

  ;; $lit writes text slot k.
  (func $lit (param $k i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 1024) (i32.shl (local.get $k) (i32.const 6))))
    (call $wcopy (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))

  ;; $whead writes the shortest head of major type m with argument v.
  (func $whead (param $m i32) (param $v i64)
    (local $top i32)
    (local $bytes i32)
    (local.set $top (i32.shl (local.get $m) (i32.const 5)))
    (if (i64.lt_u (local.get $v) (i64.const 24))
      (then (call $wb (i32.or (local.get $top) (i32.wrap_i64 (local.get $v)))) (return)))
    (local.set $bytes (i32.const 8))
    (if (i64.le_u (local.get $v) (i64.const 0xffffffff)) (then (local.set $bytes (i32.const 4))))
    (if (i64.le_u (local.get $v) (i64.const 0xffff)) (then (local.set $bytes (i32.const 2))))
    (if (i64.le_u (local.get $v) (i64.const 0xff)) (then (local.set $bytes (i32.const 1))))
    ;; 1, 2, 4, 8 bytes: additional information 24, 25, 26, 27.
    (call $wb (i32.or (local.get $top) (i32.add (i32.const 24) (i32.ctz (local.get $bytes)))))
    (loop $next
      (local.set $bytes (i32.sub (local.get $bytes) (i32.const 1)))
      (call $wb (i32.wrap_i64 (i64.shr_u (local.get $v) (i64.extend_i32_u (i32.shl (local.get $bytes) (i32.const 3))))))
      (br_if $next (local.get $bytes))))

  ;; $wint writes an int: major type 0, or 1 for a negative.
  (func $wint (param $v i64)
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then (call $whead (i32.const 1) (i64.sub (i64.const -1) (local.get $v))))
      (else (call $whead (i32.const 0) (local.get $v)))))

  ;; $wstr writes a byte string (m = 2) or text (m = 3).
  (func $wstr (param $m i32) (param $p i32) (param $n i32)
    (call $whead (local.get $m) (i64.extend_i32_u (local.get $n)))
    (call $wcopy (local.get $p) (local.get $n)))

  ;; $wname writes text slot k as a CBOR text: a map key.
  (func $wname (param $k i32)
    (local $p i32)
    (local.set $p (i32.add (i32.const 1024) (i32.shl (local.get $k) (i32.const 6))))
    (call $wstr (i32.const 3) (i32.add (local.get $p) (i32.const 1)) (i32.load8_u (local.get $p))))

  ;; $wdec writes v in decimal, as an unsigned number.
  (func $wdec (param $v i64)
    (local $p i32)
    (local.set $p (i32.const 4064))
    (loop $digit
      (local.set $p (i32.sub (local.get $p) (i32.const 1)))
      (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.wrap_i64 (i64.rem_u (local.get $v) (i64.const 10)))))
      (local.set $v (i64.div_u (local.get $v) (i64.const 10)))
      (br_if $digit (i64.ne (local.get $v) (i64.const 0))))
    (call $wcopy (local.get $p) (i32.sub (i32.const 4064) (local.get $p))))

  ;; $wdecs writes v in decimal, as a signed number.
  (func $wdecs (param $v i64)
    (if (i64.lt_s (local.get $v) (i64.const 0))
      (then
        (call $wb (i32.const 45)) ;; -
        (call $wdec (i64.sub (i64.const 0) (local.get $v))))
      (else (call $wdec (local.get $v)))))

  ;; $valid copies the n bytes at p as strings.ToValidUTF8(s, "\uFFFD")
  ;; does, when write is 1, and returns the length of the result: each run
  ;; of bytes that are not UTF-8 becomes one U+FFFD.
  (func $valid (param $p i32) (param $n i32) (param $write i32) (result i32)
    (local $e i32)
    (local $c i32)
    (local $len i32)
    (local $bad i32)
    (local.set $e (i32.add (local.get $p) (local.get $n)))
    (block $done
      (loop $char
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $c (call $charLen (local.get $p) (local.get $e)))
        (if (local.get $c)
          (then
            (if (local.get $write) (then (call $wcopy (local.get $p) (local.get $c))))
            (local.set $len (i32.add (local.get $len) (local.get $c)))
            (local.set $p (i32.add (local.get $p) (local.get $c)))
            (local.set $bad (i32.const 0)))
          (else
            (if (i32.eqz (local.get $bad))
              (then
                (if (local.get $write)
                  (then (call $wb (i32.const 0xef)) (call $wb (i32.const 0xbf)) (call $wb (i32.const 0xbd))))
                (local.set $len (i32.add (local.get $len) (i32.const 3)))))
            (local.set $bad (i32.const 1))
            (local.set $p (i32.add (local.get $p) (i32.const 1)))))
        (br $char)))
    (local.get $len))

  ;; $wvalid writes the n bytes at p as a CBOR text, made valid UTF-8.
  (func $wvalid (param $p i32) (param $n i32)
    (call $whead (i32.const 3) (i64.extend_i32_u (call $valid (local.get $p) (local.get $n) (i32.const 0))))
    (drop (call $valid (local.get $p) (local.get $n) (i32.const 1))))

  ;; $werror writes an error text as the Go SDK's errorText does: valid
  ;; UTF-8, and never empty, since an empty error means success.
  (func $werror (param $p i32) (param $n i32)
    (if (i32.eqz (local.get $n))
      (then (call $wname (i32.const 8)))
      (else (call $wvalid (local.get $p) (local.get $n)))))

  ;; $whex writes the n low hex digits of v.
  (func $whex (param $v i32) (param $n i32)
    (loop $digit
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (call $wb (i32.load8_u (i32.add (i32.const 3840)
        (i32.and (i32.shr_u (local.get $v) (i32.shl (local.get $n) (i32.const 2))) (i32.const 15)))))
      (br_if $digit (local.get $n))))

  ;; $printable is strconv.IsPrint for a code point above U+007F: whether
  ;; it lies in one of the 710 ranges of printable code points at 4096
  ;; (a binary search for the last range starting at or below r).
  (func $printable (param $r i32) (result i32)
    (local $lo i32)
    (local $hi i32)
    (local $mid i32)
    (local.set $hi (i32.const 710))
    (block $found
      (loop $halve
        (br_if $found (i32.ge_u (local.get $lo) (local.get $hi)))
        (local.set $mid (i32.shr_u (i32.add (local.get $lo) (local.get $hi)) (i32.const 1)))
        (if (i32.le_u (i32.load (i32.add (i32.const 4096) (i32.shl (local.get $mid) (i32.const 3)))) (local.get $r))
          (then (local.set $lo (i32.add (local.get $mid) (i32.const 1))))
          (else (local.set $hi (local.get $mid))))
        (br $halve)))
    (if (i32.eqz (local.get $lo)) (then (return (i32.const 0))))
    (i32.le_u (local.get $r) (i32.load (i32.add (i32.const 4092) (i32.shl (local.get $lo) (i32.const 3))))))

  ;; $quote writes the n bytes at p as strconv.Quote does (Go's %q).
  (func $quote (param $p i32) (param $n i32)
    (local $e i32)
    (local $c i32)
    (local $b i32)
    (local $r i32)
    (local $i i32)
    (local.set $e (i32.add (local.get $p) (local.get $n)))
    (call $wb (i32.const 34))
    (block $done
      (loop $char
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (local.set $b (i32.load8_u (local.get $p)))
        (local.set $c (call $charLen (local.get $p) (local.get $e)))
        (block $next
          (if (i32.eqz (local.get $c))
            (then
              (call $wb (i32.const 92)) (call $wb (i32.const 120)) ;; \x
              (call $whex (local.get $b) (i32.const 2))
              (local.set $c (i32.const 1))
              (br $next)))
          (if (i32.eq (local.get $c) (i32.const 1))
            (then
              (if (i32.or (i32.eq (local.get $b) (i32.const 34)) (i32.eq (local.get $b) (i32.const 92)))
                (then (call $wb (i32.const 92)) (call $wb (local.get $b)) (br $next)))
              (if (i32.and (i32.ge_u (local.get $b) (i32.const 32)) (i32.lt_u (local.get $b) (i32.const 127)))
                (then (call $wb (local.get $b)) (br $next)))
              (call $wb (i32.const 92))
              ;; \a \b \t \n \v \f \r for 7 .. 13
              (if (i32.and (i32.ge_u (local.get $b) (i32.const 7)) (i32.le_u (local.get $b) (i32.const 13)))
                (then
                  (call $wb (i32.load8_u (i32.add (i32.const 3856) (i32.sub (local.get $b) (i32.const 7)))))
                  (br $next)))
              (call $wb (i32.const 120))
              (call $whex (local.get $b) (i32.const 2))
              (br $next)))
          ;; A character of 2 to 4 bytes: its code point.
          (local.set $r (i32.and (local.get $b) (i32.shr_u (i32.const 0x7f) (local.get $c))))
          (local.set $i (i32.const 1))
          (loop $cont
            (local.set $r (i32.or (i32.shl (local.get $r) (i32.const 6))
              (i32.and (i32.load8_u (i32.add (local.get $p) (local.get $i))) (i32.const 0x3f))))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br_if $cont (i32.lt_u (local.get $i) (local.get $c))))
          (if (call $printable (local.get $r))
            (then (call $wcopy (local.get $p) (local.get $c)) (br $next)))
          (call $wb (i32.const 92))
          (if (i32.lt_u (local.get $r) (i32.const 0x10000))
            (then (call $wb (i32.const 117)) (call $whex (local.get $r) (i32.const 4)))
            (else (call $wb (i32.const 85)) (call $whex (local.get $r) (i32.const 8)))))
        (local.set $p (i32.add (local.get $p) (local.get $c)))
        (br $char)))
    (call $wb (i32.const 34)))

  ;; ---- the script -----------------------------------------------------

  (func $memeq (param $a i32) (param $b i32) (param $n i32) (result i32)
    (block $differ
      (loop $byte
        (if (i32.eqz (local.get $n)) (then (return (i32.const 1))))
        (br_if $differ (i32.ne (i32.load8_u (local.get $a)) (i32.load8_u (local.get $b))))
        (local.set $a (i32.add (local.get $a) (i32.const 1)))
        (local.set $b (i32.add (local.get $b) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $byte)))
    (i32.const 0))

  ;; $colon returns the address of the first ':' in [p, e), or e.
  (func $colon (param $p i32) (param $e i32) (result i32)
    (block $done
      (loop $byte
        (br_if $done (i32.ge_u (local.get $p) (local.get $e)))
        (br_if $done (i32.eq (i32.load8_u (local.get $p)) (i32.const 58)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $byte)))
    (local.get $p))

  ;; $findParam looks the parameter named by the n bytes at p up in the
  ;; Init; when it is there it returns 1 with $pos at its value. The
  ;; caller saves and restores $pos and $end.
  (func $findParam (param $p i32) (param $n i32) (result i32)
    (local $k i32)
    (global.set $pos (global.get $paramsPos))
    (global.set $end (global.get $initEnd))
    (local.set $k (global.get $nparams))
    (block $none
      (loop $pair
        (br_if $none (i32.or (i32.eqz (local.get $k)) (global.get $err)))
        (call $string (i32.const 3))
        (if (i32.and (i32.eq (global.get $slen) (local.get $n))
                     (call $memeq (global.get $sptr) (local.get $p) (local.get $n)))
          (then (return (i32.const 1))))
        (call $skip)
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (br $pair)))
    (i32.const 0))

  ;; $wparam writes what param: reports of the parameter named by the n
  ;; bytes at p: a string as it is, an integer in decimal, true or false,
  ;; "?" for anything else, "missing" when there is none.
  (func $wparam (param $p i32) (param $n i32)
    (local $pos i32)
    (local $end i32)
    (local $b i32)
    (local.set $pos (global.get $pos))
    (local.set $end (global.get $end))
    (block $done
      (if (i32.eqz (call $findParam (local.get $p) (local.get $n)))
        (then (call $lit (i32.const 13)) (br $done)))
      (local.set $b (i32.load8_u (global.get $pos)))
      (if (i32.eq (i32.shr_u (local.get $b) (i32.const 5)) (i32.const 3))
        (then
          (call $string (i32.const 3))
          (call $wcopy (global.get $sptr) (global.get $slen))
          (br $done)))
      (if (i32.lt_u (i32.shr_u (local.get $b) (i32.const 5)) (i32.const 2))
        (then
          (call $int)
          (if (global.get $err)
            (then (global.set $err (i32.const 0)) (call $wb (i32.const 63)))
            (else (call $wdecs (global.get $ival))))
          (br $done)))
      (if (i32.eq (local.get $b) (i32.const 0xf5)) (then (call $lit (i32.const 14)) (br $done)))
      (if (i32.eq (local.get $b) (i32.const 0xf4)) (then (call $lit (i32.const 15)) (br $done)))
      (call $wb (i32.const 63))) ;; ?
    (global.set $pos (local.get $pos))
    (global.set $end (local.get $end)))

  ;; $streamOK reports whether the n bytes at p name a stream the Init
  ;; declared (any stream when it declared none, as the Go SDK does).
  (func $streamOK (param $p i32) (param $n i32) (result i32)
    (local $pos i32)
    (local $end i32)
    (local $k i32)
    (local $ok i32)
    (if (i32.eqz (global.get $hasOuts)) (then (return (i32.const 1))))
    (local.set $pos (global.get $pos))
    (local.set $end (global.get $end))
    (global.set $pos (global.get $outsPos))
    (global.set $end (global.get $initEnd))
    (local.set $k (global.get $nouts))
    (block $done
      (loop $item
        (br_if $done (i32.eqz (local.get $k)))
        (call $string (i32.const 3))
        (if (i32.and (i32.eq (global.get $slen) (local.get $n))
                     (call $memeq (global.get $sptr) (local.get $p) (local.get $n)))
          (then (local.set $ok (i32.const 1)) (br $done)))
        (local.set $k (i32.sub (local.get $k) (i32.const 1)))
        (br $item)))
    (global.set $pos (local.get $pos))
    (global.set $end (local.get $end))
    (local.get $ok))

  ;; $emit adds an emit to the key: stream, key (none when kn is 0),
  ;; payload, parents (0 left out, 1 the input at, 2 every input), and
  ;; event_ts when hasEv. An undeclared stream is a guest failure, as
  ;; Emit's panic is in the Go SDK.
  (func $emit (param $sp i32) (param $sn i32) (param $kp i32) (param $kn i32) (param $pp i32) (param $pn i32)
              (param $mode i32) (param $at i32) (param $hasEv i32) (param $ev i64)
    (local $r i32)
    (if (i32.eqz (call $streamOK (local.get $sp) (local.get $sn)))
      (then (global.set $stop (i32.const 2)) (return)))
    (local.set $r (call $alloc (i32.const 48)))
    (i32.store offset=4 (local.get $r) (local.get $sp))
    (i32.store offset=8 (local.get $r) (local.get $sn))
    (i32.store offset=12 (local.get $r) (local.get $kp))
    (i32.store offset=16 (local.get $r) (local.get $kn))
    (i32.store offset=20 (local.get $r) (local.get $pp))
    (i32.store offset=24 (local.get $r) (local.get $pn))
    (i32.store offset=28 (local.get $r) (local.get $mode))
    (i32.store offset=32 (local.get $r) (local.get $at))
    (i32.store offset=36 (local.get $r) (local.get $hasEv))
    (i64.store offset=40 (local.get $r) (local.get $ev))
    (i32.store (global.get $eTail) (local.get $r))
    (global.set $eTail (local.get $r)))

  ;; $emitOut emits the text written to the heap since start on "out",
  ;; with the input at as its parent.
  (func $emitOut (param $start i32) (param $at i32)
    (call $emit (i32.const 3777) (i32.const 3) (i32.const 0) (i32.const 0)
      (local.get $start) (i32.sub (global.get $w) (local.get $start))
      (i32.const 1) (local.get $at) (i32.const 0) (i64.const 0)))

  ;; $transform is false, and the batch a guest failure, in a map
  ;; computation: the Go SDK panics when a map keeps state or timers.
  (func $transform (result i32)
    (if (global.get $isMap) (then (global.set $stop (i32.const 2)) (return (i32.const 0))))
    (i32.const 1))

  ;; $failKey fails the key with the text written since start, unless it
  ;; has failed already: the first failure is the one reported.
  (func $failKey (param $start i32)
    (if (i32.load offset=60 (global.get $rec)) (then (return)))
    (i32.store offset=60 (global.get $rec) (i32.const 1))
    (i32.store offset=64 (global.get $rec) (local.get $start))
    (i32.store offset=68 (global.get $rec) (i32.sub (global.get $w) (local.get $start))))

  ;; $setState replaces the key's state (op 1) or deletes it (op 2).
  (func $setState (param $op i32) (param $p i32) (param $n i32)
    (i32.store offset=48 (global.get $rec) (local.get $op))
    (i32.store offset=52 (global.get $rec) (local.get $p))
    (i32.store offset=56 (global.get $rec) (local.get $n)))

  ;; $state returns 1 and the key's state in $sptr/$slen as the script
  ;; sees it now, or 0 when it has none.
  (func $state (result i32)
    (local $op i32)
    (local.set $op (i32.load offset=48 (global.get $rec)))
    (if (i32.eq (local.get $op) (i32.const 1))
      (then
        (global.set $sptr (i32.load offset=52 (global.get $rec)))
        (global.set $slen (i32.load offset=56 (global.get $rec)))
        (return (i32.const 1))))
    (if (i32.eq (local.get $op) (i32.const 2)) (then (return (i32.const 0))))
    (global.set $sptr (i32.load offset=12 (global.get $rec)))
    (global.set $slen (i32.load offset=16 (global.get $rec)))
    (i32.load offset=8 (global.get $rec)))

  ;; $setTimer adds a set to timers_set, in call order.
  (func $setTimer (param $tr i64) (param $hasEv i32) (param $ev i64) (param $pp i32) (param $pn i32)
    (local $r i32)
    (local.set $r (call $alloc (i32.const 40)))
    (i64.store offset=8 (local.get $r) (local.get $tr))
    (i32.store offset=16 (local.get $r) (local.get $hasEv))
    (i64.store offset=24 (local.get $r) (local.get $ev))
    (i32.store offset=32 (local.get $r) (local.get $pp))
    (i32.store offset=36 (local.get $r) (local.get $pn))
    (i32.store (global.get $tTail) (local.get $r))
    (global.set $tTail (local.get $r)))

  ;; $cancel removes every earlier set of trigger tr and lists tr in
  ;; timers_cancel once, as Key.CancelTimer does.
  (func $cancel (param $tr i64)
    (local $r i32)
    (local.set $r (i32.load offset=40 (global.get $rec)))
    (block $done
      (loop $each
        (br_if $done (i32.eqz (local.get $r)))
        (if (i64.eq (i64.load offset=8 (local.get $r)) (local.get $tr))
          (then (i32.store offset=4 (local.get $r) (i32.const 1))))
        (local.set $r (i32.load (local.get $r)))
        (br $each)))
    (local.set $r (i32.load offset=44 (global.get $rec)))
    (block $done
      (loop $each
        (br_if $done (i32.eqz (local.get $r)))
        (if (i64.eq (i64.load offset=8 (local.get $r)) (local.get $tr)) (then (return)))
        (local.set $r (i32.load (local.get $r)))
        (br $each)))
    (local.set $r (call $alloc (i32.const 16)))
    (i64.store offset=8 (local.get $r) (local.get $tr))
    (i32.store (global.get $cTail) (local.get $r))
    (global.set $cTail (local.get $r)))

  ;; $parseInt parses the n bytes at p as strconv.ParseInt(s, 10, 64) does
  ;; into $num: 0 on success, 1 for a syntax error, 2 out of range.
  (func $parseInt (param $p i32) (param $n i32) (result i32)
    (local $neg i32)
    (local $c i32)
    (local $u i64)
    (local $next i64)
    (if (i32.eqz (local.get $n)) (then (return (i32.const 1))))
    (local.set $c (i32.load8_u (local.get $p)))
    (if (i32.or (i32.eq (local.get $c) (i32.const 43)) (i32.eq (local.get $c) (i32.const 45)))
      (then
        (local.set $neg (i32.eq (local.get $c) (i32.const 45)))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (if (i32.eqz (local.get $n)) (then (return (i32.const 1))))))
    (loop $digit
      (local.set $c (i32.sub (i32.load8_u (local.get $p)) (i32.const 48)))
      (if (i32.gt_u (local.get $c) (i32.const 9)) (then (return (i32.const 1))))
      ;; ParseUint's cutoff, maxUint64/10 + 1: the first digit that
      ;; overflows is a range error, whatever follows it.
      (if (i64.ge_u (local.get $u) (i64.const 1844674407370955162)) (then (return (i32.const 2))))
      (local.set $next (i64.add (i64.mul (local.get $u) (i64.const 10)) (i64.extend_i32_u (local.get $c))))
      (if (i64.lt_u (local.get $next) (i64.mul (local.get $u) (i64.const 10))) (then (return (i32.const 2))))
      (local.set $u (local.get $next))
      (local.set $p (i32.add (local.get $p) (i32.const 1)))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $digit (local.get $n)))
    (if (i32.and (i32.eqz (local.get $neg)) (i64.ge_u (local.get $u) (i64.const 0x8000000000000000)))
      (then (return (i32.const 2))))
    (if (i32.and (local.get $neg) (i64.gt_u (local.get $u) (i64.const 0x8000000000000000)))
      (then (return (i32.const 2))))
    (global.set $num (select (i64.sub (i64.const 0) (local.get $u)) (local.get $u) (local.get $neg)))
    (i32.const 0))

  ;; $number parses an argument into $num; a bad one fails the key with
  ;; the Go guest's text, bad command "<cmd>": strconv.ParseInt: ...
  (func $number (param $p i32) (param $n i32) (result i32)
    (local $why i32)
    (local $start i32)
    (local.set $why (call $parseInt (local.get $p) (local.get $n)))
    (if (i32.eqz (local.get $why)) (then (return (i32.const 1))))
    (if (i32.eqz (i32.load offset=60 (global.get $rec)))
      (then
        (local.set $start (global.get $w))
        (call $lit (i32.const 1))
        (call $quote (global.get $cmdP) (global.get $cmdL))
        (call $lit (i32.const 5))
        (call $quote (local.get $p) (local.get $n))
        (call $lit (i32.add (i32.const 5) (local.get $why)))
        (call $failKey (local.get $start))))
    (i32.const 0))

  ;; $badArity fails the key: bad command "<cmd>": <verb> takes <n> arguments.
  (func $badArity (param $vp i32) (param $vn i32) (param $n i32)
    (local $start i32)
    (if (i32.load offset=60 (global.get $rec)) (then (return)))
    (local.set $start (global.get $w))
    (call $lit (i32.const 1))
    (call $quote (global.get $cmdP) (global.get $cmdL))
    (call $lit (i32.const 2))
    (call $wcopy (local.get $vp) (local.get $vn))
    (call $lit (i32.const 3))
    (call $wdec (i64.extend_i32_u (local.get $n)))
    (call $lit (i32.const 4))
    (call $failKey (local.get $start)))

  ;; $verb returns the number of the verb named by the n bytes at p, or -1.
  (func $verb (param $p i32) (param $n i32) (result i32)
    (local $v i32)
    (local $slot i32)
    (block $none
      (loop $each
        (br_if $none (i32.ge_u (local.get $v) (i32.const 16)))
        (local.set $slot (i32.add (i32.const 512) (i32.shl (local.get $v) (i32.const 4))))
        (if (i32.and (i32.eq (i32.load8_u offset=1 (local.get $slot)) (local.get $n))
                     (call $memeq (i32.add (local.get $slot) (i32.const 2)) (local.get $p) (local.get $n)))
          (then (return (local.get $v))))
        (local.set $v (i32.add (local.get $v) (i32.const 1)))
        (br $each)))
    (i32.const -1))

  ;; $command runs the command in [p, e) of the message at input at.
  (func $command (param $p i32) (param $e i32) (param $at i32)
    (local $c i32)
    (local $v i32)
    (local $n i32)
    (local $x i32)
    (local $start i32)
    (local $tr i64)
    (global.set $cmdP (local.get $p))
    (global.set $cmdL (i32.sub (local.get $e) (local.get $p)))
    (local.set $c (call $colon (local.get $p) (local.get $e)))
    (local.set $v (call $verb (local.get $p) (i32.sub (local.get $c) (local.get $p))))
    (if (i32.lt_s (local.get $v) (i32.const 0))
      (then
        (if (i32.eqz (i32.load offset=60 (global.get $rec)))
          (then
            (local.set $start (global.get $w))
            (call $lit (i32.const 0))
            (call $wcopy (local.get $p) (i32.sub (local.get $c) (local.get $p)))
            (call $failKey (local.get $start))))
        (return)))
    ;; The arguments: strings.SplitN(rest, ":", n), exactly n of them.
    (local.set $n (i32.load8_u (i32.add (i32.const 512) (i32.shl (local.get $v) (i32.const 4)))))
    (if (local.get $n)
      (then
        (block $bad
          (br_if $bad (i32.ge_u (local.get $c) (local.get $e)))
          (global.set $a0p (i32.add (local.get $c) (i32.const 1)))
          (global.set $a0l (i32.sub (local.get $e) (global.get $a0p)))
          (if (i32.ge_u (local.get $n) (i32.const 2))
            (then
              (local.set $x (call $colon (global.get $a0p) (local.get $e)))
              (br_if $bad (i32.ge_u (local.get $x) (local.get $e)))
              (global.set $a0l (i32.sub (local.get $x) (global.get $a0p)))
              (global.set $a1p (i32.add (local.get $x) (i32.const 1)))
              (global.set $a1l (i32.sub (local.get $e) (global.get $a1p)))))
          (if (i32.eq (local.get $n) (i32.const 3))
            (then
              (local.set $x (call $colon (global.get $a1p) (local.get $e)))
              (br_if $bad (i32.ge_u (local.get $x) (local.get $e)))
              (global.set $a1l (i32.sub (local.get $x) (global.get $a1p)))
              (global.set $a2p (i32.add (local.get $x) (i32.const 1)))
              (global.set $a2l (i32.sub (local.get $e) (global.get $a2p)))))
          (br 1))
        (call $badArity (local.get $p) (i32.sub (local.get $c) (local.get $p)) (local.get $n))
        (return)))
    (block $failbatch (block $failkey (block $meta (block $param (block $cancelc (block $timerp (block $timer
    (block $showstate (block $delstate (block $append (block $statec (block $emitnone (block $emitall
    (block $emite (block $emitk (block $emitc
      (br_table $emitc $emitk $emite $emitall $emitnone $statec $append $delstate $showstate
                $timer $timerp $cancelc $param $meta $failkey $failbatch (local.get $v)))
      ;; emit:S:T
      (call $emit (global.get $a0p) (global.get $a0l) (i32.const 0) (i32.const 0) (global.get $a1p) (global.get $a1l)
        (i32.const 1) (local.get $at) (i32.const 0) (i64.const 0))
      (return))
      ;; emitk:S:K:T
      (call $emit (global.get $a0p) (global.get $a0l) (global.get $a1p) (global.get $a1l) (global.get $a2p) (global.get $a2l)
        (i32.const 1) (local.get $at) (i32.const 0) (i64.const 0))
      (return))
      ;; emite:S:E:T
      (if (call $number (global.get $a1p) (global.get $a1l))
        (then
          (call $emit (global.get $a0p) (global.get $a0l) (i32.const 0) (i32.const 0) (global.get $a2p) (global.get $a2l)
            (i32.const 1) (local.get $at) (i32.const 1) (global.get $num))))
      (return))
      ;; emitall:S:T
      (call $emit (global.get $a0p) (global.get $a0l) (i32.const 0) (i32.const 0) (global.get $a1p) (global.get $a1l)
        (i32.const 2) (i32.const 0) (i32.const 0) (i64.const 0))
      (return))
      ;; emitnone:S:T
      (call $emit (global.get $a0p) (global.get $a0l) (i32.const 0) (i32.const 0) (global.get $a1p) (global.get $a1l)
        (i32.const 0) (i32.const 0) (i32.const 0) (i64.const 0))
      (return))
      ;; state:T
      (if (call $transform) (then (call $setState (i32.const 1) (global.get $a0p) (global.get $a0l))))
      (return))
      ;; append: the old state, the message id and a comma.
      (if (call $transform)
        (then
          (local.set $start (global.get $w))
          (if (call $state) (then (call $wcopy (global.get $sptr) (global.get $slen))))
          (call $wcopy (global.get $mIdP) (global.get $mIdL))
          (call $wb (i32.const 44))
          (call $setState (i32.const 1) (local.get $start) (i32.sub (global.get $w) (local.get $start)))))
      (return))
      ;; delstate
      (if (call $transform) (then (call $setState (i32.const 2) (i32.const 0) (i32.const 0))))
      (return))
      ;; showstate
      (local.set $start (global.get $w))
      (call $lit (i32.const 10))
      (if (call $state)
        (then (call $wcopy (global.get $sptr) (global.get $slen)))
        (else (call $lit (i32.const 11))))
      (call $emitOut (local.get $start) (local.get $at))
      (return))
      ;; timer:TR
      (if (call $number (global.get $a0p) (global.get $a0l))
        (then
          (if (call $transform)
            (then (call $setTimer (global.get $num) (i32.const 0) (i64.const 0) (i32.const 0) (i32.const 0))))))
      (return))
      ;; timerp:TR:E:T
      (if (i32.eqz (call $number (global.get $a0p) (global.get $a0l))) (then (return)))
      (local.set $tr (global.get $num))
      (if (i32.eqz (call $number (global.get $a1p) (global.get $a1l))) (then (return)))
      (if (call $transform)
        (then (call $setTimer (local.get $tr) (i32.const 1) (global.get $num) (global.get $a2p) (global.get $a2l))))
      (return))
      ;; cancel:TR
      (if (call $number (global.get $a0p) (global.get $a0l))
        (then (if (call $transform) (then (call $cancel (global.get $num))))))
      (return))
      ;; param:N
      (local.set $start (global.get $w))
      (call $lit (i32.const 12))
      (call $wcopy (global.get $a0p) (global.get $a0l))
      (call $wb (i32.const 61)) ;; =
      (call $wparam (global.get $a0p) (global.get $a0l))
      (call $emitOut (local.get $start) (local.get $at))
      (return))
      ;; meta
      (local.set $start (global.get $w))
      (call $lit (i32.const 16))
      (call $wcopy (i32.load offset=0 (global.get $rec)) (i32.load offset=4 (global.get $rec)))
      (call $lit (i32.const 17))
      (call $wcopy (global.get $mStP) (global.get $mStL))
      (call $lit (i32.const 18))
      (call $wcopy (global.get $mIdP) (global.get $mIdL))
      (call $lit (i32.const 19))
      (call $wdecs (global.get $mEv))
      (call $lit (i32.const 20))
      (call $wdecs (global.get $mSys))
      (call $lit (i32.const 21))
      (call $wdecs (global.get $mAl))
      (call $lit (i32.const 22))
      (call $wdecs (global.get $wmEvent))
      (call $wb (i32.const 47)) ;; /
      (call $wdecs (global.get $wmSystem))
      (call $lit (i32.const 23))
      (call $wdec (global.get $partition))
      (call $lit (i32.const 24))
      (call $wdec (global.get $epoch))
      (call $lit (i32.const 25))
      (call $wcopy (global.get $compP) (global.get $compL))
      (call $lit (i32.const 26))
      (call $lit (select (i32.const 28) (i32.const 27) (global.get $isMap)))
      (call $emitOut (local.get $start) (local.get $at))
      (return))
      ;; failkey:T
      (local.set $start (global.get $w))
      (call $wcopy (global.get $a0p) (global.get $a0l))
      (call $failKey (local.get $start))
      (return))
    ;; failbatch:T ends the batch at once.
    (global.set $stop (i32.const 1))
    (global.set $bErrP (global.get $a0p))
    (global.set $bErrL (global.get $a0l)))

  ;; $runMessage runs the message in the $m globals, input at: an echo, or
  ;; the commands after "!", split at every ";".
  (func $runMessage (param $at i32)
    (local $p i32)
    (local $e i32)
    (local $c i32)
    (if (i32.or (i32.eqz (global.get $mPL)) (i32.ne (i32.load8_u (global.get $mPP)) (i32.const 33)))
      (then
        (call $emit (i32.const 3777) (i32.const 3) (i32.const 0) (i32.const 0) (global.get $mPP) (global.get $mPL)
          (i32.const 1) (local.get $at) (i32.const 0) (i64.const 0))
        (return)))
    (local.set $p (i32.add (global.get $mPP) (i32.const 1)))
    (local.set $e (i32.add (global.get $mPP) (global.get $mPL)))
    (loop $each
      (local.set $c (local.get $p))
      (block $found
        (loop $byte
          (br_if $found (i32.ge_u (local.get $c) (local.get $e)))
          (br_if $found (i32.eq (i32.load8_u (local.get $c)) (i32.const 59)))
          (local.set $c (i32.add (local.get $c) (i32.const 1)))
          (br $byte)))
      (call $command (local.get $p) (local.get $c) (local.get $at))
      (if (global.get $stop) (then (return)))
      (local.set $p (i32.add (local.get $c) (i32.const 1)))
      (br_if $each (i32.lt_u (local.get $c) (local.get $e)))))

  ;; $runKey runs the key of record r: its due timers, then its messages.
  (func $runKey (param $r i32)
    (local $i i32)
    (local $n i32)
    (local $pos i32)
    (local $start i32)
    (global.set $rec (local.get $r))
    (global.set $eTail (i32.add (local.get $r) (i32.const 36)))
    (global.set $tTail (i32.add (local.get $r) (i32.const 40)))
    (global.set $cTail (i32.add (local.get $r) (i32.const 44)))
    (local.set $n (i32.load offset=24 (local.get $r)))
    (global.set $ninputs (i32.add (local.get $n) (i32.load offset=32 (local.get $r))))
    (global.set $pos (i32.load offset=20 (local.get $r)))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $timer)
        (local.set $start (global.get $w))
        (call $lit (i32.const 9))
        (call $wdecs (global.get $tTr))
        (call $wb (i32.const 58)) ;; :
        (call $wcopy (global.get $tPP) (global.get $tPL))
        (call $emitOut (local.get $start) (local.get $i))
        (if (global.get $stop) (then (return)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (local.set $n (i32.load offset=32 (local.get $r)))
    (global.set $pos (i32.load offset=28 (local.get $r)))
    (local.set $i (i32.const 0))
    (block $done
      (loop $each
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (call $message)
        (local.set $pos (global.get $pos))
        (call $runMessage (i32.add (i32.load offset=24 (local.get $r)) (local.get $i)))
        (if (global.get $stop) (then (return)))
        (global.set $pos (local.get $pos))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each))))

  ;; ---- the response ---------------------------------------------------

  ;; $live returns the number of timer sets of record r not cancelled.
  (func $live (param $r i32) (result i32)
    (local $n i32)
    (local.set $r (i32.load offset=40 (local.get $r)))
    (block $done
      (loop $each
        (br_if $done (i32.eqz (local.get $r)))
        (if (i32.eqz (i32.load offset=4 (local.get $r))) (then (local.set $n (i32.add (local.get $n) (i32.const 1)))))
        (local.set $r (i32.load (local.get $r)))
        (br $each)))
    (local.get $n))

  ;; $length returns the length of the list starting at r.
  (func $length (param $r i32) (result i32)
    (local $n i32)
    (block $done
      (loop $each
        (br_if $done (i32.eqz (local.get $r)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (local.set $r (i32.load (local.get $r)))
        (br $each)))
    (local.get $n))

  ;; $reported says whether key record r has an entry: an error, emits,
  ;; timers or a state change.
  (func $reported (param $r i32) (result i32)
    (i32.or
      (i32.or (i32.load offset=60 (local.get $r)) (i32.ne (i32.load offset=36 (local.get $r)) (i32.const 0)))
      (i32.or
        (i32.or (i32.ne (call $live (local.get $r)) (i32.const 0)) (i32.ne (i32.load offset=44 (local.get $r)) (i32.const 0)))
        (i32.ne (i32.load offset=48 (local.get $r)) (i32.const 0)))))

  ;; $wemit writes emit record e: key, stream, parents, payload, event_ts.
  (func $wemit (param $e i32)
    (local $mode i32)
    (local $i i32)
    (local.set $mode (i32.load offset=28 (local.get $e)))
    (call $whead (i32.const 5) (i64.extend_i32_u (i32.add (i32.const 2)
      (i32.add (i32.add (i32.ne (i32.load offset=16 (local.get $e)) (i32.const 0))
                        (i32.ne (local.get $mode) (i32.const 0)))
               (i32.load offset=36 (local.get $e))))))
    (if (i32.load offset=16 (local.get $e))
      (then
        (call $wname (i32.const 31))
        (call $wvalid (i32.load offset=12 (local.get $e)) (i32.load offset=16 (local.get $e)))))
    (call $wname (i32.const 37))
    (call $wstr (i32.const 3) (i32.load offset=4 (local.get $e)) (i32.load offset=8 (local.get $e)))
    (if (i32.eq (local.get $mode) (i32.const 1))
      (then
        (call $wname (i32.const 38))
        (call $wb (i32.const 0x81))
        (call $whead (i32.const 0) (i64.extend_i32_u (i32.load offset=32 (local.get $e))))))
    (if (i32.eq (local.get $mode) (i32.const 2))
      (then
        (call $wname (i32.const 38))
        (call $whead (i32.const 4) (i64.extend_i32_u (global.get $ninputs)))
        (block $done
          (loop $each
            (br_if $done (i32.ge_u (local.get $i) (global.get $ninputs)))
            (call $whead (i32.const 0) (i64.extend_i32_u (local.get $i)))
            (local.set $i (i32.add (local.get $i) (i32.const 1)))
            (br $each)))))
    (call $wname (i32.const 39))
    (call $wstr (i32.const 2) (i32.load offset=20 (local.get $e)) (i32.load offset=24 (local.get $e)))
    (if (i32.load offset=36 (local.get $e))
      (then
        (call $wname (i32.const 40))
        (call $wint (i64.load offset=40 (local.get $e))))))

  ;; $wtimer writes timer record t: payload (left out when empty),
  ;; event_ts (when given), trigger_ts.
  (func $wtimer (param $t i32)
    (local $pn i32)
    (local.set $pn (i32.load offset=36 (local.get $t)))
    (call $whead (i32.const 5) (i64.extend_i32_u (i32.add (i32.const 1)
      (i32.add (i32.ne (local.get $pn) (i32.const 0)) (i32.load offset=16 (local.get $t))))))
    (if (local.get $pn)
      (then
        (call $wname (i32.const 39))
        (call $wstr (i32.const 2) (i32.load offset=32 (local.get $t)) (local.get $pn))))
    (if (i32.load offset=16 (local.get $t))
      (then
        (call $wname (i32.const 40))
        (call $wint (i64.load offset=24 (local.get $t)))))
    (call $wname (i32.const 41))
    (call $wint (i64.load offset=8 (local.get $t))))

  ;; $wentry writes the response entry of key record r, fields in
  ;; canonical order: key, emits, error, state, state_op, timers_set,
  ;; timers_cancel. A failed key has only key and error.
  (func $wentry (param $r i32)
    (local $op i32)
    (local $live i32)
    (local $p i32)
    (if (i32.load offset=60 (local.get $r))
      (then
        (call $wb (i32.const 0xa2))
        (call $wname (i32.const 31))
        (call $wstr (i32.const 3) (i32.load offset=0 (local.get $r)) (i32.load offset=4 (local.get $r)))
        (call $wname (i32.const 30))
        (call $werror (i32.load offset=64 (local.get $r)) (i32.load offset=68 (local.get $r)))
        (return)))
    (global.set $ninputs (i32.add (i32.load offset=24 (local.get $r)) (i32.load offset=32 (local.get $r))))
    (local.set $op (i32.load offset=48 (local.get $r)))
    (local.set $live (call $live (local.get $r)))
    (call $whead (i32.const 5) (i64.extend_i32_u
      (i32.add (i32.const 1)
        (i32.add
          (i32.add (i32.ne (i32.load offset=36 (local.get $r)) (i32.const 0)) (i32.eq (local.get $op) (i32.const 1)))
          (i32.add (i32.ne (local.get $op) (i32.const 0))
            (i32.add (i32.ne (local.get $live) (i32.const 0)) (i32.ne (i32.load offset=44 (local.get $r)) (i32.const 0))))))))
    (call $wname (i32.const 31))
    (call $wstr (i32.const 3) (i32.load offset=0 (local.get $r)) (i32.load offset=4 (local.get $r)))
    (local.set $p (i32.load offset=36 (local.get $r)))
    (if (local.get $p)
      (then
        (call $wname (i32.const 32))
        (call $whead (i32.const 4) (i64.extend_i32_u (call $length (local.get $p))))
        (block $done
          (loop $each
            (br_if $done (i32.eqz (local.get $p)))
            (call $wemit (local.get $p))
            (local.set $p (i32.load (local.get $p)))
            (br $each)))))
    (if (i32.eq (local.get $op) (i32.const 1))
      (then
        (call $wname (i32.const 33))
        (call $wstr (i32.const 2) (i32.load offset=52 (local.get $r)) (i32.load offset=56 (local.get $r)))))
    (if (local.get $op)
      (then
        (call $wname (i32.const 34))
        (call $whead (i32.const 0) (i64.extend_i32_u (local.get $op)))))
    (if (local.get $live)
      (then
        (call $wname (i32.const 35))
        (call $whead (i32.const 4) (i64.extend_i32_u (local.get $live)))
        (local.set $p (i32.load offset=40 (local.get $r)))
        (block $done
          (loop $each
            (br_if $done (i32.eqz (local.get $p)))
            (if (i32.eqz (i32.load offset=4 (local.get $p))) (then (call $wtimer (local.get $p))))
            (local.set $p (i32.load (local.get $p)))
            (br $each)))))
    (local.set $p (i32.load offset=44 (local.get $r)))
    (if (local.get $p)
      (then
        (call $wname (i32.const 36))
        (call $whead (i32.const 4) (i64.extend_i32_u (call $length (local.get $p))))
        (block $done
          (loop $each
            (br_if $done (i32.eqz (local.get $p)))
            (call $wint (i64.load offset=8 (local.get $p)))
            (local.set $p (i32.load (local.get $p)))
            (br $each))))))

  ;; $packed returns the region from start to $w as ptr << 32 | len.
  (func $packed (param $start i32) (result i64)
    (i64.or
      (i64.shl (i64.extend_i32_u (local.get $start)) (i64.const 32))
      (i64.extend_i32_u (i32.sub (global.get $w) (local.get $start)))))

  ;; ---- the exports ----------------------------------------------------

  ;; flowhost_init(ptr, len) keeps the Init envelope for param: and the
  ;; declared streams, and refuses to start when the parameter fail_init
  ;; is a text: an InitResult whose error is that text.
  (func (export "flowhost_init") (param $ptr i32) (param $len i32) (result i64)
    (local $n i32)
    (local $slot i32)
    (local $start i32)
    (local $pos i32)
    (if (i32.ne (local.get $ptr) (global.get $base)) (then (return (i64.const -1))))
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len)))))
      (then (return (i64.const -1))))
    (global.set $started (i32.const 0))
    (global.set $pos (local.get $ptr))
    (global.set $end (i32.add (local.get $ptr) (local.get $len)))
    (global.set $err (i32.const 0))
    (global.set $version (i64.const 1))
    (global.set $nparams (i32.const 0))
    (global.set $hasOuts (i32.const 0))
    (local.set $n (call $count (i32.const 5)))
    (block $done
      (loop $pair
        (br_if $done (i32.or (i32.eqz (local.get $n)) (global.get $err)))
        (call $string (i32.const 3))
        (local.set $slot (i32.const -1))
        (if (call $is (i32.const 0)) (then (local.set $slot (i32.const 0))))
        (if (call $is (i32.const 22)) (then (local.set $slot (i32.const 22))))
        (if (call $is (i32.const 23)) (then (local.set $slot (i32.const 23))))
        (if (i32.eqz (local.get $slot))
          (then (call $uint) (global.set $version (global.get $arg))))
        (if (i32.eq (local.get $slot) (i32.const 22))
          (then
            (global.set $nparams (call $count (i32.const 5)))
            (global.set $paramsPos (global.get $pos))
            (local.set $pos (global.get $nparams))
            (block $end
              (loop $each
                (br_if $end (i32.or (i32.eqz (local.get $pos)) (global.get $err)))
                (call $string (i32.const 3))
                (call $skip)
                (local.set $pos (i32.sub (local.get $pos) (i32.const 1)))
                (br $each)))))
        (if (i32.eq (local.get $slot) (i32.const 23))
          (then
            (global.set $hasOuts (i32.const 1))
            (global.set $nouts (call $count (i32.const 4)))
            (global.set $outsPos (global.get $pos))
            (local.set $pos (global.get $nouts))
            (block $end
              (loop $each
                (br_if $end (i32.or (i32.eqz (local.get $pos)) (global.get $err)))
                (call $string (i32.const 3))
                (local.set $pos (i32.sub (local.get $pos) (i32.const 1)))
                (br $each)))))
        (if (i32.lt_s (local.get $slot) (i32.const 0)) (then (call $skip)))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (global.get $pos) (global.get $end)) (then (call $fail (i32.const -1))))
    (if (i64.ne (global.get $version) (i64.const 1)) (then (return (i64.const -3))))
    (if (global.get $err) (then (return (i64.const -1))))
    ;; Requests go after the envelope, which stays for the instance's life.
    (global.set $initEnd (global.get $end))
    (global.set $base (i32.and (i32.add (global.get $end) (i32.const 15)) (i32.const -16)))
    (global.set $w (global.get $base))
    (if (call $findParam (i32.const 3713) (i32.const 9))
      (then
        (if (i32.eq (i32.shr_u (i32.load8_u (global.get $pos)) (i32.const 5)) (i32.const 3))
          (then
            (call $string (i32.const 3))
            (local.set $start (global.get $w))
            (call $wb (i32.const 0xa1))
            (call $wname (i32.const 30))
            (call $werror (global.get $sptr) (global.get $slen))
            (return (call $packed (local.get $start)))))))
    (global.set $started (i32.const 1))
    (i64.const 0))

  ;; flowhost_process(ptr, len) -> the packed response or a status.
  (func (export "flowhost_process") (param $ptr i32) (param $len i32) (result i64)
    (local $n i32)
    (local $seen i32)
    (local $slot i32)
    (local $k i32)
    (local $i i32)
    (local $start i32)
    (if (i32.eqz (global.get $started)) (then (return (i64.const -2))))
    ;; The host passes exactly the region flowhost_alloc handed out.
    (if (i32.ne (local.get $ptr) (global.get $base)) (then (return (i64.const -1))))
    (if (i32.eqz (call $fit (i64.add (i64.extend_i32_u (local.get $ptr)) (i64.extend_i32_u (local.get $len)))))
      (then (return (i64.const -1))))
    (global.set $pos (local.get $ptr))
    (global.set $end (i32.add (local.get $ptr) (local.get $len)))
    (global.set $reqEnd (global.get $end))
    (global.set $err (i32.const 0))
    (global.set $version (i64.const 1))
    (global.set $stop (i32.const 0))
    (global.set $nkeys (i32.const 0))
    (global.set $isMap (i32.const 0))
    (global.set $w (global.get $end))

    ;; First pass: decode and validate everything, a record per key.
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
                (global.set $nkeys (local.get $k))
                ;; 80 bytes a record must not wrap around: that many keys
                ;; would not fit in memory anyway.
                (if (i32.gt_u (local.get $k) (i32.const 0x2000000)) (then (unreachable)))
                (global.set $keysBase (call $alloc (i32.mul (local.get $k) (i32.const 80))))
                (local.set $i (i32.const 0))
                (block $end
                  (loop $each
                    (br_if $end (i32.or (i32.ge_u (local.get $i) (local.get $k)) (global.get $err)))
                    (call $key (i32.add (global.get $keysBase) (i32.mul (local.get $i) (i32.const 80))))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br $each)))))
            (if (i32.eq (local.get $slot) (i32.const 2)) (then (call $kind)))
            (if (i32.eq (local.get $slot) (i32.const 3)) (then (call $uint) (global.set $epoch (global.get $arg))))
            (if (i32.eq (local.get $slot) (i32.const 4)) (then (call $uint) (global.set $partition (global.get $arg))))
            (if (i32.eq (local.get $slot) (i32.const 5)) (then (call $watermarks)))
            (if (i32.eq (local.get $slot) (i32.const 6))
              (then
                (call $string (i32.const 3))
                (global.set $compP (global.get $sptr))
                (global.set $compL (global.get $slen))))))
        (local.set $n (i32.sub (local.get $n) (i32.const 1)))
        (br $pair)))
    (if (i32.ne (global.get $pos) (global.get $end)) (then (call $fail (i32.const -1))))
    (if (i32.ne (local.get $seen) (i32.const 0x7f)) (then (call $fail (i32.const -1))))
    ;; An envelope of another version is reported as such even when the
    ;; rest of it does not decode as version 1.
    (if (i64.ne (global.get $version) (i64.const 1)) (then (return (i64.const -3))))
    (if (global.get $err) (then (return (i64.extend_i32_s (global.get $err)))))

    ;; Second pass: run every key, until a failbatch or a guest failure.
    (local.set $i (i32.const 0))
    (block $end
      (loop $each
        (br_if $end (i32.or (i32.ge_u (local.get $i) (global.get $nkeys)) (global.get $stop)))
        (call $runKey (i32.add (global.get $keysBase) (i32.mul (local.get $i) (i32.const 80))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (if (i32.eq (global.get $stop) (i32.const 2)) (then (return (i64.const -2))))

    (local.set $start (global.get $w))
    (if (i32.eq (global.get $stop) (i32.const 1))
      (then
        ;; {"keys": [], "error": text}
        (call $wb (i32.const 0xa2))
        (call $wname (i32.const 29))
        (call $wb (i32.const 0x80))
        (call $wname (i32.const 30))
        (call $werror (global.get $bErrP) (global.get $bErrL))
        (return (call $packed (local.get $start)))))
    (local.set $k (i32.const 0))
    (local.set $i (i32.const 0))
    (block $end
      (loop $each
        (br_if $end (i32.ge_u (local.get $i) (global.get $nkeys)))
        (local.set $k (i32.add (local.get $k)
          (call $reported (i32.add (global.get $keysBase) (i32.mul (local.get $i) (i32.const 80))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (call $wb (i32.const 0xa1))
    (call $wname (i32.const 29))
    (call $whead (i32.const 4) (i64.extend_i32_u (local.get $k)))
    (local.set $i (i32.const 0))
    (block $end
      (loop $each
        (br_if $end (i32.ge_u (local.get $i) (global.get $nkeys)))
        (local.set $n (i32.add (global.get $keysBase) (i32.mul (local.get $i) (i32.const 80))))
        (if (call $reported (local.get $n)) (then (call $wentry (local.get $n))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $each)))
    (call $packed (local.get $start)))
)
