package host

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/opview"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/store"
)

// TestSavepointEndpoint drives the metrics server's savepoint endpoint as
// `flowhost savepoint create --addr` does, and with the requests it
// refuses.
func TestSavepointEndpoint(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "data"), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Bind("shape"))
	var mu sync.Mutex // the handler's goroutine reports, the test reads
	var reports []runtime.WorkProgress
	var forgotten []string
	srv := httptest.NewServer(savepointHandler(st,
		func(p runtime.WorkProgress) { mu.Lock(); reports = append(reports, p); mu.Unlock() },
		func(kind, name string) { mu.Lock(); forgotten = append(forgotten, kind+" "+name); mu.Unlock() }))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")

	for _, tc := range []struct {
		name, method, body string
		code               int
		want               string
	}{
		{"not a POST", http.MethodGet, "", http.StatusMethodNotAllowed, "use POST"},
		{"not JSON", http.MethodPost, "dir=/x", http.StatusBadRequest, "request body"},
		{"unknown field", http.MethodPost, `{"path":"/x"}`, http.StatusBadRequest, `unknown field "path"`},
		{"relative", http.MethodPost, `{"dir":"sp"}`, http.StatusBadRequest, `dir "sp": expected an absolute path`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, srv.URL+SavepointPath, strings.NewReader(tc.body))
			require.NoError(t, err)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			require.Equal(t, tc.code, resp.StatusCode)
			var e struct{ Error string }
			require.NoError(t, jsonDecode(resp, &e))
			require.Contains(t, e.Error, tc.want)
		})
	}

	remote := httptest.NewRequest(http.MethodPost, SavepointPath, strings.NewReader(`{"dir":"/tmp/x"}`))
	remote.RemoteAddr = "192.0.2.7:4000"
	rec := httptest.NewRecorder()
	savepointHandler(st, func(runtime.WorkProgress) {}, func(string, string) {}).ServeHTTP(rec, remote)
	require.Equal(t, http.StatusForbidden, rec.Code, "a client on another machine is refused")

	sp := filepath.Join(dir, "sp")
	got, err := RequestSavepoint(context.Background(), addr, sp)
	require.NoError(t, err)
	require.Equal(t, sp, got.Dir)
	require.Equal(t, "shape", got.Pipeline)
	require.Equal(t, st.Dir(), got.DataDir)
	_, err = store.ReadSavepoint(sp)
	require.NoError(t, err)
	mu.Lock()
	got2 := slices.Clone(reports)
	mu.Unlock()
	require.Len(t, got2, 2, "the refused requests report nothing")
	total := got2[0].Total
	require.Positive(t, total)
	require.Equal(t, []runtime.WorkProgress{
		{Kind: runtime.WorkSavepoint, Name: sp, Total: total},
		{Kind: runtime.WorkSavepoint, Name: sp, Done: total, Total: total, Finished: true},
	}, got2)

	_, err = RequestSavepoint(context.Background(), addr, sp)
	require.ErrorContains(t, err, "savepoint: savepoint directory "+sp+" is not empty", "the endpoint's error reaches the CLI")
	mu.Lock()
	require.Len(t, reports, 2, "a directory taken is refused before the savepoint starts")
	require.Empty(t, forgotten)
	mu.Unlock()

	// A stopped data directory: refused while the store is open, taken
	// once it is closed.
	_, err = CreateSavepoint(st.Dir(), filepath.Join(dir, "sp2"))
	require.ErrorContains(t, err, "the pipeline is running; take its savepoint through its metrics server with --addr")
	require.NoError(t, st.Close())
	_, err = CreateSavepoint(st.Dir(), filepath.Join(dir, "sp2"))
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(dir, "sp2", "db"))
	require.NoError(t, err)
}

func jsonDecode(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// FuzzParseSavepointRequest feeds arbitrary bodies to the savepoint
// endpoint's parser: it never panics, and a directory it accepts is an
// absolute, clean path.
func FuzzParseSavepointRequest(f *testing.F) {
	f.Add([]byte(`{"dir":"/tmp/sp"}`))
	f.Add([]byte(`{"dir":"sp"}`))
	f.Add([]byte(`{"dir":"/a/../b"}`))
	f.Add([]byte(`{"dir":"/x"} {"dir":"/y"}`))
	f.Add([]byte(`{"path":"/x"}`))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		dir, err := parseSavepointRequest(bytes.NewReader(b))
		if err != nil {
			return
		}
		if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
			t.Fatalf("accepted %q from %q", dir, b)
		}
	})
}

// TestRequestSavepointSendsToken takes a savepoint through a metrics
// server that requires a bearer token (run --metrics-token-file): without
// the token the request is refused with the server's reason, with it the
// savepoint is taken.
func TestRequestSavepointSendsToken(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "data"), store.Options{})
	require.NoError(t, err)
	defer st.Close()
	require.NoError(t, st.Bind("shape"))
	const token = "s3cret-token"
	srv := httptest.NewServer(opview.Protect(token, savepointHandler(st, func(runtime.WorkProgress) {}, func(string, string) {})))
	defer srv.Close()

	sp := filepath.Join(dir, "sp")
	_, err = RequestSavepoint(context.Background(), srv.URL, sp)
	require.ErrorContains(t, err, "missing bearer token")
	_, err = RequestSavepoint(context.Background(), srv.URL, sp, WithSavepointToken("wrong"))
	require.ErrorContains(t, err, "bad bearer token")
	_, err = os.Stat(sp)
	require.True(t, os.IsNotExist(err), "a refused request writes nothing")

	got, err := RequestSavepoint(context.Background(), strings.TrimPrefix(srv.URL, "http://"), sp,
		WithSavepointToken(token), WithSavepointHTTPClient(srv.Client()))
	require.NoError(t, err)
	require.Equal(t, sp, got.Dir)
	_, err = store.ReadSavepoint(sp)
	require.NoError(t, err)
}
