package connect

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// KafkaConnection is how a Kafka source or sink reaches its cluster, with
// the secrets already read (the spec names only where they are).
type KafkaConnection struct {
	// Brokers are the host:port addresses to bootstrap from.
	Brokers []string
	// TLS, when set, connects with TLS.
	TLS *KafkaTLS
	// SASL, when set, authenticates.
	SASL *KafkaSASL
}

// KafkaTLS names the PEM files of a TLS connection; empty CAFile means the
// system's roots, empty CertFile and KeyFile no client certificate.
type KafkaTLS struct {
	CAFile, CertFile, KeyFile string
}

// KafkaSASL is a SASL mechanism (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)
// with its credentials.
type KafkaSASL struct {
	Mechanism, Username, Password string
}

// KafkaClientOpts returns the kgo options that connect to c: the seed
// brokers, a TLS dialer when c.TLS is set, a SASL mechanism when c.SASL
// is. It fails when a PEM file cannot be read or parsed, or the mechanism
// is unknown; it does not dial.
func KafkaClientOpts(c KafkaConnection) ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, errors.New("no brokers")
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Brokers...)}
	if t := c.TLS; t != nil {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.CAFile != "" {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				return nil, fmt.Errorf("tls.ca_file: %w", err)
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("tls.ca_file %s: no PEM certificate in it", t.CAFile)
			}
			cfg.RootCAs = pool
		}
		if t.CertFile != "" || t.KeyFile != "" {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("tls.cert_file, tls.key_file: %w", err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if s := c.SASL; s != nil {
		switch s.Mechanism {
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism()))
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism()))
		default:
			return nil, fmt.Errorf("sasl.mechanism %q is unknown; expected PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", s.Mechanism)
		}
	}
	return opts, nil
}
