package spec

import "net"

// DefaultListenHost is the host of a listen address written without one.
const DefaultListenHost = "127.0.0.1"

// Loopback reports whether the endpoint listens on loopback interfaces
// only: its host is "localhost" or a loopback IP address. Any other name
// may resolve to a public address and counts as not loopback.
func (h *HTTPEndpoint) Loopback() bool {
	host, _, err := net.SplitHostPort(h.Listen)
	if err != nil {
		return false
	}
	if host == "" || host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// listenWithHost returns listen with DefaultListenHost when it has no host
// (listen is host:port; others are returned as they are).
func listenWithHost(listen string) string {
	if host, port, err := net.SplitHostPort(listen); err == nil && host == "" {
		return net.JoinHostPort(DefaultListenHost, port)
	}
	return listen
}

// complete fills in the host of a listen address without one and makes
// the endpoint's file paths absolute; h may be nil.
func (h *HTTPEndpoint) complete(resolve func(*string)) {
	if h == nil {
		return
	}
	h.Listen = listenWithHost(h.Listen)
	if h.TLS != nil {
		resolve(&h.TLS.CertFile)
		resolve(&h.TLS.KeyFile)
	}
	if h.Auth != nil && h.Auth.BearerTokenFile != "" {
		resolve(&h.Auth.BearerTokenFile)
	}
}
