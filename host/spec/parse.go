package spec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// ParseFile reads, parses, defaults and validates the pipeline spec in the
// file at path. Relative file paths in the spec are resolved against the
// directory of path. A file that cannot be read yields the *fs.PathError;
// any problem of the spec itself yields an ErrorList, as from Parse.
func ParseFile(path string) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, data)
}

// Parse parses, defaults and validates a pipeline spec in YAML (JSON is YAML
// too). name is the spec's file name: errors carry it, and relative file paths
// in the spec are resolved against its directory, made absolute.
//
// On failure the error is an ErrorList of every problem found, each a *Error
// with its position, in file order. Problems of form (syntax, unknown fields,
// values of the wrong type or out of their set) are reported first; only a
// spec free of them is checked for problems of meaning (references, writers,
// cycles, limits), so that no error is a consequence of another.
func Parse(name string, data []byte) (*Pipeline, error) {
	f, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, ErrorList{syntaxError(name, err)}
	}
	d := newDecoder(name)
	var body ast.Node
	for i, doc := range f.Docs {
		if doc == nil || doc.Body == nil {
			continue
		}
		if body != nil {
			d.errorf(doc.Body, "", "expected a single YAML document; document %d is another", i+1)
			break
		}
		body = doc.Body
	}
	if body == nil || body.Type() == ast.NullType {
		d.errorf(body, "", "the spec is empty; expected a mapping with name, sources, computations and sinks")
		return nil, d.errs
	}

	p := &Pipeline{File: name}
	p.setDefaults()
	d.record("", nodeToken(body))
	d.decode(body, "", reflect.ValueOf(p).Elem(), false)
	p.src = d.src
	if len(d.errs) > 0 {
		sortErrors(d.errs)
		return nil, d.errs
	}
	if errs := validate(p); len(errs) > 0 {
		sortErrors(errs)
		return nil, errs
	}
	p.complete(baseDir(name))
	return p, nil
}

// syntaxError converts an error of goccy's parser.
func syntaxError(name string, err error) *Error {
	var ye yaml.Error
	if errors.As(err, &ye) {
		return newError(name, ye.GetToken(), "", ye.GetMessage())
	}
	return newError(name, nil, "", err.Error())
}

func baseDir(name string) string {
	dir := filepath.Dir(name)
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}

// complete fills in what the runtime should not have to default itself: the
// settings of a generator written without them, the dead-letter file, the
// host of a listen address, and absolute file paths.
func (p *Pipeline) complete(dir string) {
	resolve := func(path *string) {
		if !filepath.IsAbs(*path) {
			*path = filepath.Join(dir, *path)
		}
	}
	for i := range p.Sources {
		s := &p.Sources[i]
		if s.Type == SourceGenerator && s.Generator == nil {
			s.Generator = &GeneratorSource{}
			s.Generator.setDefaults()
		}
		if s.Format == "" {
			s.Format = DefaultSourceFormat(s.Type)
		}
		if s.EventTime == nil && s.Kafka != nil {
			s.EventTime = s.Kafka.EventTime // one place for the runtime to look
		}
		if s.File != nil {
			resolve(&s.File.Path)
		}
		s.HTTP.complete(resolve)
		if s.Kafka != nil {
			completeKafka(s.Kafka.TLS, s.Kafka.SASL, resolve)
		}
	}
	for i := range p.Tenants {
		for j := range p.Tenants[i].PluginDirs {
			resolve(&p.Tenants[i].PluginDirs[j])
		}
	}
	for i := range p.Sinks {
		if f := p.Sinks[i].File; f != nil {
			resolve(&f.Path)
		}
		p.Sinks[i].HTTP.complete(resolve)
		if k := p.Sinks[i].Kafka; k != nil {
			completeKafka(k.TLS, k.SASL, resolve)
		}
	}
	if p.DeadLetter.Type == DeadLetterFile {
		if p.DeadLetter.File == nil {
			p.DeadLetter.File = &FileSink{Path: DefaultDeadLetterFile}
		}
		resolve(&p.DeadLetter.File.Path)
	}
}
