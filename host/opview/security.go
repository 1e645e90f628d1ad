package opview

import (
	"crypto/tls"
	"fmt"
	"os"
	"strings"

	"github.com/flowhost/flowhost/host/spec"
)

// Security is how the metrics server (and so the page and the API) is
// exposed: the flags of flowhost run that concern it.
type Security struct {
	// CertFile and KeyFile, both or neither, serve HTTPS.
	CertFile, KeyFile string
	// TokenFile holds the bearer token every request must carry.
	TokenFile string
	// Insecure allows a bind that is not loopback without TLS and token.
	Insecure bool
}

// Listen is what Security resolves to for one address: the TLS
// configuration (nil: plain HTTP) and the bearer token ("" none).
type Listen struct {
	TLS   *tls.Config
	Token string
}

// Resolve checks addr against the rule HTTP sources follow
// (spec.HTTPEndpoint.Loopback): on loopback anything goes; elsewhere the
// server needs TLS and a bearer token, unless Insecure, because the page
// shows the pipeline's records' metadata and dead-letter causes and
// anyone on the path could read them. It loads the certificate and the
// token; its errors name the flag to give.
func (s Security) Resolve(addr string) (Listen, error) {
	var l Listen
	if (s.CertFile == "") != (s.KeyFile == "") {
		return l, fmt.Errorf("--metrics-tls-cert and --metrics-tls-key go together: give both or neither")
	}
	if s.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return l, fmt.Errorf("--metrics-tls-cert %s / --metrics-tls-key %s: %w", s.CertFile, s.KeyFile, err)
		}
		l.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	if s.TokenFile != "" {
		data, err := os.ReadFile(s.TokenFile)
		if err != nil {
			return l, fmt.Errorf("--metrics-token-file: %w", err)
		}
		if l.Token = strings.TrimSpace(string(data)); l.Token == "" {
			return l, fmt.Errorf("--metrics-token-file %s is empty", s.TokenFile)
		}
	}
	loopback := (&spec.HTTPEndpoint{Listen: addr}).Loopback()
	if !loopback && !s.Insecure && (l.TLS == nil || l.Token == "") {
		return l, fmt.Errorf("--metrics-addr %s is not a loopback address, and the page, the API and /metrics there would be open to the network: give --metrics-tls-cert, --metrics-tls-key and --metrics-token-file, listen on 127.0.0.1, or run with --insecure to allow it", addr)
	}
	return l, nil
}
