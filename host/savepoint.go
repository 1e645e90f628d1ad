package host

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/flowhost/flowhost/host/progress"
	"github.com/flowhost/flowhost/host/runtime"
	"github.com/flowhost/flowhost/host/spec"
	"github.com/flowhost/flowhost/host/store"
)

// SavepointPath is where the metrics server of a running pipeline takes a
// savepoint: POST a JSON object {"dir": "/absolute/path"}; the answer is
// the savepoint's description (200) or {"error": "..."} (400 for a bad
// request, 403 for a client on another machine, 409 when the directory is
// taken, 500 otherwise).
const SavepointPath = "/savepoint"

// Savepoint is the description of a savepoint the host took.
type Savepoint struct {
	// Dir is the savepoint directory.
	Dir string `json:"dir"`
	store.SavepointInfo
}

// ResolveDataDir returns dir, or the default data directory of the
// pipeline in specPath when dir is empty.
func ResolveDataDir(dir, specPath string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if specPath == "" {
		return "", errors.New("give --data-dir, or -f with the pipeline spec to use its default data directory")
	}
	pipe, err := spec.ParseFile(specPath)
	if err != nil {
		return "", err
	}
	return store.DefaultDataDir(pipe.Name)
}

// CreateSavepoint writes a savepoint of the stopped pipeline whose data
// directory is dataDir into dest (absent or empty). It refuses a
// directory that holds no store, creating nothing, and one that a running
// pipeline holds (take that one through its metrics server:
// [RequestSavepoint]).
func CreateSavepoint(dataDir, dest string) (Savepoint, error) {
	ok, err := store.HasStore(dataDir)
	if err != nil {
		return Savepoint{}, err
	}
	if !ok {
		return Savepoint{}, fmt.Errorf("savepoint: %s holds no flowhost store (no pipeline ran with this --data-dir)", dataDir)
	}
	st, err := store.Open(dataDir, store.Options{})
	if errors.Is(err, store.ErrLocked) {
		return Savepoint{}, fmt.Errorf("savepoint: %w: the pipeline is running; take its savepoint through its metrics server with --addr (its --metrics-addr)", err)
	}
	if err != nil {
		return Savepoint{}, err
	}
	defer st.Close()
	info, err := st.Savepoint(dest)
	return Savepoint{Dir: dest, SavepointInfo: info}, err
}

// SavepointOption configures [RequestSavepoint].
type SavepointOption func(*savepointRequest)

type savepointRequest struct {
	token  string
	client *http.Client
}

// WithSavepointToken sends token as the bearer token (Authorization:
// Bearer TOKEN), which a pipeline run with --metrics-token-file requires
// on every request to its metrics address; an empty token sends none.
func WithSavepointToken(token string) SavepointOption {
	return func(r *savepointRequest) { r.token = token }
}

// WithSavepointHTTPClient makes the request with c, such as one that
// trusts the pipeline's self-signed https certificate
// ([opview.HTTPClient]); the default is [http.DefaultClient].
func WithSavepointHTTPClient(c *http.Client) SavepointOption {
	return func(r *savepointRequest) { r.client = c }
}

