package plugins

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestReadWasm(t *testing.T) {
	tests := []struct {
		name string
		wasm []byte
		// limit is Plugin.MaxWasmBytes; 0 keeps the default.
		limit int64
		// wantErr is the sentinel the error wraps, nil for success.
		wantErr error
		// wantMsg is the error text after "<wasm path>: ".
		wantMsg string
	}{
		{name: "empty module", wasm: emptyModule},
		{name: "module with a section", wasm: typeModule},
		{name: "module exactly at the limit", wasm: typeModule, limit: int64(len(typeModule))},
		{name: "empty file", wasm: nil, wantErr: ErrTruncated,
			wantMsg: "truncated WebAssembly binary: 0 bytes, the header alone is 8"},
		{name: "cut inside the header", wasm: emptyModule[:5], wantErr: ErrTruncated,
			wantMsg: "truncated WebAssembly binary: 5 bytes, the header alone is 8"},
		{name: "cut inside a section", wasm: typeModule[:len(typeModule)-2], wantErr: ErrTruncated,
			wantMsg: "truncated WebAssembly binary: section 1 (type) at offset 8 declares 4 bytes, only 2 remain"},
		{name: "cut inside a section size", wasm: append(append([]byte{}, emptyModule...), 0x0a, 0x80), wantErr: ErrTruncated,
			wantMsg: "truncated WebAssembly binary: the size of section 10 (code) at offset 8 is cut off"},
		{name: "malformed section size", wasm: append(append([]byte{}, emptyModule...), 0x00, 0xff, 0xff, 0xff, 0xff, 0x7f), wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: section 0 (custom) at offset 8 has a malformed size"},
		{name: "text format", wasm: []byte("(module\n  (func))\n"), wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: it starts with 28 6d 6f 64, a module starts with 00 61 73 6d (\\0asm); it looks like WebAssembly text (.wat), compile it with wat2wasm"},
		{name: "ELF executable", wasm: []byte("\x7fELF\x02\x01\x01"), wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: it starts with 7f 45 4c 46, a module starts with 00 61 73 6d (\\0asm); it is an ELF executable"},
		{name: "HTML error page", wasm: []byte("<!DOCTYPE html><title>404</title>"), wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: it starts with 3c 21 44 4f, a module starts with 00 61 73 6d (\\0asm); it looks like HTML or XML, perhaps an error page saved by a download"},
		{name: "two bytes of junk", wasm: []byte("hi"), wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: it starts with 68 69, a module starts with 00 61 73 6d (\\0asm)"},
		{name: "version 2", wasm: []byte{0x00, 0x61, 0x73, 0x6d, 0x02, 0x00, 0x00, 0x00}, wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: version 02 00 00 00, flowhost reads version 1 (01 00 00 00)"},
		{name: "component", wasm: []byte{0x00, 0x61, 0x73, 0x6d, 0x0d, 0x00, 0x01, 0x00}, wantErr: ErrNotWasm,
			wantMsg: "not a WebAssembly binary: it is a WebAssembly component; flowhost runs core modules"},
		{name: "larger than the limit", wasm: typeModule, limit: int64(len(typeModule)) - 1, wantErr: ErrTooLarge,
			wantMsg: "WebAssembly file too large: 14 bytes, the limit is 13 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := loadPlugin(t, writePlugin(t, t.TempDir(), "join", tt.wasm, ""))
			p.MaxWasmBytes = tt.limit
			data, err := p.ReadWasm()
			if tt.wantErr == nil {
				require.NoError(t, err)
				require.Equal(t, tt.wasm, data)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, p.WasmPath+": "+tt.wantMsg, err.Error())
			require.Nil(t, data)
		})
	}
}

func TestReadWasmChecksumMismatch(t *testing.T) {
	dir := writePlugin(t, t.TempDir(), "join", emptyModule, "")
	// Rebuild the module after the manifest recorded its checksum.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "join.wasm"), typeModule, 0o644))
	p := loadPlugin(t, dir)
	_, err := p.ReadWasm()
	var ce *ChecksumError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, ChecksumError{
		File:     filepath.Join(dir, "join.wasm"),
		Manifest: filepath.Join(dir, "plugin.yaml"),
		Want:     sha256Hex(emptyModule),
		Got:      sha256Hex(typeModule),
	}, *ce)
	require.Equal(t, ce.File+": sha256 mismatch: "+ce.Manifest+" says "+ce.Want+", the file has "+ce.Got, err.Error())
}

func TestReadWasmFileProblems(t *testing.T) {
	t.Run("missing", func(t *testing.T) {
		dir := writePlugin(t, t.TempDir(), "join", emptyModule, "")
		require.NoError(t, os.Remove(filepath.Join(dir, "join.wasm")))
		_, err := loadPlugin(t, dir).ReadWasm()
		require.ErrorIs(t, err, os.ErrNotExist)
		require.EqualError(t, err, filepath.Join(dir, "join.wasm")+" does not exist (named in "+filepath.Join(dir, "plugin.yaml")+")")
	})
	t.Run("a directory", func(t *testing.T) {
		dir := writePlugin(t, t.TempDir(), "join", emptyModule, "")
		wasm := filepath.Join(dir, "join.wasm")
		require.NoError(t, os.Remove(wasm))
		require.NoError(t, os.Mkdir(wasm, 0o755))
		_, err := loadPlugin(t, dir).ReadWasm()
		require.EqualError(t, err, wasm+" is a directory, not a file")
	})
	t.Run("symbolic link out of the plugin directory", func(t *testing.T) {
		root := t.TempDir()
		dir := writePlugin(t, filepath.Join(root, "join"), "join", emptyModule, "")
		outside := filepath.Join(root, "secret.wasm")
		require.NoError(t, os.WriteFile(outside, emptyModule, 0o644))
		wasm := filepath.Join(dir, "join.wasm")
		require.NoError(t, os.Remove(wasm))
		require.NoError(t, os.Symlink(outside, wasm))
		_, err := loadPlugin(t, dir).ReadWasm()
		require.ErrorIs(t, err, ErrOutsidePluginDir)
		require.ErrorContains(t, err, wasm+": path leads outside the plugin directory "+dir)
	})
	t.Run("symbolic link inside the plugin directory", func(t *testing.T) {
		dir := writePlugin(t, t.TempDir(), "join", typeModule, "")
		wasm := filepath.Join(dir, "join.wasm")
		require.NoError(t, os.Rename(wasm, filepath.Join(dir, "build.wasm")))
		require.NoError(t, os.Symlink("build.wasm", wasm))
		data, err := loadPlugin(t, dir).ReadWasm()
		require.NoError(t, err)
		require.Equal(t, typeModule, data)
	})
}

func TestChecksum(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ content, want string }{
		// Published SHA-256 test vectors.
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", abcSHA256},
	} {
		path := filepath.Join(dir, "f")
		require.NoError(t, os.WriteFile(path, []byte(tt.content), 0o644))
		got, err := Checksum(path)
		require.NoError(t, err)
		require.Equal(t, tt.want, got)
	}
	_, err := Checksum(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.ErrorContains(t, err, filepath.Join(dir, "missing"))
}

func TestUleb32(t *testing.T) {
	tests := []struct {
		in    []byte
		want  uint32
		wantN int
	}{
		{[]byte{0x00}, 0, 1},
		{[]byte{0x7f}, 127, 1},
		{[]byte{0x80, 0x01}, 128, 2},
		{[]byte{0xe5, 0x8e, 0x26}, 624485, 3}, // the example on Wikipedia's LEB128 page
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, 1<<32 - 1, 5},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0x10}, 0, -1}, // beyond 32 bits
		{[]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, 0, -1},
		{[]byte{0x80}, 0, 0},
		{nil, 0, 0},
	}
	for _, tt := range tests {
		v, n := uleb32(tt.in)
		require.Equal(t, tt.wantN, n, "% x", tt.in)
		require.Equal(t, tt.want, v, "% x", tt.in)
	}
}

func BenchmarkReadWasm(b *testing.B) {
	// A 4 MiB module: the header and one custom section.
	const payload = 4 << 20
	wasm := append([]byte{}, emptyModule...)
	wasm = append(wasm, 0x00, 0x80, 0x80, 0x80, 0x02) // custom section, size 4 MiB + 0
	wasm = append(wasm, 0x01, 'x')                    // name "x"
	wasm = append(wasm, make([]byte, payload-2)...)
	p := loadPlugin(b, writePlugin(b, b.TempDir(), "big", wasm, ""))
	b.SetBytes(int64(len(wasm)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.ReadWasm(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseManifest(b *testing.B) {
	data := []byte(fullManifest)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseManifest("plugin.yaml", data); err != nil {
			b.Fatal(err)
		}
	}
}
