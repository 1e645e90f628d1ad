// Package scaffold creates computation projects: what `flowhost new`
// writes. A project holds a keyed transform that counts the messages of
// each key and emits {"key":...,"count":N} for every message, written with
// one of the guest SDKs, plus everything to build, run and test it:
//
//	plugin.template.yaml  the manifest without wasm and sha256
//	build.sh              builds the module into plugin/ with its manifest
//	sample.jsonl          file-source records keyed by payload field "key"
//	pipeline.yaml         sample.jsonl -> the computation -> out.jsonl
//	expected.jsonl        the outputs the pipeline should give (flowhost test's format)
//	test.sh               build.sh, then flowhost test against expected.jsonl
//	README.md             what the project is and how to use it
//
// The templates are embedded, so a flowhost binary creates projects
// anywhere. The Go, Rust and AssemblyScript projects take their SDK from a
// flowhost checkout (Config.FlowhostRoot), whose absolute path they record;
// a C project gets a copy of the C SDK's sources and needs no checkout.
package scaffold

import (
	"bufio"
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"

	csdk "github.com/flowhost/flowhost/sdk/c"
)

//go:embed all:templates
var templates embed.FS

// ModulePath is the module path of the flowhost checkout a project's SDK
// comes from.
const ModulePath = "github.com/flowhost/flowhost"

// language is one language a project can be written in.
type language struct {
	name    string // the --lang value and the template directory
	display string // for people
	// sdkDir is the SDK's directory in the checkout; "" when the project
	// needs no checkout.
	sdkDir string
}

// languages are in the order Languages reports them.
var languages = []language{
	{name: "go", display: "Go", sdkDir: "sdk/go"},
	{name: "rust", display: "Rust", sdkDir: "sdk/rust"},
	{name: "c", display: "C"},
	{name: "assemblyscript", display: "AssemblyScript", sdkDir: "sdk/assemblyscript"},
}

// Languages returns the languages a project can be written in, as Create
// takes them.
func Languages() []string {
	names := make([]string, len(languages))
	for i, l := range languages {
		names[i] = l.name
	}
	return names
}

func lookup(lang string) (language, error) {
	for _, l := range languages {
		if l.name == lang {
			return l, nil
		}
	}
	names := Languages()
	return language{}, fmt.Errorf("unknown language %q; use %s or %s",
		lang, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

// nameRE is what a project name may be: it becomes the plugin's name, a Go
// module path, a Rust package name (with '-' as '_' its library name) and
// file names, and must be all of these in every language.
var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// CheckName returns an error saying what is wrong with a project name, or
// nil when it is one.
func CheckName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("project name %q is invalid: use 1 to 64 lowercase letters, digits, '-' and '_', starting with a letter", name)
	}
	return nil
}

// Config says what project to create.
type Config struct {
	// Lang is one of Languages.
	Lang string
	// Name is the project's name, which is also the plugin's (CheckName).
	Name string
	// Dir is the directory to create the project in: a new or empty
	// directory. Empty means Name, relative to the current directory.
	Dir string
	// FlowhostRoot is the flowhost checkout (the directory of its go.mod)
	// whose SDK the project uses. Empty means FindRoot's.
	FlowhostRoot string
	// RustOffline makes a Rust project build with Debian's cargo and
	// rustc, offline, with crates only from Debian's packaged sources: it
	// gets a .cargo/config.toml that says so, which build.sh follows.
	// Without it the project builds with the user's own cargo (rustup's
	// or Debian's) and crates.io.
	RustOffline bool
}

// Create creates a project in lang named name in dir, with the checkout
// FindRoot finds. It is Generate with a Config of those fields.
func Create(lang, name, dir string) error {
	return Generate(Config{Lang: lang, Name: name, Dir: dir})
}

