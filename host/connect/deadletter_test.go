package connect

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// deadLines decodes a dead letter's JSON lines.
func deadLines(t testing.TB, data []byte) []map[string]any {
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "%s", sc.Bytes())
		out = append(out, m)
	}
	return out
}

func TestDeadLetterEncodings(t *testing.T) {
	var buf bytes.Buffer
	d := NewDeadLetter(&buf)
	d.now = func() time.Time { return time.Unix(1714557600, 5).In(time.FixedZone("X", 3600)) }
	require.NoError(t, d.Reject(Rejection{Origin: "a.jsonl:1:3", Stage: StageIngest, Err: errors.New("bad"), Record: []byte(`{"x": [1, 2]}`)}))
	require.NoError(t, d.Reject(Rejection{Origin: "a.jsonl:2:1", Stage: StageIngest, Err: errors.New("worse"), Record: []byte("not <json>\n")}))
	require.NoError(t, d.Reject(Rejection{Origin: "a.jsonl:3", Stage: StageKey, Record: []byte{0xff, 0x00}}))
	require.Equal(t, uint64(3), d.Count())
	require.NoError(t, d.Close())

	want := `{"time":"2024-05-01T10:00:00.000000005Z","origin":"a.jsonl:1:3","stage":"ingest","error":"bad","record":{"x":[1,2]}}
{"time":"2024-05-01T10:00:00.000000005Z","origin":"a.jsonl:2:1","stage":"ingest","error":"worse","record":"not \u003cjson\u003e\n","record_encoding":"text"}
{"time":"2024-05-01T10:00:00.000000005Z","origin":"a.jsonl:3","stage":"key","error":"unknown error","record":"/wA=","record_encoding":"base64"}
`
	require.Equal(t, want, buf.String())
}

func TestDeadLetterFileConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dead.jsonl")
	d, err := OpenDeadLetter(path)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				require.NoError(t, d.Reject(Rejection{Origin: fmt.Sprintf("g%d:%d", g, i), Stage: StageGuest, Err: errors.New("trap"), Record: []byte(`{}`)}))
			}
		})
	}
	wg.Wait()
	require.Equal(t, uint64(200), d.Count())
	require.NoError(t, d.Close())
	require.NoError(t, d.Close())
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	lines := deadLines(t, data)
	require.Len(t, lines, 200)
	seen := map[any]bool{}
	for _, l := range lines {
		seen[l["origin"]] = true
	}
	require.Len(t, seen, 200)

	// Reopening appends.
	d, err = OpenDeadLetter(path)
	require.NoError(t, err)
	require.NoError(t, d.Reject(Rejection{Origin: "again", Stage: StageIngest, Err: errors.New("x")}))
	require.NoError(t, d.Close())
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	require.Len(t, deadLines(t, data), 201)
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDeadLetterWriteFails(t *testing.T) {
	d := NewDeadLetter(failingWriter{})
	err := d.Reject(Rejection{Origin: "x", Stage: StageIngest, Err: errors.New("bad")})
	require.EqualError(t, err, "dead letter: disk full")
	require.Equal(t, uint64(0), d.Count())
}

func TestPartitioner(t *testing.T) {
	_, err := NewPartitioner(0, nil)
	require.EqualError(t, err, "partitions must be at least 1, not 0")
	_, err = NewPartitioner(2, []string{"a..b"})
	require.ErrorContains(t, err, "partition_by: ")

	rr, err := NewPartitioner(3, nil)
	require.NoError(t, err)
	var got []int
	for range 7 {
		p, err := rr.Partition([]byte("anything"))
		require.NoError(t, err)
		got = append(got, p)
	}
	require.Equal(t, []int{0, 1, 2, 0, 1, 2, 0}, got)

	byKey, err := NewPartitioner(7, []string{"id"})
	require.NoError(t, err)
	for _, payload := range []string{`{"id":"o-1"}`, `{"id":42}`, `{"x":1,"id":[1,"a"]}`} {
		var v struct{ ID json.RawMessage }
		require.NoError(t, json.Unmarshal([]byte(payload), &v))
		h := fnv.New64a()
		h.Write([]byte("[" + string(v.ID) + "]"))
		p, err := byKey.Partition([]byte(payload))
		require.NoError(t, err)
		require.Equal(t, int(h.Sum64()%7), p, payload)
		// Equal keys, different spellings: same partition.
		p2, err := byKey.Partition([]byte(` {"id":` + string(v.ID) + `, "other": true}`))
		require.NoError(t, err)
		require.Equal(t, p, p2)
	}
	_, err = byKey.Partition([]byte(`{"x":1}`))
	require.ErrorContains(t, err, `payload lacks group_by field "id"`)
}
