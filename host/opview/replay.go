package opview

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/flowhost/flowhost/ordering"
)

// ReplayID is the idempotency key a replayed dead letter is sent with:
// the computation that refused it and the message's original id, read
// from the dead letter's origin ("COMPUTATION <- STREAM ID"). An HTTP
// source with a data directory accepts an id once, so a dead letter
// replayed twice reaches the pipeline once; "" when the origin names no
// message (a record a source's connector could not read).
func ReplayID(d DeadLetter) string {
	comp, id := refused(d)
	if id == "" {
		return ""
	}
	return "dead-letter:" + comp + ":" + id
}

// ReplayParent is the id of the message d's computation refused, read
// from its origin: a replayed dead letter's message has it as its
// parent, so that its lineage (the parents of what it becomes) reaches
// back to the original. "" when the origin names no message.
func ReplayParent(d DeadLetter) string {
	_, id := refused(d)
	return id
}

// refused reads the computation and the refused message's id from d's
// origin ("COMPUTATION <- STREAM ID").
func refused(d DeadLetter) (comp, id string) {
	comp, rest, ok := strings.Cut(d.Origin, " <- ")
	if !ok {
		return "", ""
	}
	_, id, ok = strings.Cut(rest, " ")
	if !ok {
		return "", ""
	}
	return comp, id
}

// Replayable reports whether d can be replayed, and why not: it must name
// a computation and its message, and hold the record as JSON.
func Replayable(d DeadLetter) error {
	switch {
	case ReplayID(d) == "":
		return fmt.Errorf("line %d: origin %q names no computation's message (a record a source could not read is not replayed: fix it at its source)", d.Line, d.Origin)
	case !validParent(ReplayParent(d)):
		return fmt.Errorf("line %d: origin %q: %q is not a message id", d.Line, d.Origin, ReplayParent(d))
	case d.RecordEncoding != "" || len(d.Record) == 0:
		return fmt.Errorf("line %d: the record is not JSON (%s): an HTTP source takes JSON payloads", d.Line, d.RecordEncoding)
	}
	return nil
}

func validParent(id string) bool {
	_, err := ordering.ParseMessageID(id)
	return err == nil
}

// replayLine is one record line of an HTTP source's body.
type replayLine struct {
	ID      string          `json:"id"`
	Parents []string        `json:"parents"`
	Payload json.RawMessage `json:"payload"`
}

// replayChunk bounds the records of one request, so that a body stays
// below an HTTP source's default size limit.
const replayChunk = 1000

// Replay posts letters to the HTTP source at url (token: its bearer
// token, "" none), each with its record as payload, [ReplayID] as id and
// [ReplayParent] as its one parent, in chunks the source accepts whole or not at all. It returns how many
// were accepted; on an error, those of the chunks before were.
func Replay(ctx context.Context, client *http.Client, url, token string, letters []DeadLetter) (int, error) {
	sent := 0
	for start := 0; start < len(letters); start += replayChunk {
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		for _, d := range letters[start:min(len(letters), start+replayChunk)] {
			if err := Replayable(d); err != nil {
				return sent, err
			}
			if err := enc.Encode(replayLine{ID: ReplayID(d), Parents: []string{ReplayParent(d)}, Payload: d.Record}); err != nil {
				return sent, err
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, &body)
		if err != nil {
			return sent, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			return sent, fmt.Errorf("replaying to %s: %w", url, err)
		}
		answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return sent, fmt.Errorf("replaying to %s: %w", url, err)
		}
		var a struct {
			Accepted int    `json:"accepted"`
			Error    string `json:"error"`
		}
		_ = json.Unmarshal(answer, &a)
		if resp.StatusCode != http.StatusOK {
			return sent, fmt.Errorf("replaying to %s: %s: %s (nothing of this request was accepted; replaying again is safe)", url, resp.Status, strings.TrimSpace(string(answer)))
		}
		sent += a.Accepted
	}
	return sent, nil
}