// Generate creates the project cfg describes. It checks everything before
// writing anything; if writing fails, it removes what it wrote (and the
// directory, when it created it).
func Generate(cfg Config) error {
	lang, err := lookup(cfg.Lang)
	if err != nil {
		return err
	}
	if err := CheckName(cfg.Name); err != nil {
		return err
	}
	dir := cfg.Dir
	if dir == "" {
		dir = cfg.Name
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	exists, err := checkDir(dir)
	if err != nil {
		return err
	}
	vars := map[string]string{
		"NAME":     cfg.Name,
		"CRATE":    strings.ReplaceAll(cfg.Name, "-", "_"),
		"LANG":     lang.name,
		"LANGNAME": lang.display,
	}
	if cfg.RustOffline {
		vars["RUSTOFFLINE"] = "1"
	}
	if lang.sdkDir != "" {
		root := cfg.FlowhostRoot
		if root == "" {
			if root, err = FindRoot(); err != nil {
				return err
			}
		}
		if root, err = checkRoot(root, lang); err != nil {
			return err
		}
		vars["ROOT"] = root
		if vars["GOVERSION"], err = goVersion(root); err != nil {
			return err
		}
		if vars["REQUIRES"], err = goRequires(root); err != nil {
			return err
		}
	}
	if !exists {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := write(dir, lang, vars); err != nil {
		if !exists {
			_ = os.RemoveAll(dir)
		} else {
			removeContents(dir)
		}
		return fmt.Errorf("creating the project in %s: %w", dir, err)
	}
	return nil
}

// checkDir checks that dir is an empty directory or does not exist, and
// reports whether it exists.
func checkDir(dir string) (exists bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case !fi.IsDir():
		return false, fmt.Errorf("%s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	if len(entries) > 0 {
		return false, fmt.Errorf("directory %s already exists and is not empty (it holds %s)", dir, entries[0].Name())
	}
	return true, nil
}

// removeContents empties a directory that was empty before Generate wrote to it.
func removeContents(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}

// write writes the common and the language's templates into dir. A
// template file X.tmpl becomes X (gitignore.tmpl becomes .gitignore) with
// every @@VAR@@ replaced; a language's *.part files are fragments that
// fill the common templates' @@COMPILE@@, @@LANGREADME@@, @@FILES@@ and
// @@IGNORE@@.
func write(dir string, lang language, vars map[string]string) error {
	// Fragments hold variables of their own: they go in first.
	var fragments []string
	for file, v := range map[string]string{"compile": "COMPILE", "readme": "LANGREADME", "files": "FILES", "ignore": "IGNORE"} {
		b, err := templates.ReadFile(path.Join("templates", lang.name, file+".part"))
		if err != nil {
			return err
		}
		text := strings.TrimRight(string(b), "\n")
		if v == "FILES" {
			text += "\n" // a table row, followed by the common rows
		}
		fragments = append(fragments, "@@"+v+"@@", text)
	}
	var plain []string
	for k, v := range vars {
		plain = append(plain, "@@"+k+"@@", v)
	}
	first, second := strings.NewReplacer(fragments...), strings.NewReplacer(plain...)
	for _, base := range []string{"templates/common", "templates/" + lang.name} {
		err := fs.WalkDir(templates, base, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".tmpl") {
				return err
			}
			rel := strings.TrimSuffix(strings.TrimPrefix(p, base+"/"), ".tmpl")
			if rel == "gitignore" {
				rel = ".gitignore"
			}
			if rel == ".cargo/config.toml" && vars["RUSTOFFLINE"] == "" {
				return nil // the user's own cargo and its registry
			}
			b, err := templates.ReadFile(p)
			if err != nil {
				return err
			}
			text := second.Replace(first.Replace(string(b)))
			if rel == "go.mod" {
				// go.mod quotes a path with spaces.
				text = strings.Replace(text, "=> "+vars["ROOT"], "=> "+goModPath(vars["ROOT"]), 1)
			}
			if strings.Contains(text, "@@") {
				return fmt.Errorf("template %s: unreplaced variable", p)
			}
			mode := os.FileMode(0o644)
			if strings.HasSuffix(rel, ".sh") {
				mode = 0o755
			}
			target := filepath.Join(dir, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			return os.WriteFile(target, []byte(text), mode)
		})
		if err != nil {
			return err
		}
	}
	switch lang.name {
	case "go":
		// go build needs the checksums of the SDK's dependencies; the
		// checkout's go.sum has them.
		sum, err := os.ReadFile(filepath.Join(vars["ROOT"], "go.sum"))
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644)
	case "c":
		sdk := filepath.Join(dir, "sdk")
		if err := os.MkdirAll(sdk, 0o755); err != nil {
			return err
		}
		return csdk.WriteSDK(sdk)
	}
	return nil
}

