// Package plugins finds, parses and checks flowhost plugin directories.
//
// A plugin directory holds a manifest named plugin.yaml and the WebAssembly
// module it names. [ParseManifest] turns a manifest into a [Manifest] and
// reports every problem with its file, line, column and field. [Discover]
// walks the directories given on the command line and builds a [Catalog];
// [Validate] and [Plugin.ReadWasm] check everything that can be checked
// without a WebAssembly engine: the manifest, the files it names, the
// checksum and the module header. The host compiles the module and checks
// its exports and imports against package abi; this package knows no engine.
//
// See README.md in this directory for the manifest reference and the
// directory layout.
package plugins
