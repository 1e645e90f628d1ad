package conformance_test

import (
	"github.com/flowhost/flowhost/sdk/assemblyscript"
	"github.com/flowhost/flowhost/sdk/c"
	"github.com/flowhost/flowhost/sdk/conformance"
	"github.com/flowhost/flowhost/sdk/rust"
)

// The other SDKs' conformance guests, each built by its own package.
func init() {
	guests = append(guests,
		conformance.Guest{Name: "c", Build: c.BuildConformanceGuest},
		conformance.Guest{Name: "rust", Build: rust.BuildConformanceGuest},
		conformance.Guest{Name: "assemblyscript", Build: assemblyscript.BuildConformanceGuest},
	)
}
