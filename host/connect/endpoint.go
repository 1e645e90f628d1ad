package connect

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// listenEndpoint binds the TCP address of an HTTP source or sink and, with
// tlsCfg, serves TLS on it. Its error reads "listen ADDR: REASON", the
// reason being the operating system's ("address already in use") when
// there is one, so that a caller can put the endpoint's name in front.
func listenEndpoint(addr string, tlsCfg *tls.Config) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var sys *os.SyscallError
		if errors.As(err, &sys) {
			err = sys.Err
		} else if op := (*net.OpError)(nil); errors.As(err, &op) {
			err = op.Err
		}
		return nil, fmt.Errorf("listen %s: %w", addr, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// bearerRefusal says why r may not use an endpoint that takes token,
// or returns "" when it may (always, when token is empty). A request must
// carry "Authorization: Bearer TOKEN"; the tokens are compared in
// constant time (sameToken), so that the time of a refusal says nothing
// about how much of a guess was right.
func bearerRefusal(r *http.Request, token string) string {
	if token == "" {
		return ""
	}
	header := r.Header.Get("Authorization")
	got, ok := strings.CutPrefix(header, "Bearer ")
	switch {
	case header == "":
		return "missing bearer token: send the header Authorization: Bearer TOKEN"
	case !ok:
		return "the Authorization header must be Bearer TOKEN"
	case !sameToken(strings.TrimSpace(got), token):
		return "wrong bearer token"
	}
	return ""
}

// sameToken compares two tokens in constant time. They are hashed first
// because subtle.ConstantTimeCompare returns at once on a length mismatch,
// which would tell a guesser the token's length.
func sameToken(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}

// challengeBearer sets the header of a 401 answer to a request refused by
// bearerRefusal.
func challengeBearer(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="flowhost"`)
}