func goModPath(p string) string {
	if strings.ContainsAny(p, " \t") {
		return strconv.Quote(p)
	}
	return p
}

// checkRoot makes root absolute and checks that it is a flowhost checkout
// with lang's SDK, and that it can be written into the project's files
// (shell, TOML and go.mod strings) as it is.
func checkRoot(root string, lang language) (string, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return "", err
	}
	if strings.ContainsAny(abs, "'\"\\\n\r\t$`") {
		return "", fmt.Errorf("flowhost checkout %q: the path may not contain quotes, backslashes, '$', '`' or control characters, since the project's files record it", abs)
	}
	if mod, err := modulePath(filepath.Join(abs, "go.mod")); err != nil || mod != ModulePath {
		return "", fmt.Errorf("%s is not a flowhost checkout (no go.mod of module %s there); pass the checkout's directory with --flowhost", abs, ModulePath)
	}
	if fi, err := os.Stat(filepath.Join(abs, lang.sdkDir)); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("the flowhost checkout %s has no %s SDK (%s)", abs, lang.display, filepath.Join(abs, lang.sdkDir))
	}
	return abs, nil
}

// FindRoot returns the flowhost checkout to take SDKs from: the module
// root of ModulePath at or above the current directory, else the checkout
// this binary was built from (the source path compiled into it, which
// -trimpath builds do not have), if it still exists.
func FindRoot() (string, error) {
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			if mod, err := modulePath(filepath.Join(dir, "go.mod")); err == nil {
				if mod == ModulePath {
					return dir, nil
				}
				break // another module: the flowhost checkout is not above it
			}
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	if _, self, _, ok := runtime.Caller(0); ok && filepath.IsAbs(self) {
		dir := filepath.Dir(filepath.Dir(filepath.Dir(self))) // host/scaffold/scaffold.go
		if mod, err := modulePath(filepath.Join(dir, "go.mod")); err == nil && mod == ModulePath {
			return dir, nil
		}
	}
	return "", fmt.Errorf("cannot find a flowhost checkout (a go.mod of module %s) at or above the current directory, nor where this flowhost was built; pass its directory with --flowhost", ModulePath)
}

// modulePath returns the module path a go.mod declares.
func modulePath(gomod string) (string, error) {
	return goModDirective(gomod, "module")
}

// goVersion returns the go directive of the checkout's go.mod: the
// project's go.mod needs at least that version.
func goVersion(root string) (string, error) {
	v, err := goModDirective(filepath.Join(root, "go.mod"), "go")
	if err != nil {
		return "", fmt.Errorf("flowhost checkout %s: %w", root, err)
	}
	return v, nil
}

func goModDirective(gomod, directive string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == directive {
			return strings.Trim(fields[1], `"`), nil
		}
	}
	return "", fmt.Errorf("%s has no %s directive", gomod, directive)
}

// goRequires returns the checkout's requirements as lines of a require
// block, each marked indirect: a project's go.mod must list every module
// that provides a package of its build, the SDK's dependencies included,
// or go build asks for go mod tidy (which would need the network).
func goRequires(root string) (string, error) {
	gomod := filepath.Join(root, "go.mod")
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("flowhost checkout %s: %w", root, err)
	}
	var out strings.Builder
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case inBlock && len(fields) == 1 && fields[0] == ")":
			inBlock = false
			continue
		case len(fields) == 2 && fields[0] == "require" && fields[1] == "(":
			inBlock = true
			continue
		case len(fields) == 3 && fields[0] == "require":
			fields = fields[1:]
		case !inBlock || len(fields) != 2:
			continue
		}
		fmt.Fprintf(&out, "\t%s %s // indirect\n", fields[0], fields[1])
	}
	return strings.TrimRight(out.String(), "\n"), nil
}