// RequestSavepoint asks the running pipeline whose metrics server listens
// on addr (its --metrics-addr: HOST:PORT, or an http:// or https:// URL)
// for a savepoint into dest, a directory on its machine (made absolute
// here).
func RequestSavepoint(ctx context.Context, addr, dest string, opts ...SavepointOption) (Savepoint, error) {
	o := savepointRequest{client: http.DefaultClient}
	for _, opt := range opts {
		opt(&o)
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return Savepoint{}, err
	}
	body, err := json.Marshal(map[string]string{"dir": abs})
	if err != nil {
		return Savepoint{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	base := addr
	if !strings.Contains(addr, "://") {
		base = "http://" + addr
	}
	url := strings.TrimRight(base, "/") + SavepointPath
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return Savepoint{}, fmt.Errorf("savepoint: --addr %q: %w", addr, err)
	}
	if o.token != "" {
		req.Header.Set("Authorization", "Bearer "+o.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := o.client.Do(req)
	if err != nil {
		return Savepoint{}, fmt.Errorf("savepoint: no running pipeline answers at --addr %s (its --metrics-addr): %w", addr, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Savepoint{}, fmt.Errorf("savepoint: reading the answer of %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct{ Error string }
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return Savepoint{}, fmt.Errorf("savepoint: %s", e.Error)
		}
		return Savepoint{}, fmt.Errorf("savepoint: %s answered %s (is it a flowhost with a data directory?)", url, resp.Status)
	}
	var sp Savepoint
	if err := json.Unmarshal(data, &sp); err != nil {
		return Savepoint{}, fmt.Errorf("savepoint: the answer of %s: %w", url, err)
	}
	return sp, nil
}

// savepointHandler serves [SavepointPath] for the running store st,
// reporting each savepoint's progress to report (kind savepoint, named by
// its directory): the store's disk bytes as the total, done at once when
// the checkpoint is written (it is one pebble checkpoint, which tells no
// progress of its own). A savepoint that fails is given to forget, so
// that it does not show as never finishing.
func savepointHandler(st *store.Store, report func(runtime.WorkProgress), forget func(kind, name string)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := func(code int, v any) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_ = json.NewEncoder(w).Encode(v)
		}
		fail := func(code int, format string, args ...any) {
			answer(code, map[string]string{"error": fmt.Sprintf(format, args...)})
		}
		// The endpoint writes into the host's file system: whatever
		// address the metrics server is bound to, only a client on the
		// same machine may ask.
		if host, _, err := net.SplitHostPort(r.RemoteAddr); err != nil || !net.ParseIP(host).IsLoopback() {
			fail(http.StatusForbidden, "%s is served to clients on this machine (127.0.0.1) only", SavepointPath)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			fail(http.StatusMethodNotAllowed, "%s %s: use POST with {\"dir\": \"/absolute/path\"}", r.Method, SavepointPath)
			return
		}
		dir, err := parseSavepointRequest(io.LimitReader(r.Body, 64<<10))
		if err != nil {
			fail(http.StatusBadRequest, "%v", err)
			return
		}
		// A directory that is taken is refused before anything starts:
		// reporting it would overwrite the progress of the savepoint
		// that took it.
		entries, rerr := os.ReadDir(dir)
		started := errors.Is(rerr, fs.ErrNotExist) || rerr == nil && len(entries) == 0
		total := int64(st.DiskBytes())
		if started {
			report(runtime.WorkProgress{Kind: runtime.WorkSavepoint, Name: dir, Total: total})
		}
		info, err := st.Savepoint(dir)
		if err != nil {
			if started {
				forget(runtime.WorkSavepoint, dir)
			}
		} else {
			report(runtime.WorkProgress{Kind: runtime.WorkSavepoint, Name: dir, Done: total, Total: total, Finished: true})
		}
		if err != nil {
			code := http.StatusInternalServerError
			if errors.Is(err, store.ErrNotEmpty) {
				code = http.StatusConflict
			}
			fail(code, "%v", err)
			return
		}
		answer(http.StatusOK, Savepoint{Dir: dir, SavepointInfo: info})
	})
}

// restoreSavepoint copies the savepoint cfg.FromSavepoint into the run's
// data directory before the run opens it (see [RunConfig.FromSavepoint]).
//
// rep, when set, shows the copy's progress in bytes; the operator view is
// not up yet during it.
func restoreSavepoint(pipe *spec.Pipeline, cfg *RunConfig, log *slog.Logger, rep *progress.Reporter) error {
	dir := cfg.DataDir
	if dir == "" {
		var err error
		if dir, err = store.DefaultDataDir(pipe.Name); err != nil {
			return err
		}
	}
	var counter *progress.Counter
	var show func(done, total int64)
	if rep != nil {
		show = func(done, total int64) {
			if counter == nil {
				counter = rep.Counter("restore savepoint (bytes)", total)
			}
			counter.SetTotal(total)
			counter.Set(done)
			if done >= total {
				counter.Done()
			}
		}
	}
	info, err := store.RestoreSavepointProgress(cfg.FromSavepoint, dir, cfg.ReplaceDataDir, show)
	if err != nil {
		return fmt.Errorf("--from-savepoint: %w", err)
	}
	log.Info("restored a savepoint: the run starts from its state", "savepoint", cfg.FromSavepoint,
		"created", info.Created.Format(time.RFC3339), "taken_from", info.DataDir, "data_dir", dir)
	return nil
}

// parseSavepointRequest reads the body of a savepoint request: one JSON
// object {"dir": "/absolute/path"} and nothing else.
func parseSavepointRequest(body io.Reader) (string, error) {
	var req struct {
		Dir string `json:"dir"`
	}
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", fmt.Errorf("request body: %v; expected {\"dir\": \"/absolute/path\"}", err)
	}
	if dec.More() {
		return "", errors.New(`request body: more than one JSON value; expected {"dir": "/absolute/path"}`)
	}
	if !filepath.IsAbs(req.Dir) {
		return "", fmt.Errorf("dir %q: expected an absolute path", req.Dir)
	}
	return filepath.Clean(req.Dir), nil
}
