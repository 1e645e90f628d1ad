package plugins

import (
	"errors"
	"testing"

	"github.com/flowhost/flowhost/abi"
)

// FuzzParseManifest checks that no input makes ParseManifest panic, that
// every error it returns is a positioned *ManifestError for the file it
// was given, and that every manifest it accepts obeys the manifest rules.
func FuzzParseManifest(f *testing.F) {
	f.Add([]byte(validManifest))
	f.Add([]byte(fullManifest))
	f.Add([]byte(""))
	f.Add([]byte("- a\n- b\n"))
	f.Add([]byte("name: x\n---\nname: y\n"))
	f.Add([]byte("base: &b {window: 1m}\nparameters:\n  <<: *b\nname: *missing\n"))
	f.Add([]byte("kinds: [transform\n"))
	f.Add([]byte("name: !custom x\nabi: !!str 1\nlimits: {memory_pages: 0x10, max_response_bytes: \"1 TiB\"}\n"))
	f.Add([]byte("? [a, b]\n: c\n"))
	f.Add([]byte("name: &a x\nversion: *a\nkinds: &k [*k]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const file = "fuzz/plugin.yaml"
		m, err := ParseManifest(file, data)
		if err != nil {
			if m != nil {
				t.Fatalf("manifest returned with an error: %v", err)
			}
			errs := manifestErrors(t, err)
			for _, e := range errs {
				if e.File != file || e.Line < 1 || e.Column < 1 || e.Msg == "" {
					t.Fatalf("error without a position: %#v", e)
				}
			}
			return
		}
		if problems := m.problems(file); len(problems) > 0 {
			t.Fatalf("accepted manifest breaks the rules: %v", errors.Join(problems...))
		}
		if m.ABI != abi.Version || len(m.SHA256) != 64 {
			t.Fatalf("accepted manifest is incomplete: %+v", m)
		}
	})
}
