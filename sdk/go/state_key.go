package flowhost

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// KeyFields are the values of a computation's group_by fields, decoded
// from the key text the host renders (a compact JSON array of the values
// in group_by order, see host/keys). Use [ParseKey] to get them.
type KeyFields struct {
	key    string
	names  []string
	values []json.RawMessage
}

// KeyError says why a key text cannot be read as the group_by fields asked
// for. Field is "" when the key as a whole is wrong.
type KeyError struct {
	// Key is the key text.
	Key string
	// Field is the group_by field concerned, or "".
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error reads `key ["o-17",3]: field "n": Msg` or `key ...: Msg`.
func (e *KeyError) Error() string {
	if e.Field == "" {
		return "key " + e.Key + ": " + e.Msg
	}
	return "key " + e.Key + ": field " + strconv.Quote(e.Field) + ": " + e.Msg
}

// ParseKey decodes key (Key.Key()) as the values of the group_by fields
// names, in the order the pipeline's group_by lists them. It fails with a
// *KeyError when the key is not a JSON array of exactly len(names) values;
// the unkeyed key "" is accepted only with no names.
func ParseKey(key string, names ...string) (KeyFields, error) {
	kf := KeyFields{key: key, names: names}
	if key == "" {
		if len(names) != 0 {
			return kf, &KeyError{Key: `""`, Msg: fmt.Sprintf("the key is empty (an unkeyed computation), expected %d group_by fields", len(names))}
		}
		return kf, nil
	}
	var values []json.RawMessage
	if err := json.Unmarshal([]byte(key), &values); err != nil || values == nil {
		return kf, &KeyError{Key: key, Msg: "not a JSON array of group_by values"}
	}
	if len(values) != len(names) {
		return kf, &KeyError{Key: key, Msg: fmt.Sprintf("has %d values, expected %d (group_by %q)", len(values), len(names), names)}
	}
	kf.values = values
	return kf, nil
}

func (kf KeyFields) raw(name string) (json.RawMessage, error) {
	if len(kf.values) != len(kf.names) {
		// What ParseKey returned with its error: names without values.
		return nil, &KeyError{Key: kf.key, Field: name, Msg: "the key did not parse (see ParseKey's error)"}
	}
	for i, n := range kf.names {
		if n == name {
			return kf.values[i], nil
		}
	}
	return nil, &KeyError{Key: kf.key, Field: name, Msg: fmt.Sprintf("not a group_by field (fields: %q)", kf.names)}
}

func (kf KeyFields) decode(name, want string, v any) error {
	raw, err := kf.raw(name)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return &KeyError{Key: kf.key, Field: name, Msg: "expected " + want + ", got " + string(raw)}
	}
	return nil
}

// Raw returns the field's value as JSON text.
func (kf KeyFields) Raw(name string) (json.RawMessage, error) { return kf.raw(name) }

// String returns a text field.
func (kf KeyFields) String(name string) (string, error) {
	var s *string
	if err := kf.decode(name, "a string", &s); err != nil {
		return "", err
	}
	if s == nil {
		return "", &KeyError{Key: kf.key, Field: name, Msg: "expected a string, got null"}
	}
	return *s, nil
}

// Int returns an integer field (the host writes integral numbers exactly).
func (kf KeyFields) Int(name string) (int64, error) {
	var n json.Number
	if err := kf.decode(name, "an integer", &n); err != nil {
		return 0, err
	}
	i, err := strconv.ParseInt(string(n), 10, 64)
	if err != nil {
		return 0, &KeyError{Key: kf.key, Field: name, Msg: "expected an int64 integer, got " + string(n)}
	}
	return i, nil
}

// Float returns a number field.
func (kf KeyFields) Float(name string) (float64, error) {
	var n json.Number
	if err := kf.decode(name, "a number", &n); err != nil {
		return 0, err
	}
	f, err := n.Float64()
	if err != nil {
		return 0, &KeyError{Key: kf.key, Field: name, Msg: "expected a float64 number, got " + string(n)}
	}
	return f, nil
}

// Bool returns a boolean field.
func (kf KeyFields) Bool(name string) (bool, error) {
	var b *bool
	if err := kf.decode(name, "a boolean", &b); err != nil {
		return false, err
	}
	if b == nil {
		return false, &KeyError{Key: kf.key, Field: name, Msg: "expected a boolean, got null"}
	}
	return *b, nil
}
