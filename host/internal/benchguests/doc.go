// Package benchguests holds the identity benchmark guest written with each
// non-Go guest SDK: rust/ (a crate on sdk/rust), c/ (main.c on sdk/c) and
// assemblyscript/ (index.ts on sdk/assemblyscript). Each emits every
// message of a batch unchanged on stream "out", with the message as its
// only parent, like the Go SDK's host/internal/testguests/identity, so that
// package host's BenchmarkIdentityLanguages compares the languages on the
// same work through the same host path. The Go tests there build them with
// the SDKs' Build functions; the directory holds sources only.
package benchguests
