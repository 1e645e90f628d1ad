package connect

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/flowhost/flowhost/host/internal/testtls"
)

// An HTTP source with TLS serves HTTPS only: a client that trusts its
// certificate is served, a plain-HTTP client and one that does not trust
// the certificate are not, and nothing of theirs is accepted.
func TestHTTPSourceServesTLS(t *testing.T) {
	cert := testtls.New(t)
	h := startHTTPSource(t, HTTPSourceConfig{TLS: cert.ServerConfig(t)}, nil)
	require.True(t, strings.HasPrefix(h.url, "https://"))

	status, _, resp := postWith(t, cert.Client(), h.url, nil, "{\"payload\":1}\n{\"payload\":2}")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, 2, resp.Accepted)

	plain := "http://" + strings.TrimPrefix(h.url, "https://")
	res, err := http.Post(plain, "", strings.NewReader(`{"payload":3}`))
	if err == nil { // Go's TLS server answers a plain-HTTP request with a 400 of its own
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		require.Equal(t, http.StatusBadRequest, res.StatusCode)
		require.Contains(t, string(body), "HTTPS")
	}

	untrusting := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: x509.NewCertPool()}}}
	_, err = untrusting.Post(h.url, "", strings.NewReader(`{"payload":4}`))
	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, err, &unknown)

	require.Equal(t, []string{"1", "2"}, payloads(h.emitted()))
}

// With a bearer token, a request without it, with another scheme or with
// a wrong token gets 401 and is not read; the right token is served.
func TestHTTPSourceBearerToken(t *testing.T) {
	const token = "s3cret-token"
	h := startHTTPSource(t, HTTPSourceConfig{BearerToken: token}, nil)
	for _, tc := range []struct {
		name          string
		authorization string
		status        int
		err           string
	}{
		{"none", "", http.StatusUnauthorized, "missing bearer token: send the header Authorization: Bearer TOKEN"},
		{"basic", "Basic dXNlcjpwYXNz", http.StatusUnauthorized, "the Authorization header must be Bearer TOKEN"},
		{"wrong", "Bearer s3cret-tokem", http.StatusUnauthorized, "wrong bearer token"},
		{"prefix", "Bearer s3cret", http.StatusUnauthorized, "wrong bearer token"},
		{"longer", "Bearer s3cret-token2", http.StatusUnauthorized, "wrong bearer token"},
		{"right", "Bearer " + token, http.StatusOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			header := http.Header{}
			if tc.authorization != "" {
				header.Set("Authorization", tc.authorization)
			}
			before := len(h.emitted())
			status, respHeader, resp := postWith(t, http.DefaultClient, h.url, header, `{"payload":1}`)
			require.Equal(t, tc.status, status)
			require.Equal(t, tc.err, resp.Error)
			if tc.status == http.StatusUnauthorized {
				require.Equal(t, `Bearer realm="flowhost"`, respHeader.Get("WWW-Authenticate"))
				require.Len(t, h.emitted(), before)
			} else {
				require.Len(t, h.emitted(), before+1)
			}
		})
	}
}

// An HTTP sink takes TLS and a bearer token the same way.
func TestHTTPSinkServesTLSWithBearerToken(t *testing.T) {
	cert := testtls.New(t)
	sink, err := NewHTTPSink(HTTPSinkConfig{Addr: "127.0.0.1:0", Path: "/out", TLS: cert.ServerConfig(t), BearerToken: "tok"})
	require.NoError(t, err)
	defer sink.Close()
	url := "https://" + sink.Addr().String() + "/out?from=0"
	client := cert.Client()

	res, err := client.Get(url)
	require.NoError(t, err)
	var refused map[string]string
	require.NoError(t, json.NewDecoder(res.Body).Decode(&refused))
	res.Body.Close()
	require.Equal(t, http.StatusUnauthorized, res.StatusCode)
	require.Equal(t, "missing bearer token: send the header Authorization: Bearer TOKEN", refused["error"])

	require.NoError(t, sink.Write(context.Background(), []SinkRecord{{Stream: "s", MessageID: "m1", Payload: []byte(`{"a":1}`)}}))
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer tok")
	res, err = client.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	line, err := bufio.NewReader(res.Body).ReadString('\n')
	require.NoError(t, err)
	require.Contains(t, line, `"m1"`)
}
