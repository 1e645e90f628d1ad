package runtime

import (
	"fmt"
	"os"
	"strings"

	"github.com/flowhost/flowhost/host/connect"
	"github.com/flowhost/flowhost/host/spec"
)

// kafkaConnection is KafkaConnection for a block of the runtime's spec.
func (r *Runtime) kafkaConnection(path string, c spec.KafkaConnection) (connect.KafkaConnection, error) {
	return KafkaConnection(r.pipe, path, c)
}

// KafkaConnection turns the connection fields of pipeline p's kafka block
// at path into the connector's, reading the SASL password from its file
// or environment variable and checking the TLS files; its errors point at
// the field in the spec.
func KafkaConnection(p *spec.Pipeline, path string, c spec.KafkaConnection) (connect.KafkaConnection, error) {
	conn := connect.KafkaConnection{Brokers: c.Brokers}
	if t := c.TLS; t != nil {
		conn.TLS = &connect.KafkaTLS{CAFile: t.CAFile, CertFile: t.CertFile, KeyFile: t.KeyFile}
	}
	if s := c.SASL; s != nil {
		var password string
		switch {
		case s.PasswordFile != "":
			data, err := os.ReadFile(s.PasswordFile)
			if err != nil {
				return conn, p.ErrorAt(path+".sasl.password_file", "%v", err)
			}
			if password = strings.TrimSpace(string(data)); password == "" {
				return conn, p.ErrorAt(path+".sasl.password_file", "the password file %s is empty", s.PasswordFile)
			}
		case s.PasswordEnv != "":
			if password = os.Getenv(s.PasswordEnv); password == "" {
				return conn, p.ErrorAt(path+".sasl.password_env", "the environment variable %s holding the password is not set or empty", s.PasswordEnv)
			}
		}
		conn.SASL = &connect.KafkaSASL{Mechanism: string(s.Mechanism), Username: s.Username, Password: password}
	}
	if _, err := connect.KafkaClientOpts(conn); err != nil {
		return conn, p.ErrorAt(path, "%v", err)
	}
	return conn, nil
}

// openKafkaSource builds the connector of a kafka source, continuing at
// resume (the offsets stored with the last committed record) when set.
func (r *Runtime) openKafkaSource(ss *spec.Source, resume []byte, reject func(connect.Rejection) error) (Source, error) {
	path := fmt.Sprintf("sources[%d].kafka", specIndex(r.pipe.Sources, func(s *spec.Source) string { return s.Name }, ss.Name))
	k := ss.Kafka
	conn, err := r.kafkaConnection(path, k.Connection())
	if err != nil {
		return nil, err
	}
	start := connect.KafkaStart{Kind: string(k.Start), Group: k.Group}
	if t, ok := k.Start.Time(); ok {
		start = connect.KafkaStart{Kind: "time", Time: t}
	}
	cfg := connect.KafkaSourceConfig{
		Conn: conn, Topic: k.Topic, Stream: ss.Stream, Partitions: ss.Partitions, Start: start,
		ReadUncommitted: k.Isolation == spec.IsolationReadUncommitted, Reject: reject, Resume: resume,
		Name: ss.Name, Group: k.Group, Metrics: r.metrics.kafka, Logger: r.log,
		Format: connect.SourceFormat(ss.Format), EventTime: eventTimeSource(ss.EventTime),
	}
	var backlog *workCounter
	cfg.Backlog = func(done, total int64, caughtUp bool) {
		if backlog == nil {
			backlog = r.work(WorkBacklog, ss.Name, total)
		}
		backlog.set(done, total, caughtUp)
	}
	return connect.NewKafkaSource(cfg)
}
