// Package spec parses, defaults and validates flowhost pipeline specs.
//
// A spec is a YAML (or JSON) document naming a pipeline's sources,
// computations, sinks and the streams that join them, in the model of
// YTsaurus Flow. [Parse] and [ParseFile] turn one into a [Pipeline]: plain
// structs with every default filled in (Flow's defaults where Flow has one)
// and every rule checked, so that the runtime can trust what it gets: names
// are unique, every stream has exactly one writer, nothing reads a stream
// nobody writes, the computation graph has no cycle.
//
// Every problem is reported with its place: an [ErrorList] of [*Error], each
// carrying the file, line, column, field path and a message saying what was
// expected, for example
//
//	pipeline.yaml:12:11: computations[1].kind: expected one of transform, map; got "transfrom"
//
// [FormatError] adds the lines of the spec around each error for a terminal.
//
// The format is documented field by field in README.md beside this file.
package spec
