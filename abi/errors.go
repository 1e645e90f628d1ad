package abi

// Error is a violation of the envelope contract found by a decoder or a
// validator. Field locates it so that a bad guest can be fixed from the
// message alone; callers wrap it with the plugin's name (fmt.Errorf with
// %w keeps it reachable through errors.As).
type Error struct {
	// Field is the path of the offending value in the envelope, for
	// example "keys[3].emits[0].stream"; "" means the envelope as a whole.
	Field string
	// Msg says what is wrong with it.
	Msg string
}

// Error returns "Field: Msg", or Msg alone when Field is empty.
func (e *Error) Error() string {
	if e.Field == "" {
		return e.Msg
	}
	return e.Field + ": " + e.Msg
}
