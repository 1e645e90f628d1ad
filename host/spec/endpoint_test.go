package spec

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// A listen address without a host means 127.0.0.1, and the endpoint's file
// paths are made absolute like every other path of the spec.
func TestHTTPEndpointCompletion(t *testing.T) {
	for _, tc := range []struct {
		listen, want string
		loopback     bool
	}{
		{`":8080"`, "127.0.0.1:8080", true},
		{`":0"`, "127.0.0.1:0", true},
		{`"127.0.0.1:8080"`, "127.0.0.1:8080", true},
		{`"127.3.4.5:80"`, "127.3.4.5:80", true},
		{`"[::1]:8080"`, "[::1]:8080", true},
		{`"localhost:8080"`, "localhost:8080", true},
		{`"0.0.0.0:8080"`, "0.0.0.0:8080", false},
		{`"[::]:8080"`, "[::]:8080", false},
		{`"10.1.2.3:8080"`, "10.1.2.3:8080", false},
		{`"ingest.example.com:443"`, "ingest.example.com:443", false},
	} {
		t.Run(tc.listen, func(t *testing.T) {
			src := "name: p\nsources: [{name: in, type: http, stream: s, http: {listen: " + tc.listen + "}}]\n" +
				"sinks: [{name: out, type: http, streams: [s], http: {listen: " + tc.listen + ", path: /out}}]\n"
			p, err := Parse(filepath.Join("/specs", "p.yaml"), []byte(src))
			require.NoError(t, err)
			require.Equal(t, tc.want, p.Sources[0].HTTP.Listen)
			require.Equal(t, tc.want, p.Sinks[0].HTTP.Listen)
			require.Equal(t, tc.loopback, p.Sources[0].HTTP.Loopback())
		})
	}

	p, err := Parse(filepath.Join("/specs", "p.yaml"), []byte("name: p\nsources:\n  - name: in\n    type: http\n    stream: s\n    http:\n      listen: \"0.0.0.0:8443\"\n      tls: {cert_file: tls/cert.pem, key_file: /etc/key.pem}\n      auth: {bearer_token_file: token}\n"))
	require.NoError(t, err)
	h := p.Sources[0].HTTP
	require.Equal(t, &EndpointTLS{CertFile: "/specs/tls/cert.pem", KeyFile: "/etc/key.pem"}, h.TLS)
	require.Equal(t, &EndpointAuth{BearerTokenFile: "/specs/token"}, h.Auth)
}

// ":8080" and "127.0.0.1:8080" are the same endpoint.
func TestHTTPEndpointsClashWithTheDefaultHost(t *testing.T) {
	_, err := Parse("p.yaml", []byte("name: p\nsources:\n  - {name: a, type: http, stream: s, http: {listen: \":80\"}}\n  - {name: b, type: http, stream: t, http: {listen: \"127.0.0.1:80\"}}\n"))
	require.EqualError(t, err, "p.yaml:4:44: sources[1].http: 127.0.0.1:80/ is already served by the HTTP endpoint at 3:44")
}

func TestHTTPEndpointErrors(t *testing.T) {
	for _, tc := range []struct {
		name, http string
		want       []string
	}{
		{"a port alone", `{listen: »"8080"}`,
			[]string{`sources[0].http.listen: expected host:port such as "127.0.0.1:8080"; got "8080"`}},
		{"a port number", `{listen: »8080}`,
			[]string{`sources[0].http.listen: expected a string; got integer 8080 (quote it to make it a string)`}},
		{"tls without a key", `{listen: ":1", tls: »{cert_file: c.pem}}`,
			[]string{`sources[0].http.tls.key_file: required; expected a file path`}},
		{"tls misspelled", `{listen: ":1", tls: {cert_file: c.pem, »keyfile: k.pem}}`,
			[]string{`sources[0].http.tls.keyfile: unknown field; did you mean "key_file"?`}},
		{"auth with nothing", `{listen: ":1", auth: »{}}`,
			[]string{`sources[0].http.auth: expected bearer_token_file (a file holding the token) or bearer_token_env (an environment variable holding it); the token itself never goes in the spec`}},
		{"auth with both", `{listen: ":1", auth: {bearer_token_file: t, bearer_token_env: »T}}`,
			[]string{`sources[0].http.auth.bearer_token_env: give bearer_token_file or bearer_token_env, not both`}},
		{"an inline token", `{listen: ":1", auth: {»bearer_token: s3cret}}`,
			[]string{`sources[0].http.auth.bearer_token: unknown field; expected one of bearer_token_file, bearer_token_env`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, positions := unmark(t, "name: p\nsources: [{name: in, type: http, stream: s, http: "+tc.http+"}]\n")
			_, err := Parse("pipeline.yaml", []byte(src))
			list := errorList(t, err)
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Path + ": " + e.Message
			}
			require.Equal(t, tc.want, got)
			require.Len(t, positions, len(list))
			for i, e := range list {
				require.Equal(t, positions[i], position{e.Line, e.Column}, "position of %q", got[i])
			}
		})
	}
}
