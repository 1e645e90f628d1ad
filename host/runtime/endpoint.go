package runtime

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/flowhost/flowhost/host/spec"
)

// WithInsecureListen lets HTTP sources and sinks without tls listen on
// addresses that are not loopback (flowhost run --insecure-listen).
// Without it such an endpoint is refused when the runtime is built: plain
// HTTP from the network would let anyone on the path read the records and
// the bearer token.
func WithInsecureListen() Option { return func(o *options) { o.insecureListen = true } }

// endpointSecurity is what an HTTP endpoint of the spec needs beyond its
// address: its TLS configuration and bearer token, each empty when the
// spec asks for none.
type endpointSecurity struct {
	tls   *tls.Config
	token string
}

// endpointSecurity checks the HTTP endpoint ep at spec path (as in
// "sources[0].http") against the listen rule, and loads its certificate
// and token. Its errors are located in the spec and start with what (as
// in `source "in"`).
func (r *Runtime) endpointSecurity(path, what string, ep *spec.HTTPEndpoint) (endpointSecurity, error) {
	var sec endpointSecurity
	what += ": "
	if ep.TLS == nil && !ep.Loopback() && !r.opts.insecureListen {
		return sec, r.pipe.ErrorAt(path+".listen",
			"%slisten %s is not a loopback address, and plain HTTP there would let the network read the records: give the endpoint tls (cert_file, key_file), listen on 127.0.0.1, or run with --insecure-listen to allow it",
			what, ep.Listen)
	}
	if t := ep.TLS; t != nil {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			return sec, r.pipe.ErrorAt(path+".tls", "%sloading the TLS certificate: %v", what, err)
		}
		sec.tls = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if a := ep.Auth; a != nil {
		switch {
		case a.BearerTokenFile != "":
			data, err := os.ReadFile(a.BearerTokenFile)
			if err != nil {
				return sec, r.pipe.ErrorAt(path+".auth.bearer_token_file", "%sreading the bearer token: %v", what, err)
			}
			if sec.token = strings.TrimSpace(string(data)); sec.token == "" {
				return sec, r.pipe.ErrorAt(path+".auth.bearer_token_file", "%sthe bearer token file %s is empty", what, a.BearerTokenFile)
			}
		case a.BearerTokenEnv != "":
			if sec.token = strings.TrimSpace(os.Getenv(a.BearerTokenEnv)); sec.token == "" {
				return sec, r.pipe.ErrorAt(path+".auth.bearer_token_env", "%sthe environment variable %s holding the bearer token is not set or empty", what, a.BearerTokenEnv)
			}
		}
	}
	return sec, nil
}

// endpointURL is the URL an endpoint serves at, for the log.
func endpointURL(sec endpointSecurity, addr, path string) string {
	scheme := "http"
	if sec.tls != nil {
		scheme = "https"
	}
	return fmt.Sprintf("%s://%s%s", scheme, addr, path)
}

// specIndex returns the index of the entry named name in a spec section, for
// error paths; -1 when there is none.
func specIndex[T any](entries []T, name func(*T) string, want string) int {
	for i := range entries {
		if name(&entries[i]) == want {
			return i
		}
	}
	return -1
}
